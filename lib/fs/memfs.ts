// An in-memory filesystem with tmpfs-like POSIX behaviour, implementing the InodeFS interface.
//
// All of its state is in SharedArrayBuffers (memfs-state.ts: nodes, directory entries, chunk
// and handle tables, an arena for names, targets and xattrs; file bytes in lib/shared/pages.ts).
// A MemFS object is a thin view over that state: with `--workers N` every worker thread's
// MemFS (copies(), memfs-copy.ts) and the main thread's are views of one filesystem. Every
// operation takes the state's one mutex (lib/shared/mutex.ts), works on shared memory and lets
// go; nothing is replayed, and a view can be made (a worker started or restarted) at any time.
//
// Failure atomicity: an operation validates and allocates everything it needs (directory
// entries, names, list room, nodes) before it changes anything, so one that fails leaves the
// state as it was. (A thread that dies inside the critical section leaves the mutex held:
// the next waiter fail-stops after the mutex's bound.)
//
// Files are sparse: data lives in 64 KiB chunks (up to 16 pages each); a chunk holds the first
// `pages × 4096` bytes of its 64 KiB window (grows a page at a time on demand), so small files
// cost a page, and holes cost nothing. Invariant: every stored byte at or past the file size
// is zero, so growing a file never exposes old data.
//
// Directories: entries found by name through a hash table, and listed in cookie order ("." = 1,
// ".." = 2, entries from 3); readdir resumes at the first live entry whose cookie is greater
// than the offset, so offsets stay valid across concurrent unlinks and renames.
//
// Locks (POSIX, OFD, flock) live in a shared lock table (locks.ts) with its own
// synchronisation: getlk/setlk/flock/flush touch only it and do not take the state's mutex (a
// blocking SETLKW waits for an unlock anywhere without holding it); release drops the fh's
// OFD/flock locks under the mutex, before the handle slot can be reused.
//
// Lifetime: a node is freed when nlink == 0, its lookup count (references handed to the kernel)
// is 0 and no file handle is open on it. Node ids are not reused (generation × 2^32 + slot).

import { nameByteLength } from "../protocol/names.ts";
import { builtinCopyModule } from "./builtin-copies.ts";
import { FuseError, type ErrnoName } from "./errors.ts";
import type {
  Attr, CopiesPlan, CreateReply, DirFiller, Entry, InodeFS, OpenReply, RequestContext, SetattrChanges, Statfs,
} from "./types.ts";
import { S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK } from "./types.ts";
import { clockNow, nowTimespec, readClock } from "./attr.ts";
import { PAGE, SEG_PAGES, pageOffset } from "../shared/pages.ts";
import {
  C_PAGE0, C_PAGES, CHUNK_WORDS, MemState, type MemBuffers, N_ATIME_NS, N_CTIME_NS, N_GID, N_MODE, N_MTIME_NS, N_NLINK, N_OPENS,
  N_PARENT, N_RDEV, N_TARGET, N_TARGET_LEN, N_UID, N_ENTRIES, N_FLAGS, NF_ALLOCATED, NF_ATIME, NF_CTIME, NF_LOOKUPS, NF_MTIME,
  NF_SIZE, NODE_LINKABLE, NODE_WORDS,
} from "./memfs-state.ts";
import { LOCK_FLOCK, LOCK_POSIX, LockTable, type FileLock } from "./locks.ts";
import { totalmem } from "node:os";

