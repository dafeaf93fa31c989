// Byte-exact encoders and decoders for the FUSE structs the session uses. Each writes into a
// DataView at an offset (little endian: x86_64/aarch64) and returns the bytes written, so
// replies are built in place in the transport's native reply buffer with no intermediate
// objects. Offsets: the UAPI header (docs/KERNEL.md §2). Tests: test/codec.test.ts.

import type { Attr, Entry, OpenReply, Statfs } from "./structs.ts";
import { FOPEN, FATTR } from "./constants.ts";

export const ATTR_SIZE = 88;
export const ENTRY_OUT_SIZE = 128;
export const ATTR_OUT_SIZE = 104;
export const OPEN_OUT_SIZE = 16;
export const WRITE_OUT_SIZE = 8;
export const STATFS_OUT_SIZE = 80;
export const INIT_OUT_SIZE = 64;
export const DIRENT_HEADER = 24;
export const DIRENTPLUS_HEADER = 152;

const LE = true;

/** Write a JS integer as 64 bits (exact below 2^53; negative values as two's complement). */
export function setU64(dv: DataView, off: number, v: number): void {
  dv.setUint32(off, v >>> 0, LE);
  dv.setUint32(off + 4, Math.floor(v / 4294967296) >>> 0, LE);
}

/** Read a u64 as a JS number (exact below 2^53). */
export function getU64(dv: DataView, off: number): number {
  return dv.getUint32(off, LE) + dv.getUint32(off + 4, LE) * 4294967296;
}

/** Read an i64 as a JS number. */
export function getI64(dv: DataView, off: number): number {
  return dv.getUint32(off, LE) + dv.getInt32(off + 4, LE) * 4294967296;
}

/**
 * Seconds → 64-bit two's complement (the kernel reads them as time64_t: before 1970 is negative),
 * ns → u32. The kernel takes the pair as a timespec: tv_sec the floor, tv_nsec in [0, 1e9). A
 * time before 1970 split by truncation (-1.5 s as -1 s, -500000000 ns, as BigInt `/` and `%`
 * give) is normalised here, else the kernel shows nsec ≈ 4.29e9.
 */
function setTime(dv: DataView, secOff: number, nsecOff: number, sec: number, nsec: number): void {
  let s = Math.floor(sec);
  if (nsec < 0 || nsec >= 1_000_000_000) {
    const carry = Math.floor(nsec / 1_000_000_000);
    s += carry;
    nsec -= carry * 1_000_000_000;
  }
  setU64(dv, secOff, s);
  dv.setUint32(nsecOff, nsec >>> 0, LE);
}

// struct fuse_attr (88 B)
export function encodeAttr(dv: DataView, off: number, a: Attr): number {
  setU64(dv, off + 0, a.ino);
  setU64(dv, off + 8, a.size);
  setU64(dv, off + 16, a.blocks);
  setTime(dv, off + 24, off + 48, a.atime, a.atimeNsec);
  setTime(dv, off + 32, off + 52, a.mtime, a.mtimeNsec);
  setTime(dv, off + 40, off + 56, a.ctime, a.ctimeNsec);
  dv.setUint32(off + 60, a.mode >>> 0, LE);
  dv.setUint32(off + 64, a.nlink >>> 0, LE);
  dv.setUint32(off + 68, a.uid >>> 0, LE);
  dv.setUint32(off + 72, a.gid >>> 0, LE);
  dv.setUint32(off + 76, a.rdev >>> 0, LE);
  dv.setUint32(off + 80, (a.blksize ?? 4096) >>> 0, LE);
  dv.setUint32(off + 84, 0, LE);
  return ATTR_SIZE;
}

/** Split a TTL in seconds into (sec u64, nsec u32). */
function setTtl(dv: DataView, secOff: number, nsecOff: number, ttl: number): void {
  const t = ttl > 0 ? ttl : 0;
  const sec = Math.floor(t);
  setU64(dv, secOff, sec);
  dv.setUint32(nsecOff, Math.round((t - sec) * 1e9) >>> 0, LE);
}

// struct fuse_entry_out (128 B)
export function encodeEntryOut(dv: DataView, off: number, e: Entry, entryTtl: number, attrTtl: number): number {
  setU64(dv, off + 0, e.ino);
  setU64(dv, off + 8, e.generation ?? 0);
  setTtl(dv, off + 16, off + 32, e.entryTtl ?? entryTtl);
  setTtl(dv, off + 24, off + 36, e.attrTtl ?? attrTtl);
  encodeAttr(dv, off + 40, e.attr);
  return ENTRY_OUT_SIZE;
}

