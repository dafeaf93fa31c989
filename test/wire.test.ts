// Byte-exact replies per opcode, through the REAL dispatcher and reply encoder, with no mount,
// no root and no kernel (fuse-uring/testing). Each expected reply is written out field by field
// (fuser's style): out_header (len, error, unique) and then the out struct, with the offsets of
// <linux/fuse.h>. Beside test/codec.test.ts (the structs alone), this proves the dispatcher
// decodes each request where the kernel puts it and answers with exactly these bytes.

import { describe, expect, test } from "bun:test";
import { attr, attrReply, defineFs, defineInodeFs, entry, FuseError, O_RDWR, SEEK_DATA, type InodeFS, type RequestContext } from "../lib/index.ts";
import { testFs, type Reply } from "../lib/testing/index.ts";
import { le, u64, u32, i32 } from "./helpers/bytes.ts";

const text = (s: string) => [...Buffer.from(s)];

/** struct fuse_out_header: len @0, error @4 (-errno), unique @8. */
function outHeader(payloadLen: number, errno: number, unique: number): number[] {
  return [...u32(16 + payloadLen), ...i32(-errno), ...u64(unique)];
}

function expectReply(r: Reply, expected: number[]): void {
  expect(r.noReply).toBe(false);
  expect([...r.bytes]).toEqual(expected);
}

const T0 = 1700000000;
// The fixture's one file, built with attr(): every field given, so the bytes are fixed.
const hello = attr({ ino: 2, mode: 0o100644, size: 5, nlink: 1, uid: 1000, gid: 100, rdev: 0, blksize: 4096, time: [T0, 7] });
/** struct fuse_attr of `hello` (88 bytes). */
const helloAttrBytes = [
  ...u64(2), // ino @0
  ...u64(5), // size @8
  ...u64(1), // blocks @16: ceil(5 / 512)
  ...u64(T0), // atime @24
  ...u64(T0), // mtime @32
  ...u64(T0), // ctime @40
  ...u32(7), // atimensec @48
  ...u32(7), // mtimensec @52
  ...u32(7), // ctimensec @56
  ...u32(0o100644), // mode @60
  ...u32(1), // nlink @64
  ...u32(1000), // uid @68
  ...u32(100), // gid @72
  ...u32(0), // rdev @76
  ...u32(4096), // blksize @80
  ...u32(0), // flags @84
];

const seen: { op: string; args: unknown[] }[] = [];

function fixture(): InodeFS {
  const log = (op: string, ...args: unknown[]) => void seen.push({ op, args });
  return {
    lookup(_ctx: RequestContext, parent, name) {
      log("lookup", parent, name);
      if (parent === 1 && name === "hello") return entry({ ino: 2, attr: hello, generation: 9, entryTtl: 2.5, attrTtl: 3 });
      throw new FuseError("ENOENT");
    },
    getattr(_ctx, ino, fh) {
      log("getattr", ino, fh);
      return hello;
    },
    setattr(_ctx, ino, c) {
      log("setattr", ino, c);
      return attrReply({ ...hello, size: c.size ?? hello.size, blocks: 0 }, 7);
    },
    readlink() {
      return "target/x";
    },
    mkdir(_ctx, parent, name, mode, umask) {
      log("mkdir", parent, name, mode, umask);
      return entry({ ino: 10, type: "dir", mode: mode & ~umask, uid: 0, gid: 0, time: [T0, 0] });
    },
    unlink(_ctx, parent, name) {
      log("unlink", parent, name);
    },
    open(_ctx, ino, flags) {
      log("open", ino, flags);
      return { fh: 42, keepCache: true };
    },
    read(_ctx, ino, fh, offset, size) {
      log("read", ino, fh, offset, size);
      return Buffer.from("hello").subarray(offset, offset + size);
    },
    write(_ctx, ino, fh, offset, data) {
      log("write", ino, fh, offset, Buffer.from(data).toString());
      return data.length;
    },
    statfs() {
      return { blocks: 100, bfree: 60, bavail: 50, files: 10, ffree: 5, bsize: 4096, namelen: 255, frsize: 4096 };
    },
    release(_ctx, ino, fh) {
      log("release", ino, fh);
    },
    fsync() {
      throw new Error("boom (an unexpected exception: EIO)");
    },
    getxattr(_ctx, _ino, name) {
      if (name !== "user.k") throw new FuseError("ENODATA");
      return "value";
    },
    listxattr() {
      return ["user.a", "user.bb"];
    },
    readdir(_ctx, _ino, _fh, offset, filler) {
      const all: [string, number, number][] = [[".", 1, 0o40755], ["..", 1, 0o40755], ["hello", 2, 0o100644]];
      for (let i = offset; i < all.length; i++) {
        const [name, ino, mode] = all[i]!;
        if (!filler.add(name, i + 1, { ino, attr: ino === 2 ? hello : attr({ ino, mode, time: [T0, 0], uid: 0, gid: 0 }) })) break;
      }
    },
    access() {
      throw new FuseError("EACCES");
    },
    lseek(_ctx, _ino, _fh, offset, whence) {
      log("lseek", offset, whence);
      return 4096;
    },
    copyFileRange(_ctx, inoIn, fhIn, offIn, inoOut, fhOut, offOut, len, flags) {
      log("copyFileRange", inoIn, fhIn, offIn, inoOut, fhOut, offOut, len, flags);
      return len - 1;
    },
  };
}

