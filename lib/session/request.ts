// Per-slot request state, allocated once per slot and reused for every request that slot
// carries: the decoded in_header, the request context handed to handlers, and the readdir
// filler. Nothing here is allocated per request (the AbortController only when a handler
// asks for `ctx.signal`).
//
// Every request goes through one small state machine (the transitions are made by Replier,
// reply.ts, and nowhere else):
//
//   FREE ──begin()──▶ HANDLING ──answer──▶ (sent) ──▶ FREE
//                        │  ▲
//                        │  └── backing I/O (ctx.backingRead/Write) may run while HANDLING
//                        └─answer while backing I/O runs──▶ DEFERRED ──ioDone()──▶ (sent) ──▶ FREE
//
// A slot's memory is given back to its transport only when the answer is sent, and the answer
// is sent only when no backing I/O writes into (or reads from) the slot any more: the kernel or
// the thread pool can never write into a buffer that already carries another request.
// `gen` increases with every request a slot carries, so a handler that settles after its request
// was answered (timeout, interrupt, early throw) is recognised as late and dropped instead of
// answering whatever request the slot carries by then.

import { read as fsRead, write as fsWrite } from "node:fs";
import { FuseError, errnoOf, Errno } from "../protocol/errors.ts";
import type { RequestContext } from "./filesystem.ts";
import type { Slot } from "../transport/types.ts";

/** The slot carries no request (before the first one, and after each answer). */
export const FREE = 0;
/** A request is being handled; no answer has been chosen yet. */
export const HANDLING = 1;
/** The answer is chosen and stored, but backing I/O still uses the slot: sent on ioDone. */
export const DEFERRED = 2;
export type RequestState = typeof FREE | typeof HANDLING | typeof DEFERRED;
export const stateNames = ["free", "handling", "deferred"] as const;

/** The three kinds of answer (Replier.ok / .error / .none). */
export const ANSWER_OK = 1;
export const ANSWER_ERROR = 2;
export const ANSWER_NONE = 3;
export type AnswerKind = typeof ANSWER_OK | typeof ANSWER_ERROR | typeof ANSWER_NONE;

export class Request implements RequestContext {
  opcode = 0;
  nodeid = 0;
  uid = 0;
  gid = 0;
  pid = 0;
  uniqueLo = 0;
  uniqueHi = 0;
  /** bytes of payload the kernel sent (ent_in_out.payload_sz) */
  payloadSize = 0;
  /** READ/READDIR/GETXATTR size the kernel asked for */
  size = 0;
  state: RequestState = FREE;
  /** Incremented by begin(): identifies the request the slot currently carries. */
  gen = 0;
  interrupted = false;
  /** Answered by the request timeout; whatever the handler produces later is dropped. */
  timedOut = false;
  /** The "pending for more than 10 s" line was logged for this request. */
  slowLogged = false;
  /** performance.now() when the request arrived. */
  startedAt = 0;
  /** The answer stored while backing I/O finishes (state DEFERRED). */
  deferredKind: AnswerKind | 0 = 0;
  deferredValue = 0;
  /** Payload bytes of the last answer sent from this slot (poison checking). */
  lastReplyLen = -1; // -1: not poisoned (nothing to check on the next arrival)
  private controller: AbortController | null = null;
  private ioResolve: ((n: number) => void) | null = null;
  private ioReject: ((e: Error) => void) | null = null;
  private ioPromise: Promise<number> | null = null;
  /** Set by the session: queue a fixed-buffer backing I/O on this slot (ring transport). */
  ringIo: ((slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number) => number) | null = null;
  private outView: Uint8Array;

  constructor(readonly slot: Slot) {
    this.outView = slot.payload.subarray(0, 0);
  }

  /** Buffer over the payload for string decoding/encoding without subarray copies (the
   *  slot's current buffer: with io_uring buffer pools it changes per request). */
  get text(): Buffer {
    return this.slot.payloadText;
  }

  /** True while a request is in the slot and not yet answered (kept for older callers). */
  get busy(): boolean {
    return this.state === HANDLING;
  }

  /** Backing I/O started by the handler has not completed yet. */
  get ioPending(): boolean {
    return this.ioResolve !== null;
  }

  /** The request `gen` is still the one in the slot and still waits for its answer. */
  current(gen: number): boolean {
    return this.gen === gen && this.state === HANDLING;
  }

  get unique(): bigint {
    return (BigInt(this.uniqueHi) << 32n) | BigInt(this.uniqueLo);
  }

