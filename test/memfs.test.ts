// Unit tests for the in-memory filesystem: MemFS methods called directly, without a kernel.

import { describe, expect, test } from "bun:test";
import { memfs, MemFS, CHUNK_SIZE } from "../lib/fs/memfs.ts";
import { makeAttr, nowTimespec } from "../lib/fs/attr.ts";
import { Errno, FuseError } from "../lib/protocol/errors.ts";
import type { Attr, Entry } from "../lib/protocol/structs.ts";
import type { DirFiller, RequestContext } from "../lib/session/filesystem.ts";
import { S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK } from "../lib/protocol/structs.ts";

const ROOT = 1;
function as(uid: number, gid: number): RequestContext {
  const noBacking = (): Promise<number> => Promise.reject(new FuseError("ENOSYS"));
  return { uid, gid, pid: 1, unique: 0n, signal: new AbortController().signal, backingRead: noBacking, backingWrite: noBacking };
}
const ctx: RequestContext = as(0, 0);

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The errno `fn` throws (fails the test if it does not throw a FuseError). */
function errnoOf(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    if (err instanceof FuseError) return err.errno;
    throw err;
  }
  throw new Error("expected a FuseError, nothing was thrown");
}

function attrOf(fs: MemFS, ino: number): Attr {
  return fs.getattr(ctx, ino, undefined);
}

interface Listed {
  name: string;
  off: number;
  ino: number;
  mode: number;
}

/** A filler that accepts up to `limit` entries. */
function filler(plus: boolean, limit = Infinity): DirFiller & { got: Listed[] } {
  const got: Listed[] = [];
  return {
    plus,
    got,
    add(name: string, nextOffset: number, entry: Entry): boolean {
      if (got.length >= limit) return false;
      got.push({ name, off: nextOffset, ino: entry.ino, mode: entry.attr.mode });
      return true;
    },
  };
}

function list(fs: MemFS, ino: number, offset = 0, plus = false, limit = Infinity): Listed[] {
  const f = filler(plus, limit);
  fs.readdir(ctx, ino, 0, offset, f);
  return f.got;
}

/** Read the whole directory in pages of `page` entries, resuming from the last offset. */
function listPaged(fs: MemFS, ino: number, page: number): Listed[] {
  const all: Listed[] = [];
  let off = 0;
  for (;;) {
    const got = list(fs, ino, off, false, page);
    if (got.length === 0) return all;
    all.push(...got);
    if (all.length > 100_000) throw new Error("readdir does not advance");
    off = got[got.length - 1]!.off;
  }
}

function mkfile(fs: MemFS, parent: number, name: string, mode = 0o644): { ino: number; fh: number } {
  const r = fs.create(ctx, parent, name, S_IFREG | mode, 0, 0o102);
  const open = typeof r.open === "number" ? { fh: r.open } : r.open;
  return { ino: r.entry.ino, fh: open.fh };
}

function write(fs: MemFS, ino: number, fh: number, offset: number, data: Uint8Array | string): number {
  const bytes = typeof data === "string" ? enc.encode(data) : data;
  return fs.write(ctx, ino, fh, offset, bytes, 0, 0);
}

function read(fs: MemFS, ino: number, fh: number, offset: number, size: number): Uint8Array {
  const out = new Uint8Array(size).fill(0xaa); // garbage: holes must be zeroed explicitly
  const r = fs.read(ctx, ino, fh, offset, size, out);
  if (typeof r !== "number") throw new Error("read should write into out");
  return out.subarray(0, r);
}

function pattern(len: number, seed = 1): Uint8Array {
  const a = new Uint8Array(len);
  let x = seed;
  for (let i = 0; i < len; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    a[i] = x >>> 24;
  }
  return a;
}

function newer(a: [number, number], b: [number, number]): boolean {
  return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
}
const mtimeOf = (a: Attr): [number, number] => [a.mtime, a.mtimeNsec];
const ctimeOf = (a: Attr): [number, number] => [a.ctime, a.ctimeNsec];

describe("helpers", () => {
  test("nowTimespec is wall time with nanoseconds and non-decreasing", () => {
    const [s, ns] = nowTimespec();
    expect(Math.abs(s * 1000 + ns / 1e6 - Date.now())).toBeLessThan(1000);
    expect(ns).toBeGreaterThanOrEqual(0);
    expect(ns).toBeLessThan(1e9);
    let prev = nowTimespec();
    for (let i = 0; i < 1000; i++) {
      const t = nowTimespec();
      expect(t[0] > prev[0] || (t[0] === prev[0] && t[1] >= prev[1])).toBe(true);
      prev = t;
    }
  });

  test("makeAttr fills defaults", () => {
    const a = makeAttr({ ino: 7, size: 1000 });
    expect(a.ino).toBe(7);
    expect(a.nlink).toBe(1);
    expect(a.blksize).toBe(4096);
    expect(a.mode & S_IFMT).toBe(S_IFREG);
    expect(a.blocks).toBe(2);
    expect(Math.abs(a.mtime - Date.now() / 1000)).toBeLessThan(5);
    expect(makeAttr({ mode: S_IFDIR | 0o700, nlink: 2 }).nlink).toBe(2);
  });
});

describe("root and basics", () => {
  test("root directory attributes", () => {
    const fs = memfs({ uid: 1000, gid: 100 });
    const a = attrOf(fs, ROOT);
    expect(a.ino).toBe(ROOT);
    expect(a.mode).toBe(S_IFDIR | 0o755);
    expect(a.nlink).toBe(2);
    expect(a.uid).toBe(1000);
    expect(a.gid).toBe(100);
    expect(a.size).toBe(40);
    expect(errnoOf(() => attrOf(fs, 12345))).toBe(Errno.ENOENT);
  });

  test("mkdir adds S_IFDIR, applies umask, counts links", () => {
    const fs = memfs();
    const d = fs.mkdir(as(1000, 100), ROOT, "d", 0o777, 0o022);
    expect(d.attr.mode).toBe(S_IFDIR | 0o755);
    expect(d.attr.nlink).toBe(2);
    expect(d.attr.uid).toBe(1000);
    expect(d.attr.gid).toBe(100);
    expect(d.entryTtl).toBeUndefined();
    expect(d.attrTtl).toBeUndefined();
    expect(attrOf(fs, ROOT).nlink).toBe(3);
    fs.mkdir(ctx, d.ino, "sub", S_IFDIR | 0o700, 0);
    expect(attrOf(fs, d.ino).nlink).toBe(3);
    expect(attrOf(fs, ROOT).nlink).toBe(3);
    expect(attrOf(fs, d.ino).size).toBe(60);
    expect(errnoOf(() => fs.mkdir(ctx, ROOT, "d", 0o755, 0))).toBe(Errno.EEXIST);
    expect(errnoOf(() => fs.mkdir(ctx, ROOT, ".", 0o755, 0))).toBe(Errno.EEXIST);
    fs.rmdir(ctx, d.ino, "sub");
    expect(attrOf(fs, d.ino).nlink).toBe(2);
  });

  test("lookup finds entries, '.' and '..'", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const f = mkfile(fs, d.ino, "f");
    expect(fs.lookup(ctx, d.ino, "f")!.ino).toBe(f.ino);
    expect(fs.lookup(ctx, d.ino, ".")!.ino).toBe(d.ino);
    expect(fs.lookup(ctx, d.ino, "..")!.ino).toBe(ROOT);
    expect(fs.lookup(ctx, ROOT, "..")!.ino).toBe(ROOT);
    expect(fs.lookup(ctx, d.ino, "nope")).toBeNull(); // a missing name: null, no exception
    expect(errnoOf(() => fs.lookup(ctx, f.ino, "x"))).toBe(Errno.ENOTDIR);
  });

  test("name length limit is 255 bytes of UTF-8", () => {
    const fs = memfs();
    expect(() => fs.mkdir(ctx, ROOT, "a".repeat(255), 0o755, 0)).not.toThrow();
    expect(errnoOf(() => fs.mkdir(ctx, ROOT, "a".repeat(256), 0o755, 0))).toBe(Errno.ENAMETOOLONG);
    expect(errnoOf(() => fs.lookup(ctx, ROOT, "b".repeat(256)))).toBe(Errno.ENAMETOOLONG);
    // 85 × "é" (2 bytes) = 170 bytes: fine; 86 × "€" (3 bytes) = 258 bytes: too long.
    expect(() => fs.mkdir(ctx, ROOT, "é".repeat(85), 0o755, 0)).not.toThrow();
    expect(errnoOf(() => mkfile(fs, ROOT, "€".repeat(86)))).toBe(Errno.ENAMETOOLONG);
    expect(() => mkfile(fs, ROOT, "€".repeat(85))).not.toThrow();
    // 64 × 😀 (4 bytes, 2 UTF-16 units) = 256 bytes
    expect(errnoOf(() => fs.symlink(ctx, ROOT, "😀".repeat(64), "t"))).toBe(Errno.ENAMETOOLONG);
  });
});

