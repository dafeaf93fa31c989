// memfs's whole state in SharedArrayBuffers: every thread's MemFS is a view over the same
// state, and an operation takes the one mutex (lib/shared/mutex.ts), works on shared memory and
// lets go. No thread holds a copy of anything, so a thread can start or stop at any time and
// metadata memory does not grow with the number of threads.
//
// - meta: a small fixed buffer: the mutex, the bookkeeping of every table below, counters.
// - nodes (Slab, NODE_WORDS): type/mode/nlink/uid/gid/rdev/size/times/lookups/opens, the parent,
//   the heads of the node's chunk list, directory list, xattrs and symlink target. Node id =
//   generation × 2^32 + slot: any thread decodes an id alike, and the id of a freed node is
//   recognised as stale after the slot is reused.
// - dirents (Slab, DIRENT_WORDS): directory, node, name (arena, UTF-16 units: names are JS
//   strings whose lone surrogates stand for raw bytes, so units are lossless), cookie; found by
//   name through a chained hash table (dirBuckets). Each directory also keeps its entries in
//   cookie order (an arena array of {cookie, dirent}): readdir resumes at the first entry whose
//   cookie is greater than the offset, so offsets stay valid across concurrent unlinks and
//   creates (POSIX readdir). A removed entry leaves a hole (dirent 0) until holes are half the
//   array.
// - chunks (Slab, CHUNK_WORDS): a regular file's data in 64 KiB windows: up to 16 page numbers
//   (the first `pages × 4096` bytes of the window); found by (node, window) through a chained
//   hash table (chunkBuckets); each node's chunks are also in a list (truncate, SEEK_DATA).
// - handles (Slab): open file/directory handles (fh = slot): node and flags.
// - arena: names, symlink targets, xattr sets, directory lists.
// - pages: file bytes (lib/shared/pages.ts).
// - locks: the POSIX/OFD/flock lock table (locks.ts; its own mutex: a blocking lock request
//   waits without holding the state's mutex).
//
// Every growable buffer is reserved up front (virtual space only) and shared when the state is
// made, so a thread that starts later sees every byte.

import { ARENA_WORDS, Arena } from "../shared/arena.ts";
import { growable } from "../shared/growable.ts";
import { MUTEX_WORDS, SharedMutex } from "../shared/mutex.ts";
import { PAGES_WORDS, PageStore, pageFreeStack } from "../shared/pages.ts";
import { SLAB_WORDS, Slab } from "../shared/slab.ts";
import { FuseError } from "./errors.ts";
import { LockTable } from "./locks.ts";

export const TWO32 = 4294967296;

/** What crosses to other threads (structured-cloneable: plain data and SharedArrayBuffers). */
export interface MemBuffers {
  meta: SharedArrayBuffer;
  nodes: SharedArrayBuffer;
  dirents: SharedArrayBuffer;
  chunks: SharedArrayBuffer;
  handles: SharedArrayBuffer;
  dirBuckets: SharedArrayBuffer;
  chunkBuckets: SharedArrayBuffer;
  arena: SharedArrayBuffer;
  pageFree: SharedArrayBuffer;
  segs: SharedArrayBuffer[];
  /** The lock table (locks.ts): one for every view, so locks hold across threads. */
  locks: SharedArrayBuffer;
}

// ---- meta words ----------------------------------------------------------------------------
const M_MUTEX = 0;
const M_NODES = M_MUTEX + MUTEX_WORDS;
const M_DIRENTS = M_NODES + SLAB_WORDS;
const M_CHUNKS = M_DIRENTS + SLAB_WORDS;
const M_HANDLES = M_CHUNKS + SLAB_WORDS;
const M_PAGES = M_HANDLES + SLAB_WORDS;
const M_DIR_BUCKETS = M_PAGES + PAGES_WORDS; // bucket count (power of two)
const M_CHUNK_BUCKETS = M_DIR_BUCKETS + 1;
const M_READY = M_CHUNK_BUCKETS + 1;
const M_ARENA = M_READY + 1;
const M_END = M_ARENA + ARENA_WORDS;
/** Float64 counters after the Int32 words. */
const MF_USED = Math.ceil(M_END / 2) + 1; // bytes of file data allocated
const META_BYTES = (MF_USED + 4) * 8;

