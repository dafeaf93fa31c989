// A Session is one mounted connection: it owns the /dev/fuse fd, the transports (the classic
// /dev/fuse reader always, the io_uring when negotiated), the per-slot request state and the
// INIT negotiation. Requests flow: shim thread → doorbell → Source.drain → onRequest →
// Dispatcher → Replier → Source.reply → (batch end) Source.flush.

import { JSCallback } from "bun:ffi";
import { existsSync, readFileSync, write as fsWrite, writeFileSync } from "node:fs";
import { errnoName, errnoOf, Errno, FuseError } from "../protocol/errors.ts";
import { onFailStop } from "../shared/fail-stop.ts";
import { knobs } from "../knobs.ts";
import type { InitInfo, InodeFS, NodeAttrs } from "./filesystem.ts";
import { native } from "../native.ts";
import { decodeInitIn, encodeInitOut, getU64, INIT_OUT_SIZE } from "../protocol/codec.ts";
import {
  FUSE_KERNEL_MINOR_VERSION, FUSE_KERNEL_VERSION, HDR_OP_IN, HDR_PAYLOAD_SZ, initBit, initFlagNames, Op, opHeaderSizes, opName,
} from "../protocol/constants.ts";
import { ClassicSource } from "../transport/classic.ts";
import type { Sink, Slot, Source, SourceStats, TransportKind } from "../transport/types.ts";
import {
  FU_RING_FAULT_BAD_COMMIT, FU_RING_NO_FIXED_BUFFERS, IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_SINGLE_ISSUER, maxBackground, pinnedDepth, possibleCpus, ringSizing, UringError, UringSource, poolBytes,
} from "../transport/uring.ts";
import { DataPlane, type DataPlaneMode, type DataPlaneShare } from "./dataplane.ts";
import { WorkerPool, type RingPlan, type WorkerInit } from "../threads/pool.ts";
import { planThreads, type WorkerModule } from "../threads/plan.ts";
import { ForwardedSource } from "../transport/forwarded.ts";
import { Dispatcher, handlerNameOf } from "./dispatch.ts";
import { SessionNotifications } from "./notify.ts";
import { Replier, type ReplyObserver } from "./reply.ts";
import { DEFERRED, FREE, HANDLING, Request, stateNames } from "./request.ts";
import { Tracer, traceReplies } from "./trace.ts";
import { LatencyHistograms, STAGE_BATCH, STAGE_COMMIT, STAGE_HANDLER, stageName, type LatencySummary } from "./latency.ts";
import type { BufferPoolState, SessionStats } from "./stats.ts";

export type TransportChoice = "auto" | "uring" | "classic";

export interface SessionOptions {
  transport: TransportChoice;
  /** Entries per ring queue; 0 = sized to the pinned-memory budget (ringSizing). */
  queueDepth: number;
  /** Bytes; 0 = sized to the pinned-memory budget (1 MiB unless the host has many CPUs). */
  maxWrite: number;
  classicSlots: number;
  entryTtl: number;
  attrTtl: number;
  negativeTtl: number;
  writebackCache: boolean;
  kernelPassthrough: boolean;
  /** io_uring setup flags for the ring thread (SINGLE_ISSUER | DEFER_TASKRUN by default) */
  ringSetupFlags: number;
  /** µs the ring's owner may block in the kernel waiting for the next request. */
  ringWaitMicros: number;
  /** "native": handles opened with a backingFd are served by the shim (no JS per READ/WRITE). */
  dataPlane: DataPlaneMode;
  /**
   * With the native data plane: GETATTR of a filesystem that says `nativeGetattr` (the
   * passthrough) is answered by the shim from its node table (default true; --no-native-getattr
   * or FUSE_URING_NATIVE_GETATTR=0 turn it off).
   */
  nativeGetattr: boolean;
  /**
   * Native data plane, O_DIRECT opens: false (default) = the caller's O_DIRECT reaches the
   * backing file (the shim reopens a buffered backingFd with O_DIRECT; alignment refusals fall
   * back to the buffered one); true = backing files stay buffered (host page cache).
   */
  backingCache: boolean;
  /**
   * Native transfers up to this many bytes run synchronously on the ring's thread; null: by
   * the queues per ring (nativeSyncLimit in lib/transport/uring.ts).
   */
  nativeSyncMax: number | null;
  /** Pin each worker to its queues' CPUs (default true). */
  pinWorkers: boolean;
  /**
   * Test option (lib/knobs.ts, `--test fault=SPEC[,SPEC…]`): "bad-commit" (the ring commits a
   * bad entry), "worker-exit:W:K" / "worker-throw:W:K" (worker W fails in its K+1-th handler),
   * "no-fusectl" (a fail-stop acts as if fusectl were not mounted).
   */
  fault: string;
  /**
   * Threads serving the ring queues (1 = this thread), "auto" = a worker per allowed CPU (at
   * most 8) when the filesystem can run as copies, else 1. What each runs: lib/threads/plan.ts
   * (the one place that decides). No worker runs on the classic transport.
   */
  workers: number | "auto";
  /**
   * How a worker loads a fresh instance of this filesystem when it declares itself stateless
   * (`threads: "stateless"` / `replicable: true`): the app knows (a script's file). Null: it
   * cannot, so such a filesystem is served like a "single" one.
   */
  workerModule: WorkerModule | null;
  /**
   * The module worker threads start from: the app's (lib/worker-main.ts, set by mount()). It
   * calls serveWorker (lib/threads/worker-entry.ts) with how to load a filesystem. Null: no
   * workers (one thread serves every queue).
   */
  workerEntry: string | null;
  /** Internal: "worker" sessions run inside a worker thread: no /dev/fuse reader, the fd is not theirs. */
  role: "main" | "worker";
  /** Internal: a worker's view of the main session's data plane table. */
  dataPlaneShare: DataPlaneShare | null;
  /** Register ring payloads as io_uring fixed buffers for backing I/O (default true). */
  fixedBuffers: boolean;
  /**
   * FUSE 7.46 buffer pools (Linux 7.3, when the kernel offers FUSE_HAS_IO_URING_BUFPOOL):
   * bytes of payload buffers per ring queue, rounded down to whole payload buffers (at least
   * one); -1 = default (POOL_DEFAULT_BYTES), 0 = per-entry payloads (the 6.18 layout).
   */
  poolSize: number;
  /** Zero-copy READ/WRITE for natively served files when pools are active and the daemon has
   *  CAP_SYS_ADMIN (default true; FUSE_URING_ZERO_COPY=0 or --no-zero-copy turn it off). */
  zeroCopy: boolean;
  /** Test-only: "refuse" hands the kernel a pool too small for one buffer (FUSE_URING_POOL_FAULT). */
  poolFault: string;
  /**
   * Seconds after which a request whose handler has not answered is answered ETIMEDOUT for it
   * (the handler's late result is dropped, ctx.signal aborts, stats.timeouts counts it).
   * 0 (default) = never: like the kernel, wait for the handler however long it takes.
   */
  requestTimeout: number;
  /** Log once per request still pending after this many ms (0 = never; default 10 s). */
  slowRequestMs: number;
  /** Fill unused payload bytes with a pattern and check it on reuse (FUSE_URING_POISON=1). */
  poison: boolean;
  /**
   * fusectl connection id of this session's mount (/sys/fs/fuse/connections/N; mount() sets it).
   * A fail-stop aborts the connection through it; null: the app must end the process instead.
   */
  connection: number | null;
  /** Worker sessions: where a fail-stop on this thread goes (the main thread's session). */
  reportFailStop: ((reason: string) => void) | null;
  debug: boolean;
  log: (line: string) => void;
}

export const defaultSessionOptions: SessionOptions = {
  transport: "auto",
  queueDepth: 0,
  maxWrite: 0,
  classicSlots: 16,
  entryTtl: 1,
  attrTtl: 1,
  negativeTtl: 0,
  writebackCache: false,
  kernelPassthrough: false,
  // Measured on 6.18 (see docs/ARCHITECTURE.md). Tuning knobs (lib/knobs.ts) change them for
  // experiments (bench/): --ring-flags, --ring-wait-us, --no-fixed-buffers, --native-sync-max, --no-pin.
  ringSetupFlags: knobs.ringSetupFlags() ?? IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
  fixedBuffers: knobs.fixedBuffers(),
  poolSize: -1,
  zeroCopy: knobs.zeroCopy(),
  poolFault: knobs.poolFault(),
  // 10 ms: the wait timer fires every period even under load, and each expiry woke the owner
  // in the middle of a caller's time slice (1 ms: p99 of 4 KiB QD1 ×2 memfs reads 32 µs, 10 ms:
  // 17–21 µs, libfuse 15 µs). Event-loop work that is not a request (timers of the filesystem,
  // worker messages) waits at most this long while the owner blocks for requests.
  ringWaitMicros: knobs.ringWaitMicros() ?? 10_000,
  nativeSyncMax: knobs.nativeSyncMax(),
  pinWorkers: knobs.pinWorkers(),
  dataPlane: "native",
  nativeGetattr: knobs.nativeGetattr(),
  backingCache: false,
  fault: knobs.fault(),
  workers: "auto",
  workerModule: null,
  workerEntry: null,
  role: "main",
  dataPlaneShare: null,
  requestTimeout: 0,
  slowRequestMs: knobs.slowRequestMs() ?? 10_000,
  poison: knobs.poison(),
  connection: null,
  reportFailStop: null,
  debug: false,
  log: (line) => process.stderr.write(line + "\n"),
};

