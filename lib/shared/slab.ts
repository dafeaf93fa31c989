// A slab: fixed-size records in one growable SharedArrayBuffer, shared by every thread.
// Record 0 is never handed out (slot 0 means "none" in every link). Freed records are chained
// through their word 0 and reused last-freed first. Bookkeeping (capacity, high-water mark,
// free list, count) lives in SLAB_WORDS words of a shared Int32Array, so any thread may
// allocate (under the owner's mutex). The slab never clears a record: its owner initialises
// the words it uses (it may keep some across reuse, e.g. a generation number).

import { growTo } from "./growable.ts";

const HIGH = 0;
const FREE = 1;
const COUNT = 2;
/** Meta words a slab takes. */
export const SLAB_WORDS = 3;

export class Slab {
  /** The records as Int32 and Float64 words (length-tracking: they follow any thread's grow). */
  readonly I: Int32Array;
  readonly F: Float64Array;
  private readonly bytes: number;

  constructor(
    readonly buf: SharedArrayBuffer,
    /** Int32 words per record (even: records stay 8-byte aligned for the Float64 view). */
    readonly words: number,
    private readonly M: Int32Array,
    private readonly at: number,
  ) {
    if (words % 2 !== 0) throw new Error("BUG: slab records must be a multiple of 8 bytes");
    this.bytes = words * 4;
    this.I = new Int32Array(buf);
    this.F = new Float64Array(buf);
  }

  /** Fill fresh meta words (before any thread uses the slab). */
  static init(M: Int32Array, at: number): void {
    M[at + HIGH] = 1;
    M[at + FREE] = 0;
    M[at + COUNT] = 0;
  }

  /** Records in use. */
  get count(): number {
    return this.M[this.at + COUNT]!;
  }

  /** Slots below this were handed out at least once. */
  get high(): number {
    return this.M[this.at + HIGH]!;
  }

  /** Whether one more record can be allocated without growing past the buffer's maximum. */
  canAlloc(): boolean {
    return this.M[this.at + FREE] !== 0 || (this.M[this.at + HIGH]! + 1) * this.bytes <= this.buf.maxByteLength;
  }

  /** A record's slot (its words hold whatever they held), or 0 when the slab is full. */
  alloc(): number {
    const M = this.M, at = this.at;
    let slot = M[at + FREE]!;
    if (slot !== 0) {
      M[at + FREE] = this.I[slot * this.words]!;
    } else {
      slot = M[at + HIGH]!;
      if (!growTo(this.buf, (slot + 1) * this.bytes, 64 << 10)) return 0;
      M[at + HIGH] = slot + 1;
    }
    M[at + COUNT]!++;
    return slot;
  }

  /** Give `slot` back (its word 0 becomes the free-list link). */
  free(slot: number): void {
    const M = this.M, at = this.at;
    this.I[slot * this.words] = M[at + FREE]!;
    M[at + FREE] = slot;
    M[at + COUNT]!--;
  }
}