// ---- a node: NODE_WORDS Int32 words (Float64 fields at even words) ---------------------------
export const NODE_WORDS = 40;
// word 0: the slab's free-list link
export const N_GEN = 1;
export const N_MODE = 2;
export const N_NLINK = 3;
export const N_UID = 4;
export const N_GID = 5;
export const N_OPENS = 6;
export const N_PARENT = 7; // directories: the containing directory's slot (root: 0)
export const N_XATTRS = 8; // arena block of the xattr set (0: none)
export const N_TARGET = 9; // arena block of the symlink target (0: none)
export const N_TARGET_LEN = 10; // its UTF-16 units
export const N_LIST = 11; // directories: arena block of the cookie-ordered entry list
export const N_LIST_LEN = 12; // its records (holes included)
export const N_LIST_DEAD = 13; // holes
export const N_ENTRIES = 14; // live entries
export const N_CHUNK_HEAD = 15; // regular files: first chunk of the node's list
export const N_CHUNKS = 16; // chunks in the list
export const N_RDEV = 17;
export const N_ATIME_NS = 18;
export const N_MTIME_NS = 19;
export const N_CTIME_NS = 20;
export const N_USED = 21; // 1 while the node exists
export const N_FLAGS = 22; // NODE_* bits
// Float64 fields: index (slot × NODE_WORDS / 2 + field)
export const NF_SIZE = 12;
export const NF_LOOKUPS = 13;
export const NF_ALLOCATED = 14;
export const NF_ATIME = 15;
export const NF_MTIME = 16;
export const NF_CTIME = 17;
export const NF_NEXT_COOKIE = 18;

/** N_FLAGS: an O_TMPFILE node never linked yet: LINK may give it a first name although nlink is 0. */
export const NODE_LINKABLE = 1;

// ---- a dirent ------------------------------------------------------------------------------
const DIRENT_WORDS = 10;
const D_DIR = 1;
const D_NODE = 2;
const D_NAME = 3; // arena block of the name's UTF-16 units
const D_LEN = 4;
const D_HNEXT = 5;
const D_HASH = 6;
const DF_COOKIE = 4; // Float64 field (words 8, 9)

// ---- a chunk -------------------------------------------------------------------------------
export const CHUNK_WORDS = 24;
const C_NODE = 1;
export const C_PAGES = 2; // pages in use
const C_HNEXT = 3;
const C_NEXT = 4;
const C_PREV = 5;
const CF_INDEX = 3; // Float64 field: the window's index in the file
export const C_PAGE0 = 8; // 16 page numbers
export const CHUNK_PAGES = 16;

// ---- a handle ------------------------------------------------------------------------------
const HANDLE_WORDS = 4;
const H_NODE = 1;
const H_FLAGS = 2;

// ---- a directory list record: Float64 cookie, Int32 dirent, Int32 spare (16 bytes) -----------
const LIST_REC = 16;

const BUCKETS_INITIAL = 1024;
const GiB = 1 << 30;

function oom(what: string): never {
  throw new FuseError("ENOSPC", `memfs: ${what} full`);
}

/** Hash of a name in a directory (FNV-1a over the UTF-16 units, mixed with the directory). */
function nameHash(dir: number, name: string): number {
  let h = 0x811c9dc5 ^ Math.imul(dir, 0x9e3779b1);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h | 0;
}

function chunkHash(node: number, index: number): number {
  const lo = index >>> 0, hi = (index / TWO32) >>> 0;
  return (Math.imul(node, 0x9e3779b1) ^ Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0xc2b2ae35)) | 0;
}

export class MemState {
  readonly M: Int32Array;
  readonly MF: Float64Array;
  readonly mutex: SharedMutex;
  readonly nodes: Slab;
  readonly dirents: Slab;
  readonly chunks: Slab;
  readonly handles: Slab;
  readonly arena: Arena;
  readonly pages: PageStore;
  /** Node words (nodes.I / nodes.F), kept at hand for the hot path. */
  readonly NI: Int32Array;
  readonly NF: Float64Array;
  readonly CI: Int32Array;
  readonly CF: Float64Array;
  private DB: Int32Array;
  private CB: Int32Array;