describe("regular files", () => {
  test("create: owner from ctx, mode & ~umask, O_EXCL, O_TRUNC", () => {
    const fs = memfs();
    const r = fs.create(as(1000, 50), ROOT, "f", S_IFREG | 0o666, 0o027, 0o102);
    expect(r.entry.attr.mode).toBe(S_IFREG | 0o640);
    expect(r.entry.attr.uid).toBe(1000);
    expect(r.entry.attr.gid).toBe(50);
    expect(r.entry.attr.nlink).toBe(1);
    const fh = typeof r.open === "number" ? r.open : r.open.fh;
    write(fs, r.entry.ino, fh, 0, "hello");
    expect(errnoOf(() => fs.create(ctx, ROOT, "f", 0o644, 0, 0o302 /* O_CREAT|O_EXCL|O_RDWR */))).toBe(Errno.EEXIST);
    const again = fs.create(ctx, ROOT, "f", 0o644, 0, 0o1102 /* O_TRUNC */);
    expect(again.entry.ino).toBe(r.entry.ino);
    expect(again.entry.attr.size).toBe(0);
    fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    expect(errnoOf(() => fs.create(ctx, ROOT, "d", 0o644, 0, 0o102))).toBe(Errno.EISDIR);
  });

  test("write then read, short reads at EOF, reads into out", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    expect(write(fs, ino, fh, 0, "hello world")).toBe(11);
    expect(attrOf(fs, ino).size).toBe(11);
    expect(dec.decode(read(fs, ino, fh, 0, 100))).toBe("hello world");
    expect(dec.decode(read(fs, ino, fh, 6, 3))).toBe("wor");
    expect(read(fs, ino, fh, 11, 10).length).toBe(0);
    expect(read(fs, ino, fh, 1000, 10).length).toBe(0);
    const out = new Uint8Array(5);
    expect(fs.read(ctx, ino, fh, 0, 5, out)).toBe(5);
    expect(dec.decode(out)).toBe("hello");
    // overwrite in the middle
    write(fs, ino, fh, 6, "WORLD");
    expect(dec.decode(read(fs, ino, fh, 0, 100))).toBe("hello WORLD");
    expect(write(fs, ino, fh, 3, new Uint8Array(0))).toBe(0);
    expect(attrOf(fs, ino).size).toBe(11);
  });

  test("holes read as zeros, even into a dirty buffer", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 200_000, "x");
    expect(attrOf(fs, ino).size).toBe(200_001);
    const r = read(fs, ino, fh, 0, 200_001);
    expect(r.length).toBe(200_001);
    expect(r.subarray(0, 200_000).every((b) => b === 0)).toBe(true);
    expect(r[200_000]).toBe("x".charCodeAt(0));
    // Only one chunk is allocated, one page of it.
    expect(attrOf(fs, ino).blocks).toBe(8);
  });

  test("large unaligned writes across chunks match a reference copy", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    const ref = new Uint8Array(5 * CHUNK_SIZE + 12345);
    const writes: [number, number][] = [[100, 70_000], [CHUNK_SIZE * 2 - 5, CHUNK_SIZE * 2 + 10], [0, 10], [ref.length - 4000, 4000], [300_000, 1]];
    let seed = 3;
    for (const [off, len] of writes) {
      const p = pattern(len, seed++);
      expect(write(fs, ino, fh, off, p)).toBe(len);
      ref.set(p, off);
    }
    expect(attrOf(fs, ino).size).toBe(ref.length);
    expect(read(fs, ino, fh, 0, ref.length)).toEqual(ref);
    // partial reads at odd offsets
    expect(read(fs, ino, fh, CHUNK_SIZE - 3, 10)).toEqual(ref.subarray(CHUNK_SIZE - 3, CHUNK_SIZE + 7));
    // a 1 MiB write and read
    const big = pattern(1 << 20, 99);
    write(fs, ino, fh, 1 << 20, big);
    expect(read(fs, ino, fh, 1 << 20, 1 << 20)).toEqual(big);
  });

  test("the written data is copied (the request buffer may be reused)", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    const buf = enc.encode("abcdef");
    write(fs, ino, fh, 0, buf);
    buf.fill(0);
    expect(dec.decode(read(fs, ino, fh, 0, 6))).toBe("abcdef");
  });

  test("sparse 1 TiB truncate costs nothing", () => {
    const fs = memfs({ maxBytes: 1 << 20 });
    const { ino, fh } = mkfile(fs, ROOT, "f");
    const TiB = 2 ** 40;
    const a = fs.setattr(ctx, ino, { size: TiB, valid: 0 });
    expect(a.size).toBe(TiB);
    expect(a.blocks).toBe(0);
    expect(fs.stats().usedBytes).toBe(0);
    const r = read(fs, ino, fh, TiB - 10, 100);
    expect(r.length).toBe(10);
    expect(r.every((b) => b === 0)).toBe(true);
    write(fs, ino, fh, TiB - 1, "z");
    expect(attrOf(fs, ino).size).toBe(TiB);
    expect(dec.decode(read(fs, ino, fh, TiB - 1, 10))).toBe("z");
    fs.setattr(ctx, ino, { size: 0, valid: 0 });
    expect(fs.stats().usedBytes).toBe(0);
    expect(errnoOf(() => fs.setattr(ctx, ino, { size: 2 ** 60, valid: 0 }))).toBe(Errno.EFBIG);
  });

  test("truncate down zeroes the tail; growing again shows zeros", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, new Uint8Array(150_000).fill(0xff));
    fs.setattr(ctx, ino, { size: 70_000, valid: 0 });
    expect(attrOf(fs, ino).size).toBe(70_000);
    fs.setattr(ctx, ino, { size: 300_000, valid: 0 });
    const r = read(fs, ino, fh, 0, 300_000);
    expect(r.subarray(0, 70_000).every((b) => b === 0xff)).toBe(true);
    expect(r.subarray(70_000).every((b) => b === 0)).toBe(true);
    // writing past EOF after a shrink inside one chunk must not resurrect bytes either
    fs.setattr(ctx, ino, { size: 10, valid: 0 });
    write(fs, ino, fh, 100, "q");
    expect(read(fs, ino, fh, 10, 90).every((b) => b === 0)).toBe(true);
  });

  test("blocks follow allocation and shrink on truncate", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, "x");
    expect(attrOf(fs, ino).blocks).toBe(8);
    write(fs, ino, fh, 0, new Uint8Array(3 * CHUNK_SIZE));
    expect(attrOf(fs, ino).blocks).toBe((3 * CHUNK_SIZE) / 512);
    fs.setattr(ctx, ino, { size: CHUNK_SIZE, valid: 0 });
    expect(attrOf(fs, ino).blocks).toBe(CHUNK_SIZE / 512);
    fs.setattr(ctx, ino, { size: 0, valid: 0 });
    expect(attrOf(fs, ino).blocks).toBe(0);
    expect(fs.stats().usedBytes).toBe(0);
  });

  test("open with O_TRUNC, open of a directory, distinct handles", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, "data");
    const a = fs.open(ctx, ino, 0o2);
    const b = fs.open(ctx, ino, 0o1002);
    expect(a.fh).not.toBe(b.fh);
    expect(a.fh).not.toBe(fh);
    expect(attrOf(fs, ino).size).toBe(0);
    expect(errnoOf(() => fs.open(ctx, ROOT, 0))).toBe(Errno.EISDIR);
    expect(errnoOf(() => fs.read(ctx, ROOT, 0, 0, 10, new Uint8Array(10)))).toBe(Errno.EISDIR);
    expect(errnoOf(() => fs.write(ctx, ROOT, 0, 0, new Uint8Array(1), 0, 0))).toBe(Errno.EISDIR);
    expect(fs.stats().openHandles).toBe(3);
    fs.release(ctx, ino, a.fh, 0);
    fs.release(ctx, ino, b.fh, 0);
    fs.release(ctx, ino, fh, 0);
    expect(fs.stats().openHandles).toBe(0);
  });

  test("write clears set-user-ID with FUSE_WRITE_KILL_SUIDGID", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f", 0o6755);
    expect(attrOf(fs, ino).mode & 0o7777).toBe(0o6755);
    fs.write(ctx, ino, fh, 0, enc.encode("x"), 1 << 2, 0);
    expect(attrOf(fs, ino).mode & 0o7777).toBe(0o755);
  });
});

