// A passthrough filesystem: mirrors a source directory through the inode API.
//
// Inode table. Every node the kernel knows is keyed by the backing (st_dev, st_ino), as
// libfuse's passthrough_hp does, and addresses its backing file through an O_PATH|O_NOFOLLOW
// descriptor (the *at() calls on it: openat, statx, unlinkat, mkdirat, symlinkat, renameat2,
// AT_EMPTY_PATH for the file itself; `/proc/self/fd/N` where a call must follow the magic link:
// open, chmod, truncate, access), so renames need no bookkeeping for the data path, hard links
// share one node, and a path can never escape the source through a symlink swapped in by
// someone else. Those descriptors are a bounded cache (passthrough/nodes.ts): least recently
// used ones are closed and re-opened on demand by kernel file handle or by the node's last known
// link (parent node + name, kept current here across LOOKUP/CREATE/RENAME/UNLINK). Lookup counts
// follow the kernel (LOOKUP/CREATE/MKDIR/… and READDIRPLUS entries add one, FORGET gives them
// back); a node goes away when the count is 0, no file handle is open on it and no known child
// link goes through it. A node id can come back for the same backing inode after FORGET.
//
// Metadata is synchronous. Every handler but fsync is a plain function making direct libc calls
// through bun:ffi (passthrough/libc.ts, passthrough/stat.ts): a metadata syscall on a local
// backing filesystem takes a microsecond or two, while node:fs (a /proc/self/fd/N/name path to
// walk, a BigIntStats of BigInts per stat, an Error built for every ENOENT) and a Promise per
// step cost several times the syscall. The hot-path calls return -errno; a failed request
// throws one shared FuseError per errno. A handler pins (nodes.ts) the nodes whose descriptors
// it uses (grab/ungrab): on one thread that guards against its own shedding (EMFILE) or
// re-opening another node; with --workers N against the other threads, since the backing
// syscalls run outside the node table's mutex (see "threads" below).
//
// Data path. File handles are real descriptors of the backing file. READ and WRITE do nothing
// but `ctx.backingRead/backingWrite(fh, offset, size)`: on the io_uring transport that is a
// READ_FIXED/WRITE_FIXED between the backing file and the request's registered payload buffer,
// on classic an asynchronous pread/pwrite on that same native buffer. The bytes never pass
// through JavaScript and nothing is allocated per request beyond that promise.
//
// Kernel passthrough (`kernelPassthrough: true`, needs CAP_SYS_ADMIN): the first open of a
// regular file registers its descriptor with FUSE_DEV_IOC_BACKING_OPEN and every open of that
// inode answers FOPEN_PASSTHROUGH with the same backing id (the kernel refuses mixed modes on
// one inode), so reads, writes and mmap go straight to the backing file in the kernel. The id
// is dropped when the last handle of the inode is released.
//
// Errors are the source's: the real errno of the failed call.
//
// Deleted files. An O_PATH descriptor keeps a deleted inode (and its blocks) alive. So that
// `rm` frees space on the source at once and not only when the kernel sends FORGET, unlink and
// rename-over check the victim's link count afterwards and close its descriptor when no link
// and no handle is left (or at its last RELEASE); GETATTR then answers with nlink 0.
//
// Names are bytes: names and targets arrive as strings whose U+DC80–U+DCFF stand for raw bytes
// (protocol/names.ts); libc.setName hands the backing syscalls those bytes.
//
// Notes and gaps:
// - The daemon usually runs as root; permission checks are the kernel's (default_permissions,
//   the default) against the source's mode bits. With --no-default-permissions every caller
//   gets the daemon's rights. When the caller is not the daemon's user and the daemon is root,
//   new files/directories/nodes/symlinks are chowned to the caller.
// - A symlink's own xattrs answer EOPNOTSUPP (no race-free way without a path; libfuse does
//   the same). The backing read is one pread per READ (a short read means EOF to the kernel).
// - The backing descriptor is opened without O_DIRECT; for an O_DIRECT open the session's data
//   plane reopens it with O_DIRECT and keeps this one as the fallback for requests the backing
//   filesystem refuses for alignment (docs/DATAPLANE.md "O_DIRECT"; --backing-cache: buffered).
// - Directory listings are snapshotted with getdents64 when a stream starts (offset 0) and
//   served by index, so offsets are small and stable on every backing filesystem (ext4's 64-bit
//   hash cookies do not fit a JS number).
// - Synchronous calls block the event loop for one syscall each (copy_file_range ≤ 64 MiB per
//   request); only fsync, which can really block, goes to the thread pool.

import { fdatasync as fsFdatasync, fsync as fsFsync, constants as C, openSync, readlinkSync } from "node:fs";
import { FuseError, errnoOf, Errno } from "./errors.ts";
import type {
  Attr, CopiesPlan, CreateReply, DirFiller, Entry, InitInfo, InodeFS, OpenReply, RequestContext, SetattrChanges, Statfs,
} from "./types.ts";
import { S_IFDIR, S_IFLNK, S_IFMT, S_IFREG } from "./types.ts";
import * as libc from "./passthrough/libc.ts";
import * as stat from "./passthrough/stat.ts";
import { FdCache, PassthroughNode, probeHandles, type FdCacheStats } from "./passthrough/nodes.ts";
import {
  SharedDirStore, SharedFdCacheState, SharedMutex, SharedNodeTable, createShare, lockHandlers,
  type DirListing, type DirStore, type NodeTable, type PassthroughShare,
} from "./passthrough/shared.ts";
import { decodeName } from "../protocol/names.ts";
import { builtinCopyModule } from "./builtin-copies.ts";

export interface PassthroughOptions {
  /** Serve file data in the kernel (FUSE_PASSTHROUGH; needs CAP_SYS_ADMIN). Default false. */
  kernelPassthrough?: boolean;
  /** Chown new files to the calling user when the daemon runs as root (default true). */
  emulateOwnership?: boolean;
  /** Where one-time notices go (default: stderr). */
  log?: (line: string) => void;
  /**
   * Most O_PATH descriptors held for inodes the kernel knows (least recently used ones are
   * closed and re-opened on demand). Default: half the RLIMIT_NOFILE soft limit (after raising
   * it to the hard limit), at most 65536.
   */
  fdBudget?: number;
  /** Re-open evicted inodes by kernel file handle when permitted (default true; false: by path). */
  fileHandles?: boolean;
}

export { PassthroughNode };

const O_PATH = 0o10000000; // same value on x86_64 and aarch64
const O_ACCMODE = 3;
const O_RDONLY = C.O_RDONLY;
const O_WRONLY = C.O_WRONLY;
const O_RDWR = C.O_RDWR;
const O_CREAT = C.O_CREAT;
const O_EXCL = C.O_EXCL;
const O_NOCTTY = C.O_NOCTTY;
const O_APPEND = C.O_APPEND;
const O_NOFOLLOW = C.O_NOFOLLOW;
const O_DIRECTORY = C.O_DIRECTORY;
/** O_TMPFILE = __O_TMPFILE | O_DIRECTORY (__O_TMPFILE is 0o20000000 on x86_64 and aarch64). */
const O_TMPFILE_BIT = 0o20000000;
const O_DIRECT = C.O_DIRECT ?? 0;
const O_CLOEXEC = 0o2000000;

const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_IXGRP = 0o010;

const FATTR_KILL_SUIDGID = 1 << 11;
const FUSE_WRITE_KILL_SUIDGID = 1 << 2;

/** Largest copy per COPY_FILE_RANGE request (it runs synchronously); callers loop on short copies. */
const COPY_CHUNK = 64 << 20;

const PROC = "/proc/self/fd/";
const RENAME_EXCHANGE = 2;
const AT_REMOVEDIR = 0x200;

/** `/proc/self/fd/N`: the backing file of descriptor N (node:fs follows it to the inode). */
function procPath(fd: number): string {
  return PROC + fd;
}

/** An open directory: its descriptor and the listing snapshot taken at offset 0. */
class DirHandle implements DirListing {
  names: string[] = [];
  inos: number[] = [];
  types: number[] = [];
  loaded = false;
  constructor(readonly fd: number) {}
  get count(): number {
    return this.names.length;
  }
  name(i: number): string {
    return this.names[i]!;
  }
  ino(i: number): number {
    return this.inos[i]!;
  }
  type(i: number): number {
    return this.types[i]!;
  }
}

