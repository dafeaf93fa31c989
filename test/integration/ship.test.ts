// Shipping: the standalone binary (bun build --compile, shim embedded) copied alone into an
// empty directory; the npm tarball installed into a fresh project and run through bunx; the
// unprivileged mount as a throwaway user; stale-mount recovery after kill -9.
// Every mount is served by a separate process and driven from other processes.
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  BUN,
  CLI,
  REPO,
  cleanupAfterEach,
  fmt,
  forceUnmount,
  fuseMountAt,
  fuseTest,
  getEnableUring,
  isMounted,
  makeMountpoint,
  registerMountpoint,
  run,
  setEnableUring,
  sleep,
  shOk,
  startDaemon,
  transportHooks,
  type Daemon,
} from "../helpers/index.ts";

const REAL_BUN = realpathSync(BUN);

/** A scratch directory under /tmp readable by everyone (the throwaway user runs from it). */
function scratch(prefix: string): string {
  const d = mkdtempSync(join("/tmp", prefix));
  chmodSync(d, 0o755);
  return d;
}

/** A filesystem script that imports the library as "fuse-uring" (from wherever it runs). */
const SCRIPT = `import { memfs, FuseError } from "fuse-uring";
// FuseError from "fuse-uring" must be the class the daemon checks, or EACCES turns into EIO.
export default () => {
  const fs = memfs();
  const lookup = fs.lookup.bind(fs);
  fs.lookup = (ctx, parent, name) => {
    if (name === "forbidden") throw new FuseError("EACCES");
    return lookup(ctx, parent, name);
  };
  return fs;
};
`;

/** Write, read back (small and 3 MiB), list, and the script's EACCES; all from child processes. */
async function roundTrip(mnt: string, opts: { asUser?: (cmd: string[]) => string[]; script?: boolean } = {}): Promise<void> {
  const wrap = opts.asUser ?? ((c: string[]) => c);
  const r = await run(
    wrap([
      "sh",
      "-c",
      'set -e; printf "round trip\\n" > "$1/f"; cat "$1/f"; head -c 3145728 /dev/urandom > "$2"; cp "$2" "$1/big"; cmp "$2" "$1/big"; mkdir "$1/d"; ls "$1" | tr "\\n" " "; rm "$2"',
      "sh",
      mnt,
      `/tmp/fuse-uring-ship-rt-${process.pid}-${Math.random().toString(36).slice(2)}`,
    ]),
    { timeoutMs: 30_000 },
  );
  expect(r.code, fmt(r)).toBe(0);
  expect(r.stdout).toBe("round trip\nbig d f ");
  if (opts.script) {
    const s = await run(wrap(["stat", `${mnt}/forbidden`]), { timeoutMs: 10_000 });
    expect(s.code).not.toBe(0);
    expect(s.stderr, fmt(s)).toContain("Permission denied");
  }
}

// ---------------------------------------------------------------------------------------------

