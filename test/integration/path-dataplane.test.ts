// The native data plane under the path layer (docs/DATAPLANE.md, lib/path/backing.ts): path
// handlers whose open/create return backed(fd | path | Bun.file) get READ, WRITE and FSYNC of
// those files answered by the shim, on both transports. Every test checks bytes (through the
// mount against the source, and back) and the stats that prove who answered: native counters
// grow, `ops` shows no READ/WRITE reaching JS, every native handle is unmapped at the end, and
// the daemon holds no descriptor of the source once the clients are gone.
//
// Fixtures: test/fixtures/backed-fs.ts (modes fd, fdclose, path, bunfile; bad descriptors),
// test/fixtures/tree-bunfile.ts, examples/mirror.ts. The mount is driven only by child
// processes (python3, coreutils); the test process touches the source directory only.

import { describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, TRANSPORTS,
  cleanupAfterEach, fmt, fuseTest, readStats, run, scratchDirs, sha256, sha256sum, shOk, sleep, startDaemon, transportHooks,
  type Daemon, type Stats,
} from "../helpers/index.ts";

const MiB = 1 << 20;
const SIZES = [0, 1, 4096, MiB + 1];
const scratch = scratchDirs("fuse-uring-pdp-");

function script(path: string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, CLI, "mount", path, mnt, ...args];
}

interface Backed {
  d: Daemon;
  src: string;
  log: string;
  stats: string;
  /** A scratch directory outside the source (payload files). */
  tmp: string;
}

async function startBacked(transport: string, mode: string, extra: string[] = []): Promise<Backed> {
  const tmp = scratch();
  const src = join(tmp, "src");
  mkdirSync(src);
  const log = join(tmp, "release.log");
  writeFileSync(log, "");
  const stats = join(tmp, "stats.json");
  const d = await startDaemon(["--transport", transport, "--stats-file", stats, ...extra], {
    command: script(`${REPO}/test/fixtures/backed-fs.ts`),
    env: { BACKED_SRC: src, BACKED_MODE: mode, BACKED_LOG: log },
  });
  return { d, src, log, stats, tmp };
}

const ops = (s: Stats) => s.ops as Record<string, number>;

/** Descriptors the daemon holds on files under `dir` (readlink of /proc/PID/fd/*). */
function fdsUnder(pid: number, dir: string): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target === dir || target.startsWith(dir + "/")) out.push(`${fd} -> ${target}`);
    } catch {} // closed meanwhile
  }
  return out;
}

/** RELEASE is sent after close(2) returns: wait (bounded) until the daemon let go of `dir`. */
async function expectNoFdsUnder(d: Daemon, dir: string): Promise<void> {
  const deadline = Date.now() + 5000;
  let left = fdsUnder(d.proc.pid, dir);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(50);
    left = fdsUnder(d.proc.pid, dir);
  }
  expect(left).toEqual([]);
}

/** Stop, and check the final stats: every native handle was unmapped. */
async function stopAndCheckHandles(b: { d: Daemon; stats: string }): Promise<void> {
  expect(await b.d.stop("SIGTERM")).toBe(0);
  expect(Number((await readStats(b.stats)).nativeHandles)).toBe(0);
}

async function py(code: string, args: string[]): Promise<string> {
  const r = await run([PYTHON, "-c", code, ...args], { timeoutMs: 60_000 });
  expect(r.code, fmt(r)).toBe(0);
  return r.stdout.trim();
}

// Short reads at EOF: pread across and at the end of each file.
const SHORT_READS = `
import os, sys, json
out = []
for p, size in zip(sys.argv[1::2], sys.argv[2::2]):
    size = int(size)
    fd = os.open(p, os.O_RDONLY)
    across = os.pread(fd, 100, max(0, size - 1))
    at = os.pread(fd, 100, size)
    os.close(fd)
    out.append([len(across), len(at)])
print(json.dumps(out))
`;

// Stat while a backed file is open and written natively, after ftruncate, after close; O_APPEND;
// O_TRUNC; the mode of a created file.
const STAT_SCRIPT = `
import os, sys, json
m = sys.argv[1]
r = {}
p = os.path.join(m, "grow")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o640)
os.pwrite(fd, b"a" * 10000, 0)
r["open"] = [os.stat(p).st_size, os.fstat(fd).st_size]
os.pwrite(fd, b"b" * 10, 20000)
st = os.stat(p)
r["extended"] = [st.st_size, st.st_blocks > 0]
os.ftruncate(fd, 3000)
r["ftruncate"] = [os.stat(p).st_size, os.fstat(fd).st_size]
os.fsync(fd)
os.close(fd)
r["closed"] = os.stat(p).st_size
r["mode"] = os.stat(p).st_mode & 0o777
a = os.path.join(m, "app")
for i in range(3):
    fd = os.open(a, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"line%d\\n" % i)
    os.close(fd)
with open(p, "w") as f:  # O_TRUNC: a SETATTR without fh after the OPEN
    f.write("short")
r["otrunc"] = os.stat(p).st_size
print(json.dumps(r))
`;

