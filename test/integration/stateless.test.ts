// paths()/tree() scripts that declare `threads: "stateless"`: every worker thread loads the
// script itself and runs its own PathFS over one node table in SharedArrayBuffers
// (lib/path/nodes-shared.ts). Separate client processes pinned to each CPU (taskset, or a python
// client that moves itself between CPUs while a file is open) must get the same answers
// whichever worker serves them, with zero cache lifetimes so every step reaches the daemon;
// the stats must show every worker serving requests. (The speed-up on a CPU-heavy handler is
// measured by bench/burn-paths.sh, not asserted here.)

import { describe, expect } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, cleanupAfterEach, dropCaches, fuseTest, readStats, scratchDirs, shOk, spawnBg, startDaemon, transportHooks, type Daemon, type Stats,
} from "../helpers/index.ts";

const scratch = scratchDirs("fuse-uring-stateless-");
type Thread = { thread: string; requests: number };
const threadsOf = (s: Stats) => s.threads as Thread[];
/** Both workers answered at least `n` requests. */
const workersServed = (n: number) => (s: Stats) => threadsOf(s).filter((t) => t.thread.startsWith("worker") && t.requests >= n).length >= 2;

/** `fuse-uring mount SCRIPT MNT --workers 2 --entry-ttl 0 --attr-ttl 0 … -- SCRIPT_ARGS`. */
function mountScript(script: string, scriptArgs: string[] = []) {
  return (mnt: string, args: string[]) => [BUN, CLI, "mount", join(REPO, script), mnt, ...args, ...(scriptArgs.length ? ["--", ...scriptArgs] : [])];
}

const on = (cpu: number, script: string, mnt: string) => shOk(`taskset -c ${cpu} sh -c '${script}' sh "$1"`, [mnt]);

/**
 * The same sequence on any read-write mount: each step on one CPU, checked from the other.
 * Returns what the mount shows at the end, from both CPUs.
 */
async function crossCpuSteps(mnt: string): Promise<void> {
  await on(0, 'echo hello > "$1/a" && mkdir "$1/d" && echo inner > "$1/d/f"', mnt);
  for (const cpu of [0, 1]) {
    expect(await on(cpu, 'cat "$1/a" "$1/d/f"', mnt)).toBe("hello\ninner\n");
    expect(await on(cpu, 'stat -c %s "$1/a"', mnt)).toBe("6\n");
  }
  // Node ids agree: the inode number seen on each CPU is the same.
  expect(await on(0, 'stat -c %i "$1/d/f"', mnt)).toBe(await on(1, 'stat -c %i "$1/d/f"', mnt));
  await on(1, 'mv "$1/d" "$1/e" && echo more >> "$1/a" && mv "$1/a" "$1/e/a2"', mnt);
  for (const cpu of [0, 1]) {
    expect(await on(cpu, 'ls "$1" "$1/e"', mnt)).toBe(`${mnt}:\ne\n\n${mnt}/e:\na2\nf\n`);
    expect(await on(cpu, 'cat "$1/e/a2"; test -e "$1/a" || echo gone', mnt)).toBe("hello\nmore\ngone\n");
  }
  // A file written on one CPU is read back current on the other, every time.
  for (let i = 0; i < 20; i++) {
    await on(i % 2, `echo v${i} > "$1/e/f"`, mnt);
    expect(await on((i + 1) % 2, 'cat "$1/e/f"', mnt)).toBe(`v${i}\n`);
  }
  await dropCaches();
  expect(await on(1, 'cat "$1/e/f" "$1/e/a2"', mnt)).toBe("v19\nhello\nmore\n");
  // A process that moves to the other CPU while files are open: its handles (opened by one
  // worker) are served by the other, and closed there exactly once.
  const moved = await shOk(`${PYTHON} - "$1" <<'PY'
import os, sys
m = sys.argv[1]
os.sched_setaffinity(0, {0})
fd = os.open(m + "/e/moving", os.O_RDWR | os.O_CREAT, 0o644)
dfd = os.open(m + "/e", os.O_RDONLY | os.O_DIRECTORY)
os.write(fd, b"cpu0 ")
os.sched_setaffinity(0, {1})
os.write(fd, b"cpu1\\n")
size = os.fstat(fd).st_size
names = sorted(os.listdir(dfd))
os.close(fd)
os.close(dfd)
print(size, " ".join(names))
PY`, [mnt]);
  expect(moved).toBe("10 a2 f moving\n");
  expect(await on(0, 'cat "$1/e/moving"', mnt)).toBe("cpu0 cpu1\n");
  await on(0, 'rm "$1/e/moving" "$1/e/f"', mnt);
  await on(1, 'rm "$1/e/a2" && rmdir "$1/e"', mnt);
  for (const cpu of [0, 1]) expect(await on(cpu, 'ls -A "$1"', mnt)).toBe("");
}

