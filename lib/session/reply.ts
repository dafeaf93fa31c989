// Writing replies into a request's own slot and handing them to its transport. This is the one
// place that moves a Request through its states (request.ts): every request gets exactly one
// of ok(len), error(errno), none(); an answer chosen while backing I/O still uses the slot
// waits (DEFERRED) until the I/O completes; an answer for a request that was already answered
// is either late (after a timeout or an early answer: dropped and counted) or a bug (logged
// loudly and counted as a protocol error) — never a second reply and never a silent drop.

import { FailStopError } from "../shared/fail-stop.ts";
import { errnoOf, Errno, FuseError } from "../protocol/errors.ts";
import { encodeOutHeader } from "../protocol/codec.ts";
import { OUT_HEADER_SIZE } from "../protocol/constants.ts";
import {
  ANSWER_ERROR, ANSWER_NONE, ANSWER_OK, DEFERRED, HANDLING, stateNames, type AnswerKind, type Request,
} from "./request.ts";

/** Reply refusals that only mean the request no longer exists (ENOENT, ENODEV, ENOTCONN, ECONNABORTED). */
const GONE = new Set([2, 19, 107, 103]);

export interface ReplyObserver {
  /** Called after each answered or released request (stats, debug log, in-flight count). */
  done(req: Request, error: number): void;
  /** Called once per distinct unexpected exception. */
  unexpected(req: Request, err: unknown): void;
  /** An impossible transition (a bug in fuse-uring or a transport): log loudly, count. */
  protocolError(req: Request, what: string): void;
  /** A handler settled after its request was answered (timeout, early answer): dropped. */
  late(req: Request): void;
  /** An answer had to wait for backing I/O before it could be sent. */
  deferred(req: Request): void;
  /** A handler threw a FailStopError (lib/shared/fail-stop.ts): the mount must stop. */
  failStop?(reason: string): void;
  /** False once the session's native memory may be gone: nothing may touch slots then. */
  readonly alive: boolean;
  /**
   * FUSE_URING_POISON=1: fill the payload beyond the reply's `replyLen` bytes with a pattern
   * just before the slot goes back to its transport (see Session.checkPoison).
   */
  poison?(req: Request, replyLen: number): void;
}

/** By name too: the standalone binary's worker bundle has a FailStopError class of its own. */
function isFailStop(err: unknown): boolean {
  return err instanceof FailStopError || (err instanceof Error && err.name === "FailStopError");
}

export class Replier {
  constructor(private readonly observer: ReplyObserver) {}

  /** Success with `len` bytes of out args already written at the start of the payload. */
  ok(req: Request, len: number): void {
    this.answer(req, ANSWER_OK, len);
  }

  error(req: Request, errno: number): void {
    this.answer(req, ANSWER_ERROR, errno);
  }

  /** Requests that take no reply (FORGET, BATCH_FORGET, INTERRUPT). */
  none(req: Request): void {
    this.answer(req, ANSWER_NONE, 0);
  }

  /** Map a thrown value to an errno reply: FuseError/system errors keep theirs, else EIO. */
  fail(req: Request, err: unknown): void {
    if (req.state !== HANDLING) return this.answer(req, ANSWER_ERROR, Errno.EIO); // reports it
    if (isFailStop(err)) {
      // Not an EIO for one request: the mount stops (the connection is aborted), and this
      // caller gets what every other caller gets.
      this.observer.failStop?.((err as Error).message);
      return this.error(req, Errno.ENOTCONN);
    }
    let errno = errnoOf(err);
    if (errno === null) {
      if (err instanceof Error && err.name === "AbortError") errno = Errno.EINTR;
      else {
        errno = Errno.EIO;
        this.observer.unexpected(req, err);
      }
    }
    this.error(req, errno);
  }

  /** The handler of a request that was already answered settled (its result is dropped). */
  late(req: Request): void {
    this.observer.late(req);
  }

  /**
   * Backing I/O of request `gen` on `req`'s slot completed. Settles the handler's promise, or
   * sends the answer that waited for it.
   */
  ioDone(req: Request, res: number, gen: number): void {
    if (!this.observer.alive) return;
    if (req.gen !== gen || !req.ioPending) {
      this.observer.protocolError(req, `backing I/O completion (res ${res}) for ${req.gen !== gen ? "an earlier request on this slot" : "a request with no backing I/O pending"} in state ${stateNames[req.state]}`);
      return;
    }
    if (req.state === HANDLING) {
      req.settleIo(res);
      return;
    }
    // DEFERRED: the slot is free of I/O now; send what the handler (or timeout) answered.
    const reject = req.detachIo();
    this.send(req, req.deferredKind as AnswerKind, req.deferredValue);
    reject?.(new FuseError("ECANCELED", "backing I/O finished after the request was answered"));
  }

  private answer(req: Request, kind: AnswerKind, value: number): void {
    if (!this.observer.alive) return; // teardown: the connection and its memory are gone
    if (req.state === HANDLING) {
      if (req.ioPending) {
        // The kernel (ring) or the thread pool (classic) may still write into this slot:
        // releasing it now would hand that memory to the next request. Wait for ioDone.
        req.state = DEFERRED;
        req.deferredKind = kind;
        req.deferredValue = value;
        this.observer.deferred(req);
        return;
      }
      return this.send(req, kind, value);
    }
    if (req.timedOut) return this.observer.late(req);
    this.observer.protocolError(req, `${kind === ANSWER_OK ? "ok" : kind === ANSWER_ERROR ? `error ${value}` : "release"} for a request in state ${stateNames[req.state]} (answered twice?)`);
  }

  private send(req: Request, kind: AnswerKind, value: number): void {
    const slot = req.slot;
    if (kind === ANSWER_NONE) {
      this.observer.poison?.(req, 0);
      slot.source.release(slot);
      return this.finish(req, 0);
    }
    const len = kind === ANSWER_OK ? value : 0;
    const errno = kind === ANSWER_ERROR ? value : 0;
    encodeOutHeader(slot.header, 0, OUT_HEADER_SIZE + len, -errno, req.uniqueLo, req.uniqueHi);
    this.observer.poison?.(req, len);
    const rc = slot.source.reply(slot, len);
    // A refusal other than "the request is gone" (interrupted, unmounted, aborted) means the
    // reply was malformed or the slot was not ours: the caller may be left waiting. Say so.
    if (typeof rc === "number" && rc < 0 && !GONE.has(-rc)) {
      this.observer.protocolError(req, `the ${slot.source.kind} transport refused the ${errno ? `error ${errno}` : `${len}-byte`} reply: errno ${-rc}`);
    }
    this.finish(req, errno);
  }

  private finish(req: Request, error: number): void {
    req.reset();
    this.observer.done(req, error);
  }
}
