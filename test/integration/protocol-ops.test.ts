// Issue 24, protocol holes a real application hits, through real mounts on both transports,
// driven by separate python3 processes (test/fixtures/fileops.py, test/fixtures/locks.py):
// - fallocate (keep-size, punch-hole, zero-range), lseek SEEK_DATA/SEEK_HOLE on a sparse file,
//   copy_file_range between two files, open(O_TMPFILE) + linkat: memfs answers what tmpfs answers;
//   the passthrough and backed() path handlers answer what their backing filesystem answers
//   (compared with the same client run directly on it), from the backing descriptors (stats
//   `backedOps`; with --data-plane js the path layer does it from the same descriptors);
// - two processes contending with POSIX (fcntl), OFD and flock locks on memfs get exactly the
//   answers tmpfs gives — memfs with worker copies (the lock table is shared memory), and the
//   kernel really sent the locks to the daemon (stats ops GETLK/SETLK/SETLKW);
// - a backed file still open when the daemon stops is released (the handler's release runs).

import { describe, expect } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, TMPFS, TRANSPORTS,
  cleanupAfterEach, fmt, fuseTest, readStats, run, scratchDirs, sharedDaemon, sleep, spawnBg, startDaemon, transportHooks,
  type Stats,
} from "../helpers/index.ts";

const scratch = scratchDirs("fuse-uring-proto-");
const FILEOPS = `${REPO}/test/fixtures/fileops.py`;
const LOCKS = `${REPO}/test/fixtures/locks.py`;

/** Run a fixture client in `dir` (a fresh subdirectory) and parse its JSON line. */
async function client(script: string, dir: string): Promise<Record<string, unknown>> {
  const r = await run([PYTHON, script, dir], { timeoutMs: 60_000 });
  expect(r.code, fmt(r)).toBe(0);
  return JSON.parse(r.stdout.trim()) as Record<string, unknown>;
}

