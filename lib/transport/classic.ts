// Classic transport: a shim thread reads /dev/fuse (readv into header + payload, normalized to
// the ring layout) and rings a doorbell; replies are written with writev from the JS thread.
// The event loop never blocks: reads happen on the shim's thread, writes to /dev/fuse don't
// block.

import { toArrayBuffer, type Pointer } from "bun:ffi";
import { native } from "../native.ts";
import { CompletionBuffer, makeSlot } from "./slots.ts";
import type { Sink, Slot, Source, SourceStats } from "./types.ts";

export interface ClassicOptions {
  fd: number;
  slots: number;
  payloadSize: number;
  doorbell: Pointer;
  opSizes: Uint8Array;
}

export class ClassicSource implements Source {
  readonly kind = "classic" as const;
  readonly slots: Slot[] = [];
  readonly pinnedBytes = 0; // pageable memory; nothing is registered with the kernel
  private handle: Pointer | null;
  private readonly completions = new CompletionBuffer();
  private readonly statsView: DataView;
  private replyErrors = 0;
  private final: SourceStats | null = null;

  constructor(private readonly sink: Sink, opts: ClassicOptions) {
    const n = native();
    const h = n.fu_classic_create(opts.fd, opts.slots, opts.payloadSize, opts.doorbell) as Pointer | null;
    if (!h) throw new Error(`fuse-uring: cannot create /dev/fuse reader (${-n.fu_last_error()})`);
    this.handle = h;
    n.fu_classic_set_op_sizes(h, opts.opSizes);
    for (let i = 0; i < opts.slots; i++) {
      this.slots.push(makeSlot(this, i, n.fu_classic_header(h, i) as Pointer, n.fu_classic_payload(h, i) as Pointer, opts.payloadSize));
    }
    this.statsView = new DataView(toArrayBuffer(n.fu_classic_stats(h) as Pointer, 0, 96)); // shim/classic.zig Stats: 12 words (ABI 7)
  }

  /** Serve READ/WRITE/FSYNC of native handles on the reader thread (before start). */
  setDataPlane(dp: Pointer): void {
    const rc = native().fu_classic_set_dataplane(this.handle!, dp);
    if (rc < 0) throw new Error(`fuse-uring: cannot attach the data plane to the /dev/fuse reader (errno ${-rc})`);
  }

  setOpSizes(table: Uint8Array): void {
    if (this.handle) native().fu_classic_set_op_sizes(this.handle, table);
  }

  start(): void {
    const rc = native().fu_classic_start(this.handle!);
    if (rc < 0) throw new Error(`fuse-uring: cannot start /dev/fuse reader thread (errno ${-rc})`);
  }

  drain(): void {
    if (this.handle) this.completions.drain(native().fu_classic_pop, this.handle, this, this.sink);
  }

  reply(slot: Slot, payloadLen: number): number {
    if (!this.handle) return -107;
    const rc = Number(native().fu_classic_reply(this.handle, slot.index, payloadLen));
    // ENOENT: the request was interrupted or the connection aborted; nothing to do.
    if (rc < 0) this.replyErrors++;
    return rc;
  }

  release(slot: Slot): void {
    if (this.handle) native().fu_classic_release(this.handle, slot.index);
  }

  flush(): void {}

  stop(): void {
    if (this.handle) native().fu_classic_stop(this.handle);
  }

  destroy(): void {
    if (!this.handle) return;
    this.final = this.stats();
    native().fu_classic_destroy(this.handle);
    this.handle = null;
  }

  stats(): SourceStats {
    if (!this.handle) return this.final!;
    const v = this.statsView;
    const reads = Number(v.getBigUint64(0, true));
    const wakeups = Number(v.getBigUint64(8, true));
    const errors = Number(v.getBigUint64(24, true));
    const u = (i: number) => Number(v.getBigUint64(i * 8, true));
    // shim/classic.zig Stats: reads, wakeups, replies, errors, native_requests,
    // native_read_bytes, native_write_bytes, native_errors, direct_fallbacks, native_direct,
    // native_flushes, native_getattrs
    return {
      requests: reads, wakeups, cqes: 0, submits: 0, errors: errors + this.replyErrors, fixedIo: 0,
      nativeRequests: u(4), nativeReadBytes: u(5), nativeWriteBytes: u(6), nativeErrors: u(7),
      directFallbacks: u(8), nativeDirect: u(9), nativeFlushes: u(10), nativeGetattrs: u(11),
    };
  }
}
