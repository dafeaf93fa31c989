// The path-handler API: a filesystem described by functions of a path, like fusepy or
// fuse-native, but with return-or-throw instead of callbacks. The layer in pathfs.ts keeps the
// inode table, the kernel's lookup counts (FORGET) and the file handles; handlers only see paths
// ("/", "/dir/file") and plain objects.
//
// Every handler may be sync or async. Throw `new FuseError("ENOENT")` (or an errno number) to
// answer with that errno; any other exception answers EIO and is logged once with its stack.
// The last argument of every handler is the request context: { uid, gid, pid, signal }, where
// `signal` aborts when the caller gives up (FUSE_INTERRUPT, e.g. Ctrl-C on a blocked `cat`).

import type { InitInfo, RequestContext } from "../session/filesystem.ts";

export type { RequestContext } from "../session/filesystem.ts";

/** A time stamp: a Date, milliseconds since the epoch, or [seconds, nanoseconds]. */
export type TimeLike = Date | number | readonly [number, number];

export type FileType = "file" | "dir" | "directory" | "symlink" | "fifo" | "socket" | "char" | "block";

/**
 * What `getattr` returns. Everything is optional:
 * - type: from `mode`'s S_IFMT bits, else `type`, else "dir" for "/" and "file" otherwise;
 * - mode: permission bits default to 0o644/0o755 (files/dirs) when the filesystem can write,
 *   0o444/0o555 when it cannot (no write/writeFile, no create/mkdir); symlinks 0o777;
 * - size: for files served by `readFile` without a size, the size of the content (computed);
 *   else 0; symlinks: length of `target` if given;
 * - mtime/atime/ctime: Date | ms | [s, ns]; default: when the filesystem was created;
 * - nlink: 1 (dirs 2); uid/gid: the daemon's; ino: the st_ino shown (default: the node id).
 * A Node.js/Bun `fs.Stats` object is accepted as is. Returning null/undefined/false = ENOENT.
 */
export interface StatLike {
  mode?: number;
  type?: FileType;
  size?: number | bigint;
  mtime?: TimeLike;
  atime?: TimeLike;
  ctime?: TimeLike;
  mtimeMs?: number;
  atimeMs?: number;
  ctimeMs?: number;
  nlink?: number;
  uid?: number;
  gid?: number;
  ino?: number | bigint;
  rdev?: number;
  blocks?: number;
  blksize?: number;
  /** Symlinks: the target (gives the size; readlink falls back to it). */
  target?: string;
  /**
   * Regular files whose content is produced when opened (readFile): stat never calls readFile
   * for them. Without `size`, the size is what the last open produced (0 before the first);
   * their attributes are not cached by the kernel and opens use direct I/O, so a reader always
   * gets every byte. tree() marks its computed files this way.
   */
  sizeAtOpen?: boolean;
}

/** A readdir entry: a bare name, or a name with (some) attributes, which saves a LOOKUP. */
export type DirEntryLike = string | (StatLike & { name: string });

export type MaybePromise<T> = T | Promise<T>;

/** Bytes of a file: text (UTF-8), bytes, or a Blob (e.g. `Bun.file(path)`, read lazily). */
export type Content = string | Uint8Array | ArrayBuffer | Blob;

/** Returned by `open`/`create` to ask for kernel cache behaviour; see `opened()`. */
export interface OpenOptions {
  /** Bypass the page cache: every read reaches the handler, reads go to EOF regardless of size. */
  directIo?: boolean;
  /** Keep cached pages across opens (content unchanged since the last open). */
  keepCache?: boolean;
  nonSeekable?: boolean;
}

export const OPENED: unique symbol = Symbol.for("fuse-uring.opened");

export interface Opened<H = unknown> extends OpenOptions {
  readonly [OPENED]: true;
  handle: H;
}

/** `return opened(myHandle, { directIo: true })` from open/create to set FOPEN_* flags. */
export function opened<H>(handle: H, options: OpenOptions = {}): Opened<H> {
  return { [OPENED]: true, handle, ...options };
}

export function isOpened(x: unknown): x is Opened {
  return typeof x === "object" && x !== null && (x as { [OPENED]?: unknown })[OPENED] === true;
}

/** What a backed file is served from: a descriptor, a path, or `Bun.file(path)`. */
export type BackingSource = number | string | Blob;

export interface BackedOptions<H = unknown> {
  /** The value handed to flush/fsync/truncate/release as `fh` (default: undefined). */
  handle?: H;
  /**
   * Only for a descriptor: the layer closes it after `release` (default false: the descriptor
   * stays the caller's). Descriptors the layer opened itself (path, Bun.file) are always closed.
   */
  close?: boolean;
  directIo?: boolean;
  keepCache?: boolean;
}

