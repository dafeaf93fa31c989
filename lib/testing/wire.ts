// The kernel's side of the wire, for tests: request encoders (the per-opcode `*_in` structs of
// <linux/fuse.h>, laid out as the io_uring transport presents them: in_header @0, op_in @128 of
// the 288-byte header, names and data in the payload) and decoders for the `*_out` replies.

import type { Attr } from "../protocol/structs.ts";
import { getI64, getU64, setU64 } from "../protocol/codec.ts";
import { Op } from "../protocol/constants.ts";
import { bytesToName, nameToBytes } from "../protocol/names.ts";

const LE = true;

/** Bytes of a request: the op_in struct and the payload that follows it. */
export interface EncodedRequest {
  opcode: number;
  nodeid: number;
  opIn: Uint8Array;
  payload: Uint8Array;
}

/** Little-endian struct builder. */
class Struct {
  readonly bytes: Uint8Array;
  readonly dv: DataView;
  constructor(size: number) {
    this.bytes = new Uint8Array(size);
    this.dv = new DataView(this.bytes.buffer);
  }
  u32(off: number, v: number): this {
    this.dv.setUint32(off, v >>> 0, LE);
    return this;
  }
  u64(off: number, v: number | bigint): this {
    if (typeof v === "bigint") this.dv.setBigUint64(off, v, LE);
    else setU64(this.dv, off, v);
    return this;
  }
}

/** NUL-terminated names back to back (the payload of LOOKUP, RENAME, SYMLINK …). */
export function names(...list: string[]): Uint8Array {
  const parts = list.map((n) => nameToBytes(n));
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length + 1, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length + 1;
  }
  return out;
}

const none = new Uint8Array(0);

