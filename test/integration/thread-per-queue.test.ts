// Thread per queue: with `--workers` = possible CPUs every ring serves one queue, and its owner
// does every native transfer synchronously (pread/pwrite, like libfuse), even 1 MiB ones; a
// ring that serves several queues keeps large transfers asynchronous (READ_FIXED/WRITE_FIXED).
// FUSE_URING_NATIVE_SYNC_MAX overrides. Proven with the shim's counters (fixedIo, nativeSync).
// Workers are pinned to their queues' CPUs (lib/transport/affinity.ts).

import { describe, expect } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, CLI, REPO, cleanupAfterEach, fuseTest, makeMountpoint, readStats, scratchDirs, sha256sum, shOk, startDaemon, transportHooks, type Stats } from "../helpers/index.ts";
import { possibleCpus } from "../../lib/transport/uring.ts";

const FIXTURE = join(REPO, "test", "fixtures", "backed-replicated-fs.ts");
const scratch = scratchDirs("fuse-uring-tpq-");
const MiB = 1 << 20;

interface ThreadRow { thread: string; requests: number; cpus?: number[] }

/** Cpus_allowed_list of every thread of a process, as the kernel reports it. */
function threadAffinity(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const m = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8"));
    return m ? m[1]! : "?";
  });
}

async function run1MiBTraffic(workers: number, env: Record<string, string> = {}): Promise<Stats> {
  const dir = scratch();
  const backing = join(dir, "backing");
  const data = new Uint8Array(8 * MiB);
  for (let i = 0; i < data.length; i += 4096) data[i] = (i / 4096) & 0xff;
  writeFileSync(backing, data);
  const expected = await sha256sum(backing);
  const mnt = makeMountpoint();
  const stats = mnt + ".stats.json";
  const d = await startDaemon(["--transport", "uring", "--workers", String(workers), "--stats-file", stats], {
    mnt, command: (m, args) => [BUN, CLI, "mount", FIXTURE, m, ...args], env: { BACKING_FILE: backing, ...env },
  });
  for (let cpu = 0; cpu < possibleCpus(); cpu++) {
    // 1 MiB O_DIRECT reads and writes from every CPU, so every queue sees large transfers.
    await shOk(`taskset -c ${cpu} dd if="$1/file" of=/dev/null bs=1M iflag=direct status=none`, [d.mnt], { timeoutMs: 30_000 });
    await shOk(`taskset -c ${cpu} dd if="$1" of="$2/file" bs=1M count=2 oflag=direct conv=notrunc status=none`, [backing, d.mnt], { timeoutMs: 30_000 });
  }
  expect(await sha256sum(`${d.mnt}/file`)).toBe(expected);
  const s = await readStats(stats, { until: (x) => Number(x.nativeRequests) >= possibleCpus() * 10 });
  s.threadAffinity = threadAffinity(d.proc.pid);
  expect(await d.stop("SIGTERM")).toBe(0);
  // Every READ/WRITE was answered natively: none reached JavaScript.
  expect((s.ops as Record<string, number>).READ ?? 0).toBe(0);
  expect((s.ops as Record<string, number>).WRITE ?? 0).toBe(0);
  expect(Number(s.nativeReadBytes)).toBeGreaterThanOrEqual(possibleCpus() * 8 * MiB);
  return s;
}

describe("thread per queue: native transfers on the ring's own thread", () => {
  transportHooks("uring");
  cleanupAfterEach();

  fuseTest("one queue per ring (--workers = CPUs): every 1 MiB transfer is a synchronous pread/pwrite", async () => {
    const s = await run1MiBTraffic(possibleCpus());
    expect(Number(s.nativeSync)).toBeGreaterThanOrEqual(possibleCpus() * 10);
    expect(Number(s.fixedIo)).toBe(0);
    const rows = (s.threads as ThreadRow[]).filter((t) => t.thread.startsWith("worker"));
    expect(rows.length).toBe(possibleCpus());
    for (const t of rows) expect(t.requests).toBeGreaterThan(0);
    // Each worker sleeps on its queue's CPU, so the kernel's wake-ups are local (libfuse does
    // the same): the stats say so, and so does the kernel for the threads themselves.
    expect(rows.map((t) => t.cpus)).toEqual(rows.map((_, i) => [i]));
    const affinity = s.threadAffinity as string[];
    for (let cpu = 0; cpu < possibleCpus(); cpu++) expect(affinity).toContain(String(cpu));
  }, 90_000);

  fuseTest("FUSE_URING_NO_PIN=1 leaves the workers unpinned", async () => {
    const s = await run1MiBTraffic(possibleCpus(), { FUSE_URING_NO_PIN: "1" });
    expect((s.threads as ThreadRow[]).every((t) => t.cpus === undefined)).toBe(true);
    expect((s.threadAffinity as string[]).filter((a) => /^\d+$/.test(a))).toEqual([]);
  }, 90_000);

  fuseTest("the override keeps large transfers asynchronous (control: the check above can fail)", async () => {
    const s = await run1MiBTraffic(possibleCpus(), { FUSE_URING_NATIVE_SYNC_MAX: "65536" });
    expect(Number(s.fixedIo)).toBeGreaterThan(0);
  }, 90_000);

  fuseTest("a ring serving several queues sends 1 MiB transfers as fixed-buffer io_uring I/O", async () => {
    if (possibleCpus() < 2) throw new Error("this machine has one possible CPU: no ring can serve several queues");
    const s = await run1MiBTraffic(1);
    expect(Number(s.fixedIo)).toBeGreaterThan(0);
  }, 90_000);
});
