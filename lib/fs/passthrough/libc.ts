// The few libc calls node:fs lacks, through bun:ffi: the *at() family on O_PATH descriptors
// (AT_EMPTY_PATH), renameat2 flags, nanosecond utimensat, mknod, xattrs, fallocate,
// SEEK_DATA/SEEK_HOLE, copy_file_range, fstatfs and getdents64 (for d_ino).
//
// These calls are synchronous. They are all metadata operations that a local backing store
// answers in microseconds; the bulk data path never comes here (it uses ctx.backingRead/Write).
// Every wrapper returns the result or throws a FuseError carrying the real errno.

import { dlopen, FFIType, read } from "bun:ffi";
import { readFileSync } from "node:fs";
import { FuseError } from "../errors.ts";
import { decodeName, nameToCString } from "../../protocol/names.ts";

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
} as const;

type Libc = ReturnType<typeof dlopen<typeof symbols>>["symbols"];

let lib: Libc | null = null;
let errnoPtr = 0;

function libc(): Libc {
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

function errno(): number {
  const e = read.i32(errnoPtr as unknown as never, 0);
  return e > 0 && e < 512 ? e : 5; // EIO if errno is unusable
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