/** The open directories of one thread (copies mode: SharedDirStore). */
class LocalDirStore implements DirStore {
  private readonly dirs = new Map<number, DirHandle>();
  open(fd: number): void {
    this.dirs.set(fd, new DirHandle(fd));
  }
  get(fh: number): DirListing | null {
    return this.dirs.get(fh) ?? null;
  }
  store(fh: number, names: string[], inos: number[], types: number[]): void {
    const h = this.dirs.get(fh)!;
    h.names = names;
    h.inos = inos;
    h.types = types;
    h.loaded = true;
  }
  close(fh: number): boolean {
    return this.dirs.delete(fh);
  }
  fds(): number[] {
    return [...this.dirs.keys()];
  }
  clear(): void {
    this.dirs.clear();
  }
}

/** The node table of one thread: node id → node, st_dev → st_ino → node (copies mode: SharedNodeTable). */
class LocalNodeTable implements NodeTable {
  private readonly nodes = new Map<number, PassthroughNode>();
  private readonly byIno = new Map<number, Map<number, PassthroughNode>>();
  private nextId = 2;
  constructor(readonly root: PassthroughNode) {
    this.nodes.set(1, root);
    this.index(root);
  }
  get(id: number): PassthroughNode | undefined {
    return this.nodes.get(id);
  }
  find(dev: number, ino: number): PassthroughNode | undefined {
    return this.byIno.get(dev)?.get(ino);
  }
  create(dev: number, ino: number, mode: number): PassthroughNode {
    const n = new PassthroughNode(this.nextId++, dev, ino, mode);
    this.nodes.set(n.id, n);
    this.index(n);
    return n;
  }
  unindex(n: PassthroughNode): void {
    const m = this.byIno.get(n.dev);
    if (m?.get(n.ino) === n) {
      m.delete(n.ino);
      if (m.size === 0) this.byIno.delete(n.dev);
    }
  }
  remove(n: PassthroughNode): void {
    if (this.nodes.get(n.id) !== n) return;
    this.nodes.delete(n.id);
    this.unindex(n);
  }
  knownIno(ino: number): boolean {
    for (const m of this.byIno.values()) if (m.has(ino)) return true;
    return false;
  }
  get size(): number {
    return this.nodes.size;
  }
  values(): Iterable<PassthroughNode> {
    return this.nodes.values();
  }
  clear(): void {
    this.nodes.clear();
    this.byIno.clear();
    this.nodes.set(1, this.root);
    this.index(this.root);
  }
  private index(n: PassthroughNode): void {
    let m = this.byIno.get(n.dev);
    if (!m) this.byIno.set(n.dev, (m = new Map()));
    m.set(n.ino, n);
  }
}

// ---- errors ---------------------------------------------------------------------------------

/**
 * One FuseError per errno, made once and thrown again and again. Building an Error (and its
 * stack) for every failed call cost more than the syscall: a negative LOOKUP spent most of its
 * time there. The dispatcher reads only `errno`.
 */
const sharedErrors: FuseError[] = [];

function fail(errno: number): never {
  throw (sharedErrors[errno] ??= new FuseError(errno));
}

/** `rc` of a raw call: itself when ≥ 0, else the request fails with its errno. */
function check(rc: number): number {
  if (rc < 0) fail(-rc);
  return rc;
}

function closeQuiet(fd: number): void {
  libc.closeRaw(fd);
}

/** A lookup's entry, or its negative errno thrown (lookupAt). */
function entryOrFail(r: Entry | number): Entry {
  if (typeof r === "number") fail(-r);
  return r;
}

function voidCb(resolve: () => void, reject: (e: unknown) => void) {
  return (err: NodeJS.ErrnoException | null) => (err ? reject(err) : resolve());
}

/** Node/Bun fs errors whose code errnoOf does not know still carry errno (negative). */
function toFuse(e: unknown): unknown {
  if (errnoOf(e) !== null) return e;
  const n = (e as { errno?: unknown } | null)?.errno;
  if (typeof n === "number" && n !== 0 && Math.abs(n) < 512) return new FuseError(Math.abs(n), (e as Error).message);
  return e;
}

function isErrno(e: unknown, errno: number): boolean {
  return errnoOf(e) === errno;
}

/** The last statx (stat.ts) is not the file node `n` stands for: another type, or born at another time. */
function staleFor(n: PassthroughNode, mode: number): boolean {
  if ((n.mode & S_IFMT) !== (mode & S_IFMT)) return true;
  if (n.btimeSec === 0 && n.btimeNsec === 0) return false;
  const bs = stat.btimeSec(), bn = stat.btimeNsec();
  return (bs !== 0 || bn !== 0) && (bs !== n.btimeSec || bn !== n.btimeNsec);
}

const DT_TO_MODE = [0, 0o010000, 0o020000, 0, 0o040000, 0, 0o060000, 0, 0o100000, 0, 0o120000, 0, 0o140000];

const processUid = process.getuid?.() ?? 0;
const processGid = process.getgid?.() ?? 0;
export class PassthroughFS implements InodeFS {
  readonly source: string;
  readonly options: Required<Omit<PassthroughOptions, "log" | "fdBudget">> & { log: (line: string) => void };
  /** The bounded O_PATH descriptor cache (lib/fs/passthrough/nodes.ts). */
  fds: FdCache;
  /** RLIMIT_NOFILE as found and as raised at start. */
  readonly nofile: libc.NofileLimit;
  /** The nodes the kernel knows: id → node, (st_dev, st_ino) → node. */
  protected table: NodeTable;
  /** Open directory handles. */
  private dirs: DirStore;
  /** Copies mode (passthrough/shared.ts): the state shared with the other copies, else null. */
  private share: PassthroughShare | null = null;
  /** Copies mode: the table's mutex (lockHandlers takes it around the handlers that need it). */
  private mutex: SharedMutex | null = null;
  /** A worker's copy (not the main thread's instance): the shared state is not its to tear down. */
  readonly isCopy: boolean = false;
  /**
   * FLUSH may be answered by the shim (OpenReply.backingFlush): this class's flush is
   * close(dup(fh)) and nothing else. Not when a subclass overrides flush (it expects the call)
   * or adds POSIX locks (setlk: flush must then release lockOwner's locks).
   */
  private get nativeFlush(): boolean {
    return (this.nativeFlushKnown ??= this.flush === PassthroughFS.prototype.flush && typeof (this as { setlk?: unknown }).setlk !== "function");
  }
  private nativeFlushKnown: boolean | undefined;
  /**
   * RELEASE may be answered by the shim (OpenReply.backingRelease): this class's release is
   * close(fh) and then releaseClosed. Not when a subclass overrides release (it expects the
   * call) or adds POSIX locks.
   */
  private get nativeRelease(): boolean {
    return (this.nativeReleaseKnown ??= this.release === PassthroughFS.prototype.release && typeof (this as { setlk?: unknown }).setlk !== "function");
  }
  private nativeReleaseKnown: boolean | undefined;
  /**
   * GETATTR may be answered by the shim (InodeFS.nativeGetattr): this class's getattr is a statx
   * of the node's descriptor. Not when a subclass overrides getattr (it expects the call).
   */
  get nativeGetattr(): boolean {
    return this.getattr === PassthroughFS.prototype.getattr;
  }
  /**
   * LOOKUP of a missing name may be answered by the shim (InodeFS.nativeLookupMiss): this
   * class's lookup of a name that is not there is a statx in the directory's descriptor that
   * says ENOENT. Not when a subclass overrides lookup (it may add names).
   */
  get nativeLookupMiss(): boolean {
    return this.lookup === PassthroughFS.prototype.lookup;
  }
  protected info: InitInfo | null = null;
  /** Kernel passthrough is requested and still usable. */
  protected kernelPassthrough = false;
  private writebackCache = false;
  private readonly logged = new Set<string>();
  private readonly direntBuf = Buffer.allocUnsafe(64 * 1024);
  /** Reused for plain READDIR entries (the filler copies synchronously). */
  private readonly scratchAttr: Attr = {
    ino: 0, mode: 0, nlink: 0, uid: 0, gid: 0, rdev: 0, size: 0, blocks: 0, atime: 0, atimeNsec: 0, mtime: 0, mtimeNsec: 0, ctime: 0, ctimeNsec: 0,
  };
  private readonly scratchEntry: Entry = { ino: 0, attr: this.scratchAttr };