function tester() {
  seen.length = 0;
  return testFs(fixture(), { entryTtl: 1, attrTtl: 1 });
}

describe("wire: byte-exact replies through the real dispatcher (no mount)", () => {
  test("LOOKUP: fuse_entry_out with the handler's generation and TTLs (2.5 s = 2 s + 500000000 ns)", async () => {
    const t = tester();
    const r = await t.lookup(1, "hello");
    expectReply(r, [
      ...outHeader(128, 0, 2), // the first request's unique is 2
      ...u64(2), // nodeid @0
      ...u64(9), // generation @8
      ...u64(2), // entry_valid @16
      ...u64(3), // attr_valid @24
      ...u32(500000000), // entry_valid_nsec @32
      ...u32(0), // attr_valid_nsec @36
      ...helloAttrBytes, // attr @40
    ]);
    expect(seen).toEqual([{ op: "lookup", args: [1, "hello"] }]);
    expect(r.entry!.attr.size).toBe(5);
  });

  /** The answer to the first request (unique 2) for a missing name with negativeTtl 1.25. */
  const NEGATIVE_ENTRY_1_25 = [
    ...outHeader(128, 0, 2),
    ...u64(0), // nodeid 0: negative entry
    ...u64(0), // generation
    ...u64(1), // entry_valid 1 s …
    ...u64(0), // attr_valid
    ...u32(250000000), // … + 250 ms
    ...u32(0),
    ...new Array(88).fill(0), // attr: zeros
  ];

  test("LOOKUP of a missing name: ENOENT (header only); with negativeTtl a cached negative entry", async () => {
    const t = tester();
    expectReply(await t.lookup(1, "nope"), outHeader(0, 2, 2));
    const n = testFs(fixture(), { negativeTtl: 1.25 });
    expectReply(await n.lookup(1, "nope"), NEGATIVE_ENTRY_1_25);
  });

  test("LOOKUP answered null (sync or async) is a missing name: the same bytes as a thrown ENOENT", async () => {
    for (const lookup of [() => null, async () => null]) {
      const plain = testFs({ lookup });
      expectReply(await plain.lookup(1, "nope"), outHeader(0, 2, 2));
      const cached = testFs({ lookup }, { negativeTtl: 1.25 });
      expectReply(await cached.lookup(1, "nope"), NEGATIVE_ENTRY_1_25);
    }
    // undefined is still a handler bug (a forgotten return), not a missing name: EIO.
    expectReply(await testFs({ lookup: () => undefined as never }).lookup(1, "nope"), outHeader(0, 5, 2));
  });

  test("GETATTR with FUSE_GETATTR_FH: the fh reaches the handler; fuse_attr_out with the mount's TTL", async () => {
    const t = tester();
    const r = await t.getattr(2, 42);
    expectReply(r, [
      ...outHeader(104, 0, 2),
      ...u64(1), // attr_valid @0 (the option: 1 s)
      ...u32(0), // attr_valid_nsec @8
      ...u32(0), // dummy @12
      ...helloAttrBytes, // attr @16
    ]);
    expect(seen).toEqual([{ op: "getattr", args: [2, 42] }]);
  });

  test("SETATTR (size): decoded changes; attrReply()'s own TTL", async () => {
    const t = tester();
    const r = await t.setattr(2, { valid: 1 << 3, size: 3 });
    const a = [...helloAttrBytes];
    a.splice(8, 8, ...u64(3)); // size 3
    a.splice(16, 8, ...u64(0)); // blocks 0
    expectReply(r, [...outHeader(104, 0, 2), ...u64(7), ...u32(0), ...u32(0), ...a]);
    expect(seen[0]!.args).toEqual([2, { valid: 8, size: 3 }]);
  });

  test("READLINK: the target bytes, no NUL", async () => {
    expectReply(await tester().readlink(5), [...outHeader(8, 0, 2), ...text("target/x")]);
  });

  test("MKDIR: mode and umask decoded from fuse_mkdir_in; entry() defaults (nlink 2 for a directory)", async () => {
    const t = tester();
    const r = await t.mkdir(1, "d", 0o777, 0o022);
    expect(seen).toEqual([{ op: "mkdir", args: [1, "d", 0o777, 0o022] }]);
    expectReply(r, [
      ...outHeader(128, 0, 2),
      ...u64(10), ...u64(0), ...u64(1), ...u64(1), ...u32(0), ...u32(0),
      ...u64(10), // attr.ino: entry() used the node id
      ...u64(0), ...u64(0), // size, blocks
      ...u64(T0), ...u64(T0), ...u64(T0), ...u32(0), ...u32(0), ...u32(0),
      ...u32(0o40755), // S_IFDIR | (0o777 & ~0o022)
      ...u32(2), // nlink: a directory
      ...u32(0), ...u32(0), ...u32(0), ...u32(4096), ...u32(0),
    ]);
  });

  test("UNLINK: success is a bare out_header", async () => {
    const t = tester();
    expectReply(await t.unlink(1, "hello"), outHeader(0, 0, 2));
    expect(seen).toEqual([{ op: "unlink", args: [1, "hello"] }]);
  });

  test("OPEN: fuse_open_out with FOPEN_KEEP_CACHE", async () => {
    const t = tester();
    expectReply(await t.open(2, O_RDWR), [
      ...outHeader(16, 0, 2),
      ...u64(42), // fh @0
      ...u32(2), // open_flags @8: FOPEN_KEEP_CACHE
      ...i32(0), // backing_id @12
    ]);
    expect(seen).toEqual([{ op: "open", args: [2, O_RDWR] }]);
  });

  test("READ: the data alone, truncated at end of file", async () => {
    const t = tester();
    expectReply(await t.read(2, 42, 1, 4096), [...outHeader(4, 0, 2), ...text("ello")]);
    expect(seen).toEqual([{ op: "read", args: [2, 42, 1, 4096] }]);
  });

  test("WRITE: the data from the payload; fuse_write_out", async () => {
    const t = tester();
    expectReply(await t.write(2, 42, 100, "abc"), [...outHeader(8, 0, 2), ...u32(3), ...u32(0)]);
    expect(seen).toEqual([{ op: "write", args: [2, 42, 100, "abc"] }]);
  });

  test("STATFS: fuse_statfs_out (80 bytes, spare zeroed)", async () => {
    expectReply(await tester().statfs(), [
      ...outHeader(80, 0, 2),
      ...u64(100), ...u64(60), ...u64(50), ...u64(10), ...u64(5), // blocks bfree bavail files ffree
      ...u32(4096), ...u32(255), ...u32(4096), // bsize namelen frsize
      ...new Array(28).fill(0), // padding + spare[6]
    ]);
  });

  test("RELEASE: empty reply, fh decoded", async () => {
    const t = tester();
    expectReply(await t.release(2, 42), outHeader(0, 0, 2));
    expect(seen).toEqual([{ op: "release", args: [2, 42] }]);
  });

  test("FSYNC whose handler throws a plain Error: EIO, recorded as unexpected", async () => {
    const t = tester();
    expectReply(await t.fsync(2, 42), outHeader(0, 5, 2));
    expect(t.unexpected.length).toBe(1);
  });

  test("FLUSH without a handler: ENOSYS", async () => {
    expectReply(await tester().flush(2, 42), outHeader(0, 38, 2));
  });

  test("GETXATTR: size probe (fuse_getxattr_out), the value, ERANGE, ENODATA", async () => {
    const t = tester();
    expectReply(await t.getxattr(2, "user.k", 0), [...outHeader(8, 0, 2), ...u32(5), ...u32(0)]);
    expectReply(await t.getxattr(2, "user.k", 64), [...outHeader(5, 0, 4), ...text("value")]);
    expectReply(await t.getxattr(2, "user.k", 4), outHeader(0, 34, 6)); // ERANGE
    expectReply(await t.getxattr(2, "user.other", 64), outHeader(0, 61, 8)); // ENODATA
  });

  test("LISTXATTR: NUL-terminated names; size probe", async () => {
    const t = tester();
    expectReply(await t.listxattr(2, 0), [...outHeader(8, 0, 2), ...u32(15), ...u32(0)]);
    expectReply(await t.listxattr(2, 100), [...outHeader(15, 0, 4), ...text("user.a"), 0, ...text("user.bb"), 0]);
  });

  test("READDIR: fuse_dirent records padded to 8 bytes; a small buffer stops early and resumes", async () => {
    const t = tester();
    const dirent = (ino: number, off: number, name: string, type: number) => {
      const rec = [...u64(ino), ...u64(off), ...u32(name.length), ...u32(type), ...text(name)];
      while (rec.length % 8) rec.push(0);
      return rec;
    };
    const all = [...dirent(1, 1, ".", 4), ...dirent(1, 2, "..", 4), ...dirent(2, 3, "hello", 8)];
    expectReply(await t.readdir(1, 0, 0, 4096), [...outHeader(all.length, 0, 2), ...all]);
    const firstTwo = [...dirent(1, 1, ".", 4), ...dirent(1, 2, "..", 4)];
    expectReply(await t.readdir(1, 0, 0, 70), [...outHeader(64, 0, 4), ...firstTwo]); // "hello" (32 B) does not fit in 70
    expectReply(await t.readdir(1, 0, 2, 4096), [...outHeader(32, 0, 6), ...dirent(2, 3, "hello", 8)]);
  });

  test("ACCESS: the handler's FuseError errno", async () => {
    expectReply(await tester().access(2, 4), outHeader(0, 13, 2));
  });

  test("LSEEK (SEEK_DATA): fuse_lseek_out", async () => {
    const t = tester();
    expectReply(await t.lseek(2, 42, 10, SEEK_DATA), [...outHeader(8, 0, 2), ...u64(4096)]);
    expect(seen).toEqual([{ op: "lseek", args: [10, SEEK_DATA] }]);
  });

  test("COPY_FILE_RANGE: every field of fuse_copy_file_range_in decoded; fuse_write_out", async () => {
    const t = tester();
    expectReply(await t.copyFileRange(2, 42, 1, 3, 43, 2, 100, 0), [...outHeader(8, 0, 2), ...u32(99), ...u32(0)]);
    expect(seen).toEqual([{ op: "copyFileRange", args: [2, 42, 1, 3, 43, 2, 100, 0] }]);
  });

  test("FORGET takes no reply; an unsupported opcode answers ENOSYS", async () => {
    const t = tester();
    expect((await t.forget(2, 1)).noReply).toBe(true);
    expectReply(await t.send({ opcode: 39 /* IOCTL */, nodeid: 2, opIn: new Uint8Array(32), payload: new Uint8Array(0) }), outHeader(0, 38, 4));
    expect(t.protocolErrors).toEqual([]);
  });
});

