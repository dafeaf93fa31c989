// FUSE kernel protocol constants (Linux 6.18, FUSE 7.45). Source: include/uapi/linux/fuse.h,
// see docs/KERNEL.md §2–§5. Numbers only; no behaviour here.

export const FUSE_KERNEL_VERSION = 7;
export const FUSE_KERNEL_MINOR_VERSION = 45;
export const FUSE_ROOT_ID = 1;
export const FUSE_MIN_READ_BUFFER = 8192;

export const Op = {
  LOOKUP: 1, FORGET: 2, GETATTR: 3, SETATTR: 4, READLINK: 5, SYMLINK: 6, MKNOD: 8, MKDIR: 9,
  UNLINK: 10, RMDIR: 11, RENAME: 12, LINK: 13, OPEN: 14, READ: 15, WRITE: 16, STATFS: 17,
  RELEASE: 18, FSYNC: 20, SETXATTR: 21, GETXATTR: 22, LISTXATTR: 23, REMOVEXATTR: 24,
  FLUSH: 25, INIT: 26, OPENDIR: 27, READDIR: 28, RELEASEDIR: 29, FSYNCDIR: 30, GETLK: 31,
  SETLK: 32, SETLKW: 33, ACCESS: 34, CREATE: 35, INTERRUPT: 36, BMAP: 37, DESTROY: 38,
  IOCTL: 39, POLL: 40, NOTIFY_REPLY: 41, BATCH_FORGET: 42, FALLOCATE: 43, READDIRPLUS: 44,
  RENAME2: 45, LSEEK: 46, COPY_FILE_RANGE: 47, SETUPMAPPING: 48, REMOVEMAPPING: 49,
  SYNCFS: 50, TMPFILE: 51, STATX: 52, COPY_FILE_RANGE_64: 53,
} as const;
export type OpName = keyof typeof Op;

export const opNames: string[] = [];
for (const [name, value] of Object.entries(Op)) opNames[value] = name;
export function opName(opcode: number): string {
  return opNames[opcode] ?? `OP_${opcode}`;
}

/**
 * Size of each opcode's per-op request header (in_args[0]). On io_uring the kernel puts this
 * header in `op_in` and everything after it in the payload; the classic transport normalizes
 * /dev/fuse reads to the same split with this table. 0 = no header (all args in payload).
 */
export function opHeaderSizes(setxattrExt: boolean): Uint8Array {
  const t = new Uint8Array(64);
  t[Op.FORGET] = 8;
  t[Op.GETATTR] = 16;
  t[Op.SETATTR] = 88;
  t[Op.MKNOD] = 16;
  t[Op.MKDIR] = 8;
  t[Op.RENAME] = 8;
  t[Op.LINK] = 8;
  t[Op.OPEN] = 8;
  t[Op.READ] = 40;
  t[Op.WRITE] = 40;
  t[Op.RELEASE] = 24;
  t[Op.FSYNC] = 16;
  t[Op.SETXATTR] = setxattrExt ? 16 : 8;
  t[Op.GETXATTR] = 8;
  t[Op.LISTXATTR] = 8;
  t[Op.FLUSH] = 24;
  t[Op.INIT] = 64;
  t[Op.OPENDIR] = 8;
  t[Op.READDIR] = 40;
  t[Op.RELEASEDIR] = 24;
  t[Op.FSYNCDIR] = 16;
  t[Op.GETLK] = 48;
  t[Op.SETLK] = 48;
  t[Op.SETLKW] = 48;
  t[Op.ACCESS] = 8;
  t[Op.CREATE] = 16;
  t[Op.INTERRUPT] = 8;
  t[Op.BMAP] = 16;
  t[Op.IOCTL] = 32;
  t[Op.POLL] = 24;
  t[Op.BATCH_FORGET] = 8;
  t[Op.FALLOCATE] = 32;
  t[Op.READDIRPLUS] = 40;
  t[Op.RENAME2] = 16;
  t[Op.LSEEK] = 24;
  t[Op.COPY_FILE_RANGE] = 56;
  t[Op.SYNCFS] = 8;
  t[Op.TMPFILE] = 16;
  t[Op.STATX] = 24;
  t[Op.COPY_FILE_RANGE_64] = 56;
  return t;
}