export type { BufferPoolState, SessionStats, ThreadStats } from "./stats.ts";

/** Capabilities requested from the kernel (granted = these ∩ offered). */
function requestedFlags(o: SessionOptions): bigint {
  let f =
    initBit("ASYNC_READ") | initBit("BIG_WRITES") | initBit("MAX_PAGES") | initBit("DO_READDIRPLUS") |
    initBit("READDIRPLUS_AUTO") | initBit("PARALLEL_DIROPS") | initBit("INIT_EXT") | initBit("ABORT_ERROR") |
    initBit("ASYNC_DIO") | initBit("AUTO_INVAL_DATA") | initBit("HANDLE_KILLPRIV_V2") | initBit("SETXATTR_EXT") |
    initBit("CACHE_SYMLINKS") | initBit("NO_EXPORT_SUPPORT") | // AUTO_INVAL_DATA, not EXPLICIT_: scripts change content
    initBit("DIRECT_IO_ALLOW_MMAP"); // MAP_SHARED of a FOPEN_DIRECT_IO file (O_DIRECT opens of native handles) works as on ext4
  if (o.writebackCache) f |= initBit("WRITEBACK_CACHE");
  if (o.kernelPassthrough && !o.writebackCache) f |= initBit("PASSTHROUGH");
  return f;
}

/**
 * Capabilities asked for because the filesystem implements them: lock handlers (otherwise the
 * kernel keeps locks locally, which is right for a filesystem that does not), ioctl on
 * directories.
 */
function fsFlags(fs: InodeFS): bigint {
  let f = 0n;
  if (typeof fs.getlk === "function" && typeof fs.setlk === "function") f |= initBit("POSIX_LOCKS");
  if (typeof fs.flock === "function") f |= initBit("FLOCK_LOCKS");
  if (typeof fs.ioctl === "function") f |= initBit("HAS_IOCTL_DIR");
  return f;
}

/** Why the io_uring transport is unavailable, from what the kernel and sysctls say. */
export function explainNoUring(offered: bigint): string {
  const param = "/sys/module/fuse/parameters/enable_uring";
  if (!(offered & initBit("OVER_IO_URING"))) {
    if (!existsSync(param)) return "kernel has no FUSE-over-io_uring (needs Linux ≥ 6.14 with CONFIG_FUSE_IO_URING)";
    const v = readFileSync(param, "utf8").trim();
    if (v === "N" || v === "0") return `enable_uring is N (as root: echo Y > ${param})`;
    return "kernel did not offer FUSE_OVER_IO_URING";
  }
  return "";
}

export function explainRingError(errno: number): string {
  let disabled = "";
  try {
    disabled = readFileSync("/proc/sys/kernel/io_uring_disabled", "utf8").trim();
  } catch {}
  if (errno === Errno.EPERM) {
    if (disabled === "2") return "io_uring is disabled (kernel.io_uring_disabled=2)";
    if (disabled === "1") return "io_uring is restricted (kernel.io_uring_disabled=1 and not in io_uring_group)";
    return "io_uring blocked with EPERM (a seccomp filter, e.g. a container's default profile)";
  }
  if (errno === Errno.ENOSYS) return "io_uring syscalls are not available (ENOSYS)";
  if (errno === Errno.ENOMEM) return "cannot allocate/pin ring memory (ENOMEM: lower --queue-depth/--max-write or raise RLIMIT_MEMLOCK)";
  return `io_uring setup failed: ${errnoName(errno)}`;
}

export class Session implements Sink, ReplyObserver {
  readonly opts: SessionOptions;
  private classic: ClassicSource | null = null;
  private pool: WorkerPool | null = null;
  /** Copies mode over one shared state (InodeFS.copies sharedState): FORGET is applied here only. */
  private sharedCopies = false;
  private uring: UringSource | null = null;
  /** Forwarding mode: one source per worker, over that worker's ring entries. */
  private forwarded: ForwardedSource[] = [];
  private readonly reqs = new Map<Source, Request[]>();
  /** reqs.get(this.uring), without the Map lookup on every ring request. */
  private ringReqs: Request[] = [];
  private readonly replier: Replier;
  private readonly dispatcher: Dispatcher;
  private readonly doorbell: JSCallback;
  alive = true;
  private stoppedSources = new Set<Source>();
  private transport: TransportKind | "pending" = "pending";
  private transportReason = "";
  private counters = {
    forgets: 0, interrupts: 0, inflight: 0, inflightMax: 0, errors: 0, replies: 0, devRequests: 0, ringRequests: 0, wakeups: 0,
    timeouts: 0, lateResults: 0, deferredAnswers: 0, slowRequests: 0, interruptsUnmatched: 0, interruptsEarly: 0, protocolErrors: 0,
    /** Requests answered for their handler (timeout, teardown); each such handler that settles counts in lateResults. */
    abandoned: 0,
    /** Requests forwarded by workers (forwarding mode). */
    forwarded: 0,
  };
  /** INTERRUPTs that arrived before their request (possible on io_uring): unique and arrival time. */
  private readonly earlyInterrupts = new EarlyInterrupts();
  private readonly watchdog: ReturnType<typeof setInterval> | null = null;
  private poisonPattern: Buffer | null = null;
  private seenErrors = new Set<string>();
  /** Requests answered per opcode (index = opcode; all opcodes are < 64). */
  private readonly opCounts = new Float64Array(64);
  private readonly latency = new LatencyHistograms();
  private readonly stages = new LatencyHistograms();
  /** When the ring owner last came back from the kernel with records, and the answers given
   *  since its last enter (their times; preallocated, no allocation per request). */
  private batchAt = 0;
  private readonly answeredAt = new Float64Array(8192);
  private nAnswered = 0;
  private bufferPools = false;
  private dataPlane: DataPlane | null = null;
  /** --debug: the rx/tx request trace (null otherwise: no trace code on the hot path). */
  private readonly tracer: Tracer | null;
  initInfo: InitInfo | null = null;

  private readyResolve!: (info: InitInfo) => void;
  private readyReject!: (e: Error) => void;
  /** Settles when INIT was answered (and the ring registered) or failed. */
  readonly ready: Promise<InitInfo>;
  private initSeenResolve!: () => void;
  /** Settles when the kernel's INIT arrived (answering it may still take the ring and worker set-up). */
  readonly initSeen: Promise<void>;
  private endedResolve!: (reason: string) => void;
  /** Settles when every source stopped (unmount, abort, daemon shutdown). */
  readonly ended: Promise<string>;
  private endReason = "";
  /** Why this session fail-stopped (null: it did not). */
  failReason: string | null = null;
  private failedResolve!: (why: { reason: string; aborted: boolean }) => void;
  /**
   * Settles when the session fail-stops (failStop()): the reason, and whether the connection
   * was aborted (callers already get ENOTCONN and `ended` follows). Not aborted (no fusectl):
   * only ending the process ends the connection; the CLI does that.
   */
  readonly failed: Promise<{ reason: string; aborted: boolean }>;

  constructor(readonly fd: number, readonly fs: InodeFS, options: Partial<SessionOptions> = {}) {
    this.opts = { ...defaultSessionOptions, ...options };
    this.ready = new Promise((res, rej) => {
      this.readyResolve = res;
      this.readyReject = rej;
    });
    this.ready.catch(() => {});
    this.initSeen = new Promise((res) => (this.initSeenResolve = res));
    this.ended = new Promise((res) => (this.endedResolve = res));
    this.failed = new Promise((res) => (this.failedResolve = res));
    if (this.opts.role === "main") {
      liveSessions.add(this);
      installFailStopHandler();
    }
    this.replier = new Replier(this);
    this.dispatcher = new Dispatcher(fs, this.replier, this.opts, (req) => {
      if (this.opts.debug) this.opts.log(`fuse: unsupported opcode ${opName(req.opcode)} (${req.opcode}) → ENOSYS`);
    });
    this.doorbell = new JSCallback((source: number) => this.onDoorbell(source), { args: ["u32"], returns: "void", threadsafe: true });
    // Ring memory is pinned: size it to the budget unless the user chose (ringSizing).
    const sizing = ringSizing(possibleCpus());
    if (!this.opts.queueDepth) this.opts.queueDepth = sizing.depth;
    if (!this.opts.maxWrite) this.opts.maxWrite = sizing.maxWrite;
    const payloadSize = this.payloadSize();
    if (this.opts.dataPlane === "native") {
      this.dataPlane = this.opts.dataPlaneShare ? new DataPlane(0, this.opts.dataPlaneShare) : new DataPlane();
      this.dispatcher.dataPlane = this.dataPlane;
    }
    this.tracer = this.opts.debug ? new Tracer(this.opts.log) : null;
    if (this.opts.poison) this.poisonPattern = Buffer.alloc(payloadSize, POISON_BYTE);
    // One timer for all requests (no timer per request): slow-request log and request timeout.
    const tick = this.opts.requestTimeout > 0 ? Math.min(250, this.opts.requestTimeout * 250) : 1000;
    if (this.opts.requestTimeout > 0 || this.opts.slowRequestMs > 0) {
      this.watchdog = setInterval(() => this.checkPending(), tick);
      this.watchdog.unref?.();
    }
    if (this.opts.role === "worker") return; // no /dev/fuse reader: the main thread has it
    this.classic = new ClassicSource(this, {
      fd,
      slots: this.opts.classicSlots,
      payloadSize,
      doorbell: this.doorbell.ptr!,
      opSizes: opHeaderSizes(false),
    });
    if (this.dataPlane) this.classic.setDataPlane(this.dataPlane.handle);
    this.reqs.set(this.classic, this.classic.slots.map((s) => this.newRequest(s)));
    if (this.tracer) traceReplies(this.classic, this.tracer, (slot) => this.requestOf(slot));
  }