  /** `share`: a worker's copy over the state of copies(), see fromShare. */
  constructor(source: string, options: PassthroughOptions = {}, share?: PassthroughShare) {
    this.source = source;
    this.options = {
      kernelPassthrough: options.kernelPassthrough ?? false,
      emulateOwnership: options.emulateOwnership ?? true,
      fileHandles: options.fileHandles ?? true,
      log: options.log ?? ((line) => process.stderr.write(line + "\n")),
    };
    if (share) {
      // A worker's copy: the descriptors (process-wide) and the table are the main instance's.
      this.nofile = { before: 0, after: 0, hard: 0, error: "" };
      this.handleProbe = share.handleProbe;
      this.isCopy = true;
      const t = new SharedNodeTable(share, this.options.log);
      this.table = t;
      this.dirs = new SharedDirStore(share, t.M);
      this.fds = new FdCache(share.budget, t.root, t.mountFd, this.options.log, new SharedFdCacheState(t));
      this.share = share;
      this.mutex = t.mutex;
      this.fds.closeLater = [];
      lockHandlers(this, t.mutex, () => this.fds.flushCloses());
      return;
    }
    // Like libfuse's passthrough_hp: use every descriptor the hard limit allows.
    try {
      this.nofile = libc.raiseNofile();
    } catch (e) {
      this.nofile = { before: 0, after: 0, hard: 0, error: e instanceof Error ? e.message : String(e) };
    }
    let fd: number;
    try {
      fd = openSync(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
    } catch (e) {
      const code = (e as { code?: string }).code;
      throw new Error(
        code === "ENOTDIR" ? `passthrough source ${source} is not a directory` : `cannot open passthrough source ${source}: ${code ?? String(e)}`,
      );
    }
    if (stat.statFd(fd) < 0) throw new Error(`cannot stat passthrough source ${source}: errno ${libc.errno()}`);
    const root = new PassthroughNode(1, stat.dev(), stat.ino(), stat.mode());
    root.fd = fd;
    root.nlookup = 1; // never forgotten
    this.table = new LocalNodeTable(root);
    this.dirs = new LocalDirStore();
    const limit = this.nofile.after > 0 ? this.nofile.after : 1024;
    const budget = options.fdBudget ?? Math.max(16, Math.min(65536, Math.floor(Math.min(limit, 1 << 30) / 2)));
    if (!Number.isInteger(budget) || budget < 1) throw new Error(`passthrough: fdBudget must be an integer ≥ 1, got ${budget}`);
    const handles = this.options.fileHandles ? probeHandles(fd) : { mountFd: -1, why: "disabled" };
    this.fds = new FdCache(budget, root, handles.mountFd, this.options.log);
    this.handleProbe = handles.why;
  }

  /** Why kernel file handles are (not) used to re-open evicted inodes. */
  readonly handleProbe: string;

  /** One line for --debug: the descriptor limit and budget. */
  describeDescriptors(): string {
    const l = this.nofile;
    const raised = l.error
      ? `could not raise RLIMIT_NOFILE ${l.before} (hard ${l.hard}): ${l.error}`
      : l.before < l.after ? `raised RLIMIT_NOFILE ${l.before} → ${l.after} (hard limit)` : `RLIMIT_NOFILE ${l.after} (already the hard limit)`;
    const how = this.fds.useHandles ? "kernel file handles" : `paths (file handles: ${this.handleProbe})`;
    return `fuse-uring: passthrough: ${raised}; inode descriptor budget ${this.fds.budget}, evicted inodes re-opened by ${how}`;
  }

  /** Descriptor cache counters. */
  fdStats(): FdCacheStats {
    const s = this.fds.stats();
    // Copies mode: how often a thread found the node table locked by another and waited.
    if (this.mutex) s.tableLockWaits = this.mutex.waits;
    return s;
  }

  // ---- copies mode (--workers N) ---------------------------------------------------------

  /**
   * Run as one copy per worker thread over state shared through SharedArrayBuffers
   * (passthrough/shared.ts; worker module passthrough/copy.ts), or null: forwarding mode. This
   * instance switches to the shared state here and stays a full participant (it answers what
   * comes through /dev/fuse, and applies every FORGET once: sharedState).
   */
  copies(): CopiesPlan | null {
    // (Shared already: the module was found when the state became shared.)
    if (this.share) return this.isCopy ? null : { module: builtinCopyModule("passthrough")!, shared: this.share, sharedState: true };
    // Null (forwarding, every handler on this thread as before) where copies cannot keep a
    // feature or the single-thread behaviour:
    // - a subclass or an instance whose handlers were replaced: the copies would be plain
    //   PassthroughFS (the module cannot rebuild someone else's class);
    if (Object.getPrototypeOf(this) !== PassthroughFS.prototype || Object.keys(this).some((k) => typeof (this as Record<string, unknown>)[k] === "function")) return null;
    // - kernel passthrough: backing ids are registered per inode at the first open and the
    //   kernel refuses mixed modes on one inode; not shared;
    if (this.options.kernelPassthrough) return null;
    // - no kernel file handles (--no-file-handles, not root, or a source without export
    //   support): evicted nodes would be re-opened by path, through last known links (parent
    //   node + name) that are not shared;
    if (!this.fds.useHandles) return null;
    // - already used on this thread (not the case for the CLI: copies() comes before INIT).
    if (this.table.size !== 1 || this.dirs.fds().length !== 0) return null;
    // - the worker module cannot be loaded (passthrough/copy.ts; builtin-copies.ts).
    const module = builtinCopyModule("passthrough");
    if (!module) return null;
    {
      const root = this.table.root;
      const share = createShare({
        source: this.source, emulateOwnership: this.options.emulateOwnership, fileHandles: this.options.fileHandles,
        handleProbe: this.handleProbe, budget: this.fds.budget,
      });
      SharedNodeTable.init(share, { dev: root.dev, ino: root.ino, mode: root.mode, fd: root.fd, mountFd: this.fds.mountFd });
      const t = new SharedNodeTable(share, this.options.log);
      this.table = t;
      this.dirs = new SharedDirStore(share, t.M);
      this.fds = new FdCache(share.budget, t.root, t.mountFd, this.options.log, new SharedFdCacheState(t));
      this.share = share;
      this.mutex = t.mutex;
      this.fds.closeLater = [];
      lockHandlers(this, t.mutex, () => this.fds.flushCloses());
    }
    return { module, shared: this.share, sharedState: true };
  }

  /** A worker's copy over the state of the main instance's copies() (passthrough/copy.ts). */
  static fromShare(share: PassthroughShare, log?: (line: string) => void): PassthroughFS {
    return new PassthroughFS(share.source, { emulateOwnership: share.emulateOwnership, fileHandles: share.fileHandles, log }, share);
  }

  /** Copies mode (this instance uses shared state). */
  get shared(): boolean {
    return this.share !== null;
  }

  // ---- table ------------------------------------------------------------------------------

  /** The node for a node id the kernel sent (ESTALE if unknown). */
  node(id: number): PassthroughNode {
    const n = this.table.get(id);
    if (!n) throw new FuseError("ESTALE", `passthrough: unknown node id ${id}`);
    return n;
  }

  /** The backing file's current path (best effort: where /proc says the descriptor points). */
  async sourcePath(id: number): Promise<string> {
    const n = this.live(id);
    return decodeName(readlinkSync(procPath(this.fds.fd(n)), { encoding: "buffer" }));
  }

  /** Number of nodes in the table (root included). */
  get nodeCount(): number {
    return this.table.size;
  }

  /**
   * Find or create the node for a backing file given a fresh O_PATH descriptor of it, whose
   * statx is the last one taken (stat.ts), and take one lookup reference. The descriptor is kept
   * (new node) or closed.
   */
  protected adopt(fd: number, parent: PassthroughNode | null = null, name = ""): Entry {
    const attr = stat.attr(); // first: nothing below may statx, but the reply must be this file's
    const dev = stat.dev(), ino = attr.ino, mode = attr.mode;
    let n = this.table.find(dev, ino);
    if (n && staleFor(n, mode)) {
      // The backing inode number was reused (another type, or born later: an evicted node does
      // not keep its inode alive, and ext4 reuses numbers at once): the old node is stale.
      this.table.unindex(n);
      n = undefined;
    }
    if (!n) {
      try {
        n = this.table.create(dev, ino, mode);
      } catch (e) {
        closeQuiet(fd); // the shared table is full (ENOMEM)
        throw e;
      }
      n.btimeSec = stat.btimeSec();
      n.btimeNsec = stat.btimeNsec();
    }
    // Latest name wins: it was valid a moment ago (evicted nodes are re-opened through it).
    if (parent) this.setLink(n, parent, name);
    this.fds.adopt(n, fd);
    n.mode = mode;
    n.nlookup++;
    return { ino: n.id, attr };
  }


  /** Record `parent`/`name` as n's current link (null parent: none known). */
  protected setLink(n: PassthroughNode, parent: PassthroughNode | null, name: string): void {
    if (n === parent || n.id === 1) return;
    const old = n.parent;
    if (old !== parent) {
      if (parent) parent.kids++;
      n.parent = parent;
      if (old) {
        old.kids--;
        this.maybeFree(old);
      }
    }
    n.name = parent ? name : "";
    if (parent) this.fds.linked(n);
  }

  /** The link `dir`/`name` went away: forget it as n's path if it was that one. */
  protected dropLink(n: PassthroughNode | undefined, dir: PassthroughNode, name: string): void {
    if (n && n.parent === dir && n.name === name) this.setLink(n, null, "");
  }

  /** Give back lookup references; drop the node when nothing refers to it anymore. */
  protected unref(n: PassthroughNode, count: number): void {
    n.nlookup -= count;
    this.maybeFree(n);
  }

  /** Drop a node nothing refers to (no lookups, no handles, no known child links through it). */
  private maybeFree(n: PassthroughNode): void {
    // Pinned: a request (of any thread) is using it; its last letGo() looks again.
    if (n.id === 1 || n.nlookup > 0 || n.opens > 0 || n.kids > 0 || n.pins > 0) return;
    if (this.table.get(n.id) !== n) return;
    n.gone = true;
    this.fds.drop(n);
    this.setLink(n, null, "");
    // Last: in copies mode this frees the slot (its id goes stale; the view may be reused).
    this.table.remove(n);
  }

  /**
   * Name `name` in the directory open as `dfd` (pinned by the caller) is about to lose a link:
   * the node we know for it, if any, held (the caller lets go of it). Lock not held.
   */
  protected victimOf(dfd: number, name: string): PassthroughNode | undefined {
    if (stat.statAt(dfd, name) < 0) return undefined;
    this.lock();
    try {
      const n = this.table.find(stat.dev(), stat.ino());
      if (!n) return undefined;
      // Held: its slot stays this node until the caller is done (a FORGET meanwhile frees it at letGo).
      this.fds.hold(n);
      if (n.opens > 0 && !n.gone) {
        // An open file may lose its last link now: hold its descriptor from here on, while it
        // can still be re-opened (unlinked, it could not be).
        try {
          this.fds.fd(n);
          this.fds.pinForever(n);
        } catch {}
      }
      return n;
    } finally {
      this.unlock();
    }
  }

  /**
   * After a node lost a link: if it has no link left and no open handle, close its descriptor
   * now so the source releases the file (a tmpfs frees the space at once, as `rm` promises).
   * The kernel may still hold the node id until FORGET; GETATTR then answers with nlink 0.
   * Lock not held (or held by a PASSTHROUGH_LOCKED caller); n held by the caller.
   */
  protected settleVictim(n: PassthroughNode | undefined): void {
    if (!n) return;
    let fd: number;
    this.lock();
    try {
      if (n.gone || n.id === 1) return;
      if (n.opens > 0) {
        this.keepUnlinked(n);
        return;
      }
      try {
        fd = this.fds.pin(n);
      } catch (e) {
        // Evicted, and its handle says the inode is gone (ESTALE) or its path has another file:
        // deleted. Anything else (EMFILE): leave it be.
        if (errnoOf(e) === Errno.ESTALE && n.handle) this.finishSettle(n, null);
        return;
      }
    } finally {
      this.unlock();
    }
    // The statx outside the lock (n pinned: its descriptor stays open).
    const attr = stat.statFd(fd) === 0 && stat.nlink() === 0 ? stat.attr() : null;
    this.lock();
    try {
      this.letGo(n);
      if (attr) this.finishSettle(n, attr);
    } finally {
      this.unlock();
    }
  }

  /** n's file has no link left (lock held): drop its descriptor, or keep it while a handle is open. */
  private finishSettle(n: PassthroughNode, attr: Attr | null): void {
    if (n.gone) return;
    if (n.opens > 0) {
      // Opened on another thread since settleVictim looked (the open counts from before its
      // backing open, see open()): as if it had been open at the unlink.
      this.keepUnlinked(n);
      return;
    }
    if (attr) n.deletedAttr = attr;
    this.table.unindex(n);
    // Closed now, or at the last unpin of a request still using it (never under its feet).
    n.gone = true;
    this.fds.drop(n);
    this.maybeFree(n);
  }

  /** An open node lost a link (lock held): its last release checks again; keep its descriptor. */
  private keepUnlinked(n: PassthroughNode): void {
    n.unlinked = true;
    // Its last link may be gone: it could not be re-opened, so keep its descriptor.
    this.fds.pinForever(n);
  }

  /** A node whose backing file is still reachable (ENOENT once it was deleted and released). */
  protected live(id: number): PassthroughNode {
    const n = this.node(id);
    if (n.gone) fail(Errno.ENOENT);
    return n;
  }

  /**
   * LOOKUP of `name` in directory node `dir` (kept alive by the caller: a kernel reference or a
   * pin): one new reference. `probe`: first look by name (one statx) whether it is a node whose
   * descriptor is cached — most LOOKUPs are a miss or revalidate such a node, and then that
   * statx is the whole answer. Callers that just made the file (mkdir, symlink, mknod) skip it.
   */
  protected lookupIn(dir: PassthroughNode, name: string, probe = true): Entry {
    // Pinned: a re-open (or shedding, or another thread) must not close the directory under openat.
    this.lock();
    let dfd: number;
    try {
      dfd = this.fds.pin(dir);
    } finally {
      this.unlock();
    }
    let r: Entry | number;
    try {
      r = this.lookupAt(dir, dfd, name, probe);
    } finally {
      this.ungrab(dir);
    }
    return entryOrFail(r);
  }

  /**
   * lookupIn with `dir` pinned as `dfd` by the caller; the lock not held. A name that is not
   * there (or cannot be opened) is a negative errno, not a throw: a negative LOOKUP is a hot
   * path, and an exception unwinding through the callers' finally blocks cost a microsecond.
   */
  private lookupAt(dir: PassthroughNode, dfd: number, name: string, probe: boolean): Entry | number {
    if (name === "." || (name === ".." && dir.id === 1)) {
      // The kernel resolves these itself; never let ".." climb out of the source.
      check(stat.statFd(dfd));
      const attr = stat.attr();
      this.lock();
      dir.nlookup++;
      this.unlock();
      return { ino: dir.id, attr };
    }
    if (probe && name !== "..") {
      const rc = stat.statAt(dfd, name);
      if (rc < 0) return rc;
      this.lock();
      try {
        const n = this.table.find(stat.dev(), stat.ino());
        if (n && n.fd >= 0 && !staleFor(n, stat.mode())) {
          const attr = stat.attr();
          this.setLink(n, dir, name);
          this.fds.fd(n); // most recently used
          n.mode = attr.mode;
          n.nlookup++;
          return { ino: n.id, attr };
        }
      } finally {
        this.unlock();
      }
    }
    // openat on the directory's descriptor: no walk through /proc/self/fd.
    const p = libc.setName(0, name);
    const fd = p ? this.openatOut("lookup", dfd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) : -libc.ENAMETOOLONG;
    if (fd < 0) return fd;
    const rc = stat.statFd(fd);
    if (rc < 0) {
      closeQuiet(fd);
      return rc;
    }
    // Find or create the node under the lock. Another thread may have adopted the same inode
    // since the statx: adopt finds it then, and closes this descriptor.
    this.lock();
    try {
      return this.adopt(fd, name === ".." ? null : dir, name);
    } finally {
      this.unlock();
    }
  }

  // ---- threads (copies mode) ----------------------------------------------------------------
  // The node table, the directory store and the descriptor cache's LRU are shared by every
  // thread under one mutex (passthrough/shared.ts). It is held around operations on that state
  // only (find or create a node by (st_dev, st_ino), lookup counts, links, a node's descriptor),
  // never around a backing syscall, as libfuse's passthrough_hp does: the syscall (statx,
  // openat, unlinkat… on the parent's O_PATH descriptor) runs first, then the table is updated
  // under the lock. A slow backing filesystem then holds up the caller only.
  //
  // What that opens, and why it is safe:
  // - A descriptor used outside the lock is pinned (grab/pin) under it, and pins are shared
  //   (a slot word): eviction skips a pinned node, an early close (deleted file) or a FORGET's
  //   close waits for the last unpin (dropPending), so no thread closes a descriptor another is
  //   using mid-syscall, and its number is never handed to another file meanwhile.
  // - A pinned or held node never leaves the table (maybeFree), so its slot is not reused for
  //   another inode under a request that still refers to it; the last letGo frees it. The
  //   kernel keeps a node it sends a request for (it holds the inode): FORGET cannot free it
  //   before the request is answered anyway, but a victim of unlink is ours only by (dev, ino).
  // - LOOKUP racing FORGET of the same inode: both under the lock, in either order — either the
  //   lookup finds the node and adds a reference before the FORGET takes its own back, or the
  //   FORGET freed it and the lookup makes a new node (a new id), as in passthrough_hp.
  // - Two threads adopting the same new inode: the second finds the first's node under the
  //   lock and closes its own descriptor (FdCache.adopt).
  // - Name operations in one directory (CREATE, MKDIR, UNLINK, RENAME…) come one at a time from
  //   the kernel (it holds the directory's i_rwsem; LOOKUP shares it): a lookup never races an
  //   unlink of the same name through the mount.
  // - OPEN racing the UNLINK of the file's last link (another directory lock): OPEN counts its
  //   handle under the lock before its backing open, so the unlink keeps the node's descriptor
  //   (victimOf, settleVictim) as if the open had come first; a failed open gives it back
  //   (dropOpen) and settles the node then.
  // - The closes of retired descriptors (an O_PATH close may be the last reference of a deleted
  //   inode: backing work) run after the lock is released (FdCache.closeLater).
  // Still under the lock (rare): re-opening an evicted node by file handle and evicting when
  // over the budget or out of descriptors (FdCache.fd/shedSome), and killPriv.
  // One thread: no mutex; lock/unlock do nothing, pins are plain fields.

  private lock(): void {
    if (this.mutex !== null) this.mutex.lock();
  }

  private unlock(): void {
    const m = this.mutex;
    if (m === null) return;
    m.unlock();
    if (!m.held) this.fds.flushCloses();
  }

  /** Node `id`, pinned (its `fd` open until ungrab). live: ENOENT once its file was deleted. */
  private grab(id: number, live: boolean): PassthroughNode {
    // One thread: no try/finally here (it keeps this small function inlinable on the hot path).
    return this.mutex === null ? this.pinNode(id, live) : this.grabLocked(id, live);
  }

  private grabLocked(id: number, live: boolean): PassthroughNode {
    this.lock();
    try {
      return this.pinNode(id, live);
    } finally {
      this.unlock();
    }
  }

  private pinNode(id: number, live: boolean): PassthroughNode {
    const n = this.node(id);
    if (live && n.gone) fail(Errno.ENOENT);
    this.fds.pin(n);
    return n;
  }

  private ungrab(n: PassthroughNode): void {
    if (this.mutex === null) this.letGo(n);
    else this.ungrabLocked(n);
  }

  private ungrabLocked(n: PassthroughNode): void {
    this.lock();
    try {
      this.letGo(n);
    } finally {
      this.unlock();
    }
  }

  /** Give back a pin or hold (lock held); the node may leave the table now. */
  private letGo(n: PassthroughNode): void {
    this.fds.unpin(n);
    if (n.pins === 0) this.maybeFree(n);
  }

  /** openat outside the lock; out of descriptors, the cache sheds (under the lock) and it tries once more. */
  private openatOut(what: string, dfd: number, p: number, flags: number, mode: number): number {
    const fd = libc.openatRaw(dfd, p, flags, mode);
    if (fd !== -Errno.EMFILE && fd !== -Errno.ENFILE) return fd;
    this.lock();
    try {
      return this.fds.openat(what, dfd, p, flags, mode);
    } finally {
      this.unlock();
    }
  }

  /** FdCache.reopenFd outside the lock, as openatOut. */
  private reopenOut(what: string, fd: number, flags: number): number {
    const r = libc.reopenRaw(fd, flags);
    if (r !== -Errno.EMFILE && r !== -Errno.ENFILE) return r;
    this.lock();
    try {
      return this.fds.reopenFd(what, fd, flags);
    } finally {
      this.unlock();
    }
  }

  protected log(key: string, line: string): void {
    if (this.logged.has(key)) return;
    this.logged.add(key);
    this.options.log(line);
  }

  /** After creating `name` in `dir` on behalf of ctx: give it to the caller (daemon runs as root). */
  protected applyOwner(ctx: RequestContext, dir: PassthroughNode, name: string, fd: number, dfd = -1): void {
    if (!this.options.emulateOwnership || processUid !== 0) return;
    if (ctx.uid === processUid && ctx.gid === processGid) return;
    // In a set-group-ID directory the new file already has the directory's group.
    const gid = dir.mode & S_ISGID ? -1 : ctx.gid;
    if (fd >= 0) libc.fchownFd(fd, ctx.uid, gid);
    else libc.lchownAt(dfd, name, ctx.uid, gid);
  }

  // ---- InodeFS: lifecycle -----------------------------------------------------------------

  init(info: InitInfo): void {
    this.info = info;
    // Modes arrive with the caller's umask already applied (no FUSE_DONT_MASK); the daemon's
    // own umask must not strip more bits (libfuse's passthrough examples do the same).
    process.umask(0);
    this.writebackCache = info.grantedNames.includes("WRITEBACK_CACHE");
    if (info.nodeAttrs) {
      // From here on the shim answers GETATTR of every node with a descriptor (nativeGetattr).
      this.fds.nodeAttrs = info.nodeAttrs;
      info.nodeAttrs.set(1, this.fds.root.fd);
    }
    if (this.options.kernelPassthrough) {
      if (info.grantedNames.includes("PASSTHROUGH")) this.kernelPassthrough = true;
      else {
        const why = this.writebackCache ? "it cannot be combined with --writeback-cache" : "the kernel did not grant FUSE_PASSTHROUGH";
        this.log("pt-grant", `fuse-uring: passthrough: kernel passthrough unavailable (${why}); serving file data through the daemon`);
      }
    }
  }

  destroy(): void {
    // A worker's copy leaves the shared state to the main thread's instance (the other copies
    // may still be answering).
    if (this.isCopy) return;
    for (const fd of this.dirs.fds()) closeQuiet(fd);
    this.dirs.clear();
    for (const n of this.table.values()) {
      if (n.backingId && this.info) {
        try {
          this.info.backingClose(n.backingId);
        } catch {}
        n.backingId = 0;
      }
    }
    this.fds.closeAll(this.table.values());
    this.table.clear();
  }

  // ---- InodeFS: names ---------------------------------------------------------------------
  // Return types say "or a Promise" so that a subclass may override with an async method.
  // Copies mode: the lock is taken around table work only ("threads" above); forget is
  // PASSTHROUGH_LOCKED (table work only).

  /** A missing name is `null`, not a throw: most LOOKUPs before a create are misses. */
  lookup(_ctx: RequestContext, parent: number, name: string): Entry | null | Promise<Entry | null> {
    const dir = this.grab(parent, false);
    let r: Entry | number;
    try {
      r = this.lookupAt(dir, dir.fd, name, true);
    } finally {
      this.ungrab(dir);
    }
    return r === -Errno.ENOENT ? null : entryOrFail(r);
  }

  forget(ino: number, nlookup: number): void {
    const n = this.table.get(ino);
    if (n) this.unref(n, nlookup);
  }

  getattr(_ctx: RequestContext, ino: number): Attr | Promise<Attr> {
    if (this.mutex === null) return this.getattrOne(ino);
    this.lock();
    let n: PassthroughNode, fd: number;
    try {
      n = this.node(ino);
      const deleted = n.deletedAttr;
      if (deleted) return deleted;
      fd = this.fds.pin(n);
    } finally {
      this.unlock();
    }
    const rc = stat.statFd(fd);
    const a = rc < 0 ? null : stat.attr();
    this.unpinWithMode(n, a);
    if (!a) fail(-rc);
    return a;
  }

  /** GETATTR on one thread: nothing can close the descriptor between fd() and the statx, so no pin. */
  private getattrOne(ino: number): Attr {
    const n = this.node(ino);
    const deleted = n.deletedAttr;
    if (deleted) return deleted;
    check(stat.statFd(this.fds.fd(n)));
    const a = stat.attr();
    n.mode = a.mode;
    return a;
  }

  setattr(_ctx: RequestContext, ino: number, c: SetattrChanges): Attr | Promise<Attr> {
    const n = this.grab(ino, true);
    let a: Attr | null = null;
    try {
      const fd = n.fd; // pinned: no thread closes it before ungrab
      const isLink = (n.mode & S_IFMT) === S_IFLNK;
      if (c.mode !== undefined) {
        if (isLink) fail(Errno.EOPNOTSUPP);
        check(libc.chmodFdRaw(fd, c.mode & 0o7777));
      }
      if (c.uid !== undefined || c.gid !== undefined) libc.fchownFd(fd, c.uid ?? -1, c.gid ?? -1);
      if (c.size !== undefined) check(c.fh !== undefined ? libc.ftruncateRaw(c.fh, c.size) : libc.truncateFdRaw(fd, c.size));
      if (c.atime !== undefined || c.mtime !== undefined) {
        const [as, an] = c.atime === undefined ? [0, libc.UTIME_OMIT] : c.atime === "now" ? [0, libc.UTIME_NOW] : c.atime;
        const [ms, mn] = c.mtime === undefined ? [0, libc.UTIME_OMIT] : c.mtime === "now" ? [0, libc.UTIME_NOW] : c.mtime;
        libc.utimensFd(fd, as, an, ms, mn);
      }
      check(stat.statFd(fd));
      if (c.valid & FATTR_KILL_SUIDGID && c.mode === undefined && !isLink) {
        const mode = stat.mode();
        const kill = (mode & S_ISUID) | (mode & S_ISGID && mode & S_IXGRP ? S_ISGID : 0);
        if (kill) {
          check(libc.chmodFdRaw(fd, mode & 0o7777 & ~kill));
          check(stat.statFd(fd));
        }
      }
      a = stat.attr();
      return a;
    } finally {
      this.unpinWithMode(n, a);
    }
  }

  /** After a stat outside the lock: record the mode it saw (if any) and give the pin back. */
  private unpinWithMode(n: PassthroughNode, a: Attr | null): void {
    this.lock();
    try {
      if (a) n.mode = a.mode;
      this.letGo(n);
    } finally {
      this.unlock();
    }
  }

  readlink(_ctx: RequestContext, ino: number): Uint8Array {
    const n = this.grab(ino, true);
    try {
      return libc.readlinkFd(n.fd);
    } finally {
      this.ungrab(n);
    }
  }

  symlink(ctx: RequestContext, parent: number, name: string, target: string): Entry | Promise<Entry> {
    const dir = this.grab(parent, false);
    try {
      check(libc.symlinkatRaw(target, dir.fd, name));
      this.applyOwner(ctx, dir, name, -1, dir.fd);
      return entryOrFail(this.lookupAt(dir, dir.fd, name, false));
    } finally {
      this.ungrab(dir);
    }
  }

  mknod(ctx: RequestContext, parent: number, name: string, mode: number, rdev: number): Entry | Promise<Entry> {
    const dir = this.grab(parent, false);
    try {
      check(libc.mknodatRaw(dir.fd, name, mode, rdev));
      this.applyOwner(ctx, dir, name, -1, dir.fd);
      return entryOrFail(this.lookupAt(dir, dir.fd, name, false));
    } finally {
      this.ungrab(dir);
    }
  }

  mkdir(ctx: RequestContext, parent: number, name: string, mode: number): Entry | Promise<Entry> {
    const dir = this.grab(parent, false);
    try {
      check(libc.mkdiratRaw(dir.fd, name, mode & 0o7777));
      this.applyOwner(ctx, dir, name, -1, dir.fd);
      return entryOrFail(this.lookupAt(dir, dir.fd, name, false));
    } finally {
      this.ungrab(dir);
    }
  }

  unlink(_ctx: RequestContext, parent: number, name: string): void | Promise<void> {
    this.removeName(parent, name, 0);
  }

  rmdir(_ctx: RequestContext, parent: number, name: string): void | Promise<void> {
    // settleVictim forgets its (st_dev, st_ino) now: an evicted node does not keep the inode
    // alive, and its number may be handed to the next new file.
    this.removeName(parent, name, AT_REMOVEDIR);
  }

  /** UNLINK (flags 0) and RMDIR (AT_REMOVEDIR) of `name` in node `parent`. */
  private removeName(parent: number, name: string, flags: number): void {
    const dir = this.grab(parent, false);
    let victim: PassthroughNode | undefined;
    try {
      victim = this.victimOf(dir.fd, name);
      check(libc.unlinkatRaw(dir.fd, name, flags));
      if (victim) {
        this.lock();
        this.dropLink(victim, dir, name);
        this.unlock();
      }
      this.settleVictim(victim);
    } finally {
      this.lock();
      try {
        if (victim) this.letGo(victim);
        this.letGo(dir);
      } finally {
        this.unlock();
      }
    }
  }

  rename(_ctx: RequestContext, parent: number, name: string, newParent: number, newName: string, flags: number): void | Promise<void> {
    const from = this.grab(parent, false);
    let to: PassthroughNode | undefined, moved: PassthroughNode | undefined, other: PassthroughNode | undefined;
    try {
      to = this.grab(newParent, false);
      // The moved node (and the one renamed over or exchanged) keep their paths current.
      moved = this.victimOf(from.fd, name);
      // flags 0: a file renamed over loses a link. RENAME_EXCHANGE: the other one moves.
      if (flags === 0 || flags & RENAME_EXCHANGE) other = this.victimOf(to.fd, newName);
      check(libc.renameat2Raw(from.fd, name, to.fd, newName, flags));
      this.lock();
      try {
        if (flags === 0) {
          if (other !== moved) this.dropLink(other, to, newName);
          if (moved) this.setLink(moved, to, newName);
        } else {
          if (moved) this.setLink(moved, to, newName);
          if (other && other !== moved) this.setLink(other, from, name);
        }
      } finally {
        this.unlock();
      }
      if (flags === 0 && other !== moved) this.settleVictim(other);
    } finally {
      this.lock();
      try {
        if (other) this.letGo(other);
        if (moved) this.letGo(moved);
        if (to) this.letGo(to);
        this.letGo(from);
      } finally {
        this.unlock();
      }
    }
  }

  link(_ctx: RequestContext, ino: number, newParent: number, newName: string): Entry | Promise<Entry> {
    const n = this.grab(ino, true);
    let dir: PassthroughNode | undefined;
    try {
      dir = this.grab(newParent, false);
      libc.linkFd(n.fd, dir.fd, newName);
      return entryOrFail(this.lookupAt(dir, dir.fd, newName, true));
    } finally {
      this.lock();
      try {
        if (dir) this.letGo(dir);
        this.letGo(n);
      } finally {
        this.unlock();
      }
    }
  }

  // ---- InodeFS: files ---------------------------------------------------------------------

  /** Flags for the backing open(2) from the flags the kernel sent. */
  protected backingFlags(flags: number): number {
    // O_NOFOLLOW would refuse the /proc magic link; creation flags are handled by the caller.
    let f = flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECT);
    if (this.writebackCache) {
      // The kernel reads pages of write-only files and does appends itself.
      if ((f & O_ACCMODE) === O_WRONLY) f = (f & ~O_ACCMODE) | O_RDWR;
      f &= ~O_APPEND;
    }
    return f | O_CLOEXEC;
  }

