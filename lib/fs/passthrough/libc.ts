// The few libc calls node:fs lacks, through bun:ffi: the *at() family on O_PATH descriptors
// (AT_EMPTY_PATH), renameat2 flags, nanosecond utimensat, mknod, xattrs, fallocate,
// SEEK_DATA/SEEK_HOLE, copy_file_range, fstatfs and getdents64 (for d_ino).
//
// These calls are synchronous. They are all metadata operations that a local backing store
// answers in microseconds; the bulk data path never comes here (it uses ctx.backingRead/Write).
//
// Two kinds of wrapper:
// - the hot path's (`…Raw`, statx in stat.ts): the result or `-errno`, nothing allocated. A
//   negative LOOKUP is the most common metadata answer there is; building and throwing an
//   Error for it cost more than the syscall. Names go into one of two reused buffers
//   (`setName`), as their exact bytes (names are bytes: protocol/names.ts).
// - the others: the result, or a thrown FuseError carrying the real errno.

import { dlopen, FFIType, read, toArrayBuffer } from "bun:ffi";
import { readFileSync } from "node:fs";
import { FuseError } from "../errors.ts";
import { decodeName, encodeName, nameByteLength, nameToCString } from "../../protocol/names.ts";

const { i32, u32, i64, u64, ptr, i64_fast } = FFIType;

const symbols = {
  __errno_location: { args: [], returns: ptr },
  renameat2: { args: [i32, ptr, i32, ptr, u32], returns: i32 },
  readlinkat: { args: [i32, ptr, ptr, u64], returns: i64_fast },
  fchownat: { args: [i32, ptr, u32, u32, i32], returns: i32 },
  utimensat: { args: [i32, ptr, ptr, i32], returns: i32 },
  mknodat: { args: [i32, ptr, u32, u64], returns: i32 },
  linkat: { args: [i32, ptr, i32, ptr, i32], returns: i32 },
  getxattr: { args: [ptr, ptr, ptr, u64], returns: i64_fast },
  setxattr: { args: [ptr, ptr, ptr, u64, i32], returns: i32 },
  listxattr: { args: [ptr, ptr, u64], returns: i64_fast },
  removexattr: { args: [ptr, ptr], returns: i32 },
  fallocate: { args: [i32, i32, i64, i64], returns: i32 },
  lseek: { args: [i32, i64, i32], returns: i64_fast },
  copy_file_range: { args: [i32, ptr, i32, ptr, u64, u32], returns: i64_fast },
  fstatfs: { args: [i32, ptr], returns: i32 },
  getdents64: { args: [i32, ptr, u64], returns: i64_fast },
  dup: { args: [i32], returns: i32 },
  close: { args: [i32], returns: i32 },
  openat: { args: [i32, ptr, i32, u32], returns: i32 },
  name_to_handle_at: { args: [i32, ptr, ptr, ptr, i32], returns: i32 },
  open_by_handle_at: { args: [i32, ptr, i32], returns: i32 },
  getrlimit: { args: [i32, ptr], returns: i32 },
  setrlimit: { args: [i32, ptr], returns: i32 },
  statx: { args: [i32, ptr, i32, u32, ptr], returns: i32 },
  malloc: { args: [u64], returns: ptr },
  unlinkat: { args: [i32, ptr, i32], returns: i32 },
  mkdirat: { args: [i32, ptr, u32], returns: i32 },
  symlinkat: { args: [ptr, i32, ptr], returns: i32 },
  fchmodat: { args: [i32, ptr, u32, i32], returns: i32 },
  faccessat: { args: [i32, ptr, i32, i32], returns: i32 },
  truncate: { args: [ptr, i64], returns: i32 },
  ftruncate: { args: [i32, i64], returns: i32 },
} as const;

export type Libc = ReturnType<typeof dlopen<typeof symbols>>["symbols"];

let lib: Libc | null = null;
let errnoPtr = 0;

