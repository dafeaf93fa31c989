// The native data plane, JS side: a table in the shim (shim/dataplane.zig) of file handles
// whose READ, WRITE and FSYNC the shim answers itself from a backing fd — on the ring with
// fixed-buffer io_uring I/O, on classic with pread/pwrite in the reader thread — so no JS runs
// per data request.
//
// An OPEN/CREATE reply that names `backingFd` gets a slot: the kernel is given fh = TAG + slot
// instead of the filesystem's fh. Every other request that carries that fh (FLUSH, RELEASE,
// GETATTR/SETATTR with fh, LSEEK, FALLOCATE, COPY_FILE_RANGE, locks, IOCTL, POLL) has it
// rewritten back to the filesystem's fh in place, in the request header, before dispatch, so
// filesystems never see the tagged numbers; for LSEEK, FALLOCATE and COPY_FILE_RANGE the slot's
// descriptor is noted (fdIn/fdOut) so the dispatcher answers them from it (backed-ops.ts).
// RELEASE ends the mapping; takeAll() ends every mapping left at teardown. The filesystem keeps
// owning the fd: it must keep it open until its release handler runs, and closes it there —
// unless the handle was mapped with `release` (OpenReply.backingRelease): then a ring may close
// it and answer RELEASE itself, and the slot stays taken until collectRelease() hands it back
// for the filesystem's releaseClosed (docs/DATAPLANE.md "Native RELEASE").
// Slot words (`used`): 0 free, 1 mapped, 2 being taken at teardown. The shim's own slot state
// decides who finishes a natively released handle (collectRelease or takeAll), exactly once.

import type { Pointer } from "bun:ffi";
import { native } from "../native.ts";
import { Errno, errnoName } from "../protocol/errors.ts";
import type { NodeAttrs } from "./filesystem.ts";
import { getU64, setU64 } from "../protocol/codec.ts";
import { FATTR, FUSE_GETATTR_FH, HDR_OP_IN, Op } from "../protocol/constants.ts";

/** shim/dataplane.zig fh_tag (2^47). */
export const NATIVE_FH_TAG = 2 ** 47;
export const DEFAULT_CAPACITY = 1 << 16;
/** shim/dataplane.zig mode_direct. */
const DP_MODE_DIRECT = 1;
/** shim/dataplane.zig mode_flush. */
const DP_MODE_FLUSH = 2;
/** shim/dataplane.zig mode_release. */
const DP_MODE_RELEASE = 4;
/** shim/dataplane.zig fu_dataplane_set(slot, -1) results. */
const CLEARED_MAPPED = 0;
const CLEARED_RELEASED = 1;
/** shim/dataplane.zig collect_only: fu_dataplane_set clears a released slot, nothing else. */
const COLLECT_ONLY = -2;
/** Node table entries (2^18, 4 MiB): node id & (2^18 − 1) picks the entry. */
const NODE_TABLE_LOG2 = 18;

export type DataPlaneMode = "native" | "js";

/** What a worker needs to use the same table (a pointer and shared bookkeeping). */
export interface DataPlaneShare {
  handle: number;
  capacity: number;
  userFh: SharedArrayBuffer;
  used: SharedArrayBuffer;
  /** Per slot: the backing descriptor and the node id it was opened for (Int32 / Float64). */
  fds: SharedArrayBuffer;
  inos: SharedArrayBuffer;
}

/** A handle still mapped (for the session's teardown: the kernel will never release it). */
export interface MappedHandle {
  fh: number;
  ino: number;
  fd: number;
  /** RELEASE was answered natively (fd already closed): only releaseClosed is left to do. */
  closed: boolean;
}

export class DataPlane {
  readonly handle: Pointer;
  readonly capacity: number;
  private readonly owner: boolean;
  /** The filesystem's fh per slot, and slot in use (0/1): shared by every thread's session. */
  private readonly userFh: Float64Array;
  private readonly used: Int32Array;
  private readonly fds: Int32Array;
  private readonly inos: Float64Array;
  private readonly share: DataPlaneShare;
  private cursor = 0;
  /** Handles mapped now (this thread's view: maps − unmaps done here), ever, refused (full). */
  open = 0;
  mapped = 0;
  full = 0;

