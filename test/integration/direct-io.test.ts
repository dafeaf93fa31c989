// O_DIRECT through the native data plane (docs/DATAPLANE.md "O_DIRECT"): by default a caller's
// O_DIRECT reaches the backing file (the shim reopens the handle's descriptor with O_DIRECT),
// requests the backing filesystem refuses for alignment are redone on the buffered descriptor
// (stats directFallbacks), and `--backing-cache` keeps backing files buffered. Which mode ran is
// proven from the backing file's page-cache residency (mincore, test/fixtures/direct_io.py) and
// the daemon's counters; the kernel-side effect of FOPEN_DIRECT_IO — no GETATTR/GETXATTR per
// I/O — from its `ops`.
//
// The source directory is on the disk (not tmpfs): its filesystem enforces O_DIRECT alignment.
// Every I/O on the mount comes from a separate python3 process.

import { afterAll, describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, TRANSPORTS, cleanupAfterEach, fmt, fuseTest, readStats, run, startDaemon, transportHooks, type Stats,
} from "../helpers/index.ts";

const HELPER = join(REPO, "test/fixtures/direct_io.py");
const MiB = 1 << 20;
const sources: string[] = [];
afterAll(() => {
  for (const s of sources) rmSync(s, { recursive: true, force: true });
});

/** A source directory on the disk (/var/tmp), not tmpfs. */
function diskSource(): string {
  const s = mkdtempSync("/var/tmp/fuse-uring-dio-src-");
  sources.push(s);
  return s;
}

async function py(args: string[]): Promise<string> {
  const r = await run([PYTHON, HELPER, ...args], { timeoutMs: 60_000 });
  expect(r.code, fmt(r)).toBe(0);
  return r.stdout.trim();
}

async function pyResult(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await run([PYTHON, HELPER, ...args], { timeoutMs: 60_000 });
  return { code: r.code ?? -1, out: r.stdout.trim(), err: r.stderr.trim() };
}

async function resident(path: string): Promise<{ pages: number; total: number }> {
  const [pages, total] = (await py(["resident", path])).split(" ").map(Number);
  return { pages: pages!, total: total! };
}

function ptCommand(src: string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, CLI, "mount", "--passthrough", src, mnt, ...args];
}

const num = (s: Stats, k: string) => Number((s as Record<string, unknown>)[k] ?? 0);
const op = (s: Stats, name: string) => Number(((s as { ops?: Record<string, number> }).ops ?? {})[name] ?? 0);

