// Issue 10: every request answered exactly once, whatever a handler, the kernel or an operator
// does. Fault injection through real mounts (fixture test/fixtures/exactly-once-fs.ts, a script
// subclassing MemFS mounted from the CLI), callers in separate processes. After every test: no
// process of the test is in D state and nothing is left mounted.
import { afterAll, afterEach, beforeAll, describe, expect } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN,
  CLI,

  PYTHON,
  REPO,
  TRANSPORTS,
  abortConnection,
  cleanupAfterEach,
  fmt,
  fsop,
  fsopOk,
  fuseTest,
  isMounted,
  makeMountpoint,
  readStats,
  run,
  sha256,
  sha256sum,
  shOk,
  sleep,
  spawnBg,
  startDaemon,
  transportHooks,
  type Background,
  type Daemon,
  type RunResult,
  type Stats,
} from "../helpers/index.ts";

const FIXTURE = `${REPO}/test/fixtures/exactly-once-fs.ts`;
const scratch = mkdtempSync("/tmp/fuse-uring-exact-test-");
const BACKING = join(scratch, "backing");
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
beforeAll(() => writeFileSync(BACKING, Buffer.alloc(65536, "B")));

// ---- D-state and mount bookkeeping ------------------------------------------------------------
const pids = new Set<number>();
const mounts = new Set<string>();

/** Start a client process and remember its pid for the D-state check. */
function client(cmd: string[], timeoutMs = 30_000): Background {
  const b = spawnBg(cmd, { timeoutMs });
  pids.add(b.proc.pid);
  return b;
}

function clientRun(cmd: string[], timeoutMs = 30_000): Promise<RunResult> {
  return client(cmd, timeoutMs).done;
}

/** /proc/PID/stat state letter ("R", "S", "D", …) or null if the process is gone. */
function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  } catch {
    return null;
  }
}

/** Our tracked pids plus any process whose command line names one of our mountpoints. */
function dStateProcesses(): string[] {
  const out: string[] = [];
  const candidates = new Set(pids);
  for (const e of readdirSync("/proc")) {
    const pid = Number(e);
    if (!Number.isInteger(pid)) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      for (const m of mounts) if (cmdline.includes(m)) candidates.add(pid);
    } catch {}
  }
  for (const pid of candidates) {
    if (procState(pid) === "D") {
      let cmd = "?";
      try {
        cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
      } catch {}
      out.push(`${pid} ${cmd}`);
    }
  }
  return out;
}

afterEach(async () => {
  // A process in D state can be transient (waiting for an answer that is on its way): give it
  // a moment, then fail loudly.
  let stuck = dStateProcesses();
  for (let i = 0; i < 20 && stuck.length; i++) {
    await sleep(100);
    stuck = dStateProcesses();
  }
  const left = [...mounts].filter((m) => isMounted(m));
  pids.clear();
  mounts.clear();
  expect(stuck, "processes left in D state").toEqual([]);
  expect(left, "mounts left behind").toEqual([]);
});

// ---- helpers ----------------------------------------------------------------------------------
interface Fixture {
  d: Daemon;
  stats: string;
}

let nStats = 0;
async function startFixture(transport: string, extra: string[] = [], env: Record<string, string> = {}): Promise<Fixture> {
  const stats = join(scratch, `stats-${++nStats}.json`);
  const d = await startDaemon(["--transport", transport, "--stats-file", stats, ...extra], {
    command: (mnt, args) => [BUN, CLI, "mount", FIXTURE, mnt, ...args, "--", BACKING],
    env: { FUSE_URING_POISON: "1", ...env },
  });
  mounts.add(d.mnt);
  pids.add(d.proc.pid);
  return { d, stats };
}

/** Stats once the daemon has written a snapshot satisfying `until` (the file is rewritten each second). */
function statsOf(f: Fixture, until?: (s: Stats) => boolean): Promise<Stats> {
  return readStats(f.stats, { timeoutMs: 5000, until });
}

async function stopClean(f: Fixture): Promise<void> {
  const code = await f.d.stop("SIGTERM", 15_000);
  expect(code, f.d.stderr()).toBe(0);
  expect(isMounted(f.d.mnt)).toBe(false);
}

