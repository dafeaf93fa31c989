// Large trees through the passthrough (issue 11): the daemon holds a bounded number of O_PATH
// descriptors (--fd-budget), evicts least-recently-used ones and re-opens them on demand, so the
// kernel's node ids stay valid however many there are. A python3 child creates, stats, reads and
// removes 30,000 files, builds a tree 20 levels deep, renames directories whose files were
// evicted and reads them back, runs find and rm -rf, and samples /proc/PID/fd of the daemon.
//
// Re-open modes: the uring block uses kernel file handles (root has CAP_DAC_READ_SEARCH), the
// classic block `--no-file-handles` (by path: parent node + name, kept current across renames),
// so each mode runs once with the full load. --entry-ttl 60 keeps the kernel from re-LOOKUPing
// every name (a LOOKUP brings a fresh descriptor), so requests really hit evicted nodes.
//
// Descriptor bound asserted: budget + the descriptors of the idle daemon right after start (source
// root, its read-only twin for open_by_handle_at, /dev/fuse, rings, runtime) + SLACK for what
// callers hold open at once (one file; find/rm -rf hold up to ~22 directories open) + 1 (a new
// descriptor is admitted before the least recently used one is closed).
//
// Out of descriptors: a daemon under `prlimit --nofile=N` with a budget above N still serves
// everything (EMFILE from the system evicts cached descriptors and retries); when callers hold
// every descriptor as open files, new opens answer EMFILE (never EIO/EBADF), other requests still
// work, and the daemon logs one line.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, TRANSPORTS, cleanupAfterEach, fmt, fuseTest, mountTmpfsSource, readStats, run, sharedDaemon, startDaemon,
  transportHooks, unmountTmpfsSources,
} from "../helpers/index.ts";

const MANY_PY = `${REPO}/test/fixtures/many_files.py`;
const RACE_PY = `${REPO}/test/fixtures/unlink_race.py`;
const BUDGET = 1000;
const NFILES = 30_000;
const SLACK = 32;
const scratch: string[] = [];

const mountTmpfs = () => mountTmpfsSource("size=512m,nr_inodes=200k", "fuse-uring-fds-src-");

afterAll(async () => {
  await unmountTmpfsSources();
  for (const f of scratch) rmSync(f, { force: true });
}, 30_000);

function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

interface Descriptors {
  budget: number; held: number; maxHeld: number; evictions: number; reopenedByHandle: number; reopenedByPath: number;
  shed: number; failures: number; mode: string;
}

for (const transport of TRANSPORTS) {
  const handles = transport === "uring";
  describe(`passthrough descriptor budget over ${transport} (re-open by ${handles ? "file handle" : "path"})`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    let SRC = "";
    const statsFile = `/tmp/fuse-uring-fds-stats-${process.pid}-${transport}.json`;
    scratch.push(statsFile);
    beforeAll(async () => {
      SRC = await mountTmpfs();
    }, 30_000);
    const s = sharedDaemon(
      () => ["--transport", transport, "--fd-budget", String(BUDGET), "--entry-ttl", "60", "--stats-file", statsFile, "--debug", ...(handles ? [] : ["--no-file-handles"])],
      { command: (mnt, args) => [BUN, CLI, "mount", "--passthrough", SRC, mnt, ...args] },
    );

    fuseTest(`${NFILES} files, a 20-level tree, renames of evicted directories, find, rm -rf: no EMFILE, descriptors within the budget`, async () => {
      const idle = fdCount(s.d.proc.pid);
      expect(s.d.stderr()).toContain(`inode descriptor budget ${BUDGET}, evicted inodes re-opened by ${handles ? "kernel file handles" : "paths"}`);
      expect(s.d.stderr()).toMatch(/RLIMIT_NOFILE \d+/);
      const r = await run([PYTHON, MANY_PY, s.mnt, String(s.d.proc.pid), String(NFILES)], { timeoutMs: 170_000 });
      if (r.code !== 0) throw new Error(`many_files.py failed:\n${fmt(r)}`);
      const res = JSON.parse(r.stdout.trim().split("\n").pop()!) as { maxFds: number; samples: number; emfile: number; find: number; failures: string[] };
      expect(res.failures).toEqual([]);
      expect(res.emfile).toBe(0);
      expect(res.samples).toBeGreaterThan(30);
      expect(res.maxFds).toBeLessThanOrEqual(BUDGET + idle + SLACK + 1);
      expect(res.maxFds).toBeGreaterThan(BUDGET / 2); // the cache was really used
      expect(readdirSync(SRC)).toEqual([]);
      const st = (await readStats(statsFile, { until: (x) => (x as unknown as { descriptors?: Descriptors }).descriptors !== undefined })) as unknown as { descriptors: Descriptors };
      const d = st.descriptors;
      expect(d.budget).toBe(BUDGET);
      expect(d.mode).toBe(handles ? "handle" : "path");
      expect(d.maxHeld).toBeLessThanOrEqual(BUDGET + 1);
      expect(d.evictions).toBeGreaterThan(NFILES);
      expect(handles ? d.reopenedByHandle : d.reopenedByPath).toBeGreaterThan(100);
      expect(d.failures).toBe(0);
      expect(s.d.stderr()).not.toContain("out of file descriptors");
    }, 180_000);
  });
}

