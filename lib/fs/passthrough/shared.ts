// The passthrough's state in SharedArrayBuffers, for copies mode (`--passthrough SRC --workers N`):
// every worker thread runs its own PassthroughFS over the same node table, descriptor cache
// bookkeeping and directory handles, and so does the main thread's instance (the one given to
// mount(): it answers what comes through /dev/fuse before the rings are up, and every FORGET).
//
// What is shared, and how:
// - One mutex (a futex word: Atomics.compareExchange, Atomics.wait/notify) taken around the
//   operations on this state only — find or create a node by (st_dev, st_ino), lookup counts,
//   a node's descriptor from the cache, the directory store — and never around a backing
//   syscall (passthrough.ts, "threads"): a slow backing filesystem holds up its caller, not
//   every thread. Uncontended it costs one compareExchange and no syscall. A descriptor used
//   outside the lock is pinned under it, and the pins are in the slot (every thread's eviction,
//   early close and FORGET see them); a pinned node stays in the table. The kernel serializes
//   much of what metadata does anyway (the directory's i_rwsem).
// - Nodes: fixed-size slots in a growable SharedArrayBuffer (growth is visible to every
//   thread through length-tracking typed arrays). Node id = generation × 2^32 + slot, so every
//   copy decodes an id alike, and an id of a freed slot (FORGET, then reuse) is recognised as
//   stale. Each copy keeps one view object per slot (SharedNode: the PassthroughNode fields as
//   accessors over the slot), so passthrough.ts and nodes.ts run unchanged on it.
// - (st_dev, st_ino) index: a chained hash table (buckets in a growable buffer, chains through
//   the slots), doubled and rehashed under the lock.
// - The descriptor cache's LRU list (through slot numbers), its counters, the root's and the
//   file-handle mount descriptor (descriptors are process-wide: any thread may use any).
// - Directory handles: READDIR may come to another worker than OPENDIR (the caller moved to
//   another CPU), so the getdents64 snapshot is kept in a shared arena (bump allocator,
//   compacted under the lock when it fills), found by the handle (the directory descriptor).
//
// Not shared (copies mode is not offered then, see PassthroughFS.copies): nodes' last known
// links (parent + name: re-open by path), so an evicted node is re-opened by kernel file handle
// only; kernel passthrough backing ids.

import { FuseError } from "../errors.ts";
import type { Attr } from "../types.ts";
import type { FdCacheState, PassthroughNode } from "./nodes.ts";
import { decodeName, encodeName } from "../../protocol/names.ts";
import { MUTEX_WORDS, SharedMutex } from "../../shared/mutex.ts";
import { growable } from "../../shared/growable.ts";

export { SharedMutex };
/**
 * The critical sections are table operations (a microsecond or so), so a waiter spins as memfs's
 * do. A few rare ones still make a syscall (re-opening an evicted node by file handle, shedding
 * descriptors, killPriv): the bound past which a waiter fail-stops stays generous.
 */
const LOCK_BOUND_MS = 30_000;

const TWO32 = 4294967296;

/** What crosses to the workers (CopiesPlan.shared): plain data and SharedArrayBuffers. */
export interface PassthroughShare {
  source: string;
  emulateOwnership: boolean;
  fileHandles: boolean;
  handleProbe: string;
  budget: number;
  meta: SharedArrayBuffer;
  slots: SharedArrayBuffer;
  buckets: SharedArrayBuffer;
  dirTable: SharedArrayBuffer;
  arena: SharedArrayBuffer;
}

// ---- meta words (Int32Array over `meta`) ---------------------------------------------------
const M_COUNT = 1; // nodes in use (root included)
const M_CAP = 2; // slots the buffer holds
const M_FREE = 3; // free slot list head (0: none), chained through S_HNEXT
const M_HIGH = 4; // next never-used slot
const M_BUCKETS = 5; // hash bucket count (power of two)
const M_LRU_HEAD = 6;
const M_LRU_TAIL = 7;
const M_ROOT_FD = 8;
const M_MOUNT_FD = 9;
const M_ARENA_BUMP = 10; // bytes used in the directory arena (multiple of 8)
const M_ARENA_DEAD = 11; // bytes of released listings not yet compacted away
const M_DIR_CAP = 12; // directory handle records (indexed by descriptor)
const M_MUTEX = 13; // the mutex: words 13..15 (lib/shared/mutex.ts)
// Counters (Float64Array over `meta`, from word 16 = byte 64).
const C_BASE = 8;
const C_HELD = C_BASE + 0, C_MAXHELD = C_BASE + 1, C_EVICT = C_BASE + 2, C_BYHANDLE = C_BASE + 3;
const C_BYPATH = C_BASE + 4, C_SHED = C_BASE + 5, C_FAIL = C_BASE + 6;
const META_BYTES = 256;
if (M_MUTEX + MUTEX_WORDS > C_BASE * 2) throw new Error("BUG: passthrough meta words overlap");

