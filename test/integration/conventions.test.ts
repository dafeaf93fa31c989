// FUSE-world conventions of the CLI, through the real kernel: -o mount options, the one
// "unmounted MNT (reason)" line and the exit code per way of stopping.
// Every mount is served by a separate daemon process and driven from other processes.
import { describe, expect } from "bun:test";
import { abortConnection, BUN, CLI, cleanupAfterEach, fmt, fsop, fuseMountAt, fuseTest, isMounted, run, shOk, startDaemon } from "../helpers/index.ts";

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
