// `--workers N`: the ring queues served from N threads, each with its own copy of a replicable
// filesystem script (test/fixtures/replicated-fs.ts). Every worker serves its CPUs' requests;
// a handler awaiting a timer does not stall others; every way the mount can end leaves no hung
// caller and no dead mount; filesystems that keep per-thread state are refused clearly.

import { describe, expect } from "bun:test";
import { join } from "node:path";
import {
  BUN, CLI, REPO, cleanupAfterEach, noneInDState, fmt, fuseTest, isMounted, makeMountpoint, readStats, run, sh, shOk, sleep, spawnBg, startDaemon,
  transportHooks,
} from "../helpers/index.ts";

const FIXTURE = join(REPO, "test", "fixtures", "replicated-fs.ts");
const scriptCommand = (script: string) => (mnt: string, args: string[]) => [BUN, CLI, "mount", script, mnt, ...args];

function statsPath(mnt: string): string {
  return join(mnt + ".stats.json");
}

describe("--workers 2 over uring", () => {
  transportHooks("uring");
  cleanupAfterEach();

  fuseTest("each worker serves the requests of its CPUs' queues; the main thread only INIT", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: scriptCommand(FIXTURE) });
    expect(d.readyLine).toContain("2 worker threads");
    for (const cpu of ["0", "1"]) {
      expect(await shOk(`taskset -c ${cpu} cat "$1/thread"`, [d.mnt])).toBe("worker\n");
      await shOk(`taskset -c ${cpu} dd if="$1/data" of=/dev/null bs=4k count=500 iflag=direct status=none`, [d.mnt]);
    }
    // bytes are what every copy computes
    const head = await shOk(`dd if="$1/data" bs=1 skip=300 count=4 status=none | od -An -tu1`, [d.mnt]);
    expect(head.trim().split(/\s+/).map(Number)).toEqual([44, 45, 46, 47]);
    const s = await readStats(stats, { until: (x) => (x.threads as { requests: number }[]).filter((t) => t.requests >= 500).length >= 2 });
    const threads = s.threads as { thread: string; requests: number; wakeups: number; enters: number }[];
    expect(threads.map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    expect(threads[1]!.requests).toBeGreaterThanOrEqual(500);
    expect(threads[2]!.requests).toBeGreaterThanOrEqual(500);
    expect(Number(s.ringRequests)).toBeGreaterThanOrEqual(1000);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("a handler awaiting a timer does not stall other requests on the same worker", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE) });
    const slow = spawnBg(["taskset", "-c", "0", "cat", `${d.mnt}/slow`], { timeoutMs: 10_000 });
    await sleep(50);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) expect(await shOk(`taskset -c 0 cat "$1/thread"`, [d.mnt])).toBe("worker\n");
    const fast = Date.now() - t0;
    const r = await slow.done;
    expect(r.stdout).toBe("slow\n");
    // Five reads finished while the slow one was still waiting for its 300 ms timer.
    expect(fast).toBeLessThan(300 * 5);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  for (const how of ["unmount", "SIGTERM", "kill -9", "fusectl abort"] as const) {
    fuseTest(`${how} under load: callers end, nothing stays mounted`, async () => {
      const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE) });
      const clients = ["0", "1"].map((cpu) =>
        spawnBg(["taskset", "-c", cpu, "fio", "--name=c", `--filename=${d.mnt}/data`, "--rw=randread", "--bs=4k", "--direct=1",
          "--ioengine=sync", "--time_based", "--runtime=4", "--size=64M", "--readonly"], { timeoutMs: 60_000 }));
      await sleep(1000);
      if (how === "unmount") await run(["umount", "-l", d.mnt], { timeoutMs: 10_000 });
      else if (how === "SIGTERM") d.proc.kill("SIGTERM");
      else if (how === "kill -9") d.proc.kill("SIGKILL");
      else await sh(`echo 1 > /sys/fs/fuse/connections/${d.connId}/abort`);
      const ended = await Promise.all(clients.map((c) => Promise.race([c.done.then(() => true), sleep(20_000).then(() => false)])));
      expect(noneInDState(clients.map((c) => c.proc.pid))).toBe(true);
      expect(ended).toEqual([true, true]);
      const exit = await d.waitExit(15_000);
      expect(exit.exited).toBe(true);
      if (how === "SIGTERM" || how === "unmount") expect(exit.code).toBe(0);
      if (isMounted(d.mnt)) {
        const r = await run([BUN, CLI, "unmount", d.mnt], { timeoutMs: 10_000 });
        expect(r.code, fmt(r)).toBe(0);
      }
      expect(isMounted(d.mnt)).toBe(false);
    }, 90_000);
  }

  fuseTest("filesystems with per-thread state are refused with the reason", async () => {
    const mnt = makeMountpoint();
    const memfs = await run([BUN, CLI, "mount", "--memfs", mnt, "--workers", "2"], { timeoutMs: 15_000 });
    expect(memfs.code).toBe(2);
    expect(memfs.stderr).toContain("--workers needs a filesystem script that declares replicable: true");
    const script = await run([BUN, CLI, "mount", join(REPO, "examples", "hello.ts"), mnt, "--workers", "2"], { timeoutMs: 15_000 });
    expect(script.code).toBe(1);
    expect(script.stderr).toContain("replicable: true");
    expect(isMounted(mnt)).toBe(false);
  }, 60_000);
});
