// The path layer's node table in SharedArrayBuffers (`threads: "stateless"` scripts): every
// thread runs its own PathFS over this one table, so a node id or file handle handed out by one
// thread means the same file on every other, FORGET is applied once (by whichever thread gets
// it), and lookup counts add up across threads. Memory does not grow with the number of threads.
//
// - Nodes: fixed-size slots in a growable SharedArrayBuffer (every thread's length-tracking
//   views see growth). Node id = generation × 2^32 + slot: every thread decodes an id alike, and
//   an id of a freed and reused slot is recognised as stale. A slot keeps the parent's slot and
//   the name's bytes (≤ 255, NAME_MAX), the lookup and open counts, the number of child slots
//   that refer to it, PathFS's per-node flags and the descriptor of a backed open (its size).
// - (parent, name) index: a chained hash table (buckets in a growable buffer, chains through
//   the slots), doubled and rehashed under the lock. Unlinked nodes (still held) leave the index
//   but keep their parent link, so their path stays what it was.
// - File handles: slots of their own, fh = slot; each keeps what another thread needs to serve
//   a request on a handle it did not open (node, flags, backed descriptor, the handler's handle
//   value as JSON) and a serial number, so a thread's cached view of a released fh is noticed.
// - One lock around each method: all are synchronous and short (no handler runs under it). The
//   project's one shared mutex (lib/shared/mutex.ts, as memfs and the passthrough's table): the
//   holder's thread id in the lock word, a bound on a holder, fail-stop past it.

import { FuseError } from "../protocol/errors.ts";
import { decodeName, encodeName } from "../protocol/names.ts";
import { MUTEX_WORDS, SharedMutex } from "../shared/mutex.ts";
import { ROOT, type HandleRecord, type KnownNode, type NodeTable } from "./nodes.ts";

const TWO32 = 4294967296;
const NAME_MAX = 255;

/** What crosses to the other threads (CopiesPlan.shared): only SharedArrayBuffers. */
export interface PathTableShare {
  readonly kind: "fuse-uring.path-table";
  meta: SharedArrayBuffer;
  slots: SharedArrayBuffer;
  buckets: SharedArrayBuffer;
  handles: SharedArrayBuffer;
}

export function isPathTableShare(x: unknown): x is PathTableShare {
  return typeof x === "object" && x !== null && (x as { kind?: unknown }).kind === "fuse-uring.path-table";
}

// ---- meta words ------------------------------------------------------------------------------
const M_MUTEX = 0; // the mutex: words 0..2 (lib/shared/mutex.ts)
const M_COUNT = M_MUTEX + MUTEX_WORDS, M_CAP = M_COUNT + 1, M_FREE = M_COUNT + 2, M_HIGH = M_COUNT + 3, M_BUCKETS = M_COUNT + 4;
const M_HCAP = M_COUNT + 5, M_HFREE = M_COUNT + 6, M_HHIGH = M_COUNT + 7, M_HCOUNT = M_COUNT + 8;
const M_SERIAL = 8; // Float64 word (byte 64, after the Int32 words above): handle serial numbers
const META_BYTES = 128;

// ---- node slot (Int32 words) -----------------------------------------------------------------
const SLOT = 304, SLOT4 = SLOT / 4, SLOT8 = SLOT / 8;
const W_GEN = 0, W_STATE = 1, W_PARENT = 2, W_NAMELEN = 3, W_HNEXT = 4, W_OPENS = 5, W_CHILDREN = 6;
const W_FLAGS = 7, W_BFD = 8, W_NLOOKUP = 9;
const F_OPENED = 5; // Float64 word (byte 40)
const NAME_AT = 48; // byte offset of the name
const USED = 1, DETACHED = 2;

// ---- handle slot -----------------------------------------------------------------------------
const HSLOT = 256, HSLOT4 = HSLOT / 4, HSLOT8 = HSLOT / 8;
const H_USED = 0, H_DIR = 1, H_FLAGS = 2, H_SNAP = 3, H_FD = 4, H_OWNED = 5, H_WRITABLE = 6, H_OWNER = 7, H_VLEN = 8;
const HF_INO = 5, HF_SERIAL = 6; // Float64 words (bytes 40, 48)
const VALUE_AT = 56;
export const HANDLE_VALUE_MAX = HSLOT - VALUE_AT;