  /** The open reply for a new handle `fd` of node `n`, already counted in n.opens (registers kernel passthrough if on). Lock held. */
  protected openReply(n: PassthroughNode, fd: number): OpenReply {
    // The shim serves READ/WRITE/FSYNC of this fd itself (native data plane) unless a write
    // must clear set-user/group-ID bits, which needs the JS write path; and FLUSH, which here is
    // close(dup(fd)) (flush below) unless no descriptor is free for the dup.
    if (!this.kernelPassthrough || n.noPassthrough || (n.mode & S_IFMT) !== S_IFREG || !this.info) return this.servedReply(n, fd);
    if (!n.backingId) {
      try {
        n.backingId = this.info.backingOpen(fd);
      } catch (e) {
        const errno = errnoOf(e);
        if (errno === Errno.EPERM) {
          this.kernelPassthrough = false;
          this.log("pt-eperm", "fuse-uring: passthrough: kernel passthrough needs CAP_SYS_ADMIN (FUSE_DEV_IOC_BACKING_OPEN: EPERM); serving file data through the daemon");
          return this.servedReply(n, fd);
        } else {
          n.noPassthrough = true;
          this.log(`pt-${errno}`, `fuse-uring: passthrough: FUSE_DEV_IOC_BACKING_OPEN failed (${e instanceof Error ? e.message : String(e)}); such files are served through the daemon`);
        }
        return { fh: fd };
      }
    }
    return { fh: fd, backingId: n.backingId };
  }

