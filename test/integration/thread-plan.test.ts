// The thread plan (lib/threads/plan.ts) on a real mount: workers only on the CPUs the daemon may
// run on (its affinity mask, `taskset`), every queue still served (callers on other CPUs use the
// mount too), and no worker at all when INIT falls back to the classic transport.

import { describe, expect } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { cleanupAfterEach, fuseTest, makeMountpoint, readStats, shOk, startDaemon, transportHooks, type Stats } from "../helpers/index.ts";
import { possibleCpus } from "../../lib/transport/uring.ts";

interface ThreadRow { thread: string; requests: number; cpus?: number[] }
const cpus = possibleCpus();
const multi = cpus > 1 ? "" : " (one possible CPU: only the single-thread case)";

/** Cpus_allowed_list of every thread of a process, as the kernel reports it. */
function threadAffinity(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8"))?.[1] ?? "?");
}

/** Bun Worker threads of a process (their thread name is "Worker"). */
function workerThreads(pid: number): number {
  return readdirSync(`/proc/${pid}/task`).filter((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim() === "Worker";
    } catch {
      return false;
    }
  }).length;
}

/** Create, read and list from every CPU (each CPU's queue). */
async function traffic(mnt: string): Promise<void> {
  for (let cpu = 0; cpu < cpus; cpu++) {
    await shOk(`taskset -c ${cpu} sh -c 'echo hi > "$1/f${cpu}" && cat "$1/f${cpu}" && ls "$1" >/dev/null' sh "$1"`, [mnt]);
  }
}

describe("thread plan", () => {
  transportHooks("uring");
  cleanupAfterEach();

  fuseTest(`taskset -c 0: auto runs one thread; every CPU's callers are served${multi}`, async () => {
    const mnt = makeMountpoint();
    const d = await startDaemon(["--transport", "uring", "--stats-file", mnt + ".stats.json"], { mnt, prefix: ["taskset", "-c", "0"] });
    expect(d.readyLine).not.toContain("worker threads");
    await traffic(d.mnt);
    const s = await readStats(mnt + ".stats.json", { until: (x) => Number(x.replies) >= 3 * cpus });
    expect(s.workerMode).toBe("single");
    expect((s.threads as ThreadRow[]).map((t) => t.thread)).toEqual(["main"]);
    expect(await d.stop("SIGTERM")).toBe(0);
  });

  if (cpus > 1) {
    fuseTest("taskset -c 0 --workers 2: both workers run on CPU 0 only, and CPU 1's queue is served", async () => {
      const mnt = makeMountpoint();
      const stats = mnt + ".stats.json";
      const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, prefix: ["taskset", "-c", "0"] });
      expect(d.readyLine).toContain("2 worker threads, copies");
      await traffic(d.mnt);
      const s: Stats = await readStats(stats, { until: (x) => (x.threads as ThreadRow[]).filter((t) => t.thread.startsWith("worker") && t.requests > 0).length === 2 });
      const workers = (s.threads as ThreadRow[]).filter((t) => t.thread.startsWith("worker"));
      expect(workers.map((w) => w.cpus)).toEqual([[0], [0]]);
      // No thread of the daemon may run anywhere but CPU 0.
      expect(new Set(threadAffinity(d.proc.pid))).toEqual(new Set(["0"]));
      expect(await d.stop("SIGTERM")).toBe(0);
    });

    fuseTest("--workers 2 without taskset: contiguous blocks, worker w pinned to CPU w's block", async () => {
      const mnt = makeMountpoint();
      const stats = mnt + ".stats.json";
      const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt });
      await traffic(d.mnt);
      const s = await readStats(stats, { until: (x) => (x.threads as ThreadRow[]).filter((t) => t.thread.startsWith("worker") && t.requests > 0).length === 2 });
      const blocks = (s.threads as ThreadRow[]).filter((t) => t.thread.startsWith("worker")).map((w) => w.cpus);
      const half = Math.ceil(cpus / 2);
      expect(blocks).toEqual([Array.from({ length: half }, (_, i) => i), Array.from({ length: cpus - half }, (_, i) => half + i)]);
      expect(await d.stop("SIGTERM")).toBe(0);
    });
  }
});

describe("thread plan when INIT falls back to classic", () => {
  transportHooks("uring");
  cleanupAfterEach();

  // An io_uring setup flag the kernel does not know: the workers start, their rings fail
  // (EINVAL), INIT falls back to /dev/fuse, and the workers are stopped: no copy keeps running.
  fuseTest("rings that cannot be set up: classic, and no worker keeps running (--workers 2)", async () => {
    const mnt = makeMountpoint();
    const d = await startDaemon(["--workers", "2", "--ring-flags", String(1 << 24), "--stats-file", mnt + ".stats.json"], { mnt });
    expect(d.transport).toBe("classic");
    expect(d.readyLine).toContain("EINVAL");
    let left = workerThreads(d.proc.pid);
    for (let i = 0; i < 30 && left > 0; i++) {
      await Bun.sleep(100);
      left = workerThreads(d.proc.pid);
    }
    expect(left).toBe(0);
    await traffic(d.mnt);
    const s = await readStats(mnt + ".stats.json", { until: (x) => Number(x.replies) >= 3 * cpus });
    expect(s.workerMode).toBe("single");
    expect((s.threads as ThreadRow[]).map((t) => t.thread)).toEqual(["main"]);
    expect(await d.stop("SIGTERM")).toBe(0);
  });

  fuseTest("--transport classic --workers 2: no worker starts", async () => {
    const mnt = makeMountpoint();
    const d = await startDaemon(["--transport", "classic", "--workers", "2", "--stats-file", mnt + ".stats.json"], { mnt });
    expect(workerThreads(d.proc.pid)).toBe(0);
    await traffic(d.mnt);
    const s = await readStats(mnt + ".stats.json", { until: (x) => Number(x.replies) >= 3 * cpus });
    expect([s.transport, s.workerMode]).toEqual(["classic", "single"]);
    expect((s.threads as ThreadRow[]).map((t) => t.thread)).toEqual(["main"]);
    expect(await d.stop("SIGTERM")).toBe(0);
  });
});