for (const transport of TRANSPORTS) {
  describe(`path layer, backed files over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    for (const mode of ["fd", "fdclose", "path", "bunfile"]) {
      fuseTest(`${mode}: byte-exact at 0, 1, 4096, 1 MiB+1 (buffered, O_DIRECT), short reads at EOF; served natively; descriptors closed`, async () => {
        const b = await startBacked(transport, mode);
        const m = b.d.mnt;
        let read = 0;
        let written = 0;
        for (const size of SIZES) {
          const data = randomBytes(size);
          writeFileSync(`${b.src}/in-${size}`, data);
          expect(await sha256sum(`${m}/in-${size}`)).toBe(sha256(data));
          const direct = await shOk(`dd if="$1" iflag=direct bs=1M status=none | sha256sum`, [`${m}/in-${size}`]);
          expect(direct.split(" ")[0]).toBe(sha256(data));
          read += 2 * size;
          // writes through create (cp) and, aligned, with O_DIRECT
          writeFileSync(`${b.tmp}/payload`, data);
          await shOk(`cp "$1" "$2"`, [`${b.tmp}/payload`, `${m}/out-${size}`]);
          expect(sha256(readFileSync(`${b.src}/out-${size}`))).toBe(sha256(data));
          written += size;
          if (size % 4096 === 0 && size > 0) {
            await shOk(`dd if="$1" of="$2" oflag=direct bs=1M status=none`, [`${b.tmp}/payload`, `${m}/outd-${size}`]);
            expect(sha256(readFileSync(`${b.src}/outd-${size}`))).toBe(sha256(data));
            written += size;
          }
        }
        const short = JSON.parse(await py(SHORT_READS, SIZES.flatMap((s) => [`${m}/in-${s}`, String(s)])));
        expect(short).toEqual(SIZES.map((s) => [Math.min(s, 1), 0]));
        const s = await readStats(b.stats, { until: (x) => Number(x.nativeWriteBytes) >= written });
        expect(s.dataPlane).toBe("native");
        expect(Number(s.nativeRequests)).toBeGreaterThan(10);
        expect(Number(s.nativeReadBytes)).toBeGreaterThanOrEqual(read);
        expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual(written);
        expect(ops(s).READ ?? 0).toBe(0); // no READ reached JS
        expect(ops(s).WRITE ?? 0).toBe(0);
        expect(ops(s).CREATE).toBeGreaterThan(0);
        await expectNoFdsUnder(b.d, b.src); // the layer's and the handler's (mode fd closes its own in release)
        await stopAndCheckHandles(b);
      }, 90_000);
    }

    for (const mode of ["path", "fd"]) {
      fuseTest(`${mode}: stat sees native writes while open and after close; ftruncate, O_TRUNC, O_APPEND, create's mode`, async () => {
        const b = await startBacked(transport, mode);
        const r = JSON.parse(await py(STAT_SCRIPT, [b.d.mnt]));
        expect(r.open).toEqual([10000, 10000]);
        expect(r.extended).toEqual([20010, true]);
        expect(r.ftruncate).toEqual([3000, 3000]);
        expect(r.closed).toBe(3000);
        expect(r.mode).toBe(0o640);
        expect(r.otrunc).toBe(5);
        expect(readFileSync(`${b.src}/grow`, "utf8")).toBe("short");
        expect(statSync(`${b.src}/grow`).mode & 0o777).toBe(0o640);
        expect(readFileSync(`${b.src}/app`, "utf8")).toBe("line0\nline1\nline2\n");
        const s = await readStats(b.stats, { until: (x) => Number(x.nativeWriteBytes) >= 10010 + 18 });
        expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual(10010 + 18 + 5);
        expect(ops(s).WRITE ?? 0).toBe(0);
        expect(ops(s).FSYNC ?? 0).toBe(0); // answered natively too
        expect(ops(s).SETATTR).toBeGreaterThan(0); // ftruncate and O_TRUNC: the layer's ftruncate
        await expectNoFdsUnder(b.d, b.src);
        await stopAndCheckHandles(b);
      }, 60_000);
    }

    fuseTest("bad descriptors answer EIO with one log line each, still get their release, are closed; the daemon serves on", async () => {
      const b = await startBacked(transport, "path");
      writeFileSync(`${b.src}/good`, "good\n");
      const code = `
import os, sys, json
m = sys.argv[1]
r = {}
def attempt(name, flags):
    try:
        fd = os.open(os.path.join(m, name), flags)
    except OSError as e:
        return e.errno
    data = os.read(fd, 100) if flags == os.O_RDONLY else b""
    os.close(fd)
    return data.decode()
r["rdonly-write"] = attempt("bad-rdonly", os.O_WRONLY)
r["rdonly-read"] = attempt("bad-rdonly", os.O_RDONLY)
for n in ["bad-wronly", "bad-opath", "bad-dir", "bad-closed", "bad-pathdir", "bad-missing"]:
    r[n] = attempt(n, os.O_RDONLY)
r["good"] = attempt("good", os.O_RDONLY)
print(json.dumps(r))
`;
      const r = JSON.parse(await py(code, [b.d.mnt]));
      expect(r).toEqual({
        "rdonly-write": 5, "rdonly-read": "bad target\n", "bad-wronly": 5, "bad-opath": 5, "bad-dir": 5, "bad-closed": 5,
        "bad-pathdir": 5, "bad-missing": 2, good: "good\n",
      });
      const lines = b.d.stderr().split("\n").filter((l) => l.includes("cannot serve it"));
      expect(lines.length).toBe(6);
      for (const [name, why] of [
        ["bad-rdonly", "open read-only, but the caller opened the file for writing"], ["bad-wronly", "open write-only"],
        ["bad-opath", "O_PATH"], ["bad-dir", "a directory"], ["bad-closed", "not an open file descriptor"], ["bad-pathdir", "a directory"],
      ] as const) {
        expect(lines.filter((l) => l.includes(`"/${name}"`) && l.includes(why)).length).toBe(1);
      }
      await sleep(200); // RELEASE of the good opens is asynchronous
      const releases = readFileSync(b.log, "utf8");
      for (const n of ["bad-rdonly", "bad-wronly", "bad-opath", "bad-dir", "bad-closed", "bad-pathdir", "bad-missing"]) {
        expect(releases).toContain(`release /${n}\n`);
      }
      await expectNoFdsUnder(b.d, b.src); // close: true descriptors closed by the layer, failed or not
      expect(await shOk(`cat "$1/good"`, [b.d.mnt])).toBe("good\n");
      await stopAndCheckHandles(b);
    }, 60_000);

    fuseTest("--writeback-cache: writers get read-write descriptors without O_APPEND (page read-modify-write, appends)", async () => {
      const b = await startBacked(transport, "path", ["--writeback-cache"]);
      writeFileSync(`${b.src}/wb`, "a".repeat(100));
      const code = `
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY)          # the kernel must READ the page through this handle
os.pwrite(fd, b"XY", 50)
os.close(fd)
fd = os.open(p, os.O_WRONLY | os.O_APPEND)  # the kernel appends; the page goes back at offset 0
os.write(fd, b"tail")
os.fsync(fd)
os.close(fd)
print(os.stat(p).st_size)
`;
      expect(await py(code, [`${b.d.mnt}/wb`])).toBe("104");
      expect(readFileSync(`${b.src}/wb`, "utf8")).toBe("a".repeat(50) + "XY" + "a".repeat(48) + "tail");
      const s = await readStats(b.stats, { until: (x) => Number(x.nativeWriteBytes) > 0 });
      expect(Number(s.nativeReadBytes)).toBeGreaterThan(0);
      expect(Number(s.nativeWriteBytes)).toBeGreaterThan(0);
      expect(ops(s).READ ?? 0).toBe(0);
      expect(ops(s).WRITE ?? 0).toBe(0);
      await expectNoFdsUnder(b.d, b.src);
      await stopAndCheckHandles(b);
    }, 60_000);

    fuseTest("--data-plane js: the layer serves READ/WRITE from the same descriptors (no native requests)", async () => {
      const b = await startBacked(transport, "path", ["--data-plane", "js"]);
      const data = randomBytes(MiB + 1);
      writeFileSync(`${b.src}/f`, data);
      expect(await sha256sum(`${b.d.mnt}/f`)).toBe(sha256(data));
      await shOk(`cp "$1/f" "$1/g"`, [b.d.mnt]);
      expect(sha256(readFileSync(`${b.src}/g`))).toBe(sha256(data));
      const r = JSON.parse(await py(STAT_SCRIPT, [b.d.mnt]));
      expect([r.open, r.extended, r.ftruncate, r.closed, r.otrunc]).toEqual([[10000, 10000], [20010, true], [3000, 3000], 3000, 5]);
      expect(readFileSync(`${b.src}/app`, "utf8")).toBe("line0\nline1\nline2\n");
      const s = await readStats(b.stats, { until: (x) => (ops(x).WRITE ?? 0) > 0 });
      expect(s.dataPlane).toBe("js");
      expect(Number(s.nativeRequests)).toBe(0);
      expect(ops(s).READ).toBeGreaterThan(0);
      expect(ops(s).WRITE).toBeGreaterThan(0);
      await expectNoFdsUnder(b.d, b.src);
      expect(await b.d.stop("SIGTERM")).toBe(0);
    }, 60_000);

    fuseTest("examples/mirror.ts: a mirrored directory with natively served files", async () => {
      const tmp = scratch();
      const src = join(tmp, "src");
      mkdirSync(`${src}/sub`, { recursive: true });
      const data = randomBytes(MiB + 1);
      writeFileSync(`${src}/sub/big`, data);
      writeFileSync(`${src}/small.txt`, "small\n");
      const stats = join(tmp, "stats.json");
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], { command: script("./examples/mirror.ts"), env: { MIRROR_DIR: src } });
      const m = d.mnt;
      expect((await shOk(`ls "$1"`, [m])).split("\n").filter(Boolean)).toEqual(["small.txt", "sub"]);
      expect(await sha256sum(`${m}/sub/big`)).toBe(sha256(data));
      expect(await shOk(`cat "$1/small.txt"`, [m])).toBe("small\n");
      await shOk(`cp "$1/sub/big" "$1/copy" && mkdir "$1/d" && mv "$1/copy" "$1/d/moved" && echo more >> "$1/small.txt"`, [m]);
      expect(sha256(readFileSync(`${src}/d/moved`))).toBe(sha256(data));
      expect(readFileSync(`${src}/small.txt`, "utf8")).toBe("small\nmore\n");
      expect(await shOk(`stat -c %s "$1/d/moved"`, [m])).toBe(`${MiB + 1}\n`);
      await shOk(`truncate -s 10 "$1/d/moved" && ln -s ../small.txt "$1/d/link" && cat "$1/d/link" >/dev/null && rm "$1/d/moved" "$1/d/link" && rmdir "$1/d"`, [m]);
      expect(readdirSync(src).sort()).toEqual(["small.txt", "sub"]);
      const s = await readStats(stats, { until: (x) => Number(x.nativeWriteBytes) >= MiB + 1 || (Number(x.backedOps) > 0 && Number(x.nativeWriteBytes) >= 5) });
      // cp copies with copy_file_range(2) (coreutils 9), answered from the two backing
      // descriptors (backedOps): the copy's bytes never pass through FUSE. A cp that reads and
      // writes instead goes through the native plane both ways.
      const cfr = Number(s.backedOps) > 0;
      expect(Number(s.nativeReadBytes)).toBeGreaterThanOrEqual((cfr ? 1 : 2) * (MiB + 1));
      expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual((cfr ? 0 : MiB + 1) + 5);
      expect(ops(s).READ ?? 0).toBe(0);
      expect(ops(s).WRITE ?? 0).toBe(0);
      await expectNoFdsUnder(d, src);
      await stopAndCheckHandles({ d, stats });
    }, 60_000);

    fuseTest("tree() with Bun.file: readers are served natively, a writer of a writable entry keeps the snapshot path", async () => {
      const dir = scratch();
      const data = randomBytes(MiB + 1);
      writeFileSync(`${dir}/data.bin`, data);
      writeFileSync(`${dir}/rw.txt`, "original\n");
      const stats = join(scratch(), "stats.json"); // not under dir: its descriptors are counted
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
        command: script(`${REPO}/test/fixtures/tree-bunfile.ts`), env: { TREE_DIR: dir },
      });
      const m = d.mnt;
      expect(await sha256sum(`${m}/data.bin`)).toBe(sha256(data));
      const direct = await shOk(`dd if="$1" iflag=direct bs=1M status=none | sha256sum`, [`${m}/data.bin`]);
      expect(direct.split(" ")[0]).toBe(sha256(data));
      expect(await shOk(`cat "$1/rw.txt"`, [m])).toBe("original\n");
      expect(await shOk(`stat -c %s "$1/data.bin"`, [m])).toBe(`${MiB + 1}\n`);
      const before = await readStats(stats, { until: (x) => Number(x.nativeReadBytes) >= 2 * (MiB + 1) + 9 });
      expect(Number(before.nativeReadBytes)).toBeGreaterThanOrEqual(2 * (MiB + 1) + 9);
      expect(ops(before).READ ?? 0).toBe(0);
      await shOk(`printf changed > "$1/rw.txt"`, [m]);
      expect(readFileSync(`${dir}/rw.written`, "utf8")).toBe("changed");
      expect(await shOk(`cat "$1/text.txt"`, [m])).toBe("plain text\n");
      const s = await readStats(stats, { until: (x) => (ops(x).WRITE ?? 0) > 0 });
      expect(ops(s).WRITE).toBeGreaterThan(0); // the writer went through the snapshot
      expect(Number(s.nativeWriteBytes)).toBe(0);
      await expectNoFdsUnder(d, dir);
      await stopAndCheckHandles({ d, stats });
    }, 60_000);
  });
}
