// An in-memory filesystem with tmpfs-like POSIX behaviour, implementing the InodeFS interface.
//
// Files are sparse: data lives in 64 KiB chunks (Map<chunk index, page list>); a chunk holds the
// first `pages × 4096` bytes of its 64 KiB window (grows a page at a time on demand), so small
// files cost a page, and holes cost nothing. The pages are in SharedArrayBuffers
// (memfs-pages.ts), which is what lets `--workers N` run one copy of memfs per worker over one
// state (copies(), memfs-shared.ts). Invariant: every stored byte at or past the file
// size is zero, so growing a file never exposes old data.
//
// Directories keep entries in a Map (O(1) by name) plus a cookie-ordered list for readdir: each
// entry gets a monotonically increasing cookie ("." = 1, ".." = 2, entries from 3) and readdir
// resumes at the first live entry whose cookie is greater than the offset, so offsets stay valid
// across concurrent unlinks and renames.
//
// Lifetime: a node is freed when nlink == 0, its lookup count (references handed to the kernel)
// is 0 and no file handle is open on it. Node ids are never reused.

import { nameByteLength } from "../protocol/names.ts";
import { builtinCopyModule } from "./builtin-copies.ts";
import { createSharedLog, LOG_SIZE, Replicator, type SharedLog } from "./memfs-shared.ts";
import { FuseError, type ErrnoName } from "./errors.ts";
import type {
  Attr, CopiesPlan, CreateReply, DirFiller, Entry, InodeFS, OpenReply, RequestContext, SetattrChanges, Statfs,
} from "./types.ts";
import { S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK } from "./types.ts";
import { nowTimespec } from "./attr.ts";
import { PAGE, PageStore, SEG_PAGES, pageOffset } from "./memfs-pages.ts";
import { LOCK_FLOCK, LOCK_POSIX, LockTable, type FileLock } from "./locks.ts";
import { totalmem } from "node:os";

export interface MemFSOptions {
  /** Owner of the root directory (default: the process's uid/gid). */
  uid?: number;
  gid?: number;
  /** Permission bits of the root directory (default 0o755). */
  rootMode?: number;
  /** Capacity in bytes of file data (default: half the machine's RAM, like tmpfs). */
  maxBytes?: number;
  /** Maximum number of inodes, root included (default: RAM / 8 KiB, like tmpfs). */
  maxInodes?: number;
  /** copies(): size of the shared operation log (a power of two; default 32 MiB). For tests. */
  sharedLogBytes?: number;
}

export const CHUNK_SIZE = 65536;
/** Buffer#copy with any Uint8Array as the source (the bytes a WRITE handler is given). */
const bufferCopy = Buffer.prototype.copy as (this: Uint8Array, target: Uint8Array, targetStart: number, sourceStart: number, sourceEnd: number) => number;
const BOGO_DIRENT_SIZE = 20; // tmpfs reports a directory's size as 20 bytes per entry (+2 for . and ..)
const NAME_MAX = 255;
const PATH_MAX = 4096;
const XATTR_NAME_MAX = 255;
const XATTR_SIZE_MAX = 65536;
/** Largest file size: offsets must stay exact JS integers. */
export const MAX_FILE_SIZE = Number.MAX_SAFE_INTEGER;
const ROOT = 1;

const S_ISUID = 0o4000;
const S_ISGID = 0o2000;
const S_IXGRP = 0o010;

// open(2) flags (identical on x86_64 and aarch64).
const O_EXCL = 0o200;
const O_TRUNC = 0o1000;

const RENAME_NOREPLACE = 1;
const RENAME_EXCHANGE = 2;
const RENAME_WHITEOUT = 4;

const XATTR_CREATE = 1;
const XATTR_REPLACE = 2;

const FALLOC_FL_KEEP_SIZE = 1;
const FALLOC_FL_PUNCH_HOLE = 2;

const SEEK_DATA = 3;
const SEEK_HOLE = 4;

const FUSE_WRITE_KILL_SUIDGID = 1 << 2;
const FATTR_KILL_SUIDGID = 1 << 11;

const R_OK = 4;
const W_OK = 2;
const X_OK = 1;

// Which time stamps touch() sets.
const T_A = 1;
const T_M = 2;
const T_C = 4;

class DirEntry {
  live = true;
  constructor(readonly name: string, public node: Node, readonly cookie: number) {}
}

class Dir {
  readonly map = new Map<string, DirEntry>();
  /** Entries in cookie order; removed entries stay (live = false) until compaction. */
  list: DirEntry[] = [];
  dead = 0;
  nextCookie = 3;

  add(name: string, node: Node): DirEntry {
    const e = new DirEntry(name, node, this.nextCookie++);
    this.map.set(name, e);
    this.list.push(e);
    return e;
  }

  remove(name: string): DirEntry | undefined {
    const e = this.map.get(name);
    if (!e) return undefined;
    this.map.delete(name);
    e.live = false;
    this.dead++;
    if (this.dead > 32 && this.dead * 2 > this.list.length) {
      this.list = this.list.filter((x) => x.live);
      this.dead = 0;
    }
    return e;
  }

  /** Index in `list` of the first entry whose cookie is > `cookie`. */
  firstAfter(cookie: number): number {
    const list = this.list;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid]!.cookie <= cookie) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

class Node {
  rdev = 0;
  size = 0;
  atime = 0;
  atimeNsec = 0;
  mtime = 0;
  mtimeNsec = 0;
  ctime = 0;
  ctimeNsec = 0;
  /** Lookup references held by the kernel. */
  lookups = 0;
  /** Open file/dir handles. */
  opens = 0;
  /** Directories: the containing directory (root: null). */
  parent: Node | null = null;
  dir: Dir | null = null;
  chunks: Map<number, Chunk> | null = null;
  /** Bytes allocated in chunks. */
  allocated = 0;
  target: string | null = null;
  xattrs: Map<string, Uint8Array> | null = null;
  freed = false;

  constructor(
    /** Index of the node's time stamps in the shared time table (copies mode); reused after free. */
    readonly slot: number,
    readonly ino: number,
    public mode: number,
    public nlink: number,
    public uid: number,
    public gid: number,
  ) {}

  get isDir(): boolean {
    return (this.mode & S_IFMT) === S_IFDIR;
  }
  get isReg(): boolean {
    return (this.mode & S_IFMT) === S_IFREG;
  }
}

/** What copies() shares with the workers' copies (structured-cloneable). */
export interface MemShared {
  kind: "memfs-shared-v1";
  options: Required<MemFSOptions>;
  /** The root's mode, uid, gid, lookups and time stamps when the state became shared. */
  root: [number, number, number, number, number, number, number, number, number, number];
  log: SharedLog;
  segs: SharedArrayBuffer[];
  /** Every node's time stamps (TIME_WORDS f64 per slot), growable. */
  times: SharedArrayBuffer;
  /** The lock table (lib/fs/locks.ts), one for every copy. */
  locks?: SharedArrayBuffer;
}

/** Address space set aside for file data, at most (1 GiB segments): 1 TiB. */
const MAX_SEGMENTS = 1024;
/** readdirplus references one READDIR may hand out in copies mode (the kernel asks for a page: ~30). */
const MAX_PLUS = 1024;

// Log entry kinds (memfs-shared.ts frames them).
const OP_LOOKUP = 1;
const OP_FORGET = 2;
const OP_WRITE = 3;
const OP_OPEN = 5;
const OP_RELEASE = 6;
const OP_READDIR = 7;
const OP_JSON = 8;
const OP_CALL = 9;

/**
 * Operations that change nothing but time stamps, which live in the shared time table (written
 * by the executing copy): under the lock, after catching up, not logged.
 */
const READ_ONLY_OPS = ["getattr", "getxattr", "listxattr", "access", "statfs", "lseek", "flush", "fsync", "fsyncdir", "readlink"] as const;
/** Time table: atime s, ns, mtime s, ns, ctime s, ns per node slot, padded to 64 bytes (one cache line: two CPUs writing two files do not share a line). */
const TIME_WORDS = 8;
/** The time table grows by this many slots at a time. */
const TIME_GROW_SLOTS = 1 << 14;
const JSON_OPS = [
  "setattr", "symlink", "mknod", "mkdir", "unlink", "rmdir", "rename", "link", "create", "opendir",
  "setxattr", "removexattr", "fallocate", "copyFileRange", "tmpfile",
] as const;

/**
 * Binary log layout of the common metadata calls: after the method index and uid/gid, one field
 * per argument (after ctx): n = a number (f64), s = a name (u32 UTF-16 unit count, the units:
 * lossless for every string, names with raw bytes included; padded to 8 bytes).
 */
const CALL_SCHEMAS: Partial<Record<(typeof JSON_OPS)[number], string>> = {
  symlink: "nss", mknod: "nsnnn", mkdir: "nsnn", unlink: "ns", rmdir: "ns", rename: "nsnsn", link: "nns",
  create: "nsnnn", opendir: "nn", fallocate: "nnnnn", copyFileRange: "nnnnnnnn", tmpfile: "nnnn",
};
/** Longest string a binary call carries (longer ones go as JSON; they fail validation anyway). */
const CALL_MAX_UNITS = 8192;