/** Request encoders: `req.read(ino, fh, offset, size)` → what the kernel would send. */
export const req = {
  lookup: (parent: number, name: string): EncodedRequest => ({ opcode: Op.LOOKUP, nodeid: parent, opIn: none, payload: names(name) }),
  getattr: (ino: number, fh?: number): EncodedRequest => ({
    opcode: Op.GETATTR, nodeid: ino, opIn: new Struct(16).u32(0, fh === undefined ? 0 : 1).u64(8, fh ?? 0).bytes, payload: none,
  }),
  /** fuse_setattr_in: `valid` is the FATTR_* mask of the fields that are set. */
  setattr: (ino: number, s: { valid: number; fh?: number; size?: number; mode?: number; uid?: number; gid?: number; atime?: [number, number]; mtime?: [number, number]; ctime?: [number, number] }): EncodedRequest => {
    const b = new Struct(88).u32(0, s.valid).u64(8, s.fh ?? 0).u64(16, s.size ?? 0);
    b.u64(32, s.atime?.[0] ?? 0).u64(40, s.mtime?.[0] ?? 0).u64(48, s.ctime?.[0] ?? 0);
    b.u32(56, s.atime?.[1] ?? 0).u32(60, s.mtime?.[1] ?? 0).u32(64, s.ctime?.[1] ?? 0);
    b.u32(68, s.mode ?? 0).u32(76, s.uid ?? 0).u32(80, s.gid ?? 0);
    return { opcode: Op.SETATTR, nodeid: ino, opIn: b.bytes, payload: none };
  },
  readlink: (ino: number): EncodedRequest => ({ opcode: Op.READLINK, nodeid: ino, opIn: none, payload: none }),
  symlink: (parent: number, name: string, target: string): EncodedRequest => ({ opcode: Op.SYMLINK, nodeid: parent, opIn: none, payload: names(name, target) }),
  mknod: (parent: number, name: string, mode: number, rdev = 0, umask = 0): EncodedRequest => ({
    opcode: Op.MKNOD, nodeid: parent, opIn: new Struct(16).u32(0, mode).u32(4, rdev).u32(8, umask).bytes, payload: names(name),
  }),
  mkdir: (parent: number, name: string, mode: number, umask = 0): EncodedRequest => ({
    opcode: Op.MKDIR, nodeid: parent, opIn: new Struct(8).u32(0, mode).u32(4, umask).bytes, payload: names(name),
  }),
  unlink: (parent: number, name: string): EncodedRequest => ({ opcode: Op.UNLINK, nodeid: parent, opIn: none, payload: names(name) }),
  rmdir: (parent: number, name: string): EncodedRequest => ({ opcode: Op.RMDIR, nodeid: parent, opIn: none, payload: names(name) }),
  /** RENAME2 (fuse_rename2_in) when flags are given, else RENAME. */
  rename: (parent: number, name: string, newParent: number, newName: string, flags?: number): EncodedRequest =>
    flags === undefined
      ? { opcode: Op.RENAME, nodeid: parent, opIn: new Struct(8).u64(0, newParent).bytes, payload: names(name, newName) }
      : { opcode: Op.RENAME2, nodeid: parent, opIn: new Struct(16).u64(0, newParent).u32(8, flags).bytes, payload: names(name, newName) },
  link: (ino: number, newParent: number, newName: string): EncodedRequest => ({
    opcode: Op.LINK, nodeid: newParent, opIn: new Struct(8).u64(0, ino).bytes, payload: names(newName),
  }),
  open: (ino: number, flags: number): EncodedRequest => ({ opcode: Op.OPEN, nodeid: ino, opIn: new Struct(8).u32(0, flags).bytes, payload: none }),
  opendir: (ino: number, flags = 0): EncodedRequest => ({ opcode: Op.OPENDIR, nodeid: ino, opIn: new Struct(8).u32(0, flags).bytes, payload: none }),
  read: (ino: number, fh: number, offset: number, size: number, flags = 0): EncodedRequest => ({
    opcode: Op.READ, nodeid: ino, opIn: new Struct(40).u64(0, fh).u64(8, offset).u32(16, size).u32(32, flags).bytes, payload: none,
  }),
  write: (ino: number, fh: number, offset: number, data: Uint8Array | string, writeFlags = 0, flags = 0): EncodedRequest => {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return { opcode: Op.WRITE, nodeid: ino, opIn: new Struct(40).u64(0, fh).u64(8, offset).u32(16, bytes.length).u32(20, writeFlags).u32(32, flags).bytes, payload: bytes };
  },
  statfs: (ino = 1): EncodedRequest => ({ opcode: Op.STATFS, nodeid: ino, opIn: none, payload: none }),
  release: (ino: number, fh: number, flags = 0): EncodedRequest => ({ opcode: Op.RELEASE, nodeid: ino, opIn: new Struct(24).u64(0, fh).u32(8, flags).bytes, payload: none }),
  releasedir: (ino: number, fh: number): EncodedRequest => ({ opcode: Op.RELEASEDIR, nodeid: ino, opIn: new Struct(24).u64(0, fh).bytes, payload: none }),
  fsync: (ino: number, fh: number, datasync = false): EncodedRequest => ({ opcode: Op.FSYNC, nodeid: ino, opIn: new Struct(16).u64(0, fh).u32(8, datasync ? 1 : 0).bytes, payload: none }),
  flush: (ino: number, fh: number, lockOwner: bigint = 0n): EncodedRequest => ({ opcode: Op.FLUSH, nodeid: ino, opIn: new Struct(24).u64(0, fh).u64(16, lockOwner).bytes, payload: none }),
  setxattr: (ino: number, name: string, value: Uint8Array | string, flags = 0): EncodedRequest => {
    const v = typeof value === "string" ? new TextEncoder().encode(value) : value;
    const n = names(name);
    const payload = new Uint8Array(n.length + v.length);
    payload.set(n, 0);
    payload.set(v, n.length);
    return { opcode: Op.SETXATTR, nodeid: ino, opIn: new Struct(8).u32(0, v.length).u32(4, flags).bytes, payload };
  },
  getxattr: (ino: number, name: string, size: number): EncodedRequest => ({ opcode: Op.GETXATTR, nodeid: ino, opIn: new Struct(8).u32(0, size).bytes, payload: names(name) }),
  listxattr: (ino: number, size: number): EncodedRequest => ({ opcode: Op.LISTXATTR, nodeid: ino, opIn: new Struct(8).u32(0, size).bytes, payload: none }),
  removexattr: (ino: number, name: string): EncodedRequest => ({ opcode: Op.REMOVEXATTR, nodeid: ino, opIn: none, payload: names(name) }),
  readdir: (ino: number, fh: number, offset: number, size: number): EncodedRequest => ({
    opcode: Op.READDIR, nodeid: ino, opIn: new Struct(40).u64(0, fh).u64(8, offset).u32(16, size).bytes, payload: none,
  }),
  readdirplus: (ino: number, fh: number, offset: number, size: number): EncodedRequest => ({
    opcode: Op.READDIRPLUS, nodeid: ino, opIn: new Struct(40).u64(0, fh).u64(8, offset).u32(16, size).bytes, payload: none,
  }),
  access: (ino: number, mask: number): EncodedRequest => ({ opcode: Op.ACCESS, nodeid: ino, opIn: new Struct(8).u32(0, mask).bytes, payload: none }),
  create: (parent: number, name: string, flags: number, mode: number, umask = 0): EncodedRequest => ({
    opcode: Op.CREATE, nodeid: parent, opIn: new Struct(16).u32(0, flags).u32(4, mode).u32(8, umask).bytes, payload: names(name),
  }),
  fallocate: (ino: number, fh: number, offset: number, length: number, mode = 0): EncodedRequest => ({
    opcode: Op.FALLOCATE, nodeid: ino, opIn: new Struct(32).u64(0, fh).u64(8, offset).u64(16, length).u32(24, mode).bytes, payload: none,
  }),
  lseek: (ino: number, fh: number, offset: number, whence: number): EncodedRequest => ({
    opcode: Op.LSEEK, nodeid: ino, opIn: new Struct(24).u64(0, fh).u64(8, offset).u32(16, whence).bytes, payload: none,
  }),
  copyFileRange: (inoIn: number, fhIn: number, offIn: number, inoOut: number, fhOut: number, offOut: number, len: number, flags = 0): EncodedRequest => ({
    opcode: Op.COPY_FILE_RANGE, nodeid: inoIn,
    opIn: new Struct(56).u64(0, fhIn).u64(8, offIn).u64(16, inoOut).u64(24, fhOut).u64(32, offOut).u64(40, len).u64(48, flags).bytes, payload: none,
  }),
};