const SLOTS_INITIAL = 1024, SLOTS_MAX = Math.floor((1 << 30) / SLOT);
const BUCKETS_INITIAL = 1024, BUCKETS_MAX = 16 << 20;
const HANDLES_INITIAL = 256, HANDLES_MAX = (256 << 20) / HSLOT;

function growable(bytes: number, max: number): SharedArrayBuffer {
  return new SharedArrayBuffer(bytes, { maxByteLength: max } as never);
}

/** Create the table (the first thread), with the root in slot 1. */
export function createPathTable(): PathTableShare {
  const share: PathTableShare = {
    kind: "fuse-uring.path-table",
    meta: new SharedArrayBuffer(META_BYTES),
    slots: growable(SLOTS_INITIAL * SLOT, SLOTS_MAX * SLOT),
    buckets: growable(BUCKETS_INITIAL * 4, BUCKETS_MAX * 4),
    handles: growable(HANDLES_INITIAL * HSLOT, HANDLES_MAX * HSLOT),
  };
  const m = new Int32Array(share.meta);
  m[M_CAP] = SLOTS_INITIAL;
  m[M_HIGH] = 2; // slot 0 unused (0 = "none" in links), slot 1 = root
  m[M_COUNT] = 1;
  m[M_BUCKETS] = BUCKETS_INITIAL;
  m[M_HCAP] = HANDLES_INITIAL;
  m[M_HHIGH] = 1;
  const s = new Int32Array(share.slots);
  s[SLOT4 + W_STATE] = USED;
  s[SLOT4 + W_NLOOKUP] = 1; // the kernel's reference to the root is never given back
  s[SLOT4 + W_BFD] = -1;
  return share;
}

export class SharedNodes implements NodeTable {
  private readonly m: Int32Array;
  private readonly mf: Float64Array;
  private readonly I: Int32Array;
  private readonly F: Float64Array;
  private readonly B: Uint8Array;
  private buckets: Int32Array;
  private readonly HI: Int32Array;
  private readonly HF: Float64Array;
  private readonly HB: Uint8Array;
  private readonly scratch = new Uint8Array(NAME_MAX * 4 + 8);
  private readonly values = new TextEncoder();
  private readonly valuesOut = new TextDecoder();
  /** Around every method; table operations only, never a handler. */
  private readonly mutex: SharedMutex;

  /** `thread`: this thread's number, recorded as the owner of the handles it opens. */
  constructor(readonly share: PathTableShare, readonly thread: number) {
    this.m = new Int32Array(share.meta);
    this.mf = new Float64Array(share.meta);
    this.I = new Int32Array(share.slots);
    this.F = new Float64Array(share.slots);
    this.B = new Uint8Array(share.slots);
    this.buckets = new Int32Array(share.buckets);
    this.HI = new Int32Array(share.handles);
    this.HF = new Float64Array(share.handles);
    this.HB = new Uint8Array(share.handles);
    this.mutex = new SharedMutex(this.m, M_MUTEX, { name: "path node table" });
  }

  /** Times a thread found the table locked and had to wait (all threads). */
  get lockWaits(): number {
    return this.mutex.waits;
  }

  // ---- slots (called with the lock held) --------------------------------------------------------

  /** The slot of a live node id, or 0. */
  private slotOf(ino: number): number {
    if (ino === ROOT) return 1;
    const slot = ino % TWO32;
    const gen = Math.floor(ino / TWO32);
    if (slot < 2 || slot >= this.m[M_HIGH]!) return 0;
    const b = slot * SLOT4;
    return this.I[b + W_STATE]! & USED && this.I[b + W_GEN] === gen ? slot : 0;
  }

  private idOf(slot: number): number {
    return slot === 1 ? ROOT : this.I[slot * SLOT4 + W_GEN]! * TWO32 + slot;
  }

  private encode(name: string): number {
    let len: number;
    try {
      len = encodeName(name, this.scratch, 0);
    } catch {
      len = NAME_MAX + 1; // longer than the scratch buffer
    }
    if (len > NAME_MAX) throw new FuseError("ENAMETOOLONG", `names of more than ${NAME_MAX} bytes cannot be shared between threads`);
    return len;
  }