  constructor(readonly buffers: MemBuffers, maxPages: number, lockBoundMs?: number) {
    this.M = new Int32Array(buffers.meta);
    this.MF = new Float64Array(buffers.meta);
    this.mutex = new SharedMutex(this.M, M_MUTEX, { name: "memfs", boundMs: lockBoundMs });
    this.nodes = new Slab(buffers.nodes, NODE_WORDS, this.M, M_NODES);
    this.dirents = new Slab(buffers.dirents, DIRENT_WORDS, this.M, M_DIRENTS);
    this.chunks = new Slab(buffers.chunks, CHUNK_WORDS, this.M, M_CHUNKS);
    this.handles = new Slab(buffers.handles, HANDLE_WORDS, this.M, M_HANDLES);
    this.arena = new Arena(buffers.arena, this.M, M_ARENA);
    this.pages = new PageStore(maxPages, buffers.segs, buffers.pageFree, this.M, M_PAGES);
    this.NI = this.nodes.I;
    this.NF = this.nodes.F;
    this.CI = this.chunks.I;
    this.CF = this.chunks.F;
    this.DB = new Int32Array(buffers.dirBuckets);
    this.CB = new Int32Array(buffers.chunkBuckets);
  }

  /** New, empty buffers for `maxInodes` nodes and `maxPages` pages (nothing committed yet). */
  static create(maxInodes: number, maxPages: number): MemBuffers {
    const b: MemBuffers = {
      meta: new SharedArrayBuffer(META_BYTES),
      nodes: growable(0, Math.min(GiB * 4, (maxInodes + 2) * NODE_WORDS * 4)),
      dirents: growable(0, GiB),
      chunks: growable(0, Math.min(GiB * 4, (maxPages + 2) * CHUNK_WORDS * 4)),
      handles: growable(0, 256 << 20),
      dirBuckets: growable(BUCKETS_INITIAL * 4, 256 << 20),
      chunkBuckets: growable(BUCKETS_INITIAL * 4, 256 << 20),
      arena: growable(0, 2 * GiB - (64 << 10)),
      pageFree: pageFreeStack(maxPages),
      segs: PageStore.segments(maxPages),
      locks: new LockTable().buffer,
    };
    const M = new Int32Array(b.meta);
    Slab.init(M, M_NODES);
    Slab.init(M, M_DIRENTS);
    Slab.init(M, M_CHUNKS);
    Slab.init(M, M_HANDLES);
    Arena.init(M, M_ARENA);
    M[M_DIR_BUCKETS] = BUCKETS_INITIAL;
    M[M_CHUNK_BUCKETS] = BUCKETS_INITIAL;
    return b;
  }

  /** Whether the root was made (the first instance sets it up, under the mutex). */
  get ready(): boolean {
    return this.M[M_READY] === 1;
  }
  markReady(): void {
    this.M[M_READY] = 1;
  }

  /** Bytes of file data allocated. */
  get used(): number {
    return this.MF[MF_USED]!;
  }
  set used(v: number) {
    this.MF[MF_USED] = v;
  }

  // ---- nodes -------------------------------------------------------------------------------

  /** The slot of live node `id`, or 0. */
  slotOf(id: number): number {
    // (most ids are below 2^32: generation 0, no floating-point remainder)
    const slot = id < TWO32 ? id : id % TWO32;
    if (!(slot > 0) || slot >= this.nodes.high || (slot | 0) !== slot) return 0;
    const i = slot * NODE_WORDS;
    if (this.NI[i + N_USED] !== 1 || this.NI[i + N_GEN] !== (id - slot) / TWO32) return 0;
    return slot;
  }

  idOf(slot: number): number {
    return this.NI[slot * NODE_WORDS + N_GEN]! * TWO32 + slot;
  }