for (const transport of TRANSPORTS) {
  describe(`O_DIRECT through the data plane over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("default: O_DIRECT reaches the backing file (its page cache stays empty), one request per I/O", async () => {
      const src = diskSource();
      const stats = join(src, "..", `${src.split("/").pop()}.stats.json`);
      sources.push(stats);
      const data = randomBytes(8 * MiB);
      writeFileSync(join(src, "img"), data);
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], { command: ptCommand(src) });
      expect((await py(["evict", join(src, "img")])).split(" ")[0]).toBe("0");
      expect(await py(["read", `${d.mnt}/img`, String(64 * 1024)])).toBe(String(data.length));
      const afterRead = await resident(join(src, "img"));
      // Buffered backing I/O would have cached all 2048 pages; direct I/O caches none.
      expect(afterRead.pages, `backing file pages cached after an 8 MiB O_DIRECT read: ${afterRead.pages}/${afterRead.total}`).toBeLessThanOrEqual(16);
      const before = await readStats(stats, { until: (s) => num(s, "nativeDirect") >= 128 });
      const ops0 = op(before, "GETATTR") + op(before, "GETXATTR");
      expect(await py(["mix", `${d.mnt}/img`, "400"])).toBe("400");
      const after = await readStats(stats, { until: (s) => num(s, "nativeDirect") >= num(before, "nativeDirect") + 800 });
      const rw = await resident(join(src, "img"));
      expect(rw.pages, `backing pages cached after O_DIRECT writes+reads: ${rw.pages}`).toBeLessThanOrEqual(16);
      // FOPEN_DIRECT_IO: no attribute revalidation per read after a write, no security.capability
      // lookup per write (both were ~0.5 extra requests per I/O with the page-cache path).
      const extra = op(after, "GETATTR") + op(after, "GETXATTR") - ops0;
      expect(extra, `GETATTR+GETXATTR during 800 O_DIRECT I/Os: ${extra} (ops ${JSON.stringify((after as { ops?: unknown }).ops)})`).toBeLessThanOrEqual(8);
      expect(num(after, "directFallbacks")).toBe(0);
      expect(op(after, "READ") + op(after, "WRITE"), "no READ/WRITE reached JS").toBe(0);
      if (transport === "uring") {
        expect(num(after, "nativeAsync") + num(after, "nativeSync")).toBeGreaterThanOrEqual(928);
        // The metadata requests (LOOKUP, OPEN, …) went through JS on the ring: each stage has them.
        const stages = (after as { stageLatencyUs?: Record<string, { count: number }> }).stageLatencyUs ?? {};
        for (const st of ["batch", "handler", "commit"]) expect(stages[st]?.count ?? 0, `stageLatencyUs.${st}`).toBeGreaterThan(0);
      }
    });

    fuseTest("--backing-cache: backing files stay buffered (the page cache holds them)", async () => {
      const src = diskSource();
      const stats = join(src, "..", `${src.split("/").pop()}.stats.json`);
      sources.push(stats);
      const data = randomBytes(8 * MiB);
      writeFileSync(join(src, "img"), data);
      const d = await startDaemon(["--transport", transport, "--stats-file", stats, "--backing-cache"], { command: ptCommand(src) });
      expect((await py(["evict", join(src, "img")])).split(" ")[0]).toBe("0");
      expect(await py(["read", `${d.mnt}/img`, String(64 * 1024)])).toBe(String(data.length));
      const r = await resident(join(src, "img"));
      expect(r.pages, `backing file pages cached after an 8 MiB O_DIRECT read with --backing-cache: ${r.pages}/${r.total}`).toBeGreaterThanOrEqual(r.total - 16);
      const s = await readStats(stats, { until: (x) => num(x, "nativeRequests") >= 128 });
      expect(num(s, "nativeDirect")).toBe(0);
      expect(op(s, "READ"), "no READ reached JS").toBe(0);
    });

    fuseTest("unaligned O_DIRECT read and write give the same bytes (buffered fallback, counted)", async () => {
      const src = diskSource();
      const stats = join(src, "..", `${src.split("/").pop()}.stats.json`);
      sources.push(stats);
      const data = randomBytes(MiB);
      writeFileSync(join(src, "img"), data);
      // The backing filesystem itself must refuse unaligned O_DIRECT, or there is nothing to fall back from.
      const raw = await pyResult(["pread", join(src, "img"), "100", "1000"]);
      expect(raw.code, `the source filesystem accepted an unaligned O_DIRECT read (${raw.err}): this test needs one that enforces alignment (ext4, xfs)`).toBe(1);
      expect(raw.err).toBe("EINVAL");
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], { command: ptCommand(src) });
      // Unaligned read: offset 100, 1000 bytes; and across the end of the file.
      expect(await py(["pread", `${d.mnt}/img`, "100", "1000"])).toBe(data.subarray(100, 1100).toString("hex"));
      expect(await py(["pread", `${d.mnt}/img`, String(MiB - 10), "4096"])).toBe(data.subarray(MiB - 10).toString("hex"));
      // Unaligned writes: inside the file and extending it.
      const w1 = randomBytes(777), w2 = randomBytes(333);
      expect(await py(["pwrite", `${d.mnt}/img`, "12345", w1.toString("hex")])).toBe("777");
      expect(await py(["pwrite", `${d.mnt}/img`, String(MiB + 5), w2.toString("hex")])).toBe("333");
      const expected = Buffer.concat([data, Buffer.alloc(5), w2]);
      w1.copy(expected, 12345);
      expect(readFileSync(join(src, "img")).equals(expected), "backing file = expected bytes").toBe(true);
      // Read back through the mount, aligned (direct) and unaligned (fallback).
      expect(await py(["pread", `${d.mnt}/img`, "12288", "4096"])).toBe(expected.subarray(12288, 16384).toString("hex"));
      expect(await py(["pread", `${d.mnt}/img`, "12345", "777"])).toBe(w1.toString("hex"));
      const s = await readStats(stats, { until: (x) => num(x, "directFallbacks") >= 5 });
      expect(num(s, "directFallbacks")).toBeGreaterThanOrEqual(5);
      expect(num(s, "nativeDirect")).toBeGreaterThanOrEqual(6);
      expect(num(s, "nativeErrors")).toBe(0);
    });

    for (const mode of ["path", "fd"]) {
      fuseTest(`backed() files (${mode}): O_DIRECT reaches the backing file, unaligned requests fall back, the reopen is closed at release`, async () => {
        const src = diskSource();
        const log = join(src, "..", `${src.split("/").pop()}.release.log`);
        const stats = join(src, "..", `${src.split("/").pop()}.stats.json`);
        sources.push(log, stats);
        writeFileSync(log, "");
        const data = randomBytes(4 * MiB);
        writeFileSync(join(src, "img"), data);
        const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
          command: (mnt, args) => [BUN, CLI, "mount", join(REPO, "test/fixtures/backed-fs.ts"), mnt, ...args],
          env: { BACKED_SRC: src, BACKED_MODE: mode, BACKED_LOG: log },
        });
        expect((await py(["evict", join(src, "img")])).split(" ")[0]).toBe("0");
        expect(await py(["read", `${d.mnt}/img`, String(64 * 1024)])).toBe(String(data.length));
        const r = await resident(join(src, "img"));
        expect(r.pages, `backing pages cached after a 4 MiB O_DIRECT read through backed(): ${r.pages}/${r.total}`).toBeLessThanOrEqual(16);
        expect(await py(["pread", `${d.mnt}/img`, "4097", "100"])).toBe(data.subarray(4097, 4197).toString("hex"));
        const s = await readStats(stats, { until: (x) => num(x, "directFallbacks") >= 1 && num(x, "nativeDirect") >= 64 });
        expect(num(s, "directFallbacks")).toBeGreaterThanOrEqual(1);
        expect(op(s, "READ"), "no READ reached JS").toBe(0);
        // Every descriptor of the image (the layer's or handler's, and the table's O_DIRECT reopen) is closed after the last close.
        const deadline = Date.now() + 5000;
        let held: string[] = [];
        for (;;) {
          held = readdirSync(`/proc/${d.proc.pid}/fd`).flatMap((fd) => {
            try {
              return readlinkSync(`/proc/${d.proc.pid}/fd/${fd}`) === join(src, "img") ? [fd] : [];
            } catch {
              return [];
            }
          });
          if (!held.length || Date.now() > deadline) break;
          await new Promise((res) => setTimeout(res, 100));
        }
        expect(held, "descriptors of the image the daemon still holds after every close").toEqual([]);
      });
    }
  });
}
