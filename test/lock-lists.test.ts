// memfs serialises its state with one mutex taken inside its handlers (lib/fs/memfs.ts). Which
// handler takes it is a list in memfs.ts; this test makes that list a checked rule instead of
// a convention: every InodeFS handler memfs implements is named in exactly one of the locked,
// self-locked or unlocked lists, and a handler in the locked list really waits for the mutex
// (a held mutex makes it fail-stop after the bound rather than run unlocked).
// HANDLERS is typed against InodeFS: a handler added to the interface without being listed
// here breaks the typecheck, so this test cannot fall behind the interface either.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassthroughFS } from "../lib/fs/passthrough.ts";
import { PASSTHROUGH_LOCKED, PASSTHROUGH_SELF_LOCKED, PASSTHROUGH_UNLOCKED, SharedNodeTable, type PassthroughShare } from "../lib/fs/passthrough/shared.ts";
import { MEMFS_LOCKED, MEMFS_SELF_LOCKED, MEMFS_UNLOCKED, MemFS } from "../lib/fs/memfs.ts";
import type { InodeFS } from "../lib/fs/types.ts";
import { FailStopError } from "../lib/shared/fail-stop.ts";

/** Every key of InodeFS: a request handler, or a declaration the engine reads. */
const HANDLERS = {
  threads: "declaration", replicable: "declaration", copies: "declaration", nativeGetattr: "declaration", nativeLookupMiss: "declaration", init: "handler", destroy: "handler",
  lookup: "handler", forget: "handler", getattr: "handler", setattr: "handler", readlink: "handler", symlink: "handler",
  mknod: "handler", mkdir: "handler", unlink: "handler", rmdir: "handler", rename: "handler", link: "handler",
  open: "handler", read: "handler", write: "handler", flush: "handler", release: "handler", releaseClosed: "handler", fsync: "handler",
  opendir: "handler", readdir: "handler", releasedir: "handler", fsyncdir: "handler", statfs: "handler",
  setxattr: "handler", getxattr: "handler", listxattr: "handler", removexattr: "handler", access: "handler",
  create: "handler", fallocate: "handler", lseek: "handler", copyFileRange: "handler", tmpfile: "handler",
  getlk: "handler", setlk: "handler", flock: "handler", ioctl: "handler", poll: "handler",
} as const satisfies Record<keyof InodeFS, "handler" | "declaration">;

describe("memfs: every handler is locked, self-locked or declared unlocked", () => {
  const fs = new MemFS({ maxBytes: 1 << 20, maxInodes: 1024 }) as unknown as Record<string, unknown>;
  const lists: Record<string, readonly string[]> = { locked: MEMFS_LOCKED, "self-locked": MEMFS_SELF_LOCKED, unlocked: MEMFS_UNLOCKED };

  test("each implemented InodeFS method is in exactly one list", () => {
    const unlisted: string[] = [];
    const twice: string[] = [];
    for (const name of Object.keys(HANDLERS)) {
      if (typeof fs[name] !== "function") continue;
      const where = Object.keys(lists).filter((l) => lists[l]!.includes(name));
      if (where.length === 0) unlisted.push(name);
      if (where.length > 1) twice.push(`${name}: ${where.join(", ")}`);
    }
    expect(unlisted).toEqual([]);
    expect(twice).toEqual([]);
  });

  test("the lists name only methods memfs has", () => {
    const missing = [...MEMFS_LOCKED, ...MEMFS_SELF_LOCKED, ...MEMFS_UNLOCKED].filter((n) => typeof fs[n] !== "function");
    expect(missing).toEqual([]);
  });

  test("a locked handler and a self-locked one wait for a held mutex (fail-stop after the bound, never unlocked)", () => {
    const m = new MemFS({ maxBytes: 1 << 20, maxInodes: 1024, lockBoundMs: 50 });
    const ctx = { uid: 0, gid: 0, pid: 1, umask: 0 } as never;
    const created = m.create(ctx, 1, "f", 0o100644, 0, 2);
    const st = (m as unknown as { st: { mutex: { lock(): void; unlock(): void }; buffers: never } }).st;
    const mutex = st.mutex;
    // A second view of the same state, as a worker has: its own mutex object over the same
    // lock word (the mutex is re-entrant per object, so the holder's own view would not wait).
    const view = new MemFS({ maxBytes: 1 << 20, maxInodes: 1024, lockBoundMs: 50 }, st.buffers);
    mutex.lock();
    try {
      // No fail-stop handler in a unit test: the bound throws FailStopError.
      for (const call of [() => view.getattr(ctx, created.entry.ino, undefined), () => view.read(ctx, created.entry.ino, 0, 0, 10, new Uint8Array(10))]) {
        const t0 = performance.now();
        expect(call).toThrow(FailStopError);
        expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
      }
    } finally {
      mutex.unlock();
    }
    expect(view.getattr(ctx, created.entry.ino, undefined).ino).toBe(created.entry.ino);
  });
});

