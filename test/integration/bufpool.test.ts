// FUSE 7.46 io_uring buffer pools and zero-copy (Linux 7.3; docs/BUFFERS.md). Gated on the
// running kernel's INIT offer (FUSE_HAS_IO_URING_BUFPOOL), never on a version: where the bit is
// offered (the 7.3 guest, scripts/vm.sh) the pools and zero-copy are checked with their
// counters, byte-exact data both ways and the fallbacks; where it is not (Linux 6.18) the one
// test here checks the per-entry fallback and says so in its name.
//
// The mounts are driven by child processes (dd, sha256sum, cp); the test process touches the
// passthrough's source directory only.

import { afterAll, describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, cleanupAfterEach, fmt, fuseTest, readStats, registerMountpoint, run, sha256, sha256sum, shOk, startDaemon,
  mountTmpfsSource, unmountTmpfsSource, unmountTmpfsSources, type Daemon, type Stats,
} from "../helpers/index.ts";

const MiB = 1 << 20;
/** Under emulation (the TCG guest) a mount with worker threads takes far longer than 15 s. */
const SLOW = { readyTimeoutMs: 180_000 };
afterAll(unmountTmpfsSources, 30_000);

/** The running kernel's INIT offer, from a memfs mount's --debug line. */
async function offersPools(): Promise<{ offered: boolean; line: string }> {
  const d = await startDaemon(["--transport", "uring", "--debug"], SLOW);
  const line = d.stderr().split("\n").find((l) => l.includes("INIT kernel")) ?? "";
  await d.stop("SIGTERM");
  return { offered: /\bHAS_IO_URING_BUFPOOL\b/.test(line), line };
}

const probe = await offersPools();
const statsPath = () => join(mkdtempSync("/tmp/fuse-uring-bp-stats-"), "stats.json");
const ptCommand = (src: string) => (mnt: string, args: string[]) => [BUN, CLI, "mount", "--passthrough", src, mnt, ...args];
/** 1 MiB, the max_write, and sizes that end inside a page and inside a pool buffer. */
const SIZES = [1, 4095, 4097, MiB - 1, MiB, MiB + 1, 3 * MiB + 12345];

/**
 * Every size both ways through `mnt`: written through the mount (cp = buffered, dd oflag=direct
 * for page multiples) and read back buffered and O_DIRECT, compared with the source bytes.
 * `backing` (passthrough) is also compared on the backing side. Returns the bytes moved.
 */
async function exercise(mnt: string, backing: string | null, asUser: string[] = []): Promise<{ read: number; written: number }> {
  let read = 0, written = 0;
  const scratch = mkdtempSync("/tmp/fuse-uring-bp-data-");
  chmodSync(scratch, 0o755);
  for (const size of SIZES) {
    const data = randomBytes(size);
    const payload = join(scratch, `p-${size}`);
    writeFileSync(payload, data);
    chmodSync(payload, 0o644);
    await shOk(`${asUser.join(" ")} cp "$1" "$2"`, [payload, `${mnt}/b-${size}`]);
    written += size;
    if (size % 4096 === 0) {
      await shOk(`${asUser.join(" ")} dd if="$1" of="$2" oflag=direct bs=1M status=none`, [payload, `${mnt}/d-${size}`]);
      written += size;
    }
    if (backing) expect(sha256(readFileSync(`${backing}/b-${size}`))).toBe(sha256(data));
    // Read back, buffered (after dropping the mount's page cache by reading a fresh name) and O_DIRECT.
    const r1 = await run([...asUser, "sha256sum", `${mnt}/b-${size}`]);
    expect(r1.code, fmt(r1)).toBe(0);
    expect(r1.stdout.split(/\s+/)[0]).toBe(sha256(data));
    const r2 = await shOk(`${asUser.join(" ")} dd if="$1" iflag=direct bs=1M status=none | sha256sum`, [`${mnt}/b-${size}`]);
    expect(r2.split(" ")[0]).toBe(sha256(data));
    read += 2 * size;
  }
  return { read, written };
}