describe("standalone binary (dist/fuse-uring)", () => {
  cleanupAfterEach();
  let work = "";
  let bin = "";
  let binDir = "";
  const minimalEnv = (home: string, extra: string[] = []) => ["env", "-i", "PATH=/usr/bin:/bin", `HOME=${home}`, ...extra];

  beforeAll(async () => {
    work = scratch("fuse-uring-ship-bin-");
    const built = join(work, "build", "fuse-uring");
    const t0 = Date.now();
    const r = await run(["bash", `${REPO}/scripts/compile.sh`, "--outfile", built], { timeoutMs: 170_000 });
    if (r.code !== 0) throw new Error(`compile failed:\n${fmt(r)}`);
    console.error(`[ship] compiled in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    binDir = join(work, "empty");
    mkdirSync(binDir);
    chmodSync(binDir, 0o755);
    bin = join(binDir, "fuse-uring");
    copyFileSync(built, bin);
    chmodSync(bin, 0o755);
    rmSync(join(work, "build"), { recursive: true, force: true });
    mkdirSync(join(work, "home"));
  }, 180_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  fuseTest("runs alone in an empty directory: --help, doctor", async () => {
    expect(readdirSync(binDir)).toEqual(["fuse-uring"]);
    const h = await run([...minimalEnv(join(work, "home")), bin, "--help"], { cwd: binDir });
    expect(h.code, fmt(h)).toBe(0);
    expect(h.stdout).toContain("fuse-uring mount --memfs");
    expect(h.stdout).toContain("doctor");
    const d = await run([...minimalEnv(join(work, "home"), [`TMPDIR=${work}`]), bin, "doctor", "--json"], { cwd: binDir, timeoutMs: 30_000 });
    expect(d.code, fmt(d)).toBe(0);
    const rep = JSON.parse(d.stdout);
    expect(rep.ok).toBe(true);
    // The embedded shim was copied to $TMPDIR/fuse-uring-<uid>/ and loaded from there.
    expect(rep.shim).toStartWith(join(work, `fuse-uring-${process.getuid!()}`) + "/libfuse_uring_shim-");
  }, 60_000);

  fuseTest("mounts memfs: read/write round trip; `fuse-uring unmount` ends the daemon with exit 0", async () => {
    const d = await startDaemon([], {
      command: (mnt) => [...minimalEnv(join(work, "home")), bin, "mount", "--memfs", mnt],
      cwd: binDir,
    });
    expect(d.transport).toBe(getEnableUring() === "Y" ? "uring" : "classic");
    await roundTrip(d.mnt);
    const u = await run([...minimalEnv(join(work, "home")), bin, "unmount", d.mnt], { cwd: binDir });
    expect(u.code, fmt(u)).toBe(0);
    const r = await d.waitExit(10_000);
    expect(r.exited && r.code, d.stderr()).toBe(0);
    expect(isMounted(d.mnt)).toBe(false);
  }, 60_000);

  fuseTest("mounts a .ts filesystem script whose `import … from \"fuse-uring\"` gets the embedded library", async () => {
    const sdir = join(work, "scripts");
    mkdirSync(sdir, { recursive: true });
    writeFileSync(join(sdir, "myfs.ts"), SCRIPT);
    const d = await startDaemon([], {
      command: (mnt) => [...minimalEnv(join(work, "home")), bin, "mount", join(sdir, "myfs.ts"), mnt, "--transport", "classic"],
      cwd: sdir,
    });
    expect(d.transport).toBe("classic");
    await roundTrip(d.mnt, { script: true });
    expect(await d.stop()).toBe(0);
  }, 60_000);

  fuseTest("--workers 2: the worker threads start from the embedded entry point and serve both CPUs", async () => {
    const sdir = join(work, "scripts-workers");
    mkdirSync(sdir, { recursive: true });
    // A replicable inode filesystem with no imports: node ids are computed, so every copy agrees.
    copyFileSync(join(REPO, "bench", "fs", "burn.ts"), join(sdir, "burn.ts"));
    const d = await startDaemon([], {
      command: (mnt) => [...minimalEnv(join(work, "home")), bin, "mount", join(sdir, "burn.ts"), mnt, "--workers", "2", "--", "--burn-us", "1"],
      cwd: sdir,
    });
    expect(d.readyLine).toContain("2 worker threads");
    for (const cpu of ["0", "1"]) {
      const r = await run(["taskset", "-c", cpu, "dd", `if=${d.mnt}/f.0`, "of=/dev/null", "bs=4k", "count=50", "iflag=direct", "status=none"]);
      expect(r.code, fmt(r)).toBe(0);
    }
    expect(await d.stop()).toBe(0);
  }, 60_000);

  fuseTest("mount --watch: edits to the script and to a file it imports reload in place", async () => {
    const sdir = join(work, "watched");
    mkdirSync(sdir, { recursive: true });
    writeFileSync(join(sdir, "dep.ts"), `export const g = "one\\n";\n`);
    writeFileSync(join(sdir, "fs.ts"), `import { tree } from "fuse-uring";\nimport { g } from "./dep.ts";\nexport default tree({ "g.txt": g });\n`);
    const d = await startDaemon([], {
      command: (mnt) => [...minimalEnv(join(work, "home")), bin, "mount", "--watch", "./fs.ts", mnt, "--attr-ttl", "3600", "--entry-ttl", "3600"],
      cwd: sdir,
    });
    const catG = async () => (await run(["cat", `${d.mnt}/g.txt`])).stdout;
    const waitLine = async (text: string) => {
      for (let i = 0; i < 250 && !d.stderr().includes(text); i++) await sleep(20);
      expect(d.stderr()).toContain(text);
    };
    expect(await catG()).toBe("one\n");
    writeFileSync(join(sdir, "dep.ts"), `export const g = "two\\n";\n`);
    await waitLine("(version 2)");
    expect(await catG()).toBe("two\n");
    writeFileSync(join(sdir, "fs.ts"), `import { tree } from "fuse-uring";\nexport default tree({ "g.txt": "three\\n" });\n`);
    await waitLine("(version 3)");
    expect(await catG()).toBe("three\n");
    expect(await d.stop()).toBe(0);
  }, 60_000);

  fuseTest("mounts --passthrough SRC", async () => {
    const src = join(work, "src");
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, "existing"), "from the source\n");
    const d = await startDaemon([], {
      command: (mnt) => [...minimalEnv(join(work, "home")), bin, "mount", "--passthrough", src, mnt],
      cwd: binDir,
    });
    const r = await run(["sh", "-c", 'cat "$1/existing" && echo new > "$1/created"', "sh", d.mnt]);
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout).toBe("from the source\n");
    expect(readFileSync(join(src, "created"), "utf8")).toBe("new\n");
    expect(await d.stop()).toBe(0);
  }, 60_000);

  // The default `--workers auto` runs the built-in filesystems as a copy per CPU. In the binary
  // their copy modules are not files: each worker imports them from its own bundle
  // (lib/embedded-copies.ts). Proven by the binary's own `stats`: every worker served requests,
  // none forwarded; data and metadata made through one CPU are seen through the other.
  describe("--memfs and --passthrough with the default workers: a copy per CPU", () => {
    transportHooks("uring");
    const cpus = Math.min(availableParallelism(), 8);

    async function copiesOnEveryCpu(fsArgs: string[], mnt: string): Promise<void> {
      const env = minimalEnv(join(work, "home"));
      const d = await startDaemon([], { mnt, command: (m) => [...env, bin, "mount", ...fsArgs, m], cwd: binDir });
      const on = (cpu: number, script: string) => shOk(`taskset -c ${cpu} sh -c '${script}' "$1"`, [d.mnt], { timeoutMs: 30_000 });
      if (cpus < 2) {
        // One CPU: auto is one thread (nothing to spread copies over); it must still serve.
        expect(d.readyLine).not.toContain("worker threads");
        expect(await on(0, 'echo one > "$0/f" && cat "$0/f" && rm "$0/f"')).toBe("one\n");
        expect(await d.stop()).toBe(0);
        return;
      }
      expect(d.readyLine).toContain(`${cpus} worker threads, copies`);
      const data = join(work, `data-${process.pid}`);
      writeFileSync(data, randomBytes(1 << 20));
      await on(0, `mkdir "$0/d" && echo made-on-0 > "$0/d/a" && cp ${data} "$0/d/big"`);
      expect(await on(1, `cat "$0/d/a"; cmp ${data} "$0/d/big" && echo same`)).toBe("made-on-0\nsame\n");
      await on(1, 'echo more >> "$0/d/a" && mv "$0/d/a" "$0/d/b"');
      expect(await on(0, 'ls "$0/d" | tr "\\n" " "; cat "$0/d/b"')).toBe("b big made-on-0\nmore\n");
      // An errno from a copy (FuseError of the worker's bundle) arrives as itself, not EIO.
      const e = await run(["taskset", "-c", "1", "mkdir", `${d.mnt}/d`]);
      expect(e.stderr, fmt(e)).toContain("File exists");
      await Promise.all([0, 1].map((cpu) => on(cpu, `for i in $(seq 50); do echo $i > "$0/f${cpu}-$i" && stat "$0/f${cpu}-$i" >/dev/null && rm "$0/f${cpu}-$i"; done`)));
      await on(0, 'rm -r "$0/d"');
      rmSync(data);
      type Thread = { thread: string; requests: number };
      let snap: { workerMode?: string; forwarded?: number; threads: Thread[] } = { threads: [] };
      const workers = () => snap.threads.filter((t) => t.thread.startsWith("worker"));
      for (let i = 0; i < 50; i++) {
        const r = await run([...env, bin, "stats", d.mnt, "--once", "--json"], { cwd: binDir });
        expect(r.code, fmt(r)).toBe(0);
        snap = JSON.parse(r.stdout);
        // The loop on CPU c alone is 150 requests (CREATE, GETATTR/LOOKUP, UNLINK…) for worker c.
        if (workers().filter((t) => t.requests >= 150).length >= 2) break;
        await sleep(100); // workers publish their counters every 500 ms
      }
      expect(snap.workerMode).toBe("copies");
      expect(Number(snap.forwarded ?? 0)).toBe(0);
      expect(workers().length, JSON.stringify(snap.threads)).toBe(cpus);
      expect(workers().filter((t) => t.requests >= 150).length, JSON.stringify(snap.threads)).toBeGreaterThanOrEqual(2);
      expect(await d.stop()).toBe(0);
    }

    fuseTest("--memfs", async () => {
      await copiesOnEveryCpu(["--memfs"], makeMountpoint("bin-ship-"));
    }, 60_000);

    fuseTest("--passthrough SRC", async () => {
      const src = join(work, "copies-src");
      mkdirSync(src, { recursive: true });
      await copiesOnEveryCpu(["--passthrough", src], makeMountpoint("bin-ship-"));
      expect(readdirSync(src)).toEqual([]);
    }, 60_000);
  });

  // $TMPDIR, /tmp and /dev/shm mounted noexec (a private mount namespace), no $HOME: the shim
  // lands next to the binary; with that read-only too, the error names the variable to set.
  const inNamespace = (binDirMode: "rw" | "ro", extraEnv: string[], extraSetup = "") => [
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    `set -e
mount --bind /tmp /tmp && mount -o remount,bind,noexec /tmp
mount --bind /dev/shm /dev/shm && mount -o remount,bind,noexec /dev/shm
mount --bind "$1" "$1" && mount -o remount,bind,exec,${binDirMode} "$1"
${extraSetup}
shift
exec "$@"`,
    "sh",
    binDir,
    "env",
    "-i",
    "PATH=/usr/bin:/bin",
    "HOME=/nonexistent",
    "TMPDIR=/tmp",
    ...extraEnv,
    bin,
    "doctor",
    "--json",
  ];

  fuseTest("TMPDIR and /dev/shm noexec, no HOME: loads the shim from the binary's directory", async () => {
    const r = await run(inNamespace("rw", []), { cwd: "/", timeoutMs: 30_000 });
    expect(r.code, fmt(r)).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.shim).toStartWith(join(binDir, ".libfuse_uring_shim-"));
    for (const f of readdirSync(binDir)) if (f.startsWith(".libfuse_uring_shim-")) rmSync(join(binDir, f));
  }, 60_000);

  fuseTest("no usable directory at all: says what to set; FUSE_URING_SHIM_DIR fixes it", async () => {
    const r = await run(inNamespace("ro", []), { cwd: "/", timeoutMs: 30_000 });
    expect(r.code, fmt(r)).toBe(1);
    const shim = JSON.parse(r.stdout).checks.find((c: { id: string }) => c.id === "shim");
    expect(shim.status).toBe("FAIL");
    expect(shim.message).toContain("FUSE_URING_SHIM_DIR");
    expect(shim.message).toContain("noexec");

    const execDir = join(work, "execdir");
    mkdirSync(execDir, { recursive: true });
    const ok = await run(inNamespace("ro", [`FUSE_URING_SHIM_DIR=${execDir}`], `mount -t tmpfs -o exec none "${execDir}"`), { cwd: "/", timeoutMs: 30_000 });
    expect(ok.code, fmt(ok)).toBe(0);
    expect(JSON.parse(ok.stdout).shim).toStartWith(join(execDir, "libfuse_uring_shim-"));
  }, 60_000);

  // ---- unprivileged (throwaway user) ------------------------------------------------------------
  describe("as a throwaway non-root user", () => {
    const USER = "fuseuringship";
    let uid = -1;
    let gid = -1;
    let devMode = -1;
    let created = false;
    const userEnv = (extra: string[] = []) => ["env", "-i", "PATH=/usr/bin:/bin", "HOME=/nonexistent", ...extra];
    /** setpriv execs in place: signals reach the daemon itself. */
    const asUser = (cmd: string[], extra: string[] = []) => ["setpriv", `--reuid=${uid}`, `--regid=${gid}`, "--init-groups", "--", ...userEnv(extra), ...cmd];
    const userMountpoint = () => {
      const dir = mkdtempSync(join(work, "u-"));
      chmodSync(dir, 0o755);
      const mnt = join(dir, "mnt");
      mkdirSync(mnt);
      chownSync(mnt, uid, gid);
      registerMountpoint(mnt, dir);
      return mnt;
    };

    beforeAll(async () => {
      if ((await run(["id", "-u", USER])).code !== 0) {
        const r = await run(["useradd", "-M", "-s", "/usr/sbin/nologin", USER]);
        if (r.code !== 0) throw new Error(`useradd failed:\n${fmt(r)}`);
        created = true;
      }
      uid = Number((await run(["id", "-u", USER])).stdout.trim());
      gid = Number((await run(["id", "-g", USER])).stdout.trim());
      rmSync(`/tmp/fuse-uring-${uid}`, { recursive: true, force: true });
      rmSync(`/dev/shm/fuse-uring-${uid}`, { recursive: true, force: true });
      // fusermount3 opens /dev/fuse with the user's rights; distributions make it 0666 (udev).
      devMode = statSync("/dev/fuse").mode & 0o777;
      if ((devMode & 0o006) !== 0o006) chmodSync("/dev/fuse", 0o666);
    }, 30_000);

    afterAll(async () => {
      if (devMode >= 0) chmodSync("/dev/fuse", devMode);
      rmSync(`/tmp/fuse-uring-${uid}`, { recursive: true, force: true });
      rmSync(`/dev/shm/fuse-uring-${uid}`, { recursive: true, force: true });
      if (created) await run(["userdel", USER]);
    }, 30_000);

    fuseTest("mounts memfs through fusermount3 on io_uring where allowed; round trip; fusermount3 -u", async () => {
      const mnt = userMountpoint();
      const d = await startDaemon([], { mnt, command: (m) => asUser([bin, "mount", "--memfs", m]), cwd: binDir, readyTimeoutMs: 20_000 });
      expect(Number((await run(["stat", "-c", "%u", `/proc/${d.proc.pid}`])).stdout.trim())).toBe(uid);
      expect(fuseMountAt(mnt)!.superOptions).toContain(`user_id=${uid}`);
      const disabled = existsSync("/proc/sys/kernel/io_uring_disabled") ? readFileSync("/proc/sys/kernel/io_uring_disabled", "utf8").trim() : "0";
      if (getEnableUring() === "Y" && disabled === "0") expect(d.transport, d.readyLine).toBe("uring");
      else expect(d.readyLine).toMatch(/transport=classic: .+/);
      await roundTrip(mnt, { asUser: (c) => asUser(c) });
      const u = await run(asUser(["fusermount3", "-u", mnt]));
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, d.stderr()).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(isMounted(mnt)).toBe(false);
    }, 60_000);

    fuseTest("with enable_uring=N: classic, and the ready line says why", async () => {
      const old = getEnableUring();
      setEnableUring("N");
      try {
        const mnt = userMountpoint();
        const d = await startDaemon([], { mnt, command: (m) => asUser([bin, "mount", "--memfs", m]), cwd: binDir, readyTimeoutMs: 20_000 });
        expect(d.transport).toBe("classic");
        expect(d.readyLine).toContain("enable_uring");
        await roundTrip(mnt, { asUser: (c) => asUser(c) });
        expect(await d.stop()).toBe(0);
      } finally {
        setEnableUring(old);
      }
    }, 60_000);

    fuseTest("unwritable TMPDIR and a foreign /tmp/fuse-uring-<uid>: the shim goes to a safe place", async () => {
      // Somebody else (root here) owns /tmp/fuse-uring-<uid>: it must not be used.
      rmSync(`/tmp/fuse-uring-${uid}`, { recursive: true, force: true });
      rmSync(`/dev/shm/fuse-uring-${uid}`, { recursive: true, force: true });
      mkdirSync(`/tmp/fuse-uring-${uid}`, { mode: 0o777 });
      chmodSync(`/tmp/fuse-uring-${uid}`, 0o777);
      try {
        const ro = join(work, "ro-tmp");
        mkdirSync(ro, { recursive: true });
        chmodSync(ro, 0o755);
        const r = await run(asUser([bin, "doctor", "--json"], [`TMPDIR=${ro}`]), { cwd: binDir, timeoutMs: 30_000 });
        const rep = JSON.parse(r.stdout || "{}");
        expect(rep.shim, fmt(r)).toStartWith(`/dev/shm/fuse-uring-${uid}/libfuse_uring_shim-`);
        expect(statSync(`/dev/shm/fuse-uring-${uid}`).mode & 0o777).toBe(0o700);
        expect(r.code, fmt(r)).toBe(0);
      } finally {
        rmSync(`/tmp/fuse-uring-${uid}`, { recursive: true, force: true });
      }
    }, 60_000);

    fuseTest("stale mount left by kill -9 is cleaned up (fusermount3 -u -z) and mounted again", async () => {
      const mnt = userMountpoint();
      const first = await startDaemon([], { mnt, command: (m) => asUser([bin, "mount", "--memfs", m]), cwd: binDir, readyTimeoutMs: 20_000 });
      await killAndWaitDead(first, (c) => asUser(c));
      const second = await startDaemon([], { mnt, command: (m) => asUser([bin, "mount", "--memfs", m]), cwd: binDir, readyTimeoutMs: 20_000 });
      expect(second.stderr()).toContain("was a dead FUSE mount");
      await roundTrip(mnt, { asUser: (c) => asUser(c) });
      expect(await second.stop()).toBe(0);
      expect(isMounted(mnt)).toBe(false);
    }, 60_000);
  });
});

