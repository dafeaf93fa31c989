// Writing replies into a request's own slot and handing them to its transport. Every request
// gets exactly one of: ok(len), error(errno), none() — a request left unanswered would hang its
// caller in D state, so Replier also turns exceptions into errnos.

import { errnoOf, Errno } from "../fs/errors.ts";
import { encodeOutHeader } from "../protocol/codec.ts";
import { OUT_HEADER_SIZE } from "../protocol/constants.ts";
import type { Request } from "./request.ts";

export interface ReplyObserver {
  /** Called after each answered or released request (stats, debug log, in-flight count). */
  done(req: Request, error: number): void;
  /** Called once per distinct unexpected exception. */
  unexpected(req: Request, err: unknown): void;
  /** False once the session's native memory may be gone: nothing may touch slots then. */
  readonly alive: boolean;
}

export class Replier {
  constructor(private readonly observer: ReplyObserver) {}

  /** Success with `len` bytes of out args already written at the start of the payload. */
  ok(req: Request, len: number): void {
    if (!req.busy || !this.observer.alive) return;
    const slot = req.slot;
    encodeOutHeader(slot.header, 0, OUT_HEADER_SIZE + len, 0, req.uniqueLo, req.uniqueHi);
    slot.source.reply(slot, len);
    this.finish(req, 0);
  }

  error(req: Request, errno: number): void {
    if (!req.busy || !this.observer.alive) return;
    const slot = req.slot;
    encodeOutHeader(slot.header, 0, OUT_HEADER_SIZE, -errno, req.uniqueLo, req.uniqueHi);
    slot.source.reply(slot, 0);
    this.finish(req, errno);
  }

  /** Requests that take no reply (FORGET, BATCH_FORGET, INTERRUPT). */
  none(req: Request): void {
    if (!req.busy || !this.observer.alive) return;
    req.slot.source.release(req.slot);
    this.finish(req, 0);
  }

  /** Map a thrown value to an errno reply: FuseError/system errors keep theirs, else EIO. */
  fail(req: Request, err: unknown): void {
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

  private finish(req: Request, error: number): void {
    req.reset();
    this.observer.done(req, error);
  }
}