  /** The request's unique id as a JS number (exact: the kernel counter stays far below 2^53). */
  get uniqueNumber(): number {
    return this.uniqueHi * 4294967296 + this.uniqueLo;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.interrupted) this.controller.abort(this.timedOut ? timeoutReason() : interruptReason());
    }
    return this.controller.signal;
  }

  /** FUSE_INTERRUPT for this request: abort ctx.signal (the handler decides what to answer). */
  interrupt(): void {
    this.interrupted = true;
    this.controller?.abort(interruptReason());
  }

  /** The request timeout answered for the handler: tell it to stop through ctx.signal. */
  abortForTimeout(): void {
    this.timedOut = true;
    this.interrupted = true;
    this.controller?.abort(timeoutReason());
  }

  backingRead(fd: number, offset: number, size: number): Promise<number> {
    return this.backingIo(1, fd, offset, size);
  }

  backingWrite(fd: number, offset: number, size: number): Promise<number> {
    return this.backingIo(2, fd, offset, size);
  }

  private backingIo(kind: 1 | 2, fd: number, offset: number, size: number): Promise<number> {
    if (this.state !== HANDLING) return Promise.reject(new FuseError("EIO", "backing I/O outside a request (it was already answered)"));
    if (this.ioResolve) return Promise.reject(new FuseError("EBUSY", "one backing I/O per request at a time"));
    if (size > this.slot.payload.length) return Promise.reject(new FuseError("EINVAL", "backing I/O larger than the request buffer"));
    const p = new Promise<number>((resolve, reject) => {
      this.ioResolve = resolve;
      this.ioReject = reject;
      if (this.ringIo) {
        const rc = this.ringIo(this.slot, kind, fd, offset, size);
        if (rc < 0) this.onIoComplete(rc, this.gen);
        return;
      }
      // Classic transport: an asynchronous pread/pwrite straight into/out of the native
      // request buffer (the thread pool does the syscall; no copy through JS).
      const gen = this.gen;
      const cb = (err: NodeJS.ErrnoException | null, n: number) => this.onIoComplete(err ? -(errnoOf(err) ?? Errno.EIO) : n, gen);
      if (kind === 1) fsRead(fd, this.slot.payload, 0, size, offset, cb);
      else fsWrite(fd, this.slot.payload, 0, size, offset, cb);
    });
    if (this.ioResolve) this.ioPromise = p;
    return p;
  }

  /**
   * Set by the session: called when backing I/O of request `gen` completes (both transports).
   * The Replier settles the handler's promise, or, when the request was answered meanwhile
   * (DEFERRED), sends the stored answer.
   */
  onIoComplete: (res: number, gen: number) => void = (res) => this.settleIo(res);

  /** Completion of backingIo as delivered by a transport (IO_DONE record): bytes, or -errno. */
  ioDone(res: number): void {
    this.onIoComplete(res, this.gen);
  }

  /** Resolve/reject the handler's backing-I/O promise. False if no I/O was pending. */
  settleIo(res: number): boolean {
    const resolve = this.ioResolve, reject = this.ioReject;
    this.ioResolve = this.ioReject = null;
    this.ioPromise = null;
    if (!resolve || !reject) return false;
    if (res < 0) reject(new FuseError(-res));
    else resolve(res);
    return true;
  }

  /**
   * Forget the pending backing I/O and return its reject function (null if none). The promise
   * is marked handled first: a handler that threw without awaiting its I/O must not turn the
   * cancellation into an unhandled rejection.
   */
  detachIo(): ((e: Error) => void) | null {
    const reject = this.ioReject;
    this.ioPromise?.catch(noop);
    this.ioResolve = this.ioReject = null;
    this.ioPromise = null;
    return reject;
  }

  /** Start carrying a new request (FREE → HANDLING). */
  begin(now: number): void {
    this.gen++;
    this.state = HANDLING;
    this.interrupted = false;
    this.timedOut = false;
    this.slowLogged = false;
    this.controller = null;
    this.deferredKind = 0;
    this.startedAt = now;
    this.size = 0;
  }

  /** Back to FREE after the answer was sent. Also forgets any backing-I/O callbacks. */
  reset(): void {
    this.state = FREE;
    this.interrupted = false;
    this.controller = null;
    this.deferredKind = 0;
    this.ioResolve = this.ioReject = null;
    this.ioPromise = null;
  }

  /** A view of the first `size` payload bytes; cached because sizes repeat (4 KiB, 128 KiB). */
  payloadPrefix(size: number): Uint8Array {
    const p = this.slot.payload;
    if (this.outView.length !== size || this.outView.byteOffset !== p.byteOffset || this.outView.buffer !== p.buffer) this.outView = p.subarray(0, size);
    return this.outView;
  }
}

function noop(): void {}

let reason: Error | null = null;
function interruptReason(): Error {
  reason ??= Object.assign(new Error("FUSE request interrupted"), { name: "AbortError", code: "EINTR" });
  return reason;
}

let tReason: Error | null = null;
function timeoutReason(): Error {
  tReason ??= Object.assign(new Error("FUSE request timed out (--request-timeout); the caller got ETIMEDOUT"), { name: "TimeoutError", code: "ETIMEDOUT" });
  return tReason;
}