/** Payload size of a call in binary, or -1 if an argument does not fit the schema. */
function callSize(schema: string, a: unknown[]): number {
  if (a.length !== schema.length) return -1;
  let size = 12;
  for (let i = 0; i < schema.length; i++) {
    const v = a[i];
    if (schema.charCodeAt(i) === 110 /* n */) {
      if (typeof v !== "number") return -1;
      size += 8;
    } else {
      if (typeof v !== "string" || v.length > CALL_MAX_UNITS) return -1;
      size += (4 + 2 * v.length + 7) & ~7;
    }
  }
  return size;
}

function encodeCall(dv: DataView, at: number, index: number, ctx: RequestContext, schema: string, a: unknown[]): void {
  dv.setUint32(at, index, true);
  dv.setUint32(at + 4, ctx?.uid ?? 0, true);
  dv.setUint32(at + 8, ctx?.gid ?? 0, true);
  at += 12;
  for (let i = 0; i < schema.length; i++) {
    const v = a[i];
    if (schema.charCodeAt(i) === 110 /* n */) {
      dv.setFloat64(at, v as number, true);
      at += 8;
    } else {
      const str = v as string;
      dv.setUint32(at, str.length, true);
      for (let k = 0; k < str.length; k++) dv.setUint16(at + 4 + 2 * k, str.charCodeAt(k), true);
      at += (4 + 2 * str.length + 7) & ~7;
    }
  }
}

/** The caller of a replayed operation (only uid/gid matter to memfs). */
const REPLAY_CTX = { uid: 0, gid: 0, pid: 0 } as unknown as RequestContext;
/** A replayed WRITE's data: only its length is used (the bytes are in the page store already). */
const REPLAY_DATA = { length: 0 };
const JSON_ENCODER = new TextEncoder();
const JSON_DECODER = new TextDecoder();

