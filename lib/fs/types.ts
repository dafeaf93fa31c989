// The low-level inode API: what a filesystem implements to be served by a Session.
// Modelled on libfuse's low-level API and fuser: node ids are the kernel's handles for inodes,
// every successful entry reply takes one lookup reference that FORGET gives back.
//
// Every method may return a value or a Promise. Throw `new FuseError("ENOENT")` (or an errno
// number) to answer with an errno; any other exception answers EIO and is logged once.
// Methods that are absent answer ENOSYS (the kernel then stops asking for most of them).
//
// Numbers: node ids, inode numbers, file handles, sizes and offsets are JS numbers (exact up to
// 2^53). Time stamps are split into whole seconds and nanoseconds so no precision is lost.

/** Who asked, and a way to notice that the caller gave up (FUSE_INTERRUPT). */
export interface RequestContext {
  readonly uid: number;
  readonly gid: number;
  readonly pid: number;
  /** The request's unique id (diagnostics). */
  readonly unique: bigint;
  /** Aborts when the kernel sends FUSE_INTERRUPT for this request. Created on first access. */
  readonly signal: AbortSignal;
  /**
   * READ handlers: read `size` bytes at `offset` of file descriptor `fd` straight into this
   * request's reply buffer (io_uring READ_FIXED on the ring transport, an asynchronous pread
   * into the same native buffer on classic). Resolves to the byte count (return it) or
   * rejects with the errno. The data never passes through JavaScript.
   */
  backingRead(fd: number, offset: number, size: number): Promise<number>;
  /** WRITE handlers: write this request's data (`size` bytes) to `fd` at `offset` the same way. */
  backingWrite(fd: number, offset: number, size: number): Promise<number>;
}

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

/**
 * Collects directory entries into the reply buffer. `add` returns false when the entry did
 * not fit: stop then, and resume from that entry's offset in the next call.
 * `nextOffset` is the cookie the kernel sends back to continue after this entry (must be > 0
 * and unique within the directory stream).
 * In READDIRPLUS mode (`plus`), every entry that `add` accepted with `entry.ino != 0`, other than
 * "." and "..", counts as one lookup reference, exactly like a LOOKUP reply.
 */
export interface DirFiller {
  readonly plus: boolean;
  add(name: string, nextOffset: number, entry: Entry): boolean;
}

export interface InitInfo {
  /** Kernel protocol minor (45 on 6.18). */
  kernelMinor: number;
  /** Flags the kernel offered (64-bit value as bigint). */
  offered: bigint;
  /** Flags that were granted (offered ∩ requested). */
  granted: bigint;
  /** Names of granted flags, e.g. ["ASYNC_READ", "BIG_WRITES", …]. */
  grantedNames: string[];
  maxWrite: number;
  maxReadahead: number;
  transport: "uring" | "classic";
  /**
   * Kernel passthrough (PASSTHROUGH granted): register an open fd as a backing file and get
   * the id to return as OpenReply.backingId. Throws FuseError (EPERM without CAP_SYS_ADMIN).
   */
  backingOpen(fd: number): number;
  /** Drop the kernel's reference to a backing id (open files keep working). */
  backingClose(id: number): void;
}

export interface CreateReply {
  entry: Entry;
  open: OpenReply | number;
}

/** What each worker loads to run its copy of a filesystem (InodeFS.copies). */
export interface CopiesPlan {
  /**
   * Module every worker loads (absolute path): its default export is a function that receives
   * `{ args, mountpoint, shared }` (lib/script.ts ScriptContext) and returns an InodeFS with
   * `replicable: true`.
   */
  module: string;
  args?: string[];
  /** Structured-cloneable; SharedArrayBuffers in it stay shared with every copy. */
  shared?: unknown;
  /**
   * true: the copies share one state, so FORGET and BATCH_FORGET are applied once, by the main
   * thread's instance (the object given to mount()), instead of by every copy.
   */
  sharedState?: boolean;
}

/** The inode filesystem interface. Node id 1 is the root. */
export interface InodeFS {
  /**
   * True when copies of this filesystem (one per worker thread with `--workers N`) answer every
   * request alike: node ids and file handles are computed from the request (not numbered per
   * copy) and no answer depends on state another copy changed. With it a script runs as one copy
   * per worker; without it `--workers N` keeps the filesystem on the main thread and the workers
   * forward every request the native data plane does not answer (forwarding mode).
   */
  replicable?: boolean;
  /**
   * How to run this filesystem as one copy per worker thread (`--workers N`), or null for
   * forwarding mode. For filesystems that share their state between copies (SharedArrayBuffers)
   * instead of computing everything from the request, as the built-in memfs and passthrough do.
   * Called once, on the main thread, before the workers start.
   */
  copies?(): CopiesPlan | null;
  init?(info: InitInfo): void | Promise<void>;
  destroy?(): void | Promise<void>;

