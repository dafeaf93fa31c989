// Builds Slot views over shim-owned memory once, and drains completion records.

import { toArrayBuffer, type Pointer } from "bun:ffi";
import { RING_HEADER_SIZE } from "../protocol/constants.ts";
import type { PayloadViews, Sink, Slot, Source } from "./types.ts";
import { COMPLETION_IO_DONE, COMPLETION_REQUEST, COMPLETION_STOPPED } from "./types.ts";

export function makeSlot(source: Source, index: number, header: Pointer, payload: Pointer, payloadSize: number): Slot {
  return makeSlotWith(source, index, header, payloadViews(toArrayBuffer(payload, 0, payloadSize), 0, payloadSize));
}

/** A slot whose payload views are given (a pool buffer's, rebound per request). */
export function makeSlotWith(source: Source, index: number, header: Pointer, views: PayloadViews): Slot {
  const hbuf = toArrayBuffer(header, 0, RING_HEADER_SIZE);
  return { source, index, header: new DataView(hbuf), headerBytes: new Uint8Array(hbuf), ...views };
}

/** Views over `size` bytes at `offset` of `buf` (an ArrayBuffer or a SharedArrayBuffer). */
export function payloadViews(buf: ArrayBufferLike, offset: number, size: number): PayloadViews {
  return { payload: new Uint8Array(buf, offset, size), payloadView: new DataView(buf, offset, size), payloadText: Buffer.from(buf, offset, size) };
}

/** Completion records are { kind: u32, idx: u32, res: i64 } (shim/ABI.md). */
export const COMPLETION_SIZE = 16;
export const COMPLETION_BATCH = 256;

export class CompletionBuffer {
  readonly bytes: Uint8Array;
  private readonly view: DataView;

  constructor(records = COMPLETION_BATCH) {
    this.bytes = new Uint8Array(COMPLETION_SIZE * records);
    this.view = new DataView(this.bytes.buffer);
  }

  /**
   * Pop records with `pop` (fu_classic_pop / fu_ring_pop: one FFI call per COMPLETION_BATCH)
   * and dispatch them until the shim's queue is empty.
   */
  drain(pop: (handle: Pointer, out: Uint8Array, max: number) => number, handle: Pointer, source: Source, sink: Sink): void {
    for (;;) {
      const count = pop(handle, this.bytes, COMPLETION_BATCH);
      if (count === 0) return;
      this.dispatch(count, source, sink);
      if (count < COMPLETION_BATCH) return;
    }
  }

  /** Dispatch `count` records popped into `bytes` to the sink. */
  dispatch(count: number, source: Source, sink: Sink): void {
    const v = this.view;
    for (let i = 0; i < count; i++) {
      const off = i * COMPLETION_SIZE;
      const kind = v.getUint32(off, true);
      const idx = v.getUint32(off + 4, true);
      const res = v.getUint32(off + 8, true) + v.getInt32(off + 12, true) * 4294967296; // i64, no BigInt
      if (kind === COMPLETION_REQUEST) {
        const slot = source.slots[idx]!;
        source.bindPayload?.(slot);
        sink.onRequest(slot);
      }
      else if (kind === COMPLETION_IO_DONE) sink.onIoDone(source.slots[idx]!, res);
      else if (kind === COMPLETION_STOPPED) sink.onStopped(source, -res);
    }
  }
}
