// Per-slot request state, allocated once per slot and reused for every request that slot
// carries: the decoded in_header, the request context handed to handlers, and the readdir
// filler. Nothing here is allocated per request (the AbortController only when a handler
// asks for `ctx.signal`).

import { read as fsRead, write as fsWrite } from "node:fs";
import { FuseError, errnoOf, Errno } from "../fs/errors.ts";
import type { RequestContext } from "../fs/types.ts";
import type { Slot } from "../transport/types.ts";

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
  busy = false;
  interrupted = false;
  startedAt = 0;
  private controller: AbortController | null = null;
  private ioResolve: ((n: number) => void) | null = null;
  private ioReject: ((e: Error) => void) | null = null;
  /** Set by the session: queue a fixed-buffer backing I/O on this slot (ring transport). */
  ringIo: ((slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number) => number) | null = null;
  /** Buffer over the payload for string decoding/encoding without subarray copies. */
  readonly text: Buffer;
  private outView: Uint8Array;

  constructor(readonly slot: Slot) {
    this.text = Buffer.from(slot.payload.buffer, slot.payload.byteOffset, slot.payload.byteLength);
    this.outView = slot.payload.subarray(0, 0);
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
      if (this.interrupted) this.controller.abort(interruptReason());
    }
    return this.controller.signal;
  }

  interrupt(): void {
    this.interrupted = true;
    this.controller?.abort(interruptReason());
  }

  backingRead(fd: number, offset: number, size: number): Promise<number> {
    return this.backingIo(1, fd, offset, size);
  }

  backingWrite(fd: number, offset: number, size: number): Promise<number> {
    return this.backingIo(2, fd, offset, size);
  }

  private backingIo(kind: 1 | 2, fd: number, offset: number, size: number): Promise<number> {
    if (!this.busy) return Promise.reject(new FuseError("EIO", "backing I/O outside a request"));
    if (this.ioResolve) return Promise.reject(new FuseError("EBUSY", "one backing I/O per request at a time"));
    if (size > this.slot.payload.length) return Promise.reject(new FuseError("EINVAL", "backing I/O larger than the request buffer"));
    return new Promise<number>((resolve, reject) => {
      this.ioResolve = resolve;
      this.ioReject = reject;
      if (this.ringIo) {
        const rc = this.ringIo(this.slot, kind, fd, offset, size);
        if (rc < 0) this.ioDone(rc);
        return;
      }
      // Classic transport: an asynchronous pread/pwrite straight into/out of the native
      // request buffer (the thread pool does the syscall; no copy through JS).
      const cb = (err: NodeJS.ErrnoException | null, n: number) => this.ioDone(err ? -(errnoOf(err) ?? Errno.EIO) : n);
      if (kind === 1) fsRead(fd, this.slot.payload, 0, size, offset, cb);
      else fsWrite(fd, this.slot.payload, 0, size, offset, cb);
    });
  }

  /** Completion of backingIo: bytes, or -errno. */
  ioDone(res: number): void {
    const resolve = this.ioResolve, reject = this.ioReject;
    this.ioResolve = this.ioReject = null;
    if (!resolve || !reject) return;
    if (res < 0) reject(new FuseError(-res));
    else resolve(res);
  }

  reset(): void {
    this.busy = false;
    this.interrupted = false;
    this.controller = null;
  }

  /** A view of the first `size` payload bytes; cached because sizes repeat (4 KiB, 128 KiB). */
  payloadPrefix(size: number): Uint8Array {
    if (this.outView.length !== size) this.outView = this.slot.payload.subarray(0, size);
    return this.outView;
  }
}

let reason: Error | null = null;
function interruptReason(): Error {
  reason ??= Object.assign(new Error("FUSE request interrupted"), { name: "AbortError", code: "EINTR" });
  return reason;
}
