// FALLOCATE, LSEEK (SEEK_DATA/SEEK_HOLE) and COPY_FILE_RANGE on handles the native data plane
// serves (an OPEN/CREATE reply that named a backingFd): answered from the backing descriptor
// here, whatever the filesystem implements, the way the shim answers their READ and WRITE.
//
// Why in the session (JavaScript, libc through bun:ffi) and not in the shim: these are rare
// metadata-like calls (a preallocation, a seek over holes, one copy of a whole range), not the
// per-page data path, so a JS round trip costs nothing measurable; the shim stays minimal (no
// new request kinds, no new failure paths in the ring thread). They are synchronous syscalls on
// a local file, like the passthrough's.

import { dlopen, FFIType, read } from "bun:ffi";
import { readSync, writeSync } from "node:fs";
import { FuseError } from "../protocol/errors.ts";

const { i32, i64, u64, u32, ptr, i64_fast } = FFIType;

const symbols = {
  __errno_location: { args: [], returns: ptr },
  fallocate: { args: [i32, i32, i64, i64], returns: i32 },
  lseek: { args: [i32, i64, i32], returns: i64_fast },
  copy_file_range: { args: [i32, ptr, i32, ptr, u64, u32], returns: i64_fast },
} as const;

type Libc = ReturnType<typeof dlopen<typeof symbols>>["symbols"];
let lib: Libc | null = null;

function libc(): Libc {
  if (lib) return lib;
  let last: unknown;
  for (const name of ["libc.so.6", "libc.so", `libc.musl-${process.arch === "arm64" ? "aarch64" : "x86_64"}.so.1`]) {
    try {
      lib = dlopen(name, symbols).symbols;
      return lib;
    } catch (e) {
      last = e;
    }
  }
  throw new Error(`fuse-uring: cannot load libc through bun:ffi: ${String(last)}`);
}

function errno(): number {
  // errno is per thread: ask for its address on the calling thread every time.
  const e = read.i32(libc().__errno_location() as never, 0);
  return e > 0 && e < 512 ? e : 5;
}

function check(rc: number, what: string): number {
  if (rc < 0) {
    const e = errno();
    throw new FuseError(e, `${what} on the backing descriptor: errno ${e}`);
  }
  return rc;
}

/** Largest copy answered at once (the kernel asks again for the rest). */
const COPY_CHUNK = 1 << 30;
/** Fallback copy buffer. */
const BOUNCE = 1 << 20;
let bounce: Buffer | null = null;

/** Per session (stats `backedOps`, `backedCopyFallbacks`): proof that these were answered here. */
export interface BackedOpCounters {
  ops: number;
  copyFallbacks: number;
}

export function backedFallocate(fd: number, mode: number, offset: number, length: number): void {
  check(libc().fallocate(fd, mode, offset, length), "fallocate");
}

export function backedLseek(fd: number, offset: number, whence: number): number {
  return check(Number(libc().lseek(fd, offset, whence)), "lseek");
}

/**
 * copy_file_range(2) from fdIn at offIn to fdOut at offOut; when the kernel cannot copy between
 * these files (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP) a pread/pwrite loop does it. Returns bytes copied.
 */
export function backedCopyFileRange(fdIn: number, offIn: number, fdOut: number, offOut: number, len: number, flags: number, counters: BackedOpCounters): number {
  const n = Math.min(len, COPY_CHUNK);
  // Fresh (not pooled) arrays: bun:ffi takes the address of their storage for this call only.
  const pin = new BigInt64Array([BigInt(offIn)]);
  const pout = new BigInt64Array([BigInt(offOut)]);
  const rc = Number(libc().copy_file_range(fdIn, pin, fdOut, pout, n, flags));
  if (rc >= 0) return rc;
  const e = errno();
  if (flags !== 0 || (e !== 18 /* EXDEV */ && e !== 22 /* EINVAL */ && e !== 38 /* ENOSYS */ && e !== 95 /* EOPNOTSUPP */)) {
    throw new FuseError(e, `copy_file_range on the backing descriptors: errno ${e}`);
  }
  counters.copyFallbacks++;
  bounce ??= Buffer.allocUnsafe(BOUNCE);
  let done = 0;
  while (done < n) {
    const want = Math.min(BOUNCE, n - done);
    const got = readSync(fdIn, bounce, 0, want, offIn + done);
    if (got === 0) break;
    let w = 0;
    while (w < got) w += writeSync(fdOut, bounce, w, got - w, offOut + done + w);
    done += got;
  }
  return done;
}
