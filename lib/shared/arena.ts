// An arena: variable-size blocks (names, symlink targets, xattrs, directory lists) in one
// growable SharedArrayBuffer, shared by every thread (under the owner's mutex).
//
// Blocks come in power-of-two size classes (16 B .. 1 GiB): a freed block goes on its class's
// free list and is reused whole, so nothing ever moves (an offset stays valid for the block's
// life) and the waste is below half a block. Each block starts with an 8-byte header (its
// class); alloc() returns the offset of the bytes after it (8-byte aligned). Offset 0 is never
// returned: it means "no block".

import { growTo } from "./growable.ts";

const BUMP = 0;
const HEADS = 1;
const CLASSES = 27; // 16 << 26 = 1 GiB
/** Meta words an arena takes. */
export const ARENA_WORDS = HEADS + CLASSES;
const HDR = 8;

export class Arena {
  readonly U8: Uint8Array;
  readonly U16: Uint16Array;
  readonly I: Int32Array;
  readonly F: Float64Array;

  constructor(
    readonly buf: SharedArrayBuffer,
    private readonly M: Int32Array,
    private readonly at: number,
  ) {
    this.U8 = new Uint8Array(buf);
    this.U16 = new Uint16Array(buf);
    this.I = new Int32Array(buf);
    this.F = new Float64Array(buf);
  }

  static init(M: Int32Array, at: number): void {
    M[at + BUMP] = 16; // offset 0 stays unused
    for (let k = 0; k < CLASSES; k++) M[at + HEADS + k] = 0;
  }

  /** A block of at least `bytes` bytes (its contents are undefined); 0 when the arena is full. */
  alloc(bytes: number): number {
    let k = 0;
    while ((16 << k) < bytes + HDR) if (++k >= CLASSES) return 0;
    const M = this.M, head = this.at + HEADS + k;
    let block = M[head]!;
    if (block !== 0) {
      M[head] = this.I[(block + HDR) >> 2]!;
    } else {
      block = M[this.at + BUMP]!;
      const end = block + (16 << k);
      if (end > 0x7fff0000 || !growTo(this.buf, end, 1 << 20)) return 0;
      M[this.at + BUMP] = end;
    }
    this.I[block >> 2] = k;
    return block + HDR;
  }

  /** Bytes block `off` can hold. */
  capacity(off: number): number {
    return (16 << this.I[(off - HDR) >> 2]!) - HDR;
  }

  free(off: number): void {
    if (off === 0) return;
    const block = off - HDR;
    const head = this.at + HEADS + this.I[block >> 2]!;
    this.I[off >> 2] = this.M[head]!;
    this.M[head] = block;
  }

  /** Bytes taken from the buffer so far (diagnostics). */
  get used(): number {
    return this.M[this.at + BUMP]!;
  }
}