describe("timestamps", () => {
  test("write updates mtime and ctime; chmod only ctime", async () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    const a0 = attrOf(fs, ino);
    await Bun.sleep(2);
    write(fs, ino, fh, 0, "x");
    const a1 = attrOf(fs, ino);
    expect(newer(mtimeOf(a1), mtimeOf(a0))).toBe(true);
    expect(newer(ctimeOf(a1), ctimeOf(a0))).toBe(true);
    await Bun.sleep(2);
    fs.setattr(ctx, ino, { mode: 0o600, valid: 0 });
    const a2 = attrOf(fs, ino);
    expect(a2.mode).toBe(S_IFREG | 0o600);
    expect(mtimeOf(a2)).toEqual(mtimeOf(a1));
    expect(newer(ctimeOf(a2), ctimeOf(a1))).toBe(true);
  });

  test("creating and removing entries updates the parent's mtime/ctime", async () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const t0 = attrOf(fs, d.ino);
    await Bun.sleep(2);
    mkfile(fs, d.ino, "f");
    const t1 = attrOf(fs, d.ino);
    expect(newer(mtimeOf(t1), mtimeOf(t0))).toBe(true);
    await Bun.sleep(2);
    fs.unlink(ctx, d.ino, "f");
    const t2 = attrOf(fs, d.ino);
    expect(newer(mtimeOf(t2), mtimeOf(t1))).toBe(true);
    expect(newer(ctimeOf(t2), ctimeOf(t1))).toBe(true);
  });

  test("setattr sets times with nanoseconds, and 'now'", () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    const a = fs.setattr(ctx, ino, { atime: [1000, 123456789], mtime: [2000, 987654321], valid: 0 });
    expect([a.atime, a.atimeNsec]).toEqual([1000, 123456789]);
    expect([a.mtime, a.mtimeNsec]).toEqual([2000, 987654321]);
    expect(a.ctime).toBeGreaterThan(2000);
    const b = fs.setattr(ctx, ino, { mtime: "now", atime: "now", valid: 0 });
    expect(Math.abs(b.mtime - Date.now() / 1000)).toBeLessThan(5);
    expect(Math.abs(b.atime - Date.now() / 1000)).toBeLessThan(5);
    const c = fs.setattr(ctx, ino, { ctime: [3000, 5], valid: 0 });
    expect([c.ctime, c.ctimeNsec]).toEqual([3000, 5]);
    expect(errnoOf(() => fs.setattr(ctx, ino, { mtime: [1, 1e9], valid: 0 }))).toBe(Errno.EINVAL);
  });

  test("setattr uid/gid/mode keeps the type; size on a directory is EISDIR", () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    const a = fs.setattr(ctx, ino, { uid: 42, gid: 43, mode: 0o4711, valid: 0 });
    expect(a.uid).toBe(42);
    expect(a.gid).toBe(43);
    expect(a.mode).toBe(S_IFREG | 0o4711);
    expect(errnoOf(() => fs.setattr(ctx, ROOT, { size: 0, valid: 0 }))).toBe(Errno.EISDIR);
    const l = fs.symlink(ctx, ROOT, "l", "f");
    expect(errnoOf(() => fs.setattr(ctx, l.ino, { size: 0, valid: 0 }))).toBe(Errno.EINVAL);
    const k = fs.setattr(ctx, ino, { valid: 1 << 11 }); // FATTR_KILL_SUIDGID
    expect(k.mode).toBe(S_IFREG | 0o711);
  });
});

describe("special files", () => {
  test("symlink and readlink", () => {
    const fs = memfs();
    const l = fs.symlink(as(7, 8), ROOT, "l", "../some/target/é");
    expect(l.attr.mode).toBe(S_IFLNK | 0o777);
    expect(l.attr.size).toBe(enc.encode("../some/target/é").length);
    expect(l.attr.uid).toBe(7);
    expect(fs.readlink(ctx, l.ino)).toBe("../some/target/é");
    const f = mkfile(fs, ROOT, "f");
    expect(errnoOf(() => fs.readlink(ctx, f.ino))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.symlink(ctx, ROOT, "l", "x"))).toBe(Errno.EEXIST);
    expect(errnoOf(() => fs.symlink(ctx, ROOT, "long", "x".repeat(4096)))).toBe(Errno.ENAMETOOLONG);
  });

  test("mknod: fifo, devices, sockets, regular; no directories", () => {
    const fs = memfs();
    const fifo = fs.mknod(ctx, ROOT, "fifo", S_IFIFO | 0o666, 0, 0o022);
    expect(fifo.attr.mode).toBe(S_IFIFO | 0o644);
    const chr = fs.mknod(ctx, ROOT, "null", S_IFCHR | 0o666, 0x103, 0);
    expect(chr.attr.mode & S_IFMT).toBe(S_IFCHR);
    expect(chr.attr.rdev).toBe(0x103);
    const blk = fs.mknod(ctx, ROOT, "blk", S_IFBLK | 0o600, 0x801, 0);
    expect(blk.attr.rdev).toBe(0x801);
    const sock = fs.mknod(ctx, ROOT, "sock", S_IFSOCK | 0o755, 0, 0);
    expect(sock.attr.mode & S_IFMT).toBe(S_IFSOCK);
    const reg = fs.mknod(ctx, ROOT, "reg", 0o644, 0, 0);
    expect(reg.attr.mode).toBe(S_IFREG | 0o644);
    const h = fs.open(ctx, reg.ino, 2);
    expect(write(fs, reg.ino, h.fh, 0, "ok")).toBe(2);
    expect(errnoOf(() => fs.mknod(ctx, ROOT, "dir", S_IFDIR | 0o755, 0, 0))).toBe(Errno.EPERM);
    expect(errnoOf(() => fs.mknod(ctx, ROOT, "fifo", S_IFIFO | 0o644, 0, 0))).toBe(Errno.EEXIST);
    expect(errnoOf(() => fs.read(ctx, fifo.ino, 0, 0, 1, new Uint8Array(1)))).toBe(Errno.EINVAL);
  });
});

