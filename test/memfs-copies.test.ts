// memfs as copies over one shared state (MemFS.copies / MemFS.replica, lib/fs/memfs-shared.ts):
// Workers run their own copies against the same state through the InodeFS API; afterwards
// every copy's state is identical and every byte reads back the same from every copy.

import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { MemFS, memfs, type MemShared } from "../lib/fs/memfs.ts";
import type { RequestContext } from "../lib/fs/types.ts";
import { S_IFREG } from "../lib/fs/types.ts";
import { Errno, FuseError } from "../lib/fs/errors.ts";
import { ageMs } from "../lib/fs/memfs-shared.ts";

const ROOT = 1;
const ctx = { uid: 0, gid: 0, pid: 1 } as unknown as RequestContext;
const WORKER = join(import.meta.dir, "fixtures", "memfs-hammer-worker.ts");

function errnoOf(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    if (err instanceof FuseError) return err.errno;
    throw err;
  }
  throw new Error("expected a FuseError");
}

function ask<T>(w: Worker, msg: unknown, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const on = (ev: MessageEvent) => {
      if ((ev.data as { type: string }).type !== type) return;
      w.removeEventListener("message", on);
      resolve(ev.data as T);
    };
    w.addEventListener("message", on);
    w.addEventListener("error", (e) => reject(e), { once: true });
    w.postMessage(msg);
  });
}