  lookup?(ctx: RequestContext, parent: number, name: string): Entry | Promise<Entry>;
  /** Give back `nlookup` references. Never answered. Called for FORGET and BATCH_FORGET. */
  forget?(ino: number, nlookup: number): void;
  getattr?(ctx: RequestContext, ino: number, fh: number | undefined): Attr | AttrReply | Promise<Attr | AttrReply>;
  setattr?(ctx: RequestContext, ino: number, changes: SetattrChanges): Attr | AttrReply | Promise<Attr | AttrReply>;
  readlink?(ctx: RequestContext, ino: number): string | Uint8Array | Promise<string | Uint8Array>;
  symlink?(ctx: RequestContext, parent: number, name: string, target: string): Entry | Promise<Entry>;
  mknod?(ctx: RequestContext, parent: number, name: string, mode: number, rdev: number, umask: number): Entry | Promise<Entry>;
  mkdir?(ctx: RequestContext, parent: number, name: string, mode: number, umask: number): Entry | Promise<Entry>;
  unlink?(ctx: RequestContext, parent: number, name: string): void | Promise<void>;
  rmdir?(ctx: RequestContext, parent: number, name: string): void | Promise<void>;
  /** flags: 0, RENAME_NOREPLACE (1), RENAME_EXCHANGE (2), RENAME_WHITEOUT (4). */
  rename?(ctx: RequestContext, parent: number, name: string, newParent: number, newName: string, flags: number): void | Promise<void>;
  link?(ctx: RequestContext, ino: number, newParent: number, newName: string): Entry | Promise<Entry>;

  open?(ctx: RequestContext, ino: number, flags: number): OpenReply | number | void | Promise<OpenReply | number | void>;
  /**
   * Read up to `size` bytes at `offset`. Either write into `out` (a view of the reply buffer,
   * exactly `size` bytes long) and return the byte count, or return bytes (copied once into
   * the reply buffer, truncated to `size`). Fewer bytes than asked = end of file.
   */
  read?(ctx: RequestContext, ino: number, fh: number, offset: number, size: number, out: Uint8Array): number | Uint8Array | Promise<number | Uint8Array>;
  /** `data` is a view of the request buffer, valid until the returned promise settles. */
  write?(ctx: RequestContext, ino: number, fh: number, offset: number, data: Uint8Array, writeFlags: number, openFlags: number): number | Promise<number>;
  flush?(ctx: RequestContext, ino: number, fh: number, lockOwner: bigint): void | Promise<void>;
  release?(ctx: RequestContext, ino: number, fh: number, flags: number): void | Promise<void>;
  fsync?(ctx: RequestContext, ino: number, fh: number, datasync: boolean): void | Promise<void>;

  opendir?(ctx: RequestContext, ino: number, flags: number): OpenReply | number | void | Promise<OpenReply | number | void>;
  readdir?(ctx: RequestContext, ino: number, fh: number, offset: number, filler: DirFiller): void | Promise<void>;
  releasedir?(ctx: RequestContext, ino: number, fh: number): void | Promise<void>;
  fsyncdir?(ctx: RequestContext, ino: number, fh: number, datasync: boolean): void | Promise<void>;

  statfs?(ctx: RequestContext, ino: number): Statfs | Promise<Statfs>;
  /** flags: XATTR_CREATE (1), XATTR_REPLACE (2). */
  setxattr?(ctx: RequestContext, ino: number, name: string, value: Uint8Array, flags: number): void | Promise<void>;
  /** Return the whole value; the session answers size probes and ERANGE itself. */
  getxattr?(ctx: RequestContext, ino: number, name: string): Uint8Array | string | Promise<Uint8Array | string>;
  listxattr?(ctx: RequestContext, ino: number): string[] | Promise<string[]>;
  removexattr?(ctx: RequestContext, ino: number, name: string): void | Promise<void>;
  access?(ctx: RequestContext, ino: number, mask: number): void | Promise<void>;
  create?(ctx: RequestContext, parent: number, name: string, mode: number, umask: number, flags: number): CreateReply | Promise<CreateReply>;
  fallocate?(ctx: RequestContext, ino: number, fh: number, offset: number, length: number, mode: number): void | Promise<void>;
  /** whence: SEEK_DATA (3) or SEEK_HOLE (4) (the kernel handles SET/CUR/END itself). */
  lseek?(ctx: RequestContext, ino: number, fh: number, offset: number, whence: number): number | Promise<number>;
  copyFileRange?(ctx: RequestContext, inoIn: number, fhIn: number, offIn: number, inoOut: number, fhOut: number, offOut: number, len: number, flags: number): number | Promise<number>;
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