/** INIT flags as bit numbers in the 64-bit value flags | flags2 << 32. */
export const InitFlag = {
  ASYNC_READ: 0, POSIX_LOCKS: 1, FILE_OPS: 2, ATOMIC_O_TRUNC: 3, EXPORT_SUPPORT: 4,
  BIG_WRITES: 5, DONT_MASK: 6, SPLICE_WRITE: 7, SPLICE_MOVE: 8, SPLICE_READ: 9,
  FLOCK_LOCKS: 10, HAS_IOCTL_DIR: 11, AUTO_INVAL_DATA: 12, DO_READDIRPLUS: 13,
  READDIRPLUS_AUTO: 14, ASYNC_DIO: 15, WRITEBACK_CACHE: 16, NO_OPEN_SUPPORT: 17,
  PARALLEL_DIROPS: 18, HANDLE_KILLPRIV: 19, POSIX_ACL: 20, ABORT_ERROR: 21, MAX_PAGES: 22,
  CACHE_SYMLINKS: 23, NO_OPENDIR_SUPPORT: 24, EXPLICIT_INVAL_DATA: 25, MAP_ALIGNMENT: 26,
  SUBMOUNTS: 27, HANDLE_KILLPRIV_V2: 28, SETXATTR_EXT: 29, INIT_EXT: 30, INIT_RESERVED: 31,
  SECURITY_CTX: 32, HAS_INODE_DAX: 33, CREATE_SUPP_GROUP: 34, HAS_EXPIRE_ONLY: 35,
  DIRECT_IO_ALLOW_MMAP: 36, PASSTHROUGH: 37, NO_EXPORT_SUPPORT: 38, HAS_RESEND: 39,
  ALLOW_IDMAP: 40, OVER_IO_URING: 41, REQUEST_TIMEOUT: 42,
  /** FUSE 7.46 (Linux 7.3): io_uring buffer pools. Never offered by 6.18. */
  HAS_IO_URING_BUFPOOL: 43,
} as const;
export type InitFlagName = keyof typeof InitFlag;

export function initBit(name: InitFlagName): bigint {
  return 1n << BigInt(InitFlag[name]);
}

export function initFlagNames(flags: bigint): string[] {
  const out: string[] = [];
  for (const [name, bit] of Object.entries(InitFlag)) {
    if (flags & (1n << BigInt(bit))) out.push(name);
  }
  return out;
}

export const FATTR = {
  MODE: 1 << 0, UID: 1 << 1, GID: 1 << 2, SIZE: 1 << 3, ATIME: 1 << 4, MTIME: 1 << 5,
  FH: 1 << 6, ATIME_NOW: 1 << 7, MTIME_NOW: 1 << 8, LOCKOWNER: 1 << 9, CTIME: 1 << 10,
  KILL_SUIDGID: 1 << 11,
} as const;

export const FOPEN = {
  DIRECT_IO: 1 << 0, KEEP_CACHE: 1 << 1, NONSEEKABLE: 1 << 2, CACHE_DIR: 1 << 3,
  STREAM: 1 << 4, NOFLUSH: 1 << 5, PARALLEL_DIRECT_WRITES: 1 << 6, PASSTHROUGH: 1 << 7,
} as const;

export const FUSE_GETATTR_FH = 1 << 0;
export const FUSE_FSYNC_FDATASYNC = 1 << 0;

/** Notification codes (written to /dev/fuse with unique 0). */
export const Notify = {
  POLL: 1, INVAL_INODE: 2, INVAL_ENTRY: 3, STORE: 4, RETRIEVE: 5, DELETE: 6, RESEND: 7,
  INC_EPOCH: 8, PRUNE: 9,
} as const;

/** FUSE-over-io_uring command opcodes (sqe->cmd_op). */
export const UringCmd = { REGISTER: 1, COMMIT_AND_FETCH: 2 } as const;

export const IN_HEADER_SIZE = 40;
export const OUT_HEADER_SIZE = 16;
/** struct fuse_uring_req_header: in_out[128] @0, op_in[128] @128, ent_in_out @256. */
export const RING_HEADER_SIZE = 288;
export const HDR_OP_IN = 128;
export const HDR_ENT_FLAGS = 256;
export const HDR_COMMIT_ID = 264;
export const HDR_PAYLOAD_SZ = 272;

// ---- locks, ioctl, poll, notifications (issue 24) ------------------------------------------

/** fuse_lk_in.lk_flags: the lock is a flock(2) lock (whole file, owner = the open file). */
export const FUSE_LK_FLOCK = 1 << 0;
/** struct flock l_type values (asm-generic/fcntl.h; the same on x86_64 and aarch64). */
export const F_RDLCK = 0;
export const F_WRLCK = 1;
export const F_UNLCK = 2;
/** fuse_file_lock.end for "to the end of the file" (OFFSET_MAX). */
export const LOCK_END_MAX = 0x7fffffffffffffffn;

/** fuse_release_in.release_flags. */
export const FUSE_RELEASE_FLUSH = 1 << 0;
export const FUSE_RELEASE_FLOCK_UNLOCK = 1 << 1;

/** fuse_ioctl_in.flags / fuse_ioctl_out.flags. */
export const FUSE_IOCTL = {
  COMPAT: 1 << 0, UNRESTRICTED: 1 << 1, RETRY: 1 << 2, "32BIT": 1 << 3, DIR: 1 << 4, COMPAT_X32: 1 << 5,
} as const;
/** Most iovecs an unrestricted ioctl retry may name (each way). */
export const FUSE_IOCTL_MAX_IOV = 256;

/** fuse_poll_in.flags: the kernel wants a FUSE_NOTIFY_POLL for `kh` when readiness changes. */
export const FUSE_POLL_SCHEDULE_NOTIFY = 1 << 0;

/** fuse_notify_inval_entry_out.flags: only expire the entry (needs HAS_EXPIRE_ONLY). */
export const FUSE_EXPIRE_ONLY = 1 << 0;