// ---- one node slot: SLOT bytes -------------------------------------------------------------
// f64 fields (index in the slot's Float64 words)
const F_DEV = 0, F_INO = 1, F_NLOOKUP = 2, F_BTIME = 3, F_DEL = 4; // F_DEL..F_DEL+14: deletedAttr
// i32 fields (index in the slot's Int32 words; after the 19 f64 = 38 words)
const S_GEN = 38, S_USED = 39, S_FD = 40, S_OPENS = 41, S_MODE = 42, S_FLAGS = 43, S_BTNSEC = 44;
const S_PREV = 45, S_NEXT = 46, S_HNEXT = 47, S_HLEN = 48, S_BACKING = 49;
const S_HANDLE = 50 * 4; // byte offset of the kernel file handle (≤ 8 + MAX_HANDLE_SZ 128)
const HANDLE_MAX = 136;
const S_PINS = 84; // i32 after the handle (byte 336)
const SLOT = 352; // bytes (multiple of 8: ≥ 200 + 136 + 4)
const SLOT4 = SLOT / 4, SLOT8 = SLOT / 8;

const GONE = 1, UNLINKED = 2, NO_EVICT = 4, NO_PT = 8, HANDLE_FAILED = 16, IN_LRU = 32, DELETED = 64, DROP_PENDING = 128;
if (S_HANDLE + HANDLE_MAX > S_PINS * 4 || (S_PINS + 1) * 4 > SLOT) throw new Error("BUG: passthrough slot fields overlap");

const DEL_FIELDS = ["ino", "mode", "nlink", "uid", "gid", "rdev", "size", "blocks", "blksize", "atime", "atimeNsec", "mtime", "mtimeNsec", "ctime", "ctimeNsec"] as const;

// ---- limits --------------------------------------------------------------------------------
const SLOTS_INITIAL = 1024;
const SLOTS_MAX = Math.floor((1 << 30) / SLOT); // 3 million nodes in 1 GiB
const BUCKETS_INITIAL = 1024;
const BUCKETS_MAX_BYTES = 64 << 20;
const DIRS_INITIAL = 1024; // records of 4 words, indexed by descriptor
const DIRS_MAX_BYTES = 64 << 20;
const ARENA_INITIAL = 1 << 20;
const ARENA_MAX = 1 << 30;

/** Create the shared state (main thread), with the root node in slot 1. */
export function createShare(o: { source: string; emulateOwnership: boolean; fileHandles: boolean; handleProbe: string; budget: number }): PassthroughShare {
  return {
    ...o,
    meta: new SharedArrayBuffer(META_BYTES),
    slots: growable(SLOTS_INITIAL * SLOT, SLOTS_MAX * SLOT),
    buckets: growable(BUCKETS_INITIAL * 4, BUCKETS_MAX_BYTES),
    dirTable: growable(DIRS_INITIAL * 16, DIRS_MAX_BYTES),
    arena: growable(ARENA_INITIAL, ARENA_MAX),
  };
}

// ---- node views ----------------------------------------------------------------------------

/** One copy's view of a node slot: PassthroughNode's fields, read and written in the slot. */
export class SharedNode implements PassthroughNode {
  private readonly i4: number;
  private readonly i8: number;
  constructor(
    private readonly t: SharedNodeTable,
    readonly slot: number,
  ) {
    this.i4 = slot * SLOT4;
    this.i8 = slot * SLOT8;
  }