describe("links and removal", () => {
  test("hard links share data and count nlink", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const { ino, fh } = mkfile(fs, ROOT, "a");
    write(fs, ino, fh, 0, "shared");
    const l = fs.link(ctx, ino, d.ino, "b");
    expect(l.ino).toBe(ino);
    expect(l.attr.nlink).toBe(2);
    expect(fs.lookup(ctx, d.ino, "b")!.attr.nlink).toBe(2);
    fs.unlink(ctx, ROOT, "a");
    expect(attrOf(fs, ino).nlink).toBe(1);
    expect(dec.decode(read(fs, ino, fh, 0, 100))).toBe("shared");
    expect(errnoOf(() => fs.link(ctx, d.ino, ROOT, "dirlink"))).toBe(Errno.EPERM);
    expect(errnoOf(() => fs.link(ctx, ino, d.ino, "b"))).toBe(Errno.EEXIST);
    expect(errnoOf(() => fs.link(ctx, ino, ino, "x"))).toBe(Errno.ENOTDIR);
  });

  test("unlink/rmdir errors", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    mkfile(fs, d.ino, "f");
    expect(errnoOf(() => fs.unlink(ctx, ROOT, "d"))).toBe(Errno.EISDIR);
    expect(errnoOf(() => fs.rmdir(ctx, d.ino, "f"))).toBe(Errno.ENOTDIR);
    expect(errnoOf(() => fs.rmdir(ctx, ROOT, "d"))).toBe(Errno.ENOTEMPTY);
    expect(errnoOf(() => fs.unlink(ctx, ROOT, "missing"))).toBe(Errno.ENOENT);
    expect(errnoOf(() => fs.rmdir(ctx, ROOT, "missing"))).toBe(Errno.ENOENT);
    expect(errnoOf(() => fs.rmdir(ctx, ROOT, "."))).toBe(Errno.EINVAL);
    fs.unlink(ctx, d.ino, "f");
    fs.rmdir(ctx, ROOT, "d");
    expect(fs.lookup(ctx, ROOT, "d")).toBeNull(); // a missing name: null, no exception
    expect(attrOf(fs, ROOT).nlink).toBe(2);
    expect(attrOf(fs, ROOT).size).toBe(40);
  });

  test("a removed directory is empty and refuses new entries", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const dh = fs.opendir(ctx, d.ino, 0);
    fs.rmdir(ctx, ROOT, "d");
    expect(attrOf(fs, d.ino).nlink).toBe(0);
    expect(list(fs, d.ino)).toEqual([]);
    expect(errnoOf(() => mkfile(fs, d.ino, "x"))).toBe(Errno.ENOENT);
    expect(errnoOf(() => fs.mkdir(ctx, d.ino, "x", 0o755, 0))).toBe(Errno.ENOENT);
    fs.releasedir(ctx, d.ino, dh.fh);
    fs.forget(d.ino, 1);
    expect(fs.has(d.ino)).toBe(false);
  });
});

describe("lookup counts and lifetime", () => {
  test("every entry reply takes a reference; forget frees unlinked nodes", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f"); // create: 1
    fs.lookup(ctx, ROOT, "f"); // 2
    fs.lookup(ctx, ROOT, "f"); // 3
    expect(fs.lookupCount(ino)).toBe(3);
    write(fs, ino, fh, 0, "still here");
    fs.unlink(ctx, ROOT, "f");
    expect(fs.has(ino)).toBe(true);
    // unlinked but open: data stays readable and writable
    expect(dec.decode(read(fs, ino, fh, 0, 100))).toBe("still here");
    expect(attrOf(fs, ino).nlink).toBe(0);
    fs.forget(ino, 3);
    expect(fs.has(ino)).toBe(true); // still open
    const used = fs.stats().usedBytes;
    expect(used).toBeGreaterThan(0);
    fs.release(ctx, ino, fh, 0);
    expect(fs.has(ino)).toBe(false);
    expect(fs.stats().usedBytes).toBe(0);
    expect(errnoOf(() => attrOf(fs, ino))).toBe(Errno.ENOENT);
  });

  test("release first, forget last also frees; linked nodes are never freed", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    fs.release(ctx, ino, fh, 0);
    fs.forget(ino, 1);
    expect(fs.has(ino)).toBe(true); // still linked
    fs.unlink(ctx, ROOT, "f");
    expect(fs.has(ino)).toBe(false);
    // root survives any forget
    fs.forget(ROOT, 100);
    expect(fs.has(ROOT)).toBe(true);
  });

  test("mkdir/mknod/symlink/link each take a reference", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    const n = fs.mknod(ctx, ROOT, "n", S_IFIFO | 0o644, 0, 0);
    const s = fs.symlink(ctx, ROOT, "s", "t");
    const f = mkfile(fs, ROOT, "f");
    fs.link(ctx, f.ino, ROOT, "f2");
    expect(fs.lookupCount(d.ino)).toBe(1);
    expect(fs.lookupCount(n.ino)).toBe(1);
    expect(fs.lookupCount(s.ino)).toBe(1);
    expect(fs.lookupCount(f.ino)).toBe(2);
  });

  test("node ids are never reused", () => {
    const fs = memfs();
    const seen = new Set<number>();
    for (let i = 0; i < 50; i++) {
      const { ino, fh } = mkfile(fs, ROOT, "f");
      expect(seen.has(ino)).toBe(false);
      seen.add(ino);
      fs.release(ctx, ino, fh, 0);
      fs.unlink(ctx, ROOT, "f");
      fs.forget(ino, 1);
      expect(fs.has(ino)).toBe(false);
    }
    expect(fs.stats().inodes).toBe(1);
  });

  test("rename over a file drops the old target once forgotten", () => {
    const fs = memfs();
    const a = mkfile(fs, ROOT, "a");
    const b = mkfile(fs, ROOT, "b");
    write(fs, b.ino, b.fh, 0, "old");
    fs.release(ctx, b.ino, b.fh, 0);
    fs.rename(ctx, ROOT, "a", ROOT, "b", 0);
    expect(fs.has(b.ino)).toBe(true); // kernel still holds a reference
    expect(attrOf(fs, b.ino).nlink).toBe(0);
    fs.forget(b.ino, 1);
    expect(fs.has(b.ino)).toBe(false);
    expect(fs.lookup(ctx, ROOT, "b")!.ino).toBe(a.ino);
  });
});

