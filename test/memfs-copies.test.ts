// memfs over one shared state (MemFS.copies / MemFS.view, lib/fs/memfs-state.ts): every
// thread's MemFS is a view of the same SharedArrayBuffers. Two Workers and the main thread
// hammer one memfs through the InodeFS API; afterwards every view sees the same state, a view
// made late sees everything, a terminated worker changes nothing for the others, a thread that
// stalls holding the lock makes the next waiter fail-stop, and a failing operation changes
// nothing.

import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { MemFS, memfs, type MemShared } from "../lib/fs/memfs.ts";
import type { OpenReply } from "../lib/protocol/structs.ts";
import type { RequestContext } from "../lib/session/filesystem.ts";
import { S_IFREG } from "../lib/protocol/structs.ts";
import { Errno, FuseError } from "../lib/protocol/errors.ts";
import { FailStopError } from "../lib/shared/fail-stop.ts";

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

type Done = { errors: string[]; errnos: number; files: [string, number, string][] };

/** Every file a worker reported reads back through `fs` as its writer wrote it. */
function checkFiles(fs: MemFS, done: Done[]): number {
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
  return checked;
}

describe("memfs over one shared state", () => {
  test("copies() shares the state, also after use; subclasses and replaced handlers stay forwarding", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 1000 });
    fs.mkdir(ctx, ROOT, "made-before", 0o755, 0); // no join window: a used filesystem shares too
    const plan = fs.copies()!;
    expect(plan.sharedState).toBe(true);
    expect(plan.module.endsWith("memfs-copy.ts")).toBe(true);
    expect(fs.copies()).toBe(plan); // idempotent
    class Sub extends MemFS {}
    expect(new Sub().copies()).toBeNull();
    // A handler replaced on the instance (a script wrapping memfs()): the views would not run it.
    const wrapped = memfs();
    const lookup = wrapped.lookup.bind(wrapped);
    wrapped.lookup = (c, p, n) => (n === "forbidden" ? (() => { throw new FuseError("EACCES"); })() : lookup(c, p, n));
    expect(wrapped.copies()).toBeNull();
    // structured clone keeps the buffers shared (what postMessage does)
    const view = MemFS.view(structuredClone(plan.shared) as MemShared);
    expect(view.replicable).toBe(true);
    expect(view.lookup(ctx, ROOT, "made-before")!.attr.nlink).toBe(2);
    expect(() => MemFS.view({ kind: "memfs-shared-v1" } as unknown as MemShared)).toThrow(/not the shared state/);
  });

  test("what one view does, the other sees at once: names, data, links, xattrs, handles, FORGET", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 1000 });
    const view = MemFS.view(structuredClone(fs.copies()!.shared) as MemShared);
    const c = view.create(ctx, ROOT, "f\udcff", S_IFREG | 0o644, 0, 2);
    const fh = (c.open as { fh: number }).fh;
    view.write(ctx, c.entry.ino, fh, 70_000, new TextEncoder().encode("hello"), 0, 0);
    const out = new Uint8Array(16);
    expect(fs.read(ctx, c.entry.ino, fh, 70_000, 16, out)).toBe(5);
    expect(Buffer.from(out.subarray(0, 5)).toString()).toBe("hello");
    fs.link(ctx, c.entry.ino, ROOT, "g");
    view.setxattr(ctx, c.entry.ino, "user.k", new Uint8Array([1, 2, 3]), 0);
    expect([...fs.getxattr(ctx, c.entry.ino, "user.k")]).toEqual([1, 2, 3]);
    expect(view.getattr(ctx, c.entry.ino, undefined).nlink).toBe(2);
    const names: string[] = [];
    view.readdir(ctx, ROOT, 0, 0, { plus: false, add: (n) => (names.push(n), true) });
    expect(names).toEqual([".", "..", "f\udcff", "g"]);
    // A handle opened on one thread is released on another (the kernel's RELEASE may come anywhere).
    expect(fs.stats().openHandles).toBe(1);
    fs.release(ctx, c.entry.ino, fh, 0);
    expect(view.stats().openHandles).toBe(0);
    fs.unlink(ctx, ROOT, "f\udcff");
    view.unlink(ctx, ROOT, "g");
    expect(view.has(c.entry.ino)).toBe(true); // the kernel still holds references
    fs.forget(c.entry.ino, fs.lookupCount(c.entry.ino)); // FORGET: once, on the main thread
    expect(view.has(c.entry.ino)).toBe(false);
    expect(view.stats()).toEqual({ inodes: 1, usedBytes: 0, openHandles: 0 });
    expect(view.dumpState()).toBe(fs.dumpState());
  });

  test("two Workers and the main thread hammer one memfs; a late view sees everything; a terminated worker changes nothing", async () => {
    const fs = memfs({ maxBytes: 256 << 20, maxInodes: 100_000 });
    const plan = fs.copies()!;
    const shared = fs.create(ctx, ROOT, "shared", S_IFREG | 0o644, 0, 2);
    fs.release(ctx, shared.entry.ino, (shared.open as { fh: number }).fh, 0);
    const workers = [new Worker(WORKER), new Worker(WORKER)];
    try {
      const OPS = 3000;
      // The main thread works too, meanwhile (lookups, getattr, readdir of the root).
      let mainOps = 0;
      const busy = setInterval(() => {
        for (let i = 0; i < 20; i++, mainOps++) {
          const e = fs.lookup(ctx, ROOT, "shared")!;
          fs.getattr(ctx, e.ino, undefined);
          fs.forget(e.ino, 1);
        }
      }, 1);
      const done = await Promise.all(workers.map((w, id) => ask<Done>(w, { type: "run", shared: plan.shared, id, ops: OPS, shareFile: shared.entry.ino }, "done")));
      clearInterval(busy);
      expect(mainOps).toBeGreaterThan(0);
      for (const d of done) expect(d.errors).toEqual([]);
      expect(checkFiles(fs, done)).toBeGreaterThan(100);
      // The file both wrote: each worker's slot holds its own stamp.
      const out = new Uint8Array(8192);
      expect(fs.read(ctx, shared.entry.ino, 0, 0, 8192, out)).toBe(8192);
      expect(out[4]).toBe(1);
      expect(out[4096 + 4]).toBe(2);
      const mine = fs.dumpState();
      for (const w of workers) expect((await ask<{ dump: string }>(w, { type: "dump" }, "dump")).dump).toBe(mine);
      expect(fs.stats().inodes).toBeGreaterThan(100);

      // A worker started now sees everything (no join window, nothing to replay).
      const late = new Worker(WORKER);
      try {
        expect((await ask<{ dump: string }>(late, { type: "dump", shared: plan.shared }, "dump")).dump).toBe(mine);
      } finally {
        late.terminate();
      }

      // Worker 0 is terminated; worker 1 and the main thread go on; a new worker runs a round too.
      workers[0]!.terminate();
      const again = new Worker(WORKER);
      workers.push(again);
      const more = await Promise.all([
        ask<Done>(workers[1]!, { type: "run", shared: plan.shared, id: 3, ops: 500, shareFile: shared.entry.ino }, "done"),
        ask<Done>(again, { type: "run", shared: plan.shared, id: 2, ops: 1000, shareFile: shared.entry.ino }, "done"),
      ]);
      for (const d of more) expect(d.errors).toEqual([]);
      // The terminated worker's files are all still there, as it left them.
      expect(checkFiles(fs, [done[0]!, done[1]!, ...more])).toBeGreaterThan(150);
      const after = fs.dumpState();
      expect((await ask<{ dump: string }>(again, { type: "dump" }, "dump")).dump).toBe(after);
    } finally {
      for (const w of workers) w.terminate();
    }
  }, 90_000);

  test("a thread that stalls holding the lock: the next waiter fail-stops after the bound, naming the holder", async () => {
    const fs = memfs({ maxBytes: 1 << 24, lockBoundMs: 300 });
    const plan = fs.copies()!;
    const w = new Worker(WORKER);
    try {
      await ask(w, { type: "hold", shared: plan.shared }, "holding");
      const t0 = performance.now();
      let err: unknown = null;
      try {
        fs.getattr(ctx, ROOT, undefined);
      } catch (e) {
        err = e;
      }
      const waited = performance.now() - t0;
      expect(err).toBeInstanceOf(FailStopError);
      expect((err as Error).message).toMatch(/memfs: the lock has been held by thread \d+ for more than 300 ms/);
      expect(waited).toBeGreaterThanOrEqual(300);
      expect(waited).toBeLessThan(5000);
    } finally {
      w.terminate();
    }
  }, 20_000);

  test("an operation that fails changes nothing (validate and allocate before mutating)", () => {
    const fs = memfs({ maxBytes: 64 << 10, maxInodes: 4 });
    const a = fs.create(ctx, ROOT, "a", S_IFREG | 0o644, 0, 2);
    const fh = (a.open as { fh: number }).fh;
    fs.write(ctx, a.entry.ino, fh, 0, new Uint8Array(60 << 10).fill(7), 0, 0);
    fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const before = fs.dumpState();
    const attempts: [string, () => unknown, number][] = [
      ["write past the space", () => fs.write(ctx, a.entry.ino, fh, 100 << 10, new Uint8Array(8192), 0, 0), Errno.ENOSPC],
      ["fallocate past the space", () => fs.fallocate(ctx, a.entry.ino, fh, 0, 1 << 20, 0), Errno.ENOSPC],
      ["rename a directory into itself", () => fs.rename(ctx, ROOT, "d", fs.lookup(ctx, ROOT, "d")!.ino, "x", 0), Errno.EINVAL],
      ["rmdir a file", () => fs.rmdir(ctx, ROOT, "a"), Errno.ENOTDIR],
      ["link to an existing name", () => fs.link(ctx, a.entry.ino, ROOT, "d"), Errno.EEXIST],
      ["xattr replace of a missing name", () => fs.setxattr(ctx, a.entry.ino, "user.x", new Uint8Array(1), 2), Errno.ENODATA],
    ];
    for (const [what, f, errno] of attempts) {
      expect([what, errnoOf(f)]).toEqual([what, errno]);
    }
    // (the lookup above took a reference: give it back before comparing)
    fs.forget(fs.lookup(ctx, ROOT, "d")!.ino, 2);
    const d = fs.lookup(ctx, ROOT, "d")!;
    expect(d.attr.nlink).toBe(2);
    fs.forget(d.ino, 1);
    expect(fs.dumpState()).toBe(before);
    // Out of inodes (root, a, d, one more): the 5th node fails and changes nothing.
    fs.mknod(ctx, ROOT, "p", 0o10644, 0, 0);
    const full = fs.dumpState();
    expect(errnoOf(() => fs.mkdir(ctx, ROOT, "e", 0o755, 0))).toBe(Errno.ENOSPC);
    expect(errnoOf(() => fs.symlink(ctx, ROOT, "s", "t"))).toBe(Errno.ENOSPC);
    expect(errnoOf(() => fs.rename(ctx, ROOT, "p", ROOT, "q", 4))).toBe(Errno.ENOSPC); // whiteout needs a node
    expect(fs.dumpState()).toBe(full);
  });

  test("rename with RENAME_WHITEOUT (two entries added to one directory) at every list size keeps the listing whole", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 10_000 });
    const want: string[] = [];
    for (let k = 0; k < 300; k++) {
      fs.mknod(ctx, ROOT, `f${k}`, 0o100644, 0, 0);
      fs.rename(ctx, ROOT, `f${k}`, ROOT, `g${k}`, 4); // g<k> added, f<k> becomes a whiteout
      want.push(`f${k}`, `g${k}`);
      const got: string[] = [];
      fs.readdir(ctx, ROOT, 0, 0, { plus: false, add: (n) => (got.push(n), true) });
      expect(got.slice(2).sort()).toEqual([...want].sort());
    }
  });

  test("metadata lives once: views add no state, the shared tables do not grow with views", () => {
    const fs = memfs({ maxBytes: 1 << 24, maxInodes: 10_000 });
    for (let i = 0; i < 2000; i++) fs.mknod(ctx, ROOT, `n${i}`, 0o100644, 0, 0);
    const plan = fs.copies()!;
    const buffers = (plan.shared as MemShared).buffers;
    const size = () => Object.values(buffers).flat().reduce((s: number, b) => s + (b as SharedArrayBuffer).byteLength, 0);
    const before = size();
    const views = Array.from({ length: 8 }, () => MemFS.view(structuredClone(plan.shared) as MemShared));
    for (const v of views) expect(v.lookup(ctx, ROOT, "n1999")!.attr.size).toBe(0);
    expect(size()).toBe(before);
  });
});