  /** A handle the shim serves from `fd` (READ/WRITE/FSYNC, FLUSH, RELEASE), unless writes must
   *  clear set-user/group-ID bits (the JS write path does that). */
  private servedReply(n: PassthroughNode, fd: number): OpenReply {
    if (n.mode & (S_ISUID | S_ISGID)) return { fh: fd };
    return { fh: fd, backingFd: fd, backingFlush: this.nativeFlush, backingRelease: this.nativeRelease };
  }

  open(_ctx: RequestContext, ino: number, flags: number): OpenReply | Promise<OpenReply> {
    // A node whose file was deleted (and its descriptor closed) answers ESTALE, not ENOENT:
    // open(2) then walks the path once more, revalidating every dentry (do_filp_open retries
    // ESTALE with LOOKUP_REVAL), and opens or — with O_CREAT — creates what is there now, as on
    // a local filesystem. ENOENT here failed open(O_CREAT) racing an unlink of the same name.
    this.lock();
    let n: PassthroughNode, pfd: number;
    try {
      n = this.node(ino);
      if (n.gone) fail(Errno.ESTALE);
      pfd = this.fds.pin(n);
      // Counted before the backing open: an unlink of its last link on another thread meanwhile
      // keeps the node's descriptor, as if this open had come first (dropOpen if it fails).
      n.opens++;
    } finally {
      this.unlock();
    }
    // open("/proc/self/fd/N") of the node's descriptor (pinned): a real descriptor. May block
    // (a FIFO, a slow backing filesystem): not under the lock.
    const fd = this.reopenOut("open", pfd, this.backingFlags(flags));
    let settle = false;
    this.lock();
    try {
      if (fd >= 0) return this.openReply(n, fd);
      settle = this.dropOpen(n);
      if (settle) this.fds.hold(n);
    } finally {
      this.letGo(n);
      this.unlock();
    }
    this.settleHeld(n, settle);
    return fail(-fd);
  }