function encodeJsonOp(m: string, ctx: RequestContext, args: unknown[]): Uint8Array {
  const json = JSON.stringify([m, ctx?.uid ?? 0, ctx?.gid ?? 0, ...args], (_k, v: unknown) =>
    v instanceof Uint8Array ? { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") } : v,
  );
  return JSON_ENCODER.encode(json);
}

function reviveBytes(_k: string, v: unknown): unknown {
  if (v && typeof v === "object" && typeof (v as { $bytes?: unknown }).$bytes === "string") {
    return new Uint8Array(Buffer.from((v as { $bytes: string }).$bytes, "base64"));
  }
  return v;
}

/** A chunk: its pages, in order from the start of its 64 KiB window. */
type Chunk = number[];
type RegNode = Node & { chunks: Map<number, Chunk> };

interface Handle {
  node: Node;
  flags: number;
}

function fail(code: ErrnoName, message?: string): never {
  throw new FuseError(code, message);
}

function roundPage(n: number): number {
  return Math.ceil(n / PAGE) * PAGE;
}

/**
 * Whether name `s` is longer than `max` bytes. Names are bytes: U+DC80–U+DCFF stand for one raw
 * byte each (protocol/names.ts), so 255 bytes of 0xFF are 255, not 765.
 */
function tooLong(s: string, max: number): boolean {
  // Every UTF-16 unit encodes to at most 3 bytes.
  return s.length * 3 > max && nameByteLength(s) > max;
}

/** Validate a name looked up or removed in a directory. */
function checkName(name: string): void {
  if (name.length === 0) fail("ENOENT");
  if (tooLong(name, NAME_MAX)) fail("ENAMETOOLONG");
  if (name.indexOf("/") !== -1 || name.indexOf("\0") !== -1) fail("EINVAL", "name contains '/' or NUL");
}

export class MemFS implements InodeFS {
  readonly maxBytes: number;
  readonly maxInodes: number;
  private readonly nodes = new Map<number, Node>();
  private readonly handles = new Map<number, Handle>();
  private nextIno = ROOT + 1;
  private nextFh = 1;
  private used = 0;
  private inodeCount = 0;
  readonly root: Node;
  /** File data (memfs-pages.ts). */
  protected readonly store: PageStore;
  /** The current operation's time (now()); null: not read yet. */
  protected opTime: [number, number] | null = null;
  /** Replaying another copy's operation: bookkeeping only, the bytes are already in place. */
  protected replaying = false;
  /** The options this filesystem was made with, resolved (what a copy is made with). */
  protected readonly resolved: Required<MemFSOptions>;
  /** Shared state (copies()): every operation goes through the shared log. */
  protected rep: Replicator | null = null;
  private plan: CopiesPlan | null = null;
  /** readdirplus: the nodes that got a reference in this operation (logged). */
  protected plusRefs: number[] | null = null;
  /** A copy made by replica() (a worker's): `--workers` loads it as a replicable filesystem. */
  replicable?: boolean;
  /**
   * Copies mode: every node's time stamps, shared (TIME_WORDS per slot). The copy that executes
   * an operation writes the stamps it sets here (touch); every copy reads them before using a
   * node's times (syncTimes). So an operation that changes only bytes and time stamps — an
   * overwrite, a read's atime — needs no log entry, and no other copy replays it. Local fields
   * are a cache, refreshed under the lock before any use.
   */
  private times: Float64Array | null = null;
  private timesBuf: SharedArrayBuffer | null = null;
  /** Node slot allocator (replicated bookkeeping, like the page store's). */
  private readonly freeSlots: number[] = [];
  private slotHigh = 0;

  /** POSIX, OFD and flock locks (lib/fs/locks.ts): shared memory, the same table in every copy. */
  readonly locks: LockTable;
  /** O_TMPFILE nodes not linked yet: a LINK may give them their first name although nlink is 0. */
  private readonly linkable = new Set<number>();

  constructor(options: MemFSOptions = {}, shared?: SharedArrayBuffer[], locks?: SharedArrayBuffer) {
    this.locks = new LockTable(locks);
    const maxBytes = options.maxBytes ?? Math.floor(totalmem() / 2 / PAGE) * PAGE;
    const maxInodes = options.maxInodes ?? Math.max(1024, Math.floor(totalmem() / 8192));
    if (!(maxBytes >= 0) || !Number.isSafeInteger(maxBytes)) throw new RangeError("memfs: maxBytes must be a non-negative integer");
    if (!(maxInodes >= 1) || !Number.isSafeInteger(maxInodes)) throw new RangeError("memfs: maxInodes must be a positive integer");
    this.maxBytes = maxBytes;
    this.maxInodes = maxInodes;
    const uid = options.uid ?? (typeof process.getuid === "function" ? process.getuid() : 0);
    const gid = options.gid ?? (typeof process.getgid === "function" ? process.getgid() : 0);
    this.resolved = { maxBytes, maxInodes, uid, gid, rootMode: options.rootMode ?? 0o755, sharedLogBytes: options.sharedLogBytes ?? LOG_SIZE };
    this.store = new PageStore(Math.floor(maxBytes / PAGE), shared);
    const root = new Node(this.allocSlot(), ROOT, S_IFDIR | ((options.rootMode ?? 0o755) & 0o7777), 2, uid, gid);
    root.dir = new Dir();
    root.size = 2 * BOGO_DIRENT_SIZE;
    this.touch(root, T_A | T_M | T_C);
    this.nodes.set(ROOT, root);
    this.inodeCount = 1;
    this.root = root;
  }

  // ---- copies over one shared state (--workers N) -------------------------------------------

  /**
   * Run as one copy per worker thread over this filesystem's state (see memfs-shared.ts). This
   * instance becomes a copy too (the main thread's). Null (forwarding mode) for a subclass (its
   * overrides would not run in the workers' copies), for a filesystem that already served
   * operations, and for a maxBytes larger than the address space set aside for it. A wrapper
   * that changes what memfs answers must not pass this method on.
   *
   * Limits: every copy (each worker's and this one) holds the whole metadata (nodes, names) in
   * its own heap, so metadata memory is multiplied by workers + 1 (file data is not); every
   * operation of every copy is serialized by one lock (memfs runs on one core at a time; the
   * transports, the kernel and the copies' bytes run in parallel); a copy that cannot join (the
   * log was half full before it started) fails to load.
   */
  copies(): CopiesPlan | null {
    if (this.plan) return this.plan;
    // A subclass, or an instance whose handlers were replaced (`fs.lookup = …`): the copies
    // would be plain MemFS, so the replaced handlers would run on this thread only.
    if (Object.getPrototypeOf(this) !== MemFS.prototype) return null;
    if (Object.keys(this).some((k) => typeof (this as unknown as Record<string, unknown>)[k] === "function")) return null;
    const r = this.root;
    if (this.nextIno !== ROOT + 1 || this.nextFh !== 1 || this.store.high !== 0 || r.xattrs || r.dir!.list.length > 0) return null;
    if (Math.ceil(this.store.maxPages / SEG_PAGES) > MAX_SEGMENTS) return null;
    // The module each worker loads for its copy (memfs-copy.ts; null: none can be loaded).
    const module = builtinCopyModule("memfs");
    if (!module) return null;
    const shared: MemShared = {
      kind: "memfs-shared-v1",
      options: this.resolved,
      root: [r.mode, r.uid, r.gid, r.lookups, r.atime, r.atimeNsec, r.mtime, r.mtimeNsec, r.ctime, r.ctimeNsec],
      log: createSharedLog(this.resolved.sharedLogBytes),
      segs: this.store.reserveAll(),
      times: new SharedArrayBuffer(0, { maxByteLength: (this.maxInodes + 1) * TIME_WORDS * 8 }),
      locks: this.locks.buffer,
    };
    this.share(shared.log, shared.times);
    this.putTimes(r, T_A | T_M | T_C);
    this.plan = { module, shared, sharedState: true };
    return this.plan;
  }

  /** A copy of the filesystem whose copies() made `shared` (in a worker). */
  static replica(shared: MemShared): MemFS {
    if (!shared || shared.kind !== "memfs-shared-v1") throw new Error("memfs: not the shared state of a memfs (copies())");
    const fs = new MemFS(shared.options, shared.segs, shared.locks);
    const r = fs.root;
    [r.mode, r.uid, r.gid, r.lookups, r.atime, r.atimeNsec, r.mtime, r.mtimeNsec, r.ctime, r.ctimeNsec] = shared.root;
    fs.share(shared.log, shared.times);
    fs.replicable = true;
    return fs;
  }

  /** Leave the shared state (a copy that stops serving); the others go on. */
  destroy(): void {
    this.rep?.close();
  }

  /** Wait for the lock and apply what the other copies did (diagnostics and tests). */
  sync(): void {
    if (!this.rep) return;
    this.rep.lock();
    this.rep.unlock();
  }

  /** Copies mode: bytes logged so far by all copies, entries this copy replayed; null otherwise. */
  replication(): { logged: number; applied: number } | null {
    return this.rep ? this.rep.position() : null;
  }

  /** Everything a copy's state is made of, as text (tests compare copies with it). */
  dumpState(): string {
    this.sync();
    const out: unknown[] = [this.nextIno, this.nextFh, this.used, this.inodeCount, this.store.high, this.store.freeCount, this.slotHigh, this.freeSlots];
    for (const [ino, n] of this.nodes) {
      this.syncTimes(n);
      out.push([
        ino, n.slot, n.mode, n.nlink, n.uid, n.gid, n.rdev, n.size, n.atime, n.atimeNsec, n.mtime, n.mtimeNsec, n.ctime, n.ctimeNsec,
        n.lookups, n.opens, n.parent?.ino ?? null, n.allocated, n.target,
        n.dir ? [n.dir.nextCookie, n.dir.list.filter((e) => e.live).map((e) => [e.name, e.node.ino, e.cookie])] : null,
        n.chunks ? [...n.chunks] : null,
        n.xattrs ? [...n.xattrs].map(([k, v]) => [k, [...v]]) : null,
      ]);
    }
    for (const [fh, h] of this.handles) out.push(["fh", fh, h.node.ino, h.flags]);
    return JSON.stringify(out);
  }

  /** Route every operation of this instance through the shared log. */
  private share(log: SharedLog, times: SharedArrayBuffer): void {
    const P = MemFS.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
    const self = this as unknown as Record<string, unknown>;
    this.timesBuf = times;
    this.times = new Float64Array(times); // length-tracking: follows another copy's grow()
    const rep = new Replicator(log, (op, off, len, time) => this.applyEntry(op, off, len, time));
    this.rep = rep;
    const dv = rep.dv;
    // Operations that change nothing: under the lock, after catching up.
    for (const m of READ_ONLY_OPS) {
      const f = P[m]!;
      self[m] = (...a: unknown[]) => {
        rep.lock();
        this.opTime = null; // time stamps set (readlink's atime) are this operation's
        try {
          return f.apply(this, a);
        } finally {
          rep.unlock();
        }
      };
    }
    // The other operations that change state: logged as a call. Those with numbers and names
    // only in binary (CALL_SCHEMAS) when the arguments have the expected types; the rest
    // (setattr, xattrs) as JSON (names stay lossless: JSON.stringify escapes lone surrogates).
    for (const m of JSON_OPS) {
      const f = P[m]!;
      const schema = CALL_SCHEMAS[m];
      const index = JSON_OPS.indexOf(m);
      self[m] = (ctx: RequestContext, ...a: unknown[]) => {
        const size = schema ? callSize(schema, a) : -1;
        if (size >= 0) {
          rep.begin(size);
          encodeCall(dv, rep.pos, index, ctx, schema!, a);
          return this.exec(OP_CALL, size, () => f.call(this, ctx, ...a));
        }
        const bytes = encodeJsonOp(m, ctx, a);
        rep.begin(bytes.length);
        rep.bytes.set(bytes, rep.pos);
        return this.exec(OP_JSON, bytes.length, () => f.call(this, ctx, ...a));
      };
    }
    // READ as well, without the rest-argument array of the generic wrapper (the hot path).
    const read = P.read!;
    self.read = (ctx: RequestContext, ino: number, fh: number, offset: number, size: number, out: Uint8Array): number => {
      rep.lock();
      this.opTime = null;
      try {
        return read.call(this, ctx, ino, fh, offset, size, out) as number;
      } finally {
        rep.unlock();
      }
    };
    const readdir = P.readdir!;
    self.readdir = (ctx: RequestContext, ino: number, fh: number, offset: number, filler: DirFiller): void => {
      // At most MAX_PLUS references per call (the filler is told "full" after that).
      rep.begin(8 + 8 * MAX_PLUS);
      this.opTime = null;
      const refs: number[] = [];
      this.plusRefs = refs;
      const f: DirFiller = filler.plus ? { plus: true, add: (name, next, e) => refs.length < MAX_PLUS && filler.add(name, next, e) } : filler;
      try {
        readdir.call(this, ctx, ino, fh, offset, f);
      } catch (e) {
        this.plusRefs = null;
        rep.abort();
        throw e;
      } finally {
        this.plusRefs = null;
      }
      // The directory's atime is in the time table: only the references need replaying.
      if (refs.length === 0) return rep.abort();
      const at = rep.pos;
      dv.setFloat64(at, refs.length, true);
      for (let i = 0; i < refs.length; i++) dv.setFloat64(at + 8 + 8 * i, refs[i]!, true);
      rep.commit(OP_READDIR, 8 + 8 * refs.length, this.opTime);
    };
    const write = P.write!;
    self.write = (ctx: RequestContext, ino: number, fh: number, offset: number, data: Uint8Array, writeFlags: number, openFlags: number): number => {
      rep.lock();
      this.opTime = null;
      if (this.overwrites(ino, offset, data.length, writeFlags)) {
        // Bytes (shared pages) and time stamps (shared table) only: nothing for the others to replay.
        try {
          return write.call(this, ctx, ino, fh, offset, data, writeFlags, openFlags) as number;
        } finally {
          rep.unlock();
        }
      }
      rep.reserve(32);
      const at = rep.pos;
      dv.setFloat64(at, ino, true);
      dv.setFloat64(at + 8, offset, true);
      dv.setFloat64(at + 16, data.length, true);
      dv.setFloat64(at + 24, writeFlags, true);
      this.opTime = null;
      let n: number;
      try {
        n = write.call(this, ctx, ino, fh, offset, data, writeFlags, openFlags) as number;
      } catch (e) {
        rep.abort();
        throw e;
      }
      rep.commit(OP_WRITE, 32, this.opTime);
      return n;
    };
    const lookup = P.lookup!;
    self.lookup = (ctx: RequestContext, parent: number, name: string): Entry => {
      const units = name.length;
      if (units > 4096) {
        // Longer than any valid name: fails (ENAMETOOLONG) without changing anything.
        rep.lock();
        try {
          lookup.call(this, ctx, parent, name);
        } finally {
          rep.unlock();
        }
        throw new Error("BUG: memfs accepted a name longer than 4096 units");
      }
      rep.begin(12 + 2 * units);
      const at = rep.pos;
      dv.setFloat64(at, parent, true);
      dv.setUint32(at + 8, units, true);
      for (let i = 0; i < units; i++) dv.setUint16(at + 12 + 2 * i, name.charCodeAt(i), true);
      return this.exec(OP_LOOKUP, 12 + 2 * units, () => lookup.call(this, ctx, parent, name)) as Entry;
    };
    const forget = P.forget!;
    self.forget = (ino: number, nlookup: number): void => {
      rep.begin(16);
      dv.setFloat64(rep.pos, ino, true);
      dv.setFloat64(rep.pos + 8, nlookup, true);
      this.exec(OP_FORGET, 16, () => forget.call(this, ino, nlookup));
    };
    const open = P.open!;
    self.open = (ctx: RequestContext, ino: number, flags: number): OpenReply => {
      rep.begin(16);
      dv.setFloat64(rep.pos, ino, true);
      dv.setFloat64(rep.pos + 8, flags, true);
      return this.exec(OP_OPEN, 16, () => open.call(this, ctx, ino, flags)) as OpenReply;
    };
    for (const m of ["release", "releasedir"] as const) {
      const f = P[m]!;
      self[m] = (ctx: RequestContext, ino: number, fh: number, flags?: number): void => {
        rep.begin(16);
        dv.setFloat64(rep.pos, ino, true);
        dv.setFloat64(rep.pos + 8, fh, true);
        this.exec(OP_RELEASE, 16, () => f.call(this, ctx, ino, fh, flags));
      };
    }
    for (const m of ["stats", "lookupCount", "has"] as const) {
      const f = P[m]!;
      self[m] = (...a: unknown[]) => {
        this.sync();
        return f.apply(this, a);
      };
    }
    this.sync(); // a copy that joins rebuilds the state from the log
    rep.startTimer();
  }

  /** Run an operation whose entry was prepared (begin + payload): commit it if it succeeds. */
  private exec(op: number, payload: number, run: () => unknown): unknown {
    const rep = this.rep!;
    this.opTime = null;
    let r: unknown;
    try {
      r = run();
    } catch (e) {
      rep.abort();
      throw e;
    }
    rep.commit(op, payload, this.opTime);
    return r;
  }

  /** Replay an entry another copy logged. */
  private applyEntry(op: number, off: number, len: number, time: [number, number] | null): void {
    const rep = this.rep!;
    const dv = rep.dv;
    const P = MemFS.prototype;
    this.opTime = time ?? [0, 0];
    this.replaying = true;
    try {
      switch (op) {
        case OP_WRITE: {
          REPLAY_DATA.length = dv.getFloat64(off + 16, true);
          P.write.call(this, REPLAY_CTX, dv.getFloat64(off, true), 0, dv.getFloat64(off + 8, true), REPLAY_DATA as unknown as Uint8Array, dv.getFloat64(off + 24, true), 0);
          break;
        }
        case OP_READDIR: {
          const count = dv.getFloat64(off, true);
          for (let i = 0; i < count; i++) this.node(dv.getFloat64(off + 8 + 8 * i, true)).lookups++;
          break;
        }
        case OP_LOOKUP: {
          const units = dv.getUint32(off + 8, true);
          let name = "";
          for (let i = 0; i < units; i++) name += String.fromCharCode(dv.getUint16(off + 12 + 2 * i, true));
          P.lookup.call(this, REPLAY_CTX, dv.getFloat64(off, true), name);
          break;
        }
        case OP_FORGET:
          P.forget.call(this, dv.getFloat64(off, true), dv.getFloat64(off + 8, true));
          break;
        case OP_OPEN:
          P.open.call(this, REPLAY_CTX, dv.getFloat64(off, true), dv.getFloat64(off + 8, true));
          break;
        case OP_RELEASE:
          this.closeHandle(dv.getFloat64(off + 8, true));
          break;
        case OP_CALL: {
          const m = JSON_OPS[dv.getUint32(off, true)];
          const schema = m && CALL_SCHEMAS[m];
          if (!schema) throw new Error("bad logged call");
          const args: unknown[] = [{ uid: dv.getUint32(off + 4, true), gid: dv.getUint32(off + 8, true), pid: 0 }];
          let at = off + 12;
          for (let i = 0; i < schema.length; i++) {
            if (schema.charCodeAt(i) === 110 /* n */) {
              args.push(dv.getFloat64(at, true));
              at += 8;
            } else {
              const units = dv.getUint32(at, true);
              let str = "";
              for (let k = 0; k < units; k++) str += String.fromCharCode(dv.getUint16(at + 4 + 2 * k, true));
              args.push(str);
              at += (4 + 2 * units + 7) & ~7;
            }
          }
          (P as unknown as Record<string, (...a: unknown[]) => unknown>)[m]!.apply(this, args);
          break;
        }
        case OP_JSON: {
          const [m, uid, gid, ...args] = JSON.parse(JSON_DECODER.decode(rep.bytes.subarray(off, off + len)), reviveBytes) as [string, number, number, ...unknown[]];
          if (!JSON_OPS.includes(m as (typeof JSON_OPS)[number])) throw new Error(`unknown logged operation ${m}`);
          (P as unknown as Record<string, (...a: unknown[]) => unknown>)[m]!.call(this, { uid, gid, pid: 0 }, ...args);
          break;
        }
        default:
          throw new Error(`unknown log entry ${op}`);
      }
    } finally {
      this.replaying = false;
      this.opTime = null;
    }
  }

  /** Usage counters (diagnostics and tests). */
  stats(): { inodes: number; usedBytes: number; openHandles: number } {
    return { inodes: this.inodeCount, usedBytes: this.used, openHandles: this.handles.size };
  }

  /** Lookup references the kernel holds on `ino` (0 if unknown). */
  lookupCount(ino: number): number {
    return this.nodes.get(ino)?.lookups ?? 0;
  }

  /** Whether node `ino` still exists (not freed). */
  has(ino: number): boolean {
    return this.nodes.has(ino);
  }

  // ---- helpers ------------------------------------------------------------------------------

  /**
   * The time of the current operation: read once per operation (clock), or the time recorded
   * when another copy executed it (replay). Every time stamp an operation sets comes from here.
   */
  protected now(): [number, number] {
    if (!this.rep) return nowTimespec();
    return (this.opTime ??= nowTimespec());
  }

  private touch(n: Node, which: number): void {
    const [s, ns] = this.now();
    if (which & T_A) {
      n.atime = s;
      n.atimeNsec = ns;
    }
    if (which & T_M) {
      n.mtime = s;
      n.mtimeNsec = ns;
    }
    if (which & T_C) {
      n.ctime = s;
      n.ctimeNsec = ns;
    }
    this.putTimes(n, which);
  }

  /**
   * Copies mode: publish `which` of n's (local) time stamps to the shared table. Only the copy
   * that executes an operation publishes; a replay's stamps are in the table already.
   */
  private putTimes(n: Node, which: number): void {
    const t = this.times; // length-tracking: sees the grow() below
    if (t === null || this.replaying) return;
    const i = n.slot * TIME_WORDS;
    if (i + TIME_WORDS > t.length) {
      const buf = this.timesBuf!;
      const slots = Math.min(Math.ceil((n.slot + 1) / TIME_GROW_SLOTS) * TIME_GROW_SLOTS, buf.maxByteLength / (TIME_WORDS * 8));
      if (buf.byteLength < slots * TIME_WORDS * 8) buf.grow(slots * TIME_WORDS * 8);
    }
    if (which & T_A) {
      t[i] = n.atime;
      t[i + 1] = n.atimeNsec;
    }
    if (which & T_M) {
      t[i + 2] = n.mtime;
      t[i + 3] = n.mtimeNsec;
    }
    if (which & T_C) {
      t[i + 4] = n.ctime;
      t[i + 5] = n.ctimeNsec;
    }
  }

  /** Copies mode: refresh n's time stamps from the shared table (under the lock, before use). */
  private syncTimes(n: Node): void {
    const t = this.times;
    if (t === null) return;
    const i = n.slot * TIME_WORDS;
    if (i + TIME_WORDS > t.length) return;
    n.atime = t[i]!;
    n.atimeNsec = t[i + 1]!;
    n.mtime = t[i + 2]!;
    n.mtimeNsec = t[i + 3]!;
    n.ctime = t[i + 4]!;
    n.ctimeNsec = t[i + 5]!;
  }

  /** A node slot (replicated: every copy allocates the same slots in the same order). */
  private allocSlot(): number {
    return this.freeSlots.length > 0 ? this.freeSlots.pop()! : this.slotHigh++;
  }

  /**
   * Copies mode: whether WRITE would change only file bytes and time stamps — inside the file,
   * on pages that exist, no set-user/group-ID bit to clear — so that it needs no log entry.
   */
  private overwrites(ino: number, offset: number, len: number, writeFlags: number): boolean {
    const n = this.nodes.get(ino);
    if (n === undefined || n.chunks === null || !(offset >= 0) || offset + len > n.size) return false;
    if (writeFlags & FUSE_WRITE_KILL_SUIDGID && (n.mode & S_ISUID || (n.mode & (S_ISGID | S_IXGRP)) === (S_ISGID | S_IXGRP))) return false;
    return len === 0 || this.allocNeed(n as RegNode, offset, offset + len) === 0;
  }

  /** relatime: update atime only if it is not newer than mtime/ctime or older than a day. */
  private accessed(n: Node): void {
    this.syncTimes(n);
    if (
      n.atime < n.mtime || (n.atime === n.mtime && n.atimeNsec <= n.mtimeNsec) ||
      n.atime < n.ctime || (n.atime === n.ctime && n.atimeNsec <= n.ctimeNsec) ||
      Date.now() / 1000 - n.atime > 86400 // (a day's precision: no need for the operation's time)
    ) {
      this.touch(n, T_A);
    }
  }

  private node(ino: number): Node {
    const n = this.nodes.get(ino);
    if (!n) fail("ENOENT", `no node ${ino}`);
    return n;
  }

  private dirNode(ino: number): Node & { dir: Dir } {
    const n = this.node(ino);
    if (!n.dir) fail("ENOTDIR");
    return n as Node & { dir: Dir };
  }

  private regNode(ino: number): RegNode {
    const n = this.node(ino);
    if (!n.chunks) fail(n.isDir ? "EISDIR" : "EINVAL");
    return n as RegNode;
  }

  private attrOf(n: Node): Attr {
    this.syncTimes(n);
    return {
      ino: n.ino,
      mode: n.mode,
      nlink: n.nlink,
      uid: n.uid,
      gid: n.gid,
      rdev: n.rdev,
      size: n.size,
      blocks: n.allocated / 512,
      blksize: PAGE,
      atime: n.atime,
      atimeNsec: n.atimeNsec,
      mtime: n.mtime,
      mtimeNsec: n.mtimeNsec,
      ctime: n.ctime,
      ctimeNsec: n.ctimeNsec,
    };
  }

  /** An Entry reply: takes one lookup reference. */
  private entry(n: Node): Entry {
    n.lookups++;
    return { ino: n.ino, attr: this.attrOf(n) };
  }

  private maybeFree(n: Node): void {
    if (n.freed || n.ino === ROOT || n.nlink > 0 || n.lookups > 0 || n.opens > 0) return;
    n.freed = true;
    this.nodes.delete(n.ino);
    this.used -= n.allocated;
    n.allocated = 0;
    if (n.chunks) for (const c of n.chunks.values()) for (const p of c) this.store.release(p);
    n.chunks = null;
    n.xattrs = null;
    n.parent = null;
    this.freeSlots.push(n.slot);
    this.inodeCount--;
  }

  /** Check that `name` can be created in `p`; returns p's Dir. */
  private prepareCreate(p: Node & { dir: Dir }, name: string): void {
    checkName(name);
    if (name === "." || name === "..") fail("EEXIST");
    if (p.nlink === 0) fail("ENOENT", "directory was removed");
    if (p.dir.map.has(name)) fail("EEXIST");
    if (this.inodeCount >= this.maxInodes) fail("ENOSPC", "out of inodes");
  }

  /** A new node owned by the caller (set-group-ID directories pass on their group). */
  private newNode(ctx: RequestContext, p: Node, mode: number): Node {
    let gid = ctx.gid;
    if (p.mode & S_ISGID) {
      gid = p.gid;
      if ((mode & S_IFMT) === S_IFDIR) mode |= S_ISGID;
    }
    if ((mode & S_IFMT) !== S_IFDIR && (mode & (S_ISGID | S_IXGRP)) === (S_ISGID | S_IXGRP) && ctx.uid !== 0 && ctx.gid !== gid) {
      mode &= ~S_ISGID;
    }
    const n = new Node(this.allocSlot(), this.nextIno++, mode, 1, ctx.uid, gid);
    this.touch(n, T_A | T_M | T_C);
    this.nodes.set(n.ino, n);
    this.inodeCount++;
    return n;
  }

  /** Add `n` to `p` under `name` (name must be free). */
  private attach(p: Node & { dir: Dir }, name: string, n: Node): void {
    p.dir.add(name, n);
    p.size += BOGO_DIRENT_SIZE;
    if (n.dir) {
      n.parent = p;
      p.nlink++;
    }
    this.touch(p, T_M | T_C);
  }

  /** Remove entry `name` from `p` (exists); does not change the target's nlink. */
  private detach(p: Node & { dir: Dir }, name: string): Node {
    const e = p.dir.remove(name)!;
    p.size -= BOGO_DIRENT_SIZE;
    if (e.node.dir) p.nlink--;
    return e.node;
  }

  /** Drop one link of `n` that was just detached. */
  private unlinked(n: Node): void {
    n.nlink = n.dir ? 0 : n.nlink - 1;
    this.touch(n, T_C);
    this.maybeFree(n);
  }

  /** Whether `a` is `b` or one of b's ancestors (a directory). */
  private isAncestorOrSelf(a: Node, b: Node): boolean {
    for (let x: Node | null = b; x; x = x.parent) if (x === a) return true;
    return false;
  }

  private openHandle(n: Node, flags: number): number {
    const fh = this.nextFh++;
    this.handles.set(fh, { node: n, flags });
    n.opens++;
    return fh;
  }

  private closeHandle(fh: number): void {
    const h = this.handles.get(fh);
    if (!h) return;
    this.handles.delete(fh);
    h.node.opens--;
    this.maybeFree(h.node);
  }

  // ---- file data ----------------------------------------------------------------------------
  // A chunk is the list of its pages: it holds the first `pages.length * PAGE` bytes of its
  // 64 KiB window. The bytes live in the page store (memfs-pages.ts). `this.replaying`: the
  // bookkeeping only (another copy already moved the bytes).

  /** Bytes that must be newly allocated so that chunks cover [start, end) (start < end). */
  private allocNeed(n: RegNode, start: number, end: number): number {
    const c0 = Math.floor(start / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    const lastWant = roundPage(end - c1 * CHUNK_SIZE);
    const chunks = n.chunks;
    if (chunks.size === 0) return (c1 - c0) * CHUNK_SIZE + lastWant;
    let need = 0;
    if (c1 - c0 < chunks.size) {
      for (let i = c0; i <= c1; i++) {
        const want = i === c1 ? lastWant : CHUNK_SIZE;
        const have = (chunks.get(i)?.length ?? 0) * PAGE;
        if (want > have) need += want - have;
      }
    } else {
      need = (c1 - c0) * CHUNK_SIZE + lastWant;
      for (const [i, c] of chunks) {
        if (i < c0 || i > c1) continue;
        need -= Math.min(c.length * PAGE, i === c1 ? lastWant : CHUNK_SIZE);
      }
    }
    return need;
  }

  /** The chunk `idx`, allocated or grown to hold at least `len` bytes. Space was checked. */
  private chunkFor(n: RegNode, idx: number, len: number): Chunk {
    let c = n.chunks.get(idx);
    if (!c) {
      c = [];
      n.chunks.set(idx, c);
    }
    const want = Math.ceil(len / PAGE);
    if (c.length >= want) return c;
    const added = want - c.length;
    const store = this.store;
    while (c.length < want) {
      const p = store.alloc();
      if (store.reused && !this.replaying) store.viewOf(p).fill(0, pageOffset(p), pageOffset(p) + PAGE);
      c.push(p);
    }
    n.allocated += added * PAGE;
    this.used += added * PAGE;
    return c;
  }

  /** Copy data[src, src + len) into chunk `c` at byte `inOff` (the pages exist). */
  private copyIn(c: Chunk, inOff: number, data: Uint8Array, src: number, len: number): void {
    const store = this.store;
    while (len > 0) {
      const k = Math.floor(inOff / PAGE);
      const po = inOff - k * PAGE;
      const take = Math.min(PAGE - po, len);
      const p = c[k]!;
      bufferCopy.call(data, store.viewOf(p), pageOffset(p) + po, src, src + take);
      inOff += take;
      src += take;
      len -= take;
    }
  }

  /** Copy chunk `c` bytes [inOff, inOff + len) (inside its pages) into out at `dst`. */
  private copyOut(c: Chunk, inOff: number, out: Uint8Array, dst: number, len: number): void {
    const store = this.store;
    while (len > 0) {
      const k = Math.floor(inOff / PAGE);
      const po = inOff - k * PAGE;
      const take = Math.min(PAGE - po, len);
      const p = c[k]!;
      const at = pageOffset(p) + po;
      const v = store.views[Math.floor(p / SEG_PAGES)];
      // A page nobody wrote yet (fallocate) may lie past the segment's grown length: zeros.
      if (v !== undefined && v.length >= at + take) v.copy(out, dst, at, at + take);
      else out.fill(0, dst, dst + take);
      inOff += take;
      dst += take;
      len -= take;
    }
  }

  /** Zero chunk bytes [a, b) (inside its pages; executing copy only). */
  private zeroIn(c: Chunk, a: number, b: number): void {
    if (this.replaying) return;
    const store = this.store;
    while (a < b) {
      const k = Math.floor(a / PAGE);
      const po = a - k * PAGE;
      const take = Math.min(PAGE - po, b - a);
      const p = c[k]!;
      const at = pageOffset(p) + po;
      store.viewOf(p).fill(0, at, at + take);
      a += take;
    }
  }

  /**
   * Copy `len` bytes of `data` into the file at `pos` (does not change size or times). Throws
   * ENOSPC. `data` null: a replay (bookkeeping only).
   */
  private writeBytes(n: RegNode, pos: number, data: Uint8Array | null, len: number): void {
    if (len === 0) return;
    const end = pos + len;
    const need = this.allocNeed(n, pos, end);
    if (need > 0 && this.used + need > this.maxBytes) fail("ENOSPC");
    let src = 0;
    while (src < len) {
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, len - src);
      const chunk = this.chunkFor(n, idx, inOff + take);
      if (data && !this.replaying) this.copyIn(chunk, inOff, data, src, take);
      src += take;
      pos += take;
    }
  }

  /** Copy file bytes [pos, pos + count) into out[0..count) (holes read as zeros). */
  private readBytes(n: RegNode, pos: number, count: number, out: Uint8Array): void {
    let dst = 0;
    while (dst < count) {
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, count - dst);
      const c = n.chunks.get(idx);
      const have = c ? c.length * PAGE : 0;
      if (c && inOff < have) {
        const avail = Math.min(take, have - inOff);
        this.copyOut(c, inOff, out, dst, avail);
        if (avail < take) out.fill(0, dst + avail, dst + take);
      } else {
        out.fill(0, dst, dst + take);
      }
      dst += take;
      pos += take;
    }
  }

  private dropChunk(n: RegNode, idx: number, c: Chunk): void {
    n.chunks.delete(idx);
    for (const p of c) this.store.release(p);
    n.allocated -= c.length * PAGE;
    this.used -= c.length * PAGE;
  }

  /** Keep the first `pages` pages of chunk `c`. */
  private shrinkChunk(n: RegNode, c: Chunk, pages: number): void {
    const drop = c.length - pages;
    for (let k = c.length - 1; k >= pages; k--) this.store.release(c[k]!);
    c.length = pages;
    n.allocated -= drop * PAGE;
    this.used -= drop * PAGE;
  }

  /** Zero [start, end) and free what becomes unneeded (punch hole). Does not change size. */
  private zeroRange(n: RegNode, start: number, end: number): void {
    if (end <= start || n.chunks.size === 0) return;
    const c0 = Math.floor(start / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    const visit = (idx: number, c: Chunk): void => {
      const base = idx * CHUNK_SIZE;
      const a = Math.max(start, base) - base;
      const b = Math.min(end, base + CHUNK_SIZE) - base;
      const have = c.length * PAGE;
      if (a >= have) return;
      if (b >= have) {
        if (a === 0) this.dropChunk(n, idx, c);
        else if (a % PAGE === 0) this.shrinkChunk(n, c, a / PAGE);
        else {
          const keep = roundPage(a);
          this.zeroIn(c, a, keep);
          if (keep < have) this.shrinkChunk(n, c, keep / PAGE);
        }
      } else {
        this.zeroIn(c, a, b);
      }
    };
    if (c1 - c0 < n.chunks.size) {
      for (let i = c0; i <= c1; i++) {
        const c = n.chunks.get(i);
        if (c) visit(i, c);
      }
    } else {
      // Collect first: visit may delete from the map.
      const hit: [number, Chunk][] = [];
      for (const [i, c] of n.chunks) if (i >= c0 && i <= c1) hit.push([i, c]);
      for (const [i, c] of hit) visit(i, c);
    }
  }

  /** Change the size of a regular file; shrinking frees and zeroes everything past the new end. */
  private resize(n: RegNode, size: number): void {
    // Shrinking also drops chunks preallocated past EOF (FALLOC_FL_KEEP_SIZE), like Linux.
    if (size < n.size) this.zeroRange(n, size, Number.MAX_SAFE_INTEGER);
    n.size = size;
  }

  private killSuidSgid(n: Node): void {
    let mode = n.mode & ~S_ISUID;
    if (mode & S_IXGRP) mode &= ~S_ISGID;
    n.mode = mode;
  }

  // ---- InodeFS: names -----------------------------------------------------------------------

  lookup(_ctx: RequestContext, parent: number, name: string): Entry {
    const p = this.dirNode(parent);
    if (name === ".") return this.entry(p);
    if (name === "..") return this.entry(p.parent ?? p);
    checkName(name);
    const e = p.dir.map.get(name);
    if (!e) fail("ENOENT");
    return this.entry(e.node);
  }

  forget(ino: number, nlookup: number): void {
    const n = this.nodes.get(ino);
    if (!n) return;
    n.lookups = Math.max(0, n.lookups - nlookup);
    this.maybeFree(n);
  }

  getattr(_ctx: RequestContext, ino: number, _fh: number | undefined): Attr {
    return this.attrOf(this.node(ino));
  }

  setattr(_ctx: RequestContext, ino: number, changes: SetattrChanges): Attr {
    const n = this.node(ino);
    const { size, mode, uid, gid, atime, mtime, ctime } = changes;
    // Validate everything before changing anything.
    if (size !== undefined) {
      if (n.isDir) fail("EISDIR");
      if (!n.chunks) fail("EINVAL");
      if (!Number.isInteger(size) || size < 0) fail("EINVAL");
      if (size > MAX_FILE_SIZE) fail("EFBIG");
    }
    for (const t of [atime, mtime, ctime]) {
      if (t !== undefined && t !== "now" && (!Number.isInteger(t[0]) || !Number.isInteger(t[1]) || t[1] < 0 || t[1] >= 1e9)) {
        fail("EINVAL", "bad timestamp");
      }
    }
    const [nowS, nowNs] = this.now();
    this.syncTimes(n); // the stamps this call leaves alone are published again below
    if (size !== undefined && n.chunks) {
      const f = n as RegNode;
      if (size !== f.size) {
        this.resize(f, size);
        n.mtime = nowS;
        n.mtimeNsec = nowNs;
      }
    }
    if (mode !== undefined) n.mode = (n.mode & S_IFMT) | (mode & 0o7777);
    if (uid !== undefined) n.uid = uid;
    if (gid !== undefined) n.gid = gid;
    if (changes.valid & FATTR_KILL_SUIDGID) this.killSuidSgid(n);
    if (atime !== undefined) {
      [n.atime, n.atimeNsec] = atime === "now" ? [nowS, nowNs] : atime;
    }
    if (mtime !== undefined) {
      [n.mtime, n.mtimeNsec] = mtime === "now" ? [nowS, nowNs] : mtime;
    }
    if (ctime !== undefined) {
      [n.ctime, n.ctimeNsec] = ctime;
    } else {
      n.ctime = nowS;
      n.ctimeNsec = nowNs;
    }
    this.putTimes(n, T_A | T_M | T_C);
    return this.attrOf(n);
  }

  readlink(_ctx: RequestContext, ino: number): string {
    const n = this.node(ino);
    if (n.target === null) fail("EINVAL");
    this.accessed(n);
    return n.target;
  }

  symlink(ctx: RequestContext, parent: number, name: string, target: string): Entry {
    const p = this.dirNode(parent);
    this.prepareCreate(p, name);
    if (target.length === 0) fail("ENOENT");
    const len = nameByteLength(target);
    if (len >= PATH_MAX) fail("ENAMETOOLONG");
    const n = this.newNode(ctx, p, S_IFLNK | 0o777);
    n.target = target;
    n.size = len;
    this.attach(p, name, n);
    return this.entry(n);
  }

  mknod(ctx: RequestContext, parent: number, name: string, mode: number, rdev: number, umask: number): Entry {
    let type = mode & S_IFMT;
    if (type === 0) type = S_IFREG;
    switch (type) {
      case S_IFREG: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK: break;
      case S_IFDIR: fail("EPERM", "mknod cannot create directories");
      default: fail("EINVAL", "bad file type");
    }
    const p = this.dirNode(parent);
    this.prepareCreate(p, name);
    const n = this.newNode(ctx, p, type | (mode & 0o7777 & ~umask));
    if (type === S_IFREG) n.chunks = new Map();
    else if (type === S_IFCHR || type === S_IFBLK) n.rdev = rdev;
    this.attach(p, name, n);
    return this.entry(n);
  }

  mkdir(ctx: RequestContext, parent: number, name: string, mode: number, umask: number): Entry {
    const p = this.dirNode(parent);
    this.prepareCreate(p, name);
    const n = this.newNode(ctx, p, S_IFDIR | (mode & 0o7777 & ~umask));
    n.nlink = 2;
    n.dir = new Dir();
    n.size = 2 * BOGO_DIRENT_SIZE;
    this.attach(p, name, n);
    return this.entry(n);
  }

  unlink(_ctx: RequestContext, parent: number, name: string): void {
    const p = this.dirNode(parent);
    checkName(name);
    const e = p.dir.map.get(name);
    if (!e) fail(name === "." || name === ".." ? "EISDIR" : "ENOENT");
    if (e.node.dir) fail("EISDIR");
    this.detach(p, name);
    this.touch(p, T_M | T_C);
    this.unlinked(e.node);
  }

  rmdir(_ctx: RequestContext, parent: number, name: string): void {
    const p = this.dirNode(parent);
    if (name === ".") fail("EINVAL");
    if (name === "..") fail("ENOTEMPTY");
    checkName(name);
    const e = p.dir.map.get(name);
    if (!e) fail("ENOENT");
    const n = e.node;
    if (!n.dir) fail("ENOTDIR");
    if (n.dir.map.size > 0) fail("ENOTEMPTY");
    this.detach(p, name);
    this.touch(p, T_M | T_C);
    this.unlinked(n);
  }

  rename(_ctx: RequestContext, parent: number, name: string, newParent: number, newName: string, flags: number): void {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) fail("EINVAL", "unknown rename flags");
    if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))) fail("EINVAL");
    const op = this.dirNode(parent);
    const np = this.dirNode(newParent);
    checkName(name);
    checkName(newName);
    if (name === "." || name === ".." || newName === "." || newName === "..") fail("EBUSY");
    const se = op.dir.map.get(name);
    if (!se) fail("ENOENT");
    const src = se.node;
    const te = np.dir.map.get(newName);
    const tgt = te?.node;
    if ((flags & RENAME_NOREPLACE) && tgt) fail("EEXIST");
    if ((flags & RENAME_EXCHANGE) && !tgt) fail("ENOENT");
    if (np.nlink === 0) fail("ENOENT");
    // A directory cannot move into its own subtree; the target cannot be an ancestor of the source.
    if (src.dir && this.isAncestorOrSelf(src, np)) fail("EINVAL", "cannot move a directory into itself");
    if (tgt?.dir && this.isAncestorOrSelf(tgt, op)) fail(flags & RENAME_EXCHANGE ? "EINVAL" : "ENOTEMPTY");
    if (src === tgt) return; // same inode: POSIX says do nothing
    const exchange = (flags & RENAME_EXCHANGE) !== 0;
    if (tgt && !exchange) {
      if (src.dir && !tgt.dir) fail("ENOTDIR");
      if (!src.dir && tgt.dir) fail("EISDIR");
      if (tgt.dir && tgt.dir.map.size > 0) fail("ENOTEMPTY");
    }
    const whiteout = (flags & RENAME_WHITEOUT) !== 0;
    if (whiteout && this.inodeCount >= this.maxInodes) fail("ENOSPC");

    if (exchange && te && tgt) {
      se.node = tgt;
      te.node = src;
      if (op !== np) {
        if (src.dir) {
          src.parent = np;
          op.nlink--;
          np.nlink++;
        }
        if (tgt.dir) {
          tgt.parent = op;
          np.nlink--;
          op.nlink++;
        }
      }
      this.touch(src, T_C);
      this.touch(tgt, T_C);
      this.touch(op, T_M | T_C);
      if (np !== op) this.touch(np, T_M | T_C);
      return;
    }

    if (tgt) {
      this.detach(np, newName);
      this.unlinked(tgt);
    }
    this.detach(op, name);
    this.attach(np, newName, src);
    this.touch(src, T_C);
    this.touch(op, T_M | T_C);
    if (whiteout) {
      const w = new Node(this.allocSlot(), this.nextIno++, S_IFCHR, 1, src.uid, src.gid);
      this.touch(w, T_A | T_M | T_C);
      this.nodes.set(w.ino, w);
      this.inodeCount++;
      this.attach(op, name, w);
    }
  }

  link(_ctx: RequestContext, ino: number, newParent: number, newName: string): Entry {
    const n = this.node(ino);
    const p = this.dirNode(newParent);
    if (n.dir) fail("EPERM", "hard links to directories are not allowed");
    checkName(newName);
    if (newName === "." || newName === "..") fail("EEXIST");
    if (p.nlink === 0) fail("ENOENT");
    if (p.dir.map.has(newName)) fail("EEXIST");
    if (n.nlink === 0 && !this.linkable.has(ino)) fail("ENOENT", "source was unlinked");
    this.linkable.delete(ino);
    n.nlink++;
    this.touch(n, T_C);
    this.attach(p, newName, n);
    return this.entry(n);
  }

  // ---- InodeFS: files -----------------------------------------------------------------------

  create(ctx: RequestContext, parent: number, name: string, mode: number, umask: number, flags: number): CreateReply {
    const p = this.dirNode(parent);
    checkName(name);
    const existing = p.dir.map.get(name);
    let n: Node;
    if (existing) {
      if (flags & O_EXCL) fail("EEXIST");
      n = existing.node;
      if (n.dir) fail("EISDIR");
      if ((flags & O_TRUNC) && n.chunks) {
        this.resize(n as RegNode, 0);
        this.touch(n, T_M | T_C);
      }
    } else {
      this.prepareCreate(p, name);
      n = this.newNode(ctx, p, S_IFREG | (mode & 0o7777 & ~umask));
      n.chunks = new Map();
      this.attach(p, name, n);
    }
    const fh = this.openHandle(n, flags);
    return { entry: this.entry(n), open: { fh } };
  }

  open(_ctx: RequestContext, ino: number, flags: number): OpenReply {
    const n = this.node(ino);
    if (n.dir) fail("EISDIR");
    if ((flags & O_TRUNC) && n.chunks) {
      this.resize(n as RegNode, 0);
      this.touch(n, T_M | T_C);
    }
    return { fh: this.openHandle(n, flags) };
  }

  read(_ctx: RequestContext, ino: number, _fh: number, offset: number, size: number, out: Uint8Array): number {
    const n = this.regNode(ino);
    if (offset < 0) fail("EINVAL");
    if (offset >= n.size || size === 0) return 0;
    const count = Math.min(size, n.size - offset, out.length);
    this.readBytes(n, offset, count, out);
    this.accessed(n);
    return count;
  }

  write(_ctx: RequestContext, ino: number, _fh: number, offset: number, data: Uint8Array, writeFlags: number, _openFlags: number): number {
    const n = this.regNode(ino);
    if (offset < 0) fail("EINVAL");
    const len = data.length;
    if (len === 0) return 0;
    if (offset + len > MAX_FILE_SIZE) fail("EFBIG");
    this.writeBytes(n, offset, data, len);
    if (offset + len > n.size) n.size = offset + len;
    if (writeFlags & FUSE_WRITE_KILL_SUIDGID) this.killSuidSgid(n);
    this.touch(n, T_M | T_C);
    return len;
  }

  /** Closing any descriptor ends the POSIX locks its process (lockOwner) holds on the file. */
  flush(_ctx?: RequestContext, ino?: number, _fh?: number, lockOwner?: bigint): void {
    if (ino !== undefined && typeof lockOwner === "bigint") this.locks.unlockOwner(ino, lockOwner, LOCK_POSIX);
  }

  release(_ctx: RequestContext, _ino: number, fh: number, _flags: number): void {
    this.closeHandle(fh);
    this.locks.releaseFh(fh); // OFD and flock locks end with their open file
  }

  /** O_TMPFILE: a regular file with no name (nlink 0), open; linkat may name it once. */
  tmpfile(ctx: RequestContext, parent: number, mode: number, umask: number, flags: number): CreateReply {
    const p = this.dirNode(parent);
    if (p.nlink === 0) fail("ENOENT", "directory was removed");
    if (this.inodeCount >= this.maxInodes) fail("ENOSPC", "out of inodes");
    const n = this.newNode(ctx, p, S_IFREG | (mode & 0o7777 & ~umask));
    n.nlink = 0;
    n.chunks = new Map();
    this.linkable.add(n.ino);
    const fh = this.openHandle(n, flags);
    return { entry: this.entry(n), open: { fh } };
  }

  // ---- locks: thin delegation to the shared lock table (lib/fs/locks.ts) ----------------------

  getlk(_ctx: RequestContext, ino: number, _fh: number, owner: bigint, lock: FileLock): FileLock {
    return this.locks.test(ino, owner, lock, LOCK_POSIX);
  }

  setlk(ctx: RequestContext, ino: number, fh: number, owner: bigint, lock: FileLock, wait: boolean): void | Promise<void> {
    if (!wait) {
      if (!this.locks.trySet(ino, fh, owner, lock, LOCK_POSIX)) fail("EAGAIN");
      return;
    }
    return this.locks.set(ino, fh, owner, lock, LOCK_POSIX, true, ctx.signal);
  }

  flock(ctx: RequestContext, ino: number, fh: number, owner: bigint, type: number, wait: boolean): void | Promise<void> {
    const lock = { start: 0, end: Infinity, type, pid: ctx.pid };
    if (!wait) {
      if (!this.locks.trySet(ino, fh, owner, lock, LOCK_FLOCK)) fail("EAGAIN");
      return;
    }
    return this.locks.set(ino, fh, owner, lock, LOCK_FLOCK, true, ctx.signal);
  }

  fsync(): void {}

  // ---- InodeFS: directories -----------------------------------------------------------------

  opendir(_ctx: RequestContext, ino: number, flags: number): OpenReply {
    const n = this.dirNode(ino);
    return { fh: this.openHandle(n, flags) };
  }

  readdir(_ctx: RequestContext, ino: number, _fh: number, offset: number, filler: DirFiller): void {
    const n = this.dirNode(ino);
    if (n.nlink === 0) return; // removed directory: empty, without even "." and ".."
    const plus = filler.plus;
    if (offset < 1) {
      if (!filler.add(".", 1, { ino: n.ino, attr: this.attrOf(n) })) return;
    }
    if (offset < 2) {
      const up = n.parent ?? n;
      if (!filler.add("..", 2, { ino: up.ino, attr: this.attrOf(up) })) return;
    }
    const list = n.dir.list;
    for (let i = n.dir.firstAfter(offset); i < list.length; i++) {
      const e = list[i]!;
      if (!e.live) continue;
      const c = e.node;
      if (!filler.add(e.name, e.cookie, { ino: c.ino, attr: this.attrOf(c) })) break;
        if (plus) {
        c.lookups++;
        this.plusRefs?.push(c.ino);
      }
    }
    this.accessed(n);
  }

  releasedir(_ctx: RequestContext, _ino: number, fh: number): void {
    this.closeHandle(fh);
  }

  fsyncdir(): void {}

  // ---- InodeFS: misc ------------------------------------------------------------------------

  statfs(): Statfs {
    const blocks = Math.floor(this.maxBytes / PAGE);
    const free = Math.max(0, Math.floor((this.maxBytes - this.used) / PAGE));
    return {
      blocks,
      bfree: free,
      bavail: free,
      files: this.maxInodes,
      ffree: Math.max(0, this.maxInodes - this.inodeCount),
      bsize: PAGE,
      namelen: NAME_MAX,
      frsize: PAGE,
    };
  }

  /** Validate an xattr name; returns its namespace. */
  private xattrNamespace(name: string): "user" | "trusted" | "security" | "system" {
    if (tooLong(name, XATTR_NAME_MAX)) fail("ERANGE", "xattr name too long");
    let ns: "user" | "trusted" | "security" | "system";
    let rest: string;
    if (name.startsWith("user.")) [ns, rest] = ["user", name.slice(5)];
    else if (name.startsWith("trusted.")) [ns, rest] = ["trusted", name.slice(8)];
    else if (name.startsWith("security.")) [ns, rest] = ["security", name.slice(9)];
    else if (name === "system.posix_acl_access" || name === "system.posix_acl_default") [ns, rest] = ["system", name];
    else fail("EOPNOTSUPP", "unsupported xattr namespace");
    if (rest.length === 0) fail("EINVAL", "empty xattr name");
    return ns;
  }

  setxattr(_ctx: RequestContext, ino: number, name: string, value: Uint8Array, flags: number): void {
    const n = this.node(ino);
    if (flags & ~(XATTR_CREATE | XATTR_REPLACE)) fail("EINVAL", "bad xattr flags");
    const ns = this.xattrNamespace(name);
    if (value.length > XATTR_SIZE_MAX) fail("E2BIG");
    if (ns === "user" && !n.chunks && !n.dir) fail("EPERM", "user xattrs only on files and directories");
    if (name === "system.posix_acl_default" && !n.dir) fail("EACCES");
    const old = n.xattrs?.get(name);
    if ((flags & XATTR_CREATE) && old) fail("EEXIST");
    if ((flags & XATTR_REPLACE) && !old) fail("ENODATA");
    n.xattrs ??= new Map();
    n.xattrs.set(name, value.slice());
    this.touch(n, T_C);
  }

  getxattr(_ctx: RequestContext, ino: number, name: string): Uint8Array {
    const n = this.node(ino);
    this.xattrNamespace(name);
    const v = n.xattrs?.get(name);
    if (!v) fail("ENODATA");
    return v;
  }

  listxattr(_ctx: RequestContext, ino: number): string[] {
    const n = this.node(ino);
    return n.xattrs ? [...n.xattrs.keys()] : [];
  }

  removexattr(_ctx: RequestContext, ino: number, name: string): void {
    const n = this.node(ino);
    const ns = this.xattrNamespace(name);
    if (ns === "user" && !n.chunks && !n.dir) fail("EPERM");
    if (!n.xattrs?.delete(name)) fail("ENODATA");
    this.touch(n, T_C);
  }

  access(ctx: RequestContext, ino: number, mask: number): void {
    const n = this.node(ino);
    mask &= R_OK | W_OK | X_OK;
    if (mask === 0) return;
    if (ctx.uid === 0) {
      // root may read and write anything; execute needs some x bit (directories: always searchable)
      if ((mask & X_OK) && !n.dir && (n.mode & 0o111) === 0) fail("EACCES");
      return;
    }
    let bits: number;
    if (ctx.uid === n.uid) bits = (n.mode >> 6) & 7;
    else if (ctx.gid === n.gid) bits = (n.mode >> 3) & 7;
    else bits = n.mode & 7;
    if ((bits & mask) !== mask) fail("EACCES");
  }

  fallocate(_ctx: RequestContext, ino: number, _fh: number, offset: number, length: number, mode: number): void {
    const n = this.regNode(ino);
    if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) fail("EOPNOTSUPP");
    if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) fail("EOPNOTSUPP");
    if (offset < 0 || length <= 0) fail("EINVAL");
    const end = offset + length;
    if (end > MAX_FILE_SIZE) fail("EFBIG");
    if (mode & FALLOC_FL_PUNCH_HOLE) {
      this.zeroRange(n, offset, end);
      this.touch(n, T_M | T_C);
      return;
    }
    const need = this.allocNeed(n, offset, end);
    if (need > 0 && this.used + need > this.maxBytes) fail("ENOSPC");
    const c0 = Math.floor(offset / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    for (let i = c0; i <= c1; i++) this.chunkFor(n, i, i === c1 ? end - c1 * CHUNK_SIZE : CHUNK_SIZE);
    if (!(mode & FALLOC_FL_KEEP_SIZE) && end > n.size) n.size = end;
    this.touch(n, T_C);
  }

  lseek(_ctx: RequestContext, ino: number, _fh: number, offset: number, whence: number): number {
    const n = this.regNode(ino);
    if (whence !== SEEK_DATA && whence !== SEEK_HOLE) fail("EINVAL");
    if (offset < 0 || offset >= n.size) fail("ENXIO");
    const size = n.size;
    const chunks = n.chunks;
    if (whence === SEEK_HOLE) {
      let pos = offset;
      for (;;) {
        const idx = Math.floor(pos / CHUNK_SIZE);
        const base = idx * CHUNK_SIZE;
        const have = (chunks.get(idx)?.length ?? 0) * PAGE;
        if (pos >= base + have) return Math.min(pos, size);
        if (have < CHUNK_SIZE) return Math.min(base + have, size);
        pos = base + CHUNK_SIZE;
        if (pos >= size) return size;
      }
    }
    // SEEK_DATA
    const idx = Math.floor(offset / CHUNK_SIZE);
    if (offset < idx * CHUNK_SIZE + (chunks.get(idx)?.length ?? 0) * PAGE) return offset;
    const lastIdx = Math.floor((size - 1) / CHUNK_SIZE);
    let next = -1;
    if (lastIdx - idx <= chunks.size) {
      for (let i = idx + 1; i <= lastIdx; i++) {
        if (chunks.has(i)) {
          next = i;
          break;
        }
      }
    } else {
      for (const i of chunks.keys()) if (i > idx && i <= lastIdx && (next < 0 || i < next)) next = i;
    }
    if (next < 0) fail("ENXIO");
    return next * CHUNK_SIZE;
  }

  copyFileRange(_ctx: RequestContext, inoIn: number, _fhIn: number, offIn: number, inoOut: number, _fhOut: number, offOut: number, len: number, flags: number): number {
    if (flags !== 0) fail("EINVAL");
    const src = this.regNode(inoIn);
    const dst = this.regNode(inoOut);
    if (offIn < 0 || offOut < 0 || len < 0) fail("EINVAL");
    if (src === dst && offIn < offOut + len && offOut < offIn + len) fail("EINVAL", "overlapping ranges in one file");
    if (offIn >= src.size || len === 0) return 0;
    const count = Math.min(len, src.size - offIn);
    if (offOut + count > MAX_FILE_SIZE) fail("EFBIG");
    let done = 0;
    while (done < count) {
      const pos = offIn + done;
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, count - done);
      const c = src.chunks.get(idx);
      const have = c ? c.length * PAGE : 0;
      const dpos = offOut + done;
      try {
        if (c && inOff < have) {
          const avail = Math.min(take, have - inOff);
          // The executing copy moves the bytes through a buffer (source and target may be one file).
          let bytes: Uint8Array | null = null;
          if (!this.replaying) {
            bytes = new Uint8Array(avail);
            this.copyOut(c, inOff, bytes, 0, avail);
          }
          this.writeBytes(dst, dpos, bytes, avail);
          if (avail < take) this.zeroRange(dst, dpos + avail, dpos + take);
        } else {
          this.zeroRange(dst, dpos, dpos + take); // keep holes sparse
        }
      } catch (err) {
        if (done === 0) throw err;
        break;
      }
      done += take;
    }
    if (offOut + done > dst.size) dst.size = offOut + done;
    this.touch(dst, T_M | T_C);
    return done;
  }
}

/** A new in-memory filesystem. */
export function memfs(options?: MemFSOptions): MemFS {
  return new MemFS(options);
}