/** The loaded libc symbols (for the hot-path wrappers here and in stat.ts). */
export function libc(): Libc {
  if (lib) return lib;
  let lastErr: unknown;
  for (const name of ["libc.so.6", "libc.so", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`]) {
    try {
      lib = dlopen(name, symbols).symbols;
      break;
    } catch (e) {
      lastErr = e;
    }
  }
  if (!lib) throw new Error(`passthrough: cannot load libc through bun:ffi: ${String(lastErr)}`);
  // errno is thread-local; every call happens on the JS thread, so its address is fixed.
  errnoPtr = Number(lib.__errno_location());
  return lib;
}

/** errno of the last failed call (EIO if it is unusable). */
export function errno(): number {
  const e = read.i32(errnoPtr as unknown as never, 0);
  return e > 0 && e < 512 ? e : 5; // EIO if errno is unusable
}

/** `rc` of a libc call: itself when ≥ 0, else -errno. */
export function rawResult(rc: number): number {
  return rc < 0 ? -errno() : rc;
}

function fail(what: string): never {
  throw new FuseError(errno(), `${what}: errno ${errno()}`);
}

function check(rc: number, what: string): number {
  if (rc < 0) fail(what);
  return rc;
}

/**
 * NUL-terminated bytes for a path or name argument: the exact bytes of the name (lone surrogates
 * U+DC80–U+DCFF are raw non-UTF-8 bytes, protocol/names.ts), never a lossy UTF-8 re-encoding.
 */
export function cstr(s: string): Buffer {
  return nameToCString(s);
}

const EMPTY = Buffer.from([0]);

// ---- reused name buffers (hot path) ---------------------------------------------------------
// Two slots, so a call can take two names (renameat2, symlinkat: target + name). 8 KiB holds
// any name the kernel sends (≤ 1024 bytes) and any symlink target (≤ 4095 bytes) with room for
// the NUL; longer ones answer ENAMETOOLONG without a syscall.

/**
 * `size` bytes of native memory that never moves, and its address (bun:ffi takes a number for a
 * pointer argument: no conversion per call). Not a JS typed array's own storage: the garbage
 * collector may move a small one, and an address taken once would then point at stale memory
 * (seen: statx of the wrong path, ENOTDIR for AT_EMPTY_PATH). Never freed (module lifetime).
 */
export function stableBuffer(size: number): { buf: Buffer; ptr: number } {
  const p = Number(libc().malloc(size));
  if (!p) throw new Error(`passthrough: malloc(${size}) failed`);
  const buf = Buffer.from(toArrayBuffer(p as never, 0, size));
  buf.fill(0);
  return { buf, ptr: p };
}

const NAME_ROOM = 8192;
const nameSlots = [stableBuffer(NAME_ROOM + 1), stableBuffer(NAME_ROOM + 1)] as const;
const nameBufs = [nameSlots[0].buf, nameSlots[1].buf] as const;
/** Addresses of the two name buffers. */
const namePtrs = [nameSlots[0].ptr, nameSlots[1].ptr] as const;
export const ENAMETOOLONG = 36;

/**
 * Put name `s` (its exact bytes, NUL-terminated) into name slot 0 or 1; the slot's address, or 0
 * when it does not fit (answer -ENAMETOOLONG). Valid until the next setName on that slot.
 */
export function setName(slot: 0 | 1, s: string): number {
  const b = nameBufs[slot];
  let len: number;
  if (s.length * 3 <= NAME_ROOM) len = encodeName(s, b, 0);
  else if (nameByteLength(s) <= NAME_ROOM) len = encodeName(s, b, 0);
  else return 0;
  b[len] = 0;
  return namePtrs[slot];
}

const PROC_FD = "/proc/self/fd/";
const { buf: procBuf, ptr: procPtr } = stableBuffer(64);
procBuf.write(PROC_FD, 0, "latin1");
/** `/proc/self/fd/N` as a C string in a reused buffer (for calls that must follow the magic link). */
export function procName(fd: number): number {
  const end = PROC_FD.length + procBuf.write(String(fd), PROC_FD.length, "latin1");
  procBuf[end] = 0;
  return procPtr;
}

/** openat(dirfd, name at namePtr, flags, mode): a descriptor or -errno. */
export function openatRaw(dirfd: number, namePtr: number, flags: number, mode: number): number {
  return rawResult(libc().openat(dirfd, namePtr as never, flags, mode));
}

/** open("/proc/self/fd/N", flags): a real descriptor of what O_PATH descriptor N refers to, or -errno. */
export function reopenRaw(fd: number, flags: number): number {
  return rawResult(libc().openat(AT_FDCWD, procName(fd) as never, flags, 0));
}

/** unlinkat(dirfd, name, flags) (AT_REMOVEDIR for rmdir): 0 or -errno. */
export function unlinkatRaw(dirfd: number, name: string, flags: number): number {
  const p = setName(0, name);
  return p ? rawResult(libc().unlinkat(dirfd, p as never, flags)) : -ENAMETOOLONG;
}

export function mkdiratRaw(dirfd: number, name: string, mode: number): number {
  const p = setName(0, name);
  return p ? rawResult(libc().mkdirat(dirfd, p as never, mode >>> 0)) : -ENAMETOOLONG;
}

export function symlinkatRaw(target: string, dirfd: number, name: string): number {
  const t = setName(1, target), p = setName(0, name);
  return t && p ? rawResult(libc().symlinkat(t as never, dirfd, p as never)) : -ENAMETOOLONG;
}

export function renameat2Raw(olddirfd: number, oldname: string, newdirfd: number, newname: string, flags: number): number {
  const a = setName(0, oldname), b = setName(1, newname);
  return a && b ? rawResult(libc().renameat2(olddirfd, a as never, newdirfd, b as never, flags)) : -ENAMETOOLONG;
}

export function mknodatRaw(dirfd: number, name: string, mode: number, rdev: number): number {
  const p = setName(0, name);
  return p ? rawResult(libc().mknodat(dirfd, p as never, mode >>> 0, rdev)) : -ENAMETOOLONG;
}

/** dup(fd): a new descriptor or -errno. */
export function dupRaw(fd: number): number {
  return rawResult(libc().dup(fd));
}

/** close(fd): 0 or -errno (never throws). */
export function closeRaw(fd: number): number {
  return rawResult(libc().close(fd));
}

/** chmod of what O_PATH descriptor `fd` refers to (through /proc: fchmod refuses O_PATH). */
export function chmodFdRaw(fd: number, mode: number): number {
  return rawResult(libc().fchmodat(AT_FDCWD, procName(fd) as never, mode >>> 0, 0));
}

/** access(2) (real ids) of what O_PATH descriptor `fd` refers to. */
export function accessFdRaw(fd: number, mask: number): number {
  return rawResult(libc().faccessat(AT_FDCWD, procName(fd) as never, mask, 0));
}

/** truncate of what O_PATH descriptor `fd` refers to (through /proc). */
export function truncateFdRaw(fd: number, size: number): number {
  return rawResult(libc().truncate(procName(fd) as never, size));
}

export function ftruncateRaw(fd: number, size: number): number {
  return rawResult(libc().ftruncate(fd, size));
}

export const AT_FDCWD = -100;
export const AT_SYMLINK_NOFOLLOW = 0x100;
export const AT_SYMLINK_FOLLOW = 0x400;
export const AT_EMPTY_PATH = 0x1000;
export const UTIME_NOW = (1 << 30) - 1;
export const UTIME_OMIT = (1 << 30) - 2;

export function renameat2(olddirfd: number, oldname: string, newdirfd: number, newname: string, flags: number): void {
  check(libc().renameat2(olddirfd, cstr(oldname), newdirfd, cstr(newname), flags), "renameat2");
}

const linkBuf = Buffer.allocUnsafe(4097);
/** readlinkat(fd, "") of an O_PATH|O_NOFOLLOW descriptor of a symlink: the target bytes (a copy). */
export function readlinkFd(fd: number): Buffer {
  const n = Number(libc().readlinkat(fd, EMPTY, linkBuf, linkBuf.length));
  if (n < 0) fail("readlinkat");
  return Buffer.from(linkBuf.subarray(0, n));
}

/** chown of whatever the O_PATH fd refers to (symlinks included). -1 = unchanged. */
export function fchownFd(fd: number, uid: number, gid: number): void {
  check(libc().fchownat(fd, EMPTY, uid >>> 0, gid >>> 0, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW), "fchownat");
}

/** chown of `name` in directory fd `dirfd` without following a symlink. */
export function lchownAt(dirfd: number, name: string, uid: number, gid: number): void {
  check(libc().fchownat(dirfd, cstr(name), uid >>> 0, gid >>> 0, AT_SYMLINK_NOFOLLOW), "fchownat");
}

const times = new BigInt64Array(4);
/** Set atime/mtime of the O_PATH fd's file with nanosecond precision (UTIME_NOW/UTIME_OMIT allowed as nsec). */
export function utimensFd(fd: number, aSec: number, aNsec: number, mSec: number, mNsec: number): void {
  times[0] = BigInt(aSec);
  times[1] = BigInt(aNsec);
  times[2] = BigInt(mSec);
  times[3] = BigInt(mNsec);
  check(libc().utimensat(fd, EMPTY, times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW), "utimensat");
}

export function mknodat(dirfd: number, name: string, mode: number, rdev: number): void {
  check(libc().mknodat(dirfd, cstr(name), mode >>> 0, rdev), "mknodat");
}

/** A new hard link `newname` in `newdirfd` to the file an O_PATH fd refers to. */
export function linkFd(fd: number, newdirfd: number, newname: string): void {
  check(libc().linkat(AT_FDCWD, cstr(`/proc/self/fd/${fd}`), newdirfd, cstr(newname), AT_SYMLINK_FOLLOW), "linkat");
}

const ERANGE = 34;

export function getxattr(path: string, name: string): Buffer {
  const p = cstr(path), n = cstr(name);
  for (let attempt = 0; attempt < 8; attempt++) {
    const size = Number(libc().getxattr(p, n, null, 0));
    if (size < 0) fail("getxattr");
    const buf = Buffer.allocUnsafe(Math.max(size, 1));
    const got = Number(libc().getxattr(p, n, buf, size));
    if (got >= 0) return buf.subarray(0, got);
    if (errno() !== ERANGE) fail("getxattr");
  }
  throw new FuseError("EIO", "getxattr: value keeps changing size");
}

export function setxattr(path: string, name: string, value: Uint8Array, flags: number): void {
  check(libc().setxattr(cstr(path), cstr(name), value.length ? value : null, value.length, flags), "setxattr");
}

export function listxattr(path: string): string[] {
  const p = cstr(path);
  for (let attempt = 0; attempt < 8; attempt++) {
    const size = Number(libc().listxattr(p, null, 0));
    if (size < 0) fail("listxattr");
    if (size === 0) return [];
    const buf = Buffer.allocUnsafe(size);
    const got = Number(libc().listxattr(p, buf, size));
    if (got >= 0) {
      const out: string[] = [];
      let start = 0;
      for (let i = 0; i < got; i++) {
        if (buf[i] === 0) {
          if (i > start) out.push(decodeName(buf, start, i));
          start = i + 1;
        }
      }
      return out;
    }
    if (errno() !== ERANGE) fail("listxattr");
  }
  throw new FuseError("EIO", "listxattr: list keeps changing size");
}

export function removexattr(path: string, name: string): void {
  check(libc().removexattr(cstr(path), cstr(name)), "removexattr");
}

export function fallocate(fd: number, mode: number, offset: number, length: number): void {
  check(libc().fallocate(fd, mode, offset, length), "fallocate");
}

export function lseek(fd: number, offset: number, whence: number): number {
  const r = Number(libc().lseek(fd, offset, whence));
  if (r < 0) fail("lseek");
  return r;
}

const offs = new BigInt64Array(2);
const offIn = offs.subarray(0, 1);
const offOut = offs.subarray(1, 2);
export function copyFileRange(fdIn: number, posIn: number, fdOut: number, posOut: number, len: number, flags: number): number {
  offs[0] = BigInt(posIn);
  offs[1] = BigInt(posOut);
  const r = Number(libc().copy_file_range(fdIn, offIn, fdOut, offOut, len, flags));
  if (r < 0) fail("copy_file_range");
  return r;
}

const statfsBuf = new BigInt64Array(15); // struct statfs on 64-bit Linux: 120 bytes of longs
export interface RawStatfs {
  type: number;
  bsize: number;
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  namelen: number;
  frsize: number;
}
export function fstatfs(fd: number): RawStatfs {
  check(libc().fstatfs(fd, statfsBuf), "fstatfs");
  const s = statfsBuf;
  return {
    type: Number(s[0]), bsize: Number(s[1]), blocks: Number(s[2]), bfree: Number(s[3]), bavail: Number(s[4]),
    files: Number(s[5]), ffree: Number(s[6]), namelen: Number(s[8]), frsize: Number(s[9]),
  };
}

/** One getdents64 call into `buf`; returns the byte count (0 at the end). */
export function getdents64(fd: number, buf: Uint8Array): number {
  const r = Number(libc().getdents64(fd, buf, buf.length));
  if (r < 0) fail("getdents64");
  return r;
}

/** close(dup(fd)): what close(2) of the caller's file would do to the backing file (FLUSH). */
export function flushFd(fd: number): void {
  const l = libc();
  const d = check(l.dup(fd), "dup");
  check(l.close(d), "close");
}

/** openat(dirfd, name, flags): a new descriptor (sync; used to re-open evicted O_PATH nodes). */
export function openat(dirfd: number, name: string, flags: number, mode = 0): number {
  return check(libc().openat(dirfd, cstr(name), flags, mode), "openat");
}

const MAX_HANDLE_SZ = 128;
const handleBuf = Buffer.alloc(8 + MAX_HANDLE_SZ);
const mountIdBuf = new Int32Array(1);
/**
 * The kernel file handle of what an O_PATH descriptor refers to (name_to_handle_at with
 * AT_EMPTY_PATH): `struct file_handle` bytes, opaque, valid as long as the inode exists.
 * Throws EOPNOTSUPP when the filesystem cannot export handles.
 */
export function fileHandle(fd: number): Buffer {
  handleBuf.writeUInt32LE(MAX_HANDLE_SZ, 0);
  check(libc().name_to_handle_at(fd, EMPTY, handleBuf, mountIdBuf, AT_EMPTY_PATH), "name_to_handle_at");
  return Buffer.from(handleBuf.subarray(0, 8 + handleBuf.readUInt32LE(0)));
}

/** open_by_handle_at(mountFd, handle, flags): needs CAP_DAC_READ_SEARCH (EPERM otherwise). */
export function openByHandle(mountFd: number, handle: Buffer, flags: number): number {
  return check(libc().open_by_handle_at(mountFd, handle, flags), "open_by_handle_at");
}

const RLIMIT_NOFILE = 7;
const rlim = new BigUint64Array(2);
const RLIM_INFINITY = 0xffffffffffffffffn;
export interface NofileLimit {
  /** Soft limit before and after, and the hard limit (Infinity for RLIM_INFINITY). */
  before: number;
  after: number;
  hard: number;
  /** Why it could not be raised (empty when it was raised or already at the hard limit). */
  error: string;
}
const toNum = (v: bigint) => (v === RLIM_INFINITY ? Infinity : Number(v));

/** Current RLIMIT_NOFILE (soft, hard). */
export function getNofile(): { soft: number; hard: number } {
  check(libc().getrlimit(RLIMIT_NOFILE, rlim), "getrlimit");
  return { soft: toNum(rlim[0]!), hard: toNum(rlim[1]!) };
}

/**
 * Raise the soft RLIMIT_NOFILE to the hard limit (what libfuse's passthrough_hp does), capped at
 * fs.nr_open when the hard limit is infinite (setrlimit refuses more).
 */
export function raiseNofile(): NofileLimit {
  check(libc().getrlimit(RLIMIT_NOFILE, rlim), "getrlimit");
  const before = rlim[0]!, hard = rlim[1]!;
  let error = "";
  if (before < hard) {
    let target = hard;
    if (hard === RLIM_INFINITY) {
      try {
        target = BigInt(readFileSync("/proc/sys/fs/nr_open", "utf8").trim());
      } catch {
        target = 1048576n;
      }
    }
    rlim[0] = target;
    rlim[1] = hard;
    if (libc().setrlimit(RLIMIT_NOFILE, rlim) < 0) error = `setrlimit: errno ${errno()}`;
  }
  check(libc().getrlimit(RLIMIT_NOFILE, rlim), "getrlimit");
  return { before: toNum(before), after: toNum(rlim[0]!), hard: toNum(hard), error };
}