  get id(): number {
    return this.t.I[this.i4 + S_GEN]! * TWO32 + this.slot;
  }
  get dev(): number {
    return this.t.F[this.i8 + F_DEV]!;
  }
  get ino(): number {
    return this.t.F[this.i8 + F_INO]!;
  }
  get nlookup(): number {
    return this.t.F[this.i8 + F_NLOOKUP]!;
  }
  set nlookup(v: number) {
    this.t.F[this.i8 + F_NLOOKUP] = v;
  }
  get btimeSec(): number {
    return this.t.F[this.i8 + F_BTIME]!;
  }
  set btimeSec(v: number) {
    this.t.F[this.i8 + F_BTIME] = v;
  }
  get btimeNsec(): number {
    return this.t.I[this.i4 + S_BTNSEC]!;
  }
  set btimeNsec(v: number) {
    this.t.I[this.i4 + S_BTNSEC] = v;
  }
  get fd(): number {
    return this.t.I[this.i4 + S_FD]!;
  }
  set fd(v: number) {
    this.t.I[this.i4 + S_FD] = v;
  }
  get opens(): number {
    return this.t.I[this.i4 + S_OPENS]!;
  }
  set opens(v: number) {
    this.t.I[this.i4 + S_OPENS] = v;
  }
  get mode(): number {
    return this.t.I[this.i4 + S_MODE]!;
  }
  set mode(v: number) {
    this.t.I[this.i4 + S_MODE] = v;
  }
  /**
   * Requests of every thread using the node's descriptor or holding the node (a slot word: the
   * backing syscalls run outside the lock, so another thread's eviction, early close or FORGET
   * must see them). Changed under the lock only.
   */
  get pins(): number {
    return this.t.I[this.i4 + S_PINS]!;
  }
  set pins(v: number) {
    this.t.I[this.i4 + S_PINS] = v;
  }
  get dropPending(): boolean {
    return this.flag(DROP_PENDING);
  }
  set dropPending(v: boolean) {
    this.setFlag(DROP_PENDING, v);
  }
  get backingId(): number {
    return this.t.I[this.i4 + S_BACKING]!;
  }
  set backingId(v: number) {
    this.t.I[this.i4 + S_BACKING] = v;
  }
  private flag(bit: number): boolean {
    return (this.t.I[this.i4 + S_FLAGS]! & bit) !== 0;
  }
  private setFlag(bit: number, on: boolean): void {
    const i = this.i4 + S_FLAGS;
    this.t.I[i] = on ? this.t.I[i]! | bit : this.t.I[i]! & ~bit;
  }
  get gone(): boolean {
    return this.flag(GONE);
  }
  set gone(v: boolean) {
    this.setFlag(GONE, v);
  }
  get unlinked(): boolean {
    return this.flag(UNLINKED);
  }
  set unlinked(v: boolean) {
    this.setFlag(UNLINKED, v);
  }
  get noEvict(): boolean {
    return this.flag(NO_EVICT);
  }
  set noEvict(v: boolean) {
    this.setFlag(NO_EVICT, v);
  }
  get noPassthrough(): boolean {
    return this.flag(NO_PT);
  }
  set noPassthrough(v: boolean) {
    this.setFlag(NO_PT, v);
  }
  get handleFailed(): boolean {
    return this.flag(HANDLE_FAILED);
  }
  set handleFailed(v: boolean) {
    this.setFlag(HANDLE_FAILED, v);
  }
  get inLru(): boolean {
    return this.flag(IN_LRU);
  }
  set inLru(v: boolean) {
    this.setFlag(IN_LRU, v);
  }
  get lruPrev(): PassthroughNode | null {
    return this.t.view(this.t.I[this.i4 + S_PREV]!);
  }
  set lruPrev(n: PassthroughNode | null) {
    this.t.I[this.i4 + S_PREV] = n ? (n as SharedNode).slot : 0;
  }
  get lruNext(): PassthroughNode | null {
    return this.t.view(this.t.I[this.i4 + S_NEXT]!);
  }
  set lruNext(n: PassthroughNode | null) {
    this.t.I[this.i4 + S_NEXT] = n ? (n as SharedNode).slot : 0;
  }
  get deletedAttr(): Attr | null {
    if (!this.flag(DELETED)) return null;
    const a = {} as Record<string, number>;
    for (let i = 0; i < DEL_FIELDS.length; i++) a[DEL_FIELDS[i]!] = this.t.F[this.i8 + F_DEL + i]!;
    return a as unknown as Attr;
  }
  set deletedAttr(a: Attr | null) {
    if (a) {
      const r = a as unknown as Record<string, number | undefined>;
      for (let i = 0; i < DEL_FIELDS.length; i++) this.t.F[this.i8 + F_DEL + i] = r[DEL_FIELDS[i]!] ?? 0;
    }
    this.setFlag(DELETED, a !== null);
  }
  /** Kernel file handle bytes (a copy), or null. */
  get handle(): Buffer | null {
    const len = this.t.I[this.i4 + S_HLEN]!;
    if (len === 0) return null;
    const at = this.slot * SLOT + S_HANDLE;
    return Buffer.from(this.t.U8.subarray(at, at + len));
  }
  set handle(h: Buffer | null) {
    if (!h || h.length > HANDLE_MAX) {
      this.t.I[this.i4 + S_HLEN] = 0;
      if (h) this.handleFailed = true; // cannot be kept: not re-openable by handle
      return;
    }
    this.t.U8.set(h, this.slot * SLOT + S_HANDLE);
    this.t.I[this.i4 + S_HLEN] = h.length;
  }
  // Last known links are not shared (re-open by path is not offered in copies mode).
  get parent(): PassthroughNode | null {
    return null;
  }
  set parent(_p: PassthroughNode | null) {}
  get name(): string {
    return "";
  }
  set name(_n: string) {}
  get kids(): number {
    return 0;
  }
  set kids(_k: number) {}
}