export interface MemFSOptions {
  /** Owner of the root directory (default: the process's uid/gid). */
  uid?: number;
  gid?: number;
  /** Permission bits of the root directory (default 0o755). */
  rootMode?: number;
  /** Capacity in bytes of file data (default: half the machine's RAM, like tmpfs; at most 1 TiB). */
  maxBytes?: number;
  /** Maximum number of inodes, root included (default: RAM / 8 KiB, like tmpfs). */
  maxInodes?: number;
  /** A thread that finds the state's lock held by one holder this long fail-stops (ms; tests). */
  lockBoundMs?: number;
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
/** Address space set aside for file data, at most (1 GiB segments): 1 TiB. */
const MAX_SEGMENTS = 1024;

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

/**
 * A view of one node's record in the shared node table (made per use: it holds only the slot).
 * Compare nodes by `slot`, never by object identity.
 */
class Node {
  private readonly i: number;
  private readonly f: number;
  constructor(
    private readonly s: MemState,
    readonly slot: number,
  ) {
    this.i = slot * NODE_WORDS;
    this.f = this.i >> 1;
  }
  get ino(): number {
    return this.s.idOf(this.slot);
  }
  get mode(): number {
    return this.s.NI[this.i + N_MODE]!;
  }
  set mode(v: number) {
    this.s.NI[this.i + N_MODE] = v;
  }
  get nlink(): number {
    return this.s.NI[this.i + N_NLINK]!;
  }
  set nlink(v: number) {
    this.s.NI[this.i + N_NLINK] = v;
  }
  get uid(): number {
    return this.s.NI[this.i + N_UID]! >>> 0;
  }
  set uid(v: number) {
    this.s.NI[this.i + N_UID] = v;
  }
  get gid(): number {
    return this.s.NI[this.i + N_GID]! >>> 0;
  }
  set gid(v: number) {
    this.s.NI[this.i + N_GID] = v;
  }
  get rdev(): number {
    return this.s.NI[this.i + N_RDEV]! >>> 0;
  }
  set rdev(v: number) {
    this.s.NI[this.i + N_RDEV] = v;
  }
  get opens(): number {
    return this.s.NI[this.i + N_OPENS]!;
  }
  set opens(v: number) {
    this.s.NI[this.i + N_OPENS] = v;
  }
  get size(): number {
    return this.s.NF[this.f + NF_SIZE]!;
  }
  set size(v: number) {
    this.s.NF[this.f + NF_SIZE] = v;
  }
  get lookups(): number {
    return this.s.NF[this.f + NF_LOOKUPS]!;
  }
  set lookups(v: number) {
    this.s.NF[this.f + NF_LOOKUPS] = v;
  }
  get allocated(): number {
    return this.s.NF[this.f + NF_ALLOCATED]!;
  }
  get atime(): number {
    return this.s.NF[this.f + NF_ATIME]!;
  }
  set atime(v: number) {
    this.s.NF[this.f + NF_ATIME] = v;
  }
  get mtime(): number {
    return this.s.NF[this.f + NF_MTIME]!;
  }
  set mtime(v: number) {
    this.s.NF[this.f + NF_MTIME] = v;
  }
  get ctime(): number {
    return this.s.NF[this.f + NF_CTIME]!;
  }
  set ctime(v: number) {
    this.s.NF[this.f + NF_CTIME] = v;
  }
  get atimeNsec(): number {
    return this.s.NI[this.i + N_ATIME_NS]!;
  }
  set atimeNsec(v: number) {
    this.s.NI[this.i + N_ATIME_NS] = v;
  }
  get mtimeNsec(): number {
    return this.s.NI[this.i + N_MTIME_NS]!;
  }
  set mtimeNsec(v: number) {
    this.s.NI[this.i + N_MTIME_NS] = v;
  }
  get ctimeNsec(): number {
    return this.s.NI[this.i + N_CTIME_NS]!;
  }
  set ctimeNsec(v: number) {
    this.s.NI[this.i + N_CTIME_NS] = v;
  }
  /** Directories: the containing directory's slot (root: 0). */
  get parentSlot(): number {
    return this.s.NI[this.i + N_PARENT]!;
  }
  set parentSlot(v: number) {
    this.s.NI[this.i + N_PARENT] = v;
  }
  /** Directories: live entries. */
  get entries(): number {
    return this.s.NI[this.i + N_ENTRIES]!;
  }
  get isDir(): boolean {
    return (this.mode & S_IFMT) === S_IFDIR;
  }
  get isReg(): boolean {
    return (this.mode & S_IFMT) === S_IFREG;
  }
  /** NODE_* flags (memfs-state.ts). */
  get flags(): number {
    return this.s.NI[this.i + N_FLAGS]!;
  }
  set flags(v: number) {
    this.s.NI[this.i + N_FLAGS] = v;
  }
  /** Symlinks: the target. */
  get target(): string | null {
    const off = this.s.NI[this.i + N_TARGET]!;
    return off === 0 ? null : this.s.getString(off, this.s.NI[this.i + N_TARGET_LEN]!);
  }
}

/** What copies() shares with the workers' views (structured-cloneable). */
export interface MemShared {
  kind: "memfs-shared-v2";
  options: Required<MemFSOptions>;
  buffers: MemBuffers;
}

/**
 * Every InodeFS method memfs implements that touches its state, and its diagnostics: each runs
 * under the state's mutex (wrapped at the end of this file). The three lists together name
 * every InodeFS handler memfs has, which test/lock-lists.test.ts checks: a new handler that is
 * in none of them fails the suite instead of running unlocked by accident.
 */
export const MEMFS_LOCKED = [
  "lookup", "forget", "getattr", "setattr", "readlink", "symlink", "mknod", "mkdir", "unlink", "rmdir", "rename", "link",
  "create", "tmpfile", "open", "release", "opendir", "readdir", "releasedir", "statfs", "setxattr", "getxattr", "listxattr",
  "removexattr", "access", "fallocate", "lseek", "copyFileRange", "stats", "lookupCount", "has", "dumpState",
] as const;
/** The hot path takes the mutex inside the method (no wrapper call per READ/WRITE). */
export const MEMFS_SELF_LOCKED = ["read", "write"] as const;
/**
 * Outside the state's mutex: the lock table has its own synchronisation (a waiting SETLKW must
 * not hold the mutex); fsync/fsyncdir have nothing to write back; copies() describes the
 * shared buffers to the thread plan before any request.
 */
export const MEMFS_UNLOCKED = ["flush", "getlk", "setlk", "flock", "fsync", "fsyncdir", "copies"] as const;

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
  /** The shared state this object is a view of. */
  protected readonly st: MemState;
  /** The options this filesystem was made with, resolved (what a view is made with). */
  protected readonly resolved: Required<MemFSOptions>;
  private plan: CopiesPlan | null = null;
  /** A view made by view() (a worker's): `--workers` loads it as a replicable filesystem. */
  replicable?: boolean;
  /** POSIX, OFD and flock locks (locks.ts): in the shared buffers, the same table in every view. */
  readonly locks: LockTable;

  constructor(options: MemFSOptions = {}, buffers?: MemBuffers) {
    const maxBytes = options.maxBytes ?? Math.min(Math.floor(totalmem() / 2 / PAGE) * PAGE, MAX_SEGMENTS * SEG_PAGES * PAGE);
    const maxInodes = options.maxInodes ?? Math.max(1024, Math.floor(totalmem() / 8192));
    if (!(maxBytes >= 0) || !Number.isSafeInteger(maxBytes)) throw new RangeError("memfs: maxBytes must be a non-negative integer");
    if (!(maxInodes >= 1) || !Number.isSafeInteger(maxInodes)) throw new RangeError("memfs: maxInodes must be a positive integer");
    if (Math.ceil(maxBytes / PAGE / SEG_PAGES) > MAX_SEGMENTS) throw new RangeError("memfs: maxBytes must be at most 1 TiB");
    this.maxBytes = maxBytes;
    this.maxInodes = maxInodes;
    const uid = options.uid ?? (typeof process.getuid === "function" ? process.getuid() : 0);
    const gid = options.gid ?? (typeof process.getgid === "function" ? process.getgid() : 0);
    this.resolved = { maxBytes, maxInodes, uid, gid, rootMode: options.rootMode ?? 0o755, lockBoundMs: options.lockBoundMs ?? 5000 };
    const maxPages = Math.floor(maxBytes / PAGE);
    this.st = new MemState(buffers ?? MemState.create(maxInodes, maxPages), maxPages, this.resolved.lockBoundMs);
    this.locks = new LockTable(this.st.buffers.locks);
    const m = this.st.mutex;
    m.lock();
    try {
      if (!this.st.ready) this.makeRoot(uid, gid, this.resolved.rootMode);
    } finally {
      m.unlock();
    }
  }

  private makeRoot(uid: number, gid: number, rootMode: number): void {
    const st = this.st;
    const slot = st.allocNode();
    if (slot !== ROOT) throw new Error("BUG: memfs: the root is not node 1");
    const root = new Node(st, slot);
    root.mode = S_IFDIR | (rootMode & 0o7777);
    root.nlink = 2;
    root.uid = uid;
    root.gid = gid;
    st.initDir(slot);
    root.size = 2 * BOGO_DIRENT_SIZE;
    this.touch(root, T_A | T_M | T_C);
    st.markReady();
  }

  /** The root directory. */
  get root(): Node {
    return new Node(this.st, ROOT);
  }

  // ---- views on other threads (--workers N) -------------------------------------------------

