// memfs file data: 4 KiB pages in growable SharedArrayBuffers ("segments" of up to 1 GiB).
//
// The allocator's bookkeeping (the free list and the high-water mark) is plain JS state: with
// `--workers N` every copy of memfs replays the same allocations in the same order
// (memfs-shared.ts), so every copy agrees on which page holds what without sharing the
// bookkeeping itself. The bytes live once, in the segments, which every copy maps.
//
// Only the copy that executes an operation touches bytes (copying, zeroing a reused page); a
// replay does the bookkeeping only. A page taken from the free list may hold old data and is
// zeroed by the executing copy before use; a page past the high-water mark was never written
// and is zero (fresh SharedArrayBuffer memory).

export const PAGE = 4096;
/** Pages per segment (1 GiB): a segment is one growable SharedArrayBuffer. */
export const SEG_PAGES = 1 << 18;
const SEG_BYTES = SEG_PAGES * PAGE;
/** Segments grow in steps of this many bytes (the reserved virtual space is committed as used). */
const GROW_STEP = 16 << 20;

export class PageStore {
  /** The segments (index: page / SEG_PAGES); created on demand unless shared up front. */
  readonly segs: SharedArrayBuffer[] = [];
  /** Length-tracking views of the segments (they follow a grow() by any thread); Buffers, so
   *  that Buffer#copy moves bytes without a subarray view per page. */
  readonly views: Buffer[] = [];
  /** Freed pages, reused last-freed first. Replicated bookkeeping. */
  private readonly free: number[] = [];
  /** Pages below this were handed out at least once. Replicated bookkeeping. */
  high = 0;
  /** Whether the last alloc() reused a freed page (which then still holds old bytes). */
  reused = false;

  constructor(readonly maxPages: number, shared?: SharedArrayBuffer[]) {
    if (shared) for (const s of shared) this.addSegment(s);
  }

  /** Create every segment `maxPages` needs now (before the segments are shared with copies). */
  reserveAll(): SharedArrayBuffer[] {
    const count = Math.ceil(this.maxPages / SEG_PAGES);
    while (this.segs.length < count) this.addSegment(new SharedArrayBuffer(0, { maxByteLength: SEG_BYTES }));
    return this.segs;
  }

  private addSegment(s: SharedArrayBuffer): void {
    this.segs.push(s);
    this.views.push(Buffer.from(s));
  }

  /** Take a page (bookkeeping only). */
  alloc(): number {
    if (this.free.length > 0) {
      this.reused = true;
      return this.free.pop()!;
    }
    this.reused = false;
    if (this.high >= this.maxPages) throw new Error("memfs: page store exhausted (accounting bug)");
    return this.high++;
  }

  release(p: number): void {
    this.free.push(p);
  }

  /** Free pages (diagnostics). */
  get freeCount(): number {
    return this.free.length;
  }

  /** The view holding page `p`, made large enough (executing copy only). Offset: pageOffset(p). */
  viewOf(p: number): Buffer {
    const seg = Math.floor(p / SEG_PAGES);
    let v = this.views[seg];
    if (v === undefined) {
      while (this.segs.length <= seg) this.addSegment(new SharedArrayBuffer(0, { maxByteLength: SEG_BYTES }));
      v = this.views[seg]!;
    }
    const need = (p - seg * SEG_PAGES + 1) * PAGE;
    if (v.length < need) {
      const s = this.segs[seg]!;
      // Another copy may have grown it already (the view tracks the shared length).
      if (s.byteLength < need) s.grow(Math.min(SEG_BYTES, Math.ceil(need / GROW_STEP) * GROW_STEP));
    }
    return v;
  }
}

/** Byte offset of page `p` in its segment's view. */
export function pageOffset(p: number): number {
  return (p % SEG_PAGES) * PAGE;
}