  /** One handle of n is gone (lock held): whether n lost a link while open (settleVictim it now). */
  private dropOpen(n: PassthroughNode): boolean {
    n.opens--;
    if (n.opens > 0) return false;
    n.opens = 0;
    if (n.backingId) {
      const id = n.backingId;
      n.backingId = 0;
      try {
        this.info?.backingClose(id);
      } catch {}
    }
    const settle = n.unlinked;
    n.unlinked = false;
    this.maybeFree(n);
    return settle;
  }

  /** settleVictim(n) if `settle`, then let go of the hold taken for it (lock not held). */
  private settleHeld(n: PassthroughNode, settle: boolean): void {
    if (!settle) return;
    try {
      this.settleVictim(n);
    } finally {
      this.ungrab(n);
    }
  }

  create(ctx: RequestContext, parent: number, name: string, mode: number, _umask: number, flags: number): CreateReply | Promise<CreateReply> {
    const dir = this.grab(parent, false);
    const dfd = dir.fd;
    const base = this.backingFlags(flags) | (flags & O_NOFOLLOW);
    let fd = -1;
    try {
      const p = libc.setName(0, name);
      if (!p) fail(libc.ENAMETOOLONG);
      let created = true;
      fd = this.openatOut("create", dfd, p, base | O_CREAT | O_EXCL, mode & 0o7777);
      if (fd === -Errno.EEXIST && !(flags & O_EXCL)) {
        created = false;
        fd = this.openatOut("create", dfd, p, base, 0);
      }
      check(fd);
      if (created) this.applyOwner(ctx, dir, name, fd);
      check(stat.statFd(fd));
      if (!created) {
        // An existing file: most likely a node we know.
        this.lock();
        try {
          const node = this.table.find(stat.dev(), stat.ino());
          if (node && !staleFor(node, stat.mode())) {
            const attr = stat.attr();
            node.nlookup++;
            node.mode = attr.mode;
            this.setLink(node, dir, name);
            node.opens++;
            return { entry: { ino: node.id, attr }, open: this.openReply(node, fd) };
          }
        } finally {
          this.unlock();
        }
      }
      const pfd = this.pathFdOf(dfd, name, fd);
      return this.adoptOpen(pfd, dir, name, fd);
    } catch (e) {
      if (fd >= 0) closeQuiet(fd);
      throw e;
    } finally {
      this.ungrab(dir);
    }
  }