  /** A slot's Request, wired to the replier once (no per-request closures). */
  private newRequest(slot: Slot): Request {
    const req = new Request(slot);
    req.onIoComplete = (res, gen) => this.replier.ioDone(req, res, gen);
    return req;
  }

  /** Start reading /dev/fuse; call after the fd is attached to a mount. */
  start(): void {
    this.classic!.start();
  }

  /** Kept for API compatibility: workers now start in INIT, once it chose io_uring. */
  async prepareWorkers(): Promise<void> {}

  /**
   * The threads that serve the queues (lib/threads/plan.ts decides): the workers start and each
   * imports what it runs (rejects with the first one's error). Null: this thread serves them all.
   */
  private async startWorkers(): Promise<WorkerPool | null> {
    const o = this.opts;
    if (!o.workerEntry) return null;
    const plan = planThreads({ fs: this.fs, requested: o.workers, possibleCpus: possibleCpus(), source: o.workerModule, log: o.log });
    if (plan.mode === "single") return null;
    const pool = new WorkerPool(o.workerEntry, plan.workers, o.log, plan.mode === "forwarding", (why) => this.failStop(why), plan.queues, plan.cpus);
    this.pool = pool;
    this.sharedCopies = plan.sharedState;
    const { log: _log, dataPlaneShare: _d, workerModule: _m, reportFailStop: _r, ...plain } = o;
    try {
      await pool.load(this.fd, plan.module, plain, this.dataPlane?.shared() ?? null);
    } catch (e) {
      await this.stopWorkers();
      throw e;
    }
    return pool;
  }

  /** No worker serves (classic transport, rings not set up): none keeps running. */
  private async stopWorkers(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    this.sharedCopies = false;
    await pool?.close();
  }

  // ---- doorbell and batching ------------------------------------------------------------------
  private onDoorbell(source: number): void {
    this.counters.wakeups++;
    if (source === 1) this.uring?.drain();
    else this.classic?.drain();
    this.flushAll();
  }

  private flushAll(): void {
    this.uring?.flush();
    for (const f of this.forwarded) f.flush();
  }

  /** Sources whose entries are io_uring entries (this thread's ring, or forwarding workers'). */
  private isRing(source: Source): boolean {
    return source === this.uring || (this.forwarded.length > 0 && source instanceof ForwardedSource);
  }

  /** Forwarding mode: the filesystem is on this thread, the rings on the workers. */
  get forwarding(): boolean {
    return this.pool?.forwarding === true;
  }

  /** The Request of `slot` (the ring's own without a Map lookup: the per-request path). */
  private requestOf(slot: Slot): Request {
    return (slot.source === this.uring ? this.ringReqs : this.reqs.get(slot.source)!)[slot.index]!;
  }

  onRequest(slot: Slot): void {
    const req = this.requestOf(slot);
    const h = slot.header;
    req.opcode = h.getUint32(4, true);
    req.uniqueLo = h.getUint32(8, true);
    req.uniqueHi = h.getUint32(12, true);
    req.nodeid = getU64(h, 16);
    req.uid = h.getUint32(24, true);
    req.gid = h.getUint32(28, true);
    req.pid = h.getUint32(32, true);
    req.payloadSize = h.getUint32(HDR_PAYLOAD_SZ, true);
    if (req.state !== FREE) {
      // The transport handed out a slot we still hold: its previous request was never answered.
      this.protocolError(req, `new request #${h.getUint32(8, true)} on a slot still in state ${stateNames[req.state]}`);
      req.reset();
    }
    if (this.poisonPattern) this.checkPoison(req);
    req.begin(performance.now());
    if (this.batchAt > 0 && slot.source === this.uring) this.stages.record(STAGE_BATCH, (req.startedAt - this.batchAt) * 1000);
    if (this.earlyInterrupts.size > 0 && this.earlyInterrupts.take(req.uniqueNumber, req.startedAt)) {
      this.counters.interruptsEarly++;
      req.interrupt();
    }
    if (slot.source === this.uring) {
      this.counters.ringRequests++;
      this.uring.noteRequest();
    } else if (slot.source.kind === "uring") {
      this.counters.ringRequests++;
      this.counters.forwarded++;
    } else this.counters.devRequests++;
    // Native handles back to the filesystem's fh before anything decodes the header.
    this.dataPlane?.unmapRequest(req.opcode, h);
    const c = this.counters;
    if (++c.inflight > c.inflightMax) c.inflightMax = c.inflight;
    if (this.tracer) this.tracer.rx(req);
    switch (req.opcode) {
      case Op.INIT:
        return this.handleInit(req);
      case Op.FORGET:
        c.forgets++;
        this.forget(req.nodeid, getU64(h, HDR_OP_IN));
        return this.replier.none(req);
      case Op.BATCH_FORGET: {
        const count = h.getUint32(HDR_OP_IN, true);
        const dv = slot.payloadView;
        for (let i = 0; i < count && (i + 1) * 16 <= req.payloadSize; i++) this.forget(getU64(dv, i * 16), getU64(dv, i * 16 + 8));
        c.forgets += count;
        return this.replier.none(req);
      }
      case Op.NOTIFY_REPLY:
        // The kernel's answer to a RETRIEVE: takes no reply (the ring gets its entry back).
        if (!this.notifications.onReply(req.uniqueNumber, slot.payload, req.payloadSize)) {
          this.opts.log(`fuse-uring: NOTIFY_REPLY #${req.uniqueNumber} matches no retrieve of this thread; dropped`);
        }
        return this.replier.none(req);
      case Op.DESTROY:
        return this.handleDestroy(req);
      case Op.INTERRUPT: {
        c.interrupts++;
        if (this.interrupt(getU64(h, HDR_OP_IN), req.startedAt)) return this.replier.none(req);
        c.interruptsUnmatched++;
        // Target unknown. Over /dev/fuse (classic) it was answered already or is not read yet:
        // EAGAIN makes the kernel queue the interrupt again (libfuse does the same). Requests
        // that travel on the ring are not in /dev/fuse's table, so EAGAIN could not be
        // delivered (ENOENT); the interrupt is remembered instead and applied on arrival.
        if (this.transport === "classic") return this.replier.error(req, Errno.EAGAIN);
        return this.replier.none(req);
      }
    }
    this.dispatcher.dispatch(req);
  }

  /** FORGET from the main thread's reader (worker sessions get them forwarded). */
  private forget(nodeid: number, nlookup: number): void {
    // Copies that share one state get it once, here (this thread's instance shares it too).
    if (!this.forwarding && !this.sharedCopies) this.pool?.forget([nodeid, nlookup]);
    this.forgetNode(nodeid, nlookup);
  }

  forgetNode(nodeid: number, nlookup: number): void {
    try {
      this.fs.forget?.(nodeid, nlookup);
    } catch (e) {
      this.unexpectedError("FORGET", e);
    }
  }

  /**
   * Interrupt the request with unique `target` (here and in every worker); false (and
   * remembered, in case it arrives later on a ring) if this thread does not know it.
   */
  private interrupt(target: number, now: number): boolean {
    if (!this.forwarding) this.pool?.interrupt(target);
    return this.interruptUnique(target, now);
  }

  interruptUnique(target: number, now = performance.now()): boolean {
    for (const list of this.reqs.values()) {
      for (const r of list) {
        if (r.state !== FREE && r.uniqueNumber === target) {
          r.interrupt();
          return true;
        }
      }
    }
    this.earlyInterrupts.add(target, now);
    return false;
  }