  /** A new node slot, every field zero but its generation; 0 when the table is full. */
  allocNode(): number {
    const slot = this.nodes.alloc();
    if (slot === 0) return 0;
    const i = slot * NODE_WORDS;
    const gen = this.NI[i + N_GEN]!; // fresh memory: 0
    this.NI.fill(0, i, i + NODE_WORDS);
    this.NI[i + N_GEN] = gen;
    this.NI[i + N_USED] = 1;
    return slot;
  }

  /** Free a node's slot (its chunks, list, xattrs and target were released). */
  freeNode(slot: number): void {
    const i = slot * NODE_WORDS;
    this.NI[i + N_USED] = 0;
    // A new generation: the old id is stale from now on (20 bits: ids stay exact in a double).
    this.NI[i + N_GEN] = (this.NI[i + N_GEN]! + 1) & 0xfffff;
    this.nodes.free(slot);
  }

  // ---- strings in the arena ----------------------------------------------------------------

  /** A block holding `s`'s UTF-16 units (0: arena full). */
  putString(s: string): number {
    const off = this.arena.alloc(Math.max(2, s.length * 2));
    if (off === 0) return 0;
    const u = this.arena.U16, base = off >> 1;
    for (let i = 0; i < s.length; i++) u[base + i] = s.charCodeAt(i);
    return off;
  }

  getString(off: number, len: number): string {
    const u = this.arena.U16, base = off >> 1;
    if (len <= 64) {
      let s = "";
      for (let i = 0; i < len; i++) s += String.fromCharCode(u[base + i]!);
      return s;
    }
    return String.fromCharCode.apply(null, u.subarray(base, base + len) as unknown as number[]);
  }

  private sameString(off: number, len: number, s: string): boolean {
    if (len !== s.length) return false;
    const u = this.arena.U16, base = off >> 1;
    for (let i = 0; i < len; i++) if (u[base + i] !== s.charCodeAt(i)) return false;
    return true;
  }

  // ---- directories -------------------------------------------------------------------------

  /** The dirent of `name` in directory `dir`, or 0. */
  find(dir: number, name: string): number {
    const h = nameHash(dir, name);
    const I = this.dirents.I;
    for (let d = this.DB[h & (this.M[M_DIR_BUCKETS]! - 1)]!; d !== 0; d = I[d * DIRENT_WORDS + D_HNEXT]!) {
      const i = d * DIRENT_WORDS;
      if (I[i + D_HASH] === h && I[i + D_DIR] === dir && this.sameString(I[i + D_NAME]!, I[i + D_LEN]!, name)) return d;
    }
    return 0;
  }

  direntNode(d: number): number {
    return this.dirents.I[d * DIRENT_WORDS + D_NODE]!;
  }
  setDirentNode(d: number, node: number): void {
    this.dirents.I[d * DIRENT_WORDS + D_NODE] = node;
  }
  direntName(d: number): string {
    const i = d * DIRENT_WORDS;
    return this.getString(this.dirents.I[i + D_NAME]!, this.dirents.I[i + D_LEN]!);
  }
  direntCookie(d: number): number {
    return this.dirents.F[(d * DIRENT_WORDS >> 1) + DF_COOKIE]!;
  }

  /**
   * Everything adding `name` to `dir` needs, allocated up front (dirent, name, room in the
   * directory's list), so that the operation can fail before it changes anything. Throws
   * ENOSPC. Then add() (or unprepare()).
   */
  prepare(dir: number, name: string): number {
    const d = this.dirents.alloc();
    if (d === 0) oom("directory entry table");
    const off = this.putString(name);
    if (off === 0) {
      this.dirents.free(d);
      oom("name arena");
    }
    if (!this.reserveList(dir)) {
      this.arena.free(off);
      this.dirents.free(d);
      oom("name arena");
    }
    const I = this.dirents.I, i = d * DIRENT_WORDS;
    I[i + D_NAME] = off;
    I[i + D_LEN] = name.length;
    I[i + D_HASH] = nameHash(dir, name);
    I[i + D_DIR] = dir;
    return d;
  }