describe("memfs views: locks and O_TMPFILE are shared state", () => {
  const fhOf = (o: OpenReply | number): number => (typeof o === "number" ? o : o.fh);
  const F_RDLCK = 0, F_WRLCK = 1, F_UNLCK = 2;
  const lockOf = (start: number, end: number, type: number) => ({ start, end, type, pid: 7 });

  test("a POSIX lock set through one view conflicts in another; flush ends it everywhere", () => {
    const a = memfs({ maxBytes: 1 << 20, maxInodes: 100 });
    const b = MemFS.view(structuredClone(a.copies()!.shared) as MemShared);
    const { entry, open } = a.create(ctx, ROOT, "f", 0o644, 0, 2);
    const fhB = fhOf(b.open(ctx, entry.ino, 2));
    a.setlk(ctx, entry.ino, fhOf(open), 1n, lockOf(0, 99, F_WRLCK), false);
    expect(errnoOf(() => b.setlk(ctx, entry.ino, fhB, 2n, lockOf(50, 60, F_RDLCK), false))).toBe(Errno.EAGAIN);
    expect(b.getlk(ctx, entry.ino, fhB, 2n, lockOf(0, 10, F_RDLCK))).toMatchObject({ type: F_WRLCK, start: 0, end: 99 });
    b.flush(ctx, entry.ino, fhB, 1n); // owner 1 closes a descriptor (in any thread)
    expect(a.getlk(ctx, entry.ino, fhOf(open), 2n, lockOf(0, 10, F_RDLCK)).type).toBe(F_UNLCK);
    b.setlk(ctx, entry.ino, fhB, 2n, lockOf(50, 60, F_RDLCK), false);
  });

  test("flock locks end with the release of their fh, in any view", () => {
    const a = memfs({ maxBytes: 1 << 20, maxInodes: 100 });
    const b = MemFS.view(structuredClone(a.copies()!.shared) as MemShared);
    const { entry, open } = a.create(ctx, ROOT, "f", 0o644, 0, 2);
    const fhB = fhOf(b.open(ctx, entry.ino, 2));
    a.flock(ctx, entry.ino, fhOf(open), 10n, F_WRLCK, false);
    expect(errnoOf(() => b.flock(ctx, entry.ino, fhB, 11n, F_RDLCK, false))).toBe(Errno.EAGAIN);
    b.release(ctx, entry.ino, fhOf(open), 0); // the open file goes away (released by another thread)
    b.flock(ctx, entry.ino, fhB, 11n, F_RDLCK, false);
  });

  test("a waiting SETLKW does not hold the state's mutex; an unlock in another view wakes it", async () => {
    const a = memfs({ maxBytes: 1 << 20, maxInodes: 100, lockBoundMs: 200 });
    const b = MemFS.view(structuredClone(a.copies()!.shared) as MemShared);
    const { entry, open } = a.create(ctx, ROOT, "f", 0o644, 0, 2);
    const fhB = fhOf(b.open(ctx, entry.ino, 2));
    a.setlk(ctx, entry.ino, fhOf(open), 1n, lockOf(0, 9, F_WRLCK), false);
    let got = false;
    const waiting = Promise.resolve(b.setlk({ ...ctx, signal: new AbortController().signal } as RequestContext, entry.ino, fhB, 2n, lockOf(0, 9, F_WRLCK), true)).then(() => (got = true));
    await Bun.sleep(300); // longer than lockBoundMs: a held mutex would make these fail-stop
    expect(got).toBe(false);
    a.mknod(ctx, ROOT, "other", 0o100644, 0, 0);
    expect(b.lookup(ctx, ROOT, "other")!.attr.nlink).toBe(1);
    a.setlk(ctx, entry.ino, fhOf(open), 1n, lockOf(0, 9, F_UNLCK), false);
    await waiting;
    expect(got).toBe(true);
  });

  test("an O_TMPFILE node made in one view is linkable once from another (a node flag, not per thread)", () => {
    const a = memfs({ maxBytes: 1 << 20, maxInodes: 100 });
    const b = MemFS.view(structuredClone(a.copies()!.shared) as MemShared);
    const { entry, open } = a.tmpfile(ctx, ROOT, 0o644, 0o022, 2);
    expect(entry.attr.nlink).toBe(0);
    expect(entry.attr.mode).toBe(S_IFREG | 0o644);
    expect(b.link(ctx, entry.ino, ROOT, "named").attr.nlink).toBe(1);
    b.unlink(ctx, ROOT, "named");
    // Linked once: an ordinary unlinked file now, not linkable again.
    expect(errnoOf(() => a.link(ctx, entry.ino, ROOT, "again"))).toBe(Errno.ENOENT);
    a.release(ctx, entry.ino, fhOf(open), 0);
    a.forget(entry.ino, 2);
    expect(b.has(entry.ino)).toBe(false);
  });

  test("a failing tmpfile changes nothing (out of inodes, removed directory)", () => {
    const a = memfs({ maxBytes: 1 << 20, maxInodes: 3 });
    const b = MemFS.view(structuredClone(a.copies()!.shared) as MemShared);
    const d = a.mkdir(ctx, ROOT, "d", 0o755, 0);
    a.rmdir(ctx, ROOT, "d");
    let before = a.dumpState();
    expect(errnoOf(() => b.tmpfile(ctx, d.ino, 0o644, 0, 2))).toBe(Errno.ENOENT);
    expect(a.dumpState()).toBe(before);
    a.forget(d.ino, 1);
    a.tmpfile(ctx, ROOT, 0o644, 0, 2);
    a.tmpfile(ctx, ROOT, 0o644, 0, 2);
    before = a.dumpState();
    expect(errnoOf(() => b.tmpfile(ctx, ROOT, 0o644, 0, 2))).toBe(Errno.ENOSPC);
    expect(a.dumpState()).toBe(before);
  });
});