  constructor(capacity = DEFAULT_CAPACITY, share?: DataPlaneShare) {
    if (share) {
      this.handle = share.handle as Pointer;
      this.capacity = share.capacity;
      this.share = share;
      this.owner = false;
    } else {
      const err = new Int32Array(1);
      const h = native().fu_dataplane_create(capacity, err) as Pointer | null;
      if (!h) throw new Error(`fuse-uring: cannot create the data plane table (errno ${-err[0]!})`);
      this.handle = h;
      this.capacity = capacity;
      this.share = {
        handle: h as number, capacity, userFh: new SharedArrayBuffer(8 * capacity), used: new SharedArrayBuffer(4 * capacity),
        fds: new SharedArrayBuffer(4 * capacity), inos: new SharedArrayBuffer(8 * capacity),
      };
      this.owner = true;
    }
    this.userFh = new Float64Array(this.share.userFh);
    this.used = new Int32Array(this.share.used);
    this.fds = new Int32Array(this.share.fds);
    this.inos = new Float64Array(this.share.inos);
  }

  /**
   * GETATTR from the shim's node table from now on, answered with `attrTtl` (seconds). The table
   * is the data plane's, shared by every thread: the first call creates it, later ones find it.
   * Null if the shim refused (out of memory).
   */
  enableNodes(attrTtl: number): NodeAttrs | null {
    const [sec, nsec] = ttlParts(attrTtl);
    const rc = native().fu_dataplane_enable_nodes(this.handle, NODE_TABLE_LOG2, sec, nsec);
    if (rc !== 0 && rc !== -Errno.EEXIST) return null;
    const h = this.handle;
    const n = native();
    return {
      set: (ino, fd) => n.fu_dataplane_node_set(h, ino, fd) === 0,
      clear: (ino) => n.fu_dataplane_node_clear(h, ino, 1),
      detach: (ino) => n.fu_dataplane_node_clear(h, ino, 0),
      drain: (ino) => n.fu_dataplane_node_drain(h, ino),
    };
  }

  /**
   * LOOKUPs of missing names in directories of the node table answered by the shim from now on
   * (io_uring): a negative entry for `negativeTtl` seconds, ENOENT when 0. Once per table (the
   * first thread's call does it; later ones find it done). Only after enableNodes gave a table:
   * the shim then cannot refuse (its only errors are "no table" and a bad TTL, both bugs here).
   */
  enableMissing(negativeTtl: number): void {
    const [sec, nsec] = ttlParts(negativeTtl);
    const rc = native().fu_dataplane_enable_missing(this.handle, sec, nsec);
    if (rc !== 0 && rc !== -Errno.EEXIST) throw new Error(`fu_dataplane_enable_missing: ${errnoName(-rc)} (called without a node table?)`);
  }

  /** For a worker thread's session: the same table. */
  shared(): DataPlaneShare {
    return this.share;
  }

  /**
   * The fh to give the kernel for a handle served from `fd`; the fs's own fh when full.
   * `direct`: serve it with O_DIRECT (shim/dataplane.zig set: a buffered `fd` is reopened with
   * O_DIRECT and kept as the fallback for requests refused for alignment). `ino`: the node
   * (FALLOCATE/LSEEK/COPY_FILE_RANGE of backed handles, release at the session's end).
   * `flush`: the shim answers FLUSH with close(dup(fd)) (OpenReply.backingFlush); `release`:
   * a ring may close fd and answer RELEASE (OpenReply.backingRelease).
   */
  map(fh: number, fd: number, direct = false, ino = 0, flush = false, release = false): number {
    if (!(fd >= 0)) return fh;
    const cap = this.capacity;
    for (let i = 0; i < cap; i++) {
      const slot = (this.cursor + i) % cap;
      if (this.used[slot] === 0 && Atomics.compareExchange(this.used, slot, 0, 1) === 0) {
        this.cursor = slot + 1;
        this.userFh[slot] = fh;
        this.fds[slot] = fd;
        this.inos[slot] = ino;
        const rc = native().fu_dataplane_set(this.handle, slot, fd, (direct ? DP_MODE_DIRECT : 0) | (flush ? DP_MODE_FLUSH : 0) | (release ? DP_MODE_RELEASE : 0));
        if (rc !== 0) {
          // The shim still holds the slot (cannot happen while `used` and the shim agree).
          Atomics.store(this.used, slot, 0);
          break;
        }
        this.open++;
        this.mapped++;
        return NATIVE_FH_TAG + slot;
      }
    }
    this.full++;
    return fh;
  }