  unprepare(d: number): void {
    this.arena.free(this.dirents.I[d * DIRENT_WORDS + D_NAME]!);
    this.dirents.free(d);
  }

  /** Make prepared dirent `d` live: `node` under its name in its directory, with the next cookie. */
  add(d: number, node: number): void {
    const I = this.dirents.I, i = d * DIRENT_WORDS;
    const dir = I[i + D_DIR]!;
    const ni = dir * NODE_WORDS, nf = ni >> 1;
    if ((this.NI[ni + N_LIST_LEN]! + 1) * LIST_REC > this.arena.capacity(this.NI[ni + N_LIST]!)) throw new Error("BUG: memfs: add() without room prepared in the directory's list");
    const cookie = this.NF[nf + NF_NEXT_COOKIE]!;
    this.NF[nf + NF_NEXT_COOKIE] = cookie + 1;
    I[i + D_NODE] = node;
    this.dirents.F[(i >> 1) + DF_COOKIE] = cookie;
    // Append to the list (room was reserved).
    const list = this.NI[ni + N_LIST]!, len = this.NI[ni + N_LIST_LEN]!;
    this.arena.F[(list + len * LIST_REC) >> 3] = cookie;
    this.arena.I[((list + len * LIST_REC) >> 2) + 2] = d;
    this.NI[ni + N_LIST_LEN] = len + 1;
    this.NI[ni + N_ENTRIES]!++;
    // Hash chain.
    const b = I[i + D_HASH]! & (this.M[M_DIR_BUCKETS]! - 1);
    I[i + D_HNEXT] = this.DB[b]!;
    this.DB[b] = d;
    if (this.dirents.count > this.M[M_DIR_BUCKETS]! * 2) this.rehashDirents();
  }

  /** Take dirent `d` out of its directory and free it. */
  remove(d: number): void {
    const I = this.dirents.I, i = d * DIRENT_WORDS;
    const dir = I[i + D_DIR]!;
    // Hash chain.
    const b = I[i + D_HASH]! & (this.M[M_DIR_BUCKETS]! - 1);
    if (this.DB[b] === d) this.DB[b] = I[i + D_HNEXT]!;
    else {
      let p = this.DB[b]!;
      while (p !== 0 && I[p * DIRENT_WORDS + D_HNEXT] !== d) p = I[p * DIRENT_WORDS + D_HNEXT]!;
      if (p === 0) throw new Error(`BUG: memfs: dirent ${d} not in its hash chain`);
      I[p * DIRENT_WORDS + D_HNEXT] = I[i + D_HNEXT]!;
    }
    // The list: a hole where it was.
    const ni = dir * NODE_WORDS;
    const list = this.NI[ni + N_LIST]!, len = this.NI[ni + N_LIST_LEN]!;
    const k = this.firstAfter(dir, this.direntCookie(d) - 1);
    if (k >= len || this.arena.I[((list + k * LIST_REC) >> 2) + 2] !== d) throw new Error(`BUG: memfs: dirent ${d} not in its directory's list`);
    this.arena.I[((list + k * LIST_REC) >> 2) + 2] = 0;
    const dead = ++this.NI[ni + N_LIST_DEAD]!;
    this.NI[ni + N_ENTRIES]!--;
    if (dead > 32 && dead * 2 > len) this.compactList(dir);
    this.unprepare(d);
  }

  /** Entries of `dir`'s list (holes included): read with listDirent / listCookie. */
  listLength(dir: number): number {
    return this.NI[dir * NODE_WORDS + N_LIST_LEN]!;
  }
  /** The dirent at list position k (0: a hole). */
  listDirent(dir: number, k: number): number {
    return this.arena.I[((this.NI[dir * NODE_WORDS + N_LIST]! + k * LIST_REC) >> 2) + 2]!;
  }

