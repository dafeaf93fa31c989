// The low-level inode API: what a filesystem implements to be served by a Session. The engine
// dispatches to it (lib/session/dispatch.ts), so it lives in the engine; filesystems (lib/fs,
// lib/path, lib/tree.ts) implement it, users import it from lib/index.ts (or lib/fs/types.ts).
// Modelled on libfuse's low-level API and fuser: node ids are the kernel's handles for inodes,
// every successful entry reply takes one lookup reference that FORGET gives back.
//
// Every method may return a value or a Promise. Throw `new FuseError("ENOENT")` (or an errno
// number) to answer with an errno; any other exception answers EIO and is logged once.
// Methods that are absent answer ENOSYS (the kernel then stops asking for most of them).
//
// The structs the methods take and return (Attr, Entry, OpenReply, ...): lib/protocol/structs.ts.

import type { Attr, AttrReply, CreateReply, Entry, FileLock, IoctlReply, OpenReply, SetattrChanges, Statfs } from "../protocol/structs.ts";

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
  /**
   * Notifications to the kernel (set by the session): poll wakeups, pushing data into or
   * fetching it from the kernel's page cache, deleting and expiring names. See Notifications.
   */
  notify?: Notifications;
  /**
   * The shim's node table, when the filesystem says `nativeGetattr` and the session serves
   * natively (--no-native-getattr turns it off): GETATTR of a node set here is a statx of its
   * descriptor done by the shim, without calling the getattr handler.
   */
  nodeAttrs?: NodeAttrs;
}

/** InitInfo.nodeAttrs: node id → descriptor, for GETATTR answered by the shim (docs/DATAPLANE.md). */
export interface NodeAttrs {
  /**
   * GETATTR of node `ino` is a statx of `fd` (an O_PATH descriptor is enough) from now on.
   * False: not taken (the table's entry for it holds another node): the handler answers it.
   */
  set(ino: number, fd: number): boolean;
  /**
   * Call before closing the descriptor given to set() for `ino` (or when its GETATTR must come to
   * the handler again): returns once no thread uses the descriptor any more.
   */
  clear(ino: number): void;
  /**
   * clear() in two steps, for callers that hold a lock: detach() stops new uses at once;
   * drain() — call it outside the lock, before closing — waits for a statx still running (as
   * long as the backing filesystem makes it wait).
   */
  detach(ino: number): void;
  drain(ino: number): void;
}

/**
 * Messages the filesystem may send the kernel at any time (FUSE_NOTIFY_*). They are written to
 * /dev/fuse off the JS thread and resolve to 0 or -errno (-ENOENT: the kernel had nothing
 * cached for it). The deadlock to avoid: a notification about a directory or inode waits for
 * kernel locks that a request on it holds while it waits for our answer. So do not await
 * invalInode/invalEntry/delete/store inside a handler of a request on the same inode or
 * directory; send them after answering (e.g. from a timer), or without awaiting.
 */
export interface Notifications {
  /** FUSE_NOTIFY_POLL: wake whoever polls the file that handed out `kh` (InodeFS.poll). */
  poll(kh: bigint): Promise<number>;
  /** FUSE_NOTIFY_INVAL_INODE: drop cached data [off, off+len) (len 0: to the end; off < 0: attributes only). */
  invalInode(ino: number, off?: number, len?: number): Promise<number>;
  /**
   * FUSE_NOTIFY_INVAL_ENTRY: drop the cached name; with `expireOnly` (needs HAS_EXPIRE_ONLY,
   * Linux 6.2+) the name only expires (revalidated on next use, kept by those who hold it).
   */
  invalEntry(parent: number, name: string, expireOnly?: boolean): Promise<number>;
  /**
   * FUSE_NOTIFY_DELETE: `name` in `parent` (node `child`) was deleted: the kernel drops the
   * dentry and, if `child` is a directory it holds, marks it dead (rm -rf behind the kernel's back).
   */
  delete(parent: number, child: number, name: string): Promise<number>;
  /** FUSE_NOTIFY_STORE: put `data` into the page cache of `ino` at `offset` (extends the cached size). */
  store(ino: number, offset: number, data: Uint8Array): Promise<number>;
  /**
   * FUSE_NOTIFY_RETRIEVE: the bytes of `ino` the kernel has cached in [offset, offset+size)
   * (stops at the first page not in the cache; empty if none). Rejects with a FuseError when
   * the kernel refuses (ENOENT: inode not cached).
   */
  retrieve(ino: number, offset: number, size: number): Promise<Uint8Array>;
}

