// FUSE-over-io_uring transport. The JS thread that runs the handlers owns the ring (the shim's
// `fu_ring_enter` submits every queued reply and backing I/O, runs the kernel's task work and
// reaps completions in one io_uring_enter), so under load a request is reaped, handled and
// answered on this thread with no hand-off. When nothing is pending in JS the pump blocks in
// the kernel for up to `waitMicros` waiting for the next request (the libfuse model); when that
// wait runs out, or handlers wait on the event loop, it arms the ring's eventfd and returns to
// the event loop, and the shim's watcher thread rings the doorbell once when work arrives.
// See docs/ARCHITECTURE.md for the request path and the numbers behind these choices.

import { ptr, toArrayBuffer, type Pointer } from "bun:ffi";
import { readFileSync } from "node:fs";
import { native } from "../native.ts";
import { HDR_PAYLOAD_SZ, RING_HEADER_SIZE } from "../protocol/constants.ts";
import { pinCurrentThread } from "./affinity.ts";
import { CompletionBuffer, makeSlot, makeSlotWith, payloadViews } from "./slots.ts";
import type { PayloadViews, Sink, Slot, Source, SourceStats } from "./types.ts";

/** io_uring setup flags (the owner thread is the only submitter). */
export const IORING_SETUP_SINGLE_ISSUER = 1 << 12;
export const IORING_SETUP_DEFER_TASKRUN = 1 << 13;
export const IORING_SETUP_COOP_TASKRUN = 1 << 8;
/** Shim flags (not io_uring's): no fixed-buffer registration; fault injection for tests. */
export const FU_RING_NO_FIXED_BUFFERS = 2 ** 31;
export const FU_RING_FAULT_BAD_COMMIT = 2 ** 30;

/** FUSE 7.46 buffer pools for a ring (docs/BUFFERS.md). */
export interface PoolOptions {
  /** Bytes per queue (a multiple of the payload size: the kernel cuts it into payload-size buffers). */
  bytesPerQueue: number;
  /** Ask for FUSE_URING_ZERO_COPY queues (the kernel refuses without CAP_SYS_ADMIN; the pool stays). */
  zeroCopy: boolean;
  /** Test fault: the kernel is handed a pool too small for one buffer and refuses it. */
  refuse: boolean;
}

/** Default pool per queue: 4 MiB (four 1 MiB buffers; depth no longer sets payload memory). */
export const POOL_DEFAULT_BYTES = 4 << 20;

/** Pool bytes per queue for a payload size: whole buffers, at least one. */
export function poolBytes(requested: number, payloadSize: number): number {
  const want = requested < 0 ? POOL_DEFAULT_BYTES : requested;
  return Math.max(1, Math.floor(want / payloadSize)) * payloadSize;
}

/** The shim's pool flags (fu_ring_create_pooled). */
const POOL_ZERO_COPY = 1, POOL_REFUSE = 2;
/** ring_ent_in_out.offset (FUSE 7.46; the 6.18 padding): the request's buffer in the pool. */
const HDR_POOL_OFFSET = 276;