// ---- reply decoders -------------------------------------------------------------------------

function view(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

/** struct fuse_attr (88 bytes) at `off`. */
export function decodeAttr(b: Uint8Array, off = 0): Attr {
  const dv = view(b);
  return {
    ino: getU64(dv, off), size: getU64(dv, off + 8), blocks: getU64(dv, off + 16),
    atime: getI64(dv, off + 24), mtime: getI64(dv, off + 32), ctime: getI64(dv, off + 40),
    atimeNsec: dv.getUint32(off + 48, LE), mtimeNsec: dv.getUint32(off + 52, LE), ctimeNsec: dv.getUint32(off + 56, LE),
    mode: dv.getUint32(off + 60, LE), nlink: dv.getUint32(off + 64, LE), uid: dv.getUint32(off + 68, LE), gid: dv.getUint32(off + 72, LE),
    rdev: dv.getUint32(off + 76, LE), blksize: dv.getUint32(off + 80, LE),
  };
}

export interface EntryOut {
  nodeid: number;
  generation: number;
  /** Seconds (fractional) the name may be cached. */
  entryTtl: number;
  attrTtl: number;
  attr: Attr;
}

/** struct fuse_entry_out (128 bytes). */
export function decodeEntryOut(b: Uint8Array, off = 0): EntryOut {
  const dv = view(b);
  return {
    nodeid: getU64(dv, off), generation: getU64(dv, off + 8),
    entryTtl: getU64(dv, off + 16) + dv.getUint32(off + 32, LE) / 1e9,
    attrTtl: getU64(dv, off + 24) + dv.getUint32(off + 36, LE) / 1e9,
    attr: decodeAttr(b, off + 40),
  };
}

/** struct fuse_attr_out (104 bytes). */
export function decodeAttrOut(b: Uint8Array, off = 0): { attrTtl: number; attr: Attr } {
  const dv = view(b);
  return { attrTtl: getU64(dv, off) + dv.getUint32(off + 8, LE) / 1e9, attr: decodeAttr(b, off + 16) };
}

/** struct fuse_open_out (16 bytes). */
export function decodeOpenOut(b: Uint8Array, off = 0): { fh: number; openFlags: number; backingId: number } {
  const dv = view(b);
  return { fh: getU64(dv, off), openFlags: dv.getUint32(off + 8, LE), backingId: dv.getInt32(off + 12, LE) };
}

/** struct fuse_write_out / fuse_getxattr_out: the size (u32). */
export function decodeSize(b: Uint8Array, off = 0): number {
  return view(b).getUint32(off, LE);
}

/** struct fuse_statfs_out (80 bytes). */
export function decodeStatfsOut(b: Uint8Array, off = 0) {
  const dv = view(b);
  return {
    blocks: getU64(dv, off), bfree: getU64(dv, off + 8), bavail: getU64(dv, off + 16), files: getU64(dv, off + 24), ffree: getU64(dv, off + 32),
    bsize: dv.getUint32(off + 40, LE), namelen: dv.getUint32(off + 44, LE), frsize: dv.getUint32(off + 48, LE),
  };
}

export interface Dirent {
  ino: number;
  /** The cookie to continue after this entry. */
  off: number;
  /** DT_* (mode >> 12). */
  type: number;
  name: string;
  /** READDIRPLUS only. */
  entry?: EntryOut;
}

/** The fuse_dirent (or fuse_direntplus) records of a READDIR(PLUS) reply. */
export function decodeDirents(b: Uint8Array, plus = false): Dirent[] {
  const dv = view(b);
  const out: Dirent[] = [];
  let off = 0;
  while (off < b.length) {
    const entry = plus ? decodeEntryOut(b, off) : undefined;
    const d = plus ? off + 128 : off;
    const nameLen = dv.getUint32(d + 16, LE);
    const name = bytesToName(b.subarray(d + 24, d + 24 + nameLen));
    const rec: Dirent = { ino: getU64(dv, d), off: getU64(dv, d + 8), type: dv.getUint32(d + 20, LE), name };
    if (entry) rec.entry = entry;
    out.push(rec);
    off = d + ((24 + nameLen + 7) & ~7);
  }
  return out;
}

/** NUL-separated names (LISTXATTR). */
export function decodeNames(b: Uint8Array): string[] {
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < b.length; i++) {
    if (b[i] === 0) {
      out.push(bytesToName(b.subarray(start, i)));
      start = i + 1;
    }
  }
  return out;
}