  /**
   * O_TMPFILE: an unnamed file in the backing directory, open; the node has no name until a
   * LINK (linkat through /proc/self/fd, which O_TMPFILE files without O_EXCL allow) gives it one.
   */
  tmpfile(ctx: RequestContext, parent: number, mode: number, _umask: number, flags: number): CreateReply {
    const dir = this.grab(parent, false);
    const base = this.backingFlags(flags) & ~(O_TMPFILE_BIT | O_DIRECTORY);
    let fd = -1;
    try {
      const p = libc.setName(0, ".");
      fd = check(this.openatOut("tmpfile", dir.fd, p, base | O_TMPFILE_BIT | O_DIRECTORY, mode & 0o7777));
      this.applyOwner(ctx, dir, "", fd);
      const pfd = check(this.reopenOut("tmpfile", fd, O_PATH | O_CLOEXEC));
      check(stat.statFd(fd)); // adopt reads the last statx
      return this.adoptOpen(pfd, null, "", fd);
    } catch (e) {
      if (fd >= 0) closeQuiet(fd);
      throw e;
    } finally {
      this.ungrab(dir);
    }
  }

  /** A created file's node (adopt `pfd`, the last statx) and its open reply for `fd`, one more open. */
  private adoptOpen(pfd: number, dir: PassthroughNode | null, name: string, fd: number): CreateReply {
    this.lock();
    try {
      const entry = this.adopt(pfd, dir, name);
      const node = this.table.get(entry.ino)!;
      node.opens++;
      return { entry, open: this.openReply(node, fd) };
    } finally {
      this.unlock();
    }
  }

  /**
   * An O_PATH descriptor of the file open as `fd`, just created as `name` in `dfd`. By name
   * (openat: 3.6 µs with its close, here) and checked to be the same inode, else through
   * /proc/self/fd/N (7.6 µs: procfs path walk), which cannot find another file. The last statx
   * must be `fd`'s; on return it is that inode's again (adopt reads it).
   */
  private pathFdOf(dfd: number, name: string, fd: number): number {
    const dev = stat.dev(), ino = stat.ino();
    const p = libc.setName(0, name);
    let pfd = p ? this.openatOut("create", dfd, p, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) : -1;
    if (pfd >= 0) {
      if (stat.statFd(pfd) === 0 && stat.dev() === dev && stat.ino() === ino) return pfd;
      closeQuiet(pfd); // the name is another file's already
    }
    pfd = check(this.reopenOut("create", fd, O_PATH | O_CLOEXEC));
    check(stat.statFd(fd));
    return pfd;
  }

  read(ctx: RequestContext, _ino: number, fh: number, offset: number, size: number): Promise<number> {
    return ctx.backingRead(fh, offset, size);
  }

  write(ctx: RequestContext, ino: number, fh: number, offset: number, data: Uint8Array, writeFlags: number): Promise<number> {
    // The backing write is started before anything is awaited (it joins this doorbell batch).
    const done = ctx.backingWrite(fh, offset, data.length);
    if (writeFlags & FUSE_WRITE_KILL_SUIDGID) {
      const n = this.table.get(ino);
      if (n && n.mode & (S_ISUID | S_ISGID)) {
        return done.then((count) => {
          this.killPriv(ino);
          return count;
        });
      }
    }
    return done;
  }

  /** HANDLE_KILLPRIV_V2: an unprivileged write clears set-user-ID (and set-group-ID if g+x). */
  private killPriv(ino: number): void {
    // By id, looked up again: in copies mode this runs under the lock, after the write.
    const n = this.table.get(ino);
    if (!n || n.gone) return;
    const fd = this.fds.fd(n);
    check(stat.statFd(fd));
    const mode = stat.mode();
    const kill = (mode & S_ISUID) | (mode & S_ISGID && mode & S_IXGRP ? S_ISGID : 0);
    if (kill) check(libc.chmodFdRaw(fd, mode & 0o7777 & ~kill));
    n.mode = mode & ~kill;
  }

  flush(_ctx: RequestContext, _ino: number, fh: number): void {
    // close(dup(fh)): what close(2) of the caller's file does to the backing file.
    // Only the file handle is used: in copies mode no lock, unless the descriptor cache must
    // shed (the close of a backing file on NFS or FUSE may take a while: others go on meanwhile).
    let d = libc.dupRaw(fh);
    if (d === -Errno.EMFILE || d === -Errno.ENFILE) {
      this.lock();
      try {
        if (this.fds.makeRoom(d)) d = libc.dupRaw(fh);
        if (d === -Errno.EMFILE || d === -Errno.ENFILE) {
          // No spare descriptor. The caller's close(2) must not fail: the data is already in the
          // backing file (every WRITE is a pwrite), only the backing filesystem's close-time flush
          // (NFS, FUSE) is skipped.
          this.fds.shortageOf(-d, "flush");
          return;
        }
      } finally {
        this.unlock();
      }
    }
    check(d);
    check(libc.closeRaw(d));
  }

  release(_ctx: RequestContext, ino: number, fh: number): void | Promise<void> {
    // The close first, outside the lock: the last close of a backing file may flush (NFS, FUSE).
    // n.opens still counts it meanwhile, so an unlink on another thread keeps n's descriptor.
    const rc = libc.closeRaw(fh);
    this.releaseClosed(ino);
    check(rc);
  }