export interface UringOptions {
  fd: number;
  /** Kernel queue ids this engine serves (all of them unless work is split over workers). */
  qids: number[];
  /** Number of queues the kernel expects (possible CPUs). */
  totalQueues: number;
  depth: number;
  payloadSize: number;
  /** Entries per queue whose payloads are pinned (prefaulted, registered): the last of each
   *  queue (shim/ring.zig pinned()); the session gives as many as PINNED_BUDGET allows over
   *  `totalQueues` queues (pinnedDepth()). */
  pinnedDepth: number;
  setupFlags: number;
  /** Threadsafe JSCallback rung by the shim's watcher thread when an idle owner has work. */
  doorbell: Pointer;
  /** Native data plane table (shim), or null to send every request to JS. */
  dataPlane: Pointer | null;
  /** How long the pump may block in the kernel for the next request (µs). */
  waitMicros: number;
  /** Native reads/writes up to this many bytes run synchronously on the owner thread
   *  (null: nativeSyncLimit). */
  nativeSyncMax: number | null;
  /** Pin the creating thread to the CPUs of `qids` (worker threads: lib/transport/affinity.ts;
   *  the session passes false for --no-pin / FUSE_URING_NO_PIN=1, lib/knobs.ts). */
  pinToQueues?: boolean;
  /** With pinToQueues: these CPUs instead of the queues' own (the thread plan's block). */
  pinCpus?: number[];
  /**
   * Held requests are answered by another thread (a forwarding worker, lib/session/
   * forward-worker.ts): while any is held, go idle right after a batch instead of looking
   * into the ring once more first — the answers arrive through the event loop anyway.
   */
  answeredElsewhere?: boolean;
  /** Buffer pools (kernel offers FUSE_HAS_IO_URING_BUFPOOL), or null for per-entry payloads. */
  pool?: PoolOptions | null;
}