  /**
   * Serve from every worker thread: each worker makes a view of this filesystem's shared state
   * (memfs-copy.ts → MemFS.view); this instance is the main thread's view and applies FORGET
   * (sharedState). Null (forwarding mode) for a subclass or an instance whose handlers were
   * replaced (their code would not run in the workers' views). A wrapper that changes what
   * memfs answers must not pass this method on.
   *
   * Every operation of every thread is serialized by the one mutex (held about a microsecond
   * for a 4 KiB copy); the transports, the kernel and the byte copies run in parallel.
   */
  copies(): CopiesPlan | null {
    if (this.plan) return this.plan;
    // A subclass, or an instance whose handlers were replaced (`fs.lookup = …`): the views
    // would be plain MemFS, so the replaced handlers would run on this thread only.
    if (Object.getPrototypeOf(this) !== MemFS.prototype) return null;
    if (Object.keys(this).some((k) => typeof (this as unknown as Record<string, unknown>)[k] === "function")) return null;
    // The module each worker loads for its view (memfs-copy.ts; null: none can be loaded).
    const module = builtinCopyModule("memfs");
    if (!module) return null;
    const shared: MemShared = { kind: "memfs-shared-v2", options: this.resolved, buffers: this.st.buffers };
    this.plan = { module, shared, sharedState: true };
    return this.plan;
  }

  /** A view of the filesystem whose copies() made `shared` (in a worker; any time). */
  static view(shared: MemShared): MemFS {
    if (!shared || shared.kind !== "memfs-shared-v2") throw new Error("memfs: not the shared state of a memfs (copies())");
    const fs = new MemFS(shared.options, shared.buffers);
    fs.replicable = true;
    return fs;
  }

  /** Everything the shared state holds, as text (tests compare what views see with it). */
  dumpState(): string {
    const st = this.st;
    const out: unknown[] = [st.used, st.nodes.count, st.dirents.count, st.chunks.count, st.handles.count, st.pages.high, st.pages.freeCount];
    for (let slot = 1; slot < st.nodes.high; slot++) {
      const ino = st.idOf(slot);
      if (st.slotOf(ino) !== slot) continue;
      const n = new Node(st, slot);
      const names: unknown[] = [];
      if (n.isDir) {
        for (let k = 0; k < st.listLength(slot); k++) {
          const d = st.listDirent(slot, k);
          if (d !== 0) names.push([st.direntName(d), st.idOf(st.direntNode(d)), st.direntCookie(d)]);
        }
      }
      const chunks: unknown[] = [];
      for (let c = st.firstChunk(slot); c !== 0; c = st.chunkNext(c)) {
        const pages: number[] = [];
        for (let k = 0; k < st.CI[c * CHUNK_WORDS + C_PAGES]!; k++) pages.push(st.CI[c * CHUNK_WORDS + C_PAGE0 + k]!);
        chunks.push([st.chunkIndex(c), pages]);
      }
      out.push([
        ino, n.mode, n.nlink, n.uid, n.gid, n.rdev, n.size, n.atime, n.atimeNsec, n.mtime, n.mtimeNsec, n.ctime, n.ctimeNsec,
        n.lookups, n.opens, n.parentSlot, n.flags, n.allocated, n.target, names, chunks.sort((a, b) => (a as number[])[0]! - (b as number[])[0]!),
        [...st.xattrs(slot)].map(([k, v]) => [k, [...v]]),
      ]);
    }
    return JSON.stringify(out);
  }

  /** Usage counters (diagnostics and tests). */
  stats(): { inodes: number; usedBytes: number; openHandles: number } {
    return { inodes: this.st.nodes.count, usedBytes: this.st.used, openHandles: this.st.handles.count };
  }

  /** Lookup references the kernel holds on `ino` (0 if unknown). */
  lookupCount(ino: number): number {
    const slot = this.st.slotOf(ino);
    return slot === 0 ? 0 : new Node(this.st, slot).lookups;
  }

  /** Whether node `ino` still exists (not freed). */
  has(ino: number): boolean {
    return this.st.slotOf(ino) !== 0;
  }

  /** Times any thread had to wait for the state's mutex (diagnostics). */
  get lockWaits(): number {
    return this.st.mutex.waits;
  }

  // ---- helpers ------------------------------------------------------------------------------

  private touch(n: Node, which: number): void {
    readClock();
    const s = clockNow[0]!, ns = clockNow[1]!;
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
  }

  /** touch() by slot, for the data path (no Node view). */
  private touchSlot(slot: number, which: number): void {
    readClock(); // (no [s, ns] array: this runs under the lock on every WRITE)
    const s = clockNow[0]!, ns = clockNow[1]!;
    const NI = this.st.NI, NF = this.st.NF, i = slot * NODE_WORDS, f = i >> 1;
    if (which & T_A) {
      NF[f + NF_ATIME] = s;
      NI[i + N_ATIME_NS] = ns;
    }
    if (which & T_M) {
      NF[f + NF_MTIME] = s;
      NI[i + N_MTIME_NS] = ns;
    }
    if (which & T_C) {
      NF[f + NF_CTIME] = s;
      NI[i + N_CTIME_NS] = ns;
    }
  }

  /** relatime: update atime only if it is not newer than mtime/ctime or older than a day. */
  private accessed(slot: number): void {
    const NI = this.st.NI, NF = this.st.NF, i = slot * NODE_WORDS, f = i >> 1;
    const atime = NF[f + NF_ATIME]!, mtime = NF[f + NF_MTIME]!, ctime = NF[f + NF_CTIME]!;
    const ans = NI[i + N_ATIME_NS]!;
    if (
      atime < mtime || (atime === mtime && ans <= NI[i + N_MTIME_NS]!) ||
      atime < ctime || (atime === ctime && ans <= NI[i + N_CTIME_NS]!) ||
      Date.now() / 1000 - atime > 86400 // (a day's precision)
    ) {
      this.touchSlot(slot, T_A);
    }
  }

  private node(ino: number): Node {
    const slot = this.st.slotOf(ino);
    if (slot === 0) fail("ENOENT", `no node ${ino}`);
    return new Node(this.st, slot);
  }

  private dirNode(ino: number): Node {
    const n = this.node(ino);
    if (!n.isDir) fail("ENOTDIR");
    return n;
  }

  private regNode(ino: number): Node {
    const n = this.node(ino);
    if (!n.isReg) fail(n.isDir ? "EISDIR" : "EINVAL");
    return n;
  }

  /** The slot of regular file `ino` (the data path: no Node view). */
  private regSlot(ino: number): number {
    const slot = this.st.slotOf(ino);
    if (slot === 0) fail("ENOENT", `no node ${ino}`);
    const type = this.st.NI[slot * NODE_WORDS + N_MODE]! & S_IFMT;
    if (type !== S_IFREG) fail(type === S_IFDIR ? "EISDIR" : "EINVAL");
    return slot;
  }

  private parentOf(n: Node): Node {
    const p = n.parentSlot;
    return p === 0 ? n : new Node(this.st, p);
  }

  private attrOf(n: Node): Attr {
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
    const st = this.st;
    if (n.slot === ROOT || n.nlink > 0 || n.lookups > 0 || n.opens > 0) return;
    if (n.isReg) {
      this.addUsed(n.slot, -n.allocated);
      for (let c = st.firstChunk(n.slot); c !== 0; c = st.firstChunk(n.slot)) {
        this.releasePages(c, 0);
        st.dropChunk(c);
      }
    }
    if (n.isDir) st.freeDir(n.slot);
    st.setXattrs(n.slot, EMPTY_XATTRS);
    st.arena.free(st.NI[n.slot * NODE_WORDS + N_TARGET]!);
    st.freeNode(n.slot);
  }

