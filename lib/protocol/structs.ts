// The FUSE structs as a filesystem hands them to the session and gets them from it: attributes,
// entries, open/create replies, statfs, setattr changes, byte-range locks, ioctl answers, and
// the S_IF* mode bits. Plain data with the kernel's meaning; lib/protocol/codec.ts encodes them,
// the inode API (lib/session/filesystem.ts) is written in them. Users import them from
// lib/index.ts (or lib/fs/types.ts).
//
// Numbers: node ids, inode numbers, file handles, sizes and offsets are JS numbers (exact up to
// 2^53). Time stamps are split into whole seconds and nanoseconds so no precision is lost.

export interface Attr {
  ino: number;
  mode: number; // S_IFMT type bits | permission bits
  nlink: number;
  uid: number;
  gid: number;
  rdev: number;
  size: number;
  blocks: number; // 512-byte blocks
  blksize?: number; // default 4096
  atime: number; // seconds since the epoch (integer)
  atimeNsec: number;
  mtime: number;
  mtimeNsec: number;
  ctime: number;
  ctimeNsec: number;
}

/** Reply to LOOKUP/MKDIR/MKNOD/SYMLINK/LINK/CREATE: one new lookup reference to `ino`. */
export interface Entry {
  /** Node id handed to the kernel (0 = cached negative entry, only valid from lookup). */
  ino: number;
  generation?: number;
  attr: Attr;
  /** Seconds the kernel may cache the name → node mapping (default: session option). */
  entryTtl?: number;
  /** Seconds the kernel may cache the attributes (default: session option). */
  attrTtl?: number;
}

export interface AttrReply {
  attr: Attr;
  attrTtl?: number;
}

/** OPEN/OPENDIR/CREATE reply. Returning a bare number means `{ fh: n }`. */
export interface OpenReply {
  fh: number;
  directIo?: boolean; // FOPEN_DIRECT_IO: bypass the page cache
  parallelDirectWrites?: boolean; // FOPEN_PARALLEL_DIRECT_WRITES (with directIo): writes inside the file in parallel
  keepCache?: boolean; // FOPEN_KEEP_CACHE: do not invalidate cached data on open
  nonSeekable?: boolean; // FOPEN_NONSEEKABLE
  cacheDir?: boolean; // FOPEN_CACHE_DIR (opendir)
  /** Kernel passthrough: backing id from Session.backingOpen(); sets FOPEN_PASSTHROUGH. */
  backingId?: number;
  /**
   * Native data plane: READ, WRITE and FSYNC of this handle are served by the shim from this
   * file descriptor (pread/pwrite semantics at the kernel's offsets) without calling the
   * read/write/fsync handlers. The filesystem keeps owning the fd: keep it open until
   * `release` for this fh is called, close it there. Ignored with `dataPlane: "js"`.
   */
  backingFd?: number;
  /**
   * With `backingFd`: this filesystem's FLUSH of the handle is close(dup(backingFd)) and
   * nothing else (what close(2) of the caller's file does to the backing file), so the shim
   * answers FLUSH itself, one JavaScript request less per close(2) (stats `nativeFlushes`). The
   * flush handler is still called when no descriptor is free for the dup (it can make room).
   * Not for a filesystem with POSIX locks (setlk): its flush must release `lockOwner`'s locks.
   */
  backingFlush?: boolean;
  /**
   * With `backingFd`: this filesystem's RELEASE of the handle is close(backingFd) followed by
   * bookkeeping in its `releaseClosed(ino, fh)` handler, which it must have. The shim then
   * closes the descriptor and answers RELEASE itself, one JavaScript request less per
   * close(2) (stats `nativeReleases`); `releaseClosed` runs soon after, on the engine's
   * schedule (see InodeFS.releaseClosed). Otherwise (the classic transport, a release with
   * flock locks to drop) `release` is called as usual.
   */
  backingRelease?: boolean;
  /** Internal (set by the session, not by filesystems): FOPEN_IO_URING_ZERO_COPY, the shim
   *  serves this natively served file's READ/WRITE at the client's pages (FUSE 7.46). */
  zeroCopy?: boolean;
}

/** Changes requested by SETATTR; only the present fields change. */
export interface SetattrChanges {
  mode?: number;
  uid?: number;
  gid?: number;
  size?: number;
  /** "now" = UTIME_NOW semantics; otherwise [sec, nsec]. */
  atime?: [number, number] | "now";
  mtime?: [number, number] | "now";
  ctime?: [number, number];
  fh?: number;
  /** raw FATTR_* mask for anything not decoded above */
  valid: number;
}

export interface Statfs {
  blocks: number;
  bfree: number;
  bavail: number;
  files: number;
  ffree: number;
  bsize: number;
  namelen: number;
  frsize: number;
}

/** A byte-range lock (struct fuse_file_lock). `end` is inclusive; Infinity = to the end of the file. */
export interface FileLock {
  start: number;
  end: number;
  /** F_RDLCK (0), F_WRLCK (1), F_UNLCK (2). */
  type: number;
  /** The process that holds (or asks for) it, as the kernel reported it. */
  pid: number;
}

/** Where an unrestricted ioctl's data is in the caller's memory (fuse_ioctl_iovec). */
export interface IoctlIovec {
  base: bigint;
  len: number;
}

/**
 * The answer to an ioctl:
 * - a number: the ioctl's return value, no data;
 * - `{ result?, data? }`: return value (default 0) and the bytes copied back to the caller's
 *   argument (at most `outSize`; _IOC_READ commands);
 * - `{ retry: { in, out } }`: unrestricted ioctls only (CUSE; flag FUSE_IOCTL_UNRESTRICTED):
 *   ask the kernel to call again with these caller memory ranges fetched (`in`) and to be
 *   written (`out`). Regular FUSE mounts send restricted ioctls, whose sizes come from the
 *   command number (_IOC_SIZE), and answer a retry with EIO.
 */
export type IoctlReply = number | { result?: number; data?: Uint8Array } | { retry: { in: IoctlIovec[]; out: IoctlIovec[] } };

export interface CreateReply {
  entry: Entry;
  open: OpenReply | number;
}

// Mode bits (S_IF*) used everywhere.
export const S_IFMT = 0o170000;
export const S_IFSOCK = 0o140000;
export const S_IFLNK = 0o120000;
export const S_IFREG = 0o100000;
export const S_IFBLK = 0o060000;
export const S_IFDIR = 0o040000;
export const S_IFCHR = 0o020000;
export const S_IFIFO = 0o010000;