  /**
   * The handle's descriptor is closed (by release, or by the shim: OpenReply.backingRelease):
   * the node loses one open; its last may free the node or settle a deleted file. Until this
   * runs the node counts the handle as open, as during release's close.
   */
  releaseClosed(ino: number): void {
    let settle = false;
    this.lock();
    const n = this.table.get(ino);
    try {
      if (n) {
        settle = this.dropOpen(n);
        if (settle) this.fds.hold(n);
      }
    } finally {
      this.unlock();
    }
    if (n) this.settleHeld(n, settle);
  }

  async fsync(_ctx: RequestContext, _ino: number, fh: number, datasync: boolean): Promise<void> {
    await new Promise<void>((res, rej) => (datasync ? fsFdatasync : fsFsync)(fh, voidCb(res, rej))).catch((e) => Promise.reject(toFuse(e)));
  }


  fallocate(_ctx: RequestContext, _ino: number, fh: number, offset: number, length: number, mode: number): void {
    libc.fallocate(fh, mode, offset, length);
  }

  lseek(_ctx: RequestContext, _ino: number, fh: number, offset: number, whence: number): number {
    return libc.lseek(fh, offset, whence);
  }

  copyFileRange(_ctx: RequestContext, _inoIn: number, fhIn: number, offIn: number, _inoOut: number, fhOut: number, offOut: number, len: number, flags: number): number {
    return libc.copyFileRange(fhIn, offIn, fhOut, offOut, Math.min(len, COPY_CHUNK), flags);
  }


  opendir(_ctx: RequestContext, ino: number): OpenReply | Promise<OpenReply> {
    const n = this.grab(ino, true);
    let fd: number;
    try {
      fd = check(this.reopenOut("opendir", n.fd, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    } finally {
      this.ungrab(n);
    }
    this.lock();
    try {
      this.dirs.open(fd);
    } catch (e) {
      closeQuiet(fd);
      throw e;
    } finally {
      this.unlock();
    }
    return { fh: fd };
  }

  /** Read the whole listing of an open directory (from its start) with getdents64, into the store (under the lock). */
  private snapshot(fd: number): void {
    libc.lseek(fd, 0, 0);
    const names: string[] = [], inos: number[] = [], types: number[] = [];
    const buf = this.direntBuf;
    for (;;) {
      const len = libc.getdents64(fd, buf);
      if (len === 0) break;
      let pos = 0;
      while (pos < len) {
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        const ino = Number(buf.readBigUInt64LE(pos));
        const reclen = buf.readUInt16LE(pos + 16);
        const type = buf[pos + 18]!;
        let end = buf.indexOf(0, pos + 19);
        if (end < 0 || end > pos + reclen) end = pos + reclen;
        names.push(decodeName(buf, pos + 19, end));
        inos.push(ino);
        types.push(type);
        pos += reclen;
      }
    }
    this.lock();
    try {
      this.dirs.store(fd, names, inos, types);
    } finally {
      this.unlock();
    }
  }

  readdir(_ctx: RequestContext, ino: number, fh: number, offset: number, filler: DirFiller): void | Promise<void> {
    // The listing lives in the directory store (shared arena in copies mode, compacted under the
    // lock by any thread): read under the lock; getdents64 and the entries' lookups outside it.
    // One stream's READDIRs come one at a time (the kernel's f_pos lock).
    this.lock();
    let loaded: boolean;
    try {
      const h = this.dirs.get(fh);
      if (!h) fail(Errno.EBADF);
      loaded = h.loaded;
    } finally {
      this.unlock();
    }
    if (offset === 0 || !loaded) this.snapshot(fh);
    if (!filler.plus) {
      this.lock();
      try {
        const h = this.dirs.get(fh)!;
        const count = h.count;
        const e = this.scratchEntry, a = this.scratchAttr;
        for (let i = offset; i < count; i++) {
          a.ino = h.ino(i);
          a.mode = DT_TO_MODE[h.type(i)] ?? 0;
          if (!filler.add(h.name(i), i + 1, e)) return;
        }
      } finally {
        this.unlock();
      }
      return;
    }
    let dir: PassthroughNode | null = null;
    try {
      dir = this.grab(ino, false);
    } catch (e) {
      // Deleted directory: its entries (none on a local filesystem) are skipped below.
      if (!isErrno(e, Errno.ENOENT)) throw e;
    }
    try {
      let added = false;
      for (let i = offset; ; i++) {
        let name: string, dino: number, known: boolean;
        this.lock();
        try {
          const h = this.dirs.get(fh);
          if (!h || i >= h.count) return;
          name = h.name(i);
          dino = h.ino(i);
          // Probe by name first only if some node has this inode number (d_ino): a cold
          // directory's entries are all new, and the probe's statx would be wasted on them.
          known = this.table.knownIno(dino);
        } finally {
          this.unlock();
        }
        let r: Entry | null = null;
        if (name !== "." && name !== "..") {
          if (!dir) continue; // removed with its directory
          let got: Entry | number;
          try {
            got = this.lookupAt(dir, dir.fd, name, known);
          } catch (e) {
            if (added) return; // as below
            throw e;
          }
          if (got === -Errno.ENOENT) continue; // removed since the snapshot
          if (typeof got === "number") {
            // Entries already added carry lookup references: send them; the next call resumes
            // at this entry and reports the error then.
            if (added) return;
            fail(-got);
          }
          r = got;
        }
        let accepted: boolean;
        if (r === null) {
          const a = this.scratchAttr;
          a.ino = dino;
          a.mode = S_IFDIR;
          accepted = filler.add(name, i + 1, this.scratchEntry);
        } else accepted = filler.add(name, i + 1, r);
        if (!accepted) {
          // Not sent: give its lookup reference back.
          if (r) {
            this.lock();
            try {
              const n = this.table.get(r.ino);
              if (n) this.unref(n, 1);
            } finally {
              this.unlock();
            }
          }
          return;
        }
        added = true;
      }
    } finally {
      if (dir) this.ungrab(dir);
    }
  }

  releasedir(_ctx: RequestContext, _ino: number, fh: number): void {
    this.lock();
    let open: boolean;
    try {
      open = this.dirs.close(fh);
    } finally {
      this.unlock();
    }
    if (open) closeQuiet(fh); // after: the number may be another directory's handle from now on
  }

  fsyncdir(_ctx: RequestContext, _ino: number, fh: number, datasync: boolean): Promise<void> {
    return this.fsync(_ctx, _ino, fh, datasync);
  }

  // ---- InodeFS: the rest ------------------------------------------------------------------

  statfs(_ctx: RequestContext, ino: number): Statfs {
    const n = this.grab(ino, true);
    let s: ReturnType<typeof libc.fstatfs>;
    try {
      s = libc.fstatfs(n.fd);
    } finally {
      this.ungrab(n);
    }
    return {
      blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree,
      bsize: s.bsize, namelen: s.namelen, frsize: s.frsize || s.bsize,
    };
  }

  /**
   * xattr calls go through the path /proc/self/fd/N of the node's descriptor, pinned until
   * ungrab; a symlink's own xattrs cannot be reached race-free.
   */
  private xattrNode(ino: number): PassthroughNode {
    const n = this.grab(ino, true);
    if ((n.mode & S_IFMT) === S_IFLNK) {
      this.ungrab(n);
      throw new FuseError("EOPNOTSUPP");
    }
    return n;
  }

  setxattr(_ctx: RequestContext, ino: number, name: string, value: Uint8Array, flags: number): void {
    const n = this.xattrNode(ino);
    try {
      libc.setxattr(procPath(n.fd), name, value, flags);
    } finally {
      this.ungrab(n);
    }
  }

  getxattr(_ctx: RequestContext, ino: number, name: string): Uint8Array {
    const n = this.xattrNode(ino);
    try {
      return libc.getxattr(procPath(n.fd), name);
    } finally {
      this.ungrab(n);
    }
  }

  listxattr(_ctx: RequestContext, ino: number): string[] {
    const n = this.xattrNode(ino);
    try {
      return libc.listxattr(procPath(n.fd));
    } finally {
      this.ungrab(n);
    }
  }

  removexattr(_ctx: RequestContext, ino: number, name: string): void {
    const n = this.xattrNode(ino);
    try {
      libc.removexattr(procPath(n.fd), name);
    } finally {
      this.ungrab(n);
    }
  }

  access(_ctx: RequestContext, ino: number, mask: number): void | Promise<void> {
    const n = this.grab(ino, true);
    try {
      check(libc.accessFdRaw(n.fd, mask));
    } finally {
      this.ungrab(n);
    }
  }
}

/** Mirror directory `source` (the CLI's `mount --passthrough SRC MNT [--kernel-passthrough]`). */
export function passthrough(source: string, options: { kernelPassthrough?: boolean } & PassthroughOptions = {}): PassthroughFS {
  return new PassthroughFS(source, options);
}
