// What Session.stats() reports (merged over the main thread and its workers; `fuse-uring stats`,
// --stats-file). Types only: the worker pool and the forwarding engine report rows of it too.

import type { DataPlaneMode } from "./dataplane.ts";
import type { LatencySummary } from "./latency.ts";
import type { TransportKind } from "../transport/types.ts";

export type BufferPoolState = "active" | "fallback" | "offered" | "none";

export interface SessionStats {
  transport: TransportKind | "pending";
  transportReason: string;
  ringRequests: number;
  devRequests: number;
  forgets: number;
  interrupts: number;
  wakeups: number;
  cqes: number;
  submits: number;
  inflight: number;
  inflightMax: number;
  pinnedBytes: number;
  fixedIo: number;
  /** Native transfers done synchronously (pread/pwrite) by a ring's owner (nativeSyncLimit). */
  nativeSync: number;
  /** Native reads/writes submitted as READ_FIXED/WRITE_FIXED on the owner's ring and answered
   *  from the completion (O_DIRECT handles; large transfers on a ring serving several queues). */
  nativeAsync: number;
  /** Native requests on O_DIRECT handles: the backing file's page cache was bypassed. */
  nativeDirect: number;
  /** FLUSHes the shim answered itself (close(dup()) of handles opened with `backingFlush`);
   *  counted in nativeRequests too. */
  nativeFlushes: number;
  /** GETATTRs the shim answered itself from the node table (InodeFS.nativeGetattr; no JS). */
  nativeGetattrs: number;
  /** RELEASEs the shim answered itself (close of handles opened with `backingRelease`; the
   *  filesystem's releaseClosed ran afterwards); counted in nativeRequests too. */
  nativeReleases: number;
  /** LOOKUPs of names that are not there answered by the shim (InodeFS.nativeLookupMiss: a
   *  statx in the directory's descriptor; negative entry or ENOENT); in nativeRequests too. */
  nativeLookups: number;
  /** Direct reads/writes the backing filesystem refused for alignment (EINVAL), redone on the
   *  handle's buffered descriptor (docs/DATAPLANE.md). */
  directFallbacks: number;
  /** Wait timers the ring engine(s) queued: far fewer than `enters` under load. */
  waitTimers: number;
  /** io_uring_enter calls of the ring engine(s). */
  enters: number;
  /** Wake-ups of a JS thread from another thread per request (doorbells ÷ requests; a
   *  forwarded request counts 2: to the main thread and back). */
  handoffsPerRequest: number;
  /** --workers forwarding mode: requests a worker posted to the main thread's handlers. */
  forwarded: number;
  /** "copies" (replicable script per worker), "forwarding", or "single" (one thread). */
  workerMode: "single" | "copies" | "forwarding";
  /** Requests answered by the native data plane (no JS), and its backing bytes. */
  nativeRequests: number;
  nativeReadBytes: number;
  nativeWriteBytes: number;
  nativeErrors: number;
  /** Most native ring I/Os in flight at once. */
  nativeInflightMax: number;
  /** Data plane: handles mapped now, and OPENs that found the table full (served by JS). */
  nativeHandles: number;
  dataPlane: DataPlaneMode;
  /**
   * FALLOCATE, LSEEK and COPY_FILE_RANGE answered from the descriptors of natively served
   * handles (lib/session/backed-ops.ts), and copies among them done with read/write because
   * copy_file_range(2) could not (EXDEV, …).
   */
  backedOps: number;
  backedCopyFallbacks: number;
  /** Notifications written (FUSE_NOTIFY_*), refused by the kernel, and retrieves answered. */
  notifications: number;
  notificationErrors: number;
  retrieved: number;
  /** Ring commands retried / entries registered again after an unexpected CQE. */
  ringRecovered: number;
  errors: number;
  replies: number;
  /**
   * FUSE 7.46 io_uring buffer pools: "active" (every ring queue takes its payloads from a pool),
   * "fallback" (asked for, the kernel refused at least one queue's: per-entry payloads there),
   * "offered" (the kernel offers them, not used: --pool-size 0, classic, forwarding workers),
   * "none" (the kernel does not offer them, e.g. Linux 6.18).
   */
  bufferPools: BufferPoolState;
  /** Why the buffers are what they are (the ready line and doctor print it). */
  bufferPoolsReason: string;
  /** Pool bytes per queue when pools are active (0 otherwise). */
  poolBytes: number;
  /** Zero-copy (FUSE_URING_ZERO_COPY queues): "active", "refused" (e.g. EPERM, not
   *  CAP_SYS_ADMIN), or "off" (not asked for: no pools or no native data plane). */
  zeroCopy: "active" | "refused" | "off";
  /** Native READ/WRITEs done straight at the client's pages, and their bytes. */
  zeroCopyRequests: number;
  zeroCopyBytes: number;
  /** Ring payload buffers registered as io_uring fixed buffers (false: RLIMIT_MEMLOCK too low). */
  fixedBuffers: boolean;
  /** /dev/fuse is the ring's registered (fixed) file: entry commands skip an fget per SQE. */
  fixedFile: boolean;
  /** Answered requests per opcode name, e.g. { READ: 10, GETATTR: 3 }. */
  ops: Record<string, number>;
  /** Requests answered ETIMEDOUT by requestTimeout. */
  timeouts: number;
  /** Handler results dropped because their request was already answered (timeout, early answer). */
  lateResults: number;
  /** Answers that waited for the request's backing I/O to finish before the slot was released. */
  deferredAnswers: number;
  /** Requests that were pending longer than slowRequestMs (each logged once). */
  slowRequests: number;
  /** INTERRUPTs whose target was not (yet) known: answered EAGAIN (classic) or remembered. */
  interruptsUnmatched: number;
  /** Remembered INTERRUPTs applied when their request arrived later (io_uring). */
  interruptsEarly: number;
  /** Impossible transitions (answer twice, I/O completion without I/O, …): bugs, each logged. */
  protocolErrors: number;
  /** Per opcode name: count and latency (arrival → answer) p50/p99/max/mean in µs. */
  latencyUs: Record<string, LatencySummary>;
  /** Requests that went through JS on the ring, per stage (lib/session/latency.ts STAGES):
   *  batch (back from the kernel → its turn), handler (→ answer), commit (answer → submitted). */
  stageLatencyUs: Record<string, LatencySummary>;
  /** Request slots (ring entries + classic readers): what `inflight` can reach. */
  slots: number;
  /** io_uring queues × depth (0 on classic). */
  ringQueues: number;
  ringDepth: number;
  /** Entries per queue whose own payloads are pinned (the deeper ones take memory only when
   *  used); 0 when every queue has a buffer pool (then no entry has a payload of its own). */
  ringPinnedDepth: number;
  /** Requests being handled right now per io_uring queue (queue use; [] on classic). */
  queueInflight: number[];
  /** Per serving thread (main, then each worker): requests, wake-ups from another thread,
   *  io_uring_enter calls and CQEs. */
  threads: ThreadStats[];
}

export interface ThreadStats {
  thread: string;
  requests: number;
  wakeups: number;
  enters: number;
  cqes: number;
  /** CPUs this thread is pinned to (workers: the CPUs of the queues it serves). */
  cpus?: number[];
}
