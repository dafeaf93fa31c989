// FUSE-world conventions of the CLI, through the real kernel: -o mount options, the one
// "unmounted MNT (reason)" line and the exit code per way of stopping.
// Every mount is served by a separate daemon process and driven from other processes.
import { describe, expect } from "bun:test";
import { abortConnection, BUN, CLI, cleanupAfterEach, fmt, forceUnmount, fsop, fuseMountAt, fuseTest, isMounted, run, shOk, startDaemon, TRANSPORTS, transportHooks, type Daemon } from "../helpers/index.ts";
import { stopReason } from "../../bin/commands/mount.ts";

describe("-o mount options", () => {
  cleanupAfterEach();

  fuseTest("-o ro,fsname=,subtype=,noexec,noatime,max_read= reach the kernel mount", async () => {
    const d = await startDaemon(["-o", "ro,fsname=eco-src,subtype=ecotest,noexec,noatime,nosuid,nodev,max_read=65536,default_permissions"]);
    const m = fuseMountAt(d.mnt)!;
    expect(m.fstype).toBe("fuse.ecotest");
    expect(m.source).toBe("eco-src");
    const opts = m.options.split(",");
    for (const o of ["ro", "noexec", "noatime", "nosuid", "nodev"]) expect(opts, m.options).toContain(o);
    const sopts = m.superOptions.split(",");
    expect(sopts, m.superOptions).toContain("max_read=65536");
    expect(sopts, m.superOptions).toContain("default_permissions");
    // read-only for real: a client's write fails with EROFS
    const w = await fsop("write", `${d.mnt}/f`, "x");
    expect(w.code, JSON.stringify(w)).toBe("EROFS");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("an unknown -o option is rejected by name before anything is mounted", async () => {
    const d = await startDaemon([]);
    await d.stop();
    const r = await run([BUN, CLI, "mount", "--memfs", d.mnt, "-o", "rw,frobnicate=1"]);
    expect(r.code, fmt(r)).toBe(2);
    expect(r.stderr).toContain('unknown mount option "frobnicate"');
    expect(isMounted(d.mnt)).toBe(false);
  });
});

/** The daemon's stop lines (exactly one is expected). */
function stopLines(d: Daemon): string[] {
  return d.stderr().split("\n").filter((l) => l.startsWith("fuse-uring: unmounted "));
}

for (const transport of TRANSPORTS) {
  describe(`one stop line and an exit code per reason (${transport})`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const args = ["--transport", transport];

    fuseTest("umount MNT → (unmount), exit 0", async () => {
      const d = await startDaemon(args);
      await shOk('echo x > "$1/f"', [d.mnt]);
      const u = await run(["umount", d.mnt]);
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, d.stderr()).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(stopLines(d)).toEqual([`fuse-uring: unmounted ${d.mnt} (unmount)`]);
    });

    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      fuseTest(`${sig} → (signal ${sig}), exit 0`, async () => {
        const d = await startDaemon(args);
        await shOk('ls "$1"', [d.mnt]);
        expect(await d.stop(sig)).toBe(0);
        expect(stopLines(d)).toEqual([`fuse-uring: unmounted ${d.mnt} (signal ${sig})`]);
        expect(isMounted(d.mnt)).toBe(false);
      });
    }

    fuseTest("fusectl abort of this mount → (connection aborted), exit 3", async () => {
      const d = await startDaemon(args);
      await shOk('echo x > "$1/f"', [d.mnt]);
      expect(abortConnection(d.connId)).toBe(true);
      const r = await d.waitExit(15_000);
      if (!r.exited) await d.kill();
      expect(r.exited, d.stderr()).toBe(true);
      expect(r.code, d.stderr()).toBe(3);
      expect(stopLines(d)).toEqual([`fuse-uring: unmounted ${d.mnt} (connection aborted)`]);
      forceUnmount(d.mnt);
    });
  });
}

describe("stop reasons (unit)", () => {
  fuseTest("other session ends are errors (exit 1); signals win over the session's reason", () => {
    expect(stopReason("transport stopped: EIO", null, null)).toEqual({ text: "error: transport stopped: EIO", code: 1 });
    expect(stopReason("unmounted", "SIGINT", null)).toEqual({ text: "signal SIGINT", code: 0 });
    expect(stopReason("connection aborted", null, null)).toEqual({ text: "connection aborted", code: 3 });
    expect(stopReason("unmounted", null, "0:999999")).toEqual({ text: "unmount", code: 0 });
  });
});