if (probe.offered) {
  describe("io_uring buffer pools (kernel offers FUSE_HAS_IO_URING_BUFPOOL)", () => {
    cleanupAfterEach();

    fuseTest("memfs: pools active on every queue, byte-exact 1 MiB and unaligned sizes, buffered and O_DIRECT", async () => {
      const stats = statsPath();
      const d = await startDaemon(["--transport", "uring", "--stats-file", stats], SLOW);
      expect(d.readyLine).toContain("io_uring buffer pools (FUSE 7.46)");
      await exercise(d.mnt, null);
      const s = await readStats(stats, { until: (x) => Number(x.ringRequests) > 50 });
      expect(s.bufferPools).toBe("active");
      expect(Number(s.poolBytes)).toBeGreaterThanOrEqual(MiB);
      expect(Number(s.ringPinnedDepth), "no entry has a payload of its own").toBe(0);
      expect(Number(s.ringRequests)).toBeGreaterThan(50);
      // As root the queues are zero-copy capable, but memfs serves no file natively: no
      // file is opened FOPEN_IO_URING_ZERO_COPY, so no request is zero-copied.
      expect(s.zeroCopy).toBe(process.getuid?.() === 0 ? "active" : "refused");
      expect(Number(s.zeroCopyRequests)).toBe(0);
      expect(Number(s.protocolErrors)).toBe(0);
      expect(await d.stop("SIGTERM")).toBe(0);
    }, 600_000);

    fuseTest("passthrough as root: zero-copy active (READ/WRITE at the caller's pages), counters > 0, byte-exact both ways", async () => {
      expect(process.getuid?.()).toBe(0); // CI runs as root; zero-copy needs CAP_SYS_ADMIN
      const src = await mountTmpfsSource("size=256m", "fuse-uring-bp-src-");
      try {
        const stats = statsPath();
        const d = await startDaemon(["--transport", "uring", "--stats-file", stats], { ...SLOW, command: ptCommand(src) });
        expect(d.readyLine).toContain("zero-copy active");
        const moved = await exercise(d.mnt, src);
        const s = await readStats(stats, { until: (x) => Number(x.zeroCopyBytes) >= moved.written });
        expect(s.bufferPools).toBe("active");
        expect(s.zeroCopy).toBe("active");
        expect(Number(s.zeroCopyRequests)).toBeGreaterThan(0);
        // Every written byte went through zero-copy WRITEs (the data plane serves them all).
        expect(Number(s.zeroCopyBytes)).toBeGreaterThanOrEqual(moved.written);
        // dd oflag=direct and the O_DIRECT reads open direct handles (tmpfs takes O_DIRECT): they
        // are served zero-copy too (docs/DATAPLANE.md "O_DIRECT and zero-copy together"); tmpfs
        // enforces no alignment, so nothing falls back here (the EINVAL fallback needs ext4/xfs:
        // direct-io.test.ts on the host).
        expect(Number(s.nativeDirect), "O_DIRECT opens got direct handles").toBeGreaterThan(0);
        expect(Number(s.directFallbacks)).toBe(0);
        expect((s.ops as Record<string, number>).READ ?? 0).toBe(0);
        expect((s.ops as Record<string, number>).WRITE ?? 0).toBe(0);
        expect(Number(s.nativeErrors)).toBe(0);
        expect(Number(s.protocolErrors)).toBe(0);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfsSource(src);
      }
    }, 600_000);

    fuseTest("passthrough --no-zero-copy: native READ/WRITE through the pool buffers, no zero-copy, byte-exact", async () => {
      const src = await mountTmpfsSource("size=256m", "fuse-uring-bp-src-");
      try {
        const stats = statsPath();
        const d = await startDaemon(["--transport", "uring", "--no-zero-copy", "--stats-file", stats], { ...SLOW, command: ptCommand(src) });
        const moved = await exercise(d.mnt, src);
        const s = await readStats(stats, { until: (x) => Number(x.nativeWriteBytes) >= moved.written });
        expect(s.bufferPools).toBe("active");
        expect(s.zeroCopy).toBe("off");
        expect(Number(s.zeroCopyRequests)).toBe(0);
        expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual(moved.written);
        expect(Number(s.nativeRequests)).toBeGreaterThan(0);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfsSource(src);
      }
    }, 600_000);

    fuseTest("pool refused by the kernel (test fault FUSE_URING_POOL_FAULT=refuse): per-entry buffers, said in the ready line, byte-exact", async () => {
      const src = await mountTmpfsSource("size=256m", "fuse-uring-bp-src-");
      try {
        const stats = statsPath();
        const d = await startDaemon(["--transport", "uring", "--stats-file", stats], { ...SLOW, command: ptCommand(src), env: { FUSE_URING_POOL_FAULT: "refuse" } });
        expect(d.stderr()).toMatch(/kernel refused the io_uring buffer pool of \d queue\(s\) \(EINVAL\)/);
        const moved = await exercise(d.mnt, src);
        const s = await readStats(stats, { until: (x) => Number(x.nativeWriteBytes) >= moved.written });
        expect(s.bufferPools).toBe("fallback");
        expect(String(s.bufferPoolsReason)).toContain("refused");
        expect(Number(s.ringPinnedDepth), "the refused queues' entries have payloads again").toBeGreaterThan(0);
        expect(s.zeroCopy).toBe("off");
        expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual(moved.written);
        expect(await d.stop("SIGTERM")).toBe(0);
      } finally {
        await unmountTmpfsSource(src);
      }
    }, 600_000);

    fuseTest("passthrough not root (nobody via fusermount3): pools active, zero-copy refused (EPERM), byte-exact", async () => {
      const base = mkdtempSync("/tmp/fuse-uring-bp-user-");
      chmodSync(base, 0o755);
      const src = join(base, "src"), mnt = join(base, "mnt"), home = join(base, "home"), stats = join(base, "home", "stats.json");
      for (const p of [src, mnt, home]) {
        mkdirSync(p);
        chownSync(p, 65534, 65534);
      }
      registerMountpoint(mnt, base);
      const devMode = statSync("/dev/fuse").mode & 0o777;
      chmodSync("/dev/fuse", 0o666); // fusermount3 needs the caller to open it
      let d: Daemon;
      try {
        // One 1 MiB buffer per queue: an unprivileged pool counts against RLIMIT_MEMLOCK.
        d = await startDaemon(["--transport", "uring", "--pool-size", String(MiB), "--stats-file", stats], {
          ...SLOW, mnt, prefix: ["runuser", "-u", "nobody", "--"], env: { HOME: home, XDG_CACHE_HOME: home }, command: ptCommand(src),
        });
      } finally {
        chmodSync("/dev/fuse", devMode);
      }
      const nobody = ["runuser", "-u", "nobody", "--"];
      const moved = await exercise(mnt, src, nobody);
      const s = await readStats(stats, { until: (x) => Number(x.nativeWriteBytes) >= moved.written });
      expect(s.bufferPools).toBe("active");
      expect(s.zeroCopy).toBe("refused");
      expect(String(s.bufferPoolsReason)).toContain("EPERM");
      expect(Number(s.zeroCopyRequests)).toBe(0);
      expect(Number(s.nativeWriteBytes)).toBeGreaterThanOrEqual(moved.written);
      const u = await run([...nobody, "fusermount3", "-u", mnt]);
      expect(u.code, fmt(u)).toBe(0);
      expect((await d.waitExit(20_000)).code).toBe(0);
    }, 600_000);

    fuseTest("memory: pools at --queue-depth 32 pin less than per-entry 1 MiB buffers at depth 8", async () => {
      const pinned = async (args: string[]): Promise<Stats> => {
        const stats = statsPath();
        const d = await startDaemon(["--transport", "uring", "--workers", "1", "--stats-file", stats, ...args], SLOW);
        await shOk(`echo x > "$1/f" && cat "$1/f" >/dev/null`, [d.mnt]);
        const s = await readStats(stats, { until: (x) => Number(x.pinnedBytes) > 0 && Number(x.ringRequests) > 0 });
        expect(await d.stop("SIGTERM")).toBe(0);
        return s;
      };
      const pool32 = await pinned(["--queue-depth", "32"]);
      const entry8 = await pinned(["--queue-depth", "8", "--pool-size", "0"]);
      expect(pool32.bufferPools).toBe("active");
      expect(entry8.bufferPools).toBe("offered");
      console.log(`pinned: pools depth 32 = ${pool32.pinnedBytes} B, per-entry depth 8 = ${entry8.pinnedBytes} B`);
      expect(Number(pool32.pinnedBytes)).toBeLessThan(Number(entry8.pinnedBytes));
    }, 600_000);
  });
} else {
  describe("io_uring buffer pools: NOT offered by this kernel (no FUSE_HAS_IO_URING_BUFPOOL, e.g. Linux 6.18)", () => {
    cleanupAfterEach();

    fuseTest("kernel without buffer pools: per-entry payload buffers (fallback only; pools and zero-copy are tested where the kernel offers them), byte-exact", async () => {
      expect(probe.line).toContain("INIT kernel");
      const stats = statsPath();
      const d = await startDaemon(["--transport", "uring", "--stats-file", stats], SLOW);
      expect(d.readyLine).toContain("no io_uring buffer pools in this kernel");
      await exercise(d.mnt, null);
      const s = await readStats(stats, { until: (x) => Number(x.ringRequests) > 50 });
      expect(s.bufferPools).toBe("none");
      expect(s.zeroCopy).toBe("off");
      expect(Number(s.zeroCopyRequests)).toBe(0);
      expect(Number(s.ringRequests)).toBeGreaterThan(50);
      expect(await d.stop("SIGTERM")).toBe(0);
    }, 120_000);
  });
}