async function waitFor(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

const count = (text: string, re: RegExp) => (text.match(new RegExp(re.source, "g")) ?? []).length;

for (const transport of TRANSPORTS) {
  describe(`exactly once over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("item 1: an async lookup resolving to undefined (or a bad entry) answers EIO; the daemon serves on", async () => {
      const f = await startFixture(transport);
      expect(f.d.transport).toBe(transport);
      const m = f.d.mnt;
      for (const name of ["undef-async", "undef-sync", "bad-async", "undef-async"]) {
        const r = await fsop("stat", `${m}/${name}`);
        expect(r.code, `stat ${name}`).toBe("EIO");
      }
      // a promise the handler drops on the floor rejects unobserved: logged, not fatal
      expect((await fsop("stat", `${m}/stray`)).code).toBe("ENOENT");
      await shOk('echo fine > "$1/ok" && cat "$1/ok"', [m]);
      expect((await fsopOk("read", `${m}/ok`)).data).toBe("fine\n");
      expect(f.d.exited).toBe(false);
      const err = f.d.stderr();
      expect(err).toContain("lookup handler returned undefined; expected an Entry");
      expect(err).toContain("unhandled promise rejection in the filesystem (ignored");
      const s = await statsOf(f, (s) => ((s.ops as Record<string, number>).LOOKUP ?? 0) >= 6);
      expect(s.protocolErrors).toBe(0);
      await stopClean(f);
    });

    fuseTest("items 2+3: a READ handler that throws (or answers) while its backing I/O runs: EIO, caller exits, slots stay intact", async () => {
      const f = await startFixture(transport);
      const m = f.d.mnt;
      await shOk('for n in io-throw io-throw-async io-early; do echo x > "$1/$n"; done; head -c 65536 /dev/zero > "$1/io-ok"', [m]);
      const data = await fsopOk("pwrite_pattern", `${m}/data`, 0, 3 << 20, "exact");
      const rounds = 8;
      for (let i = 0; i < rounds; i++) {
        for (const name of ["io-throw", "io-throw-async"]) {
          const r = await clientRun(["cat", `${m}/${name}`], 20_000);
          expect(r.timedOut, fmt(r)).toBe(false);
          expect(r.code, fmt(r)).not.toBe(0);
          expect(r.stderr).toContain("Input/output error");
        }
        const early = await clientRun(["cat", `${m}/io-early`], 20_000);
        expect(early.code, fmt(early)).toBe(0);
        expect(early.stdout).toBe("");
        // Other requests reuse the same slots: their data must be exactly theirs.
        expect(await sha256sum(`${m}/data`)).toBe(data.sha256 as string);
      }
      // Backing I/O on every slot again (more reads than slots): no slot kept a stale I/O
      // callback (that answered EBUSY before), every read returns the backing file's bytes.
      const backingSha = sha256(Buffer.alloc(65536, "B"));
      for (let i = 0; i < 40; i++) expect(await sha256sum(`${m}/io-ok`)).toBe(backingSha);
      // io-throw and io-early answer synchronously while the I/O is queued: always deferred.
      // io-throw-async throws after an await, by when the I/O may already be done (the ring
      // can complete a cached read in the same io_uring_enter).
      const s = await statsOf(f, (s) => (s.deferredAnswers as number) >= rounds * 2 && s.inflight === 0);
      // The answers really waited for the I/O (the path under test was taken) …
      expect(s.deferredAnswers as number).toBeGreaterThanOrEqual(rounds * 2);
      // … nothing was answered twice, no completion was unexpected, no slot was written after
      // its answer (FUSE_URING_POISON=1 checks every slot on reuse).
      expect(s.protocolErrors, f.d.stderr().slice(-3000)).toBe(0);
      expect(s.inflight).toBe(0);
      expect(f.d.stderr()).not.toContain("BUG:");
      await stopClean(f);
    });

    fuseTest("item 9: --request-timeout 1 answers a never-settling READ with ETIMEDOUT; a late result is dropped", async () => {
      const f = await startFixture(transport, ["--request-timeout", "1"], { LATE_MS: "2500" });
      const m = f.d.mnt;
      await shOk('echo never > "$1/never" && echo late > "$1/late" && echo ok > "$1/ok"', [m]);
      const started = Date.now();
      const r = await clientRun(["cat", `${m}/never`], 30_000);
      const elapsed = Date.now() - started;
      expect(r.timedOut, fmt(r)).toBe(false);
      expect(r.code, fmt(r)).not.toBe(0);
      expect(r.stderr).toContain("Connection timed out"); // ETIMEDOUT
      expect(elapsed).toBeLessThan(15_000); // a liveness bound, not a speed claim
      const late = await clientRun(["cat", `${m}/late`], 30_000);
      expect(late.stderr).toContain("Connection timed out");
      await waitFor("the late handler to settle", () => f.d.stderr().includes("fixture: late handler settled"));
      for (let i = 0; i < 20; i++) expect((await fsopOk("read", `${m}/ok`)).data).toBe("ok\n");
      const s = await statsOf(f, (s) => (s.lateResults as number) >= 1);
      expect(s.timeouts as number).toBeGreaterThanOrEqual(2);
      expect(s.lateResults as number).toBeGreaterThanOrEqual(1);
      expect(s.protocolErrors).toBe(0);
      await stopClean(f);
    });

    fuseTest("item 9: a request pending longer than the threshold is logged once (opcode, node, handler, age)", async () => {
      const f = await startFixture(transport, [], { FUSE_URING_SLOW_MS: "1000", LATE_MS: "2600" });
      const m = f.d.mnt;
      await shOk('echo late-data > "$1/late"', [m]);
      // one READ (dd count=1), so exactly one slow request
      const r = await clientRun(["dd", `if=${m}/late`, "bs=4096", "count=1", "status=none"], 30_000);
      expect(r.code, fmt(r)).toBe(0);
      expect(r.stdout).toBe("late-data\n"); // by default the kernel's semantics: wait for the handler
      const err = f.d.stderr();
      expect(count(err, /request #\d+ READ node=\d+ pid=\d+ pending for \d+\.\d s \(handler read\(\)/), err).toBe(1);
      const s = await statsOf(f, (s) => (s.slowRequests as number) >= 1);
      expect(s.slowRequests).toBe(1);
      expect(s.timeouts).toBe(0);
      await stopClean(f);
    });

    fuseTest("item 5: an INTERRUPT reaches the handler (ctx.signal) and the caller gets EINTR", async () => {
      const f = await startFixture(transport);
      const m = f.d.mnt;
      await shOk('echo x > "$1/interruptible"', [m]);
      const py =
        "import os,signal,sys\n" +
        "class Interrupted(Exception): pass\n" +
        "def on(s,f): raise Interrupted()\n" +
        "signal.signal(signal.SIGUSR1, on)\n" +
        "fd=os.open(sys.argv[1], os.O_RDONLY)\n" +
        "print('open', flush=True)\n" +
        "try:\n  os.read(fd, 4096); print('read returned')\n" +
        "except Interrupted: print('interrupted')\n";
      const c = client([PYTHON, "-c", py, `${m}/interruptible`], 30_000);
      await waitFor("the read to reach the handler", () => f.d.stderr().includes("fixture: interruptible start"));
      c.kill("SIGUSR1");
      const r = await c.done;
      expect(r.timedOut, fmt(r)).toBe(false);
      expect(r.stdout, fmt(r)).toContain("interrupted");
      await waitFor("the handler to see the abort", () => f.d.stderr().includes("fixture: interruptible aborted"));
      const s = await statsOf(f, (s) => (s.interrupts as number) >= 1 && s.inflight === 0);
      expect(s.interrupts as number).toBeGreaterThanOrEqual(1);
      expect(s.inflight).toBe(0);
      expect(s.protocolErrors).toBe(0);
      await stopClean(f);
    });

    fuseTest("item 5: a storm of signals on callers whose reads answer in 0–3 ms: every read completes with its data", async () => {
      const f = await startFixture(transport);
      const m = f.d.mnt;
      await shOk('printf jitter-data > "$1/jitter"', [m]);
      // Python retries a read interrupted by a handled signal (PEP 475); each signal makes the
      // kernel send an INTERRUPT, racing the answer (some find their request already answered).
      const py =
        "import os,signal,sys\n" +
        "signal.signal(signal.SIGUSR1, lambda s,f: None)\n" +
        "open(sys.argv[2], 'w').close()\n" +
        "ok=0\n" +
        "for i in range(300):\n" +
        "  fd=os.open(sys.argv[1], os.O_RDONLY)\n" +
        "  d=os.read(fd, 4096)\n" +
        "  os.close(fd)\n" +
        "  ok += d == b'jitter-data'\n" +
        "print('ok', ok)\n";
      // Up to 3 rounds, until some INTERRUPT found its request already answered (the race is
      // won in about a quarter of the interrupts here; the rounds only guard a slow machine).
      let s: Stats | undefined;
      for (let round = 0; round < 3; round++) {
        const ready = join(scratch, `storm-ready-${transport}-${round}`);
        const c = client([PYTHON, "-c", py, `${m}/jitter`, ready], 60_000);
        await waitFor("the client's signal handler", () => existsSync(ready) || c.exited);
        const storm = setInterval(() => {
          try {
            if (!c.exited) process.kill(c.proc.pid, "SIGUSR1");
          } catch {}
        }, 2);
        const r = await c.done;
        clearInterval(storm);
        expect(r.timedOut, fmt(r)).toBe(false);
        expect(r.stdout, fmt(r)).toContain("ok 300");
        const replies = (s?.replies as number | undefined) ?? 0;
        s = await statsOf(f, (x) => (x.replies as number) > replies + 300 && x.inflight === 0);
        if ((s.interruptsUnmatched as number) > 0) break;
      }
      s = s!;
      expect(s.interrupts as number, "the storm produced no INTERRUPT at all").toBeGreaterThan(0);
      // the unknown-target path (EAGAIN on classic, remembered on the ring) was really taken
      expect(s.interruptsUnmatched as number).toBeGreaterThan(0);
      expect(s.inflight).toBe(0);
      expect(s.protocolErrors).toBe(0);
      console.error(`[${transport}] signal storm: ${s.interrupts} INTERRUPTs, ${s.interruptsUnmatched} unmatched, ${s.interruptsEarly} applied early`);
      await stopClean(f);
    });

    fuseTest("item 8: fusectl abort → one stderr line naming it, exit 3, no dead mount; a blocked caller is released", async () => {
      const f = await startFixture(transport);
      const m = f.d.mnt;
      await shOk('echo x > "$1/never" && echo y > "$1/f"', [m]);
      const blocked = client(["cat", `${m}/never`], 30_000);
      await waitFor("the read to reach the handler", () => f.d.stderr().includes("fixture: never start"));
      expect(abortConnection(f.d.connId)).toBe(true);
      const exit = await f.d.waitExit(15_000);
      expect(exit.exited, f.d.stderr()).toBe(true);
      expect(exit.code, f.d.stderr()).toBe(3);
      const lines = f.d.stderr().split("\n").filter((l) => l.includes("connection aborted"));
      expect(lines.length, f.d.stderr()).toBe(1);
      expect(lines[0]).toContain(m);
      const r = await blocked.done;
      expect(r.timedOut, fmt(r)).toBe(false);
      expect(r.code).not.toBe(0);
      // the dead mount was detached: the mountpoint is a plain empty directory again
      expect(isMounted(m)).toBe(false);
      expect((await fsopOk("listdir", m)).names).toEqual([]);
    });

    fuseTest("item 8: --debug tells abort, external unmount and signal apart", async () => {
      const a = await startFixture(transport, ["--debug"]);
      expect(abortConnection(a.d.connId)).toBe(true);
      expect((await a.d.waitExit(15_000)).code).toBe(3);
      expect(a.d.stderr()).toContain("session ended: connection aborted");

      const u = await startFixture(transport, ["--debug"]);
      const um = await run(["umount", u.d.mnt]);
      expect(um.code, fmt(um)).toBe(0);
      expect((await u.d.waitExit(15_000)).code).toBe(0);
      expect(u.d.stderr()).toContain("session ended: unmounted (external unmount)");

      const t = await startFixture(transport, ["--debug"]);
      expect(await t.d.stop("SIGTERM")).toBe(0);
      expect(t.d.stderr()).toContain("session ended: unmounted (after SIGTERM)");
      for (const x of [a, u, t]) expect(isMounted(x.d.mnt)).toBe(false);
    });

    fuseTest("item 6: SIGTERM with a handler that never settles: its caller gets EIO, the daemon exits 0, nothing left", async () => {
      const f = await startFixture(transport);
      const m = f.d.mnt;
      await shOk('echo x > "$1/never"', [m]);
      const blocked = client(["cat", `${m}/never`], 30_000);
      await waitFor("the read to reach the handler", () => f.d.stderr().includes("fixture: never start"));
      const code = await f.d.stop("SIGTERM", 20_000);
      expect(code, f.d.stderr()).toBe(0);
      expect(f.d.stderr()).toContain("never settled");
      const r = await blocked.done;
      expect(r.timedOut, fmt(r)).toBe(false);
      expect(r.code).not.toBe(0);
      expect(isMounted(m)).toBe(false);
    });

    fuseTest("also: a wrong DirFiller.add call answers EIO with a clear message", async () => {
      const f = await startFixture(transport);
      await shOk('mkdir "$1/badfiller"', [f.d.mnt]);
      const r = await clientRun(["ls", `${f.d.mnt}/badfiller`]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("Input/output error");
      expect(f.d.stderr()).toContain("DirFiller.add(name: string, nextOffset: number, entry: { ino, attr }) called with (an object");
      await stopClean(f);
    });
  });
}

describe("exactly once: load-time and command-line checks", () => {
  cleanupAfterEach();
  const cli = (args: string[], env: Record<string, string> = {}) => run([BUN, CLI, ...args], { timeoutMs: 30_000, env });

  fuseTest("item 7: a shim with another ABI version is refused with how to rebuild", async () => {
    const dir = mkdtempSync(join(scratch, "abi-"));
    writeFileSync(join(dir, "v999.c"), "unsigned fu_abi_version(void) { return 999; }\n");
    writeFileSync(join(dir, "none.c"), "int fu_something_else(void) { return 0; }\n");
    for (const n of ["v999", "none"]) {
      // The system C compiler when there is one (zig cc is slow on its first run).
      const compiler = existsSync("/usr/bin/cc") ? ["/usr/bin/cc"] : [PYTHON, "-m", "ziglang", "cc"];
      const cc = await run([...compiler, "-shared", "-fPIC", "-nostdlib", "-o", join(dir, `${n}.so`), join(dir, `${n}.c`)], { timeoutMs: 150_000 });
      expect(cc.code, fmt(cc)).toBe(0);
    }
    const mnt = makeMountpoint();
    mounts.add(mnt);
    const stale = await cli(["mount", "--memfs", mnt], { FUSE_URING_SHIM: join(dir, "v999.so") });
    expect(stale.code, fmt(stale)).not.toBe(0);
    expect(stale.stderr).toContain("ABI version 999");
    expect(stale.stderr).toContain("bash scripts/setup.sh");
    const old = await cli(["mount", "--memfs", mnt], { FUSE_URING_SHIM: join(dir, "none.so") });
    expect(old.code, fmt(old)).not.toBe(0);
    expect(old.stderr).toContain("fu_abi_version");
    expect(old.stderr).toContain("bash scripts/setup.sh");
    expect(isMounted(mnt)).toBe(false);
  });

  fuseTest("also: a script exporting { getattr: 5 } is rejected at load with file:line", async () => {
    const mnt = makeMountpoint();
    mounts.add(mnt);
    const r = await cli(["mount", `${REPO}/test/fixtures/bad-handler.ts`, mnt]);
    expect(r.code, fmt(r)).not.toBe(0);
    expect(r.stderr).toMatch(/bad-handler\.ts:6: .*handler "getattr" is .*5.*must be a function/);
    expect(isMounted(mnt)).toBe(false);
  });

  fuseTest("also: --stats-file in a missing directory fails at start with the reason", async () => {
    const mnt = makeMountpoint();
    mounts.add(mnt);
    const r = await cli(["mount", "--memfs", mnt, "--stats-file", "/tmp/fuse-uring-no-such-dir/x/stats.json"]);
    expect(r.code, fmt(r)).not.toBe(0);
    expect(r.stderr).toContain("directory /tmp/fuse-uring-no-such-dir/x does not exist");
    expect(isMounted(mnt)).toBe(false);
  });

  const usage: [string, string[], string][] = [
    ["--memfs with --passthrough", ["mount", "--memfs", "--passthrough", "/tmp", "/tmp/x"], "exclude each other"],
    ["--passthrough with --memfs", ["mount", "--passthrough", "/tmp", "--memfs", "/tmp/x"], "exclude each other"],
    ["--transport without a value", ["mount", "--memfs", "/tmp/x", "--transport"], "--transport needs a value"],
    ["--request-timeout 0", ["mount", "--memfs", "/tmp/x", "--request-timeout", "0"], "--request-timeout must be > 0"],
  ];
  for (const [what, args, msg] of usage) {
    fuseTest(`also: ${what} → clear error, exit 2`, async () => {
      const r = await cli(args);
      expect(r.code, fmt(r)).toBe(2);
      expect(r.stderr).toContain(msg);
      expect(r.stderr.toLowerCase()).toContain("usage");
    });
  }

  fuseTest("also: mounting on a live FUSE mount → clear error, exit 2, the first mount unharmed", async () => {
    const a = await startDaemon(["--transport", "classic"]);
    mounts.add(a.mnt);
    await shOk('echo first > "$1/f"', [a.mnt]);
    const r = await cli(["mount", "--memfs", a.mnt]);
    expect(r.code, fmt(r)).toBe(2);
    expect(r.stderr).toContain("already a FUSE mount");
    expect(await shOk('cat "$1/f"', [a.mnt])).toBe("first\n");
    expect(await a.stop()).toBe(0);
    expect(existsSync(a.mnt)).toBe(true);
  });
});