/** Descriptors the daemon holds on files under `dir` (a backed open file that was never closed). */
function fdsUnder(d: Daemon, dir: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${d.proc.pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${d.proc.pid}/fd/${fd}`);
      if (target.startsWith(dir + "/")) out.push(target);
    } catch {}
  }
  return out;
}

describe('threads: "stateless" scripts on every CPU (--workers 2 over uring)', () => {
  transportHooks("uring");
  cleanupAfterEach();
  const args = (stats: string) => ["--transport", "uring", "--workers", "2", "--entry-ttl", "0", "--attr-ttl", "0", "--stats-file", stats];

  fuseTest("examples/mirror.ts: the same answers from both CPUs, files served natively, every worker serving", async () => {
    const tmp = scratch();
    const src = join(tmp, "src");
    mkdirSync(src);
    const stats = join(tmp, "stats.json");
    const d = await startDaemon(args(stats), { command: mountScript("examples/mirror.ts", [src]) });
    expect(d.readyLine).toContain("2 worker threads, copies");
    await crossCpuSteps(d.mnt);
    expect(readdirSync(src)).toEqual([]);
    // Data went through the shim (backed()), never through a READ/WRITE handler.
    const s = await readStats(stats, { until: workersServed(20) });
    expect(threadsOf(s).map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    expect(Number(s.nativeWriteBytes)).toBeGreaterThan(0);
    expect(fdsUnder(d, src)).toEqual([]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("examples/shared-notes.ts: a read-write filesystem in SQLite, the same answers from both CPUs", async () => {
    const tmp = scratch();
    const db = join(tmp, "notes.sqlite");
    const stats = join(tmp, "stats.json");
    const d = await startDaemon(args(stats), { command: mountScript("examples/shared-notes.ts", [db]) });
    expect(d.readyLine).toContain("2 worker threads, copies");
    await crossCpuSteps(d.mnt);
    const s = await readStats(stats, { until: workersServed(20) });
    expect(threadsOf(s).filter((t) => t.thread.startsWith("worker")).every((t) => t.requests >= 20)).toBe(true);
    // State lives in the database: a new mount of it sees what the last one left.
    await on(0, 'echo kept > "$1/k"', d.mnt);
    expect(await d.stop("SIGTERM")).toBe(0);
    const again = await startDaemon(args(join(tmp, "stats2.json")), { command: mountScript("examples/shared-notes.ts", [db]) });
    expect(await on(1, 'cat "$1/k"', again.mnt)).toBe("kept\n");
    expect(await again.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("examples/shared-notes.ts: two processes on different CPUs hammering the same names see one tree, no handler fails", async () => {
    const tmp = scratch();
    const d = await startDaemon(args(join(tmp, "stats.json")), { command: mountScript("examples/shared-notes.ts", [join(tmp, "notes.sqlite")]) });
    const hammer = (cpu: number) =>
      spawnBg(["taskset", "-c", String(cpu), "sh", "-c", `for i in $(seq 100); do
        echo "${cpu} $i" > "$0/x"; cat "$0/x"; mv "$0/x" "$0/y"; mkdir "$0/d"; echo z > "$0/d/f"; mv "$0/d" "$0/e"
        truncate -s 1 "$0/y"; rm -f "$0/e/f" "$0/y"; rmdir "$0/e"; ls "$0"; stat "$0/y"
      done >/dev/null 2>&1; exit 0`, d.mnt], { timeoutMs: 60_000 });
    const runs = [hammer(0), hammer(1)];
    for (const r of runs) expect((await r.done).code).toBe(0);
    await dropCaches();
    const listing = (cpu: number) => on(cpu, 'cd "$1" && find . | sort && find . -type f -exec cat {} +', d.mnt);
    const seen = await listing(0);
    expect(await listing(1)).toBe(seen);
    // Races between the two only ever lose with an errno (ENOENT, EEXIST, ENOTEMPTY), never EIO.
    expect(d.stderr()).not.toContain("handler for");
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("a CPU-heavy READ handler (bench/fs/burn-paths.ts): both workers run it under load from both CPUs", async () => {
    const tmp = scratch();
    const stats = join(tmp, "stats.json");
    const d = await startDaemon(args(stats), { command: mountScript("bench/fs/burn-paths.ts", ["--size", String(8 << 20), "--burn-us", "20"]) });
    const clients = [0, 1].map((cpu) =>
      spawnBg(["taskset", "-c", String(cpu), "fio", "--name=c", `--filename=${d.mnt}/f.${cpu}`, "--rw=randread", "--bs=4k", "--direct=1",
        "--ioengine=psync", "--number_ios=400", "--size=8M", "--readonly"], { timeoutMs: 60_000 }));
    for (const c of clients) expect((await c.done).code).toBe(0);
    const s = await readStats(stats, { until: workersServed(400) });
    const workers = threadsOf(s).filter((t) => t.thread.startsWith("worker"));
    expect(workers.map((t) => t.requests >= 400)).toEqual([true, true]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("without the declaration a paths() script stays on one thread, as before", async () => {
    const tmp = scratch();
    const stats = join(tmp, "stats.json");
    const d = await startDaemon(["--transport", "uring", "--stats-file", stats], { command: mountScript("bench/fs/burn-paths.ts", ["--threads", "single", "--burn-us", "0"]) });
    expect(d.readyLine).not.toContain("worker threads");
    expect(await shOk('cat "$1/f.0" | wc -c', [d.mnt])).toBe(`${64 << 20}\n`);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("a hot reload (--watch) swaps every worker to the new version; node ids stay", async () => {
    const tmp = scratch();
    const script = join(tmp, "fs.ts");
    const version = (text: string) =>
      `import { paths } from ${JSON.stringify(`${REPO}/lib/index.ts`)};\n` +
      `export default () => paths({ getattr: (p) => (p === "/" ? { type: "dir" } : p === "/v" ? { type: "file", size: ${text.length} } : null),\n` +
      `  readdir: () => ["v"], read: (_p, off, n) => ${JSON.stringify(text)}.slice(off, off + n) }, { threads: "stateless" });\n`;
    writeFileSync(script, version("one\n"));
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--entry-ttl", "3600", "--attr-ttl", "3600"], {
      command: (mnt, a) => [BUN, CLI, "mount", "--watch", script, mnt, ...a],
    });
    expect(d.readyLine).toContain("2 worker threads, copies");
    const ino = await on(0, 'stat -c %i "$1/v"', d.mnt);
    for (const cpu of [0, 1]) expect(await on(cpu, 'cat "$1/v"', d.mnt)).toBe("one\n");
    writeFileSync(script, version("two!\n"));
    const deadline = Date.now() + 15_000;
    while (!d.stderr().includes("(version 2)") && Date.now() < deadline) await Bun.sleep(50);
    expect(d.stderr()).toContain("(version 2)");
    for (const cpu of [0, 1]) expect(await on(cpu, 'cat "$1/v"', d.mnt)).toBe("two!\n");
    expect(await on(1, 'stat -c %i "$1/v"', d.mnt)).toBe(ino);
    expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    void readFileSync;
  }, 90_000);
});