describe("readdir", () => {
  test("'.' and '..' first with cookies 1 and 2; root's '..' is the root", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o755, 0);
    mkfile(fs, d.ino, "x");
    fs.symlink(ctx, d.ino, "y", "x");
    const got = list(fs, d.ino);
    expect(got.map((e) => e.name)).toEqual([".", "..", "x", "y"]);
    expect(got[0]!).toMatchObject({ off: 1, ino: d.ino });
    expect(got[1]!).toMatchObject({ off: 2, ino: ROOT });
    expect(got[3]!.mode & S_IFMT).toBe(S_IFLNK);
    const offs = got.map((e) => e.off);
    expect(new Set(offs).size).toBe(offs.length);
    expect(offs.every((o, i) => i === 0 || o > offs[i - 1]!)).toBe(true);
    const r = list(fs, ROOT);
    expect(r[1]!).toMatchObject({ name: "..", ino: ROOT });
    expect(errnoOf(() => list(fs, d.ino + 1))).toBe(Errno.ENOTDIR);
  });

  test("resumes after any offset and stops when the filler is full", () => {
    const fs = memfs();
    for (let i = 0; i < 10; i++) mkfile(fs, ROOT, `f${i}`);
    const all = list(fs, ROOT);
    expect(all.length).toBe(12);
    for (let k = 0; k < all.length; k++) {
      expect(list(fs, ROOT, all[k]!.off).map((e) => e.name)).toEqual(all.slice(k + 1).map((e) => e.name));
    }
    expect(list(fs, ROOT, 0, false, 3).length).toBe(3);
    expect(listPaged(fs, ROOT, 3).map((e) => e.name)).toEqual(all.map((e) => e.name));
    expect(list(fs, ROOT, all[all.length - 1]!.off)).toEqual([]);
  });

  test("offsets survive unlinks and creates between calls", () => {
    const fs = memfs();
    for (let i = 0; i < 20; i++) mkfile(fs, ROOT, `f${i}`);
    const first = list(fs, ROOT, 0, false, 7); // ., .., f0..f4
    const last = first[first.length - 1]!;
    expect(last.name).toBe("f4");
    // unlink one already seen, the one returned last, and some not yet seen
    fs.unlink(ctx, ROOT, "f2");
    fs.unlink(ctx, ROOT, "f4");
    fs.unlink(ctx, ROOT, "f5");
    fs.unlink(ctx, ROOT, "f10");
    mkfile(fs, ROOT, "new");
    const rest = list(fs, ROOT, last.off).map((e) => e.name);
    const expected = [];
    for (let i = 6; i < 20; i++) if (i !== 10) expected.push(`f${i}`);
    expected.push("new");
    expect(rest).toEqual(expected);
  });

  test("many unlinks (compaction) keep every live entry exactly once", () => {
    const fs = memfs();
    for (let i = 0; i < 300; i++) mkfile(fs, ROOT, `e${i}`);
    const seen: string[] = [];
    let off = 0;
    for (let round = 0; ; round++) {
      const got = list(fs, ROOT, off, false, 10);
      if (got.length === 0) break;
      seen.push(...got.map((e) => e.name));
      off = got[got.length - 1]!.off;
      // remove a batch of entries not yet listed that are even-numbered, and some already listed
      for (let i = round * 20; i < round * 20 + 20 && i < 300; i++) {
        if (i % 2 === 0) {
          try {
            fs.unlink(ctx, ROOT, `e${i + 40}`);
          } catch {}
          try {
            fs.unlink(ctx, ROOT, `e${i}`);
          } catch {}
        }
      }
    }
    const live = new Set(list(fs, ROOT).map((e) => e.name));
    expect(new Set(seen).size).toBe(seen.length); // no duplicates
    for (const name of live) expect(seen).toContain(name); // nothing live was skipped
  });

  test("order and offsets are stable across compaction of removed entries", () => {
    const fs = memfs();
    for (let i = 0; i < 400; i++) mkfile(fs, ROOT, `e${i}`);
    const before = list(fs, ROOT);
    for (let i = 0; i < 400; i++) if (i % 4 !== 0) fs.unlink(ctx, ROOT, `e${i}`); // 300 dead of 400
    const after = list(fs, ROOT);
    const expected = before.filter((e) => e.name === "." || e.name === ".." || Number(e.name.slice(1)) % 4 === 0);
    expect(after).toEqual(expected);
    // resuming from an offset of a removed entry continues at the next live one
    const gone = before.find((e) => e.name === "e201")!;
    expect(list(fs, ROOT, gone.off, false, 1)[0]!.name).toBe("e204");
  });

  test("plus mode takes references for every entry except . and ..", () => {
    const fs = memfs();
    const a = mkfile(fs, ROOT, "a");
    const b = fs.mkdir(ctx, ROOT, "b", 0o755, 0);
    expect(fs.lookupCount(a.ino)).toBe(1);
    list(fs, ROOT, 0, true);
    expect(fs.lookupCount(a.ino)).toBe(2);
    expect(fs.lookupCount(b.ino)).toBe(2);
    expect(fs.lookupCount(ROOT)).toBe(0);
    // rejected entries do not count
    list(fs, ROOT, 0, true, 3); // ., .., a
    expect(fs.lookupCount(a.ino)).toBe(3);
    expect(fs.lookupCount(b.ino)).toBe(2);
    // non-plus takes none
    list(fs, ROOT, 0, false);
    expect(fs.lookupCount(a.ino)).toBe(3);
  });

  test("opendir/releasedir on directories only", () => {
    const fs = memfs();
    const f = mkfile(fs, ROOT, "f");
    const h = fs.opendir(ctx, ROOT, 0);
    expect(h.fh).toBeGreaterThan(0);
    expect(errnoOf(() => fs.opendir(ctx, f.ino, 0))).toBe(Errno.ENOTDIR);
    fs.releasedir(ctx, ROOT, h.fh);
  });
});