/**
 * What a module's default-export function (and a reload hook) receives: a script's (lib/script.ts)
 * and a worker module's of CopiesPlan.module alike. Here, next to CopiesPlan, so the filesystems'
 * worker modules need nothing from the script loader above them.
 */
export interface ScriptContext {
  args: string[];
  /** A worker copy of a filesystem with shared state: InodeFS.copies()'s `shared`. */
  shared?: unknown;
  mountpoint?: string;
  /** Aborted when this version is replaced by a hot reload (`--watch`): stop its timers there. */
  signal?: AbortSignal;
}

/** What each worker loads to run its copy of a filesystem (InodeFS.copies). */
export interface CopiesPlan {
  /**
   * Module every worker loads (absolute path): its default export is a function that receives
   * `{ args, mountpoint, shared }` (ScriptContext above) and returns an InodeFS with
   * `threads: "stateless"` (or `replicable: true`).
   */
  module: string;
  args?: string[];
  /** The mountpoint the module's default export is told (ScriptContext.mountpoint). */
  mountpoint?: string;
  /** Structured-cloneable; SharedArrayBuffers in it stay shared with every copy. */
  shared?: unknown;
  /**
   * true: the copies share one state, so FORGET and BATCH_FORGET are applied once, by the main
   * thread's instance (the object given to mount()), instead of by every copy.
   */
  sharedState?: boolean;
}

/**
 * What a filesystem supports when several threads serve one mount (the engine decides how many,
 * lib/threads/plan.ts; a filesystem never starts threads itself):
 * - "single": one thread only (the default). `--workers N` then forwards to that thread.
 * - "stateless": any number of instances answer every request alike — node ids and file handles
 *   are computed from the request, nothing another instance changed affects an answer. Each
 *   worker loads its own instance (a script's module again). Was `replicable: true`.
 * - `{ shared }`: instances over one shared state (SharedArrayBuffers). `shared()` is called once,
 *   on the main thread, before any worker starts, and returns what each worker loads (its module
 *   must return a "stateless" instance over that state), or null to stay on one thread. Was
 *   `copies()`.
 */
export type ThreadSupport = "single" | "stateless" | { shared(): CopiesPlan | null };

/** The inode filesystem interface. Node id 1 is the root. */
export interface InodeFS {
  /** How several threads may serve this filesystem (see ThreadSupport); wins over the two below. */
  threads?: ThreadSupport;
  /**
   * Same as `threads: "stateless"`. True when copies of this filesystem (one per worker thread with `--workers N`) answer every
   * request alike: node ids and file handles are computed from the request (not numbered per
   * copy) and no answer depends on state another copy changed. With it a script runs as one copy
   * per worker; without it `--workers N` keeps the filesystem on the main thread and the workers
   * forward every request the native data plane does not answer (forwarding mode).
   */
  replicable?: boolean;
  /**
   * Same as `threads: { shared: () => this.copies() }`.
   * How to run this filesystem as one copy per worker thread (`--workers N`), or null for
   * forwarding mode. For filesystems that share their state between copies (SharedArrayBuffers)
   * instead of computing everything from the request, as the built-in memfs and passthrough do.
   * Called once, on the main thread, before the workers start.
   */
  copies?(): CopiesPlan | null;
  /**
   * True when GETATTR is exactly a statx of a descriptor of the node (what the passthrough's
   * getattr does): the session then gives init() `nodeAttrs`, and GETATTR of the nodes set there
   * is answered by the shim (stats `nativeGetattrs`), one JavaScript request less per stat.
   * The attributes go out with the session's attribute TTL.
   */
  readonly nativeGetattr?: boolean;
  /**
   * With `nativeGetattr`: true when LOOKUP of a name that is not there is exactly "statx of the
   * name in the directory node's descriptor said ENOENT" (the passthrough's, unless a subclass
   * overrides `lookup`). LOOKUPs in directories set in `nodeAttrs` whose name does not exist are
   * then answered by the shim over io_uring (a negative entry for the session's negative TTL,
   * or ENOENT), without calling `lookup` (stats `nativeLookups`).
   */
  readonly nativeLookupMiss?: boolean;
  init?(info: InitInfo): void | Promise<void>;
  destroy?(): void | Promise<void>;