// ---- the node table ------------------------------------------------------------------------

/** What PassthroughFS needs of its node table (passthrough.ts has the one-thread Map version). */
export interface NodeTable {
  readonly root: PassthroughNode;
  get(id: number): PassthroughNode | undefined;
  /** The indexed node of backing inode (dev, ino). */
  find(dev: number, ino: number): PassthroughNode | undefined;
  /** A new node (new id), indexed by (dev, ino). */
  create(dev: number, ino: number, mode: number): PassthroughNode;
  /** Drop n from the (dev, ino) index (if it is the one indexed there). */
  unindex(n: PassthroughNode): void;
  /** Drop n from the table (and the index); its id goes stale. */
  remove(n: PassthroughNode): void;
  /** Some node of this inode number exists (any device). */
  knownIno(ino: number): boolean;
  readonly size: number;
  values(): Iterable<PassthroughNode>;
  /** Keep the root only. */
  clear(): void;
}

function hashIno(ino: number, mask: number): number {
  const x = (ino >>> 0) ^ Math.floor(ino / TWO32);
  return (Math.imul(x, 0x9e3779b1) >>> 0) & mask;
}

export class SharedNodeTable implements NodeTable {
  /** Meta words and counters. */
  readonly M: Int32Array;
  readonly C: Float64Array;
  /** The slots (length-tracking: they follow the buffer's growth). */
  readonly I: Int32Array;
  readonly F: Float64Array;
  readonly U8: Uint8Array;
  private readonly B: Int32Array;
  private readonly views: (SharedNode | undefined)[] = [];
  readonly root: SharedNode;
  readonly mutex: SharedMutex;

  /** `_log`: kept for callers; a lock held too long is a fail-stop now (lib/shared/mutex.ts), not a log line. */
  constructor(readonly share: PassthroughShare, _log?: (line: string) => void) {
    this.M = new Int32Array(share.meta);
    this.C = new Float64Array(share.meta);
    this.I = new Int32Array(share.slots);
    this.F = new Float64Array(share.slots);
    this.U8 = new Uint8Array(share.slots);
    this.B = new Int32Array(share.buckets);
    this.mutex = new SharedMutex(this.M, M_MUTEX, { boundMs: LOCK_BOUND_MS, name: "passthrough node table" });
    this.root = this.view(1)!;
  }

  /** Fill a new share: root node in slot 1 (main thread, before any copy exists). */
  static init(share: PassthroughShare, root: { dev: number; ino: number; mode: number; fd: number; mountFd: number }): void {
    const M = new Int32Array(share.meta);
    M[M_CAP] = share.slots.byteLength / SLOT;
    M[M_HIGH] = 2;
    M[M_BUCKETS] = share.buckets.byteLength / 4;
    M[M_ROOT_FD] = root.fd;
    M[M_MOUNT_FD] = root.mountFd;
    M[M_DIR_CAP] = share.dirTable.byteLength / 16;
    const t = new SharedNodeTable(share);
    const b4 = 1 * SLOT4, b8 = 1 * SLOT8;
    t.I[b4 + S_USED] = 1;
    t.I[b4 + S_FD] = root.fd;
    t.I[b4 + S_MODE] = root.mode;
    t.F[b8 + F_DEV] = root.dev;
    t.F[b8 + F_INO] = root.ino;
    t.F[b8 + F_NLOOKUP] = 1; // never forgotten
    t.link(1);
    M[M_COUNT] = 1;
  }