describe("rename", () => {
  function setup(): { fs: MemFS; a: number; b: number } {
    const fs = memfs();
    const a = fs.mkdir(ctx, ROOT, "a", 0o755, 0).ino;
    const b = fs.mkdir(ctx, ROOT, "b", 0o755, 0).ino;
    return { fs, a, b };
  }

  test("moves files and directories between parents", () => {
    const { fs, a, b } = setup();
    const f = mkfile(fs, a, "f");
    fs.rename(ctx, a, "f", b, "g", 0);
    expect(fs.lookup(ctx, a, "f")).toBeNull(); // a missing name: null, no exception
    expect(fs.lookup(ctx, b, "g")!.ino).toBe(f.ino);
    const sub = fs.mkdir(ctx, a, "sub", 0o755, 0).ino;
    expect(attrOf(fs, a).nlink).toBe(3);
    fs.rename(ctx, a, "sub", b, "sub2", 0);
    expect(attrOf(fs, a).nlink).toBe(2);
    expect(attrOf(fs, b).nlink).toBe(3);
    expect(fs.lookup(ctx, sub, "..")!.ino).toBe(b);
    expect(list(fs, sub)[1]!.ino).toBe(b);
    expect(errnoOf(() => fs.rename(ctx, a, "missing", b, "x", 0))).toBe(Errno.ENOENT);
  });

  test("replaces files and empty directories; POSIX type rules", () => {
    const { fs, a, b } = setup();
    const f1 = mkfile(fs, ROOT, "f1");
    const f2 = mkfile(fs, ROOT, "f2");
    write(fs, f1.ino, f1.fh, 0, "one");
    fs.rename(ctx, ROOT, "f1", ROOT, "f2", 0);
    expect(fs.lookup(ctx, ROOT, "f2")!.ino).toBe(f1.ino);
    expect(attrOf(fs, f2.ino).nlink).toBe(0);
    // dir over empty dir
    const rootLinks = attrOf(fs, ROOT).nlink; // 4
    fs.rename(ctx, ROOT, "a", ROOT, "b", 0);
    expect(attrOf(fs, ROOT).nlink).toBe(rootLinks - 1);
    expect(fs.lookup(ctx, ROOT, "b")!.ino).toBe(a);
    expect(attrOf(fs, b).nlink).toBe(0);
    // dir over non-empty dir
    const c = fs.mkdir(ctx, ROOT, "c", 0o755, 0).ino;
    mkfile(fs, c, "inside");
    expect(errnoOf(() => fs.rename(ctx, ROOT, "b", ROOT, "c", 0))).toBe(Errno.ENOTEMPTY);
    // dir over file, file over dir
    expect(errnoOf(() => fs.rename(ctx, ROOT, "b", ROOT, "f2", 0))).toBe(Errno.ENOTDIR);
    expect(errnoOf(() => fs.rename(ctx, ROOT, "f2", ROOT, "b", 0))).toBe(Errno.EISDIR);
  });

  test("a directory cannot move into its own subtree", () => {
    const { fs, a } = setup();
    const x = fs.mkdir(ctx, a, "x", 0o755, 0).ino;
    const y = fs.mkdir(ctx, x, "y", 0o755, 0).ino;
    expect(errnoOf(() => fs.rename(ctx, ROOT, "a", y, "a", 0))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.rename(ctx, ROOT, "a", a, "self", 0))).toBe(Errno.EINVAL);
    // target is an ancestor of the source: not empty
    expect(errnoOf(() => fs.rename(ctx, x, "y", ROOT, "a", 0))).toBe(Errno.ENOTEMPTY);
    expect(errnoOf(() => fs.rename(ctx, x, "y", ROOT, "a", 2))).toBe(Errno.EINVAL);
  });

  test("same inode is a no-op", () => {
    const fs = memfs();
    const f = mkfile(fs, ROOT, "f");
    fs.link(ctx, f.ino, ROOT, "g");
    fs.rename(ctx, ROOT, "f", ROOT, "g", 0);
    expect(fs.lookup(ctx, ROOT, "f")!.ino).toBe(f.ino);
    expect(fs.lookup(ctx, ROOT, "g")!.ino).toBe(f.ino);
    expect(attrOf(fs, f.ino).nlink).toBe(2);
    fs.rename(ctx, ROOT, "f", ROOT, "f", 0);
    expect(fs.lookup(ctx, ROOT, "f")!.ino).toBe(f.ino);
  });

  test("RENAME_NOREPLACE and RENAME_EXCHANGE", () => {
    const { fs, a, b } = setup();
    const f = mkfile(fs, a, "f");
    const g = mkfile(fs, b, "g");
    expect(errnoOf(() => fs.rename(ctx, a, "f", b, "g", 1))).toBe(Errno.EEXIST);
    fs.rename(ctx, a, "f", b, "h", 1);
    expect(fs.lookup(ctx, b, "h")!.ino).toBe(f.ino);
    expect(errnoOf(() => fs.rename(ctx, b, "h", a, "nothing", 2))).toBe(Errno.ENOENT);
    fs.rename(ctx, b, "h", b, "g", 2);
    expect(fs.lookup(ctx, b, "h")!.ino).toBe(g.ino);
    expect(fs.lookup(ctx, b, "g")!.ino).toBe(f.ino);
    // exchange a directory with a file across parents: link counts move
    const d = fs.mkdir(ctx, a, "d", 0o755, 0).ino;
    expect(attrOf(fs, a).nlink).toBe(3);
    fs.rename(ctx, a, "d", b, "g", 2);
    expect(attrOf(fs, a).nlink).toBe(2);
    expect(attrOf(fs, b).nlink).toBe(3);
    expect(fs.lookup(ctx, b, "g")!.ino).toBe(d);
    expect(fs.lookup(ctx, a, "d")!.ino).toBe(f.ino);
    expect(fs.lookup(ctx, d, "..")!.ino).toBe(b);
    expect(errnoOf(() => fs.rename(ctx, a, "d", b, "g", 3))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.rename(ctx, a, "d", b, "g", 8))).toBe(Errno.EINVAL);
  });

  test("RENAME_WHITEOUT leaves a 0/0 character device", () => {
    const fs = memfs();
    mkfile(fs, ROOT, "f");
    fs.rename(ctx, ROOT, "f", ROOT, "g", 4);
    const w = fs.lookup(ctx, ROOT, "f")!;
    expect(w.attr.mode).toBe(S_IFCHR);
    expect(w.attr.rdev).toBe(0);
  });

  test("rename keeps the entry listed once and updates parents", async () => {
    const { fs, a, b } = setup();
    mkfile(fs, a, "f");
    const t0 = attrOf(fs, b);
    await Bun.sleep(2);
    fs.rename(ctx, a, "f", b, "f", 0);
    expect(newer(mtimeOf(attrOf(fs, b)), mtimeOf(t0))).toBe(true);
    expect(list(fs, a).map((e) => e.name)).toEqual([".", ".."]);
    expect(list(fs, b).map((e) => e.name)).toEqual([".", "..", "f"]);
    expect(attrOf(fs, a).size).toBe(40);
    expect(attrOf(fs, b).size).toBe(60);
  });
});

describe("xattrs", () => {
  const v = (s: string): Uint8Array => enc.encode(s);

  test("set, get, list, remove with create/replace flags", () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    fs.setxattr(ctx, ino, "user.a", v("1"), 0);
    fs.setxattr(ctx, ino, "user.b", v("22"), 1);
    expect(dec.decode(fs.getxattr(ctx, ino, "user.a"))).toBe("1");
    expect(fs.listxattr(ctx, ino)).toEqual(["user.a", "user.b"]);
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user.a", v("x"), 1))).toBe(Errno.EEXIST);
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user.c", v("x"), 2))).toBe(Errno.ENODATA);
    fs.setxattr(ctx, ino, "user.a", v("replaced"), 2);
    expect(dec.decode(fs.getxattr(ctx, ino, "user.a"))).toBe("replaced");
    fs.removexattr(ctx, ino, "user.a");
    expect(errnoOf(() => fs.getxattr(ctx, ino, "user.a"))).toBe(Errno.ENODATA);
    expect(errnoOf(() => fs.removexattr(ctx, ino, "user.a"))).toBe(Errno.ENODATA);
    expect(fs.listxattr(ctx, ino)).toEqual(["user.b"]);
    fs.setxattr(ctx, ino, "user.empty", new Uint8Array(0), 0);
    expect(fs.getxattr(ctx, ino, "user.empty").length).toBe(0);
    fs.setxattr(ctx, ROOT, "trusted.x", v("t"), 0);
    fs.setxattr(ctx, ROOT, "security.y", v("s"), 0);
    expect(fs.listxattr(ctx, ROOT)).toEqual(["trusted.x", "security.y"]);
  });

  test("value is copied", () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    const buf = v("abc");
    fs.setxattr(ctx, ino, "user.k", buf, 0);
    buf.fill(0);
    expect(dec.decode(fs.getxattr(ctx, ino, "user.k"))).toBe("abc");
  });

  test("name and size rules", () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    expect(errnoOf(() => fs.setxattr(ctx, ino, "noprefix", v("x"), 0))).toBe(Errno.EOPNOTSUPP);
    expect(errnoOf(() => fs.getxattr(ctx, ino, "bogus.x"))).toBe(Errno.EOPNOTSUPP);
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user.", v("x"), 0))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user." + "n".repeat(251), v("x"), 0))).toBe(Errno.ERANGE);
    expect(() => fs.setxattr(ctx, ino, "user." + "n".repeat(250), v("x"), 0)).not.toThrow();
    expect(() => fs.setxattr(ctx, ino, "user.max", new Uint8Array(65536), 0)).not.toThrow();
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user.big", new Uint8Array(65537), 0))).toBe(Errno.E2BIG);
    expect(errnoOf(() => fs.setxattr(ctx, ino, "user.x", v("x"), 4))).toBe(Errno.EINVAL);
    const l = fs.symlink(ctx, ROOT, "l", "f");
    expect(errnoOf(() => fs.setxattr(ctx, l.ino, "user.x", v("x"), 0))).toBe(Errno.EPERM);
    expect(errnoOf(() => fs.getxattr(ctx, l.ino, "user.x"))).toBe(Errno.ENODATA);
    expect(() => fs.setxattr(ctx, l.ino, "trusted.x", v("x"), 0)).not.toThrow();
  });

  test("setxattr changes ctime", async () => {
    const fs = memfs();
    const { ino } = mkfile(fs, ROOT, "f");
    const t0 = attrOf(fs, ino);
    await Bun.sleep(2);
    fs.setxattr(ctx, ino, "user.a", v("1"), 0);
    const t1 = attrOf(fs, ino);
    expect(newer(ctimeOf(t1), ctimeOf(t0))).toBe(true);
    expect(mtimeOf(t1)).toEqual(mtimeOf(t0));
  });
});