  /**
   * The entry for `name` in directory `parent`. `null` (or throwing FuseError ENOENT) says the
   * name does not exist; `null` costs no exception, which matters on a hot path (a create or a
   * PATH search looks up names that are not there first).
   */
  lookup?(ctx: RequestContext, parent: number, name: string): Entry | null | Promise<Entry | null>;
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
  /**
   * The second half of `release` for a handle opened with `backingRelease`: the shim already
   * closed its `backingFd` and answered the kernel's RELEASE; update what the filesystem keeps
   * about open handles (never close `fh`). Synchronous. Called on an engine thread after the
   * RELEASE was answered: before that thread's next request, within one wait period (10 ms)
   * when it has none, at the latest at unmount. Requests on other threads may come first (an
   * UNLINK of the file, an OPEN of it, the FORGET of its node): treat the handle as open until
   * this call.
   */
  releaseClosed?(ino: number, fh: number): void;
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

  // ---- issue 24: tmpfile, locks, ioctl, poll (all optional) --------------------------------
  /**
   * O_TMPFILE: create an unnamed regular file in `parent` (nlink 0) and open it. One lookup
   * reference, like create. A later LINK of this node (linkat) must succeed although its nlink
   * is 0. Without it open(O_TMPFILE) fails with EOPNOTSUPP.
   */
  tmpfile?(ctx: RequestContext, parent: number, mode: number, umask: number, flags: number): CreateReply | Promise<CreateReply>;
  /**
   * POSIX and OFD byte-range locks (fcntl). Having getlk and setlk makes the session ask for
   * FUSE_POSIX_LOCKS; without them the kernel keeps such locks itself (local to this machine).
   * `owner` identifies the holder (POSIX: the process; OFD: the open file): locks of one
   * owner never conflict. POSIX locks of an owner end when it closes any descriptor of the
   * file: `flush` gets that owner as `lockOwner`; OFD locks end with `release` of their fh.
   * getlk: the first conflicting lock, or `lock` with type F_UNLCK when there is none.
   */
  getlk?(ctx: RequestContext, ino: number, fh: number, owner: bigint, lock: FileLock): FileLock | Promise<FileLock>;
  /**
   * Set or remove (type F_UNLCK) a lock. `wait` (SETLKW): wait until it can be had — without
   * blocking the thread, and throwing EINTR when `ctx.signal` aborts; otherwise throw EAGAIN
   * on a conflict.
   */
  setlk?(ctx: RequestContext, ino: number, fh: number, owner: bigint, lock: FileLock, wait: boolean): void | Promise<void>;
  /**
   * flock(2) locks: `type` F_RDLCK (LOCK_SH), F_WRLCK (LOCK_EX) or F_UNLCK; `owner` is the open
   * file. Having it makes the session ask for FUSE_FLOCK_LOCKS. On the last close the session
   * calls it with F_UNLCK (RELEASE with FUSE_RELEASE_FLOCK_UNLOCK) before `release`.
   */
  flock?(ctx: RequestContext, ino: number, fh: number, owner: bigint, type: number, wait: boolean): void | Promise<void>;
  /**
   * ioctl(2) on an open file (and, as the session asks for FUSE_HAS_IOCTL_DIR, a directory).
   * `data` holds the `_IOC_SIZE(cmd)` bytes the caller passed for _IOC_WRITE commands (a view,
   * valid until the handler settles); `outSize` is how many bytes may be answered (_IOC_READ).
   * `arg` is the caller's raw argument; `flags` FUSE_IOCTL_* (COMPAT, 32BIT, DIR, UNRESTRICTED).
   */
  ioctl?(ctx: RequestContext, ino: number, fh: number, cmd: number, arg: bigint, data: Uint8Array, outSize: number, flags: number): IoctlReply | Promise<IoctlReply>;
  /**
   * poll(2)/select/epoll on an open file: return the ready events (POLLIN 1, POLLOUT 4, …) of
   * those asked for in `events`. `kh` is set when the kernel wants to be told later: call
   * `info.notify.poll(kh)` (InitInfo) once readiness changes; the kernel then polls again.
   * Without this handler files are always ready (POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM).
   */
  poll?(ctx: RequestContext, ino: number, fh: number, kh: bigint | null, events: number): number | Promise<number>;
}