describe("wire: path handlers (defineFs) through PathFS and the dispatcher", () => {
  const fs = () =>
    defineFs({
      getattr: (p) => (p === "/" ? { type: "dir", mtime: [T0, 0] } : p === "/f" ? { size: 5, mode: 0o644, mtime: [T0, 0], uid: 1, gid: 2, ino: 77 } : null),
      readdir: () => ["f"],
      read: (_p, { offset, size }) => Buffer.from("01234").subarray(offset, offset + size),
    });

  test("LOOKUP → OPEN → READ: node id 2, the named-order read answers the bytes", async () => {
    const t = testFs(fs(), { entryTtl: 1, attrTtl: 1 });
    const l = await t.lookup(1, "f");
    expect(l.error).toBe(0);
    expect(l.entry!.nodeid).toBe(2);
    expect(l.entry!.attr.ino).toBe(77);
    const o = await t.open(2, 0);
    expect(o.error).toBe(0);
    const r = await t.read(2, o.open!.fh, 2, 10);
    expectReply(r, [...outHeader(3, 0, r.unique), ...text("234")]);
    expect((await t.lookup(1, "missing")).error).toBe(2);
  });

  test("INTERRUPT: the handler sees ctx.signal abort and its EINTR is the answer", async () => {
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const t = testFs(defineFs({
      getattr: (p) => (p === "/" ? { type: "dir" } : { size: 1 }),
      read: (_p, _a, ctx) => new Promise((_, reject) => {
        started();
        ctx.signal.addEventListener("abort", () => reject(new FuseError("EINTR")));
      }),
    }));
    await t.lookup(1, "x");
    const o = await t.open(2, 0);
    const unique = t.nextUniqueId;
    const pending = t.read(2, o.open!.fh, 0, 1);
    await running;
    expect((await t.interrupt(unique)).noReply).toBe(true);
    expectReply(await pending, outHeader(0, 4, unique));
  });
});