// struct fuse_attr_out (104 B)
export function encodeAttrOut(dv: DataView, off: number, attr: Attr, ttl: number): number {
  setTtl(dv, off + 0, off + 8, ttl);
  dv.setUint32(off + 12, 0, LE);
  encodeAttr(dv, off + 16, attr);
  return ATTR_OUT_SIZE;
}

// struct fuse_open_out (16 B)
export function encodeOpenOut(dv: DataView, off: number, o: OpenReply): number {
  let flags = 0;
  if (o.directIo) flags |= FOPEN.DIRECT_IO;
  if (o.parallelDirectWrites) flags |= FOPEN.PARALLEL_DIRECT_WRITES;
  if (o.keepCache) flags |= FOPEN.KEEP_CACHE;
  if (o.nonSeekable) flags |= FOPEN.NONSEEKABLE;
  if (o.cacheDir) flags |= FOPEN.CACHE_DIR;
  if (o.backingId !== undefined && o.backingId > 0) flags |= FOPEN.PASSTHROUGH;
  if (o.zeroCopy) flags |= FOPEN_IO_URING_ZERO_COPY;
  setU64(dv, off + 0, o.fh);
  dv.setUint32(off + 8, flags, LE);
  dv.setInt32(off + 12, o.backingId !== undefined && o.backingId > 0 ? o.backingId : 0, LE);
  return OPEN_OUT_SIZE;
}

// struct fuse_write_out (8 B) — also used by COPY_FILE_RANGE (47)
export function encodeWriteOut(dv: DataView, off: number, size: number): number {
  dv.setUint32(off, size >>> 0, LE);
  dv.setUint32(off + 4, 0, LE);
  return WRITE_OUT_SIZE;
}

// struct fuse_statfs_out = fuse_kstatfs (80 B)
export function encodeStatfsOut(dv: DataView, off: number, s: Statfs): number {
  setU64(dv, off + 0, s.blocks);
  setU64(dv, off + 8, s.bfree);
  setU64(dv, off + 16, s.bavail);
  setU64(dv, off + 24, s.files);
  setU64(dv, off + 32, s.ffree);
  dv.setUint32(off + 40, s.bsize >>> 0, LE);
  dv.setUint32(off + 44, s.namelen >>> 0, LE);
  dv.setUint32(off + 48, s.frsize >>> 0, LE);
  for (let i = 52; i < 80; i += 4) dv.setUint32(off + i, 0, LE);
  return STATFS_OUT_SIZE;
}

// struct fuse_out_header (16 B)
export function encodeOutHeader(dv: DataView, off: number, len: number, error: number, uniqueLo: number, uniqueHi: number): void {
  dv.setUint32(off + 0, len >>> 0, LE);
  dv.setInt32(off + 4, error | 0, LE);
  dv.setUint32(off + 8, uniqueLo >>> 0, LE);
  dv.setUint32(off + 12, uniqueHi >>> 0, LE);
}

export interface InitIn {
  major: number;
  minor: number;
  maxReadahead: number;
  flags: bigint; // flags | flags2 << 32
}

// struct fuse_init_in (64 B)
export function decodeInitIn(dv: DataView, off: number): InitIn {
  const flags = BigInt(dv.getUint32(off + 12, LE)) | (BigInt(dv.getUint32(off + 16, LE)) << 32n);
  return {
    major: dv.getUint32(off + 0, LE),
    minor: dv.getUint32(off + 4, LE),
    maxReadahead: dv.getUint32(off + 8, LE),
    flags,
  };
}

export interface InitOut {
  major: number;
  minor: number;
  maxReadahead: number;
  flags: bigint;
  maxBackground: number;
  congestionThreshold: number;
  maxWrite: number;
  timeGran: number;
  maxPages: number;
  maxStackDepth: number;
  requestTimeout: number;
}

// struct fuse_init_out (64 B)
export function encodeInitOut(dv: DataView, off: number, o: InitOut): number {
  for (let i = 0; i < INIT_OUT_SIZE; i += 4) dv.setUint32(off + i, 0, LE);
  dv.setUint32(off + 0, o.major, LE);
  dv.setUint32(off + 4, o.minor, LE);
  dv.setUint32(off + 8, o.maxReadahead, LE);
  dv.setUint32(off + 12, Number(o.flags & 0xffffffffn), LE);
  dv.setUint16(off + 16, o.maxBackground, LE);
  dv.setUint16(off + 18, o.congestionThreshold, LE);
  dv.setUint32(off + 20, o.maxWrite, LE);
  dv.setUint32(off + 24, o.timeGran, LE);
  dv.setUint16(off + 28, o.maxPages, LE);
  dv.setUint16(off + 30, 0, LE);
  dv.setUint32(off + 32, Number((o.flags >> 32n) & 0xffffffffn), LE);
  dv.setUint32(off + 36, o.maxStackDepth, LE);
  dv.setUint16(off + 40, o.requestTimeout, LE);
  return INIT_OUT_SIZE;
}