  /**
   * FALLOCATE, LSEEK, COPY_FILE_RANGE: the backing descriptors of the request just unmapped
   * (in, and out for COPY_FILE_RANGE), or -1 when that handle is not served natively. Valid
   * until the next unmapRequest (the dispatcher reads them synchronously after it).
   */
  fdIn = -1;
  fdOut = -1;

  private unmapValue(v: DataView, off: number, release: boolean): number {
    const fh = getU64(v, off);
    if (fh < NATIVE_FH_TAG || fh >= NATIVE_FH_TAG + this.capacity) return -1;
    const slot = fh - NATIVE_FH_TAG;
    const fd = this.fds[slot]!;
    setU64(v, off, this.userFh[slot]!);
    if (release) {
      native().fu_dataplane_set(this.handle, slot, -1, 0);
      Atomics.store(this.used, slot, 0);
      this.open--;
    }
    return fd;
  }

  /** Rewrite native handles in a request header (op_in) back to the filesystem's fh. */
  unmapRequest(opcode: number, h: DataView): void {
    const OP = HDR_OP_IN;
    this.fdIn = this.fdOut = -1;
    switch (opcode) {
      case Op.RELEASE:
        this.unmapValue(h, OP, true);
        return;
      case Op.READ:
      case Op.WRITE:
      case Op.FSYNC:
      case Op.FLUSH:
      case Op.GETLK:
      case Op.SETLK:
      case Op.SETLKW:
      case Op.IOCTL:
      case Op.POLL:
        this.unmapValue(h, OP, false);
        return;
      case Op.FALLOCATE:
      case Op.LSEEK:
        this.fdIn = this.unmapValue(h, OP, false);
        return;
      case Op.COPY_FILE_RANGE:
      case Op.COPY_FILE_RANGE_64:
        this.fdIn = this.unmapValue(h, OP, false);
        this.fdOut = this.unmapValue(h, OP + 24, false);
        return;
      case Op.GETATTR:
        if (h.getUint32(OP, true) & FUSE_GETATTR_FH) this.unmapValue(h, OP + 8, false);
        return;
      case Op.SETATTR:
        if (h.getUint32(OP, true) & FATTR.FH) this.unmapValue(h, OP + 8, false);
        return;
    }
  }

  /**
   * A ring answered RELEASE of slot `slot` natively (its descriptor is closed): free the slot
   * and return the filesystem's fh and node for its releaseClosed, or null when teardown's
   * takeAll finished it first. The returned object is reused (read it before the next call).
   */
  collectRelease(slot: number): { fh: number; ino: number } | null {
    if (native().fu_dataplane_set(this.handle, slot, COLLECT_ONLY, 0) !== CLEARED_RELEASED) return null;
    const r = this.collected;
    r.fh = this.userFh[slot]!;
    r.ino = this.inos[slot]!;
    Atomics.store(this.used, slot, 0);
    this.open--;
    return r;
  }
  private readonly collected = { fh: 0, ino: 0 };

  /**
   * Unmap every handle still mapped and return them: at unmount (or DESTROY) the kernel will
   * never send their RELEASE, so the session releases them itself (the filesystem closes the
   * descriptors it owns in its release handler, as always). Handles whose RELEASE a ring
   * answered but no one collected yet come back `closed`.
   */
  takeAll(): MappedHandle[] {
    const out: MappedHandle[] = [];
    for (let slot = 0; slot < this.capacity; slot++) {
      if (this.used[slot] !== 1 || Atomics.compareExchange(this.used, slot, 1, 2) !== 1) continue;
      const rc = native().fu_dataplane_set(this.handle, slot, -1, 0);
      // Anything else: a ring thread is releasing it right now, or its owner collected it.
      if (rc === CLEARED_MAPPED || rc === CLEARED_RELEASED) out.push({ fh: this.userFh[slot]!, ino: this.inos[slot]!, fd: this.fds[slot]!, closed: rc === CLEARED_RELEASED });
      Atomics.store(this.used, slot, 0);
      this.open--;
    }
    return out;
  }

  destroy(): void {
    if (this.owner) native().fu_dataplane_destroy(this.handle);
  }
}

/** A TTL in seconds (negative: 0) as the shim takes it: whole seconds and nanoseconds. */
function ttlParts(seconds: number): [number, number] {
  const t = seconds > 0 ? seconds : 0;
  const sec = Math.floor(t);
  return [sec, Math.min(999_999_999, Math.round((t - sec) * 1e9))];
}