  /** List position of the first record whose cookie is greater than `cookie`. */
  firstAfter(dir: number, cookie: number): number {
    const ni = dir * NODE_WORDS;
    const list = this.NI[ni + N_LIST]!;
    const F = this.arena.F;
    let lo = 0, hi = this.NI[ni + N_LIST_LEN]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (F[(list + mid * LIST_REC) >> 3]! <= cookie) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Room for two more records in dir's list (an operation prepares at most two entries in one
   * directory before adding them: rename with RENAME_WHITEOUT). False: the arena is full.
   */
  private reserveList(dir: number): boolean {
    const ni = dir * NODE_WORDS;
    const list = this.NI[ni + N_LIST]!, len = this.NI[ni + N_LIST_LEN]!;
    if (list !== 0 && (len + 2) * LIST_REC <= this.arena.capacity(list)) return true;
    const next = this.arena.alloc(Math.max(8, len * 2) * LIST_REC);
    if (next === 0) return false;
    if (list !== 0) {
      this.arena.U8.copyWithin(next, list, list + len * LIST_REC);
      this.arena.free(list);
    }
    this.NI[ni + N_LIST] = next;
    return true;
  }

  /** Drop the holes from dir's list (cookies stay: offsets stay valid). */
  private compactList(dir: number): void {
    const ni = dir * NODE_WORDS;
    const list = this.NI[ni + N_LIST]!, len = this.NI[ni + N_LIST_LEN]!;
    const F = this.arena.F, I = this.arena.I;
    let to = 0;
    for (let k = 0; k < len; k++) {
      const d = I[((list + k * LIST_REC) >> 2) + 2]!;
      if (d === 0) continue;
      if (to !== k) {
        F[(list + to * LIST_REC) >> 3] = F[(list + k * LIST_REC) >> 3]!;
        I[((list + to * LIST_REC) >> 2) + 2] = d;
      }
      to++;
    }
    this.NI[ni + N_LIST_LEN] = to;
    this.NI[ni + N_LIST_DEAD] = 0;
  }

  /** A new, empty directory's list (node fields). */
  initDir(slot: number): void {
    const ni = slot * NODE_WORDS;
    this.NI[ni + N_LIST] = 0;
    this.NI[ni + N_LIST_LEN] = this.NI[ni + N_LIST_DEAD] = this.NI[ni + N_ENTRIES] = 0;
    this.NF[(ni >> 1) + NF_NEXT_COOKIE] = 3; // "." = 1, ".." = 2
  }

  /** Release a removed (empty) directory's list. */
  freeDir(slot: number): void {
    const ni = slot * NODE_WORDS;
    this.arena.free(this.NI[ni + N_LIST]!);
    this.NI[ni + N_LIST] = 0;
    this.NI[ni + N_LIST_LEN] = this.NI[ni + N_LIST_DEAD] = 0;
  }

  private rehashDirents(): void {
    const buckets = this.M[M_DIR_BUCKETS]! * 2;
    if (buckets * 4 > this.buffers.dirBuckets.maxByteLength) return;
    const I = this.dirents.I;
    const all: number[] = [];
    for (let h = 0; h < this.M[M_DIR_BUCKETS]!; h++) for (let d = this.DB[h]!; d !== 0; d = I[d * DIRENT_WORDS + D_HNEXT]!) all.push(d);
    this.buffers.dirBuckets.grow(buckets * 4);
    this.DB.fill(0);
    this.M[M_DIR_BUCKETS] = buckets;
    for (const d of all) {
      const b = I[d * DIRENT_WORDS + D_HASH]! & (buckets - 1);
      I[d * DIRENT_WORDS + D_HNEXT] = this.DB[b]!;
      this.DB[b] = d;
    }
  }

  // ---- chunks ------------------------------------------------------------------------------

  /** The chunk of window `index` of node `node`, or 0. */
  chunk(node: number, index: number): number {
    const CI = this.CI, CF = this.CF;
    for (let c = this.CB[chunkHash(node, index) & (this.M[M_CHUNK_BUCKETS]! - 1)]!; c !== 0; c = CI[c * CHUNK_WORDS + C_HNEXT]!) {
      if (CI[c * CHUNK_WORDS + C_NODE] === node && CF[(c * CHUNK_WORDS >> 1) + CF_INDEX] === index) return c;
    }
    return 0;
  }

  chunkIndex(c: number): number {
    return this.CF[(c * CHUNK_WORDS >> 1) + CF_INDEX]!;
  }