describe("wire: the inode API's named forms (defineInodeFs) answer like the positional ones", () => {
  const got: unknown[] = [];
  const fs = () =>
    defineInodeFs({
      lookup: (_ctx, parent, name) => {
        if (parent !== 1 || name !== "f") throw new FuseError("ENOENT");
        return entry({ ino: 2, attr: hello });
      },
      getattr: () => hello,
      read(_ctx, ino, { fh, offset, size, out }) {
        got.push({ op: "read", ino, fh, offset, size });
        out.set(Buffer.from("hel").subarray(0, size));
        return Math.min(3, size);
      },
      write(_ctx, ino, { fh, offset, data, writeFlags, openFlags }) {
        got.push({ op: "write", ino, fh, offset, data: Buffer.from(data).toString(), writeFlags, openFlags });
        return data.length;
      },
      mkdir(_ctx, parent, name, { mode, umask }) {
        got.push({ op: "mkdir", parent, name, mode, umask });
        return entry({ ino: 10, type: "dir", attr: hello });
      },
      rename(_ctx, parent, name, { newParent, newName, flags }) {
        got.push({ op: "rename", parent, name, newParent, newName, flags });
      },
      copyFileRange(_ctx, { from, to, length, flags }) {
        got.push({ op: "copy", from, to, length, flags });
        return length;
      },
    });

  test("read/write/mkdir/rename/copyFileRange: fields decoded into the object; same bytes as positional", async () => {
    got.length = 0;
    const t = testFs(fs());
    expectReply(await t.read(2, 5, 0, 2), [...outHeader(2, 0, 2), ...text("he")]);
    expectReply(await t.write(2, 5, 9, "xyz", 1, O_RDWR), [...outHeader(8, 0, 4), ...u32(3), ...u32(0)]);
    expect((await t.mkdir(1, "d", 0o755, 0o022)).entry!.nodeid).toBe(10);
    expectReply(await t.rename(1, "a", 3, "b", 1), outHeader(0, 0, 8));
    expectReply(await t.copyFileRange(2, 5, 10, 3, 6, 20, 4096, 0), [...outHeader(8, 0, 10), ...u32(4096), ...u32(0)]);
    expect(got).toEqual([
      { op: "read", ino: 2, fh: 5, offset: 0, size: 2 },
      { op: "write", ino: 2, fh: 5, offset: 9, data: "xyz", writeFlags: 1, openFlags: O_RDWR },
      { op: "mkdir", parent: 1, name: "d", mode: 0o755, umask: 0o022 },
      { op: "rename", parent: 1, name: "a", newParent: 3, newName: "b", flags: 1 },
      { op: "copy", from: { ino: 2, fh: 5, offset: 10 }, to: { ino: 3, fh: 6, offset: 20 }, length: 4096, flags: 0 },
    ]);
  });
});