/** SIGKILL the daemon and wait until its mount answers ENOTCONN ("Transport endpoint…"). */
async function killAndWaitDead(d: Daemon, wrap: (cmd: string[]) => string[] = (c) => c): Promise<void> {
  d.proc.kill("SIGKILL");
  const r = await d.waitExit(10_000);
  expect(r.exited).toBe(true);
  let stat = await run(wrap(["stat", d.mnt]), { timeoutMs: 10_000 });
  for (let i = 0; i < 50 && !stat.stderr.includes("Transport endpoint is not connected"); i++) {
    await sleep(100);
    stat = await run(wrap(["stat", d.mnt]), { timeoutMs: 10_000 });
  }
  expect(stat.stderr, fmt(stat)).toContain("Transport endpoint is not connected");
  expect(isMounted(d.mnt)).toBe(true);
}

// ---------------------------------------------------------------------------------------------

describe("stale mount recovery (CLI)", () => {
  cleanupAfterEach();

  fuseTest("mount on a mountpoint whose daemon was killed -9: one-line notice, lazy unmount, mounted again", async () => {
    const mnt = makeMountpoint();
    const d1 = await startDaemon([], { mnt });
    await killAndWaitDead(d1);
    const d2 = await startDaemon([], { mnt });
    const notices = d2.stderr().split("\n").filter((l) => l.includes("dead FUSE mount"));
    expect(notices.length, d2.stderr()).toBe(1);
    expect(notices[0]).toContain("Transport endpoint is not connected");
    expect(d2.stderr()).not.toContain("cannot mount");
    // Exactly one FUSE mount at mnt now, and it works.
    expect(readFileSync("/proc/self/mountinfo", "utf8").split("\n").filter((l) => l.split(" ")[4] === mnt).length).toBe(1);
    await roundTrip(mnt);
    expect(await d2.stop()).toBe(0);
    expect(isMounted(mnt)).toBe(false);
  }, 60_000);

  fuseTest("`fuse-uring unmount` also cleans a dead mount", async () => {
    const d = await startDaemon([]);
    await killAndWaitDead(d);
    const r = await run([BUN, CLI, "unmount", d.mnt]);
    expect(r.code, fmt(r)).toBe(0);
    expect(isMounted(d.mnt)).toBe(false);
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------

describe("npm package (npm pack → bunx / bun add)", () => {
  cleanupAfterEach();
  let work = "";
  let tgz = "";
  let files: string[] = [];
  let packLog = "";
  let bunbin = "";
  /** No Zig, no repo: only bun/bunx and the system. A fresh HOME = a fresh bun cache. */
  const env = (home: string) => ["env", "-i", `PATH=${bunbin}:/usr/bin:/bin`, `HOME=${home}`];

  beforeAll(async () => {
    work = scratch("fuse-uring-ship-pkg-");
    const t0 = Date.now();
    const r = await run(["npm", "pack", "--json", "--pack-destination", work], { cwd: REPO, timeoutMs: 280_000 });
    if (r.code !== 0) throw new Error(`npm pack failed:\n${fmt(r)}`);
    packLog = r.stderr;
    const info = JSON.parse(r.stdout.slice(r.stdout.search(/^\[\s*\{/m)))[0];
    tgz = join(work, info.filename);
    files = info.files.map((f: { path: string }) => f.path);
    console.error(`[ship] npm pack in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${info.filename}, ${(info.size / 1048576).toFixed(1)} MiB, ${files.length} files`);
    bunbin = join(work, "bunbin");
    mkdirSync(bunbin);
    symlinkSync(REAL_BUN, join(bunbin, "bun"));
    symlinkSync(REAL_BUN, join(bunbin, "bunx"));
  }, 300_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  fuseTest("the tarball holds the library, the CLI and the prebuilt shims, and nothing to build", async () => {
    expect(files).toContain("prebuilt/linux-x64/libfuse_uring_shim.so");
    if (packLog.includes("SKIPPED linux-arm64")) console.error(`[ship] arm64 shim not packed:\n${packLog.split("\n").filter((l) => l.includes("arm64")).join("\n")}`);
    else expect(files).toContain("prebuilt/linux-arm64/libfuse_uring_shim.so");
    for (const f of ["lib/index.ts", "bin/fuse-uring.ts", "bin/commands/doctor.ts", "bin/self-module.ts", "package.json", "README.md"]) expect(files).toContain(f);
    for (const f of files) expect(f).not.toMatch(/^(test|zig-out|node_modules|dist|\.zig-cache|\.cache|bench)\/|compile-entry/);
    const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8"));
    for (const s of ["preinstall", "install", "postinstall", "prepare"]) expect(pkg.scripts?.[s]).toBeUndefined();
    expect(pkg.dependencies ?? {}).toEqual({});
  });

  fuseTest("bunx --package /abs/path/fuse-uring-<v>.tgz fuse-uring mount --memfs MNT (no Zig, no repo)", async () => {
    const home = join(work, "home-bunx");
    mkdirSync(home, { recursive: true });
    const d = await startDaemon([], { command: (mnt) => [...env(home), "bunx", "--package", tgz, "fuse-uring", "mount", "--memfs", mnt], cwd: work, readyTimeoutMs: 60_000 });
    await roundTrip(d.mnt);
    expect(await d.stop()).toBe(0);

    // A script outside any project imports "fuse-uring": resolved to the package bunx runs.
    const sdir = join(work, "scripts");
    mkdirSync(sdir, { recursive: true });
    writeFileSync(join(sdir, "myfs.ts"), SCRIPT);
    const s = await startDaemon([], { command: (mnt) => [...env(home), "bunx", "--package", tgz, "fuse-uring", "mount", join(sdir, "myfs.ts"), mnt], cwd: sdir, readyTimeoutMs: 60_000 });
    await roundTrip(s.mnt, { script: true });
    expect(await s.stop()).toBe(0);
  }, 120_000);

  fuseTest("bun add ./fuse-uring-<v>.tgz in a project: import { mount, memfs } from \"fuse-uring\"; its CLI works", async () => {
    const proj = join(work, "proj");
    const home = join(work, "home-proj");
    mkdirSync(proj, { recursive: true });
    mkdirSync(home, { recursive: true });
    writeFileSync(join(proj, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const add = await run([...env(home), "bun", "add", tgz], { cwd: proj, timeoutMs: 60_000 });
    expect(add.code, fmt(add)).toBe(0);
    expect(existsSync(join(proj, "node_modules/fuse-uring/prebuilt/linux-x64/libfuse_uring_shim.so"))).toBe(true);
    writeFileSync(
      join(proj, "app.ts"),
      `import { mount, memfs, FuseError } from "fuse-uring";
const mnt = process.argv[2]!;
const m = await mount(mnt, memfs());
console.error(\`fuse-uring: mounted app at \${mnt} (transport=\${m.transport}: \${m.transportReason})\`);
if (typeof FuseError !== "function") throw new Error("FuseError missing");
process.on("SIGTERM", () => void m.unmount());
console.error("app: session ended:", await m.closed);
`,
    );
    const d = await startDaemon([], { command: (mnt) => [...env(home), "bun", "app.ts", mnt], cwd: proj, readyTimeoutMs: 30_000 });
    await roundTrip(d.mnt);
    expect(await d.stop()).toBe(0);
    expect(d.stderr()).toContain("app: session ended");

    // The package's bin in the project, loading the shim from the package's prebuilt/.
    const doc = await run([...env(home), join(proj, "node_modules/.bin/fuse-uring"), "doctor", "--json"], { cwd: proj, timeoutMs: 30_000 });
    expect(doc.code, fmt(doc)).toBe(0);
    expect(JSON.parse(doc.stdout).shim).toEndWith("/node_modules/fuse-uring/prebuilt/linux-x64/libfuse_uring_shim.so");
  }, 120_000);
});

// Leave nothing mounted even if a test failed half-way.
afterAll(() => {
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const mp = line.split(" ")[4];
    if (mp && /\/fuse-uring-ship-/.test(mp)) forceUnmount(mp);
  }
});