  /** Chunks of node (first, then chunkNext until 0). */
  firstChunk(node: number): number {
    return this.NI[node * NODE_WORDS + N_CHUNK_HEAD]!;
  }
  chunkNext(c: number): number {
    return this.CI[c * CHUNK_WORDS + C_NEXT]!;
  }
  chunkCount(node: number): number {
    return this.NI[node * NODE_WORDS + N_CHUNKS]!;
  }

  /** A new chunk (no pages) of window `index` of node; throws ENOSPC when the table is full. */
  newChunk(node: number, index: number): number {
    const c = this.chunks.alloc();
    if (c === 0) oom("chunk table");
    const CI = this.CI, i = c * CHUNK_WORDS;
    CI[i + C_NODE] = node;
    CI[i + C_PAGES] = 0;
    this.CF[(i >> 1) + CF_INDEX] = index;
    const b = chunkHash(node, index) & (this.M[M_CHUNK_BUCKETS]! - 1);
    CI[i + C_HNEXT] = this.CB[b]!;
    this.CB[b] = c;
    const ni = node * NODE_WORDS, head = this.NI[ni + N_CHUNK_HEAD]!;
    CI[i + C_NEXT] = head;
    CI[i + C_PREV] = 0;
    if (head !== 0) CI[head * CHUNK_WORDS + C_PREV] = c;
    this.NI[ni + N_CHUNK_HEAD] = c;
    this.NI[ni + N_CHUNKS]!++;
    if (this.chunks.count > this.M[M_CHUNK_BUCKETS]! * 2) this.rehashChunks();
    return c;
  }

  /** Unlink and free chunk c (its pages were released). */
  dropChunk(c: number): void {
    const CI = this.CI, i = c * CHUNK_WORDS;
    const node = CI[i + C_NODE]!;
    const b = chunkHash(node, this.chunkIndex(c)) & (this.M[M_CHUNK_BUCKETS]! - 1);
    if (this.CB[b] === c) this.CB[b] = CI[i + C_HNEXT]!;
    else {
      let p = this.CB[b]!;
      while (p !== 0 && CI[p * CHUNK_WORDS + C_HNEXT] !== c) p = CI[p * CHUNK_WORDS + C_HNEXT]!;
      if (p === 0) throw new Error(`BUG: memfs: chunk ${c} not in its hash chain`);
      CI[p * CHUNK_WORDS + C_HNEXT] = CI[i + C_HNEXT]!;
    }
    const next = CI[i + C_NEXT]!, prev = CI[i + C_PREV]!;
    if (prev !== 0) CI[prev * CHUNK_WORDS + C_NEXT] = next;
    else this.NI[node * NODE_WORDS + N_CHUNK_HEAD] = next;
    if (next !== 0) CI[next * CHUNK_WORDS + C_PREV] = prev;
    this.NI[node * NODE_WORDS + N_CHUNKS]!--;
    this.chunks.free(c);
  }

  private rehashChunks(): void {
    const buckets = this.M[M_CHUNK_BUCKETS]! * 2;
    if (buckets * 4 > this.buffers.chunkBuckets.maxByteLength) return;
    const CI = this.CI;
    const all: number[] = [];
    for (let h = 0; h < this.M[M_CHUNK_BUCKETS]!; h++) for (let c = this.CB[h]!; c !== 0; c = CI[c * CHUNK_WORDS + C_HNEXT]!) all.push(c);
    this.buffers.chunkBuckets.grow(buckets * 4);
    this.CB.fill(0);
    this.M[M_CHUNK_BUCKETS] = buckets;
    for (const c of all) {
      const b = chunkHash(CI[c * CHUNK_WORDS + C_NODE]!, this.chunkIndex(c)) & (buckets - 1);
      CI[c * CHUNK_WORDS + C_HNEXT] = this.CB[b]!;
      this.CB[b] = c;
    }
  }

  // ---- handles -----------------------------------------------------------------------------

