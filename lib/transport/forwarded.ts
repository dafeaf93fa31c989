// The main thread's end of a forwarding worker (`--workers N` with a filesystem that stays on
// one thread, lib/threads/pool.ts). The worker owns the io_uring of its queues and serves the
// native data plane there (lib/threads/forward-worker.ts); every other request arrives here as
// the index of its ring entry. The entries are in this process's memory, so this source builds
// views over them once, from the addresses the worker reported, and the session decodes,
// handles and encodes each request in place — no copy. Answers go back as [entry, length]
// pairs, one message per batch; the worker commits them on its next io_uring_enter.
//
// Everything above the Source seam (request state machine, INTERRUPT matching, timeouts, hot
// reload, FORGET, notifications) is the single-thread code, unchanged.

import type { Pointer } from "bun:ffi";
import { encodeOutHeader } from "../protocol/codec.ts";
import { HDR_PAYLOAD_SZ, OUT_HEADER_SIZE } from "../protocol/constants.ts";
import { makeSlot } from "./slots.ts";
import type { Sink, Slot, Source, SourceStats } from "./types.ts";

/** Where a worker's ring entries live (plain data: it crosses postMessage). */
export interface RingEntries {
  headers: number[];
  payloads: number[];
  payloadSize: number;
}

/** What the worker's messages deliver to the main thread's end. */
export interface ForwardPeer {
  onRequests(idx: number[]): void;
  onStopped(errno: number): void;
}

const EIO = 5;

export class ForwardedSource implements Source, ForwardPeer {
  readonly kind = "uring" as const;
  readonly slots: Slot[] = [];
  /** The worker's ring memory is pinned there; counted once, in the worker's stats. */
  readonly pinnedBytes = 0;
  /** Commits of this batch: [entry, payload length, …]; posted in one message. */
  private pending: number[] = [];
  private scheduled = false;
  private readonly flushBound = () => this.flush();
  /** Shutdown: new requests are answered EIO without a handler (see beginClose). */
  private closing = false;
  stopped = false;
  /** Requests received from the worker, batches (messages) received, answers sent. */
  requests = 0;
  batches = 0;
  commits = 0;

  /** `commit` posts a batch of answers ([entry, payload length, …]) to the worker. */
  constructor(private readonly sink: Sink, private readonly commit: (pairs: number[]) => void, entries: RingEntries) {
    for (let i = 0; i < entries.headers.length; i++) {
      this.slots.push(makeSlot(this, i, entries.headers[i]! as Pointer, entries.payloads[i]! as Pointer, entries.payloadSize));
    }
  }

  /** A batch of requests from the worker (one postMessage). */
  onRequests(idx: number[]): void {
    this.batches++;
    for (let i = 0; i < idx.length; i++) {
      const slot = this.slots[idx[i]!]!;
      this.requests++;
      if (this.closing) this.refuse(slot);
      else this.sink.onRequest(slot);
    }
    this.flush();
  }

  onStopped(errno: number): void {
    this.flush();
    this.stopped = true;
    this.sink.onStopped(this, errno);
  }

  /** The session's answer is in the slot (out_header, payload): queue its commit. */
  reply(slot: Slot, payloadLen: number): number {
    slot.header.setUint32(HDR_PAYLOAD_SZ, payloadLen, true);
    this.pending.push(slot.index, payloadLen);
    this.commits++;
    if (!this.scheduled) {
      // Answers given in this turn (synchronous handlers of the same batch, a settled promise)
      // leave together.
      this.scheduled = true;
      queueMicrotask(this.flushBound);
    }
    return 0;
  }

  /** A ring entry always needs a COMMIT to come back; an empty reply is the release. */
  release(slot: Slot): void {
    this.reply(slot, 0);
  }

  flush(): void {
    this.scheduled = false;
    if (this.pending.length === 0) return;
    const pairs = this.pending;
    this.pending = [];
    this.commit(pairs);
  }

  /**
   * Shutdown, first step: from now on requests that still arrive are answered EIO here (no
   * handler may start on memory the worker is about to free). The session then waits for the
   * handlers it has, and only then closes the workers.
   */
  beginClose(): void {
    this.closing = true;
  }

  private refuse(slot: Slot): void {
    const h = slot.header;
    encodeOutHeader(h, 0, OUT_HEADER_SIZE, -EIO, h.getUint32(8, true), h.getUint32(12, true));
    this.reply(slot, 0);
  }

  drain(): void {}
  stop(): void {}
  /** The memory is the worker's: it frees it when closed (lib/threads/pool.ts). */
  destroy(): void {}

  stats(): SourceStats {
    return { requests: this.requests, wakeups: this.batches, cqes: 0, submits: this.commits, errors: 0, fixedIo: 0 };
  }
}
