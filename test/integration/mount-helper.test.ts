// mount(8) integration: `mount -t fuse.fuse-uring SOURCE MNT -o …` and fstab lines run
// /sbin/mount.fuse.fuse-uring (linked here for the duration of the file, then restored), which
// daemonizes `fuse-uring mount` and returns once the mount is up; `umount MNT` ends the daemon.
// Root only (CI runs as root). Everything is driven from separate processes.
import { afterAll, afterEach, beforeAll, describe, expect } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO, fmt, forceUnmount, fuseMountAt, fuseTest, makeMountpoint, run, shOk, sleep, cleanupMountpoints } from "../helpers/index.ts";

const LINK = "/sbin/mount.fuse.fuse-uring";
const HELPER = join(REPO, "bin/mount.fuse.fuse-uring");

/** The helper's log for a mountpoint (bin/mount-helper.ts logPathFor, root's runtime dir). */
function logOf(mnt: string): string {
  return join("/run/fuse-uring", `mount-${mnt.replace(/^\/+/, "").replace(/[^A-Za-z0-9._-]/g, (c) => (c === "/" ? "-" : "_"))}.log`);
}

/** The daemon serving `mnt`, from the stats it publishes (bin/runtime.ts). */
async function daemonPid(mnt: string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const m = fuseMountAt(mnt);
    const f = m && `/run/fuse-uring/${m.major}:${m.minor}.json`;
    if (f && existsSync(f)) {
      try {
        return JSON.parse(readFileSync(f, "utf8")).pid;
      } catch {}
    }
    await sleep(50);
  }
  throw new Error(`no daemon stats for ${mnt}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitGone(pid: number, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (alive(pid) && Date.now() < end) await sleep(50);
  return !alive(pid);
}

describe("mount -t fuse.fuse-uring (mount(8) helper)", () => {
  let previous: string | null = null;
  const pids = new Set<number>();
  const mnts = new Set<string>();

  beforeAll(() => {
    if (process.getuid?.() !== 0) throw new Error("the mount(8) helper tests need root (CI runs as root)");
    if (existsSync(LINK) || lstatSync(LINK, { throwIfNoEntry: false })) {
      previous = lstatSync(LINK).isSymbolicLink() ? readlinkSync(LINK) : null;
      if (previous === null) throw new Error(`${LINK} exists and is not a symlink: not touching it`);
      unlinkSync(LINK);
    }
    symlinkSync(HELPER, LINK);
  });

  afterEach(async () => {
    for (const m of mnts) forceUnmount(m);
    for (const p of pids) {
      if (alive(p)) process.kill(p, "SIGKILL");
    }
    for (const m of mnts) rmSync(logOf(m), { force: true });
    cleanupMountpoints(mnts);
    mnts.clear();
    pids.clear();
  });

  afterAll(() => {
    if (lstatSync(LINK, { throwIfNoEntry: false })?.isSymbolicLink() && readlinkSync(LINK) === HELPER) unlinkSync(LINK);
    if (previous) symlinkSync(previous, LINK);
  });

  const mountpoint = () => {
    const m = makeMountpoint("fuse-uring-mh-");
    mnts.add(m);
    return m;
  };

  /** After `mount` returned: the mount works, umount stops the daemon with its stop line. */
  async function expectServedThenUmount(mnt: string, check: () => Promise<void>): Promise<void> {
    const pid = await daemonPid(mnt);
    pids.add(pid);
    await check();
    const u = await run(["umount", mnt]);
    expect(u.code, fmt(u)).toBe(0);
    expect(await waitGone(pid), `daemon ${pid} still running after umount`).toBe(true);
    expect(fuseMountAt(mnt)).toBeUndefined();
    expect(readFileSync(logOf(mnt), "utf8")).toContain(`fuse-uring: unmounted ${mnt} (unmount)`);
  }

  fuseTest("memfs with -o: mount returns once it is up; umount stops the daemon", async () => {
    const mnt = mountpoint();
    const r = await run(["mount", "-t", "fuse.fuse-uring", "memfs", mnt, "-o", "noexec,noatime,max_read=131072"]);
    expect(r.code, fmt(r)).toBe(0);
    // Up as soon as mount(8) returned: no waiting here.
    const m = fuseMountAt(mnt)!;
    expect(m, "not mounted when mount(8) returned").toBeDefined();
    expect(m.fstype).toBe("fuse.fuse-uring");
    expect(m.source).toBe("memfs");
    expect(m.options.split(",")).toContain("noexec");
    expect(m.superOptions.split(",")).toContain("max_read=131072");
    await expectServedThenUmount(mnt, async () => {
      await shOk('echo via-mount8 > "$1/f"', [mnt]);
      expect(await shOk('cat "$1/f"', [mnt])).toBe("via-mount8\n");
    });
  });

  fuseTest("a directory SOURCE is served with passthrough; a script SOURCE is loaded", async () => {
    const src = makeMountpoint("fuse-uring-mh-src-");
    writeFileSync(join(src, "on-disk.txt"), "from the source dir\n");
    const mnt = mountpoint();
    const r = await run(["mount", "-t", "fuse.fuse-uring", src, mnt]);
    expect(r.code, fmt(r)).toBe(0);
    await expectServedThenUmount(mnt, async () => {
      expect(await shOk('cat "$1/on-disk.txt"', [mnt])).toBe("from the source dir\n");
      await shOk('echo written > "$1/new.txt"', [mnt]);
      expect(readFileSync(join(src, "new.txt"), "utf8")).toBe("written\n");
    });

    const mnt2 = mountpoint();
    const s = await run(["mount", "-t", "fuse.fuse-uring", join(REPO, "examples/hello.ts"), mnt2]);
    expect(s.code, fmt(s)).toBe(0);
    await expectServedThenUmount(mnt2, async () => {
      expect(await shOk('cat "$1/hello.txt"', [mnt2])).toBe("Hello, world!\n");
    });
    cleanupMountpoints(new Set([src]));
  });

  fuseTest("an fstab line: mount -T FSTAB MNT", async () => {
    const mnt = mountpoint();
    const fstab = join(mnt, "..", "fstab");
    writeFileSync(fstab, `# test fstab\nmemfs ${mnt} fuse.fuse-uring noauto,ro,fsname=fstabfs,entry_timeout=2 0 0\n`);
    const r = await run(["mount", "-T", fstab, mnt]);
    expect(r.code, fmt(r)).toBe(0);
    const m = fuseMountAt(mnt)!;
    expect(m.source).toBe("fstabfs");
    expect(m.options.split(",")).toContain("ro");
    await expectServedThenUmount(mnt, async () => {
      const w = await run(["sh", "-c", 'echo x > "$1/f"', "sh", mnt]);
      expect(w.code).not.toBe(0);
      expect(w.stderr).toContain("Read-only file system");
    });
  });

  fuseTest("failures: non-zero exit with the reason, nothing mounted", async () => {
    const mnt = mountpoint();
    const bad = await run(["mount", "-t", "fuse.fuse-uring", "memfs", mnt, "-o", "frobnicate"]);
    expect(bad.code, fmt(bad)).not.toBe(0);
    expect(bad.stderr).toContain('unknown mount option "frobnicate"');

    const nosrc = await run(["mount", "-t", "fuse.fuse-uring", "/nonexistent/src", mnt]);
    expect(nosrc.code, fmt(nosrc)).not.toBe(0);
    expect(nosrc.stderr).toContain("/nonexistent/src");

    // The daemon itself fails (a script that throws while loading): its reason comes back.
    const dir = join(mnt, "..");
    mkdirSync(dir, { recursive: true });
    const script = join(dir, "broken.ts");
    writeFileSync(script, 'throw new Error("broken on purpose");\nexport default {};\n');
    const broken = await run(["mount", "-t", "fuse.fuse-uring", script, mnt], { timeoutMs: 40_000 });
    expect(broken.code, fmt(broken)).toBe(32);
    expect(broken.stderr).toContain("broken on purpose");
    expect(fuseMountAt(mnt)).toBeUndefined();
  });
});