  openHandle(node: number, flags: number): number {
    const h = this.handles.alloc();
    if (h === 0) throw new FuseError("ENFILE", "memfs: handle table full");
    this.handles.I[h * HANDLE_WORDS] = -1; // in use (a free record's word 0 is its link, ≥ 0)
    this.handles.I[h * HANDLE_WORDS + H_NODE] = node;
    this.handles.I[h * HANDLE_WORDS + H_FLAGS] = flags;
    return h;
  }

  /** The node slot of open handle fh, or 0. */
  handleNode(fh: number): number {
    if (!(fh > 0) || fh >= this.handles.high || !Number.isInteger(fh) || this.handles.I[fh * HANDLE_WORDS] !== -1) return 0;
    return this.handles.I[fh * HANDLE_WORDS + H_NODE]!;
  }

  handleFlags(fh: number): number {
    return this.handles.I[fh * HANDLE_WORDS + H_FLAGS]!;
  }

  closeHandle(fh: number): void {
    this.handles.free(fh);
  }

  // ---- xattrs: one arena block per node: count, then per entry name units, value bytes ------
  // Layout (Int32 words, then bytes): [count] then for each: [name units, value bytes], name
  // units (padded to 4 bytes), value bytes (padded to 4 bytes).

  /** Node's xattrs (setxattr/removexattr/listxattr: rare, a Map is fine). */
  xattrs(node: number): Map<string, Uint8Array> {
    const out = new Map<string, Uint8Array>();
    const off = this.NI[node * NODE_WORDS + N_XATTRS]!;
    if (off === 0) return out;
    const I = this.arena.I, U8 = this.arena.U8;
    const count = I[off >> 2]!;
    let at = off + 4;
    for (let k = 0; k < count; k++) {
      const units = I[at >> 2]!, bytes = I[(at >> 2) + 1]!;
      at += 8;
      const name = this.getString(at, units);
      at += (units * 2 + 3) & ~3;
      out.set(name, U8.slice(at, at + bytes));
      at += (bytes + 3) & ~3;
    }
    return out;
  }

  /** The value of xattr `name` of node (a copy), or null. Allocates nothing when node has none. */
  xattr(node: number, name: string): Uint8Array | null {
    const off = this.NI[node * NODE_WORDS + N_XATTRS]!;
    if (off === 0) return null;
    const I = this.arena.I;
    const count = I[off >> 2]!;
    let at = off + 4;
    for (let k = 0; k < count; k++) {
      const units = I[at >> 2]!, bytes = I[(at >> 2) + 1]!;
      at += 8;
      const hit = this.sameString(at, units, name);
      at += (units * 2 + 3) & ~3;
      if (hit) return this.arena.U8.slice(at, at + bytes);
      at += (bytes + 3) & ~3;
    }
    return null;
  }

  /** Replace node's xattrs with `set` (allocated before the old block is freed). Throws ENOSPC. */
  setXattrs(node: number, set: Map<string, Uint8Array>): void {
    const i = node * NODE_WORDS;
    const old = this.NI[i + N_XATTRS]!;
    let next = 0;
    if (set.size > 0) {
      let bytes = 4;
      for (const [k, v] of set) bytes += 8 + ((k.length * 2 + 3) & ~3) + ((v.length + 3) & ~3);
      next = this.arena.alloc(bytes);
      if (next === 0) oom("xattr arena");
      const I = this.arena.I, U8 = this.arena.U8, U16 = this.arena.U16;
      I[next >> 2] = set.size;
      let at = next + 4;
      for (const [k, v] of set) {
        I[at >> 2] = k.length;
        I[(at >> 2) + 1] = v.length;
        at += 8;
        for (let u = 0; u < k.length; u++) U16[(at >> 1) + u] = k.charCodeAt(u);
        at += (k.length * 2 + 3) & ~3;
        U8.set(v, at);
        at += (v.length + 3) & ~3;
      }
    }
    this.NI[i + N_XATTRS] = next;
    this.arena.free(old);
  }

  /** Whether node has xattrs. */
  hasXattrs(node: number): boolean {
    return this.NI[node * NODE_WORDS + N_XATTRS] !== 0;
  }
}
