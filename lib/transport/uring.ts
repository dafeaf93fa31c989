// FUSE-over-io_uring transport: the shim's ring thread owns an SQE128 io_uring with `depth`
// entries per queue (one queue per possible CPU) and rings the doorbell once per batch of
// completions. Replies are queued with fu_ring_commit (no syscall) and submitted together by
// one fu_ring_kick at the end of a JS batch.

import { toArrayBuffer, type Pointer } from "bun:ffi";
import { readFileSync } from "node:fs";
import { native } from "../native.ts";
import { HDR_PAYLOAD_SZ, RING_HEADER_SIZE } from "../protocol/constants.ts";
import { CompletionBuffer, makeSlot } from "./slots.ts";
import type { Sink, Slot, Source, SourceStats } from "./types.ts";

/** io_uring setup flags the ring thread may use (it is the only submitter). */
export const IORING_SETUP_SINGLE_ISSUER = 1 << 12;
export const IORING_SETUP_DEFER_TASKRUN = 1 << 13;
export const IORING_SETUP_COOP_TASKRUN = 1 << 8;
/** Shim flag (not io_uring's): do not register the payloads as fixed buffers. */
export const FU_RING_NO_FIXED_BUFFERS = 2 ** 31;

export interface UringOptions {
  fd: number;
  queues: number;
  depth: number;
  payloadSize: number;
  setupFlags: number;
  doorbell: Pointer;
  /** Busy-wait for replies after a doorbell before the ring thread sleeps (µs, 0 = off). */
  spinMicros?: number;
}

/** Number of possible CPUs = number of FUSE ring queues the kernel expects (docs/KERNEL.md §4). */
export function possibleCpus(): number {
  const text = readFileSync("/sys/devices/system/cpu/possible", "utf8").trim();
  let n = 0;
  for (const part of text.split(",")) {
    const [a, b] = part.split("-").map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return n;
}

export class UringError extends Error {
  constructor(readonly errno: number, message: string) {
    super(message);
  }
}

export class UringSource implements Source {
  readonly kind = "uring" as const;
  readonly slots: Slot[] = [];
  readonly pinnedBytes: number;
  private handle: Pointer | null;
  private readonly completions = new CompletionBuffer();
  private readonly statsView: DataView;
  private pendingKick = false;
  private final: SourceStats | null = null;

  constructor(private readonly sink: Sink, opts: UringOptions) {
    const n = native();
    const err = new Int32Array(1);
    const h = n.fu_ring_create(opts.fd, opts.queues, opts.depth, opts.payloadSize, opts.setupFlags, opts.doorbell, err) as Pointer | null;
    if (!h) throw new UringError(-err[0]!, `io_uring setup failed (errno ${-err[0]!})`);
    this.handle = h;
    const entries = opts.queues * opts.depth;
    for (let i = 0; i < entries; i++) {
      this.slots.push(makeSlot(this, i, n.fu_ring_header(h, i) as Pointer, n.fu_ring_payload(h, i) as Pointer, opts.payloadSize));
    }
    this.pinnedBytes = entries * (opts.payloadSize + 4096);
    if (opts.spinMicros) n.fu_ring_set_spin(h, Math.round(opts.spinMicros * 1000));
    this.statsView = new DataView(toArrayBuffer(n.fu_ring_stats(h) as Pointer, 0, 72));
  }

  /** Register the entries with the kernel; only after the INIT reply was written. */
  start(): void {
    const rc = native().fu_ring_start(this.handle!);
    if (rc < 0) throw new UringError(-rc, `io_uring register failed (errno ${-rc})`);
  }

  drain(): void {
    if (this.handle) this.completions.drain(native().fu_ring_pop, this.handle, this, this.sink);
  }

  reply(slot: Slot, payloadLen: number): number {
    if (!this.handle) return -107;
    slot.header.setUint32(HDR_PAYLOAD_SZ, payloadLen, true);
    const rc = native().fu_ring_commit(this.handle, slot.index); // -EINVAL not held, -EBUSY I/O running
    this.pendingKick = true;
    return rc;
  }

  /** A ring entry always needs a COMMIT to come back; an empty error reply is the release. */
  release(slot: Slot): void {
    this.reply(slot, 0);
  }

  /** Queue a fixed-buffer backing read (kind 1) or write (kind 2) on slot's payload. */
  io(slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number): number {
    if (!this.handle) return -107;
    this.pendingKick = true;
    return native().fu_ring_io(this.handle, kind, slot.index, fd, offset, len);
  }

  flush(): void {
    if (this.pendingKick && this.handle) {
      this.pendingKick = false;
      native().fu_ring_kick(this.handle);
    }
  }

  stop(): void {
    if (this.handle) native().fu_ring_stop(this.handle);
  }

  destroy(): void {
    if (!this.handle) return;
    this.final = this.stats();
    native().fu_ring_destroy(this.handle);
    this.handle = null;
  }

  stats(): SourceStats {
    if (!this.handle) return this.final!;
    const v = this.statsView;
    const u = (i: number) => Number(v.getBigUint64(i * 8, true));
    // struct { submits, cqes, wakeups, requests, commits, io_ops, errors, dead, fixed_buffers }
    // io_ops are READ_FIXED/WRITE_FIXED when the payloads are registered (fixed_buffers = 1),
    // plain READ/WRITE on the same memory otherwise.
    const fixed = u(8) === 1;
    return { submits: u(0), cqes: u(1), wakeups: u(2), requests: u(3), fixedIo: fixed ? u(5) : 0, errors: u(6), fixedBuffers: fixed };
  }
}

export { RING_HEADER_SIZE };