  private hash(parent: number, len: number): number {
    let h = (0x811c9dc5 ^ parent) >>> 0;
    const s = this.scratch;
    for (let i = 0; i < len; i++) h = Math.imul(h ^ s[i]!, 0x01000193);
    return (h >>> 0) & (this.m[M_BUCKETS]! - 1);
  }

  private nameEquals(slot: number, len: number): boolean {
    const b = slot * SLOT4;
    if (this.I[b + W_NAMELEN] !== len) return false;
    const at = slot * SLOT + NAME_AT;
    const s = this.scratch, B = this.B;
    for (let i = 0; i < len; i++) if (B[at + i] !== s[i]) return false;
    return true;
  }

  /** The attached child slot with the name in scratch[0, len), or 0. */
  private find(parent: number, len: number): number {
    for (let s = this.buckets[this.hash(parent, len)]!; s !== 0; s = this.I[s * SLOT4 + W_HNEXT]!) {
      if (this.I[s * SLOT4 + W_PARENT] === parent && this.nameEquals(s, len)) return s;
    }
    return 0;
  }

  private unindex(slot: number): void {
    const b = slot * SLOT4;
    const len = this.I[b + W_NAMELEN]!;
    this.scratch.set(this.B.subarray(slot * SLOT + NAME_AT, slot * SLOT + NAME_AT + len));
    const h = this.hash(this.I[b + W_PARENT]!, len);
    let prev = 0;
    for (let s = this.buckets[h]!; s !== 0; prev = s, s = this.I[s * SLOT4 + W_HNEXT]!) {
      if (s !== slot) continue;
      if (prev === 0) this.buckets[h] = this.I[b + W_HNEXT]!;
      else this.I[prev * SLOT4 + W_HNEXT] = this.I[b + W_HNEXT]!;
      break;
    }
    this.I[b + W_HNEXT] = 0;
  }

  /** Put `slot` into the index under its current parent and name (scratch holds the name). */
  private index(slot: number, len: number): void {
    const h = this.hash(this.I[slot * SLOT4 + W_PARENT]!, len);
    this.I[slot * SLOT4 + W_HNEXT] = this.buckets[h]!;
    this.buckets[h] = slot;
  }

  private growBuckets(): void {
    const nb = this.m[M_BUCKETS]! * 2;
    if (nb > BUCKETS_MAX) return; // longer chains from here on
    this.share.buckets.grow(nb * 4);
    this.buckets = new Int32Array(this.share.buckets);
    this.m[M_BUCKETS] = nb;
    this.buckets.fill(0);
    const high = this.m[M_HIGH]!;
    for (let s = 2; s < high; s++) {
      const b = s * SLOT4;
      if ((this.I[b + W_STATE]! & (USED | DETACHED)) !== USED) continue;
      const len = this.I[b + W_NAMELEN]!;
      this.scratch.set(this.B.subarray(s * SLOT + NAME_AT, s * SLOT + NAME_AT + len));
      this.index(s, len);
    }
  }

  private allocSlot(): number {
    let s = this.m[M_FREE]!;
    if (s !== 0) {
      this.m[M_FREE] = this.I[s * SLOT4 + W_HNEXT]!;
    } else {
      s = this.m[M_HIGH]!;
      if (s >= this.m[M_CAP]!) {
        const cap = Math.min(SLOTS_MAX, this.m[M_CAP]! * 2);
        if (s >= cap) throw new FuseError("ENOSPC", "path table full");
        this.share.slots.grow(cap * SLOT);
        this.m[M_CAP] = cap;
      }
      this.m[M_HIGH] = s + 1;
    }
    this.m[M_COUNT]!++;
    return s;
  }

  /** Free nodes nobody refers to any more (and, in turn, parents kept only for them). */
  private maybeDrop(slot: number): void {
    while (slot > 1) {
      const b = slot * SLOT4;
      if (this.I[b + W_NLOOKUP]! > 0 || this.I[b + W_OPENS]! > 0 || this.I[b + W_CHILDREN]! > 0) return;
      if (!(this.I[b + W_STATE]! & DETACHED)) this.unindex(slot);
      const parent = this.I[b + W_PARENT]!;
      this.I[b + W_STATE] = 0;
      this.I[b + W_GEN] = (this.I[b + W_GEN]! + 1) % (1 << 20); // its id goes stale
      this.I[b + W_HNEXT] = this.m[M_FREE]!;
      this.m[M_FREE] = slot;
      this.m[M_COUNT]!--;
      if (parent) this.I[parent * SLOT4 + W_CHILDREN]!--;
      slot = parent;
    }
  }

