// Fail-stop (lib/shared/fail-stop.ts, Session.failStop): a worker that exits or throws an
// uncaught error, or a handler that calls failStop(), stops the whole mount — the connection is
// aborted (callers get ENOTCONN/ECONNABORTED at once, never a hang and never a half-working
// mount), the daemon prints exactly one stop line `fuse-uring: unmounted MNT (fail-stop: why)`
// and exits 4. Worker faults come from the test option FUSE_URING_FAULT=worker-exit:W:K /
// worker-throw:W:K (worker W fails in the middle of its K+1-th handler).

import { describe, expect } from "bun:test";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, cleanupAfterEach, fmt, fsopOk, fuseTest, isMounted, noneInDState, run, sleep, spawnBg, startDaemon, stuckProcesses,
  transportHooks, type Daemon,
} from "../helpers/index.ts";

// A client that works inside the mount (cwd there, so it keeps talking to the connection even
// after the mount is detached) until a call fails; prints that call's errno name. It checks that
// its cwd is the FUSE mount (not the directory under it after a detach) and waits for the other
// client before the load starts.
const CLIENT = `
import errno, os, sys, time
mnt, tag = sys.argv[1], sys.argv[2]
devs = [l.split()[2] for l in open("/proc/self/mountinfo") if l.split()[4] == mnt and " - fuse" in l]
os.chdir(mnt)
if not devs or os.stat(".").st_dev != os.makedev(*map(int, devs[-1].split(":"))):
    print("NOT-IN-MOUNT 0")
    sys.exit(0)
end = time.time() + 40
i = 0
try:
    # Both clients inside the mount before the load starts (the fault may end it within 0.1 s).
    open("ready-" + tag, "w").close()
    while len([n for n in os.listdir(".") if n.startswith("ready-")]) < 2:
        time.sleep(0.05)
    while time.time() < end:
        name = "%s-%d" % (tag, i % 50)
        with open(name, "w") as f:
            f.write("x" * 100)
        os.stat(name)
        os.listdir(".")
        os.unlink(name)
        i += 1
    print("NOERROR", i)
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)), i)
`;

const stopLines = (d: Daemon) => d.stderr().split("\n").filter((l) => l.startsWith("fuse-uring: unmounted"));

/** The daemon ended by fail-stop: exit 4, one stop line naming `why`, mount gone or cleanable. */
async function expectFailStop(d: Daemon, why: RegExp, pids: number[]): Promise<void> {
  const exit = await d.waitExit(20_000);
  expect(exit.exited, d.stderr().slice(-3000)).toBe(true);
  expect(exit.code, d.stderr().slice(-3000)).toBe(4);
  const lines = stopLines(d);
  expect(lines.length, d.stderr().slice(-3000)).toBe(1);
  expect(lines[0]!.startsWith(`fuse-uring: unmounted ${d.mnt} (fail-stop: `), lines[0]).toBe(true);
  expect(lines[0]!, lines[0]).toMatch(why);
  expect(d.stderr()).not.toContain("BUG");
  expect(noneInDState([...pids, d.proc.pid]), stuckProcesses()).toBe(true);
  // The daemon detached its mount; `fuse-uring unmount` cleans up whatever is left.
  if (isMounted(d.mnt)) {
    const u = await run([BUN, CLI, "unmount", d.mnt], { timeoutMs: 10_000 });
    expect(u.code, fmt(u)).toBe(0);
  }
  expect(isMounted(d.mnt)).toBe(false);
  expect((await fsopOk("listdir", d.mnt)).names).toEqual([]);
}