  get rootFd(): number {
    return this.M[M_ROOT_FD]!;
  }
  get mountFd(): number {
    return this.M[M_MOUNT_FD]!;
  }

  /** The view of `slot` (0: null). */
  view(slot: number): SharedNode | null {
    if (slot === 0) return null;
    return (this.views[slot] ??= new SharedNode(this, slot));
  }

  get(id: number): PassthroughNode | undefined {
    const slot = id % TWO32;
    if (slot === 0 || slot >= this.M[M_HIGH]!) return undefined;
    const b4 = slot * SLOT4;
    if (this.I[b4 + S_USED] !== 1 || this.I[b4 + S_GEN]! !== (id - slot) / TWO32) return undefined;
    return this.view(slot)!;
  }

  find(dev: number, ino: number): PassthroughNode | undefined {
    let s = this.B[hashIno(ino, this.M[M_BUCKETS]! - 1)]!;
    while (s !== 0) {
      const b8 = s * SLOT8;
      if (this.F[b8 + F_INO] === ino && this.F[b8 + F_DEV] === dev) return this.view(s)!;
      s = this.I[s * SLOT4 + S_HNEXT]!;
    }
    return undefined;
  }

  knownIno(ino: number): boolean {
    let s = this.B[hashIno(ino, this.M[M_BUCKETS]! - 1)]!;
    while (s !== 0) {
      if (this.F[s * SLOT8 + F_INO] === ino) return true;
      s = this.I[s * SLOT4 + S_HNEXT]!;
    }
    return false;
  }

  create(dev: number, ino: number, mode: number): PassthroughNode {
    const M = this.M;
    let slot = M[M_FREE]!;
    if (slot !== 0) M[M_FREE] = this.I[slot * SLOT4 + S_HNEXT]!;
    else {
      slot = M[M_HIGH]!;
      if (slot >= M[M_CAP]!) this.growSlots();
      M[M_HIGH] = slot + 1;
    }
    const b4 = slot * SLOT4, b8 = slot * SLOT8;
    const gen = this.I[b4 + S_GEN]!;
    // Clear the slot (keeps the generation), then fill it.
    this.I.fill(0, b4, b4 + SLOT4);
    this.I[b4 + S_GEN] = gen;
    this.I[b4 + S_USED] = 1;
    this.I[b4 + S_FD] = -1;
    this.I[b4 + S_MODE] = mode;
    this.F[b8 + F_DEV] = dev;
    this.F[b8 + F_INO] = ino;
    M[M_COUNT]!++;
    if (M[M_COUNT]! > M[M_BUCKETS]! && M[M_BUCKETS]! * 8 < BUCKETS_MAX_BYTES) this.rehash(M[M_BUCKETS]! * 2);
    this.link(slot);
    return this.view(slot)!; // pins and dropPending: cleared with the slot
  }

  unindex(n: PassthroughNode): void {
    const slot = (n as SharedNode).slot;
    const h = hashIno(n.ino, this.M[M_BUCKETS]! - 1);
    let s = this.B[h]!, prev = 0;
    while (s !== 0) {
      const next = this.I[s * SLOT4 + S_HNEXT]!;
      if (s === slot) {
        if (prev === 0) this.B[h] = next;
        else this.I[prev * SLOT4 + S_HNEXT] = next;
        this.I[s * SLOT4 + S_HNEXT] = -1; // not indexed
        return;
      }
      prev = s;
      s = next;
    }
  }

  remove(n: PassthroughNode): void {
    const slot = (n as SharedNode).slot;
    const b4 = slot * SLOT4;
    if (slot === 1 || this.I[b4 + S_USED] !== 1) return;
    if (this.I[b4 + S_HNEXT] !== -1) this.unindex(n);
    this.I[b4 + S_USED] = 0;
    // A new generation: the old id is stale in every copy from now on.
    this.I[b4 + S_GEN] = (this.I[b4 + S_GEN]! + 1) & 0xfffff;
    this.I[b4 + S_HNEXT] = this.M[M_FREE]!;
    this.M[M_FREE] = slot;
    this.M[M_COUNT]!--;
  }

  get size(): number {
    return this.M[M_COUNT]!;
  }

  *values(): Iterable<PassthroughNode> {
    const high = this.M[M_HIGH]!;
    for (let s = 1; s < high; s++) if (this.I[s * SLOT4 + S_USED] === 1) yield this.view(s)!;
  }