  /** A ring answered RELEASE of data plane slot `slot` (Sink.onNativeRelease): the filesystem's
   *  releaseClosed, unless teardown already did it. */
  onNativeRelease(slot: number): void {
    const h = this.dataPlane?.collectRelease(slot);
    if (!h) return;
    try {
      this.fs.releaseClosed!(h.ino, h.fh);
    } catch (e) {
      this.unexpectedError("RELEASE (native)", e);
    }
  }

  onIoDone(slot: Slot, res: number): void {
    if (slot.source === this.uring) this.uring.ioFinished();
    this.requestOf(slot).ioDone(res);
  }

  // ---- pending requests: slow log and request timeout -----------------------------------------
  private checkPending(): void {
    if (!this.alive) return;
    const now = performance.now();
    const slowMs = this.opts.slowRequestMs;
    const timeoutMs = this.opts.requestTimeout * 1000;
    for (const list of this.reqs.values()) {
      for (const r of list) {
        if (r.state === FREE) continue;
        const age = now - r.startedAt;
        if (slowMs > 0 && age > slowMs && !r.slowLogged) {
          r.slowLogged = true;
          this.counters.slowRequests++;
          this.opts.log(
            `fuse-uring: request #${r.uniqueNumber} ${opName(r.opcode)} node=${r.nodeid} pid=${r.pid} pending for ${(age / 1000).toFixed(1)} s ` +
              `(handler ${handlerNameOf(r.opcode)}()${r.state === DEFERRED ? ", answered, waiting for its backing I/O" : r.ioPending ? ", backing I/O pending" : ""}); ` +
              `its caller waits in D state until it is answered` + (timeoutMs > 0 ? "" : " (--request-timeout S answers such requests with ETIMEDOUT)"),
          );
        }
        if (timeoutMs > 0 && age > timeoutMs && r.state === HANDLING && !r.timedOut) {
          this.counters.timeouts++;
          this.counters.abandoned++;
          r.abortForTimeout();
          if (this.opts.debug) this.opts.log(`fuse: #${r.uniqueNumber} ${opName(r.opcode)} timed out after ${(age / 1000).toFixed(1)} s → ETIMEDOUT`);
          this.replier.error(r, Errno.ETIMEDOUT);
        }
      }
    }
    this.earlyInterrupts.expire(now);
  }

  onStopped(source: Source, errno: number): void {
    if (source === this.classic && (errno === Errno.ENODEV || errno === Errno.ECONNABORTED)) this.abandonRingRequests(errno);
    if (source === this.uring) this.uring.markStopped();
    this.stoppedSources.add(source);
    const normalRingEnd = errno === 0 || errno === Errno.ENOTCONN || errno === Errno.ECONNABORTED || errno === Errno.ECANCELED;
    if (this.isRing(source) && this.classic && !this.stoppedSources.has(this.classic)) {
      // Entries complete with ENOTCONN on unmount and on abort alike: the /dev/fuse reader
      // says which (ENODEV / ECONNABORTED) and ends the session.
      if (normalRingEnd) return;
      this.opts.log(`fuse-uring: io_uring engine stopped (${errnoName(errno)}); ending the session so no caller waits on a queue without entries`);
    }
    if (source === this.uring && !this.classic && normalRingEnd && !this.endReason) {
      this.endReason = errno === Errno.ECONNABORTED ? "connection aborted" : "unmounted"; // worker thread
    }
    if (!this.endReason) this.endReason = errno === Errno.ENODEV ? "unmounted" : errno === Errno.ECONNABORTED ? "connection aborted" : `transport stopped: ${errnoName(errno)}`;
    if (this.transport === "pending") this.readyReject(new Error(`connection ended before INIT (${this.endReason})`));
    // The classic reader ending means the connection is gone; the rings follow (their entries
    // complete with ENOTCONN). Stop everything so teardown never waits on a dead kernel side.
    this.classic?.stop();
    this.uring?.stop();
    if (!this.allSourcesStopped()) return;
    if (this.pool && this.pool.count > 0) void this.pool.ended.then(() => this.endedResolve(this.endReason));
    else this.endedResolve(this.endReason);
  }

