// Process lifecycle: signals, external unmounts, crash recovery, CLI errors, mount options,
// stats file.
import { describe, expect } from "bun:test";
import { rmSync } from "node:fs";
import {
  BUN,
  CLI,
  TRANSPORTS,
  cleanupAfterEach,
  fmt,
  fsop,
  fsopOk,
  fuseMountAt,
  fuseTest,
  isMounted,
  makeMountpoint,
  readStats,
  run,
  shOk,
  sleep,
  spawnBg,
  startDaemon,
  transportHooks,
} from "../helpers/index.ts";

const cli = (...args: string[]) => run([BUN, CLI, ...args], { timeoutMs: 30_000 });

describe("command line", () => {
  cleanupAfterEach();
  const bad: [string, string[]][] = [
    ["no arguments", []],
    ["unknown command", ["frobnicate"]],
    ["mount without a mountpoint", ["mount", "--memfs"]],
    ["unknown transport", ["mount", "--memfs", "/tmp/x", "--transport", "carrier-pigeon"]],
    ["non-numeric queue depth", ["mount", "--memfs", "/tmp/x", "--queue-depth", "many"]],
    ["max-write out of range", ["mount", "--memfs", "/tmp/x", "--max-write", "12"]],
    ["unknown option", ["mount", "--memfs", "/tmp/x", "--no-such-option"]],
    ["unmount without a mountpoint", ["unmount"]],
  ];
  for (const [what, args] of bad) {
    fuseTest(`bad arguments (${what}): usage on stderr, exit 2`, async () => {
      const r = await cli(...args);
      expect(r.code, fmt(r)).toBe(2);
      expect(r.stderr.toLowerCase()).toContain("usage");
    });
  }

  fuseTest("mount on a missing directory fails with a message naming it (not exit 0)", async () => {
    const r = await cli("mount", "--memfs", "/tmp/fuse-uring-test-does-not-exist/mnt", "--transport", "classic");
    expect(r.code, fmt(r)).not.toBe(0);
    expect(r.stderr).toContain("/tmp/fuse-uring-test-does-not-exist/mnt");
  });

  fuseTest("unmount of something that is not mounted does not hang", async () => {
    const mnt = makeMountpoint();
    const r = await cli("unmount", mnt);
    expect(r.timedOut).toBe(false);
    expect(isMounted(mnt)).toBe(false);
  });
});

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const args = ["--transport", transport];

    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      fuseTest(`${sig} unmounts and exits 0`, async () => {
        const d = await startDaemon(args);
        await shOk('echo data > "$1/f" && cat "$1/f" >/dev/null', [d.mnt]);
        expect(isMounted(d.mnt)).toBe(true);
        const code = await d.stop(sig, 10_000);
        expect(code, d.stderr()).toBe(0);
        expect(fuseMountAt(d.mnt)).toBeUndefined();
        // the mountpoint is an ordinary empty directory again
        expect((await fsopOk("listdir", d.mnt)).names).toEqual([]);
      });
    }

    fuseTest("SIGTERM immediately after the ready line still unmounts and exits 0 (5 times)", async () => {
      for (let i = 0; i < 5; i++) {
        const d = await startDaemon(args);
        d.proc.kill("SIGTERM"); // no pause: the handler must be in place before "mounted" is printed
        const r = await d.waitExit(10_000);
        expect(r.exited, `round ${i}: daemon still running`).toBe(true);
        expect(r.signal, `round ${i}: daemon died of ${r.signal} instead of handling it\n${d.stderr()}`).toBeNull();
        expect(r.code, d.stderr()).toBe(0);
        expect(isMounted(d.mnt), `round ${i}: mount left behind`).toBe(false);
      }
    });

    fuseTest("SIGTERM while a client holds a file open still exits 0 and removes the mount", async () => {
      const d = await startDaemon(args);
      await shOk('echo data > "$1/f"', [d.mnt]);
      const holder = spawnBg(["sh", "-c", 'exec 3<"$1/f"; exec sleep 30', "sh", d.mnt], { timeoutMs: 40_000 });
      await sleep(300);
      const code = await d.stop("SIGTERM", 15_000);
      expect(code, d.stderr()).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      holder.kill();
      await holder.done;
    });

    fuseTest("an external umount makes the daemon exit 0", async () => {
      const d = await startDaemon(args);
      await shOk('touch "$1/f"', [d.mnt]);
      const u = await run(["umount", d.mnt]);
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, `daemon still running after umount\n${d.stderr()}`).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
    });

    fuseTest("`fuse-uring unmount` of a live mount: daemon exits 0, mount gone", async () => {
      const d = await startDaemon(args);
      await shOk('touch "$1/f"', [d.mnt]);
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, `daemon still running after unmount\n${d.stderr()}`).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
    });

    fuseTest("`fuse-uring unmount` of a busy mount detaches it lazily", async () => {
      const d = await startDaemon(args);
      await shOk('mkdir "$1/sub"', [d.mnt]);
      // a process whose cwd is inside the mount keeps it busy
      const busy = spawnBg(["sh", "-c", "exec sleep 30"], { cwd: `${d.mnt}/sub`, timeoutMs: 40_000 });
      await sleep(200);
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      busy.kill();
      await busy.done;
      const r = await d.waitExit(10_000);
      expect(r.exited, `daemon did not exit once the busy process left\n${d.stderr()}`).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
    });

    fuseTest("kill -9 of the daemon, then `fuse-uring unmount` leaves no mount behind", async () => {
      const d = await startDaemon(args);
      await shOk('echo x > "$1/f"', [d.mnt]);
      d.proc.kill("SIGKILL");
      await d.waitExit(10_000);
      expect(d.exited).toBe(true);
      // The stale mount answers ENOTCONN ("Transport endpoint is not connected"). A request
      // that arrives while the kernel still tears down the dead daemon's io_uring (its fixed
      // file table holds /dev/fuse until then) is ended with ECONNABORTED instead; either way
      // at once, never a hang. Once the teardown is done every request gets ENOTCONN.
      expect(isMounted(d.mnt)).toBe(true);
      expect(["ENOTCONN", "ECONNABORTED"]).toContain((await fsop("stat", `${d.mnt}/f`)).code ?? "ok");
      let code: string | undefined;
      for (let i = 0; i < 40 && code !== "ENOTCONN"; i++) {
        if (i > 0) await sleep(50);
        code = (await fsop("stat", `${d.mnt}/f`)).code;
      }
      expect(code).toBe("ENOTCONN");
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      expect((await fsopOk("listdir", d.mnt)).names).toEqual([]);
    });

    fuseTest("a second mount on a live FUSE mount is refused (exit 2); the first keeps serving", async () => {
      const a = await startDaemon(args);
      await shOk('echo first > "$1/f"', [a.mnt]);
      const b = await cli("mount", "--memfs", a.mnt, ...args);
      expect(b.code, fmt(b)).toBe(2);
      expect(b.stderr).toContain("already a FUSE mount");
      expect(await shOk('cat "$1/f"', [a.mnt])).toBe("first\n");
      expect(await a.stop()).toBe(0);
      expect(isMounted(a.mnt)).toBe(false);
    });

    fuseTest("--fsname and --subtype appear in /proc/self/mountinfo", async () => {
      const d = await startDaemon([...args, "--fsname", "myfsname", "--subtype", "mysub"]);
      const m = fuseMountAt(d.mnt)!;
      expect(m.source).toBe("myfsname");
      expect(m.fstype).toBe("fuse.mysub");
      expect(await d.stop()).toBe(0);
    });

    fuseTest("--ro: writes fail with EROFS, reads work", async () => {
      const d = await startDaemon([...args, "--ro"]);
      expect(fuseMountAt(d.mnt)!.options.split(",")).toContain("ro");
      expect((await fsop("write", `${d.mnt}/f`, "x")).code).toBe("EROFS");
      expect((await fsop("mkdir", `${d.mnt}/dir`)).code).toBe("EROFS");
      expect((await fsopOk("listdir", d.mnt)).names).toEqual([]);
      expect(await d.stop()).toBe(0);
    });

    fuseTest("--max-write 65536 and --queue-depth 2 still move 4 MiB correctly", async () => {
      const d = await startDaemon([...args, "--max-write", "65536", "--queue-depth", "2"]);
      const w = await fsopOk("pwrite_pattern", `${d.mnt}/f`, 0, 4 << 20, "mw");
      const r = await run(["sh", "-c", 'dd if="$1" bs=1M iflag=direct status=none | sha256sum', "sh", `${d.mnt}/f`]);
      expect(r.code, fmt(r)).toBe(0);
      expect(r.stdout.split(/\s+/)[0]).toBe(w.sha256 as string);
      expect(await d.stop()).toBe(0);
    });

    fuseTest("--debug logs requests on stderr", async () => {
      const d = await startDaemon([...args, "--debug"]);
      const before = d.stderr().length;
      await shOk('mkdir "$1/debug-dir-name" && stat "$1/debug-dir-name" >/dev/null', [d.mnt]);
      await sleep(200);
      expect(d.stderr().length).toBeGreaterThan(before);
      expect(d.stderr().slice(before).toUpperCase()).toContain("MKDIR");
      expect(await d.stop()).toBe(0);
    });

    fuseTest("--stats-file is written while running and at exit", async () => {
      const stats = `/tmp/fuse-uring-test-stats-${process.pid}-${transport}.json`;
      rmSync(stats, { force: true });
      const d = await startDaemon([...args, "--stats-file", stats]);
      await shOk('for i in $(seq 50); do echo $i > "$1/f$i"; cat "$1/f$i" >/dev/null; done', [d.mnt]);
      const live = await readStats(stats, { timeoutMs: 3000, until: (s) => s.ringRequests + s.devRequests >= 100 });
      expect(live.transport).toBe(transport);
      for (const k of ["ringRequests", "devRequests", "wakeups", "cqes", "submits", "inflightMax", "pinnedBytes"] as const) {
        expect(typeof live[k], `stats field ${k}: ${JSON.stringify(live)}`).toBe("number");
      }
      expect(live.ringRequests + live.devRequests).toBeGreaterThanOrEqual(100);
      if (transport === "classic") expect(live.ringRequests).toBe(0);
      rmSync(stats, { force: true });
      expect(await d.stop()).toBe(0);
      const final = await readStats(stats, { timeoutMs: 1000 });
      expect(final.ringRequests + final.devRequests).toBeGreaterThanOrEqual(live.ringRequests + live.devRequests);
      rmSync(stats, { force: true });
    });
  });
}