  clear(): void {
    const high = this.M[M_HIGH]!;
    for (let s = 2; s < high; s++) if (this.I[s * SLOT4 + S_USED] === 1) this.remove(this.view(s)!);
  }

  /** Put slot at the head of its hash chain. */
  private link(slot: number): void {
    const h = hashIno(this.F[slot * SLOT8 + F_INO]!, this.M[M_BUCKETS]! - 1);
    this.I[slot * SLOT4 + S_HNEXT] = this.B[h]!;
    this.B[h] = slot;
  }

  private growSlots(): void {
    const cap = this.M[M_CAP]!;
    const next = Math.min(cap * 2, SLOTS_MAX);
    if (next <= cap) throw new FuseError("ENOMEM", "passthrough: node table full");
    this.share.slots.grow(next * SLOT);
    this.M[M_CAP] = next;
  }

  private rehash(buckets: number): void {
    const old = this.M[M_BUCKETS]!;
    const chains: number[] = [];
    for (let h = 0; h < old; h++) {
      for (let s = this.B[h]!; s !== 0; s = this.I[s * SLOT4 + S_HNEXT]!) chains.push(s);
    }
    this.share.buckets.grow(buckets * 4);
    this.B.fill(0);
    this.M[M_BUCKETS] = buckets;
    for (const s of chains) this.link(s);
  }
}

// ---- the descriptor cache's shared counters and LRU ends -----------------------------------

export class SharedFdCacheState implements FdCacheState {
  constructor(private readonly t: SharedNodeTable) {}
  get held(): number { return this.t.C[C_HELD]!; }
  set held(v: number) { this.t.C[C_HELD] = v; }
  get maxHeld(): number { return this.t.C[C_MAXHELD]!; }
  set maxHeld(v: number) { this.t.C[C_MAXHELD] = v; }
  get evictions(): number { return this.t.C[C_EVICT]!; }
  set evictions(v: number) { this.t.C[C_EVICT] = v; }
  get reopenedByHandle(): number { return this.t.C[C_BYHANDLE]!; }
  set reopenedByHandle(v: number) { this.t.C[C_BYHANDLE] = v; }
  get reopenedByPath(): number { return this.t.C[C_BYPATH]!; }
  set reopenedByPath(v: number) { this.t.C[C_BYPATH] = v; }
  get shed(): number { return this.t.C[C_SHED]!; }
  set shed(v: number) { this.t.C[C_SHED] = v; }
  get failures(): number { return this.t.C[C_FAIL]!; }
  set failures(v: number) { this.t.C[C_FAIL] = v; }
  get head(): PassthroughNode | null { return this.t.view(this.t.M[M_LRU_HEAD]!); }
  set head(n: PassthroughNode | null) { this.t.M[M_LRU_HEAD] = n ? (n as SharedNode).slot : 0; }
  get tail(): PassthroughNode | null { return this.t.view(this.t.M[M_LRU_TAIL]!); }
  set tail(n: PassthroughNode | null) { this.t.M[M_LRU_TAIL] = n ? (n as SharedNode).slot : 0; }
}

// ---- directory handles ---------------------------------------------------------------------

/** One open directory's listing, read by index (passthrough.ts readdir). */
export interface DirListing {
  readonly loaded: boolean;
  readonly count: number;
  name(i: number): string;
  ino(i: number): number;
  type(i: number): number;
}

/** The open directory handles (fh = the directory's descriptor). */
export interface DirStore {
  open(fd: number): void;
  /** The listing of handle fh, or null if it is not open. */
  get(fh: number): DirListing | null;
  /** Replace fh's listing with a new snapshot. */
  store(fh: number, names: string[], inos: number[], types: number[]): void;
  /** Forget handle fh; whether it was open. */
  close(fh: number): boolean;
  /** Every open handle's descriptor (destroy). */
  fds(): number[];
  clear(): void;
}

// Directory record (Uint32Array over dirTable, 4 words per descriptor): state, arena offset of
// the listing, its bytes, its entry count. A listing: `count` records of 16 bytes (f64 d_ino,
// u32 name offset from the listing's start, u16 name length | u8 type << 16), then the names.
const D_STATE = 0, D_OFF = 1, D_BYTES = 2, D_COUNT = 3;
const CLOSED = 0, OPEN = 1, LOADED = 2;