  /**
   * The connection is gone (unmount or abort) but handlers still hold ring entries: the ring
   * reports STOPPED only when every entry is back, so a handler that never settles would keep
   * the session (and the daemon) alive forever. Answer them (the kernel refuses the commit, which
   * is what returns the entry); their handlers' late results are dropped, and their buffers are
   * not freed while any of them may still run (close()).
   */
  private abandonRingRequests(errno: number): void {
    const lists = [this.uring, ...this.forwarded].flatMap((src) => (src ? [this.reqs.get(src) ?? []] : []));
    for (const r of lists.flat()) {
      if (r.state !== HANDLING) continue;
      this.counters.abandoned++;
      r.abortForTimeout();
      try {
        this.replier.error(r, errno === Errno.ECONNABORTED ? Errno.ECONNABORTED : Errno.ENOTCONN);
      } catch (e) {
        this.opts.log(`fuse-uring: could not give ring entry ${r.slot.index} back after the connection ended: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
  }

  // ---- INIT -----------------------------------------------------------------------------------
  private handleInit(req: Request): void {
    this.initSeenResolve();
    // Whatever happens, INIT is answered exactly once (an unanswered INIT hangs mount(2)'s caller).
    this.negotiate(req).catch((e) => {
      if (req.busy) this.replier.error(req, Errno.EPROTO);
      this.readyReject(e instanceof Error ? e : new Error(String(e)));
    });
  }

  /** The ring plan for this session's engine(s): flags, sizes, wait policy. */
  private ringPlan(): Omit<RingPlan, "qids"> {
    const o = this.opts;
    const payloadSize = this.payloadSize();
    return {
      totalQueues: possibleCpus(),
      depth: o.queueDepth,
      pinnedDepth: this.pinnedPerQueue(),
      payloadSize,
      // + not |: bits 30/31 would make the number negative
      setupFlags: o.ringSetupFlags + (o.fixedBuffers ? 0 : FU_RING_NO_FIXED_BUFFERS) + (o.fault.split(",").includes("bad-commit") ? FU_RING_FAULT_BAD_COMMIT : 0),
      waitMicros: o.ringWaitMicros,
      nativeSyncMax: o.nativeSyncMax,
      pin: o.pinWorkers,
      // Pools where the kernel offers them, unless turned off; not for forwarding workers (the
      // main thread builds its views from fixed entry addresses).
      pool: this.bufferPools && o.poolSize !== 0 && !this.pool?.forwarding
        ? { bytesPerQueue: poolBytes(o.poolSize, payloadSize), zeroCopy: o.zeroCopy && o.dataPlane === "native" && o.poolFault !== "refuse", refuse: o.poolFault === "refuse" }
        : null,
    };
  }

  /** Create this thread's ring engine (throws UringError); this thread becomes its submitter. */
  createRing(plan: RingPlan): void {
    const ring = new UringSource(this, {
      fd: this.fd, qids: plan.qids, totalQueues: plan.totalQueues, depth: plan.depth, pinnedDepth: plan.pinnedDepth, payloadSize: plan.payloadSize,
      setupFlags: plan.setupFlags, doorbell: this.doorbell.ptr!, dataPlane: this.dataPlane?.handle ?? null,
      waitMicros: plan.waitMicros, nativeSyncMax: plan.nativeSyncMax, pinToQueues: this.opts.role === "worker" && plan.pin, pinCpus: plan.cpus, pool: plan.pool,
    });
    this.uring = ring;
    // The ring submits the I/O with its next enter (scheduled by io()).
    const ringIo = (slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number) => ring.io(slot, kind, fd, offset, len);
    this.ringReqs = ring.slots.map((s) => Object.assign(this.newRequest(s), { ringIo }));
    this.reqs.set(ring, this.ringReqs);
    if (this.tracer) traceReplies(ring, this.tracer, (slot) => this.requestOf(slot));
  }

  /** Forwarding: requests of a worker's ring are handled here, in place in its entries. */
  private addForwarded(src: ForwardedSource): void {
    this.forwarded.push(src);
    this.reqs.set(src, src.slots.map((s) => this.newRequest(s)));
    if (this.tracer) traceReplies(src, this.tracer, (slot) => this.requestOf(slot));
  }

  /** InitInfo.nodeAttrs: the data plane's node table, for a filesystem that says nativeGetattr. */
  private nodeAttrs(): NodeAttrs | undefined {
    if (!this.dataPlane || !this.opts.nativeGetattr || this.fs.nativeGetattr !== true) return undefined;
    const attrs = this.dataPlane.enableNodes(this.opts.attrTtl) ?? undefined;
    if (attrs && this.fs.nativeLookupMiss === true) this.dataPlane.enableMissing(this.opts.negativeTtl);
    return attrs;
  }

  /** Worker thread: INIT was answered by the main thread; register the entries and serve. */
  startWorker(init: WorkerInit): void {
    this.transport = "uring";
    this.transportReason = "kernel offered FUSE_OVER_IO_URING";
    const info: InitInfo = {
      kernelMinor: init.kernelMinor, offered: BigInt(init.offered), granted: BigInt(init.granted), grantedNames: init.grantedNames,
      maxWrite: init.maxWrite, maxReadahead: init.maxReadahead, transport: "uring",
      backingOpen: (fd) => this.backingOpen(fd), backingClose: (id) => this.backingClose(id),
      nodeAttrs: this.nodeAttrs(),
    };
    this.initInfo = info;
    Promise.resolve(this.fs.init?.(info)).then(() => this.readyResolve(info), (e) => this.readyReject(e instanceof Error ? e : new Error(String(e))));
    this.uring!.start();
    this.afterRingStart();
  }

  /** The ring's pools and zero-copy are known once it started: OPEN replies of natively served
   *  files then ask for zero-copy (FOPEN_IO_URING_ZERO_COPY); a refusal is said once. */
  private afterRingStart(): void {
    const u = this.uring!.stats();
    this.dispatcher.zeroCopy = (u.zeroCopyQueues ?? 0) > 0;
    const state = this.uring!.poolState();
    if (state === "fallback") this.opts.log(`fuse-uring: the kernel refused the io_uring buffer pool of ${u.poolRefused} queue(s) (${errnoName(u.poolErrno ?? 0)}): per-entry payload buffers there`);
    else if (this.opts.debug && state === "active") this.opts.log(`fuse: io_uring buffer pools active on ${u.poolQueues} queue(s); zero-copy ${(u.zeroCopyQueues ?? 0) > 0 ? "active" : u.zeroCopyErrno ? `refused (${errnoName(u.zeroCopyErrno)})` : "off"}`);
  }

  private async negotiate(req: Request): Promise<void> {
    const h = req.slot.header;
    const init = decodeInitIn(h, HDR_OP_IN);
    if (init.major !== FUSE_KERNEL_VERSION || init.minor < 31) {
      this.replier.error(req, Errno.EPROTO);
      this.readyReject(new Error(`unsupported FUSE protocol ${init.major}.${init.minor} (need 7.31+)`));
      return;
    }
    const o = this.opts;
    let flags = (requestedFlags(o) | fsFlags(this.fs)) & init.flags;
    this.bufferPools = (init.flags & initBit("HAS_IO_URING_BUFPOOL")) !== 0n;

    // Decide the transport before answering: advertising io_uring and then failing to
    // register entries would block every request (docs/KERNEL.md §3, §4).
    let want = o.transport !== "classic";
    let reason = o.transport === "classic" ? "requested with --transport classic" : explainNoUring(init.flags);
    if (want && reason) want = false;
    let ringUp = false;
    if (want) {
      const plan = this.ringPlan();
      let pool: WorkerPool | null;
      try {
        pool = await this.startWorkers();
      } catch (e) {
        this.replier.error(req, Errno.EPROTO);
        this.readyReject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      if (pool) {
        const made = await pool.createRings(plan);
        if ("message" in made) {
          reason = made.errno ? explainRingError(made.errno) : made.message;
          await this.stopWorkers();
        } else {
          ringUp = true;
          if (pool.forwarding) made.entries.forEach((e, w) => {
            const src = new ForwardedSource(this, (pairs) => pool.commit(w, pairs), e);
            pool.attach(w, src);
            this.addForwarded(src);
          });
        }
      } else {
        try {
          this.createRing({ ...plan, qids: Array.from({ length: plan.totalQueues }, (_, i) => i) });
          ringUp = true;
        } catch (e) {
          reason = e instanceof UringError ? explainRingError(e.errno) : String(e);
          this.uring = null;
        }
      }
      if (ringUp) {
        flags |= initBit("OVER_IO_URING");
        reason = !this.pool
          ? "kernel offered FUSE_OVER_IO_URING"
          : this.pool.forwarding
            ? `kernel offered FUSE_OVER_IO_URING; ${this.pool.count} worker threads, forwarding (native data plane on the workers, handlers on the main thread)`
            : `kernel offered FUSE_OVER_IO_URING; ${this.pool.count} worker threads, copies (an instance of the filesystem per worker: views of its shared state, or a stateless script)`;
      }
    }
    if (o.transport === "uring" && !ringUp) {
      this.replier.error(req, Errno.EPROTO);
      this.readyReject(new Error(`io_uring transport unavailable: ${reason}`));
      return;
    }
    this.transport = ringUp ? "uring" : "classic";
    this.transportReason = reason;
    this.classic!.setOpSizes(opHeaderSizes((flags & initBit("SETXATTR_EXT")) !== 0n));

    const maxPages = Math.min(256, Math.ceil(o.maxWrite / 4096));
    const bg = ringUp ? maxBackground(possibleCpus(), o.queueDepth) : 64;
    encodeInitOut(req.slot.payloadView, 0, {
      major: FUSE_KERNEL_VERSION,
      minor: FUSE_KERNEL_MINOR_VERSION,
      maxReadahead: init.maxReadahead,
      flags,
      // (io_uring: as many asynchronous requests as the queues have entries; classic: 64.)
      maxBackground: bg,
      congestionThreshold: Math.floor((bg * 3) / 4),
      maxWrite: o.maxWrite,
      timeGran: 1,
      maxPages,
      maxStackDepth: flags & initBit("PASSTHROUGH") ? 1 : 0,
      // The kernel's own FUSE_REQUEST_TIMEOUT is not negotiated: when it expires the kernel
      // aborts the whole connection (every caller, the mount dead), with a 15 s minimum.
      // --request-timeout answers just the late request instead (docs/KERNEL.md).
      requestTimeout: 0,
    });
    this.replier.ok(req, INIT_OUT_SIZE);

    const info: InitInfo = {
      kernelMinor: init.minor,
      offered: init.flags,
      granted: flags,
      grantedNames: initFlagNames(flags),
      maxWrite: o.maxWrite,
      maxReadahead: init.maxReadahead,
      transport: this.transport,
      backingOpen: (fd) => this.backingOpen(fd),
      backingClose: (id) => this.backingClose(id),
      notify: this.notifications,
      nodeAttrs: this.nodeAttrs(),
    };
    if (ringUp) {
      try {
        if (this.pool) {
          await this.pool.start({
            kernelMinor: init.minor, offered: String(init.flags), granted: String(flags), grantedNames: info.grantedNames,
            maxWrite: o.maxWrite, maxReadahead: init.maxReadahead,
          });
        } else {
          this.uring!.start();
          this.afterRingStart();
        }
      } catch (e) {
        // Cannot happen short of a shim bug; the kernel would block all I/O, so abort loudly.
        this.readyReject(new Error(`io_uring register failed after INIT: ${String(e)}`));
        return;
      }
    }
    this.initInfo = info;
    if (o.debug) {
      o.log(`fuse: INIT kernel ${init.major}.${init.minor} offered [${initFlagNames(init.flags).join(" ")}]`);
      o.log(`fuse: INIT granted [${info.grantedNames.join(" ")}] max_write=${o.maxWrite} max_pages=${maxPages}`);
      const plan = this.ringPlan();
      o.log(`fuse: transport=${this.transport} (${reason})` + (ringUp ? ` queues=${plan.totalQueues} depth=${o.queueDepth} pinned entries=${plan.pinnedDepth} per queue, max_background=${bg}` : ""));
      o.log(`fuse: buffers: ${this.stats().bufferPoolsReason}`);
    }
    await Promise.resolve(this.fs.init?.(info)).then(
      () => this.readyResolve(info),
      (e) => this.readyReject(e instanceof Error ? e : new Error(String(e))),
    );
  }

  /**
   * Hot reload (lib/reload/): requests that arrive from now on go to `fs`. Requests in flight
   * finish on the filesystem they started on (the dispatcher read `fs` once per request), so
   * each is still answered exactly once. Returns how many were in flight at the swap.
   * With `--workers N`, prepareWorkerReload() first, and commit after this swap.
   */
  replaceFilesystem(fs: InodeFS): number {
    (this as { fs: InodeFS }).fs = fs;
    (this.dispatcher as { fs: InodeFS }).fs = fs;
    return this.counters.inflight;
  }

  /**
   * Hot reload with `--workers N`: every worker loads the next version of its module; resolves to
   * a commit that swaps them all (null without workers). Rejects if a worker cannot load it.
   */
  prepareWorkerReload(): Promise<(() => Promise<number>) | null> {
    // Forwarding: the filesystem lives on this thread only; replaceFilesystem is the whole swap.
    return this.pool && !this.forwarding ? this.pool.prepareReload() : Promise.resolve(null);
  }

  backingOpen(fd: number): number {
    const id = native().fu_backing_open(this.fd, fd);
    if (id < 0) throw new FuseError(-id, `FUSE_DEV_IOC_BACKING_OPEN failed: ${errnoName(-id)}${-id === Errno.EPERM ? " (kernel passthrough needs CAP_SYS_ADMIN and FUSE_PASSTHROUGH)" : ""}`);
    return id;
  }

  backingClose(id: number): void {
    native().fu_backing_close(this.fd, id);
  }

  get transportInfo(): { transport: TransportKind | "pending"; reason: string } {
    return { transport: this.transport, reason: this.transportReason };
  }

  // ---- ReplyObserver --------------------------------------------------------------------------
  done(req: Request, error: number): void {
    this.opCounts[req.opcode & 63]!++;
    const now = performance.now();
    const us = (now - req.startedAt) * 1000;
    this.latency.record(req.opcode, us);
    if (req.slot.source === this.uring) {
      this.stages.record(STAGE_HANDLER, us);
      if (this.nAnswered < this.answeredAt.length) this.answeredAt[this.nAnswered++] = now;
    }
    const c = this.counters;
    c.inflight--;
    c.replies++;
    if (error) c.errors++;
  }

  // ---- Sink: ring pump timing (stage histograms) ---------------------------------------------
  entering(now: number): void {
    const n = this.nAnswered;
    for (let i = 0; i < n; i++) this.stages.record(STAGE_COMMIT, (now - this.answeredAt[i]!) * 1000);
    this.nAnswered = 0;
  }

  entered(now: number): void {
    this.batchAt = now;
  }

  unexpected(req: Request, err: unknown): void {
    this.unexpectedError(opName(req.opcode), err);
  }

  protocolError(req: Request, what: string): void {
    this.counters.protocolErrors++;
    this.opts.log(`fuse-uring: BUG: ${what} (request #${req.uniqueNumber} ${opName(req.opcode)} node=${req.nodeid}, ${req.slot.source.kind} slot ${req.slot.index})`);
  }

  late(req: Request): void {
    this.counters.lateResults++;
    if (this.opts.debug) this.opts.log(`fuse: #${req.uniqueNumber} ${opName(req.opcode)}: handler settled after the request was answered; result dropped`);
  }

  deferred(req: Request): void {
    this.counters.deferredAnswers++;
    if (this.opts.debug) this.opts.log(`fuse: #${req.uniqueNumber} ${opName(req.opcode)}: answered while its backing I/O runs; sending when it completes`);
  }

  /** FUSE_URING_POISON: pattern in every payload byte the answer does not use. */
  poison(req: Request, replyLen: number): void {
    if (!this.poisonPattern) return;
    req.slot.payload.fill(POISON_BYTE, replyLen);
    req.lastReplyLen = replyLen;
  }

  /**
   * A request arrived in a poisoned slot: everything beyond what the kernel wrote (and what the
   * last answer used) must still be the pattern, else something wrote into the slot after its
   * answer (a late backing I/O, a handler writing into `out` after a timeout).
   */
  private checkPoison(req: Request): void {
    if (req.lastReplyLen < 0) return;
    const start = Math.max(req.payloadSize + 128, req.lastReplyLen);
    const end = req.slot.payload.length;
    if (start < end && req.text.compare(this.poisonPattern!, start, end, start, end) !== 0) {
      this.protocolError(req, `payload of this slot was written after its previous answer (FUSE_URING_POISON found the pattern overwritten beyond byte ${start})`);
    }
    req.lastReplyLen = -1;
  }

  private unexpectedError(what: string, err: unknown): void {
    const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
    // One log per distinct error: the message and the frame that threw (the frames below it
    // differ with the path that dispatched the request).
    const key = text.split("\n", 2).join("\n");
    if (this.seenErrors.has(key)) return;
    if (this.seenErrors.size < 1000) this.seenErrors.add(key);
    this.opts.log(`fuse-uring: handler for ${what} threw (answered EIO): ${text}`);
  }

  /** FUSE_NOTIFY_* for the filesystem (InitInfo.notify) and Mount.notify. */
  readonly notifications = new SessionNotifications((code, body) => this.notify(code, body));

  // ---- DESTROY and teardown: release what the kernel never will ------------------------------
  private destroyed: Promise<void> | null = null;

  /** fuseblk's FUSE_DESTROY (plain fuse mounts get none: shutdown() does the same). */
  private handleDestroy(req: Request): void {
    this.releaseAndDestroy().then(
      () => this.replier.ok(req, 0),
      () => this.replier.ok(req, 0),
    );
  }

  /**
   * Once per session: RELEASE every handle the native data plane still maps (the kernel sends
   * no RELEASE after unmount or DESTROY), so the filesystem closes the backing descriptors it
   * owns in its release handler as usual; then the filesystem's destroy().
   */
  releaseAndDestroy(): Promise<void> {
    this.destroyed ??= (async () => {
      const fs = this.fs;
      // The table is shared by every thread; its owner (the main thread) empties it.
      const orphans = this.dataPlane && this.opts.role === "main" && !this.opts.dataPlaneShare ? this.dataPlane.takeAll() : [];
      for (const m of orphans) {
        try {
          if (m.closed) fs.releaseClosed?.(m.ino, m.fh);
          else await fs.release?.(teardownCtx, m.ino, m.fh, 0);
        } catch (e) {
          this.unexpectedError("RELEASE at unmount", e);
        }
      }
      if (orphans.length && this.opts.debug) this.opts.log(`fuse: released ${orphans.length} backed handle(s) still open at unmount`);
      try {
        await fs.destroy?.();
      } catch (e) {
        this.unexpectedError("DESTROY", e);
      }
    })();
    return this.destroyed;
  }

  // ---- notifications (always via /dev/fuse, also when the ring is active) ----------------------
  /**
   * Write a notification. The write happens on Bun's thread pool, never on the JS thread: an
   * INVAL_ENTRY waits for the directory's lock, which a LOOKUP this thread has not answered yet
   * may hold — written synchronously that would deadlock the daemon. Resolves to 0 or -errno.
   */
  notify(code: number, body: Uint8Array): Promise<number> {
    if (!this.alive) return Promise.resolve(-Errno.ENOTCONN);
    const msg = Buffer.allocUnsafe(16 + body.length);
    msg.writeUInt32LE(msg.length, 0);
    msg.writeInt32LE(code, 4);
    msg.writeBigUInt64LE(0n, 8);
    msg.set(body, 16);
    return new Promise((resolve) => {
      fsWrite(this.fd, msg, 0, msg.length, null, (err) => resolve(err ? -(errnoOf(err) ?? Errno.EIO) : 0));
    });
  }

  // ---- fail-stop ------------------------------------------------------------------------------
  /**
   * The mount can no longer be served correctly (a worker died, failStop() was called, a
   * handler threw a FailStopError): abort the connection so every caller gets ENOTCONN or
   * ECONNABORTED at once instead of waiting on a queue nobody serves, and end the session with
   * "fail-stop: <reason>". Worker sessions hand it to the main thread's session.
   */
  failStop(reason: string): void {
    if (this.opts.role === "worker") return this.opts.reportFailStop?.(reason);
    // Once the connection ended (unmount, abort) there is nothing left to stop.
    if (this.failReason !== null || !this.alive || this.endReason) return;
    this.failReason = reason;
    this.endReason = `fail-stop: ${reason}`;
    if (this.transport === "pending") this.readyReject(new Error(this.endReason));
    const aborted = !this.opts.fault.split(",").includes("no-fusectl") && abortConnection(this.opts.connection);
    if (this.opts.debug) this.opts.log(`fuse-uring: fail-stop (${reason}); ${aborted ? "connection aborted through fusectl" : "fusectl not available: the process must exit to end the connection"}`);
    this.failedResolve({ reason, aborted });
  }

  // ---- stats and teardown ---------------------------------------------------------------------
  stats(): SessionStats {
    const own = this.ownStats();
    const all = this.pool ? mergeStats(own, this.pool.stats(), this.forwarding) : own;
    // A buffer pool on every queue: no entry has a payload of its own, the pools are the pinned
    // memory (pinnedBytes). Only known once the rings say so, hence after the merge.
    if (all.bufferPools === "active") all.ringPinnedDepth = 0;
    return all;
  }

  private ownStats(): SessionStats {
    const c = this.classic?.stats() ?? { requests: 0, wakeups: 0, cqes: 0, submits: 0, errors: 0, fixedIo: 0 };
    const u = this.uring?.stats();
    return {
      transport: this.transport,
      transportReason: this.transportReason,
      ringRequests: this.counters.ringRequests,
      devRequests: this.counters.devRequests,
      forgets: this.counters.forgets,
      interrupts: this.counters.interrupts,
      wakeups: this.counters.wakeups,
      cqes: u?.cqes ?? 0,
      submits: u?.submits ?? 0,
      inflight: this.counters.inflight,
      inflightMax: this.counters.inflightMax,
      pinnedBytes: this.uring?.pinnedBytes ?? 0,
      fixedIo: u?.fixedIo ?? 0,
      nativeSync: u?.nativeSync ?? 0,
      nativeAsync: u?.nativeAsync ?? 0,
      nativeDirect: (u?.nativeDirect ?? 0) + (c.nativeDirect ?? 0),
      nativeFlushes: (u?.nativeFlushes ?? 0) + (c.nativeFlushes ?? 0),
      nativeGetattrs: (u?.nativeGetattrs ?? 0) + (c.nativeGetattrs ?? 0),
      nativeReleases: u?.nativeReleases ?? 0,
      nativeLookups: u?.nativeLookups ?? 0,
      directFallbacks: (u?.directFallbacks ?? 0) + (c.directFallbacks ?? 0),
      waitTimers: u?.waitTimers ?? 0,
      enters: u?.enters ?? 0,
      forwarded: this.counters.forwarded,
      workerMode: !this.pool || this.transport === "classic" ? "single" : this.pool.forwarding ? "forwarding" : "copies",
      handoffsPerRequest: (() => {
        const reqs = this.counters.ringRequests + this.counters.devRequests + (u?.nativeRequests ?? 0) + (c.nativeRequests ?? 0);
        return reqs ? this.counters.wakeups / reqs : 0;
      })(),
      nativeRequests: (u?.nativeRequests ?? 0) + (c.nativeRequests ?? 0),
      nativeReadBytes: (u?.nativeReadBytes ?? 0) + (c.nativeReadBytes ?? 0),
      nativeWriteBytes: (u?.nativeWriteBytes ?? 0) + (c.nativeWriteBytes ?? 0),
      nativeErrors: (u?.nativeErrors ?? 0) + (c.nativeErrors ?? 0),
      nativeInflightMax: u?.nativeInflightMax ?? 0,
      nativeHandles: this.dataPlane?.open ?? 0,
      backedOps: this.dispatcher.backed.ops,
      backedCopyFallbacks: this.dispatcher.backed.copyFallbacks,
      notifications: this.notifications.sent,
      notificationErrors: this.notifications.failed,
      retrieved: this.notifications.retrieved,
      dataPlane: this.dataPlane ? "native" : "js",
      ringRecovered: u?.recovered ?? 0,
      errors: this.counters.errors + c.errors + (u?.errors ?? 0),
      replies: this.counters.replies,
      ...this.bufferStats(u),
      fixedBuffers: u?.fixedBuffers ?? false,
      fixedFile: u?.fixedFile ?? false,
      ops: this.opsByName(),
      timeouts: this.counters.timeouts,
      lateResults: this.counters.lateResults,
      deferredAnswers: this.counters.deferredAnswers,
      slowRequests: this.counters.slowRequests,
      interruptsUnmatched: this.counters.interruptsUnmatched,
      interruptsEarly: this.counters.interruptsEarly,
      protocolErrors: this.counters.protocolErrors,
      threads: [{
        thread: this.opts.role === "worker" ? "worker" : "main",
        requests: this.counters.ringRequests + this.counters.devRequests + (u?.nativeRequests ?? 0) + (c.nativeRequests ?? 0),
        wakeups: this.counters.wakeups, enters: u?.enters ?? 0, cqes: u?.cqes ?? 0,
        ...(this.uring?.pinnedCpus ? { cpus: this.uring.pinnedCpus } : {}),
      }],
      latencyUs: this.latency.summarize(opName),
      stageLatencyUs: this.stages.summarize(stageName),
      slots: (this.classic?.slots.length ?? 0) + (this.uring?.slots.length ?? 0) + this.forwarded.reduce((n, f) => n + f.slots.length, 0),
      // the mount's rings, wherever they run (copies: the workers own them, not this thread)
      ringQueues: this.transport === "uring" ? possibleCpus() : 0,
      ringDepth: this.transport === "uring" ? this.opts.queueDepth : 0,
      ringPinnedDepth: this.transport === "uring" ? this.pinnedPerQueue() : 0,
      queueInflight: this.queueInflight(),
    };
  }

  /** The buffer facts of this thread's ring (stats; merged over workers by mergeStats). */
  private bufferStats(u: SourceStats | undefined): Pick<SessionStats, "bufferPools" | "bufferPoolsReason" | "poolBytes" | "zeroCopy" | "zeroCopyRequests" | "zeroCopyBytes"> {
    const ring = this.uring;
    const state = ring?.poolState() ?? "off";
    const bytes = ring && state !== "off" ? this.ringPlanPoolBytes() : 0;
    const zc = (u?.zeroCopyQueues ?? 0) > 0 ? "active" : u?.zeroCopyErrno ? "refused" : "off";
    let pools: BufferPoolState, reason: string;
    if (state === "active") {
      pools = "active";
      reason = `io_uring buffer pools (FUSE 7.46): ${bytes} bytes per queue, zero-copy ${zc === "refused" ? `refused (${errnoName(u!.zeroCopyErrno!)}: needs CAP_SYS_ADMIN)` : zc}`;
    } else if (state === "fallback") {
      pools = "fallback";
      reason = `the kernel refused the buffer pool of ${u?.poolRefused} queue(s) (${errnoName(u?.poolErrno ?? 0)}): per-entry payload buffers there`;
    } else if (this.bufferPools || this.opts.role === "worker") {
      pools = this.bufferPools ? "offered" : "none";
      reason = !this.bufferPools ? "per-entry payload buffers" : this.opts.poolSize === 0 ? "kernel offers buffer pools; per-entry payload buffers (--pool-size 0)" : this.transport !== "uring" ? "kernel offers buffer pools; classic transport" : this.pool?.forwarding ? "kernel offers buffer pools; per-entry payload buffers (forwarding workers)" : "kernel offers buffer pools (used by the worker threads' rings)";
    } else {
      pools = "none";
      reason = "no io_uring buffer pools in this kernel (FUSE_HAS_IO_URING_BUFPOOL not offered): per-entry payload buffers";
    }
    return { bufferPools: pools, bufferPoolsReason: reason, poolBytes: bytes, zeroCopy: zc, zeroCopyRequests: u?.zeroCopyRequests ?? 0, zeroCopyBytes: u?.zeroCopyBytes ?? 0 };
  }

  private ringPlanPoolBytes(): number {
    return poolBytes(this.opts.poolSize, this.payloadSize());
  }

  /** Entries per queue with pinned payloads (the ring plan's; stats report the same). */
  private pinnedPerQueue(): number {
    return pinnedDepth(possibleCpus(), this.opts.queueDepth, this.payloadSize());
  }

  /** Bytes of one ring payload buffer: max_write rounded to pages, at least 8 KiB. */
  private payloadSize(): number {
    return roundUp(Math.max(8192, this.opts.maxWrite), 4096);
  }

  /** Busy ring entries per queue (entry i belongs to queue i / depth, as the shim registers them). */
  private queueInflight(): number[] {
    if (!this.uring) return [];
    const depth = this.opts.queueDepth;
    const out = new Array<number>(Math.ceil(this.uring.slots.length / depth)).fill(0);
    for (const r of this.reqs.get(this.uring) ?? []) if (r.busy) out[Math.floor(r.slot.index / depth)]!++;
    return out;
  }

  private opsByName(): Record<string, number> {
    const out: Record<string, number> = {};
    for (let op = 0; op < 64; op++) if (this.opCounts[op]) out[opName(op)] = this.opCounts[op]!;
    return out;
  }

  /**
   * Stop the transports and free native memory. Waits (bounded) for handlers still running so
   * no reply is written into freed memory; if some never settle, the memory is leaked instead.
   */
  close(graceMs = 2000): Promise<void> {
    // One shutdown: a second caller (Mount.unmount's timeout and Mount.closed) waits for the first.
    this.closing ??= this.shutdown(graceMs);
    return this.closing;
  }

  private closing: Promise<void> | null = null;

  private async shutdown(graceMs: number): Promise<void> {
    if (!this.alive) return;
    liveSessions.delete(this);
    if (this.watchdog) clearInterval(this.watchdog);
    this.classic?.stop();
    this.uring?.stop();
    // Copies: workers first, their rings pin the /dev/fuse file and use the data plane table.
    // Forwarding: this thread answers the requests it holds in the workers' entries first
    // (new arrivals are refused EIO), and closes the workers after that (below).
    if (!this.forwarding) await this.pool?.close();
    for (const f of this.forwarded) f.beginClose();
    const deadline = Date.now() + graceMs;
    while (this.counters.inflight > 0 && Date.now() < deadline) await Bun.sleep(10);
    // Backed handles the kernel never released, then the filesystem's destroy (bounded: a
    // handler that never settles must not keep the daemon alive).
    await Promise.race([this.releaseAndDestroy(), Bun.sleep(Math.max(100, deadline - Date.now()))]);
    this.notifications.close();
    // Handlers answered for (timeout, teardown) that have not settled may still write into their
    // `out` buffers: their memory must stay allocated too.
    const unsettled = this.counters.abandoned - this.counters.lateResults;
    const leak = this.counters.inflight > 0 || unsettled > 0;
    if (leak) {
      // Handlers that never settled: their callers must not wait forever. Answer what can be
      // answered (the connection may still be alive after a lazy unmount); a handler that
      // settles later is dropped as late. Their memory stays allocated because such a handler
      // may still write into the `out` buffer it was given.
      const stuck = this.counters.inflight;
      for (const list of this.reqs.values()) {
        for (const r of list) {
          if (r.state !== HANDLING) continue;
          this.counters.abandoned++;
          try {
            this.replier.error(r, Errno.EIO);
          } catch (e) {
            this.opts.log(`fuse-uring: could not answer a stuck request at shutdown: ${e instanceof Error ? e.message : String(e)}`);
          }
        }
      }
      this.flushAll();
      this.opts.log(
        `fuse-uring: ${stuck + unsettled} handler(s) never settled` + (stuck ? ` within ${graceMs} ms (answered EIO)` : "") + "; leaving their buffers allocated",
      );
      // The sources are not destroyed (that would free the memory), so their threads are not
      // joined: wait until each reported STOPPED (its thread no longer touches /dev/fuse)
      // before the fd is closed, or the fd number could be reused under a live reader.
      const stopDeadline = Date.now() + 2000;
      while (!this.allSourcesStopped() && Date.now() < stopDeadline) await Bun.sleep(10);
    }
    if (this.forwarding) {
      // The answers above are posted; now the workers may free their rings — unless a handler
      // here may still write into its `out` view over one of them: then they keep the memory.
      this.flushAll();
      await this.pool!.close(leak);
    }
    this.alive = false;
    if (!leak) {
      // destroy = stop + join the shim thread + free; only then is the fd closed.
      this.uring?.destroy();
      this.classic?.destroy();
    }
    if (!leak) this.dataPlane?.destroy();
    if (this.opts.role === "main") {
      if (!leak || this.allSourcesStopped()) native().fu_close(this.fd);
      else this.opts.log("fuse-uring: a transport thread did not stop; leaving /dev/fuse open rather than closing it under that thread");
    }
    // The shim threads are joined only when the sources were destroyed; a leaked source's
    // thread may still ring, so its callback must stay valid.
    if (!leak) this.doorbell.close();
    this.endedResolve(this.endReason || "closed");
  }

  private allSourcesStopped(): boolean {
    return (!this.classic || this.stoppedSources.has(this.classic)) && (!this.uring || this.stoppedSources.has(this.uring)) &&
      this.forwarded.every((f) => this.stoppedSources.has(f));
  }
}

/** The caller of what the session does on its own at teardown (RELEASE of orphaned handles). */
const teardownCtx = {
  uid: 0, gid: 0, pid: 0, unique: 0n, signal: new AbortController().signal,
  backingRead: () => Promise.reject(new FuseError("EIO", "no request at teardown")),
  backingWrite: () => Promise.reject(new FuseError("EIO", "no request at teardown")),
};

const POISON_BYTE = 0xa5;

/** Main-thread sessions of this process: a failStop() on this thread stops them (normally one). */
const liveSessions = new Set<Session>();
let failStopInstalled = false;

/** The main thread's fail-stop handler (lib/shared/fail-stop.ts): every live session stops. */
function installFailStopHandler(): void {
  if (failStopInstalled) return;
  failStopInstalled = true;
  onFailStop((reason) => {
    for (const s of [...liveSessions]) s.failStop(reason);
  });
}

/** Write 1 to /sys/fs/fuse/connections/N/abort; false if fusectl is not mounted or N is gone. */
function abortConnection(id: number | null): boolean {
  if (id === null) return false;
  try {
    writeFileSync(`/sys/fs/fuse/connections/${id}/abort`, "1");
    return true;
  } catch {
    return false;
  }
}

/**
 * INTERRUPTs whose request has not arrived yet. On io_uring the interrupt comes through
 * /dev/fuse and its request through the ring, so the interrupt can win the race. Bounded:
 * at most CAPACITY entries (oldest overwritten), each forgotten after TTL_MS.
 */
class EarlyInterrupts {
  static readonly CAPACITY = 64;
  static readonly TTL_MS = 5000;
  private readonly uniques = new Float64Array(EarlyInterrupts.CAPACITY);
  private readonly times = new Float64Array(EarlyInterrupts.CAPACITY);
  private next = 0;
  size = 0;

  add(unique: number, now: number): void {
    if (this.uniques[this.next] === 0) this.size++;
    this.uniques[this.next] = unique;
    this.times[this.next] = now;
    this.next = (this.next + 1) % EarlyInterrupts.CAPACITY;
  }

  /** True (and forgotten) if an interrupt for `unique` is remembered. */
  take(unique: number, now: number): boolean {
    for (let i = 0; i < EarlyInterrupts.CAPACITY; i++) {
      if (this.uniques[i] === unique) {
        this.uniques[i] = 0;
        this.size--;
        return now - this.times[i]! <= EarlyInterrupts.TTL_MS;
      }
    }
    return false;
  }

  expire(now: number): void {
    for (let i = 0; i < EarlyInterrupts.CAPACITY; i++) {
      if (this.uniques[i] !== 0 && now - this.times[i]! > EarlyInterrupts.TTL_MS) {
        this.uniques[i] = 0;
        this.size--;
      }
    }
  }
}

/**
 * The main thread's stats plus its workers' (counters summed, per-thread rows kept). A
 * forwarding worker reports only its ring's counters (forward-worker.ts); the requests it
 * forwarded are counted once, by the main thread that handled them.
 */
function mergeStats(own: SessionStats, workers: (Partial<SessionStats> | null)[], forwarding: boolean): SessionStats {
  const out: SessionStats = { ...own, ops: { ...own.ops }, latencyUs: { ...own.latencyUs }, stageLatencyUs: { ...own.stageLatencyUs }, threads: [...own.threads] };
  const sum = ["ringRequests", "devRequests", "wakeups", "cqes", "submits", "inflight", "pinnedBytes", "fixedIo", "nativeSync", "nativeAsync", "nativeDirect", "nativeFlushes", "nativeGetattrs", "nativeReleases", "nativeLookups", "directFallbacks", "waitTimers", "enters", "nativeRequests",
    "nativeReadBytes", "nativeWriteBytes", "nativeErrors", "ringRecovered", "errors", "replies", "forgets", "interrupts",
    "backedOps", "backedCopyFallbacks", "notifications", "notificationErrors", "retrieved", "zeroCopyRequests", "zeroCopyBytes"] as const;
  // Buffer pools: the workers' rings decide (a refusal anywhere shows).
  const rank: BufferPoolState[] = ["none", "offered", "active", "fallback"];
  const zrank = ["off", "refused", "active"] as const;
  workers.forEach((w, i) => {
    if (!w) return;
    for (const k of sum) (out[k] as number) += (w[k] as number | undefined) ?? 0;
    out.inflightMax = Math.max(out.inflightMax, w.inflightMax ?? 0);
    out.nativeInflightMax = Math.max(out.nativeInflightMax, w.nativeInflightMax ?? 0);
    out.nativeHandles += w.nativeHandles ?? 0;
    out.fixedBuffers ||= w.fixedBuffers ?? false;
    out.fixedFile ||= w.fixedFile ?? false;
    if (w.bufferPools && rank.indexOf(w.bufferPools) > rank.indexOf(out.bufferPools)) {
      out.bufferPools = w.bufferPools;
      out.bufferPoolsReason = w.bufferPoolsReason ?? out.bufferPoolsReason;
      out.poolBytes = w.poolBytes ?? out.poolBytes;
    }
    if (w.zeroCopy && zrank.indexOf(w.zeroCopy) > zrank.indexOf(out.zeroCopy)) out.zeroCopy = w.zeroCopy;
    for (const [op, n] of Object.entries(w.ops ?? {})) out.ops[op] = (out.ops[op] ?? 0) + n;
    for (const [op, l] of Object.entries(w.latencyUs ?? {})) out.latencyUs[op] = mergeLatency(out.latencyUs[op], l);
    for (const [st, l] of Object.entries(w.stageLatencyUs ?? {})) out.stageLatencyUs[st] = mergeLatency(out.stageLatencyUs[st], l);
    for (const t of w.threads ?? []) out.threads.push({ ...t, thread: `worker ${i}` });
  });
  // Distinct requests: forwarded ones appear in a worker's row and in the main thread's.
  const reqs = out.threads.reduce((a, t) => a + t.requests, 0) - (forwarding ? out.forwarded : 0);
  // A forwarded request is two hand-offs: the worker's message to the main thread, the commit back.
  out.handoffsPerRequest = reqs ? (out.wakeups + 2 * out.forwarded) / reqs : 0;
  return out;
}

/**
 * Two threads' latency summaries of one opcode: counts, means and maxima exact; percentiles
 * approximate (p50 weighted by count, p99 the larger: an upper bound).
 */
function mergeLatency(a: LatencySummary | undefined, b: LatencySummary): LatencySummary {
  if (!a || a.count === 0) return { ...b };
  if (b.count === 0) return a;
  const count = a.count + b.count;
  return {
    ...a,
    count,
    p50: (a.p50 * a.count + b.p50 * b.count) / count,
    p99: Math.max(a.p99, b.p99),
    max: Math.max(a.max, b.max),
    mean: (a.mean * a.count + b.mean * b.count) / count,
  };
}

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}
