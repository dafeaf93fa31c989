// File data pages: 4 KiB pages in growable SharedArrayBuffers ("segments" of up to 1 GiB),
// shared by every thread, with shared bookkeeping (a free stack and a high-water mark in shared
// words), so any thread can allocate and free pages under its owner's mutex.
//
// A page taken from the free stack may hold old data (`reused`): the caller zeroes it before
// use. A page past the high-water mark was never written and is zero (fresh SharedArrayBuffer
// memory).

import { growable, growTo } from "./growable.ts";

export const PAGE = 4096;
/** Pages per segment (1 GiB): a segment is one growable SharedArrayBuffer. */
export const SEG_PAGES = 1 << 18;
const SEG_BYTES = SEG_PAGES * PAGE;
/** Segments grow in steps of this many bytes (the reserved virtual space is committed as used). */
const GROW_STEP = 16 << 20;

const HIGH = 0;
const FREE_LEN = 1;
/** Meta words a page store takes. */
export const PAGES_WORDS = 2;

/** The free stack's buffer for a store of `maxPages` pages. */
export function pageFreeStack(maxPages: number): SharedArrayBuffer {
  return growable(0, Math.max(4, maxPages * 4));
}

export class PageStore {
  /** The segments (index: page / SEG_PAGES), all created up front (reserveAll) when shared. */
  readonly segs: SharedArrayBuffer[] = [];
  /** Length-tracking views of the segments (they follow a grow() by any thread); Buffers, so
   *  that Buffer#copy moves bytes without a subarray view per page. */
  readonly views: Buffer[] = [];
  /** Freed pages (a stack), length in the meta words. */
  private readonly stack: Int32Array;
  /** Whether the last alloc() reused a freed page (which then still holds old bytes). */
  reused = false;

  constructor(
    readonly maxPages: number,
    segs: SharedArrayBuffer[],
    private readonly freeBuf: SharedArrayBuffer,
    private readonly M: Int32Array,
    private readonly at: number,
  ) {
    for (const s of segs) this.addSegment(s);
    this.stack = new Int32Array(freeBuf);
  }

  /** The segments `maxPages` needs, reserved (virtual space only) so every thread maps the same. */
  static segments(maxPages: number): SharedArrayBuffer[] {
    const out: SharedArrayBuffer[] = [];
    for (let i = 0; i < Math.ceil(maxPages / SEG_PAGES); i++) out.push(growable(0, SEG_BYTES));
    return out;
  }

  private addSegment(s: SharedArrayBuffer): void {
    this.segs.push(s);
    this.views.push(Buffer.from(s));
  }

  /** Pages below this were handed out at least once. */
  get high(): number {
    return this.M[this.at + HIGH]!;
  }

  /** Take a page (bookkeeping only); the caller checked the space. */
  alloc(): number {
    const M = this.M, len = M[this.at + FREE_LEN]!;
    if (len > 0) {
      this.reused = true;
      M[this.at + FREE_LEN] = len - 1;
      return this.stack[len - 1]!;
    }
    this.reused = false;
    const high = M[this.at + HIGH]!;
    if (high >= this.maxPages) throw new Error("memfs: page store exhausted (accounting bug)");
    M[this.at + HIGH] = high + 1;
    return high;
  }

  release(p: number): void {
    const M = this.M, len = M[this.at + FREE_LEN]!;
    if (!growTo(this.freeBuf, (len + 1) * 4, 64 << 10)) throw new Error("BUG: memfs: more pages freed than exist");
    this.stack[len] = p;
    M[this.at + FREE_LEN] = len + 1;
  }

  /** Free pages (diagnostics). */
  get freeCount(): number {
    return this.M[this.at + FREE_LEN]!;
  }

  /** The view holding page `p`, made large enough to write it. Offset: pageOffset(p). */
  viewOf(p: number): Buffer {
    const seg = Math.floor(p / SEG_PAGES);
    const v = this.views[seg]!;
    const need = (p - seg * SEG_PAGES + 1) * PAGE;
    if (v.length < need) {
      const s = this.segs[seg]!;
      // Another thread may have grown it already (the view tracks the shared length).
      if (s.byteLength < need) s.grow(Math.min(SEG_BYTES, Math.ceil(need / GROW_STEP) * GROW_STEP));
    }
    return v;
  }
}

/** Byte offset of page `p` in its segment's view. */
export function pageOffset(p: number): number {
  return (p % SEG_PAGES) * PAGE;
}