class SharedListing implements DirListing {
  loaded = false;
  count = 0;
  private off = 0;
  constructor(private readonly d: SharedDirStore) {}
  at(off: number, count: number, loaded: boolean): this {
    this.off = off;
    this.count = count;
    this.loaded = loaded;
    return this;
  }
  ino(i: number): number {
    return this.d.F[(this.off >>> 3) + 2 * i]!;
  }
  type(i: number): number {
    return this.d.U32[(this.off >>> 2) + 4 * i + 3]! >>> 16;
  }
  name(i: number): string {
    const w = (this.off >>> 2) + 4 * i;
    const start = this.off + this.d.U32[w + 2]!;
    return decodeName(this.d.U8, start, start + (this.d.U32[w + 3]! & 0xffff));
  }
}

export class SharedDirStore implements DirStore {
  readonly U32: Uint32Array;
  readonly F: Float64Array;
  readonly U8: Uint8Array;
  private readonly D: Uint32Array;
  private readonly listing = new SharedListing(this);
  private readonly encodeBuf = new Uint8Array(4096);

  constructor(
    private readonly share: PassthroughShare,
    private readonly M: Int32Array,
  ) {
    this.U32 = new Uint32Array(share.arena);
    this.F = new Float64Array(share.arena);
    this.U8 = new Uint8Array(share.arena);
    this.D = new Uint32Array(share.dirTable);
  }

  open(fd: number): void {
    if (fd >= this.M[M_DIR_CAP]!) {
      let cap = this.M[M_DIR_CAP]!;
      while (cap <= fd) cap *= 2;
      if (cap * 16 > DIRS_MAX_BYTES) throw new FuseError("EMFILE", "passthrough: directory handle table full");
      this.share.dirTable.grow(cap * 16);
      this.M[M_DIR_CAP] = cap;
    }
    const r = fd * 4;
    this.D[r + D_STATE] = OPEN;
    this.D[r + D_OFF] = this.D[r + D_BYTES] = this.D[r + D_COUNT] = 0;
  }

  get(fh: number): DirListing | null {
    if (!(fh >= 0) || fh >= this.M[M_DIR_CAP]!) return null;
    const r = fh * 4, st = this.D[r + D_STATE]!;
    if (st === CLOSED) return null;
    return this.listing.at(this.D[r + D_OFF]!, this.D[r + D_COUNT]!, st === LOADED);
  }

  store(fh: number, names: string[], inos: number[], types: number[]): void {
    const r = fh * 4;
    this.release(fh);
    const count = names.length;
    let nameBytes = 0;
    const enc = this.encodeBuf;
    const lens: number[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const len = encodeName(names[i]!, enc, 0);
      lens[i] = len;
      nameBytes += len;
    }
    const bytes = (count * 16 + nameBytes + 7) & ~7;
    const off = this.alloc(bytes);
    let pos = count * 16;
    for (let i = 0; i < count; i++) {
      this.F[(off >>> 3) + 2 * i] = inos[i]!;
      const w = (off >>> 2) + 4 * i;
      this.U32[w + 2] = pos;
      this.U32[w + 3] = (lens[i]! & 0xffff) | (types[i]! << 16);
      encodeName(names[i]!, this.U8, off + pos);
      pos += lens[i]!;
    }
    this.D[r + D_STATE] = LOADED;
    this.D[r + D_OFF] = off;
    this.D[r + D_BYTES] = bytes;
    this.D[r + D_COUNT] = count;
  }

  close(fh: number): boolean {
    if (!(fh >= 0) || fh >= this.M[M_DIR_CAP]! || this.D[fh * 4 + D_STATE] === CLOSED) return false;
    this.release(fh);
    this.D[fh * 4 + D_STATE] = CLOSED;
    return true;
  }

  fds(): number[] {
    const out: number[] = [];
    const cap = this.M[M_DIR_CAP]!;
    for (let fd = 0; fd < cap; fd++) if (this.D[fd * 4 + D_STATE] !== CLOSED) out.push(fd);
    return out;
  }

  clear(): void {
    for (const fd of this.fds()) this.close(fd);
    this.M[M_ARENA_BUMP] = 0;
    this.M[M_ARENA_DEAD] = 0;
  }

  private release(fh: number): void {
    const r = fh * 4;
    if (this.D[r + D_STATE] === LOADED && this.D[r + D_BYTES]! > 0) this.M[M_ARENA_DEAD]! += this.D[r + D_BYTES]!;
    this.D[r + D_BYTES] = this.D[r + D_COUNT] = 0;
    if (this.D[r + D_STATE] === LOADED) this.D[r + D_STATE] = OPEN;
  }