describe("fallocate, lseek, copy_file_range", () => {
  test("mode 0 allocates and extends; KEEP_SIZE does not extend", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    fs.fallocate(ctx, ino, fh, 0, 100_000, 0);
    let a = attrOf(fs, ino);
    expect(a.size).toBe(100_000);
    expect(a.blocks).toBeGreaterThanOrEqual(Math.ceil(100_000 / 512));
    expect(read(fs, ino, fh, 0, 100_000).every((b) => b === 0)).toBe(true);
    fs.fallocate(ctx, ino, fh, 200_000, 50_000, 1);
    a = attrOf(fs, ino);
    expect(a.size).toBe(100_000);
    expect(a.blocks * 512).toBeGreaterThanOrEqual(100_000 + 50_000);
    // shrinking drops preallocation past EOF
    fs.setattr(ctx, ino, { size: 0, valid: 0 });
    expect(attrOf(fs, ino).blocks).toBe(0);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, 0, 0, 0))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, -1, 10, 0))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.fallocate(ctx, ROOT, 0, 0, 10, 0))).toBe(Errno.EISDIR);
  });

  test("punch hole zeroes and deallocates; other modes unsupported", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, new Uint8Array(4 * CHUNK_SIZE).fill(7));
    const before = attrOf(fs, ino).blocks;
    fs.fallocate(ctx, ino, fh, 1000, 2 * CHUNK_SIZE + 5000, 3);
    const a = attrOf(fs, ino);
    expect(a.size).toBe(4 * CHUNK_SIZE);
    expect(a.blocks).toBeLessThan(before);
    const r = read(fs, ino, fh, 0, 4 * CHUNK_SIZE);
    expect(r.subarray(0, 1000).every((b) => b === 7)).toBe(true);
    expect(r.subarray(1000, 2 * CHUNK_SIZE + 6000).every((b) => b === 0)).toBe(true);
    expect(r.subarray(2 * CHUNK_SIZE + 6000).every((b) => b === 7)).toBe(true);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, 0, 10, 2))).toBe(Errno.EOPNOTSUPP);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, 0, 10, 0x10))).toBe(Errno.EOPNOTSUPP);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, 0, 10, 0x08))).toBe(Errno.EOPNOTSUPP);
  });

  test("SEEK_DATA / SEEK_HOLE follow chunk allocation", () => {
    const fs = memfs();
    const { ino, fh } = mkfile(fs, ROOT, "f");
    const C = CHUNK_SIZE;
    write(fs, ino, fh, 2 * C, new Uint8Array(C).fill(1)); // data in chunk 2
    fs.setattr(ctx, ino, { size: 10 * C, valid: 0 });
    expect(fs.lseek(ctx, ino, fh, 0, 3)).toBe(2 * C);
    expect(fs.lseek(ctx, ino, fh, 2 * C + 5, 3)).toBe(2 * C + 5);
    expect(fs.lseek(ctx, ino, fh, 0, 4)).toBe(0);
    expect(fs.lseek(ctx, ino, fh, 2 * C + 5, 4)).toBe(3 * C);
    expect(errnoOf(() => fs.lseek(ctx, ino, fh, 3 * C, 3))).toBe(Errno.ENXIO);
    expect(errnoOf(() => fs.lseek(ctx, ino, fh, 10 * C, 3))).toBe(Errno.ENXIO);
    expect(errnoOf(() => fs.lseek(ctx, ino, fh, 10 * C, 4))).toBe(Errno.ENXIO);
    // a fully allocated file has its only hole at EOF
    const g = mkfile(fs, ROOT, "g");
    write(fs, g.ino, g.fh, 0, new Uint8Array(3 * C + 100).fill(1));
    expect(fs.lseek(ctx, g.ino, g.fh, 10, 4)).toBe(3 * C + 100);
    expect(fs.lseek(ctx, g.ino, g.fh, 10, 3)).toBe(10);
    // a partly allocated chunk: the hole starts at the end of its allocated pages
    const p = mkfile(fs, ROOT, "p");
    write(fs, p.ino, p.fh, 0, "abc");
    fs.setattr(ctx, p.ino, { size: 2 * C, valid: 0 });
    expect(fs.lseek(ctx, p.ino, p.fh, 0, 4)).toBe(4096);
    expect(fs.lseek(ctx, p.ino, p.fh, 1, 3)).toBe(1);
    expect(errnoOf(() => fs.lseek(ctx, p.ino, p.fh, 4096, 3))).toBe(Errno.ENXIO);
    // a data chunk far away in a huge sparse file
    const h = mkfile(fs, ROOT, "h");
    write(fs, h.ino, h.fh, 2 ** 40, "x");
    expect(fs.lseek(ctx, h.ino, h.fh, 0, 3)).toBe(2 ** 40);
    expect(fs.lseek(ctx, h.ino, h.fh, 0, 4)).toBe(0);
  });

  test("copyFileRange copies bytes, clips at EOF, keeps holes", () => {
    const fs = memfs();
    const s = mkfile(fs, ROOT, "s");
    const d = mkfile(fs, ROOT, "d");
    const data = pattern(3 * CHUNK_SIZE, 5);
    write(fs, s.ino, s.fh, 0, data);
    write(fs, s.ino, s.fh, 10 * CHUNK_SIZE, "tail"); // hole from 3C to 10C
    const size = 10 * CHUNK_SIZE + 4;
    expect(fs.copyFileRange(ctx, s.ino, s.fh, 0, d.ino, d.fh, 100, size + 1000, 0)).toBe(size);
    expect(attrOf(fs, d.ino).size).toBe(100 + size);
    expect(read(fs, d.ino, d.fh, 100, data.length)).toEqual(data);
    expect(dec.decode(read(fs, d.ino, d.fh, 100 + 10 * CHUNK_SIZE, 10))).toBe("tail");
    expect(read(fs, d.ino, d.fh, 100 + 3 * CHUNK_SIZE, 7 * CHUNK_SIZE).every((b) => b === 0)).toBe(true);
    expect(attrOf(fs, d.ino).blocks * 512).toBeLessThan(6 * CHUNK_SIZE);
    expect(fs.copyFileRange(ctx, s.ino, s.fh, size, d.ino, d.fh, 0, 10, 0)).toBe(0);
    // same file, overlapping → EINVAL; non-overlapping is fine
    expect(errnoOf(() => fs.copyFileRange(ctx, s.ino, s.fh, 0, s.ino, s.fh, 10, 100, 0))).toBe(Errno.EINVAL);
    expect(fs.copyFileRange(ctx, s.ino, s.fh, 0, s.ino, s.fh, 20 * CHUNK_SIZE, 100, 0)).toBe(100);
    expect(read(fs, s.ino, s.fh, 20 * CHUNK_SIZE, 100)).toEqual(data.subarray(0, 100));
    expect(errnoOf(() => fs.copyFileRange(ctx, s.ino, s.fh, 0, d.ino, d.fh, 0, 10, 1))).toBe(Errno.EINVAL);
    expect(errnoOf(() => fs.copyFileRange(ctx, s.ino, s.fh, 0, ROOT, 0, 0, 10, 0))).toBe(Errno.EISDIR);
  });

  test("copyFileRange over existing data zeroes the copied holes", () => {
    const fs = memfs();
    const s = mkfile(fs, ROOT, "s");
    const d = mkfile(fs, ROOT, "d");
    fs.setattr(ctx, s.ino, { size: 2 * CHUNK_SIZE, valid: 0 }); // all hole
    write(fs, d.ino, d.fh, 0, new Uint8Array(3 * CHUNK_SIZE).fill(9));
    expect(fs.copyFileRange(ctx, s.ino, s.fh, 0, d.ino, d.fh, 1000, 2 * CHUNK_SIZE, 0)).toBe(2 * CHUNK_SIZE);
    const r = read(fs, d.ino, d.fh, 0, 3 * CHUNK_SIZE);
    expect(r.subarray(0, 1000).every((b) => b === 9)).toBe(true);
    expect(r.subarray(1000, 1000 + 2 * CHUNK_SIZE).every((b) => b === 0)).toBe(true);
    expect(r.subarray(1000 + 2 * CHUNK_SIZE).every((b) => b === 9)).toBe(true);
  });
});