  /**
   * Check that `name` can be created in `p` and allocate its entry (memfs-state.ts prepare):
   * after this the operation cannot fail for want of memory. Returns the prepared dirent.
   */
  private prepareCreate(p: Node, name: string): number {
    checkName(name);
    if (name === "." || name === "..") fail("EEXIST");
    if (p.nlink === 0) fail("ENOENT", "directory was removed");
    if (this.st.find(p.slot, name) !== 0) fail("EEXIST");
    if (this.st.nodes.count >= this.maxInodes) fail("ENOSPC", "out of inodes");
    return this.st.prepare(p.slot, name);
  }

  /** A new node owned by the caller (set-group-ID directories pass on their group). Room was checked. */
  private newNode(ctx: RequestContext, p: Node, mode: number): Node {
    let gid = ctx.gid;
    if (p.mode & S_ISGID) {
      gid = p.gid;
      if ((mode & S_IFMT) === S_IFDIR) mode |= S_ISGID;
    }
    if ((mode & S_IFMT) !== S_IFDIR && (mode & (S_ISGID | S_IXGRP)) === (S_ISGID | S_IXGRP) && ctx.uid !== 0 && ctx.gid !== gid) {
      mode &= ~S_ISGID;
    }
    return this.makeNode(mode, ctx.uid, gid);
  }

  private makeNode(mode: number, uid: number, gid: number): Node {
    const slot = this.st.allocNode();
    if (slot === 0) throw new Error("BUG: memfs: node table full below maxInodes");
    const n = new Node(this.st, slot);
    n.mode = mode;
    n.nlink = 1;
    n.uid = uid;
    n.gid = gid;
    if ((mode & S_IFMT) === S_IFDIR) this.st.initDir(slot);
    this.touch(n, T_A | T_M | T_C);
    return n;
  }

  /** Add `n` to `p` through prepared dirent `d`. */
  private attach(p: Node, d: number, n: Node): void {
    this.st.add(d, n.slot);
    p.size += BOGO_DIRENT_SIZE;
    if (n.isDir) {
      n.parentSlot = p.slot;
      p.nlink++;
    }
    this.touch(p, T_M | T_C);
  }

  /** Remove dirent `d` from `p`; does not change the target's nlink. Returns the target. */
  private detach(p: Node, d: number): Node {
    const n = new Node(this.st, this.st.direntNode(d));
    this.st.remove(d);
    p.size -= BOGO_DIRENT_SIZE;
    if (n.isDir) p.nlink--;
    return n;
  }

  /** Drop one link of `n` that was just detached. */
  private unlinked(n: Node): void {
    n.nlink = n.isDir ? 0 : n.nlink - 1;
    this.touch(n, T_C);
    this.maybeFree(n);
  }

  /** Whether `a` is `b` or one of b's ancestors (a directory). */
  private isAncestorOrSelf(a: Node, b: Node): boolean {
    for (let x = b.slot; x !== 0; x = new Node(this.st, x).parentSlot) if (x === a.slot) return true;
    return false;
  }

  private openHandle(n: Node, flags: number): number {
    const fh = this.st.openHandle(n.slot, flags);
    n.opens++;
    return fh;
  }

  private closeHandle(fh: number): void {
    const slot = this.st.handleNode(fh);
    if (slot === 0) return;
    this.st.closeHandle(fh);
    const n = new Node(this.st, slot);
    n.opens--;
    this.maybeFree(n);
  }

  // ---- file data ----------------------------------------------------------------------------
  // A chunk (memfs-state.ts) holds the first `pages × PAGE` bytes of its 64 KiB window; its
  // page numbers are words C_PAGE0.. of its record. The bytes live in the page store. These
  // helpers work on node slots (no Node view: the data path allocates nothing).

  private addUsed(slot: number, bytes: number): void {
    this.st.NF[(slot * NODE_WORDS >> 1) + NF_ALLOCATED]! += bytes;
    this.st.used += bytes;
  }

  /** Pages in chunk c. */
  private pagesOf(c: number): number {
    return this.st.CI[c * CHUNK_WORDS + C_PAGES]!;
  }