/** Number of possible CPUs = number of FUSE ring queues the kernel expects (docs/KERNEL.md). */
export function possibleCpus(): number {
  const text = readFileSync("/sys/devices/system/cpu/possible", "utf8").trim();
  let n = 0;
  for (const part of text.split(",")) {
    const [a, b] = part.split("-").map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return n;
}

/** Default pinned-memory budget for ring buffers (issue: ≤ 64 MiB on any host). */
export const PINNED_BUDGET = 64 << 20;

/**
 * Default worst case of the entries beyond the pinned ones: their payloads are mapped but not
 * prefaulted or registered (shim/ring.zig pinned_depth), so they cost memory only once used —
 * the kernel hands out a queue's most recently answered entry first, so they fill only while
 * that many requests are in flight on one queue, and a 4 KiB request touches one page of its
 * 1 MiB payload. This bound is reached only by sustained 1 MiB requests at the full depth.
 */
export const UNPINNED_BUDGET = 192 << 20;

/**
 * Deepest default queue. One fio job at iodepth 64 submits from one CPU, so one queue's
 * entries are all it can have in flight, and QEMU's export workload (O_DIRECT randrw 4 KiB on
 * ext4, 2 CPUs, bench/README.md "deeper queues", 2026-12-07) runs four such jobs: 62 entries in flight of
 * 256 gave 0.64–0.69× the raw disk at 64×4, 126 per queue (with max_background to match)
 * 0.79–0.86×.
 */
export const MAX_DEFAULT_DEPTH = 128;

/** Pinned entries per queue: as many of `depth` as fit `queues × n × (payload + 4 KiB)` in `budget`. */
export function pinnedDepth(queues: number, depth: number, payloadSize: number, budget = PINNED_BUDGET): number {
  return Math.max(0, Math.min(depth, Math.floor(budget / (queues * (payloadSize + 4096)))));
}

/**
 * Default queue depth, max_write and pinned entries per queue. Pinned: 1 MiB payloads for as
 * many entries as fit `queues × n × (1 MiB + 4 KiB)` in the pinned budget (63 on 1 CPU, 31 on 2,
 * 15 on 4, 7 on 8); then as many unpinned entries as
 * UNPINNED_BUDGET allows (at most MAX_DEFAULT_DEPTH in all: 126 on 2 CPUs, 62 on 4, 30 on 8).
 * With fewer than 2 pinned entries (very many CPUs): fewer entries, then smaller payloads, all
 * pinned (the kernel needs every possible CPU's queue registered, each entry with a payload
 * buffer of at least max_write, so only these two can give).
 */
export function ringSizing(queues: number, budget = PINNED_BUDGET, unpinnedBudget = UNPINNED_BUDGET): { depth: number; maxWrite: number; pinnedDepth: number } {
  const perEntry = (1 << 20) + 4096;
  const fit = Math.floor(budget / (queues * perEntry));
  if (fit >= 2) {
    const depth = Math.min(MAX_DEFAULT_DEPTH, fit + Math.floor(unpinnedBudget / (queues * perEntry)));
    return { depth, maxWrite: 1 << 20, pinnedDepth: Math.min(depth, fit) };
  }
  let d = Math.floor(budget / (queues * (8192 + 4096)));
  d = Math.max(1, Math.min(2, d));
  const maxWrite = Math.min(1 << 20, Math.max(8192, Math.floor((budget / (queues * d) - 4096) / 4096) * 4096));
  return { depth: d, maxWrite, pinnedDepth: d };
}

/**
 * FUSE's max_background for io_uring: every entry of every queue may hold an asynchronous
 * request (the kernel moves background requests to a queue only below this limit,
 * dev_uring.c fuse_uring_flush_bg), at least the classic 64. Unprivileged mounts are capped
 * by the kernel (fs.fuse.max_user_bgreq).
 */
export function maxBackground(queues: number, depth: number): number {
  return Math.min(65535, Math.max(64, queues * depth));
}

export class UringError extends Error {
  constructor(readonly errno: number, message: string) {
    super(message);
  }
}

/** Words of shim/ring.zig Stats (ABI 7: native_getattrs is word 32). */
const STATS_WORDS = 35;
/** sizeof(shim/ring.zig Released). */
const RELEASED_BYTES = 4096;
/** After this long of continuous pumping, yield one macrotask turn (timers, I/O callbacks). */
const SLICE_MS = 4;
/** Batches between two looks at the clock for SLICE_MS. */
const SLICE_CHECK = 8;
/** A thread goes idle (eventfd, doorbell) only after this long without a request. */
const LINGER_MS = 50;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class UringSource implements Source {
  readonly kind = "uring" as const;
  readonly slots: Slot[] = [];
  pinnedBytes: number;
  /** Entries per queue with pinned payloads (the rest are touched only when used). */
  pinnedDepth = 0;
  /**
   * Buffer pools: the memory, a SharedArrayBuffer allocated here and handed to the shim by
   * address (kept referenced for the ring's life: the kernel writes into it), and per queue
   * one set of views per pool buffer. null: per-entry payloads.
   */
  private poolMemory: SharedArrayBuffer | null = null;
  private poolViews: PayloadViews[][] = [];
  /** Per slot: its queue's pool views, or null once it has its own payload (fallback). */
  private slotPool: (PayloadViews[] | null)[] = [];
  private readonly depth: number;
  private readonly payloadSize: number;
  private readonly pool: PoolOptions | null;
  /** CPUs the owner thread was pinned to (pinToQueues), else null. */
  readonly pinnedCpus: number[] | null = null;
  private handle: Pointer | null;
  private readonly out: CompletionBuffer;
  private readonly maxOut: number;
  private readonly statsView: DataView;
  private final: SourceStats | null = null;
  private readonly waitMicros: number;
  /** Expired blocking waits in a row before the thread goes idle (LINGER_MS). */
  private readonly lingerWaits: number;
  private readonly answeredElsewhere: boolean;
  private pumping = false;
  private scheduled = false;
  private stopped = false;
  /** Requests JS holds, and how many of them wait for a ring I/O (answered by a later enter). */
  private held = 0;
  private ioPending = 0;
  private readonly pumpBound = () => void this.pump();
  /** Native requests answered as of the last enter that returned nothing for JS. */
  private nativeServed = 0;
  /** shim/ring.zig Released over native memory (count, enabled, slots), or null: RELEASE is JS's. */
  private released: Uint32Array | null = null;
  /** Commit/io refusals (a bug: logged loudly by the session). */
  refusals = 0;

  constructor(private readonly sink: Sink, opts: UringOptions) {
    const n = native();
    const err = new Int32Array(1);
    // Before the ring exists: its watcher thread inherits the affinity.
    if (opts.pinToQueues) this.pinnedCpus = pinCurrentThread(opts.pinCpus ?? opts.qids);
    const qids = new Uint16Array(opts.qids);
    this.depth = opts.depth;
    this.payloadSize = opts.payloadSize;
    this.pool = opts.pool ?? null;
    const entries = qids.length * opts.depth;
    let h: Pointer | null;
    if (this.pool) {
      const perQueue = this.pool.bytesPerQueue;
      if (perQueue < opts.payloadSize || perQueue % opts.payloadSize !== 0) throw new UringError(22, `pool size ${perQueue} is not a multiple of the payload size ${opts.payloadSize}`);
      // One SharedArrayBuffer for every queue's pool, page aligned inside (O_DIRECT backing
      // I/O into a pool buffer needs aligned memory); JSC never moves an ArrayBuffer's
      // contents, so the address handed to the kernel stays valid while we hold the buffer.
      const sab = new SharedArrayBuffer(qids.length * perQueue + 4096);
      const base = ptr(new Uint8Array(sab));
      const skew = (4096 - (base % 4096)) % 4096;
      this.poolMemory = sab;
      for (let q = 0; q < qids.length; q++) {
        const views: PayloadViews[] = [];
        for (let b = 0; b < perQueue / opts.payloadSize; b++) views.push(payloadViews(sab, skew + q * perQueue + b * opts.payloadSize, opts.payloadSize));
        this.poolViews.push(views);
      }
      const flags = (this.pool.zeroCopy ? POOL_ZERO_COPY : 0) | (this.pool.refuse ? POOL_REFUSE : 0);
      h = n.fu_ring_create_pooled(opts.fd, qids, qids.length, opts.totalQueues, opts.depth, opts.pinnedDepth, opts.payloadSize, opts.setupFlags, opts.doorbell, opts.dataPlane, base + skew, perQueue, flags, err) as Pointer | null;
    } else {
      h = n.fu_ring_create(opts.fd, qids, qids.length, opts.totalQueues, opts.depth, opts.pinnedDepth, opts.payloadSize, opts.setupFlags, opts.doorbell, opts.dataPlane, err) as Pointer | null;
    }
    if (!h) throw new UringError(-err[0]!, `io_uring setup failed (errno ${-err[0]!})`);
    this.handle = h;
    for (let i = 0; i < entries; i++) {
      if (this.pool) {
        const views = this.poolViews[Math.floor(i / opts.depth)]!;
        this.slots.push(makeSlotWith(this, i, n.fu_ring_header(h, i) as Pointer, { ...views[0]! }));
        this.slotPool.push(views);
      } else this.slots.push(makeSlot(this, i, n.fu_ring_header(h, i) as Pointer, n.fu_ring_payload(h, i) as Pointer, opts.payloadSize));
    }
    this.maxOut = 2 * entries + 2;
    this.out = new CompletionBuffer(this.maxOut);
    this.pinnedDepth = opts.pinnedDepth;
    this.pinnedBytes = this.pool ? qids.length * this.pool.bytesPerQueue + entries * 4096 : entries * 4096 + qids.length * opts.pinnedDepth * opts.payloadSize;
    this.waitMicros = opts.waitMicros;
    this.lingerWaits = opts.waitMicros > 0 ? Math.ceil((LINGER_MS * 1000) / opts.waitMicros) : 0;
    this.answeredElsewhere = opts.answeredElsewhere === true;
    n.fu_ring_set_native_sync(h, opts.nativeSyncMax ?? nativeSyncLimit(qids.length, opts.payloadSize));
    // O_DIRECT handles go asynchronous (shim/ring.zig syncTransfer); =1 makes them synchronous
    // like every other transfer, to compare.
    if (process.env.FUSE_URING_DIRECT_SYNC === "1") n.fu_ring_set_direct_sync(h, 1);
    this.statsView = new DataView(toArrayBuffer(n.fu_ring_stats(h) as Pointer, 0, STATS_WORDS * 8));
    // Native RELEASE only for a sink that finishes the filesystem's bookkeeping (the forwarding
    // worker's sink has no filesystem: its RELEASEs go to the main thread as before).
    if (sink.onNativeRelease) this.released = new Uint32Array(toArrayBuffer(n.fu_ring_released(h) as Pointer, 0, RELEASED_BYTES));
  }

  /** Addresses of entry `idx`'s header and payload (a forwarding worker reports them to the
   *  main thread, which builds its own views over the same memory). */
  entryAddresses(idx: number): { header: number; payload: number } {
    const n = native();
    return { header: Number(n.fu_ring_header(this.handle!, idx)), payload: Number(n.fu_ring_payload(this.handle!, idx)) };
  }

  /** Queue REGISTER for every entry and start pumping; only after the INIT reply was written.
   *  With pools the shim first adds every queue and its pool (ADD_QUEUE, ADD_BUFPOOL); the
   *  queues whose pool the kernel refused get per-entry payloads, bound here. */
  start(): void {
    const n = native();
    const rc = n.fu_ring_start(this.handle!);
    if (rc < 0) throw new UringError(-rc, `io_uring register failed (errno ${-rc})`);
    if (this.pool) {
      for (const slot of this.slots) {
        const p = n.fu_ring_payload(this.handle!, slot.index) as Pointer | null;
        if (!p) continue;
        Object.assign(slot, payloadViews(toArrayBuffer(p, 0, this.payloadSize), 0, this.payloadSize));
        this.slotPool[slot.index] = null;
      }
      // A queue whose pool the kernel refused has per-entry payloads, pinnedDepth of them pinned.
      const pooledQueues = this.stats().poolQueues ?? 0;
      const ownQueues = this.slots.length / this.depth - pooledQueues;
      this.pinnedBytes = pooledQueues * this.pool.bytesPerQueue + this.slots.length * 4096 + ownQueues * this.pinnedDepth * this.payloadSize;
    }
    void this.pump();
  }

  /** Pool queues: the request's payload is the pool buffer at ent_in_out.offset. A request
   *  without payload has no buffer (offset 0): nothing is read or written there. */
  bindPayload(slot: Slot): void {
    const views = this.slotPool[slot.index];
    if (!views) return;
    const b = views[(slot.header.getUint32(HDR_POOL_OFFSET, true) / this.payloadSize) | 0];
    if (!b) return; // outside the pool: the shim refuses I/O on it too
    slot.payload = b.payload;
    slot.payloadView = b.payloadView;
    slot.payloadText = b.payloadText;
  }

  /** Pool state of this ring: "active" (every queue has a pool), "fallback" (the kernel refused
   *  at least one; those queues use per-entry payloads), or "off" (not asked for). */
  poolState(): "active" | "fallback" | "off" {
    if (!this.pool) return "off";
    return (this.stats().poolRefused ?? 0) > 0 ? "fallback" : "active";
  }

  /** Doorbell (the owner was idle and work arrived). */
  drain(): void {
    void this.pump();
  }

  /** Sink side: a REQUEST record was dispatched / an IO_DONE arrived. */
  noteRequest(): void {
    this.held++;
  }

  /** Queues the answer; < 0 = -errno when the shim refuses it (-EINVAL: the entry is not
   *  held; -EBUSY: backing I/O still runs on its payload). The session's request state machine
   *  makes refusals unreachable and reports any as a protocol error. */
  reply(slot: Slot, payloadLen: number): number {
    if (!this.handle) return -107;
    slot.header.setUint32(HDR_PAYLOAD_SZ, payloadLen, true);
    const rc = native().fu_ring_commit(this.handle, slot.index);
    if (rc < 0) {
      this.refusals++;
      return rc;
    }
    this.held--;
    this.schedule();
    return 0;
  }

  /** A ring entry always needs a COMMIT to come back; an empty error reply is the release. */
  release(slot: Slot): void {
    this.reply(slot, 0);
  }

  /** Backing read (kind 1) into / write (kind 2) from slot's payload; IO_DONE reports it. */
  io(slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number): number {
    if (!this.handle) return -107;
    const rc = native().fu_ring_io(this.handle, kind, slot.index, fd, offset, len);
    if (rc >= 0) {
      this.ioPending++;
      this.schedule();
    }
    return rc;
  }

  ioFinished(): void {
    this.ioPending--;
  }

  flush(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.pumping || this.scheduled || !this.handle) return;
    this.scheduled = true;
    queueMicrotask(this.pumpBound);
  }

  /**
   * The engine loop. Blocks in the kernel only while no handler is waiting on the event loop;
   * lets handlers that settle within microtasks answer before the next enter; yields a
   * macrotask turn every SLICE_MS so timers and I/O callbacks run under sustained load; arms
   * the eventfd and returns when idle.
   */
  private async pump(): Promise<void> {
    this.scheduled = false;
    if (this.pumping || !this.handle || this.stopped) return;
    this.pumping = true;
    const n = native();
    const h = this.handle;
    const bytes = this.out.bytes;
    n.fu_ring_set_idle(h, 0);
    let sliceStart = performance.now();
    let batches = 0;
    let emptyWaits = 0;
    try {
      for (;;) {
        const waiting = this.held - this.ioPending;
        const blocking = waiting <= 0 && this.waitMicros > 0;
        this.sink.entering?.(performance.now());
        let count = n.fu_ring_enter(h, bytes, this.maxOut, blocking ? this.waitMicros : 0);
        if (this.released !== null && this.released[0] !== 0) this.collectReleased();
        if (count > 0) {
          emptyWaits = 0;
          this.sink.entered?.(performance.now());
          this.out.dispatch(count, this, this.sink);
        }
        if (this.stopped || !this.handle) return;
        // A few microtask turns: async handlers that only await other microtasks answer now
        // and their replies go out with the next enter.
        // (Not when the answers come from another thread: they cannot arrive within microtasks.)
        for (let i = 0; i < 8 && !this.answeredElsewhere && this.held - this.ioPending > 0; i++) await null;
        if (!this.handle) return;
        if (count === 0 && blocking && (this.nativeServed !== (this.nativeServed = this.nativeCount()) || ++emptyWaits < this.lingerWaits)) {
          // The wait timer expired while the shim kept answering native requests (busy, not
          // idle), or soon after the last request (under load on other CPUs the kernel's
          // scheduler moves the callers between CPUs, hence between queues, every few ms).
          // Let the event loop run (timers, signals) and go on waiting in the kernel, without
          // the eventfd round trip: the next request then wakes this thread directly instead of
          // costing a doorbell (~30 µs of latency, measured as 1 request in 100 under 4 KiB
          // QD1 ×2 before this linger). Only LINGER_MS without requests makes the thread idle.
          // The wait timer fires every waitMicros even under load: yield only once the slice is
          // over, as below (a turn of the event loop per timer period delayed 1 request in 100).
          if (performance.now() - sliceStart > SLICE_MS) {
            await yieldToEventLoop();
            if (!this.handle || this.stopped) return;
            sliceStart = performance.now();
          }
          continue;
        }
        if (count === 0 || (this.answeredElsewhere && this.held - this.ioPending > 0)) {
          // Idle: from now on the kernel signals the eventfd; one more look closes the race
          // with a request that arrived just before.
          n.fu_ring_set_idle(h, 1);
          this.sink.entering?.(performance.now());
          count = n.fu_ring_enter(h, bytes, this.maxOut, 0);
          if (this.released !== null && this.released[0] !== 0) this.collectReleased();
          if (count === 0) return;
          n.fu_ring_set_idle(h, 0);
          this.sink.entered?.(performance.now());
          this.out.dispatch(count, this, this.sink);
          if (this.stopped) return;
        }
        // (The clock every SLICE_CHECK batches: at QD1 a batch is one request.)
        if (++batches % SLICE_CHECK === 0 && performance.now() - sliceStart > SLICE_MS) {
          await yieldToEventLoop();
          if (!this.handle) return;
          sliceStart = performance.now();
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /**
   * Hand the slots of the RELEASEs the last enter answered natively to the sink (shim/ring.zig
   * Released: count, enabled, slots), then empty the list. Owner thread, between enters.
   */
  private collectReleased(): void {
    const r = this.released!;
    const count = r[0]!;
    for (let i = 0; i < count; i++) this.sink.onNativeRelease!(r[2 + i]!);
    r[0] = 0;
  }

  /** Requests the shim answered natively so far (stats word native_requests). */
  private nativeCount(): number {
    return Number(this.statsView.getBigUint64(9 * 8, true));
  }

  /** Sink side: the STOPPED record arrived. */
  markStopped(): void {
    this.stopped = true;
  }

  /** The engine stops by itself when the connection ends (entries complete with ENOTCONN). */
  stop(): void {}

  destroy(): void {
    if (!this.handle) return;
    // Slots released by the last enter still get their bookkeeping.
    if (this.released !== null && this.released[0] !== 0) this.collectReleased();
    this.released = null;
    this.final = this.stats();
    native().fu_ring_destroy(this.handle);
    this.handle = null;
    // The ring is gone (the kernel let go of the pool): the memory may be collected now.
    this.poolMemory = null;
  }

  stats(): SourceStats {
    if (!this.handle) return this.final!;
    const v = this.statsView;
    const u = (i: number) => Number(v.getBigUint64(i * 8, true));
    // shim/ring.zig Stats: enters, cqes, wakeups, requests, commits, io_ops, errors, dead,
    // fixed_buffers, native_requests, native_read_bytes, native_write_bytes, native_errors,
    // recovered, inflight_max, idles, native_inflight_max, native_sync, wait_timers, fixed_file,
    // native_async, native_direct, direct_fallbacks, then the buffer pools' (ABI 5): pool_queues,
    // pool_refused, pool_error, zero_copy_queues, zero_copy_requests, zero_copy_bytes, pool_fixed,
    // zero_copy_error, then (ABI 6) native_flushes, (ABI 7) native_getattrs, (ABI 8) native_releases, native_lookups
    const fixed = u(8) === 1;
    const i64 = (i: number) => Number(v.getBigInt64(i * 8, true));
    return {
      poolQueues: u(23), poolRefused: u(24), poolErrno: -i64(25), zeroCopyQueues: u(26), zeroCopyRequests: u(27), zeroCopyBytes: u(28),
      zeroCopyErrno: -i64(30),
      submits: u(0), cqes: u(1), wakeups: u(2), requests: u(3), fixedIo: fixed ? u(5) : 0, errors: u(6) + this.refusals, fixedBuffers: fixed,
      enters: u(0), nativeRequests: u(9), nativeReadBytes: u(10), nativeWriteBytes: u(11), nativeErrors: u(12),
      recovered: u(13), inflightMax: u(14), idles: u(15), nativeInflightMax: u(16), nativeSync: u(17), waitTimers: u(18), fixedFile: u(19) === 1,
      nativeAsync: u(20), nativeDirect: u(21), directFallbacks: u(22), nativeFlushes: u(31), nativeGetattrs: u(32), nativeReleases: u(33), nativeLookups: u(34),
    };
  }
}

export { RING_HEADER_SIZE };

/**
 * Largest native transfer done synchronously (pread/pwrite) on the ring's owner thread. A ring
 * that serves one queue is libfuse's thread per queue: no other queue waits behind its
 * transfers, and a synchronous pread costs no io-wq hand-off, so every size runs that way. A
 * ring serving several queues keeps transfers over 64 KiB asynchronous (READ_FIXED/WRITE_FIXED,
 * several in flight) so one queue's 1 MiB transfer does not hold up the others' requests.
 * docs/DATAPLANE.md; FUSE_URING_NATIVE_SYNC_MAX overrides (the session's ring plan).
 */
export function nativeSyncLimit(queues: number, payloadSize: number): number {
  return queues === 1 ? payloadSize : 64 * 1024;
}