/** Record size of one READDIR entry with a name of `nameLen` bytes. */
export function direntSize(nameLen: number): number {
  return (DIRENT_HEADER + nameLen + 7) & ~7;
}
export function direntplusSize(nameLen: number): number {
  return (DIRENTPLUS_HEADER + nameLen + 7) & ~7;
}

/**
 * struct fuse_dirent at `off` (name bytes must already be at off+24, nameLen long); zero pads
 * to 8 and returns the record size.
 */
export function encodeDirentHeader(bytes: Uint8Array, dv: DataView, off: number, ino: number, nextOff: number, nameLen: number, mode: number): number {
  setU64(dv, off + 0, ino);
  setU64(dv, off + 8, nextOff);
  dv.setUint32(off + 16, nameLen, LE);
  dv.setUint32(off + 20, (mode & 0o170000) >>> 12, LE);
  const size = direntSize(nameLen);
  bytes.fill(0, off + DIRENT_HEADER + nameLen, off + size);
  return size;
}

export interface SetattrIn {
  valid: number;
  fh: number;
  size: number;
  atime: number;
  mtime: number;
  ctime: number;
  atimensec: number;
  mtimensec: number;
  ctimensec: number;
  mode: number;
  uid: number;
  gid: number;
}

// struct fuse_setattr_in (88 B)
export function decodeSetattrIn(dv: DataView, off: number): SetattrIn {
  return {
    valid: dv.getUint32(off + 0, LE),
    fh: getU64(dv, off + 8),
    size: getU64(dv, off + 16),
    atime: getI64(dv, off + 32),
    mtime: getI64(dv, off + 40),
    ctime: getI64(dv, off + 48),
    atimensec: dv.getUint32(off + 56, LE),
    mtimensec: dv.getUint32(off + 60, LE),
    ctimensec: dv.getUint32(off + 64, LE),
    mode: dv.getUint32(off + 68, LE),
    uid: dv.getUint32(off + 76, LE),
    gid: dv.getUint32(off + 80, LE),
  };
}

export { FATTR };

// ---- FUSE 7.46 (Linux 7.3) io_uring buffer pools and zero-copy --------------------------------
// docs/BUFFERS.md. Offsets checked with offsetof() against include/uapi/linux/fuse.h of Linux
// 7.3~rc7 (cmd_req 40 B: union @24; ent_in_out.offset @20). The shim builds these SQEs itself
// (shim/uring_wrappers.c fuw_fuse_cmd_746, byte-tested in shim/uring.zig); the encoders here
// are the TypeScript statement of the same layout (test/codec.test.ts).

export const FUSE_IO_URING_CMD_REGISTER = 1;
export const FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2;
export const FUSE_IO_URING_CMD_ADD_QUEUE = 3;
export const FUSE_IO_URING_CMD_ADD_BUFPOOL = 4;
/** cmd_req.flags of ADD_QUEUE: this queue does zero-copy (needs CAP_SYS_ADMIN). */
export const FUSE_URING_ZERO_COPY = 1;
/** ring_ent_in_out.flags: this request's READ/WRITE pages are at the entry's buffer index. */
export const FUSE_URING_ENT_ZERO_COPY = 1;
/** open_out.open_flags: the file takes part in zero-copy. */
export const FOPEN_IO_URING_ZERO_COPY = 1 << 8;
export const URING_CMD_REQ_SIZE_746 = 40;

export interface UringCmdReq {
  flags: number;
  commitId: number;
  qid: number;
  /** ADD_BUFPOOL: the pool's address and length. */
  bufpool?: { uaddr: number; len: number };
  /** REGISTER on a zero-copy queue: the entry's slot in the ring's registered-buffer table. */
  zeroCopyBufIndex?: number;
}