  /** `bytes` (a multiple of 8) in the arena: bump; compact or grow when it is full. */
  private alloc(bytes: number): number {
    const M = this.M;
    if (M[M_ARENA_BUMP]! + bytes > this.share.arena.byteLength) {
      if (M[M_ARENA_DEAD]! > 0) this.compact();
      let size = this.share.arena.byteLength;
      while (M[M_ARENA_BUMP]! + bytes > size && size < ARENA_MAX) size = Math.min(size * 2, ARENA_MAX);
      if (M[M_ARENA_BUMP]! + bytes > size) throw new FuseError("ENOMEM", "passthrough: directory listings use all of their arena");
      if (size > this.share.arena.byteLength) this.share.arena.grow(size);
    }
    const off = M[M_ARENA_BUMP]!;
    M[M_ARENA_BUMP] = off + bytes;
    return off;
  }

  /** Move every live listing down to the start of the arena (in arena order). */
  private compact(): void {
    const live: number[] = [];
    const cap = this.M[M_DIR_CAP]!;
    for (let fd = 0; fd < cap; fd++) if (this.D[fd * 4 + D_STATE] === LOADED && this.D[fd * 4 + D_BYTES]! > 0) live.push(fd);
    live.sort((a, b) => this.D[a * 4 + D_OFF]! - this.D[b * 4 + D_OFF]!);
    let to = 0;
    for (const fd of live) {
      const r = fd * 4, from = this.D[r + D_OFF]!, n = this.D[r + D_BYTES]!;
      if (from !== to) this.U8.copyWithin(to, from, from + n);
      this.D[r + D_OFF] = to;
      to += n;
    }
    this.M[M_ARENA_BUMP] = to;
    this.M[M_ARENA_DEAD] = 0;
  }
}

// ---- the lock around handlers --------------------------------------------------------------
// Every InodeFS handler of PassthroughFS is in exactly one list (test/lock-lists.test.ts checks
// it, as for memfs).

/**
 * Handlers (and internals called outside a handler) run whole under the table's mutex: they
 * only read or change the table (FORGET, unmount), or are rare and make no call that can block
 * for long on the backing filesystem (killPriv: a statx and fchmod after a set-user-ID write;
 * sourcePath: a readlink of /proc).
 */
export const PASSTHROUGH_LOCKED = ["forget", "destroy", "killPriv", "sourcePath"] as const;

/**
 * Handlers that take the mutex themselves, around table, directory-store and descriptor-cache
 * operations only, never around a backing syscall (passthrough.ts, "Threads"): a slow backing
 * filesystem (NFS, a stalled disk, a FUSE source) holds up the caller only, not every thread.
 */
export const PASSTHROUGH_SELF_LOCKED = [
  "lookup", "getattr", "setattr", "readlink", "symlink", "mknod", "mkdir", "unlink", "rmdir", "rename", "link",
  "open", "create", "tmpfile", "release", "releaseClosed", "opendir", "readdir", "releasedir", "statfs",
  "setxattr", "getxattr", "listxattr", "removexattr", "access", "flush",
] as const;

/** Handlers that use only their file handle (a descriptor of their own): no lock. */
export const PASSTHROUGH_UNLOCKED = ["init", "read", "write", "fsync", "fsyncdir", "fallocate", "lseek", "copyFileRange"] as const;

/**
 * Give `fs` (one copy, or the main thread's instance) own methods that run the
 * PASSTHROUGH_LOCKED handlers under the table's mutex. The wrappers take the arguments one by
 * one (no rest array: nothing is allocated per request). `after`: run once the mutex is free
 * again (the descriptors closed meanwhile, see FdCache.closeLater).
 */
export function lockHandlers(fs: object, mutex: SharedMutex, after: () => void): void {
  const o = fs as Record<string, unknown>;
  for (const name of PASSTHROUGH_LOCKED) {
    const f = o[name];
    if (typeof f !== "function") continue;
    const wrapped = function (this: unknown, a: unknown, b: unknown, c: unknown, d: unknown, e: unknown, g: unknown, h: unknown, i: unknown, j: unknown) {
      mutex.lock();
      try {
        return f.call(this, a, b, c, d, e, g, h, i, j);
      } finally {
        mutex.unlock();
        if (!mutex.held) after();
      }
    };
    Object.defineProperty(fs, name, { value: wrapped, writable: true, configurable: true, enumerable: false });
  }
}