describe("memfs copies over one shared state", () => {
  test("copies() shares the state; subclasses, replaced handlers and used filesystems stay forwarding", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 1000 });
    const plan = fs.copies()!;
    expect(plan.sharedState).toBe(true);
    expect(plan.module.endsWith("memfs-copy.ts")).toBe(true);
    expect(fs.copies()).toBe(plan); // idempotent
    class Sub extends MemFS {}
    expect(new Sub().copies()).toBeNull();
    const used = memfs();
    used.mkdir(ctx, ROOT, "d", 0o755, 0);
    expect(used.copies()).toBeNull();
    // A handler replaced on the instance (a script wrapping memfs()): the copies would not run it.
    const wrapped = memfs();
    const lookup = wrapped.lookup.bind(wrapped);
    wrapped.lookup = (c, p, n) => (n === "forbidden" ? (() => { throw new FuseError("EACCES"); })() : lookup(c, p, n));
    expect(wrapped.copies()).toBeNull();
    // structured clone keeps the buffers shared (what postMessage does)
    const clone = structuredClone(plan.shared) as MemShared;
    const copy = MemFS.replica(clone);
    expect(copy.replicable).toBe(true);
    const e = fs.create(ctx, ROOT, "x", S_IFREG | 0o644, 0, 2);
    const fh = (e.open as { fh: number }).fh;
    fs.write(ctx, e.entry.ino, fh, 5, new Uint8Array([1, 2, 3]), 0, 0);
    expect(copy.lookup(ctx, ROOT, "x").attr.size).toBe(8);
    const out = new Uint8Array(16).fill(9);
    expect(copy.read(ctx, e.entry.ino, fh, 0, 16, out)).toBe(8);
    expect([...out.subarray(0, 8)]).toEqual([0, 0, 0, 0, 0, 1, 2, 3]);
    copy.release(ctx, e.entry.ino, fh, 0);
    expect(fs.stats().openHandles).toBe(0);
    // Names are bytes: raw bytes (U+DC80–U+DCFF) cross the log unchanged, binary and JSON entries alike.
    const raw = "n\udc80\udcff\u00e9";
    copy.rename(ctx, ROOT, "x", ROOT, raw, 0);
    fs.setxattr(ctx, e.entry.ino, `user.${raw}`, new Uint8Array([0, 255]), 0);
    copy.symlink(ctx, ROOT, "l", `t\udcfe`);
    expect(fs.lookup(ctx, ROOT, raw).ino).toBe(e.entry.ino);
    expect(copy.listxattr(ctx, e.entry.ino)).toEqual([`user.${raw}`]);
    expect([...copy.getxattr(ctx, e.entry.ino, `user.${raw}`)]).toEqual([0, 255]);
    expect(fs.readlink(ctx, fs.lookup(ctx, ROOT, "l").ino)).toBe("t\udcfe");
    expect(copy.dumpState()).toBe(fs.dumpState());
    copy.destroy();
    fs.destroy();
  });

  test("overwrites, reads and atime updates are not logged; every copy sees their bytes and time stamps", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 1000 });
    const copy = MemFS.replica(structuredClone(fs.copies()!.shared) as MemShared);
    const e = fs.create(ctx, ROOT, "f", S_IFREG | 0o644, 0, 2);
    const ino = e.entry.ino;
    const fh = (e.open as { fh: number }).fh;
    fs.write(ctx, ino, fh, 0, new Uint8Array(8192).fill(1), 0, 0); // allocates: logged
    const logged = () => fs.replication()!.logged;
    const before = logged();
    const t0 = copy.getattr(ctx, ino, undefined);
    Bun.sleepSync(2);
    // an overwrite inside the file on existing pages, from the other copy
    expect(copy.write(ctx, ino, fh, 4096, new Uint8Array([7, 8, 9]), 0, 0)).toBe(3);
    const out = new Uint8Array(3);
    expect(fs.read(ctx, ino, fh, 4096, 3, out)).toBe(3);
    expect([...out]).toEqual([7, 8, 9]);
    const a1 = fs.getattr(ctx, ino, undefined);
    expect(a1.mtime * 1e9 + a1.mtimeNsec).toBeGreaterThan(t0.mtime * 1e9 + t0.mtimeNsec);
    expect([a1.ctime, a1.ctimeNsec]).toEqual([a1.mtime, a1.mtimeNsec]);
    // relatime: that read (atime ≤ mtime) moved atime; the other copy sees it
    const a2 = copy.getattr(ctx, ino, undefined);
    expect(a2.atime * 1e9 + a2.atimeNsec).toBeGreaterThanOrEqual(a1.mtime * 1e9 + a1.mtimeNsec);
    expect(logged()).toBe(before); // none of it needed a log entry
    // utimes to the past (logged) then an overwrite (not): the overwrite's time wins everywhere
    copy.setattr(ctx, ino, { valid: 0, mtime: [1000, 5] });
    expect(fs.getattr(ctx, ino, undefined).mtime).toBe(1000);
    fs.write(ctx, ino, fh, 0, new Uint8Array([1]), 0, 0);
    expect(copy.getattr(ctx, ino, undefined).mtime).toBeGreaterThan(1000);
    // past the end, or onto a hole: logged
    const mid = logged();
    copy.write(ctx, ino, fh, 8192, new Uint8Array(10), 0, 0);
    expect(logged()).toBeGreaterThan(mid);
    expect(fs.getattr(ctx, ino, undefined).size).toBe(8202);
    expect(copy.dumpState()).toBe(fs.dumpState());
    copy.destroy();
    fs.destroy();
  });

  test("limits hold across copies: ENOSPC and the inode limit", () => {
    const fs = memfs({ maxBytes: 8 * 4096, maxInodes: 4 });
    const plan = fs.copies()!;
    const copy = MemFS.replica(structuredClone(plan.shared) as MemShared);
    const a = fs.create(ctx, ROOT, "a", S_IFREG | 0o644, 0, 2);
    fs.write(ctx, a.entry.ino, (a.open as { fh: number }).fh, 0, new Uint8Array(6 * 4096), 0, 0);
    const b = copy.create(ctx, ROOT, "b", S_IFREG | 0o644, 0, 2);
    expect(errnoOf(() => copy.write(ctx, b.entry.ino, (b.open as { fh: number }).fh, 0, new Uint8Array(3 * 4096), 0, 0))).toBe(Errno.ENOSPC);
    copy.write(ctx, b.entry.ino, (b.open as { fh: number }).fh, 0, new Uint8Array(2 * 4096).fill(7), 0, 0);
    fs.mkdir(ctx, ROOT, "c", 0o755, 0);
    expect(errnoOf(() => copy.mkdir(ctx, ROOT, "d", 0o755, 0))).toBe(Errno.ENOSPC);
    // space comes back through the other copy; reused pages read as zeros past the data
    copy.setattr(ctx, a.entry.ino, { size: 0, valid: 0 });
    fs.write(ctx, b.entry.ino, (b.open as { fh: number }).fh, 2 * 4096 + 10, new Uint8Array([5]), 0, 0);
    const out = new Uint8Array(4096 * 3);
    expect(copy.read(ctx, b.entry.ino, 0, 0, out.length, out)).toBe(2 * 4096 + 11);
    expect(out.subarray(2 * 4096, 2 * 4096 + 10).every((x) => x === 0)).toBe(true);
    expect(out[2 * 4096 + 10]).toBe(5);
    expect(fs.statfs().bfree).toBe(copy.statfs().bfree);
    // A file freed (unlinked, forgotten, closed) gives its pages back to every copy.
    copy.write(ctx, a.entry.ino, (a.open as { fh: number }).fh, 0, new Uint8Array(5 * 4096).fill(3), 0, 0);
    fs.release(ctx, a.entry.ino, (a.open as { fh: number }).fh, 0);
    copy.unlink(ctx, ROOT, "a");
    fs.forget(a.entry.ino, 1);
    expect(fs.has(a.entry.ino)).toBe(false);
    copy.write(ctx, b.entry.ino, (b.open as { fh: number }).fh, 0, new Uint8Array(8 * 4096).fill(4), 0, 0);
    expect(fs.read(ctx, b.entry.ino, 0, 0, out.length, out)).toBe(3 * 4096);
    expect(out.every((x) => x === 4)).toBe(true);
    expect(copy.dumpState()).toBe(fs.dumpState());
    copy.destroy();
    fs.destroy();
  });

  test("two Workers hammer one shared memfs; every copy ends in the same state", async () => {
    const fs = memfs({ maxBytes: 256 << 20, maxInodes: 100_000, sharedLogBytes: 1 << 18 }); // a small log: it wraps several times
    const plan = fs.copies()!;
    const shared = fs.create(ctx, ROOT, "shared", S_IFREG | 0o644, 0, 2);
    fs.release(ctx, shared.entry.ino, (shared.open as { fh: number }).fh, 0);
    const workers = [new Worker(WORKER), new Worker(WORKER)];
    try {
      const OPS = 3000;
      // The main thread's copy works too, meanwhile (lookups, getattr, readdir of the root).
      let mainOps = 0;
      const busy = setInterval(() => {
        for (let i = 0; i < 20; i++, mainOps++) {
          try {
            const e = fs.lookup(ctx, ROOT, "shared");
            fs.getattr(ctx, e.ino, undefined);
            fs.forget(e.ino, 1);
          } catch {}
        }
      }, 1);
      const done = await Promise.all(workers.map((w, id) => ask<{ errors: string[]; errnos: number; files: [string, number, string][] }>(w, { type: "run", shared: plan.shared, id, ops: OPS, shareFile: shared.entry.ino }, "done")));
      clearInterval(busy);
      expect(mainOps).toBeGreaterThan(0);
      for (const d of done) expect(d.errors).toEqual([]);
      // Every file reads back, through the main thread's copy, as its writer wrote it.
      const out = new Uint8Array(1 << 18);
      let checked = 0;
      for (const d of done) {
        for (const [, ino, b64] of d.files) {
          const want = Buffer.from(b64, "base64");
          const n = fs.read(ctx, ino, 0, 0, out.length, out);
          expect(n).toBe(want.length);
          expect(Buffer.from(out.buffer, 0, n).equals(want)).toBe(true);
          checked++;
        }
      }
      expect(checked).toBeGreaterThan(100);
      // The file both wrote: each worker's slot holds its own stamp.
      const n = fs.read(ctx, shared.entry.ino, 0, 0, 8192, out);
      expect(n).toBe(8192);
      expect(out[4]).toBe(1);
      expect(out[4096 + 4]).toBe(2);
      const dumps = await Promise.all(workers.map((w) => ask<{ dump: string }>(w, { type: "dump" }, "dump")));
      const mine = fs.dumpState();
      expect(dumps[0]!.dump).toBe(mine);
      expect(dumps[1]!.dump).toBe(mine);
      expect(fs.stats().inodes).toBeGreaterThan(100);
      const rep = fs.replication()!;
      expect(rep.logged).toBeGreaterThan(3 * (1 << 18)); // the log wrapped
      expect(rep.applied).toBeGreaterThan(1000); // this copy replayed what the workers did
      await Promise.all(workers.map((w) => ask(w, { type: "close" }, "closed")));
    } finally {
      for (const w of workers) w.terminate();
      fs.destroy();
    }
  }, 60_000);

  test("the log wraps many times while a Worker's copy is idle: its timer keeps it up to date", async () => {
    const fs = memfs({ maxBytes: 64 << 20, sharedLogBytes: 1 << 16 });
    const plan = fs.copies()!;
    const w = new Worker(WORKER);
    try {
      await ask(w, { type: "join", shared: plan.shared }, "joined");
      const c = fs.create(ctx, ROOT, "f", S_IFREG | 0o644, 0, 2);
      const fh = (c.open as { fh: number }).fh;
      const buf = new Uint8Array(4096);
      const t0 = performance.now();
      for (let i = 0; i < 10_000; i++) {
        buf[0] = i & 0xff;
        fs.write(ctx, c.entry.ino, fh, (i % 512) * 4096, buf, 0, 0); // 10,000 entries of 64 bytes: the log 10 times over
        if (i % 1000 === 0) fs.mkdir(ctx, ROOT, `d${i}\udcff`, 0o755, 0);
      }
      expect(performance.now() - t0).toBeLessThan(20_000);
      const { dump } = await ask<{ dump: string }>(w, { type: "dump" }, "dump");
      expect(dump).toBe(fs.dumpState());
      // Too late to join: the log no longer holds the whole history.
      expect(() => MemFS.replica(structuredClone(plan.shared) as MemShared)).toThrow(/cannot join/);
      await ask(w, { type: "close" }, "closed");
    } finally {
      w.terminate();
      fs.destroy();
    }
  }, 60_000);

  test("a copy that stops applying the log (its thread is gone) is evicted; the others go on", async () => {
    const fs = memfs({ maxBytes: 64 << 20, sharedLogBytes: 1 << 16 });
    const plan = fs.copies()!;
    const w = new Worker(WORKER);
    await ask(w, { type: "join", shared: plan.shared }, "joined");
    w.terminate();
    const logged: string[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void logged.push(a.join(" "));
    try {
      const c = fs.create(ctx, ROOT, "f", S_IFREG | 0o644, 0, 2);
      const fh = (c.open as { fh: number }).fh;
      const t0 = performance.now();
      // Appends: each one is logged (an overwrite would not be: nothing for the dead copy to lag on).
      for (let i = 0; i < 3000; i++) fs.write(ctx, c.entry.ino, fh, 10 * i, new Uint8Array(10), 0, 0);
      const took = performance.now() - t0;
      expect(took).toBeLessThan(8000); // waited for the dead copy's heartbeat to age (2 s), once
      expect(logged.join("\n")).toContain("evicted");
    } finally {
      console.error = orig;
      fs.destroy();
    }
  }, 30_000);
});

describe("memfs copies: heartbeat ages", () => {
  test("a heartbeat ahead of the reader's clock is fresh, not 2^31 ms old; the 2^31 wrap still counts", () => {
    expect(ageMs(1_000, 1_000)).toBe(0);
    expect(ageMs(1_042, 1_000)).toBe(42);
    // Another thread's clock 42 ms ahead (the CI eviction of a live copy): fresh.
    expect(ageMs(1_000, 1_042)).toBe(0);
    // The ms-modulo-2^31 clock wrapped between the beat and now: 10 ms.
    expect(ageMs(5, 0x7fffffff - 4)).toBe(10);
    // Really old stays old.
    expect(ageMs(3_000_000, 0)).toBe(3_000_000);
  });
});
