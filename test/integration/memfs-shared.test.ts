// The default memfs mount (a worker per CPU, every worker a view of one shared state,
// lib/fs/memfs-state.ts) stays one filesystem on every CPU, whatever one CPU does:
// - a real-time busy loop pinned to CPU 1 while CPU 0 creates, renames and unlinks: afterwards
//   callers on every CPU are served (issue 29's reproduction: it used to evict CPU 1's copy and
//   answer EIO there for good). 60 s, as the issue says. Note: at 15 s (this test's first
//   length) the old replica design's 32 MiB log did not fill on the 2-CPU dev VM, so the test
//   also passed on it (measured 2026-12-06); it guards the behaviour, the RSS test below is the
//   one that tells the designs apart. The replica design's failure mode (log, eviction) no
//   longer exists in the code.
// - two processes pinned to different CPUs hammering the same names, zero cache lifetimes: then
//   every CPU sees the same tree, sizes, link counts, contents and xattrs, also after
//   drop_caches; a block written on one CPU is read back current on the other every time;
// - stress-ng's file-system stressors (a representative subset, --verify);
// - daemon RSS with 100 k files: at most 1.3× that of one thread (`--workers 1`).
// Every process that drives the mount is separate from the daemon and pinned with taskset or
// sched_setaffinity.
//
// The RT busy loop starves CPU 1 (95 % of it, the kernel's RT throttling leaves the rest): run
// this file under the exclusive lock (`flock -x /tmp/fuse-uring-global.lock`).

import { describe, expect } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  PYTHON, REPO, cleanupAfterEach, dropCaches, fmt, fuseTest, makeMountpoint, readStats, sh, shOk, sleep, spawnBg, startDaemon, transportHooks,
  type Stats,
} from "../helpers/index.ts";

const CPUS = availableParallelism();
const FIX = join(REPO, "test", "fixtures");
type Thread = { thread: string; requests: number };
const onCpu = (cpu: number, script: string, args: string[]) => shOk(`taskset -c ${cpu} sh -c '${script}' sh "$@"`, args);
const requestsOf = (s: Stats, thread: string) => (s.threads as Thread[]).find((t) => t.thread === thread)?.requests ?? 0;

/** A create → rename → unlink loop for `secs` seconds on `cpu` (python: one process, no fork per step). */
function metadataLoop(cpu: number, dir: string, secs: number) {
  const code = `
import os, sys, time
d, end, n = sys.argv[1], time.time() + float(sys.argv[2]), 0
while time.time() < end:
    a, b = "%s/a%d" % (d, n), "%s/b%d" % (d, n)
    os.close(os.open(a, os.O_CREAT | os.O_WRONLY, 0o644))
    os.rename(a, b)
    os.unlink(b)
    n += 1
print(n)`;
  return spawnBg(["taskset", "-c", String(cpu), PYTHON, "-c", code, dir, String(secs)], { timeoutMs: (secs + 60) * 1000 });
}

/** Create, list, read and unlink a file as a caller pinned to `cpu`; returns what it saw. */
async function servedOn(cpu: number, mnt: string): Promise<string> {
  return onCpu(cpu, 'echo "from $2" > "$1/probe$2" && ls "$1" | grep -c "^probe$2\\$" && cat "$1/probe$2" && rm "$1/probe$2" && ls "$1" | grep -c "^probe$2\\$" || true', [mnt, String(cpu)]);
}