/** The same client on a tmpfs directory: what a local filesystem answers. */
async function onTmpfs(script: string): Promise<Record<string, unknown>> {
  const dir = join(TMPFS, `fuse-uring-proto-ref-${process.pid}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(dir);
  try {
    return await client(script, dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Write 300000 bytes to argv[1] (tmpfs-backed), copy_file_range them to argv[2] (ext4-backed). */
const CROSS_COPY = `
import os, sys, json
data = bytes((i * 7) % 251 for i in range(300000))
with open(sys.argv[1], "wb") as f: f.write(data)
fi = os.open(sys.argv[1], os.O_RDONLY); fo = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
total = 0
while total < len(data):
    n = os.copy_file_range(fi, fo, len(data) - total, total, total)
    if n == 0: break
    total += n
os.close(fi); os.close(fo)
print(json.dumps({"copied": total, "same": open(sys.argv[2], "rb").read() == data}))
`;

const ops = (s: Stats) => (s.ops ?? {}) as Record<string, number>;
const FILE_KEYS = ["sparse", "alloc", "punch", "zero", "cfr"];

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport} (with worker copies)`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const stats = join(scratch(), "stats.json");
    const s = sharedDaemon(["--transport", transport, "--workers", "2", "--stats-file", stats]);
    let n = 0;
    const fresh = async () => {
      const d = join(s.mnt, `t${++n}`);
      const r = await run(["mkdir", d]);
      expect(r.code, fmt(r)).toBe(0);
      return d;
    };

    fuseTest("fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range, O_TMPFILE + linkat: the answers tmpfs gives", async () => {
      const ref = await onTmpfs(FILEOPS);
      const got = await client(FILEOPS, await fresh());
      expect(got).toEqual(ref);
      // The cases themselves (so that "both fail alike" cannot pass for "both work"):
      const tmp = got.tmpfile as Record<string, unknown>;
      expect(tmp).toMatchObject({ nlink_before: 0, linkat: "ok", nlink_after: 1, content: "hello tmpfile", listed: [], listed_after: ["named"], linkat_excl: "ENOENT" });
      expect(got.punch).toMatchObject({ rc: "ok", hole: 65536, zeros: true });
      expect(got.sparse).toMatchObject({ data0: 0, hole0: 4096, data_mid: 1 << 20, data_eof: "ENXIO" });
      expect((got.cfr as Record<string, unknown>).sha).toBe((got.cfr as Record<string, unknown>).expect);
      const st = await readStats(stats, { until: (x) => (ops(x).TMPFILE ?? 0) >= 2 && (ops(x).FALLOCATE ?? 0) > 0, timeoutMs: 4000 });
      expect(ops(st).TMPFILE ?? 0).toBeGreaterThanOrEqual(2);
      expect(ops(st).FALLOCATE ?? 0).toBeGreaterThan(0);
    });

    fuseTest("two processes contending with POSIX, OFD and flock locks: the answers tmpfs gives", async () => {
      const ref = await onTmpfs(LOCKS);
      const got = await client(LOCKS, await fresh());
      const steps = got.steps as unknown[];
      const refSteps = ref.steps as unknown[];
      expect(steps.length).toBe(refSteps.length);
      for (let i = 0; i < refSteps.length; i++) expect([i, steps[i]]).toEqual([i, refSteps[i]]);
      // Some answers that matter, spelled out: a conflict, GETLK naming the holder, a SETLKW
      // that waited, one that was interrupted, OFD GETLK's pid -1, flock EWOULDBLOCK.
      const flat = JSON.stringify(steps);
      expect(flat).toContain(`["B",["setlk","f","w",50,10],{"err":"EAGAIN"}]`);
      expect(flat).toContain(`["B",["getlk","f","w",0,200],{"ok":true,"type":"w","start":0,"len":100,"pid":"A"}]`);
      expect(flat).toContain(`["B",["setlkw","f","w",0,10,0.3],{"err":"EINTR","waited":true}]`);
      expect(flat).toContain(`"pid":-1`);
      expect(flat).toContain(`["B",["flock","k","ex|nb"],{"err":"EAGAIN"}]`);
      // The other process's close ended its OFD lock (at the RELEASE the kernel sends after
      // close() returned: locks.py waits up to 5 s for it).
      expect(flat).toContain(`["B",["ofd_setlkw","o","w",0,0,5],{"ok":true,"type":"w","start":0,"len":0,"pid":0}]`);
      // The daemon decided them (FUSE_POSIX_LOCKS / FUSE_FLOCK_LOCKS were negotiated).
      const st = await readStats(stats, { until: (x) => (ops(x).SETLKW ?? 0) > 0 && (ops(x).SETLK ?? 0) > 10 && (ops(x).GETLK ?? 0) > 3, timeoutMs: 4000 });
      expect(ops(st).SETLK ?? 0).toBeGreaterThan(10);
      expect(ops(st).GETLK ?? 0).toBeGreaterThan(3);
      expect(ops(st).SETLKW ?? 0).toBeGreaterThan(0);
    }, 90_000);
  });

  describe(`passthrough over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    for (const backing of ["tmpfs", "ext4 (/tmp)"]) {
      fuseTest(`fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range, O_TMPFILE + linkat over ${backing}: the answers the backing filesystem gives, from the backing descriptors`, async () => {
        const base = backing === "tmpfs" ? join(TMPFS, `fuse-uring-proto-pt-${process.pid}-${transport}`) : scratch();
        const src = join(base, "src");
        const refDir = join(base, "ref");
        mkdirSync(src, { recursive: true });
        mkdirSync(refDir, { recursive: true });
        const stats = join(scratch(), "stats.json");
        try {
          const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
            command: (mnt, args) => [BUN, CLI, "mount", "--passthrough", src, mnt, ...args],
          });
          const ref = await client(FILEOPS, refDir);
          const got = await client(FILEOPS, d.mnt);
          expect(got).toEqual(ref);
          expect((got.tmpfile as Record<string, unknown>).content).toBe("hello tmpfile");
          if (backing.startsWith("ext4")) {
            // ext4 has every mode: zero-range worked, through the mount.
            expect((got.zero as Record<string, unknown>).rc).toEqual(["ok", "ok", "ok"]);
            expect((got.zero as Record<string, unknown>).size_extended).toBe(192 * 1024);
          }
          // No lock handlers: the session does not ask for FUSE_POSIX_LOCKS/FLOCK_LOCKS, the
          // kernel keeps the locks itself — and answers as tmpfs does; none reach the daemon.
          if (backing === "tmpfs") {
            const lref = await onTmpfs(LOCKS);
            const lgot = await client(LOCKS, d.mnt);
            expect(lgot).toEqual(lref);
          }
          const st = await readStats(stats, { until: (x) => Number(x.backedOps) >= 14, timeoutMs: 3000 });
          expect(ops(st).SETLK ?? 0).toBe(0);
          expect(ops(st).GETLK ?? 0).toBe(0);
          // FALLOCATE (6 reach the daemon: the VFS refuses a punch-hole without keep-size),
          // LSEEK (≥ 6), COPY_FILE_RANGE (≥ 2) answered from the descriptors.
          expect(Number(st.backedOps)).toBeGreaterThanOrEqual(14);
          expect(await d.stop("SIGTERM")).toBe(0);
        } finally {
          rmSync(base, { recursive: true, force: true });
        }
      }, 90_000);
    }
  });

  describe(`backed() path handlers over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    for (const plane of ["native", "js"]) {
      fuseTest(`fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range on backed files (--data-plane ${plane}): the backing filesystem's answers`, async () => {
        const tmp = scratch();
        const src = join(tmp, "src");
        const refDir = join(tmp, "ref");
        mkdirSync(src);
        mkdirSync(refDir);
        const log = join(tmp, "release.log");
        writeFileSync(log, "");
        const stats = join(tmp, "stats.json");
        const d = await startDaemon(["--transport", transport, "--stats-file", stats, "--data-plane", plane], {
          command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/test/fixtures/backed-fs.ts`, mnt, ...args],
          env: { BACKED_SRC: src, BACKED_MODE: "path", BACKED_LOG: log },
        });
        const ref = await client(FILEOPS, refDir);
        const got = await client(FILEOPS, d.mnt);
        for (const k of FILE_KEYS) expect([k, got[k]]).toEqual([k, ref[k]]);
        // No tmpfile handler in the path API: EOPNOTSUPP, as on a filesystem without O_TMPFILE.
        expect((got.tmpfile as Record<string, unknown>).error).toBe("ENOTSUP"); // = EOPNOTSUPP (95) on Linux
        const st = await readStats(stats, {
          until: (x) => (plane === "native" ? Number(x.backedOps) >= 14 : (ops(x).FALLOCATE ?? 0) >= 6 && (ops(x).COPY_FILE_RANGE_64 ?? 0) >= 2),
          timeoutMs: 4000,
        });
        if (plane === "native") expect(Number(st.backedOps)).toBeGreaterThanOrEqual(14);
        else {
          // The path layer answered them (from the same descriptors).
          expect(Number(st.backedOps)).toBe(0);
          expect(ops(st).FALLOCATE ?? 0).toBeGreaterThanOrEqual(6);
          expect(ops(st).COPY_FILE_RANGE_64 ?? 0).toBeGreaterThanOrEqual(2);
        }
        expect(await d.stop("SIGTERM")).toBe(0);
      }, 90_000);
    }

    fuseTest("copy_file_range between backed files on two filesystems (tmpfs → ext4): the read/write fallback", async () => {
      const tmp = scratch();
      const src = join(tmp, "src");
      mkdirSync(src);
      const other = join(TMPFS, `fuse-uring-proto-other-${process.pid}-${transport}`);
      mkdirSync(other, { recursive: true });
      const log = join(tmp, "release.log");
      writeFileSync(log, "");
      const stats = join(tmp, "stats.json");
      try {
        const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
          command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/test/fixtures/backed-fs.ts`, mnt, ...args],
          env: { BACKED_SRC: src, BACKED_MODE: "path", BACKED_LOG: log, BACKED_OTHER: other },
        });
        const w = await run([PYTHON, "-c", CROSS_COPY, join(d.mnt, "other", "in"), join(d.mnt, "out")], { timeoutMs: 30_000 });
        expect(w.code, fmt(w)).toBe(0);
        expect(JSON.parse(w.stdout)).toEqual({ copied: 300000, same: true });
        expect(readFileSync(join(src, "out")).equals(readFileSync(join(other, "in")))).toBe(true);
        const st = await readStats(stats, { until: (x) => Number(x.backedCopyFallbacks) > 0, timeoutMs: 3000 });
        expect(Number(st.backedCopyFallbacks)).toBeGreaterThan(0);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        rmSync(other, { recursive: true, force: true });
      }
    }, 60_000);

    fuseTest("a backed file still open when the daemon stops is released (handler's release runs, descriptor closed)", async () => {
      const tmp = scratch();
      const src = join(tmp, "src");
      mkdirSync(src);
      const log = join(tmp, "release.log");
      writeFileSync(log, "");
      writeFileSync(join(src, "held"), "held open\n");
      const d = await startDaemon(["--transport", transport], {
        command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/test/fixtures/backed-fs.ts`, mnt, ...args],
        env: { BACKED_SRC: src, BACKED_MODE: "fd", BACKED_LOG: log },
      });
      // A reader holds the file open across the daemon's end.
      const marker = join(tmp, "opened");
      const holder = spawnBg(["sh", "-c", 'exec 3<"$1"; touch "$2"; sleep 30', "sh", join(d.mnt, "held"), marker]);
      const deadline = Date.now() + 10_000;
      while (!existsSync(marker) && Date.now() < deadline) await sleep(25);
      expect(existsSync(marker)).toBe(true);
      expect(readFileSync(log, "utf8")).not.toContain("release /held");
      // The daemon ends while the file is still open (the kernel never sends its RELEASE).
      try {
        await d.stop("SIGTERM", 20_000);
        expect(holder.exited).toBe(false);
        expect(readFileSync(log, "utf8")).toContain("release /held");
      } finally {
        holder.kill();
      }
    }, 60_000);
  });
}
