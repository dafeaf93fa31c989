// Flag constants and decoders for the numbers handlers receive (open flags, rename flags,
// xattr flags, fallocate modes, lseek whence, access masks), so nobody writes `flags & 3` or
// `mode & 0x10` by hand. Values are Linux's (<fcntl.h>, <linux/falloc.h>, <sys/xattr.h>); the few
// open flags whose numbers differ between architectures are taken for the running one.

const arm = process.arch === "arm64" || process.arch === "arm";

// ---- open(2) flags: what open/create handlers get as `flags` -------------------------------
export const O_ACCMODE = 0o3;
export const O_RDONLY = 0o0;
export const O_WRONLY = 0o1;
export const O_RDWR = 0o2;
export const O_CREAT = 0o100;
export const O_EXCL = 0o200;
export const O_NOCTTY = 0o400;
export const O_TRUNC = 0o1000;
export const O_APPEND = 0o2000;
export const O_NONBLOCK = 0o4000;
export const O_DSYNC = 0o10000;
export const O_ASYNC = 0o20000;
export const O_DIRECT = arm ? 0o200000 : 0o40000;
export const O_LARGEFILE = arm ? 0o400000 : 0o100000;
export const O_DIRECTORY = arm ? 0o40000 : 0o200000;
export const O_NOFOLLOW = arm ? 0o100000 : 0o400000;
export const O_NOATIME = 0o1000000;
export const O_CLOEXEC = 0o2000000;
/** O_SYNC includes O_DSYNC (test with `(flags & O_SYNC) === O_SYNC`). */
export const O_SYNC = 0o4010000;
export const O_PATH = 0o10000000;
/** O_TMPFILE includes O_DIRECTORY. */
export const O_TMPFILE = 0o20000000 | O_DIRECTORY;

// ---- renameat2(2) flags ---------------------------------------------------------------------
export const RENAME_NOREPLACE = 1;
export const RENAME_EXCHANGE = 2;
export const RENAME_WHITEOUT = 4;

// ---- setxattr(2) flags ----------------------------------------------------------------------
export const XATTR_CREATE = 1;
export const XATTR_REPLACE = 2;

// ---- fallocate(2) modes ---------------------------------------------------------------------
export const FALLOC_FL_KEEP_SIZE = 0x01;
export const FALLOC_FL_PUNCH_HOLE = 0x02;
export const FALLOC_FL_NO_HIDE_STALE = 0x04;
export const FALLOC_FL_COLLAPSE_RANGE = 0x08;
export const FALLOC_FL_ZERO_RANGE = 0x10;
export const FALLOC_FL_INSERT_RANGE = 0x20;
export const FALLOC_FL_UNSHARE_RANGE = 0x40;

// ---- lseek(2) whence (FUSE only forwards SEEK_DATA and SEEK_HOLE) --------------------------
export const SEEK_SET = 0;
export const SEEK_CUR = 1;
export const SEEK_END = 2;
export const SEEK_DATA = 3;
export const SEEK_HOLE = 4;

// ---- access(2) mask -------------------------------------------------------------------------
export const F_OK = 0;
export const X_OK = 1;
export const W_OK = 2;
export const R_OK = 4;

// ---- FUSE WRITE flags (InodeFS.write's `writeFlags`) -----------------------------------------
/** The write comes from the page cache (writeback), not directly from a process. */
export const FUSE_WRITE_CACHE = 1;
export const FUSE_WRITE_LOCKOWNER = 2;
/** The write should clear the set-user-ID and set-group-ID bits. */
export const FUSE_WRITE_KILL_SUIDGID = 4;

// ---- decoders -----------------------------------------------------------------------------

export type AccessMode = "read" | "write" | "readwrite";

/** "read", "write" or "readwrite" from open flags (O_ACCMODE bits; 3 is treated as readwrite). */
export function accessMode(flags: number): AccessMode {
  const a = flags & O_ACCMODE;
  return a === O_RDONLY ? "read" : a === O_WRONLY ? "write" : "readwrite";
}

/** The open may write (O_WRONLY or O_RDWR). */
export function isWriteOpen(flags: number): boolean {
  return (flags & O_ACCMODE) !== O_RDONLY;
}

/** The open may read (O_RDONLY or O_RDWR). */
export function isReadOpen(flags: number): boolean {
  return (flags & O_ACCMODE) !== O_WRONLY;
}

export interface OpenFlags {
  access: AccessMode;
  append: boolean;
  create: boolean;
  exclusive: boolean;
  truncate: boolean;
  directIo: boolean;
  /** O_SYNC (data and metadata) — implies dsync. */
  sync: boolean;
  /** O_DSYNC or O_SYNC. */
  dsync: boolean;
  nonblock: boolean;
  noatime: boolean;
  directory: boolean;
  nofollow: boolean;
}

/** Open flags as named booleans: `const { access, append } = openFlags(flags)`. */
export function openFlags(flags: number): OpenFlags {
  return {
    access: accessMode(flags),
    append: (flags & O_APPEND) !== 0,
    create: (flags & O_CREAT) !== 0,
    exclusive: (flags & O_EXCL) !== 0,
    truncate: (flags & O_TRUNC) !== 0,
    directIo: (flags & O_DIRECT) !== 0,
    sync: (flags & O_SYNC) === O_SYNC,
    dsync: (flags & O_DSYNC) !== 0,
    nonblock: (flags & O_NONBLOCK) !== 0,
    noatime: (flags & O_NOATIME) !== 0,
    directory: (flags & O_DIRECTORY) !== 0,
    nofollow: (flags & O_NOFOLLOW) !== 0,
  };
}

export interface RenameFlags {
  noReplace: boolean;
  exchange: boolean;
  whiteout: boolean;
}

export function renameFlags(flags: number): RenameFlags {
  return {
    noReplace: (flags & RENAME_NOREPLACE) !== 0,
    exchange: (flags & RENAME_EXCHANGE) !== 0,
    whiteout: (flags & RENAME_WHITEOUT) !== 0,
  };
}

export interface FallocMode {
  keepSize: boolean;
  punchHole: boolean;
  zeroRange: boolean;
  collapseRange: boolean;
  insertRange: boolean;
  unshareRange: boolean;
}

export function fallocMode(mode: number): FallocMode {
  return {
    keepSize: (mode & FALLOC_FL_KEEP_SIZE) !== 0,
    punchHole: (mode & FALLOC_FL_PUNCH_HOLE) !== 0,
    zeroRange: (mode & FALLOC_FL_ZERO_RANGE) !== 0,
    collapseRange: (mode & FALLOC_FL_COLLAPSE_RANGE) !== 0,
    insertRange: (mode & FALLOC_FL_INSERT_RANGE) !== 0,
    unshareRange: (mode & FALLOC_FL_UNSHARE_RANGE) !== 0,
  };
}

/** "create", "replace" or "either" from setxattr flags. */
export function xattrMode(flags: number): "create" | "replace" | "either" {
  return flags & XATTR_CREATE ? "create" : flags & XATTR_REPLACE ? "replace" : "either";
}

/** Access-mask bits as names, e.g. access(path, { mask }) → ["read", "write"]; [] for F_OK. */
export function accessMask(mask: number): ("read" | "write" | "execute")[] {
  const out: ("read" | "write" | "execute")[] = [];
  if (mask & R_OK) out.push("read");
  if (mask & W_OK) out.push("write");
  if (mask & X_OK) out.push("execute");
  return out;
}