describe("default memfs mount: one shared state on every CPU", () => {
  transportHooks("uring");
  cleanupAfterEach();

  const SECS = 60;
  const rtName =
    CPUS < 2
      ? "one CPU: no second CPU to starve; checks the one-thread plan serves create/rename/unlink and callers afterwards"
      : `an RT busy loop pinned to CPU 1 for ${SECS} s while CPU 0 creates/renames/unlinks: afterwards callers on every CPU are served, nothing evicted`;
  fuseTest(rtName, async () => {
    const mnt = makeMountpoint();
    const stats = `${mnt}.stats.json`;
    const d = await startDaemon(["--transport", "uring", "--workers", "auto", "--stats-file", stats], { mnt });
    if (CPUS < 2) {
      expect(d.readyLine).not.toContain("worker threads");
      const loop = metadataLoop(0, d.mnt, 3);
      const r = await loop.done;
      expect(r.code, fmt(r)).toBe(0);
      expect(await servedOn(0, d.mnt)).toBe("1\nfrom 0\n0\n");
      expect(await d.stop("SIGTERM")).toBe(0);
      return;
    }
    expect(d.readyLine).toContain(`${Math.min(CPUS, 8)} worker threads`);
    await shOk('mkdir "$1/loop"', [d.mnt]);
    // This process (the test) stays off CPU 1 while the busy loop owns it, so it can end the loop.
    const mine = await sh(`taskset -a -p -c 0 ${process.pid}`);
    expect(mine.code, fmt(mine)).toBe(0);
    const hog = spawnBg(["chrt", "-f", "50", "taskset", "-c", "1", "sh", "-c", "while :; do :; done"], { timeoutMs: (SECS + 60) * 1000, clientCgroup: false });
    try {
      await sleep(200);
      const rt = await sh(`chrt -p ${hog.proc.pid}`);
      expect(rt.stdout, fmt(rt)).toContain("SCHED_FIFO");
      const loop = metadataLoop(0, `${d.mnt}/loop`, SECS);
      const r = await loop.done;
      expect(r.code, fmt(r) + d.stderr().slice(-2000)).toBe(0);
      expect(Number(r.stdout.trim())).toBeGreaterThan(1000);
    } finally {
      hog.kill("SIGKILL");
      await hog.done;
      await sh(`taskset -a -p -c 0-${CPUS - 1} ${process.pid}`);
    }
    expect(hog.exited).toBe(true);
    // Every CPU's callers: create, readdir, read, unlink. And CPU 1's requests went to CPU 1's worker.
    const before = await readStats(stats);
    for (let cpu = 0; cpu < Math.min(CPUS, 8); cpu++) expect(await servedOn(cpu, d.mnt)).toBe(`1\nfrom ${cpu}\n0\n`);
    expect(await onCpu(1, 'ls -A "$1/loop" | wc -l', [d.mnt])).toBe("0\n");
    const after = await readStats(stats, { until: (s) => requestsOf(s, "worker 1") > requestsOf(before, "worker 1") });
    expect(requestsOf(after, "worker 1")).toBeGreaterThan(requestsOf(before, "worker 1"));
    expect(d.stderr()).not.toMatch(/evicted|BUG|fail-stop|EIO/i);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, (SECS + 180) * 1000); // the loop, the mount, the probes on every CPU and the stats wait

  const twoCpus = CPUS >= 2 ? "two processes on CPUs 0 and 1" : "two processes (one CPU: both on CPU 0)";
  fuseTest(`${twoCpus} hammer the same names with zero TTLs: every CPU then sees the same tree, also after drop_caches; writes read back current across CPUs`, async () => {
    const c1 = CPUS >= 2 ? 1 : 0;
    const d = await startDaemon(["--transport", "uring", "--workers", "auto", "--entry-ttl", "0", "--attr-ttl", "0"]);
    await shOk('mkdir "$1/h"', [d.mnt]);
    const hammers = [0, c1].map((cpu, i) =>
      spawnBg(["taskset", "-c", String(cpu), PYTHON, join(FIX, "hammer-names.py"), `${d.mnt}/h`, "8", String(i + 1)], { timeoutMs: 90_000 }));
    const results = await Promise.all(hammers.map((h) => h.done));
    for (const r of results) {
      expect(r.code, fmt(r) + d.stderr().slice(-2000)).toBe(0);
      expect(Number(/ops=(\d+)/.exec(r.stdout)?.[1])).toBeGreaterThan(500);
    }
    const snap = (cpu: number) => shOk(`taskset -c ${cpu} ${PYTHON} ${join(FIX, "tree-snapshot.py")} "$1"`, [`${d.mnt}/h`]);
    const s0 = await snap(0);
    expect(s0.split("\n").length).toBeGreaterThan(2);
    expect(await snap(c1)).toBe(s0);
    await dropCaches();
    expect(await snap(c1)).toBe(s0);
    expect(await snap(0)).toBe(s0);
    // A block written on one CPU is read back current on the other, 400 times (O_DIRECT: the daemon's bytes).
    const rb = await shOk(`${PYTHON} ${join(FIX, "cross-cpu-readback.py")} "$1/rb" 400 0 ${c1}`, [d.mnt]);
    expect(rb.trim()).toBe("rounds=400");
    expect(d.stderr()).not.toMatch(/evicted|BUG/);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 180_000);

  const stressNg = existsSync("/usr/bin/stress-ng");
  fuseTest(
    stressNg
      ? "stress-ng dir, dirmany, rename, link, mknod, open, io, mmap, fcntl --verify, 3 s each, on the default mount: all pass"
      : "stress-ng is not installed (scripts/setup.sh installs it): FAILS until it is",
    async () => {
      expect(stressNg).toBe(true);
      const d = await startDaemon(["--transport", "uring", "--workers", "auto"]);
      const failed: string[] = [];
      for (const s of ["dir", "dirmany", "rename", "link", "mknod", "open", "io", "mmap", "fcntl"]) {
        const r = await sh(`cd "$1" && mkdir -p "s-${s}" && stress-ng --${s} 2 --verify --timeout 3s --temp-path "$1/s-${s}" --metrics-brief 2>&1`, [d.mnt], { timeoutMs: 120_000 });
        // stress-ng exits non-zero when a stressor (or its --verify) failed.
        if (r.code !== 0 || !r.stdout.includes("successful run completed")) failed.push(`${s}: exit ${r.code}\n${r.stdout.slice(-1500)}`);
      }
      expect(failed).toEqual([]);
      expect(d.stderr()).not.toMatch(/evicted|BUG/);
      expect(await d.stop("SIGTERM")).toBe(0);
    },
    300_000,
  );

  fuseTest(`daemon RSS with 100 k files: the default plan (${Math.min(CPUS, 8)} workers) at most 1.3× one thread (--workers 1)`, async () => {
    const rss: Record<string, number> = {};
    for (const workers of ["1", "auto"]) {
      const d = await startDaemon(["--transport", "uring", "--workers", workers]);
      const code = `
import os, sys
d = sys.argv[1]
for i in range(0, 100000, 1000):
    sub = "%s/d%d" % (d, i // 1000)
    os.mkdir(sub)
    for k in range(i, i + 1000):
        os.close(os.open("%s/file-%06d" % (sub, k), os.O_CREAT | os.O_WRONLY, 0o644))`;
      const r = await sh(`${PYTHON} -c '${code}' "$1"`, [d.mnt], { timeoutMs: 300_000 });
      expect(r.code, fmt(r)).toBe(0);
      expect((await shOk('ls "$1/d99" | wc -l', [d.mnt])).trim()).toBe("1000");
      await sleep(500);
      const status = readFileSync(`/proc/${d.proc.pid}/status`, "utf8");
      rss[workers] = Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
      expect(await d.stop("SIGTERM")).toBe(0);
    }
    console.log(`memfs RSS with 100k files: --workers 1 ${rss["1"]!.toFixed(0)} MiB, default ${rss.auto!.toFixed(0)} MiB (${(rss.auto! / rss["1"]!).toFixed(2)}×)`);
    expect(rss.auto! / rss["1"]!).toBeLessThanOrEqual(1.3);
  }, 600_000);
});