// The passthrough (copies mode) the same way: every handler is in exactly one of the lists of
// lib/fs/passthrough/shared.ts — run whole under the node-table mutex, taking it itself around
// table work only, or unlocked — and the self-locked ones leave the mutex free and every pin
// given back.
describe("passthrough: every handler is locked, self-locked or declared unlocked", () => {
  const src = mkdtempSync(join(tmpdir(), "fuse-uring-locklists-"));
  afterAll(() => rmSync(src, { recursive: true, force: true }));
  const lists: Record<string, readonly string[]> = { locked: PASSTHROUGH_LOCKED, "self-locked": PASSTHROUGH_SELF_LOCKED, unlocked: PASSTHROUGH_UNLOCKED };

  test("each implemented InodeFS method is in exactly one list; the lists name only methods it has", () => {
    const fs = new PassthroughFS(src) as unknown as Record<string, unknown>;
    const unlisted: string[] = [];
    const twice: string[] = [];
    for (const name of Object.keys(HANDLERS)) {
      if (HANDLERS[name as keyof typeof HANDLERS] !== "handler" || typeof fs[name] !== "function") continue;
      const where = Object.keys(lists).filter((l) => lists[l]!.includes(name));
      if (where.length === 0) unlisted.push(name);
      if (where.length > 1) twice.push(`${name}: ${where.join(", ")}`);
    }
    expect(unlisted).toEqual([]);
    expect(twice).toEqual([]);
    const missing = [...PASSTHROUGH_LOCKED, ...PASSTHROUGH_SELF_LOCKED, ...PASSTHROUGH_UNLOCKED].filter((n) => typeof fs[n] !== "function");
    expect(missing).toEqual([]);
  });

  test("copies mode: after lookup, getattr, create, open, release, rename, unlink, mkdir, readdir, rmdir the mutex is free and no node is pinned", () => {
    const main = new PassthroughFS(src);
    expect(main.copies()).not.toBeNull();
    const share = (main as unknown as { share: PassthroughShare }).share;
    const copy = PassthroughFS.fromShare(share);
    const ctx = { uid: 0, gid: 0, pid: 1, umask: 0 } as never;
    const mutex = (copy as unknown as { mutex: { held: boolean } }).mutex;
    const table = new SharedNodeTable(share);
    const pinned = () => [...table.values()].filter((n) => n.pins !== 0).map((n) => n.id);
    const c = copy.create(ctx, 1, "f", 0o100644, 0, 2) as { entry: { ino: number }; open: { fh: number } };
    expect(mutex.held).toBe(false);
    expect((copy.getattr(ctx, c.entry.ino) as { size: number }).size).toBe(0);
    const o = copy.open(ctx, c.entry.ino, 0) as { fh: number };
    copy.release(ctx, c.entry.ino, o.fh);
    copy.release(ctx, c.entry.ino, c.open.fh);
    const d = copy.mkdir(ctx, 1, "d", 0o755) as { ino: number };
    copy.rename(ctx, 1, "f", d.ino, "g", 0);
    expect((copy.lookup(ctx, d.ino, "g") as { ino: number }).ino).toBe(c.entry.ino);
    const names: string[] = [];
    const dh = copy.opendir(ctx, d.ino) as { fh: number };
    copy.readdir(ctx, d.ino, dh.fh, 0, { plus: true, add: (name) => (names.push(name), true) });
    copy.releasedir(ctx, d.ino, dh.fh);
    expect(names.sort()).toEqual([".", "..", "g"]);
    expect(copy.lookup(ctx, 1, "missing")).toBeNull(); // a miss is null, no exception (and no pin left behind)
    copy.unlink(ctx, d.ino, "g");
    copy.rmdir(ctx, 1, "d");
    expect(mutex.held).toBe(false);
    expect(pinned()).toEqual([]);
    // The unlinked file's node is gone from the (dev, ino) index; its id answers its last attributes.
    expect((copy.getattr(ctx, c.entry.ino) as { nlink: number }).nlink).toBe(0);
    main.destroy();
  });
});