export const BACKED: unique symbol = Symbol.for("fuse-uring.backed");

export interface Backed<H = unknown> extends BackedOptions<H> {
  readonly [BACKED]: true;
  source: BackingSource;
}

/**
 * `return backed(fd | path | Bun.file(path), { handle, close })` from open/create: READ, WRITE
 * and FSYNC of this open file are then answered from that file by the shim, with no JavaScript
 * per request (docs/DATAPLANE.md). A path (or Bun.file) is opened by the layer with the
 * caller's access mode and O_APPEND/O_TRUNC/O_SYNC (plus O_CREAT and the mode from `create`) and
 * closed after `release`; a descriptor stays the caller's unless `close: true`. While it is
 * open, stat reports the descriptor's size, and truncation without a `truncate` handler is an
 * ftruncate of it. The fsync handler is not called for backed files (FSYNC is fsync(2) on the
 * descriptor).
 */
export function backed<H = undefined>(source: BackingSource, options: BackedOptions<H> = {}): Backed<H> {
  if (typeof source === "number") {
    if (!Number.isInteger(source) || source < 0) throw new TypeError(`backed(): ${source} is not a file descriptor`);
  } else if (typeof source === "string") {
    if (source === "" || source.includes("\0")) throw new TypeError(`backed(): ${JSON.stringify(source)} is not a path`);
  } else if (!(source instanceof Blob) || typeof (source as { name?: unknown }).name !== "string") {
    throw new TypeError("backed(): expected a file descriptor, a path or Bun.file(path)");
  }
  return { [BACKED]: true, source, ...options };
}

export function isBacked(x: unknown): x is Backed {
  return typeof x === "object" && x !== null && (x as { [BACKED]?: unknown })[BACKED] === true;
}

export interface StatfsLike {
  blocks?: number;
  bfree?: number;
  bavail?: number;
  files?: number;
  ffree?: number;
  bsize?: number;
  namelen?: number;
  frsize?: number;
}

/**
 * Path handlers. Only `getattr` is required. `fh` is whatever `open`/`create` returned
 * (undefined without an `open` handler). Paths are absolute within the mount ("/" is the root).
 *
 * Three ways to serve file data:
 * - `read`/`write`: called per request with an offset (streams, huge files, databases);
 * - `readFile`/`writeFile`: whole-file. `readFile` is called at open and the open file reads
 *   from that snapshot (a getattr without `size` computes it from `readFile`, and such files
 *   are opened with direct I/O so a reader always sees the whole snapshot). Writes go to the
 *   open file's copy; `writeFile(path, data)` receives the complete new content on close
 *   (flush) or fsync. Truncating by path does read-modify-write.
 * - `open`/`create` return `backed(fd | path | Bun.file(path))`: that open file's data is a real
 *   file, served by the shim without JavaScript per request (see `backed`).
 * `read` wins over `readFile`, `write` over `writeFile`; a backed open file uses none of them.
 */
export interface PathHandlers<H = any> {
  /** See PathFSOptions.threads. */
  threads?: "single" | "stateless";
  init?(info: InitInfo): void | Promise<void>;
  destroy?(): void | Promise<void>;

  getattr(path: string, ctx: RequestContext): MaybePromise<StatLike | null | undefined | false>;
  /** Names (or { name, ...stat }) of the entries; "." and ".." are added by the layer. */
  readdir?(path: string, ctx: RequestContext): MaybePromise<Iterable<DirEntryLike> | AsyncIterable<DirEntryLike>>;

  /** Return a handle, `opened(handle, …)`, or `backed(fd | path | Bun.file(path), …)`. */
  open?(path: string, flags: number, ctx: RequestContext): MaybePromise<H | Opened<H> | Backed<H> | void>;
  /** Bytes starting at `offset`; at most `size` are used. Fewer (or null) = end of file. */
  read?(path: string, offset: number, size: number, fh: H, ctx: RequestContext): MaybePromise<Content | null | undefined>;
  /** `data` is a private copy. Return the number of bytes written (default: all of them). */
  write?(path: string, data: Buffer, offset: number, fh: H, ctx: RequestContext): MaybePromise<number | void>;
  readFile?(path: string, ctx: RequestContext): MaybePromise<Content | null | undefined>;
  writeFile?(path: string, data: Buffer, ctx: RequestContext): MaybePromise<void>;
  flush?(path: string, fh: H, ctx: RequestContext): MaybePromise<void>;
  /** Not called for backed files (their FSYNC is fsync(2) of the descriptor, natively). */
  fsync?(path: string, datasync: boolean, fh: H, ctx: RequestContext): MaybePromise<void>;
  release?(path: string, fh: H, ctx: RequestContext): MaybePromise<void>;

