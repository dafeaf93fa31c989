// Unprivileged mount through fusermount3 (the _FUSE_COMMFD protocol), as a throwaway user.
import { beforeAll, afterAll, describe, expect } from "bun:test";
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  BUN,
  REPO,
  cleanupAfterEach,
  fmt,
  fuseMountAt,
  fuseTest,
  isMounted,
  registerMountpoint,
  run,
  startDaemon,
  transportHooks,
} from "../helpers/index.ts";

const USER = "fuseuringtest";

describe("unprivileged mount via fusermount3 (classic)", () => {
  transportHooks("classic");
  cleanupAfterEach();

  let uid = -1;
  let gid = -1;
  let work = "";
  let home = "";
  let repo = REPO;
  let bun = BUN;
  const userEnv = () => ["env", `HOME=${home}`, `TMPDIR=${home}`, "PATH=/usr/local/bin:/usr/bin:/bin", "BUN_RUNTIME_TRANSPILER_CACHE_PATH=0"];
  const asUser = (cmd: string[]) => ["runuser", "-u", USER, "--", ...userEnv(), ...cmd];
  // setpriv execs in place (no intermediate process), so signals reach the daemon directly.
  const asUserExec = (cmd: string[]) => ["setpriv", `--reuid=${uid}`, `--regid=${gid}`, "--init-groups", "--", ...userEnv(), ...cmd];

  let devFuseMode: number | undefined;
  beforeAll(async () => {
    // fusermount3 opens /dev/fuse with the caller's identity; distributions ship it 0666,
    // some containers create it 0600. Make it world-accessible for the test, restore afterwards.
    const mode = statSync("/dev/fuse").mode & 0o777;
    if ((mode & 0o006) !== 0o006) {
      devFuseMode = mode;
      chmodSync("/dev/fuse", 0o666);
    }
    if ((await run(["id", "-u", USER])).code !== 0) {
      const r = await run(["useradd", "-M", "-s", "/usr/sbin/nologin", USER]);
      if (r.code !== 0) throw new Error(`cannot create user ${USER}:\n${fmt(r)}`);
    }
    uid = Number((await run(["id", "-u", USER])).stdout.trim());
    gid = Number((await run(["id", "-g", USER])).stdout.trim());
    work = mkdtempSync("/tmp/fuse-uring-test-unpriv-");
    chmodSync(work, 0o755);
    home = join(work, "home");
    mkdirSync(home);
    chownSync(home, uid, gid);

    // The user must be able to read the code and run bun; otherwise run from a readable copy.
    const canRead = async (r: string, b: string) =>
      (await run(asUser(["sh", "-c", 'test -r "$1/bin/fuse-uring.ts" && test -r "$1/lib/index.ts" && test -x "$2" && "$2" --version', "sh", r, b]))).code === 0;
    if (!(await canRead(repo, bun))) {
      const copy = join(work, "repo");
      for (const p of ["bin", "lib", "zig-out", "package.json"]) if (existsSync(join(REPO, p))) cpSync(join(REPO, p), join(copy, p), { recursive: true });
      const realBun = realpathSync(BUN);
      cpSync(realBun, join(copy, "bun"));
      await run(["chmod", "-R", "a+rX", copy]);
      chmodSync(join(copy, "bun"), 0o755);
      repo = copy;
      bun = join(copy, "bun");
      if (!(await canRead(repo, bun))) throw new Error(`user ${USER} can read neither ${REPO} nor the copy ${copy}`);
    }
  });

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
    if (devFuseMode !== undefined) chmodSync("/dev/fuse", devFuseMode);
  });

  fuseTest(
    "mount as the user, write and read as the user, fusermount3 -u",
    async () => {
      const dir = mkdtempSync(join(work, "m-"));
      chmodSync(dir, 0o755);
      const mnt = join(dir, "mnt");
      mkdirSync(mnt);
      chownSync(mnt, uid, gid);
      registerMountpoint(mnt, dir);

      const d = await startDaemon(["--transport", "classic"], {
        mnt,
        command: (m, args) => asUser([bun, `${repo}/bin/fuse-uring.ts`, "mount", "--memfs", m, ...args]),
        cwd: home,
        readyTimeoutMs: 20_000,
      });
      expect(d.transport).toBe("classic");
      const m = fuseMountAt(mnt)!;
      expect(m.superOptions).toContain(`user_id=${uid}`);

      const w = await run(asUser(["sh", "-c", 'echo "hello from $(id -un)" > "$1/f" && mkdir "$1/d" && cat "$1/f" && stat -c "%U %a" "$1/f"', "sh", mnt]));
      expect(w.code, fmt(w)).toBe(0);
      expect(w.stdout).toBe(`hello from ${USER}\n${USER} 644\n`);
      const ls = await run(asUser(["ls", "-A", mnt]));
      expect(ls.stdout.split("\n").filter(Boolean).sort()).toEqual(["d", "f"]);

      // Without allow_other even root is kept out by the kernel.
      const root = await run(["stat", `${mnt}/f`]);
      expect(root.code).not.toBe(0);
      expect(root.stderr).toContain("Permission denied");

      const u = await run(asUser(["fusermount3", "-u", mnt]));
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, `daemon still running after fusermount3 -u\n${d.stderr()}`).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(isMounted(mnt)).toBe(false);
    },
    90_000,
  );

  fuseTest(
    "the user's daemon exits 0 on SIGTERM and its mount is gone",
    async () => {
      const dir = mkdtempSync(join(work, "m-"));
      chmodSync(dir, 0o755);
      const mnt = join(dir, "mnt");
      mkdirSync(mnt);
      chownSync(mnt, uid, gid);
      registerMountpoint(mnt, dir);
      const d = await startDaemon(["--transport", "classic"], {
        mnt,
        command: (m, args) => asUserExec([bun, `${repo}/bin/fuse-uring.ts`, "mount", "--memfs", m, ...args]),
        cwd: home,
        readyTimeoutMs: 20_000,
      });
      expect(Number((await run(["stat", "-c", "%u", `/proc/${d.proc.pid}`])).stdout.trim())).toBe(uid);
      const w = await run(asUser(["sh", "-c", 'echo x > "$1/f"', "sh", mnt]));
      expect(w.code, fmt(w)).toBe(0);
      expect(await d.stop("SIGTERM", 15_000), d.stderr()).toBe(0);
      expect(isMounted(mnt)).toBe(false);
    },
    90_000,
  );

  fuseTest(
    "a root mount is closed to other users unless --allow-other is given",
    async () => {
      for (const allowOther of [false, true]) {
        const d = await startDaemon(["--transport", "classic", ...(allowOther ? ["--allow-other"] : [])]);
        await run(["chmod", "755", d.mnt, dirname(d.mnt)]);
        await run(["sh", "-c", 'echo shared > "$1/f" && chmod 644 "$1/f"', "sh", d.mnt]);
        const r = await run(asUser(["cat", `${d.mnt}/f`]));
        if (allowOther) {
          expect(r.code, fmt(r)).toBe(0);
          expect(r.stdout).toBe("shared\n");
          // default_permissions: the user may read but not write root's 0644 file
          const w = await run(asUser(["sh", "-c", 'echo x >> "$1/f"', "sh", d.mnt]));
          expect(w.code).not.toBe(0);
          expect(w.stderr).toContain("Permission denied");
        } else {
          expect(r.code).not.toBe(0);
          expect(r.stderr).toContain("Permission denied");
        }
        expect(await d.stop()).toBe(0);
      }
    },
    60_000,
  );
});