test("the README's defineInodeFs() example answers lookup, getattr and read", async () => {
  const t = testFs((await import("./fixtures/inode-readme.ts")).default);
  const l = await t.lookup(1, "hello");
  expect(l.entry).toMatchObject({ nodeid: 2, attr: { ino: 2, size: 6, mode: 0o100444 } });
  expect((await t.getattr(1)).attr!.attr.mode).toBe(0o40755);
  expect(Buffer.from((await t.read(2, 0, 1, 100)).data).toString()).toBe("ello\n");
  expect((await t.lookup(1, "x")).error).toBe(2);
});

describe("wire: CREATE, SYMLINK, LINK, SETXATTR, READDIRPLUS", () => {
  const calls: unknown[] = [];
  const fs = (): InodeFS => ({
    lookup() {
      throw new FuseError("ENOENT"); // an InodeFS is recognised by its lookup method
    },
    create(_ctx, parent, name, mode, umask, flags) {
      calls.push(["create", parent, name, mode, umask, flags]);
      return { entry: entry({ ino: 3, attr: hello, entryTtl: 0, attrTtl: 0 }), open: { fh: 77, directIo: true } };
    },
    symlink(_ctx, parent, name, target) {
      calls.push(["symlink", parent, name, target]);
      return entry({ ino: 4, attr: hello });
    },
    link(_ctx, ino, newParent, newName) {
      calls.push(["link", ino, newParent, newName]);
      return entry({ ino, attr: hello });
    },
    setxattr(_ctx, ino, name, value, flags) {
      calls.push(["setxattr", ino, name, Buffer.from(value).toString(), flags]);
    },
    readdir(_ctx, _ino, _fh, offset, filler) {
      if (offset === 0) filler.add("hello", 1, { ino: 2, attr: hello, entryTtl: 0, attrTtl: 0 });
    },
  });

  test("CREATE: fuse_entry_out followed by fuse_open_out (FOPEN_DIRECT_IO)", async () => {
    calls.length = 0;
    const t = testFs(fs());
    expectReply(await t.create(1, "new", O_RDWR, 0o644, 0o022), [
      ...outHeader(144, 0, 2),
      ...u64(3), ...u64(0), ...u64(0), ...u64(0), ...u32(0), ...u32(0), ...helloAttrBytes, // entry_out
      ...u64(77), ...u32(1), ...i32(0), // open_out: fh, FOPEN_DIRECT_IO, backing_id
    ]);
    expect(calls).toEqual([["create", 1, "new", 0o644, 0o022, O_RDWR]]);
  });

  test("SYMLINK: name then target in the payload; LINK: the old node id in fuse_link_in", async () => {
    calls.length = 0;
    const t = testFs(fs());
    expect((await t.symlink(1, "s", "../target")).entry!.nodeid).toBe(4);
    expect((await t.link(2, 5, "again")).entry!.nodeid).toBe(2);
    expect(calls).toEqual([["symlink", 1, "s", "../target"], ["link", 2, 5, "again"]]);
  });

  test("SETXATTR: name, value and flags decoded; empty reply", async () => {
    calls.length = 0;
    const t = testFs(fs());
    expectReply(await t.setxattr(2, "user.k", "v1", 1), outHeader(0, 0, 2));
    expect(calls).toEqual([["setxattr", 2, "user.k", "v1", 1]]);
  });

  test("READDIRPLUS: fuse_direntplus = fuse_entry_out + fuse_dirent", async () => {
    const t = testFs(fs());
    expectReply(await t.readdirplus(1, 0, 0, 4096), [
      ...outHeader(160, 0, 2),
      ...u64(2), ...u64(0), ...u64(0), ...u64(0), ...u32(0), ...u32(0), ...helloAttrBytes, // entry_out (one lookup reference)
      ...u64(2), ...u64(1), ...u32(5), ...u32(8), ...text("hello"), 0, 0, 0, // dirent: ino, off, namelen, DT_REG, name, pad
    ]);
  });
});

test("FORGET and BATCH_FORGET reach fs.forget with every pair and take no reply (as the Session does)", async () => {
  const forgot: [number, number][] = [];
  const t = testFs({ lookup: () => entry({ ino: 2, attr: hello }), forget: (ino, n) => void forgot.push([ino, n]) });
  expect((await t.forget(2, 3)).noReply).toBe(true);
  expect((await t.batchForget([[5, 1], [6, 2 ** 40]])).noReply).toBe(true);
  expect(forgot).toEqual([[2, 3], [5, 1], [6, 2 ** 40]]);
});