  /**
   * Create and open a regular file (O_CREAT). `mode` has the umask applied. Without it,
   * `writeFile` creates files: `writeFile(path, <empty>)` at creation, then the content on close.
   */
  create?(path: string, mode: number, flags: number, ctx: RequestContext): MaybePromise<H | Opened<H> | Backed<H> | void>;
  mknod?(path: string, mode: number, rdev: number, ctx: RequestContext): MaybePromise<void>;
  mkdir?(path: string, mode: number, ctx: RequestContext): MaybePromise<void>;
  unlink?(path: string, ctx: RequestContext): MaybePromise<void>;
  rmdir?(path: string, ctx: RequestContext): MaybePromise<void>;
  /** Replace `to` if it exists (RENAME_NOREPLACE is checked by the layer; EXCHANGE is refused). */
  rename?(from: string, to: string, ctx: RequestContext): MaybePromise<void>;
  link?(existing: string, newPath: string, ctx: RequestContext): MaybePromise<void>;
  symlink?(target: string, path: string, ctx: RequestContext): MaybePromise<void>;
  /** The target: a string (names are strings, see fsdecode) or the raw bytes. */
  readlink?(path: string, ctx: RequestContext): MaybePromise<string | Uint8Array>;

  /**
   * `fh` is set when truncating an open file (ftruncate, O_TRUNC). Without this handler, open
   * backed files are truncated with ftruncate(2) of their descriptors.
   */
  truncate?(path: string, size: number, fh: H | undefined, ctx: RequestContext): MaybePromise<void>;
  chmod?(path: string, mode: number, ctx: RequestContext): MaybePromise<void>;
  chown?(path: string, uid: number, gid: number, ctx: RequestContext): MaybePromise<void>;
  /** Without this handler, time updates (touch) succeed and are ignored. */
  utimens?(path: string, atime: Date | undefined, mtime: Date | undefined, ctx: RequestContext): MaybePromise<void>;

  statfs?(path: string, ctx: RequestContext): MaybePromise<StatfsLike>;
  access?(path: string, mask: number, ctx: RequestContext): MaybePromise<void>;
  getxattr?(path: string, name: string, ctx: RequestContext): MaybePromise<string | Uint8Array | null | undefined>;
  setxattr?(path: string, name: string, value: Buffer, flags: number, ctx: RequestContext): MaybePromise<void>;
  listxattr?(path: string, ctx: RequestContext): MaybePromise<string[]>;
  removexattr?(path: string, name: string, ctx: RequestContext): MaybePromise<void>;

  /**
   * ioctl(2) on an open file or directory. `data`: the bytes the caller passed (_IOC_WRITE
   * commands; `_IOC_SIZE(cmd)` of them); `outSize`: how many bytes may go back (_IOC_READ).
   * Return the ioctl's result (a number; default 0), the bytes to copy back (result 0), or
   * `{ result, data }`. Throw a FuseError for an errno (ENOTTY: not a command of this file).
   */
  ioctl?(path: string, cmd: number, data: Buffer, outSize: number, fh: H | undefined, ctx: RequestContext): MaybePromise<IoctlResult | void>;
  /**
   * poll(2)/select/epoll: return the ready events among `events` (POLLIN 1, POLLPRI 2, POLLOUT 4,
   * POLLERR 8, POLLHUP 16, POLLRDNORM 64, …). `wakeup` is set when the caller will wait: call it
   * (once, from anywhere, any time later) when the readiness may have changed; the kernel then
   * polls again. Without this handler files are always ready.
   */
  poll?(path: string, events: number, wakeup: (() => void) | null, fh: H | undefined, ctx: RequestContext): MaybePromise<number>;
}

/** What an ioctl handler returns: a result, the bytes for the caller, or both. */
export type IoctlResult = number | Uint8Array | { result?: number; data?: Uint8Array };

export interface PathFSOptions {
  /**
   * "stateless": the handlers keep no per-instance state, or keep it where every thread sees it
   * (files, a database, SharedArrayBuffers), so a script mounted with `fuse-uring mount` is served
   * by a thread per CPU, each loading the script itself, over one shared node table. "single"
   * (the default): one thread. Also accepted as a `threads` property of the handlers object.
   */
  threads?: "single" | "stateless";
  /** Seconds the kernel caches names (default: the mount option). */
  entryTtl?: number;
  /** Seconds the kernel caches attributes (default: the mount option). */
  attrTtl?: number;
  /** Open every file with direct I/O (no page cache). */
  directIo?: boolean;
  /** Keep the page cache across opens for files not served from a computed snapshot. */
  keepCache?: boolean;
}
