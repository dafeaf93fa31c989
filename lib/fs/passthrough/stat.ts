// statx(2) through bun:ffi into ONE reused buffer, read back as plain numbers.
//
// fstatSync(fd, { bigint: true }) built a BigIntStats object (about twenty BigInts, Date
// getters) per call, and the passthrough then turned every field back into a number: 2.1 µs
// per stat here, and a created file costs about six of them. statx into a module-level buffer
// and a few typed-array reads cost under 1 µs and allocate nothing; `attr()` builds the one
// object the reply needs. The birth time (stx_btime) comes in the same call: the re-open by
// path checks it (nodes.ts).
//
// The buffer holds the LAST successful statx: read it before the next call (everything here
// is synchronous, on the one thread that serves requests).

import type { Attr } from "../types.ts";
import { AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW, libc, rawResult, setName, stableBuffer, ENAMETOOLONG } from "./libc.ts";

const STATX_BASIC_STATS = 0x7ff;
const STATX_BTIME = 0x800;
const MASK = STATX_BASIC_STATS | STATX_BTIME;

// struct statx (256 bytes; offsets in docs: /work/shared/docs/kernel-abi.md "fuse_statx", same layout)
// Native memory (libc.stableBuffer): its address is taken once and must never move.
const { buf, ptr: bufPtr } = stableBuffer(256 + 8);
const u32 = new Uint32Array(buf.buffer, buf.byteOffset, 64);
const i32 = new Int32Array(buf.buffer, buf.byteOffset, 64);
const emptyPtr = bufPtr + 256; // an empty C string (zeroed)

const TWO32 = 4294967296;

/** statx of what descriptor `fd` is (O_PATH ones included; a symlink itself): 0 or -errno. */
export function statFd(fd: number): number {
  return rawResult(libc().statx(fd, emptyPtr as never, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, MASK, bufPtr as never));
}

/** statx of `name` in directory descriptor `dirfd`, not following a symlink: 0 or -errno. */
export function statAt(dirfd: number, name: string): number {
  const p = setName(0, name);
  if (!p) return -ENAMETOOLONG;
  return rawResult(libc().statx(dirfd, p as never, AT_SYMLINK_NOFOLLOW, MASK, bufPtr as never));
}

// ---- fields of the last statx -----------------------------------------------------------------

/** st_dev as stat(2) and node:fs give it (glibc's makedev encoding): only compared, never sent. */
export function dev(): number {
  const maj = u32[34]!, min = u32[35]!;
  const low = (((maj & 0xfff) << 8) | (min & 0xff) | ((min & 0xfff00) << 12)) >>> 0;
  return low + ((min >>> 20) + (maj >>> 12) * 4096) * TWO32;
}
export function ino(): number {
  return u32[8]! + u32[9]! * TWO32;
}
export function mode(): number {
  return u32[7]! & 0xffff;
}
export function nlink(): number {
  return u32[4]!;
}
/** Birth time seconds and nanoseconds; both 0 when the filesystem records none. */
export function btimeSec(): number {
  return u32[0]! & STATX_BTIME ? u32[20]! + i32[21]! * TWO32 : 0;
}
export function btimeNsec(): number {
  return u32[0]! & STATX_BTIME ? u32[22]! : 0;
}

/** The last statx as a new Attr (the reply value; the kernel's timespec fields are normalised already). */
export function attr(): Attr {
  const rmaj = u32[32]!, rmin = u32[33]!;
  return {
    ino: u32[8]! + u32[9]! * TWO32,
    mode: u32[7]! & 0xffff,
    nlink: u32[4]!,
    uid: u32[5]!,
    gid: u32[6]!,
    // fuse_attr.rdev is the kernel's 32-bit encoding (new_encode_dev).
    rdev: ((rmin & 0xff) | (rmaj << 8) | ((rmin & ~0xff) << 12)) >>> 0,
    size: u32[10]! + u32[11]! * TWO32,
    blocks: u32[12]! + u32[13]! * TWO32,
    blksize: u32[1]! || 4096,
    atime: u32[16]! + i32[17]! * TWO32,
    atimeNsec: u32[18]!,
    mtime: u32[28]! + i32[29]! * TWO32,
    mtimeNsec: u32[30]!,
    ctime: u32[24]! + i32[25]! * TWO32,
    ctimeNsec: u32[26]!,
  };
}