describe("fail-stop", () => {
  transportHooks("uring");
  cleanupAfterEach();

  for (const kind of ["exit", "throw"] as const) {
    fuseTest(`a worker that ${kind === "exit" ? "exits" : "throws an uncaught error"} under load stops the mount: exit 4, one line, callers get ENOTCONN`, async () => {
      // The test option as an environment knob (exit) and as its flag (throw): lib/knobs.ts.
      const fault = `worker-${kind}:1:300`;
      const d = kind === "exit"
        ? await startDaemon(["--transport", "uring", "--workers", "2"], { env: { FUSE_URING_FAULT: fault } })
        : await startDaemon(["--transport", "uring", "--workers", "2", "--test", `fault=${fault}`]);
      expect(d.readyLine).toContain("2 worker threads, copies");
      // One client per CPU: CPU 1's requests reach worker 1, which fails after 300 of them.
      const clients = ["0", "1"].map((cpu) => spawnBg(["taskset", "-c", cpu, PYTHON, "-c", CLIENT, d.mnt, `c${cpu}`], { timeoutMs: 60_000 }));
      const results = await Promise.all(clients.map((c) => Promise.race([c.done, sleep(45_000).then(() => null)])));
      const seen = results.map((r) => (r ? r.stdout.trim() : "HANG")).join(" | ");
      for (const r of results) {
        expect(r, `a client still waits on the mount (hang): ${seen}\n${d.stderr().slice(-2000)}`).not.toBeNull();
        const code = r!.stdout.trim().split(" ")[0] ?? "";
        // The request the dying thread held is ended by the kernel when the thread's io_uring
        // commands are cancelled at its exit (ECANCELED), before the abort; all others get the
        // abort's ECONNABORTED / ENOTCONN.
        expect(["ENOTCONN", "ECONNABORTED", ...(kind === "exit" ? ["ECANCELED"] : [])], `clients: ${seen}\n${fmt(r!)}\n${d.stderr().slice(-2000)}`).toContain(code);
      }
      expect(results.some((r) => /^(ENOTCONN|ECONNABORTED) /.test(r!.stdout.trim())), seen).toBe(true);
      const why = kind === "exit" ? /\(fail-stop: worker 1 exited \(code 70\)\)$/ : /\(fail-stop: worker 1 threw an uncaught error: test fault: worker 1 throws after 300 requests\)$/;
      await expectFailStop(d, why, clients.map((c) => c.proc.pid));
    }, 120_000);
  }

  fuseTest("without fusectl (test fault no-fusectl): the daemon detaches the mount and exits 4; its exit ends the connection, callers get ENOTCONN", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { env: { FUSE_URING_FAULT: "worker-exit:1:300,no-fusectl" } });
    const clients = ["0", "1"].map((cpu) => spawnBg(["taskset", "-c", cpu, PYTHON, "-c", CLIENT, d.mnt, `c${cpu}`], { timeoutMs: 60_000 }));
    const results = await Promise.all(clients.map((c) => Promise.race([c.done, sleep(45_000).then(() => null)])));
    const seen = results.map((r) => (r ? r.stdout.trim() : "HANG")).join(" | ");
    for (const r of results) {
      expect(r, `a client still waits on the mount (hang): ${seen}`).not.toBeNull();
      const code = r!.stdout.trim().split(" ")[0] ?? "";
      expect(["ENOTCONN", "ECONNABORTED", "ECANCELED"], `clients: ${seen}\n${fmt(r!)}\n${d.stderr().slice(-2000)}`).toContain(code);
    }
    expect(results.some((r) => /^(ENOTCONN|ECONNABORTED) /.test(r!.stdout.trim())), seen).toBe(true);
    await expectFailStop(d, /\(fail-stop: worker 1 exited \(code 70\)\)$/, clients.map((c) => c.proc.pid));
  }, 120_000);

  for (const workers of ["1", "2"]) {
    fuseTest(`failStop() in a handler (--workers ${workers}) stops the mount the same way; the caller gets ENOTCONN, not EIO`, async () => {
      const d = await startDaemon(["--transport", "uring", "--workers", workers], { command: (mnt, args) => [BUN, CLI, "mount", join(REPO, "test", "fixtures", "failstop-fs.ts"), mnt, ...args] });
      expect(await run(["cat", `${d.mnt}/ok`]).then((r) => r.stdout)).toBe("ok\n");
      const r = await run(["taskset", "-c", workers === "2" ? "1" : "0", PYTHON, "-c", "import errno,os,sys\ntry:\n  os.read(os.open(sys.argv[1], os.O_RDONLY), 10); print('read')\nexcept OSError as e: print(errno.errorcode[e.errno])", `${d.mnt}/stop`], { timeoutMs: 30_000 });
      expect(["ENOTCONN", "ECONNABORTED"], `${fmt(r)}\n${d.stderr().slice(-2000)}`).toContain(r.stdout.trim());
      const why = workers === "2" ? /\(fail-stop: worker 1: the script said stop\)$/ : /\(fail-stop: the script said stop\)$/;
      await expectFailStop(d, why, []);
      expect(d.stderr()).not.toContain("answered EIO");
    }, 90_000);
  }
});
