// `fuse-uring mount --passthrough SRC MNT`: a tmpfs source mirrored through the mount, on every
// transport. Data written through the mount must land byte-exact in SRC and the other way
// round (up to 64 MiB, random offsets, O_DIRECT and buffered, fio with verification), metadata
// ops must do the same thing to SRC, errors from SRC (ENOSPC, EROFS, EPERM, EACCES) must reach
// the caller unchanged, fsync'd data must survive kill -9 of the daemon, the ring transport must
// move file data with fixed-buffer I/O, and with --kernel-passthrough file data must bypass the
// daemon entirely.
//
// Everything on the mount is done by child processes (coreutils, python3, dd, fio); the test
// process only reads and writes SRC (a tmpfs) directly.
//
// NOTE for the session owner:
// - Kernel passthrough: the stats have no per-opcode counters; this file counts READ/WRITE
//   lines of --debug output instead. A `"ops": {"READ": n, "WRITE": n, …}` field would do.
// - (open) ctx.backingRead/backingWrite issued after an await on the ring transport is queued
//   (UringSource.io sets pendingKick) but nothing schedules a flush, so it waits for the next
//   doorbell. PassthroughFS avoids it by starting backing I/O before awaiting anything.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import {
  BUN, CLI, PYTHON, TRANSPORTS,
  cleanupAfterEach, dropCaches, fmt, fsop, fsopOk, fuseTest, isMounted, readStats, run, sha256, sha256sum,
  passthroughSubclass, sharedDaemon, shOk, sleep, startDaemon, transportHooks, setEnableUring, getEnableUring, registerMountpoint,
  type Daemon, type Stats,
} from "../helpers/index.ts";

const MiB = 1 << 20;

// ---- sources: one tmpfs per use, always unmounted at the end ----------------------------------

const tmpfsDirs = new Set<string>();

async function mountTmpfs(options = "size=1g", prefix = "fuse-uring-pt-src-"): Promise<string> {
  const dir = mkdtempSync(join("/tmp", prefix));
  const r = await run(["mount", "-t", "tmpfs", "-o", options, "fuse-uring-pt", dir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`cannot mount a tmpfs source:\n${fmt(r)}`);
  tmpfsDirs.add(dir);
  chmodSync(dir, 0o755);
  return dir;
}

async function unmountTmpfs(dir: string): Promise<void> {
  await run(["umount", "-l", dir], { timeoutMs: 10_000 });
  tmpfsDirs.delete(dir);
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {}
}

const scratchFiles: string[] = [];

// File-level hooks run after every describe's own afterAll (shared daemons are stopped by then).
afterAll(async () => {
  for (const d of [...tmpfsDirs]) await unmountTmpfs(d);
  for (const f of scratchFiles) rmSync(f, { force: true });
}, 30_000);

let enableUringBefore: "Y" | "N" | undefined;
beforeAll(() => {
  // io_uring for FUSE is off by default; the uring suites and the auto-transport tests need it.
  if (existsSync("/sys/module/fuse/parameters/enable_uring")) {
    enableUringBefore = getEnableUring();
    setEnableUring("Y");
  }
});
afterAll(() => {
  if (enableUringBefore) setEnableUring(enableUringBefore);
});

/** argv builder for startDaemon/sharedDaemon: `mount --passthrough SRC MNT args…`. */
function ptCommand(src: () => string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, CLI, "mount", "--passthrough", src(), mnt, ...args];
}

/** A file of random bytes in `dir` (written by the test process, i.e. directly on SRC/tmpfs). */
function randomFile(path: string, size: number): string {
  const data = size ? randomBytes(size) : Buffer.alloc(0);
  writeFileSync(path, data);
  return sha256(data);
}

function fileSha(path: string): string {
  return sha256(readFileSync(path));
}

/** Random pwrites through the mount (python, buffered or O_DIRECT), then preads checked against a model; prints the model's sha256. */
const RANDOM_IO = String.raw`
import os, sys, random, hashlib, mmap
path, size, n, seed, direct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
rnd = random.Random(seed)
model = bytearray(size)
fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_DIRECT if direct else 0), 0o644)
os.ftruncate(fd, size)
align = 4096 if direct else 1
buf = mmap.mmap(-1, 1 << 20)  # page aligned, as O_DIRECT wants
def pick():
    ln = rnd.randrange(1, (1 << 20) // align + 1) * align
    off = rnd.randrange(0, (size - ln) // align + 1) * align
    return off, ln
for i in range(n):
    off, ln = pick()
    data = rnd.randbytes(ln)
    buf[:ln] = data
    w = os.pwritev(fd, [memoryview(buf)[:ln]], off)
    assert w == ln, ("short write", w, ln)
    model[off:off + ln] = data
for i in range(n):
    off, ln = pick()
    got = os.preadv(fd, [memoryview(buf)[:ln]], off)
    assert got == ln and buf[:ln] == model[off:off + ln], ("mismatch at", off, ln, got)
os.close(fd)
print(hashlib.sha256(model).hexdigest())
`;