/** struct fuse_uring_cmd_req (7.46, 40 B) as it goes into sqe->cmd. */
export function encodeUringCmdReq(dv: DataView, off: number, r: UringCmdReq): number {
  setU64(dv, off, r.flags);
  setU64(dv, off + 8, r.commitId);
  dv.setUint16(off + 16, r.qid, true);
  for (let i = 18; i < 40; i++) dv.setUint8(off + i, 0); // padding[6] and the union
  if (r.bufpool) {
    setU64(dv, off + 24, r.bufpool.uaddr);
    dv.setUint32(off + 32, r.bufpool.len, true);
  } else if (r.zeroCopyBufIndex !== undefined) {
    dv.setUint16(off + 24, r.zeroCopyBufIndex, true);
  }
  return off + URING_CMD_REQ_SIZE_746;
}

export interface EntInOut {
  flags: number;
  commitId: number;
  payloadSz: number;
  /** 7.46: byte offset of this request's payload buffer inside the queue's pool (6.18: 0). */
  offset: number;
}

/** struct fuse_uring_ent_in_out (32 B at header + 256). */
export function decodeEntInOut(dv: DataView, off: number): EntInOut {
  return { flags: getU64(dv, off), commitId: getU64(dv, off + 8), payloadSz: dv.getUint32(off + 16, true), offset: dv.getUint32(off + 20, true) };
}

// ---- locks, ioctl, poll, notifications (issue 24) ------------------------------------------

export const LK_IN_SIZE = 48;
export const LK_OUT_SIZE = 24;
export const IOCTL_IN_SIZE = 32;
export const IOCTL_OUT_SIZE = 16;
export const IOCTL_IOVEC_SIZE = 16;
export const POLL_IN_SIZE = 24;
export const POLL_OUT_SIZE = 8;
export const NOTIFY_POLL_SIZE = 8;
export const NOTIFY_INVAL_ENTRY_SIZE = 16;
export const NOTIFY_DELETE_SIZE = 24;
export const NOTIFY_STORE_SIZE = 24;
export const NOTIFY_RETRIEVE_SIZE = 32;
export const NOTIFY_RETRIEVE_IN_SIZE = 40;

/** A byte-range lock as the kernel describes it (struct fuse_file_lock). */
export interface FileLockWire {
  start: number;
  /** Inclusive last byte; Infinity for "to the end of the file" (OFFSET_MAX on the wire). */
  end: number;
  /** F_RDLCK (0), F_WRLCK (1), F_UNLCK (2). */
  type: number;
  pid: number;
}

/** Offsets at or above 2^53 (OFFSET_MAX and friends) are "to the end": Infinity. */
function getLockEnd(dv: DataView, off: number): number {
  const hi = dv.getUint32(off + 4, LE);
  if (hi >= 0x200000) return Infinity;
  return getU64(dv, off);
}

// struct fuse_file_lock (24 B)
export function decodeFileLock(dv: DataView, off: number): FileLockWire {
  return { start: getU64(dv, off), end: getLockEnd(dv, off + 8), type: dv.getUint32(off + 16, LE), pid: dv.getUint32(off + 20, LE) };
}

export function encodeFileLock(dv: DataView, off: number, l: FileLockWire): number {
  setU64(dv, off, l.start);
  if (l.end === Infinity || l.end >= 2 ** 63 - 1) dv.setBigUint64(off + 8, 0x7fffffffffffffffn, LE);
  else setU64(dv, off + 8, l.end);
  dv.setUint32(off + 16, l.type >>> 0, LE);
  dv.setUint32(off + 20, l.pid >>> 0, LE);
  return LK_OUT_SIZE;
}

export interface LkIn {
  fh: number;
  owner: bigint;
  lock: FileLockWire;
  lkFlags: number;
}

// struct fuse_lk_in (48 B)
export function decodeLkIn(dv: DataView, off: number): LkIn {
  return { fh: getU64(dv, off), owner: dv.getBigUint64(off + 8, LE), lock: decodeFileLock(dv, off + 16), lkFlags: dv.getUint32(off + 40, LE) };
}

export interface IoctlIn {
  fh: number;
  flags: number;
  cmd: number;
  /** The caller's argument (a pointer or a number): 64 bits, kept exact. */
  arg: bigint;
  inSize: number;
  outSize: number;
}

// struct fuse_ioctl_in (32 B)
export function decodeIoctlIn(dv: DataView, off: number): IoctlIn {
  return {
    fh: getU64(dv, off), flags: dv.getUint32(off + 8, LE), cmd: dv.getUint32(off + 12, LE), arg: dv.getBigUint64(off + 16, LE),
    inSize: dv.getUint32(off + 24, LE), outSize: dv.getUint32(off + 28, LE),
  };
}

export interface IoctlIovec {
  base: bigint;
  len: number;
}