// The EBADF seen under fsstress: a GETATTR's fstat queued on the thread pool while an UNLINK of
// the same file closed the node's descriptor. The old code answered EBADF ~100 times in 20 s here.
for (const transport of TRANSPORTS) {
  describe(`passthrough: stat racing unlink over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    let SRC = "";
    beforeAll(async () => {
      SRC = await mountTmpfs();
    }, 30_000);
    for (const budget of ["default", "20"]) {
      fuseTest(`stat, unlink/re-create (O_DIRECT writes) and mkdir/rmdir churn, budget ${budget}: never EBADF or EIO`, async () => {
        const d = await startDaemon(["--transport", transport, "--attr-ttl", "0", "--entry-ttl", "60", ...(budget === "default" ? [] : ["--fd-budget", budget])], {
          command: (mnt, args) => [BUN, CLI, "mount", "--passthrough", SRC, mnt, ...args],
        });
        const r = await run([PYTHON, RACE_PY, d.mnt, "6"], { timeoutMs: 60_000 });
        if (r.code !== 0) throw new Error(`unlink_race.py failed:\n${fmt(r)}`);
        const counts = JSON.parse(r.stdout.trim().split("\n").pop()!) as Record<string, number>;
        const { ENOENT = 0, ...rest } = counts;
        expect(rest).toEqual({});
        expect(ENOENT).toBeGreaterThan(0); // the race was really run
        expect(d.stderr()).not.toContain("answered EIO");
        await d.stop("SIGTERM", 10_000);
      }, 90_000);
    }
  });
}

describe("passthrough out of descriptors (classic)", () => {
  cleanupAfterEach();
  let SRC = "";
  beforeAll(async () => {
    SRC = await mountTmpfs();
  }, 30_000);

  fuseTest("budget above RLIMIT_NOFILE: EMFILE evicts and retries; open files holding every descriptor: EMFILE, one log line, other requests work", async () => {
    const LIMIT = 120;
    const statsFile = `/tmp/fuse-uring-fds-stats-${process.pid}-emfile.json`;
    scratch.push(statsFile);
    const d = await startDaemon(["--transport", "classic", "--fd-budget", "5000", "--entry-ttl", "60", "--stats-file", statsFile], {
      prefix: ["prlimit", `--nofile=${LIMIT}:${LIMIT}`],
      command: (mnt, args) => [BUN, CLI, "mount", "--passthrough", SRC, mnt, ...args],
    });
    const py = String.raw`
import os, sys, json, errno
mnt, n = os.fsencode(sys.argv[1]), int(sys.argv[2])
out = {"created": 0, "errors": [], "held": 0, "openErr": None, "otherOk": 0, "otherErr": [], "after": 0}
d = os.path.join(mnt, b"d")
os.mkdir(d)
for i in range(n):  # far more files than the daemon's RLIMIT_NOFILE
    try:
        fd = os.open(os.path.join(d, b"f%d" % i), os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b"%d" % i); os.close(fd)
        out["created"] += 1
    except OSError as e:
        out["errors"].append(errno.errorcode.get(e.errno, str(e.errno)))
fds = []
for i in range(n):  # hold open files until the daemon has no descriptor left
    try:
        fds.append(os.open(os.path.join(d, b"f%d" % i), os.O_RDONLY))
    except OSError as e:
        out["openErr"] = errno.errorcode.get(e.errno, str(e.errno)); break
out["held"] = len(fds)
for fd in fds[:20]:  # requests on what is already open keep working
    try:
        os.fstat(fd); os.pread(fd, 8, 0); out["otherOk"] += 1
    except OSError as e:
        out["otherErr"].append(errno.errorcode.get(e.errno, str(e.errno)))
for fd in fds: os.close(fd)
for i in range(0, n, 7):
    with open(os.path.join(d, b"f%d" % i), "rb") as f:
        if f.read() == b"%d" % i: out["after"] += 1
print(json.dumps(out))
`;
    const N = 600;
    const r = await run([PYTHON, "-c", py, d.mnt, String(N)], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`python failed:\n${fmt(r)}\n${d.stderr().slice(-3000)}`);
    const res = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(res.errors).toEqual([]);
    expect(res.created).toBe(N);
    expect(res.openErr).toBe("EMFILE");
    expect(res.held).toBeGreaterThan(LIMIT / 2);
    expect(res.held).toBeLessThan(LIMIT);
    expect(res.otherErr).toEqual([]);
    expect(res.otherOk).toBe(20);
    expect(res.after).toBe(Math.ceil(N / 7));
    const lines = d.stderr().split("\n").filter((l) => l.includes("out of file descriptors"));
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(2);
    expect(lines[0]).toContain("answered EMFILE");
    expect(d.stderr()).not.toContain("answered EIO");
    // The stats file is rewritten once a second: wait for the one that saw the shedding.
    const shedSeen = (x: Record<string, unknown>) => {
      const ds = x.descriptors as Descriptors | undefined;
      return !!ds && ds.shed > 0 && ds.failures >= 1;
    };
    const st = (await readStats(statsFile, { until: shedSeen })) as unknown as { descriptors: Descriptors };
    expect(st.descriptors.shed).toBeGreaterThan(0); // EMFILE from the system → evict, retry
    expect(st.descriptors.maxHeld).toBeLessThan(LIMIT);
    expect(st.descriptors.failures).toBeGreaterThanOrEqual(1);
    await d.stop("SIGTERM", 10_000);
  }, 120_000);
});