/** errno of one syscall sequence run by python in a child: {"ok":…, "code":…}. */
async function pyErrno(code: string, args: string[], prefix: string[] = []): Promise<{ ok: boolean; code?: string; out?: string }> {
  const wrapped = `import os, sys, errno, json\ntry:\n${code.split("\n").map((l) => "    " + l).join("\n")}\n    print(json.dumps({"ok": True}))\nexcept OSError as e:\n    print(json.dumps({"ok": False, "code": errno.errorcode.get(e.errno, str(e.errno))}))\n`;
  const r = await run([...prefix, PYTHON, "-c", wrapped, ...args], { timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(`python failed:\n${fmt(r)}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

/** Open descriptors of a process. */
function fdCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return -1;
  }
}

/** READ/WRITE requests the daemon logged with --debug (`rx N READ nX …`). */
function debugOps(stderr: string, op: string): number {
  // With --workers N in copies mode a worker's trace lines start with "[worker i] ".
  return stderr.split("\n").map((l) => l.replace(/^\[worker \d+\] /, "")).filter((l) => l.startsWith("rx ") && l.split(" ")[2] === op).length;
}

function requestCount(s: Stats): number {
  return s.ringRequests + s.devRequests;
}

for (const transport of TRANSPORTS) {
  describe(`passthrough over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    let SRC = "";
    const statsFile = `/tmp/fuse-uring-pt-stats-${process.pid}-${transport}.json`;
    beforeAll(async () => {
      SRC = await mountTmpfs("size=2g");
    }, 30_000);
    scratchFiles.push(statsFile);
    // Shared daemon (started after SRC exists: hooks run in registration order).
    const s = sharedDaemon(() => ["--transport", transport, "--stats-file", statsFile, "--allow-other"], { command: ptCommand(() => SRC) });

    fuseTest("ready line names the transport; the mount shows SRC's files", async () => {
      expect(s.d.readyLine).toContain(`transport=${transport}`);
      expect(s.d.readyLine).toContain("passthrough");
      writeFileSync(`${SRC}/hello`, "hello passthrough\n");
      mkdirSync(`${SRC}/sub`, { recursive: true });
      const out = await shOk('ls -a "$1"; cat "$1/hello"', [s.mnt]);
      expect(out).toContain("hello");
      expect(out).toContain("sub");
      expect(out).toContain("hello passthrough");
    }, 30_000);

    for (const size of [0, 1, 4095, 4096, 131073, 8 * MiB + 1, 64 * MiB]) {
      fuseTest(`${size} bytes: cp and dd (buffered, O_DIRECT) through the mount land byte-exact in SRC and read back`, async () => {
        const dir = `sizes-${size}`;
        mkdirSync(`${SRC}/${dir}`, { recursive: true });
        const input = `/dev/shm/fuse-uring-pt-${process.pid}-${size}`;
        const sha = randomFile(input, size);
        try {
          await shOk('cp "$1" "$2/cp"', [input, `${s.mnt}/${dir}`], { timeoutMs: 60_000 });
          await shOk('dd if="$1" of="$2/dd" bs=1M status=none', [input, `${s.mnt}/${dir}`], { timeoutMs: 60_000 });
          await shOk('dd if="$1" of="$2/direct" bs=1M oflag=direct status=none', [input, `${s.mnt}/${dir}`], { timeoutMs: 60_000 });
        } finally {
          rmSync(input, { force: true });
        }
        for (const name of ["cp", "dd", "direct"]) {
          expect(statSync(`${SRC}/${dir}/${name}`).size).toBe(size);
          expect(fileSha(`${SRC}/${dir}/${name}`)).toBe(sha);
          expect(await sha256sum(`${s.mnt}/${dir}/${name}`)).toBe(sha);
        }
        // O_DIRECT read through the mount, then a cold buffered read.
        const direct = await run(["sh", "-c", 'dd if="$1" bs=1M iflag=direct status=none | sha256sum', "sh", `${s.mnt}/${dir}/direct`], { timeoutMs: 60_000 });
        expect(direct.code).toBe(0);
        expect(direct.stdout.split(/\s+/)[0]).toBe(sha);
        await dropCaches();
        expect(await sha256sum(`${s.mnt}/${dir}/cp`)).toBe(sha);
      }, 120_000);
    }

    fuseTest("files written in SRC read back byte-exact through the mount (new, rewritten, grown)", async () => {
      mkdirSync(`${SRC}/fromsrc`, { recursive: true });
      const sizes = [1, 65536, 3 * MiB + 17, 32 * MiB];
      const shas = sizes.map((n, i) => randomFile(`${SRC}/fromsrc/f${i}`, n));
      for (let i = 0; i < sizes.length; i++) expect(await sha256sum(`${s.mnt}/fromsrc/f${i}`)).toBe(shas[i]!);
      // Rewrite in place (same size) and grow; the mount must show it once the attribute
      // cache (1 s) expired: AUTO_INVAL_DATA plus a fresh open drop stale pages.
      const same = randomFile(`${SRC}/fromsrc/f1`, 65536);
      const grown = randomFile(`${SRC}/fromsrc/f2`, 5 * MiB + 3);
      await sleep(1300);
      expect(await sha256sum(`${s.mnt}/fromsrc/f1`)).toBe(same);
      expect(await sha256sum(`${s.mnt}/fromsrc/f2`)).toBe(grown);
      expect((await shOk('stat -c %s "$1"', [`${s.mnt}/fromsrc/f2`])).trim()).toBe(String(5 * MiB + 3));
    }, 90_000);

    for (const direct of [false, true]) {
      fuseTest(`random-offset pwrite/pread ${direct ? "with O_DIRECT" : "buffered"} (32 MiB file): SRC equals the writer's model`, async () => {
        const name = `random-${direct ? "direct" : "buffered"}`;
        const r = await run([PYTHON, "-c", RANDOM_IO, `${s.mnt}/${name}`, String(32 * MiB), "200", direct ? "7" : "8", direct ? "1" : "0"], { timeoutMs: 120_000 });
        expect(r.code, fmt(r)).toBe(0);
        const model = r.stdout.trim();
        expect(model).toMatch(/^[0-9a-f]{64}$/);
        expect(fileSha(`${SRC}/${name}`)).toBe(model);
        expect(await sha256sum(`${s.mnt}/${name}`)).toBe(model);
      }, 150_000);
    }

    fuseTest("fio: 4 jobs of random read/write with crc32c verification, buffered and direct", async () => {
      for (const direct of ["0", "1"]) {
        const r = await run([
          "fio", "--name=pt", `--directory=${s.mnt}`, "--rw=randrw", "--bsrange=4k-256k", "--size=16M", "--numjobs=4",
          "--ioengine=psync", `--direct=${direct}`, "--verify=crc32c", "--do_verify=1", "--verify_fatal=1", "--group_reporting",
          `--filename_format=fio-${direct}.$jobnum`,
        ], { timeoutMs: 120_000 });
        expect(r.code, fmt(r)).toBe(0);
        expect(r.stdout).not.toContain("verify failed");
        for (let j = 0; j < 4; j++) {
          const f = `fio-${direct}.${j}`;
          expect(statSync(`${SRC}/${f}`).size).toBe(16 * MiB);
          expect(await sha256sum(`${s.mnt}/${f}`)).toBe(fileSha(`${SRC}/${f}`));
        }
      }
    }, 180_000);

    fuseTest(transport === "uring" ? "stats: file data moved with fixed-buffer I/O (fixedIo > 0)" : "stats: classic transport, no ring requests", async () => {
      randomFile(`${SRC}/stats-file`, 4 * MiB);
      expect(await sha256sum(`${s.mnt}/stats-file`)).toBe(fileSha(`${SRC}/stats-file`));
      await shOk('dd if=/dev/urandom of="$1" bs=1M count=4 status=none', [`${s.mnt}/stats-written`]);
      const st = await readStats(statsFile, { timeoutMs: 5000, until: (x) => (transport === "uring" ? Number(x.fixedIo) > 0 : x.devRequests > 10) });
      expect(st.transport).toBe(transport);
      if (transport === "uring") {
        expect(Number(st.fixedIo)).toBeGreaterThan(0);
        expect(st.ringRequests).toBeGreaterThan(0);
      } else {
        expect(Number(st.fixedIo)).toBe(0);
        expect(st.ringRequests).toBe(0);
        expect(st.devRequests).toBeGreaterThan(10);
      }
    }, 60_000);

    fuseTest("names: mkdir, create, rename (files and a whole subtree), hard link, symlink, mknod, unlink, rmdir mirror SRC", async () => {
      const m = `${s.mnt}/names`, src = `${SRC}/names`;
      await shOk('mkdir -p "$1/a/b/c" && echo deep > "$1/a/b/c/f" && echo top > "$1/top"', [m]);
      expect(readFileSync(`${src}/a/b/c/f`, "utf8")).toBe("deep\n");
      // Rename a directory with cached children, then use the children under the new name.
      await shOk('cat "$1/a/b/c/f" >/dev/null && mv "$1/a" "$1/z" && cat "$1/z/b/c/f" && echo more >> "$1/z/b/c/f"', [m]);
      expect(existsSync(`${src}/a`)).toBe(false);
      expect(readFileSync(`${src}/z/b/c/f`, "utf8")).toBe("deep\nmore\n");
      // Rename over an existing file, NOREPLACE and EXCHANGE.
      await shOk('echo one > "$1/r1" && echo two > "$1/r2" && mv "$1/r1" "$1/r2"', [m]);
      expect(readFileSync(`${src}/r2`, "utf8")).toBe("one\n");
      writeFileSync(`${src}/x1`, "x1");
      writeFileSync(`${src}/x2`, "x2");
      const nr = await fsop("renameat2", `${m}/x1`, `${m}/x2`, "noreplace");
      expect(nr).toMatchObject({ ok: false, code: "EEXIST" });
      await fsopOk("renameat2", `${m}/x1`, `${m}/x2`, "exchange");
      expect(readFileSync(`${src}/x1`, "utf8")).toBe("x2");
      expect(readFileSync(`${src}/x2`, "utf8")).toBe("x1");
      await fsopOk("renameat2", `${m}/x1`, `${m}/x3`, "noreplace");
      expect(existsSync(`${src}/x3`)).toBe(true);
      // Hard links share an inode (number and link count) on both sides.
      await shOk('ln "$1/top" "$1/top2"', [m]);
      const ino = (await shOk('stat -c "%i %h" "$1/top" "$1/top2"', [m])).trim().split("\n");
      expect(ino[0]).toBe(ino[1]);
      expect(ino[0]).toBe(`${statSync(`${src}/top`).ino} 2`);
      // Symlinks: created through the mount, read on both sides.
      await shOk('ln -s "z/b/c/f" "$1/sl"', [m]);
      expect(readlinkSync(`${src}/sl`)).toBe("z/b/c/f");
      expect((await shOk('readlink "$1/sl"; cat "$1/sl"', [m])).trim()).toBe("z/b/c/f\ndeep\nmore");
      // FIFOs and device nodes.
      await fsopOk("mknod", `${m}/fifo`, "p");
      await fsopOk("mknod", `${m}/null`, "c", 1, 3, "0o666");
      expect(lstatSync(`${src}/fifo`).isFIFO()).toBe(true);
      const dev = lstatSync(`${src}/null`);
      expect(dev.isCharacterDevice()).toBe(true);
      expect(await fsopOk("stat", `${m}/null`)).toMatchObject({ rdev_major: 1, rdev_minor: 3 });
      // Removal.
      expect(await fsop("rmdir", `${m}/z`)).toMatchObject({ ok: false, code: "ENOTEMPTY" });
      await shOk('rm "$1/top2" "$1/sl" "$1/fifo" "$1/null" && rm -r "$1/z"', [m]);
      expect(readdirSync(src).sort()).toEqual(["r2", "top", "x2", "x3"]);
      expect(statSync(`${src}/top`).nlink).toBe(1);
      expect(await fsop("unlink", `${m}/nope`)).toMatchObject({ ok: false, code: "ENOENT" });
      expect(await fsop("mkdir", `${m}/top`)).toMatchObject({ ok: false, code: "EEXIST" });
    }, 60_000);

    fuseTest("renames done directly in SRC are followed by nodes the kernel already knows", async () => {
      mkdirSync(`${SRC}/moved/inner`, { recursive: true });
      writeFileSync(`${SRC}/moved/inner/f`, "v1");
      // Keep a process inside the directory so its node stays cached, then move it in SRC.
      const r = await run(["sh", "-c", 'cd "$1/moved/inner" && cat f && mv "$2/moved" "$2/moved2" && echo v2 > f && cat f && ls', "sh", s.mnt, SRC], { timeoutMs: 30_000 });
      expect(r.code, fmt(r)).toBe(0);
      expect(r.stdout).toBe("v1v2\nf\n");
      expect(readFileSync(`${SRC}/moved2/inner/f`, "utf8")).toBe("v2\n");
    }, 30_000);

    fuseTest("attributes: chmod, chown, truncate, utimes (ns), xattrs — same on SRC", async () => {
      const m = `${s.mnt}/attrs`, src = `${SRC}/attrs`;
      mkdirSync(src, { recursive: true });
      writeFileSync(`${src}/f`, "0123456789");
      await shOk('chmod 640 "$1/f" && chown 1234:4321 "$1/f" && truncate -s 4 "$1/f"', [m]);
      const st = statSync(`${src}/f`);
      expect(st.mode & 0o7777).toBe(0o640);
      expect([st.uid, st.gid]).toEqual([1234, 4321]);
      expect(readFileSync(`${src}/f`, "utf8")).toBe("0123");
      await fsopOk("utime_ns", `${m}/f`, "1500000000123456789", "1600000000987654321");
      const big = statSync(`${src}/f`, { bigint: true });
      expect(big.atimeNs).toBe(1500000000123456789n);
      expect(big.mtimeNs).toBe(1600000000987654321n);
      expect(await fsopOk("stat", `${m}/f`)).toMatchObject({ size: 4, uid: 1234, gid: 4321, perm: 0o640 });
      // Nanoseconds through the mount (JSON numbers cannot carry 19 digits: ask stat(1)).
      const times = (await shOk('stat -c "%x|%y" "$1"', [`${m}/f`])).trim().split("|");
      expect(times[0]).toContain(".123456789");
      expect(times[1]).toContain(".987654321");
      // Modes of new files follow the caller's umask exactly (not the daemon's).
      await shOk('umask 000 && mkdir -m 777 "$1/d777" && touch "$1/f666" && umask 077 && touch "$1/f600" && mkdir "$1/d700" && mkfifo "$1/p600"', [m]);
      const modes = ["d777", "f666", "f600", "d700", "p600"].map((n) => (lstatSync(`${src}/${n}`).mode & 0o7777).toString(8));
      expect(modes).toEqual(["777", "666", "600", "700", "600"]);
      // Extended attributes.
      await fsopOk("setxattr", `${m}/f`, "user.color", "blue");
      expect(await fsop("setxattr", `${m}/f`, "user.color", "red", "1")).toMatchObject({ ok: false, code: "EEXIST" });
      expect(await fsop("setxattr", `${m}/f`, "user.none", "x", "2")).toMatchObject({ ok: false, code: "ENODATA" });
      const get = await shOk('getfattr --only-values -n user.color "$1"', [`${src}/f`]);
      expect(get).toBe("blue");
      expect(await fsopOk("getxattr", `${m}/f`, "user.color")).toMatchObject({ ok: true, value: "blue", size: 4 });
      expect(await fsopOk("getxattr_size", `${m}/f`, "user.color", 0)).toMatchObject({ size: 4 });
      expect(await fsop("getxattr_size", `${m}/f`, "user.color", 2)).toMatchObject({ ok: false, code: "ERANGE" });
      await fsopOk("setxattr", `${m}/f`, "user.shape", "round");
      expect(await fsopOk("listxattr", `${m}/f`)).toMatchObject({ names: ["user.color", "user.shape"] });
      expect(await fsop("getxattr", `${m}/f`, "user.nothing")).toMatchObject({ ok: false, code: "ENODATA" });
      await fsopOk("removexattr", `${m}/f`, "user.color");
      const after = await run(["getfattr", "-n", "user.color", `${src}/f`]);
      expect(after.code).not.toBe(0);
    }, 60_000);

    fuseTest("times before 1970 (negative seconds, nanoseconds) read back exactly through the mount", async () => {
      const m = `${s.mnt}/times-neg`, src = `${SRC}/times-neg`;
      mkdirSync(src, { recursive: true });
      writeFileSync(`${src}/f`, "x");
      // -1.000000001 s and -0.5 s: the kernel wants tv_sec = floor, tv_nsec in [0, 1e9).
      await fsopOk("utime_ns", `${m}/f`, "-1000000001", "-500000000");
      const big = statSync(`${src}/f`, { bigint: true });
      expect([big.atimeNs, big.mtimeNs]).toEqual([-1000000001n, -500000000n]);
      await dropCaches();
      const st = await fsopOk("stat", `${m}/f`);
      expect([st.atime_ns, st.mtime_ns]).toEqual(["-1000000001", "-500000000"]);
      expect((await shOk('stat -c %y "$1"', [`${m}/f`], { env: { TZ: "UTC", LC_ALL: "C" } })).trim()).toBe("1969-12-31 23:59:59.500000000 +0000");
    });

    fuseTest("fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range, fsync, statfs", async () => {
      const m = `${s.mnt}/misc`, src = `${SRC}/misc`;
      mkdirSync(src, { recursive: true });
      await fsopOk("fallocate", `${m}/alloc`, "0", 0, 4 * MiB);
      expect(statSync(`${src}/alloc`).size).toBe(4 * MiB);
      await fsopOk("fallocate", `${m}/alloc`, "keep_size", 4 * MiB, MiB);
      expect(statSync(`${src}/alloc`).size).toBe(4 * MiB);
      expect(statSync(`${src}/alloc`).blocks * 512).toBeGreaterThanOrEqual(5 * MiB);
      // A sparse file: data at 1 MiB..2 MiB only.
      await shOk('dd if=/dev/urandom of="$1" bs=1M seek=1 count=1 status=none && truncate -s 8M "$1"', [`${m}/sparse`]);
      expect(await fsopOk("seek", `${m}/sparse`, 0, "data")).toMatchObject({ offset: MiB });
      expect(await fsopOk("seek", `${m}/sparse`, MiB, "hole")).toMatchObject({ offset: 2 * MiB });
      expect(await fsop("seek", `${m}/sparse`, 3 * MiB, "data")).toMatchObject({ ok: false, code: "ENXIO" });
      await fsopOk("fallocate", `${m}/sparse`, "punch_hole|keep_size", MiB, 4096);
      expect(await fsopOk("seek", `${m}/sparse`, 0, "data")).toMatchObject({ offset: MiB + 4096 });
      // copy_file_range inside the mount.
      const sha = randomFile(`${src}/cfr-in`, 10 * MiB + 5);
      const c = await fsopOk("copy_file_range", `${m}/cfr-in`, `${m}/cfr-out`, 10 * MiB + 5);
      expect(c).toMatchObject({ ok: true });
      expect(fileSha(`${src}/cfr-out`)).toBe(sha);
      // fsync / fdatasync / syncfs on a file through the mount.
      await shOk('dd if=/dev/zero of="$1" bs=64k count=4 conv=fsync status=none && dd if=/dev/zero of="$1" bs=64k count=4 conv=fdatasync,notrunc status=none && sync -f "$1"', [`${m}/synced`]);
      expect(statSync(`${src}/synced`).size).toBe(256 * 1024);
      // statfs reports the source's numbers.
      const a = (await fsopOk("statvfs", s.mnt)) as Record<string, number>;
      const b = (await fsopOk("statvfs", SRC)) as Record<string, number>;
      expect(a.f_blocks).toBe(b.f_blocks!);
      expect(a.f_bsize).toBe(b.f_bsize!);
      expect(a.f_namemax).toBe(b.f_namemax!);
      expect(a.f_files).toBe(b.f_files!);
    }, 60_000);

    fuseTest("readdir of 3000 entries matches SRC; lookups are given back on forget (descriptors stay bounded)", async () => {
      const src = `${SRC}/many`;
      mkdirSync(src, { recursive: true });
      for (let i = 0; i < 3000; i++) writeFileSync(`${src}/file-${i}`, String(i));
      const pid = s.d.proc.pid;
      await dropCaches();
      // FORGETs from the cache drop arrive asynchronously: count once the descriptors settle.
      let before = fdCount(pid);
      for (let i = 0; i < 20; i++) {
        await sleep(100);
        const now = fdCount(pid);
        if (now === before) break;
        before = now;
      }
      const names = (await shOk('ls -f "$1"', [`${s.mnt}/many`], { timeoutMs: 60_000 })).split("\n").filter(Boolean);
      expect(names.sort()).toEqual([".", "..", ...readdirSync(src)].sort());
      const long = await shOk('ls -l "$1" | wc -l', [`${s.mnt}/many`], { timeoutMs: 60_000 });
      expect(Number(long.trim())).toBe(3001);
      const during = fdCount(pid);
      expect(during).toBeGreaterThanOrEqual(before + 3000);
      // Evict the kernel's dentries/inodes: FORGETs come back and the daemon closes the fds.
      let after = during;
      for (let i = 0; i < 50 && after > before + 100; i++) {
        await dropCaches();
        await sleep(100);
        after = fdCount(pid);
      }
      expect(after).toBeLessThan(before + 100);
      const st = await readStats(statsFile, { until: (x) => Number(x.forgets) >= 3000 });
      expect(Number(st.forgets)).toBeGreaterThanOrEqual(3000);
    }, 120_000);

    fuseTest("errors from SRC: EPERM on an immutable file (chattr +i) for root", async () => {
      const src = `${SRC}/immutable`;
      writeFileSync(src, "frozen");
      const chattr = await run(["chattr", "+i", src]);
      expect(chattr.code, fmt(chattr)).toBe(0);
      try {
        expect(await pyErrno('os.open(sys.argv[1], os.O_WRONLY)', [`${s.mnt}/immutable`])).toEqual({ ok: false, code: "EPERM" });
        expect(await pyErrno("os.unlink(sys.argv[1])", [`${s.mnt}/immutable`])).toEqual({ ok: false, code: "EPERM" });
        expect(await pyErrno("os.rename(sys.argv[1], sys.argv[1] + '.x')", [`${s.mnt}/immutable`])).toEqual({ ok: false, code: "EPERM" });
        expect((await shOk('cat "$1"', [`${s.mnt}/immutable`]))).toBe("frozen");
      } finally {
        await run(["chattr", "-i", src]);
      }
      expect(readFileSync(src, "utf8")).toBe("frozen");
    }, 30_000);

    fuseTest("errors from SRC: EACCES for another user on a mode-000 file; that user's new files are theirs", async () => {
      // The mountpoint's parent is private (mkdtemp); let the other user walk to the mount.
      chmodSync(dirname(s.mnt), 0o755);
      writeFileSync(`${SRC}/secret`, "secret");
      chmodSync(`${SRC}/secret`, 0o000);
      writeFileSync(`${SRC}/public`, "public");
      chmodSync(`${SRC}/public`, 0o644);
      mkdirSync(`${SRC}/drop`, { recursive: true });
      chmodSync(`${SRC}/drop`, 0o1777);
      const nobody = ["runuser", "-u", "nobody", "--"];
      const pub = await run([...nobody, "cat", `${s.mnt}/public`]);
      expect(pub.code, fmt(pub)).toBe(0);
      expect(pub.stdout).toBe("public");
      const denied = await run([...nobody, "cat", `${s.mnt}/secret`]);
      expect(denied.code).not.toBe(0);
      expect(denied.stderr).toContain("Permission denied");
      expect(await pyErrno("open(sys.argv[1]).read()", [`${s.mnt}/secret`], nobody)).toEqual({ ok: false, code: "EACCES" });
      expect(await pyErrno("os.mkdir(sys.argv[1])", [`${s.mnt}/nobody-was-here`], nobody)).toEqual({ ok: false, code: "EACCES" });
      // Root (the daemon's user) still reads it, as on the source.
      expect(await shOk('cat "$1"', [`${s.mnt}/secret`])).toBe("secret");
      // Files created by the other user belong to that user in SRC.
      const mk = await run([...nobody, "sh", "-c", 'echo mine > "$1/f" && mkdir "$1/d" && ln -s f "$1/l"', "sh", `${s.mnt}/drop`]);
      expect(mk.code, fmt(mk)).toBe(0);
      for (const n of ["f", "d", "l"]) expect(lstatSync(`${SRC}/drop/${n}`).uid).toBe(65534);
      expect(readFileSync(`${SRC}/drop/f`, "utf8")).toBe("mine\n");
    }, 30_000);

    fuseTest("writes and truncates by an unprivileged owner clear set-user-ID on SRC (HANDLE_KILLPRIV_V2); root's keep it", async () => {
      chmodSync(dirname(s.mnt), 0o755);
      for (const n of ["suid-w", "suid-t", "suid-root"]) {
        writeFileSync(`${SRC}/${n}`, "#!/bin/sh\n");
        chownSync(`${SRC}/${n}`, 65534, 65534);
        chmodSync(`${SRC}/${n}`, 0o4755);
      }
      const nobody = ["runuser", "-u", "nobody", "--"];
      const w = await run([...nobody, "sh", "-c", 'echo "echo hi" >> "$1"', "sh", `${s.mnt}/suid-w`]);
      expect(w.code, fmt(w)).toBe(0);
      const t = await run([...nobody, "truncate", "-s", "2", `${s.mnt}/suid-t`]);
      expect(t.code, fmt(t)).toBe(0);
      await shOk('echo "echo root" >> "$1"', [`${s.mnt}/suid-root`]);
      expect(statSync(`${SRC}/suid-w`).mode & 0o7777).toBe(0o755);
      expect(readFileSync(`${SRC}/suid-w`, "utf8")).toBe("#!/bin/sh\necho hi\n");
      expect(statSync(`${SRC}/suid-t`).mode & 0o7777).toBe(0o755);
      expect(statSync(`${SRC}/suid-t`).size).toBe(2);
      expect(statSync(`${SRC}/suid-root`).mode & 0o7777).toBe(0o4755);
    }, 30_000);

    fuseTest("ENOSPC from a full source (tmpfs size=1m) reaches the writer", async () => {
      const small = await mountTmpfs("size=1m");
      try {
        const d = await startDaemon(["--transport", transport], { command: ptCommand(() => small) });
        const dd = await run(["dd", "if=/dev/zero", `of=${d.mnt}/big`, "bs=64k", "count=64", "status=none"]);
        expect(dd.code).not.toBe(0);
        expect(dd.stderr).toContain("No space left on device");
        const py = await pyErrno('fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\nwhile True: os.write(fd, b"x" * 65536)', [`${d.mnt}/big2`]);
        expect(py).toEqual({ ok: false, code: "ENOSPC" });
        const direct = await run(["dd", "if=/dev/zero", `of=${d.mnt}/big3`, "bs=1M", "count=4", "oflag=direct", "status=none"]);
        expect(direct.code).not.toBe(0);
        expect(direct.stderr).toContain("No space left on device");
        // The daemon survives and `rm` frees the source's space at once (the daemon must not
        // keep deleted files alive until the kernel's FORGET), also for a file that was open.
        await shOk('exec 3<"$1/big2"; rm -f "$1/big" "$1/big2" "$1/big3"; exec 3<&-; echo ok > "$1/after"', [d.mnt]);
        expect(readFileSync(`${small}/after`, "utf8")).toBe("ok\n");
        const free = statfsSync(small);
        expect(free.bfree * free.bsize).toBeGreaterThan(900 * 1024);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfs(small);
      }
    }, 60_000);

    fuseTest("EROFS from a read-only source (tmpfs remounted ro) reaches the caller; reads still work", async () => {
      const ro = await mountTmpfs("size=16m");
      try {
        writeFileSync(`${ro}/existing`, "data");
        const d = await startDaemon(["--transport", transport], { command: ptCommand(() => ro) });
        await shOk('mount -o remount,ro "$1"', [ro]);
        expect(await pyErrno("open(sys.argv[1], 'w')", [`${d.mnt}/new`])).toEqual({ ok: false, code: "EROFS" });
        expect(await pyErrno("os.open(sys.argv[1], os.O_WRONLY)", [`${d.mnt}/existing`])).toEqual({ ok: false, code: "EROFS" });
        expect(await pyErrno("os.mkdir(sys.argv[1])", [`${d.mnt}/dir`])).toEqual({ ok: false, code: "EROFS" });
        expect(await pyErrno("os.unlink(sys.argv[1])", [`${d.mnt}/existing`])).toEqual({ ok: false, code: "EROFS" });
        expect(await pyErrno("os.truncate(sys.argv[1], 0)", [`${d.mnt}/existing`])).toEqual({ ok: false, code: "EROFS" });
        expect(await shOk('cat "$1"', [`${d.mnt}/existing`])).toBe("data");
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfs(ro);
      }
    }, 60_000);

    fuseTest("fsync'd data survives kill -9 of the daemon", async () => {
      const src = await mountTmpfs("size=64m");
      try {
        const d = await startDaemon(["--transport", transport], { command: ptCommand(() => src) });
        const input = `/dev/shm/fuse-uring-pt-kill-${process.pid}`;
        const sha = randomFile(input, 8 * MiB + 123);
        try {
          await shOk('dd if="$1" of="$2" bs=1M conv=fsync status=none', [input, `${d.mnt}/durable`]);
        } finally {
          rmSync(input, { force: true });
        }
        d.proc.kill("SIGKILL");
        const r = await d.waitExit(10_000);
        expect(r.exited).toBe(true);
        expect(r.signal).toBe("SIGKILL");
        expect(fileSha(`${src}/durable`)).toBe(sha);
        await d.kill(); // abort + lazy unmount of the dead mount
        expect(isMounted(d.mnt)).toBe(false);
      } finally {
        await unmountTmpfs(src);
      }
    }, 60_000);

    fuseTest("SIGTERM unmounts and exits 0 while files were in use", async () => {
      const src = await mountTmpfs("size=16m");
      try {
        const d = await startDaemon(["--transport", transport], { command: ptCommand(() => src) });
        await shOk('echo x > "$1/f" && cat "$1/f" && ls -l "$1"', [d.mnt]);
        expect(await d.stop("SIGTERM")).toBe(0);
        expect(isMounted(d.mnt)).toBe(false);
        expect(readFileSync(`${src}/f`, "utf8")).toBe("x\n");
      } finally {
        await unmountTmpfs(src);
      }
    }, 30_000);

    fuseTest("a script extending PassthroughFS (hides *.hidden, counts opens) mounts and keeps the passthrough behaviour", async () => {
      const src = await mountTmpfs("size=16m");
      const dir = mkdtempSync("/tmp/fuse-uring-pt-script-");
      try {
        writeFileSync(`${src}/visible`, "seen\n");
        writeFileSync(`${src}/x.hidden`, "unseen\n");
        const hiding = passthroughSubclass(dir, "Hiding", `
  opens = 0;
  override async lookup(ctx: RequestContext, parent: number, name: string) {
    if (name.endsWith(".hidden")) throw new FuseError("ENOENT");
    return super.lookup(ctx, parent, name);
  }
  override readdir(ctx: RequestContext, ino: number, fh: number, offset: number, filler: DirFiller) {
    const self = this;
    return super.readdir(ctx, ino, fh, offset, {
      plus: filler.plus,
      add(name, next, entry) {
        if (!name.endsWith(".hidden")) return filler.add(name, next, entry);
        if (filler.plus && entry.ino) self.forget(entry.ino, 1); // the kernel never sees it
        return true;
      },
    });
  }
  override async open(ctx: RequestContext, ino: number, flags: number) {
    this.opens++;
    return super.open(ctx, ino, flags);
  }
`, src);
        const d = await startDaemon(["--transport", transport], hiding);
        const ls = await shOk('ls -a "$1"', [d.mnt]);
        expect(ls.split("\n").filter(Boolean).sort()).toEqual([".", "..", "visible"]);
        expect(await fsop("stat", `${d.mnt}/x.hidden`)).toMatchObject({ ok: false, code: "ENOENT" });
        expect(await shOk('cat "$1/visible" && echo more >> "$1/visible"', [d.mnt])).toBe("seen\n");
        expect(readFileSync(`${src}/visible`, "utf8")).toBe("seen\nmore\n");
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await unmountTmpfs(src);
      }
    }, 60_000);

    fuseTest("--kernel-passthrough: 64 MiB read and 16 MiB written with no READ/WRITE request in the daemon", async () => {
      const src = await mountTmpfs("size=256m");
      try {
        const stats = `${statsFile}.kp`;
        scratchFiles.push(stats);
        const d = await startDaemon(["--transport", transport, "--kernel-passthrough", "--debug", "--stats-file", stats], { command: ptCommand(() => src) });
        expect(d.stderr()).not.toContain("kernel passthrough unavailable");
        const sha = randomFile(`${src}/big`, 64 * MiB);
        const before = requestCount(await readStats(stats));
        expect(await sha256sum(`${d.mnt}/big`)).toBe(sha);
        const input = `/dev/shm/fuse-uring-pt-kp-${process.pid}`;
        const wsha = randomFile(input, 16 * MiB);
        try {
          await shOk('dd if="$1" of="$2" bs=1M status=none && dd if="$1" of="$2.direct" bs=1M oflag=direct status=none', [input, `${d.mnt}/written`]);
        } finally {
          rmSync(input, { force: true });
        }
        expect(fileSha(`${src}/written`)).toBe(wsha);
        expect(fileSha(`${src}/written.direct`)).toBe(wsha);
        // Also mmap through the mount.
        const mm = await run([PYTHON, "-c", "import mmap,sys,hashlib\nf=open(sys.argv[1],'rb')\nm=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ)\nprint(hashlib.sha256(m).hexdigest())", `${d.mnt}/big`]);
        expect(mm.stdout.trim()).toBe(sha);
        await sleep(1100);
        const after = await readStats(stats);
        const err = d.stderr();
        expect(debugOps(err, "READ")).toBe(0);
        expect(debugOps(err, "WRITE")).toBe(0);
        // 64 MiB through the daemon would take ≥ 64 READs of 1 MiB (512 of 128 KiB readahead).
        expect(requestCount(after) - before).toBeLessThan(60);
        expect(Number(after.fixedIo)).toBe(0);
        expect(err).not.toContain("CAP_SYS_ADMIN");
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfs(src);
      }
    }, 90_000);

    fuseTest("control: without --kernel-passthrough (and --data-plane js) the same read is served by READ requests", async () => {
      const src = await mountTmpfs("size=128m");
      try {
        const d = await startDaemon(["--transport", transport, "--debug", "--data-plane", "js"], { command: ptCommand(() => src) });
        const sha = randomFile(`${src}/big`, 16 * MiB);
        expect(await sha256sum(`${d.mnt}/big`)).toBe(sha);
        expect(debugOps(d.stderr(), "READ")).toBeGreaterThanOrEqual(16);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfs(src);
      }
    }, 60_000);

    fuseTest("--kernel-passthrough without CAP_SYS_ADMIN (daemon as nobody via fusermount3): logs once, serves through the daemon", async () => {
      const base = mkdtempSync("/tmp/fuse-uring-pt-user-");
      chmodSync(base, 0o755);
      const src = join(base, "src"), mnt = join(base, "mnt"), home = join(base, "home");
      for (const p of [src, mnt, home]) {
        mkdirSync(p);
        chownSync(p, 65534, 65534);
      }
      const sha = randomFile(`${src}/f`, 3 * MiB);
      chownSync(`${src}/f`, 65534, 65534);
      registerMountpoint(mnt, base);
      // /dev/fuse is 0600 on this distro; fusermount3 needs the caller to open it.
      const devMode = statSync("/dev/fuse").mode & 0o777;
      chmodSync("/dev/fuse", 0o666);
      let d: Daemon;
      try {
        // Small ring: an unprivileged user's pinned memory counts against RLIMIT_MEMLOCK (8 MiB).
        d = await startDaemon(["--transport", transport, "--kernel-passthrough", "--queue-depth", "2", "--max-write", "262144"], {
          mnt,
          prefix: ["runuser", "-u", "nobody", "--"],
          env: { HOME: home, XDG_CACHE_HOME: home },
          command: ptCommand(() => src),
        });
      } finally {
        chmodSync("/dev/fuse", devMode);
      }
      const nobody = ["runuser", "-u", "nobody", "--"];
      for (let i = 0; i < 3; i++) {
        const r = await run([...nobody, "sha256sum", `${mnt}/f`]);
        expect(r.code, fmt(r)).toBe(0);
        expect(r.stdout.split(/\s+/)[0]).toBe(sha);
      }
      const w = await run([...nobody, "sh", "-c", 'echo written > "$1/w"', "sh", mnt]);
      expect(w.code, fmt(w)).toBe(0);
      expect(readFileSync(`${src}/w`, "utf8")).toBe("written\n");
      const lines = d.stderr().split("\n").filter((l) => l.includes("kernel passthrough needs CAP_SYS_ADMIN"));
      expect(lines.length).toBe(1);
      const u = await run([...nobody, "fusermount3", "-u", mnt]);
      expect(u.code, fmt(u)).toBe(0);
      const e = await d.waitExit(10_000);
      expect(e.exited).toBe(true);
      expect(e.code).toBe(0);
    }, 60_000);
  });
}