/**
 * struct fuse_ioctl_out (16 B) followed, for a retry, by in_iovs then out_iovs fuse_ioctl_iovec
 * (16 B each: base u64, len u64). Returns the bytes written.
 */
export function encodeIoctlOut(dv: DataView, off: number, result: number, flags: number, inIovs: readonly IoctlIovec[] = [], outIovs: readonly IoctlIovec[] = []): number {
  dv.setInt32(off, result | 0, LE);
  dv.setUint32(off + 4, flags >>> 0, LE);
  dv.setUint32(off + 8, inIovs.length, LE);
  dv.setUint32(off + 12, outIovs.length, LE);
  let at = off + IOCTL_OUT_SIZE;
  for (const v of [...inIovs, ...outIovs]) {
    dv.setBigUint64(at, BigInt.asUintN(64, v.base), LE);
    setU64(dv, at + 8, v.len);
    at += IOCTL_IOVEC_SIZE;
  }
  return at - off;
}

export interface PollIn {
  fh: number;
  kh: bigint;
  flags: number;
  events: number;
}

// struct fuse_poll_in (24 B)
export function decodePollIn(dv: DataView, off: number): PollIn {
  return { fh: getU64(dv, off), kh: dv.getBigUint64(off + 8, LE), flags: dv.getUint32(off + 16, LE), events: dv.getUint32(off + 20, LE) };
}

// struct fuse_poll_out (8 B)
export function encodePollOut(dv: DataView, off: number, revents: number): number {
  dv.setUint32(off, revents >>> 0, LE);
  dv.setUint32(off + 4, 0, LE);
  return POLL_OUT_SIZE;
}

// struct fuse_notify_poll_wakeup_out (8 B)
export function encodeNotifyPoll(kh: bigint): Uint8Array {
  const b = new Uint8Array(NOTIFY_POLL_SIZE);
  new DataView(b.buffer).setBigUint64(0, kh, LE);
  return b;
}

/** Name bytes are copied in, NUL-terminated, after the fixed part. */
function withName(fixed: number, name: Uint8Array): { b: Uint8Array; dv: DataView } {
  const b = new Uint8Array(fixed + name.length + 1);
  b.set(name, fixed);
  return { b, dv: new DataView(b.buffer) };
}

// struct fuse_notify_inval_entry_out (16 B) + name + NUL
export function encodeNotifyInvalEntry(parent: number, name: Uint8Array, flags = 0): Uint8Array {
  const { b, dv } = withName(NOTIFY_INVAL_ENTRY_SIZE, name);
  setU64(dv, 0, parent);
  dv.setUint32(8, name.length, LE);
  dv.setUint32(12, flags >>> 0, LE);
  return b;
}

// struct fuse_notify_delete_out (24 B) + name + NUL
export function encodeNotifyDelete(parent: number, child: number, name: Uint8Array): Uint8Array {
  const { b, dv } = withName(NOTIFY_DELETE_SIZE, name);
  setU64(dv, 0, parent);
  setU64(dv, 8, child);
  dv.setUint32(16, name.length, LE);
  return b;
}

// struct fuse_notify_store_out (24 B) + data
export function encodeNotifyStore(nodeid: number, offset: number, data: Uint8Array): Uint8Array {
  const b = new Uint8Array(NOTIFY_STORE_SIZE + data.length);
  const dv = new DataView(b.buffer);
  setU64(dv, 0, nodeid);
  setU64(dv, 8, offset);
  dv.setUint32(16, data.length, LE);
  b.set(data, NOTIFY_STORE_SIZE);
  return b;
}

// struct fuse_notify_retrieve_out (32 B)
export function encodeNotifyRetrieve(notifyUnique: number, nodeid: number, offset: number, size: number): Uint8Array {
  const b = new Uint8Array(NOTIFY_RETRIEVE_SIZE);
  const dv = new DataView(b.buffer);
  setU64(dv, 0, notifyUnique);
  setU64(dv, 8, nodeid);
  setU64(dv, 16, offset);
  dv.setUint32(24, size >>> 0, LE);
  return b;
}

export interface NotifyRetrieveIn {
  offset: number;
  size: number;
}

// struct fuse_notify_retrieve_in (40 B): what the NOTIFY_REPLY request carries before the data
export function decodeNotifyRetrieveIn(dv: DataView, off: number): NotifyRetrieveIn {
  return { offset: getU64(dv, off + 8), size: dv.getUint32(off + 16, LE) };
}

// struct fuse_lseek_out (8 B) — a plain u64
export function encodeLseekOut(dv: DataView, off: number, offset: number): number {
  setU64(dv, off, offset);
  return 8;
}