  private pathOfSlot(slot: number): string {
    if (slot === 1) return "/";
    const parts: string[] = [];
    for (let s = slot; s > 1; s = this.I[s * SLOT4 + W_PARENT]!) {
      const at = s * SLOT + NAME_AT;
      parts.push(decodeName(this.B, at, at + this.I[s * SLOT4 + W_NAMELEN]!));
    }
    return "/" + parts.reverse().join("/");
  }

  private detachSlot(slot: number): void {
    const b = slot * SLOT4;
    if (this.I[b + W_STATE]! & DETACHED) return;
    this.unindex(slot);
    this.I[b + W_STATE]! |= DETACHED;
    this.maybeDrop(slot);
  }

  // ---- NodeTable -----------------------------------------------------------------------------------

  get count(): number {
    return Atomics.load(this.m, M_COUNT);
  }

  has(ino: number): boolean {
    this.mutex.lock();
    try {
      return this.slotOf(ino) !== 0;
    } finally {
      this.mutex.unlock();
    }
  }

  pathOf(ino: number): string | undefined {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      return s ? this.pathOfSlot(s) : undefined;
    } finally {
      this.mutex.unlock();
    }
  }

  parentOf(ino: number): number {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      const p = s > 1 && !(this.I[s * SLOT4 + W_STATE]! & DETACHED) ? this.I[s * SLOT4 + W_PARENT]! : 0;
      return p ? this.idOf(p) : 0;
    } finally {
      this.mutex.unlock();
    }
  }

  childOf(parent: number, name: string): number | undefined {
    this.mutex.lock();
    try {
      const p = this.slotOf(parent);
      if (!p) return undefined;
      const len = this.tryEncode(name);
      if (len < 0) return undefined;
      const s = this.find(p, len);
      return s ? this.idOf(s) : undefined;
    } finally {
      this.mutex.unlock();
    }
  }

  /** For childOf: a too-long name is simply not in the table. */
  tryEncode(name: string): number {
    try {
      return this.encode(name);
    } catch {
      return -1;
    }
  }

  hold(parent: number, name: string): number {
    this.mutex.lock();
    try {
      const p = this.slotOf(parent);
      if (!p) throw new FuseError("ESTALE", `unknown node id ${parent}`);
      const len = this.encode(name);
      let s = this.find(p, len);
      if (!s) {
        if (this.m[M_COUNT]! >= this.m[M_BUCKETS]! * 2) this.growBuckets();
        s = this.allocSlot();
        const b = s * SLOT4;
        this.I[b + W_STATE] = USED;
        this.I[b + W_PARENT] = p;
        this.I[b + W_NAMELEN] = len;
        this.I[b + W_OPENS] = 0;
        this.I[b + W_NLOOKUP] = 0;
        this.I[b + W_CHILDREN] = 0;
        this.I[b + W_FLAGS] = 0;
        this.I[b + W_BFD] = -1;
        this.F[s * SLOT8 + F_OPENED] = 0;
        this.B.set(this.scratch.subarray(0, len), s * SLOT + NAME_AT);
        this.index(s, len);
        this.I[p * SLOT4 + W_CHILDREN]!++;
      }
      this.I[s * SLOT4 + W_OPENS]!++;
      return this.idOf(s);
    } finally {
      this.mutex.unlock();
    }
  }

  unhold(ino: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (!s) return;
      this.I[s * SLOT4 + W_OPENS]!--;
      this.maybeDrop(s);
    } finally {
      this.mutex.unlock();
    }
  }

  addOpen(ino: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (!s) throw new FuseError("ESTALE", `unknown node id ${ino}`);
      this.I[s * SLOT4 + W_OPENS]!++;
    } finally {
      this.mutex.unlock();
    }
  }

  addLookup(ino: number, n: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (!s) throw new FuseError("ESTALE", `unknown node id ${ino}`);
      this.I[s * SLOT4 + W_NLOOKUP]! += n;
    } finally {
      this.mutex.unlock();
    }
  }

  forget(ino: number, n: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (s <= 1) return;
      const b = s * SLOT4;
      this.I[b + W_NLOOKUP] = Math.max(0, this.I[b + W_NLOOKUP]! - n);
      this.maybeDrop(s);
    } finally {
      this.mutex.unlock();
    }
  }

  detach(parent: number, name: string): void {
    this.mutex.lock();
    try {
      const p = this.slotOf(parent);
      const len = p ? this.tryEncode(name) : -1;
      const s = len >= 0 ? this.find(p, len) : 0;
      if (s) this.detachSlot(s);
    } finally {
      this.mutex.unlock();
    }
  }

  move(parent: number, name: string, newParent: number, newName: string): void {
    this.mutex.lock();
    try {
      const p = this.slotOf(parent);
      const np = this.slotOf(newParent);
      if (!p || !np) throw new FuseError("ESTALE");
      const newLen = this.encode(newName);
      const target = this.find(np, newLen);
      if (target) this.detachSlot(target);
      const len = this.tryEncode(name);
      const s = len >= 0 ? this.find(p, len) : 0;
      if (!s) return;
      this.unindex(s);
      this.encode(newName);
      const b = s * SLOT4;
      this.I[b + W_PARENT] = np;
      this.I[b + W_NAMELEN] = newLen;
      this.B.set(this.scratch.subarray(0, newLen), s * SLOT + NAME_AT);
      this.index(s, newLen);
      if (np !== p) {
        this.I[np * SLOT4 + W_CHILDREN]!++;
        this.I[p * SLOT4 + W_CHILDREN]!--;
        this.maybeDrop(p);
      }
    } finally {
      this.mutex.unlock();
    }
  }

  flags(ino: number): number {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      return s ? this.I[s * SLOT4 + W_FLAGS]! : 0;
    } finally {
      this.mutex.unlock();
    }
  }

  setFlags(ino: number, mask: number, value: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (s) this.I[s * SLOT4 + W_FLAGS] = (this.I[s * SLOT4 + W_FLAGS]! & ~mask) | (value & mask);
    } finally {
      this.mutex.unlock();
    }
  }

  openedSize(ino: number): number {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      return s ? this.F[s * SLOT8 + F_OPENED]! : 0;
    } finally {
      this.mutex.unlock();
    }
  }

  setOpenedSize(ino: number, size: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (s) this.F[s * SLOT8 + F_OPENED] = size;
    } finally {
      this.mutex.unlock();
    }
  }

  backedFd(ino: number): number {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      return s ? this.I[s * SLOT4 + W_BFD]! : -1;
    } finally {
      this.mutex.unlock();
    }
  }

  setBackedFd(ino: number, fd: number, ifFd?: number): void {
    this.mutex.lock();
    try {
      const s = this.slotOf(ino);
      if (s && (ifFd === undefined || this.I[s * SLOT4 + W_BFD] === ifFd)) this.I[s * SLOT4 + W_BFD] = fd;
    } finally {
      this.mutex.unlock();
    }
  }

  known(): KnownNode[] {
    this.mutex.lock();
    try {
      const out: KnownNode[] = [];
      const high = this.m[M_HIGH]!;
      for (let s = 1; s < high; s++) {
        const b = s * SLOT4;
        if ((this.I[b + W_STATE]! & (USED | DETACHED)) !== USED) continue;
        const parent = s === 1 ? 0 : this.I[b + W_PARENT]!;
        const at = s * SLOT + NAME_AT;
        out.push({ ino: this.idOf(s), path: this.pathOfSlot(s), parent: parent ? this.idOf(parent) : 0, name: s === 1 ? "" : decodeName(this.B, at, at + this.I[b + W_NAMELEN]!) });
      }
      return out;
    } finally {
      this.mutex.unlock();
    }
  }

  // ---- handles -----------------------------------------------------------------------------------

  newHandle(rec: HandleRecord | null): number {
    if (!rec) throw new Error("SharedNodes.newHandle needs the handle's record");
    let value: Uint8Array | null = null;
    if (rec.value !== undefined) {
      value = this.values.encode(rec.value);
      if (value.length > HANDLE_VALUE_MAX) throw new Error(`the handle's JSON is ${value.length} bytes; at most ${HANDLE_VALUE_MAX} fit`);
    }
    this.mutex.lock();
    try {
      let h = this.m[M_HFREE]!;
      if (h !== 0) this.m[M_HFREE] = this.HI[h * HSLOT4 + H_USED]! >>> 1;
      else {
        h = this.m[M_HHIGH]!;
        if (h >= this.m[M_HCAP]!) {
          const cap = Math.min(HANDLES_MAX, this.m[M_HCAP]! * 2);
          if (h >= cap) throw new FuseError("ENFILE", "handle table full");
          this.share.handles.grow(cap * HSLOT);
          this.m[M_HCAP] = cap;
        }
        this.m[M_HHIGH] = h + 1;
      }
      this.m[M_HCOUNT]!++;
      const b = h * HSLOT4;
      this.HI[b + H_USED] = 1;
      this.HI[b + H_DIR] = rec.dir ? 1 : 0;
      this.HI[b + H_FLAGS] = rec.flags;
      this.HI[b + H_SNAP] = rec.snapshot ? 1 : 0;
      this.HI[b + H_FD] = rec.fd;
      this.HI[b + H_OWNED] = rec.owned ? 1 : 0;
      this.HI[b + H_WRITABLE] = rec.writable ? 1 : 0;
      this.HI[b + H_OWNER] = this.thread;
      this.HI[b + H_VLEN] = value ? value.length : -1;
      if (value) this.HB.set(value, h * HSLOT + VALUE_AT);
      this.HF[h * HSLOT8 + HF_INO] = rec.ino;
      this.HF[h * HSLOT8 + HF_SERIAL] = ++this.mf[M_SERIAL]!;
      return h;
    } finally {
      this.mutex.unlock();
    }
  }

  /** Serial number of a live fh (0: released): a thread's cached view is current only if it matches. */
  serial(fh: number): number {
    if (!(fh >= 1 && fh < Atomics.load(this.m, M_HHIGH))) return 0;
    this.mutex.lock();
    try {
      return this.HI[fh * HSLOT4 + H_USED] === 1 ? this.HF[fh * HSLOT8 + HF_SERIAL]! : 0;
    } finally {
      this.mutex.unlock();
    }
  }

  handle(fh: number): (HandleRecord & { serial: number }) | null {
    if (!(fh >= 1 && fh < Atomics.load(this.m, M_HHIGH))) return null;
    this.mutex.lock();
    try {
      const b = fh * HSLOT4;
      if (this.HI[b + H_USED] !== 1) return null;
      const vlen = this.HI[b + H_VLEN]!;
      return {
        dir: this.HI[b + H_DIR] === 1,
        ino: this.HF[fh * HSLOT8 + HF_INO]!,
        flags: this.HI[b + H_FLAGS]!,
        snapshot: this.HI[b + H_SNAP] === 1,
        fd: this.HI[b + H_FD]!,
        owned: this.HI[b + H_OWNED] === 1,
        writable: this.HI[b + H_WRITABLE] === 1,
        owner: this.HI[b + H_OWNER]!,
        value: vlen < 0 ? undefined : this.valuesOut.decode(this.HB.slice(fh * HSLOT + VALUE_AT, fh * HSLOT + VALUE_AT + vlen)),
        serial: this.HF[fh * HSLOT8 + HF_SERIAL]!,
      };
    } finally {
      this.mutex.unlock();
    }
  }

  freeHandle(fh: number): void {
    if (!(fh >= 1 && fh < Atomics.load(this.m, M_HHIGH))) return;
    this.mutex.lock();
    try {
      const b = fh * HSLOT4;
      if (this.HI[b + H_USED] !== 1) return;
      // Free list through the used word (bit 0 clear = free).
      this.HI[b + H_USED] = this.m[M_HFREE]! << 1;
      this.m[M_HFREE] = fh;
      this.m[M_HCOUNT]!--;
    } finally {
      this.mutex.unlock();
    }
  }

  /** Open handles (all threads). */
  get handleCount(): number {
    return Atomics.load(this.m, M_HCOUNT);
  }
}