  /** Bytes that must be newly allocated so that chunks cover [start, end) (start < end). */
  private allocNeed(slot: number, start: number, end: number): number {
    const st = this.st;
    const c0 = Math.floor(start / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    const lastWant = roundPage(end - c1 * CHUNK_SIZE);
    const count = st.chunkCount(slot);
    if (count === 0) return (c1 - c0) * CHUNK_SIZE + lastWant;
    let need = 0;
    if (c1 - c0 < count) {
      for (let i = c0; i <= c1; i++) {
        const want = i === c1 ? lastWant : CHUNK_SIZE;
        const c = st.chunk(slot, i);
        const have = c === 0 ? 0 : this.pagesOf(c) * PAGE;
        if (want > have) need += want - have;
      }
    } else {
      need = (c1 - c0) * CHUNK_SIZE + lastWant;
      for (let c = st.firstChunk(slot); c !== 0; c = st.chunkNext(c)) {
        const i = st.chunkIndex(c);
        if (i < c0 || i > c1) continue;
        need -= Math.min(this.pagesOf(c) * PAGE, i === c1 ? lastWant : CHUNK_SIZE);
      }
    }
    return need;
  }

  /** The chunk `idx`, allocated or grown to hold at least `len` bytes. Space was checked. */
  private chunkFor(slot: number, idx: number, len: number): number {
    const st = this.st;
    let c = st.chunk(slot, idx);
    if (c === 0) c = st.newChunk(slot, idx);
    const want = Math.ceil(len / PAGE);
    const CI = st.CI, at = c * CHUNK_WORDS;
    const have = CI[at + C_PAGES]!;
    if (have >= want) return c;
    const store = st.pages;
    for (let k = have; k < want; k++) {
      const p = store.alloc();
      if (store.reused) store.viewOf(p).fill(0, pageOffset(p), pageOffset(p) + PAGE);
      CI[at + C_PAGE0 + k] = p;
    }
    CI[at + C_PAGES] = want;
    this.addUsed(slot, (want - have) * PAGE);
    return c;
  }

  /** Copy data[src, src + len) into chunk `c` at byte `inOff` (the pages exist). */
  private copyIn(c: number, inOff: number, data: Uint8Array, src: number, len: number): void {
    const store = this.st.pages, CI = this.st.CI, at = c * CHUNK_WORDS + C_PAGE0;
    while (len > 0) {
      const k = Math.floor(inOff / PAGE);
      const po = inOff - k * PAGE;
      const take = Math.min(PAGE - po, len);
      const p = CI[at + k]!;
      bufferCopy.call(data, store.viewOf(p), pageOffset(p) + po, src, src + take);
      inOff += take;
      src += take;
      len -= take;
    }
  }

  /** Copy chunk `c` bytes [inOff, inOff + len) (inside its pages) into out at `dst`. */
  private copyOut(c: number, inOff: number, out: Uint8Array, dst: number, len: number): void {
    const store = this.st.pages, CI = this.st.CI, base = c * CHUNK_WORDS + C_PAGE0;
    while (len > 0) {
      const k = Math.floor(inOff / PAGE);
      const po = inOff - k * PAGE;
      const take = Math.min(PAGE - po, len);
      const p = CI[base + k]!;
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

  /** Zero chunk bytes [a, b) (inside its pages). */
  private zeroIn(c: number, a: number, b: number): void {
    const store = this.st.pages, CI = this.st.CI, base = c * CHUNK_WORDS + C_PAGE0;
    while (a < b) {
      const k = Math.floor(a / PAGE);
      const po = a - k * PAGE;
      const take = Math.min(PAGE - po, b - a);
      const p = CI[base + k]!;
      const at = pageOffset(p) + po;
      const v = store.views[Math.floor(p / SEG_PAGES)]!;
      if (v.length >= at + take) v.fill(0, at, at + take); // (past the grown length: zero already)
      a += take;
    }
  }

  /** Copy `len` bytes of `data` into the file at `pos` (does not change size or times). Throws ENOSPC. */
  private writeBytes(slot: number, pos: number, data: Uint8Array, len: number): void {
    if (len === 0) return;
    const end = pos + len;
    const need = this.allocNeed(slot, pos, end);
    if (need > 0 && this.st.used + need > this.maxBytes) fail("ENOSPC");
    let src = 0;
    while (src < len) {
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, len - src);
      const chunk = this.chunkFor(slot, idx, inOff + take);
      this.copyIn(chunk, inOff, data, src, take);
      src += take;
      pos += take;
    }
  }

  /** Copy file bytes [pos, pos + count) into out[0..count) (holes read as zeros). */
  private readBytes(slot: number, pos: number, count: number, out: Uint8Array): void {
    const st = this.st;
    let dst = 0;
    while (dst < count) {
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, count - dst);
      const c = st.chunk(slot, idx);
      const have = c === 0 ? 0 : this.pagesOf(c) * PAGE;
      if (c !== 0 && inOff < have) {
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

  /** Give back chunk c's pages from page `keep` on. */
  private releasePages(c: number, keep: number): void {
    const CI = this.st.CI, at = c * CHUNK_WORDS;
    for (let k = CI[at + C_PAGES]! - 1; k >= keep; k--) this.st.pages.release(CI[at + C_PAGE0 + k]!);
    CI[at + C_PAGES] = keep;
  }

  private dropChunk(slot: number, c: number): void {
    this.addUsed(slot, -this.pagesOf(c) * PAGE);
    this.releasePages(c, 0);
    this.st.dropChunk(c);
  }

  /** Keep the first `pages` pages of chunk `c`. */
  private shrinkChunk(slot: number, c: number, pages: number): void {
    this.addUsed(slot, -(this.pagesOf(c) - pages) * PAGE);
    this.releasePages(c, pages);
  }

  /** Zero [start, end) and free what becomes unneeded (punch hole). Does not change size. */
  private zeroRange(slot: number, start: number, end: number): void {
    const st = this.st;
    const count = st.chunkCount(slot);
    if (end <= start || count === 0) return;
    const c0 = Math.floor(start / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    const visit = (idx: number, c: number): void => {
      const base = idx * CHUNK_SIZE;
      const a = Math.max(start, base) - base;
      const b = Math.min(end, base + CHUNK_SIZE) - base;
      const have = this.pagesOf(c) * PAGE;
      if (a >= have) return;
      if (b >= have) {
        if (a === 0) this.dropChunk(slot, c);
        else if (a % PAGE === 0) this.shrinkChunk(slot, c, a / PAGE);
        else {
          const keep = roundPage(a);
          this.zeroIn(c, a, keep);
          if (keep < have) this.shrinkChunk(slot, c, keep / PAGE);
        }
      } else {
        this.zeroIn(c, a, b);
      }
    };
    if (c1 - c0 < count) {
      for (let i = c0; i <= c1; i++) {
        const c = st.chunk(slot, i);
        if (c !== 0) visit(i, c);
      }
    } else {
      // Collect first: visit may drop chunks from the list.
      const hit: number[] = [];
      for (let c = st.firstChunk(slot); c !== 0; c = st.chunkNext(c)) {
        const i = st.chunkIndex(c);
        if (i >= c0 && i <= c1) hit.push(c);
      }
      for (const c of hit) visit(st.chunkIndex(c), c);
    }
  }

  /** Change the size of a regular file; shrinking frees and zeroes everything past the new end. */
  private resize(n: Node, size: number): void {
    // Shrinking also drops chunks preallocated past EOF (FALLOC_FL_KEEP_SIZE), like Linux.
    if (size < n.size) this.zeroRange(n.slot, size, Number.MAX_SAFE_INTEGER);
    n.size = size;
  }

  private killSuidSgid(n: Node): void {
    let mode = n.mode & ~S_ISUID;
    if (mode & S_IXGRP) mode &= ~S_ISGID;
    n.mode = mode;
  }

  // ---- InodeFS: names -----------------------------------------------------------------------

  /** A missing name is `null`, not a throw: most LOOKUPs before a create are misses. */
  lookup(_ctx: RequestContext, parent: number, name: string): Entry | null {
    const p = this.dirNode(parent);
    if (name === ".") return this.entry(p);
    if (name === "..") return this.entry(this.parentOf(p));
    checkName(name);
    const d = this.st.find(p.slot, name);
    if (d === 0) return null;
    return this.entry(new Node(this.st, this.st.direntNode(d)));
  }

  forget(ino: number, nlookup: number): void {
    const slot = this.st.slotOf(ino);
    if (slot === 0) return;
    const n = new Node(this.st, slot);
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
      if (!n.isReg) fail("EINVAL");
      if (!Number.isInteger(size) || size < 0) fail("EINVAL");
      if (size > MAX_FILE_SIZE) fail("EFBIG");
    }
    for (const t of [atime, mtime, ctime]) {
      if (t !== undefined && t !== "now" && (!Number.isInteger(t[0]) || !Number.isInteger(t[1]) || t[1] < 0 || t[1] >= 1e9)) {
        fail("EINVAL", "bad timestamp");
      }
    }
    const [nowS, nowNs] = nowTimespec();
    if (size !== undefined && n.isReg) {
      if (size !== n.size) {
        this.resize(n, size);
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
    return this.attrOf(n);
  }

  readlink(_ctx: RequestContext, ino: number): string {
    const n = this.node(ino);
    const target = n.target;
    if (target === null) fail("EINVAL");
    this.accessed(n.slot);
    return target;
  }

  symlink(ctx: RequestContext, parent: number, name: string, target: string): Entry {
    const p = this.dirNode(parent);
    checkName(name);
    if (target.length === 0) fail("ENOENT");
    const len = nameByteLength(target);
    if (len >= PATH_MAX) fail("ENAMETOOLONG");
    const d = this.prepareCreate(p, name);
    const off = this.st.putString(target);
    if (off === 0) {
      this.st.unprepare(d);
      fail("ENOSPC", "memfs: name arena full");
    }
    const n = this.newNode(ctx, p, S_IFLNK | 0o777);
    this.st.NI[n.slot * NODE_WORDS + N_TARGET] = off;
    this.st.NI[n.slot * NODE_WORDS + N_TARGET_LEN] = target.length;
    n.size = len;
    this.attach(p, d, n);
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
    const d = this.prepareCreate(p, name);
    const n = this.newNode(ctx, p, type | (mode & 0o7777 & ~umask));
    if (type === S_IFCHR || type === S_IFBLK) n.rdev = rdev;
    this.attach(p, d, n);
    return this.entry(n);
  }

  mkdir(ctx: RequestContext, parent: number, name: string, mode: number, umask: number): Entry {
    const p = this.dirNode(parent);
    const d = this.prepareCreate(p, name);
    const n = this.newNode(ctx, p, S_IFDIR | (mode & 0o7777 & ~umask));
    n.nlink = 2;
    n.size = 2 * BOGO_DIRENT_SIZE;
    this.attach(p, d, n);
    return this.entry(n);
  }

  unlink(_ctx: RequestContext, parent: number, name: string): void {
    const p = this.dirNode(parent);
    checkName(name);
    const d = this.st.find(p.slot, name);
    if (d === 0) fail(name === "." || name === ".." ? "EISDIR" : "ENOENT");
    if (new Node(this.st, this.st.direntNode(d)).isDir) fail("EISDIR");
    const n = this.detach(p, d);
    this.touch(p, T_M | T_C);
    this.unlinked(n);
  }

  rmdir(_ctx: RequestContext, parent: number, name: string): void {
    const p = this.dirNode(parent);
    if (name === ".") fail("EINVAL");
    if (name === "..") fail("ENOTEMPTY");
    checkName(name);
    const d = this.st.find(p.slot, name);
    if (d === 0) fail("ENOENT");
    const n = new Node(this.st, this.st.direntNode(d));
    if (!n.isDir) fail("ENOTDIR");
    if (n.entries > 0) fail("ENOTEMPTY");
    this.detach(p, d);
    this.touch(p, T_M | T_C);
    this.unlinked(n);
  }

  rename(_ctx: RequestContext, parent: number, name: string, newParent: number, newName: string, flags: number): void {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) fail("EINVAL", "unknown rename flags");
    if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))) fail("EINVAL");
    const st = this.st;
    const op = this.dirNode(parent);
    const np = this.dirNode(newParent);
    checkName(name);
    checkName(newName);
    if (name === "." || name === ".." || newName === "." || newName === "..") fail("EBUSY");
    const se = st.find(op.slot, name);
    if (se === 0) fail("ENOENT");
    const src = new Node(st, st.direntNode(se));
    const te = st.find(np.slot, newName);
    const tgt = te === 0 ? null : new Node(st, st.direntNode(te));
    if ((flags & RENAME_NOREPLACE) && tgt) fail("EEXIST");
    if ((flags & RENAME_EXCHANGE) && !tgt) fail("ENOENT");
    if (np.nlink === 0) fail("ENOENT");
    // A directory cannot move into its own subtree; the target cannot be an ancestor of the source.
    if (src.isDir && this.isAncestorOrSelf(src, np)) fail("EINVAL", "cannot move a directory into itself");
    if (tgt?.isDir && this.isAncestorOrSelf(tgt, op)) fail(flags & RENAME_EXCHANGE ? "EINVAL" : "ENOTEMPTY");
    if (tgt && src.slot === tgt.slot) return; // same inode: POSIX says do nothing
    const exchange = (flags & RENAME_EXCHANGE) !== 0;
    if (tgt && !exchange) {
      if (src.isDir && !tgt.isDir) fail("ENOTDIR");
      if (!src.isDir && tgt.isDir) fail("EISDIR");
      if (tgt.isDir && tgt.entries > 0) fail("ENOTEMPTY");
    }
    const whiteout = (flags & RENAME_WHITEOUT) !== 0;
    if (whiteout && st.nodes.count >= this.maxInodes) fail("ENOSPC");

    if (exchange && tgt) {
      st.setDirentNode(se, tgt.slot);
      st.setDirentNode(te, src.slot);
      if (op.slot !== np.slot) {
        if (src.isDir) {
          src.parentSlot = np.slot;
          op.nlink--;
          np.nlink++;
        }
        if (tgt.isDir) {
          tgt.parentSlot = op.slot;
          np.nlink--;
          op.nlink++;
        }
      }
      this.touch(src, T_C);
      this.touch(tgt, T_C);
      this.touch(op, T_M | T_C);
      if (np.slot !== op.slot) this.touch(np, T_M | T_C);
      return;
    }

    // Allocate first (the new entry, the whiteout's), then change.
    const d = st.prepare(np.slot, newName);
    let dw = 0;
    if (whiteout) {
      try {
        dw = st.prepare(op.slot, name);
      } catch (e) {
        st.unprepare(d);
        throw e;
      }
    }
    if (tgt) {
      this.detach(np, te);
      this.unlinked(tgt);
    }
    this.detach(op, se);
    this.attach(np, d, src);
    this.touch(src, T_C);
    this.touch(op, T_M | T_C);
    if (whiteout) this.attach(op, dw, this.makeNode(S_IFCHR, src.uid, src.gid));
  }

  link(_ctx: RequestContext, ino: number, newParent: number, newName: string): Entry {
    const n = this.node(ino);
    const p = this.dirNode(newParent);
    if (n.isDir) fail("EPERM", "hard links to directories are not allowed");
    checkName(newName);
    if (newName === "." || newName === "..") fail("EEXIST");
    if (p.nlink === 0) fail("ENOENT");
    if (this.st.find(p.slot, newName) !== 0) fail("EEXIST");
    if (n.nlink === 0 && !(n.flags & NODE_LINKABLE)) fail("ENOENT", "source was unlinked");
    const d = this.st.prepare(p.slot, newName);
    n.flags &= ~NODE_LINKABLE; // its first name: from now on an ordinary file
    n.nlink++;
    this.touch(n, T_C);
    this.attach(p, d, n);
    return this.entry(n);
  }

  // ---- InodeFS: files -----------------------------------------------------------------------

  create(ctx: RequestContext, parent: number, name: string, mode: number, umask: number, flags: number): CreateReply {
    const p = this.dirNode(parent);
    checkName(name);
    const existing = this.st.find(p.slot, name);
    let n: Node;
    if (existing !== 0) {
      if (flags & O_EXCL) fail("EEXIST");
      n = new Node(this.st, this.st.direntNode(existing));
      if (n.isDir) fail("EISDIR");
      if (!this.st.handles.canAlloc()) fail("ENFILE");
      if ((flags & O_TRUNC) && n.isReg) {
        this.resize(n, 0);
        this.touch(n, T_M | T_C);
      }
    } else {
      if (!this.st.handles.canAlloc()) fail("ENFILE");
      const d = this.prepareCreate(p, name);
      n = this.newNode(ctx, p, S_IFREG | (mode & 0o7777 & ~umask));
      this.attach(p, d, n);
    }
    const fh = this.openHandle(n, flags);
    return { entry: this.entry(n), open: { fh } };
  }

  open(_ctx: RequestContext, ino: number, flags: number): OpenReply {
    const n = this.node(ino);
    if (n.isDir) fail("EISDIR");
    if (!this.st.handles.canAlloc()) fail("ENFILE");
    if ((flags & O_TRUNC) && n.isReg) {
      this.resize(n, 0);
      this.touch(n, T_M | T_C);
    }
    return { fh: this.openHandle(n, flags) };
  }

  read(_ctx: RequestContext, ino: number, _fh: number, offset: number, size: number, out: Uint8Array): number {
    const m = this.st.mutex;
    m.lock();
    try {
      const slot = this.regSlot(ino);
      if (offset < 0) fail("EINVAL");
      const fileSize = this.st.NF[(slot * NODE_WORDS >> 1) + NF_SIZE]!;
      if (offset >= fileSize || size === 0) return 0;
      const count = Math.min(size, fileSize - offset, out.length);
      this.readBytes(slot, offset, count, out);
      this.accessed(slot);
      return count;
    } finally {
      m.unlock();
    }
  }

  write(_ctx: RequestContext, ino: number, _fh: number, offset: number, data: Uint8Array, writeFlags: number, _openFlags: number): number {
    const m = this.st.mutex;
    m.lock();
    try {
      const slot = this.regSlot(ino);
      if (offset < 0) fail("EINVAL");
      const len = data.length;
      if (len === 0) return 0;
      if (offset + len > MAX_FILE_SIZE) fail("EFBIG");
      this.writeBytes(slot, offset, data, len);
      const f = (slot * NODE_WORDS >> 1) + NF_SIZE;
      if (offset + len > this.st.NF[f]!) this.st.NF[f] = offset + len;
      if (writeFlags & FUSE_WRITE_KILL_SUIDGID) this.killSuidSgid(new Node(this.st, slot));
      this.touchSlot(slot, T_M | T_C);
      return len;
    } finally {
      m.unlock();
    }
  }

  /** Closing any descriptor ends the POSIX locks its process (lockOwner) holds on the file. */
  flush(_ctx?: RequestContext, ino?: number, _fh?: number, lockOwner?: bigint): void {
    if (ino !== undefined && typeof lockOwner === "bigint") this.locks.unlockOwner(ino, lockOwner, LOCK_POSIX);
  }

  release(_ctx: RequestContext, _ino: number, fh: number, _flags: number): void {
    // OFD and flock locks end with their open file. First, under the mutex: once the handle is
    // closed another thread may be given the same fh.
    this.locks.releaseFh(fh);
    this.closeHandle(fh);
  }

  /** O_TMPFILE: a regular file with no name (nlink 0), open; LINK may name it once. */
  tmpfile(ctx: RequestContext, parent: number, mode: number, umask: number, flags: number): CreateReply {
    const p = this.dirNode(parent);
    if (p.nlink === 0) fail("ENOENT", "directory was removed");
    // Check every allocation before changing anything (failure-atomic, like create).
    if (this.st.nodes.count >= this.maxInodes) fail("ENOSPC", "out of inodes");
    if (!this.st.handles.canAlloc()) fail("ENFILE");
    const n = this.newNode(ctx, p, S_IFREG | (mode & 0o7777 & ~umask));
    n.nlink = 0;
    n.flags |= NODE_LINKABLE;
    const fh = this.openHandle(n, flags);
    return { entry: this.entry(n), open: { fh } };
  }

  // ---- locks: thin delegation to the shared lock table (locks.ts; no memfs mutex) ------------

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
    if (!this.st.handles.canAlloc()) fail("ENFILE");
    return { fh: this.openHandle(n, flags) };
  }

  readdir(_ctx: RequestContext, ino: number, _fh: number, offset: number, filler: DirFiller): void {
    const st = this.st;
    const n = this.dirNode(ino);
    if (n.nlink === 0) return; // removed directory: empty, without even "." and ".."
    const plus = filler.plus;
    if (offset < 1) {
      if (!filler.add(".", 1, { ino: n.ino, attr: this.attrOf(n) })) return;
    }
    if (offset < 2) {
      const up = this.parentOf(n);
      if (!filler.add("..", 2, { ino: up.ino, attr: this.attrOf(up) })) return;
    }
    const len = st.listLength(n.slot);
    for (let k = st.firstAfter(n.slot, offset); k < len; k++) {
      const d = st.listDirent(n.slot, k);
      if (d === 0) continue;
      const c = new Node(st, st.direntNode(d));
      if (!filler.add(st.direntName(d), st.direntCookie(d), { ino: c.ino, attr: this.attrOf(c) })) break;
      if (plus) c.lookups++;
    }
    this.accessed(n.slot);
  }

  releasedir(_ctx: RequestContext, _ino: number, fh: number): void {
    this.closeHandle(fh);
  }

  fsyncdir(): void {}

  // ---- InodeFS: misc ------------------------------------------------------------------------

  statfs(): Statfs {
    const blocks = Math.floor(this.maxBytes / PAGE);
    const free = Math.max(0, Math.floor((this.maxBytes - this.st.used) / PAGE));
    return {
      blocks,
      bfree: free,
      bavail: free,
      files: this.maxInodes,
      ffree: Math.max(0, this.maxInodes - this.st.nodes.count),
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
    if (ns === "user" && !n.isReg && !n.isDir) fail("EPERM", "user xattrs only on files and directories");
    if (name === "system.posix_acl_default" && !n.isDir) fail("EACCES");
    const set = this.st.xattrs(n.slot);
    const old = set.get(name);
    if ((flags & XATTR_CREATE) && old) fail("EEXIST");
    if ((flags & XATTR_REPLACE) && !old) fail("ENODATA");
    set.set(name, value);
    this.st.setXattrs(n.slot, set); // (copies the value)
    this.touch(n, T_C);
  }

  getxattr(_ctx: RequestContext, ino: number, name: string): Uint8Array {
    const n = this.node(ino);
    this.xattrNamespace(name);
    const v = this.st.xattr(n.slot, name);
    if (!v) fail("ENODATA");
    return v;
  }

  listxattr(_ctx: RequestContext, ino: number): string[] {
    const n = this.node(ino);
    return this.st.hasXattrs(n.slot) ? [...this.st.xattrs(n.slot).keys()] : [];
  }

  removexattr(_ctx: RequestContext, ino: number, name: string): void {
    const n = this.node(ino);
    const ns = this.xattrNamespace(name);
    if (ns === "user" && !n.isReg && !n.isDir) fail("EPERM");
    const set = this.st.xattrs(n.slot);
    if (!set.delete(name)) fail("ENODATA");
    this.st.setXattrs(n.slot, set);
    this.touch(n, T_C);
  }

  access(ctx: RequestContext, ino: number, mask: number): void {
    const n = this.node(ino);
    mask &= R_OK | W_OK | X_OK;
    if (mask === 0) return;
    if (ctx.uid === 0) {
      // root may read and write anything; execute needs some x bit (directories: always searchable)
      if ((mask & X_OK) && !n.isDir && (n.mode & 0o111) === 0) fail("EACCES");
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
      this.zeroRange(n.slot, offset, end);
      this.touch(n, T_M | T_C);
      return;
    }
    const need = this.allocNeed(n.slot, offset, end);
    if (need > 0 && this.st.used + need > this.maxBytes) fail("ENOSPC");
    const c0 = Math.floor(offset / CHUNK_SIZE);
    const c1 = Math.floor((end - 1) / CHUNK_SIZE);
    for (let i = c0; i <= c1; i++) this.chunkFor(n.slot, i, i === c1 ? end - c1 * CHUNK_SIZE : CHUNK_SIZE);
    if (!(mode & FALLOC_FL_KEEP_SIZE) && end > n.size) n.size = end;
    this.touch(n, T_C);
  }

  lseek(_ctx: RequestContext, ino: number, _fh: number, offset: number, whence: number): number {
    const st = this.st;
    const n = this.regNode(ino);
    if (whence !== SEEK_DATA && whence !== SEEK_HOLE) fail("EINVAL");
    if (offset < 0 || offset >= n.size) fail("ENXIO");
    const size = n.size;
    const slot = n.slot;
    const bytesIn = (idx: number): number => {
      const c = st.chunk(slot, idx);
      return c === 0 ? 0 : this.pagesOf(c) * PAGE;
    };
    if (whence === SEEK_HOLE) {
      let pos = offset;
      for (;;) {
        const idx = Math.floor(pos / CHUNK_SIZE);
        const base = idx * CHUNK_SIZE;
        const have = bytesIn(idx);
        if (pos >= base + have) return Math.min(pos, size);
        if (have < CHUNK_SIZE) return Math.min(base + have, size);
        pos = base + CHUNK_SIZE;
        if (pos >= size) return size;
      }
    }
    // SEEK_DATA
    const idx = Math.floor(offset / CHUNK_SIZE);
    if (offset < idx * CHUNK_SIZE + bytesIn(idx)) return offset;
    const lastIdx = Math.floor((size - 1) / CHUNK_SIZE);
    let next = -1;
    if (lastIdx - idx <= st.chunkCount(slot)) {
      for (let i = idx + 1; i <= lastIdx; i++) {
        if (st.chunk(slot, i) !== 0) {
          next = i;
          break;
        }
      }
    } else {
      for (let c = st.firstChunk(slot); c !== 0; c = st.chunkNext(c)) {
        const i = st.chunkIndex(c);
        if (i > idx && i <= lastIdx && (next < 0 || i < next)) next = i;
      }
    }
    if (next < 0) fail("ENXIO");
    return next * CHUNK_SIZE;
  }

  copyFileRange(_ctx: RequestContext, inoIn: number, _fhIn: number, offIn: number, inoOut: number, _fhOut: number, offOut: number, len: number, flags: number): number {
    if (flags !== 0) fail("EINVAL");
    const st = this.st;
    const src = this.regNode(inoIn);
    const dst = this.regNode(inoOut);
    if (offIn < 0 || offOut < 0 || len < 0) fail("EINVAL");
    if (src.slot === dst.slot && offIn < offOut + len && offOut < offIn + len) fail("EINVAL", "overlapping ranges in one file");
    if (offIn >= src.size || len === 0) return 0;
    const count = Math.min(len, src.size - offIn);
    if (offOut + count > MAX_FILE_SIZE) fail("EFBIG");
    let done = 0;
    let bytes: Uint8Array | null = null;
    while (done < count) {
      const pos = offIn + done;
      const idx = Math.floor(pos / CHUNK_SIZE);
      const inOff = pos - idx * CHUNK_SIZE;
      const take = Math.min(CHUNK_SIZE - inOff, count - done);
      const c = st.chunk(src.slot, idx);
      const have = c === 0 ? 0 : this.pagesOf(c) * PAGE;
      const dpos = offOut + done;
      try {
        if (c !== 0 && inOff < have) {
          const avail = Math.min(take, have - inOff);
          // Through a buffer: source and target may be one file.
          bytes ??= new Uint8Array(CHUNK_SIZE);
          this.copyOut(c, inOff, bytes, 0, avail);
          this.writeBytes(dst.slot, dpos, bytes, avail);
          if (avail < take) this.zeroRange(dst.slot, dpos + avail, dpos + take);
        } else {
          this.zeroRange(dst.slot, dpos, dpos + take); // keep holes sparse
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

const EMPTY_XATTRS = new Map<string, Uint8Array>();

// Every handler (and diagnostic) runs under the state's mutex: one lock, held for the
// operation only. READ and WRITE take it themselves (the hot path: no wrapper call). The
// wrapper passes arguments one by one (no rest array: nothing allocated per request).
{
  const P = MemFS.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
  for (const name of MEMFS_LOCKED) {
    const f = P[name];
    if (typeof f !== "function") throw new Error(`BUG: memfs has no method ${name}`);
    const locked = function (this: MemFS, a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, g: unknown, h: unknown, i: unknown, j: unknown) {
      const m = (this as unknown as { st: MemState }).st.mutex;
      m.lock();
      try {
        return f.call(this, a, b, c, d, e, g, h, i, j);
      } finally {
        m.unlock();
      }
    };
    Object.defineProperty(locked, "name", { value: name });
    P[name] = locked;
  }
}

/** A new in-memory filesystem. */
export function memfs(options?: MemFSOptions): MemFS {
  return new MemFS(options);
}