describe("space accounting", () => {
  test("statfs reports maxBytes-based blocks and inode counts", () => {
    const fs = memfs({ maxBytes: 1 << 20, maxInodes: 100 });
    const s0 = fs.statfs();
    expect(s0).toMatchObject({ bsize: 4096, frsize: 4096, namelen: 255, blocks: 256, bfree: 256, bavail: 256, files: 100, ffree: 99 });
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, new Uint8Array(CHUNK_SIZE));
    const s1 = fs.statfs();
    expect(s1.bfree).toBe(256 - 16);
    expect(s1.ffree).toBe(98);
  });

  test("ENOSPC when data exceeds maxBytes; space returns after truncate", () => {
    const fs = memfs({ maxBytes: 4 * CHUNK_SIZE });
    const { ino, fh } = mkfile(fs, ROOT, "f");
    write(fs, ino, fh, 0, new Uint8Array(4 * CHUNK_SIZE));
    expect(errnoOf(() => write(fs, ino, fh, 4 * CHUNK_SIZE, "x"))).toBe(Errno.ENOSPC);
    expect(attrOf(fs, ino).size).toBe(4 * CHUNK_SIZE);
    // overwriting allocated data needs no space
    expect(write(fs, ino, fh, 10, "fine")).toBe(4);
    expect(errnoOf(() => fs.fallocate(ctx, ino, fh, 0, 8 * CHUNK_SIZE, 0))).toBe(Errno.ENOSPC);
    expect(attrOf(fs, ino).size).toBe(4 * CHUNK_SIZE);
    // sparse growth is free
    fs.setattr(ctx, ino, { size: 2 ** 40, valid: 0 });
    fs.setattr(ctx, ino, { size: CHUNK_SIZE, valid: 0 });
    expect(fs.statfs().bfree).toBe(48);
    const g = mkfile(fs, ROOT, "g");
    expect(write(fs, g.ino, g.fh, 0, new Uint8Array(3 * CHUNK_SIZE))).toBe(3 * CHUNK_SIZE);
  });

  test("small appends never exceed maxBytes", () => {
    const fs = memfs({ maxBytes: 6 * 4096 });
    const { ino, fh } = mkfile(fs, ROOT, "f");
    let off = 0;
    for (;;) {
      try {
        write(fs, ino, fh, off, new Uint8Array(1000).fill(1));
      } catch (err) {
        expect((err as FuseError).errno).toBe(Errno.ENOSPC);
        break;
      }
      off += 1000;
      expect(fs.stats().usedBytes).toBeLessThanOrEqual(6 * 4096);
    }
    expect(off).toBeGreaterThanOrEqual(6 * 4096 - 1000);
    expect(read(fs, ino, fh, 0, off).every((b) => b === 1)).toBe(true);
  });

  test("ENOSPC when out of inodes", () => {
    const fs = memfs({ maxInodes: 3 });
    mkfile(fs, ROOT, "a");
    fs.mkdir(ctx, ROOT, "b", 0o755, 0);
    expect(errnoOf(() => mkfile(fs, ROOT, "c"))).toBe(Errno.ENOSPC);
    expect(errnoOf(() => fs.symlink(ctx, ROOT, "c", "t"))).toBe(Errno.ENOSPC);
    expect(fs.statfs().ffree).toBe(0);
  });
});

describe("access and ownership", () => {
  test("root: read/write always, execute needs an x bit (directories always)", () => {
    const fs = memfs();
    const f = mkfile(fs, ROOT, "f", 0o000);
    fs.access(ctx, f.ino, 4 | 2);
    expect(errnoOf(() => fs.access(ctx, f.ino, 1))).toBe(Errno.EACCES);
    fs.setattr(ctx, f.ino, { mode: 0o001, valid: 0 });
    fs.access(ctx, f.ino, 1);
    const d = fs.mkdir(ctx, ROOT, "d", 0o000, 0);
    fs.access(ctx, d.ino, 7);
  });

  test("others: owner, group, other bits", () => {
    const fs = memfs();
    const owner = as(1000, 1000);
    const f = fs.create(owner, ROOT, "f", 0o640, 0, 0o102).entry.ino;
    fs.access(owner, f, 4 | 2);
    expect(errnoOf(() => fs.access(owner, f, 1))).toBe(Errno.EACCES);
    fs.access(as(2000, 1000), f, 4);
    expect(errnoOf(() => fs.access(as(2000, 1000), f, 2))).toBe(Errno.EACCES);
    expect(errnoOf(() => fs.access(as(2000, 2000), f, 4))).toBe(Errno.EACCES);
    fs.access(as(2000, 2000), f, 0); // F_OK
    expect(errnoOf(() => fs.access(owner, 9999, 0))).toBe(Errno.ENOENT);
  });

  test("set-group-ID directories pass on their group", () => {
    const fs = memfs();
    const d = fs.mkdir(ctx, ROOT, "d", 0o2775, 0).ino;
    fs.setattr(ctx, d, { gid: 500, mode: 0o2775, valid: 0 });
    const f = fs.create(as(1000, 1000), d, "f", 0o644, 0, 0o102).entry;
    expect(f.attr.gid).toBe(500);
    const sub = fs.mkdir(as(1000, 1000), d, "sub", 0o755, 0);
    expect(sub.attr.gid).toBe(500);
    expect(sub.attr.mode & 0o2000).toBe(0o2000);
  });
});
