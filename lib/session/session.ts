// A Session is one mounted connection: it owns the /dev/fuse fd, the transports (the classic
// /dev/fuse reader always, the io_uring when negotiated), the per-slot request state and the
// INIT negotiation. Requests flow: shim thread → doorbell → Source.drain → onRequest →
// Dispatcher → Replier → Source.reply → (batch end) Source.flush.

import { JSCallback } from "bun:ffi";
import { existsSync, readFileSync, write as fsWrite } from "node:fs";
import { errnoName, errnoOf, Errno, FuseError } from "../fs/errors.ts";
import type { InitInfo, InodeFS } from "../fs/types.ts";
import { native } from "../native.ts";
import { decodeInitIn, encodeInitOut, getU64, INIT_OUT_SIZE } from "../protocol/codec.ts";
import {
  FUSE_KERNEL_MINOR_VERSION, FUSE_KERNEL_VERSION, HDR_OP_IN, HDR_PAYLOAD_SZ, initBit, initFlagNames, Op, opHeaderSizes, opName,
} from "../protocol/constants.ts";
import { ClassicSource } from "../transport/classic.ts";
import type { Sink, Slot, Source, TransportKind } from "../transport/types.ts";
import { FU_RING_NO_FIXED_BUFFERS, IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_SINGLE_ISSUER, possibleCpus, UringError, UringSource } from "../transport/uring.ts";
import { Dispatcher, handlerNameOf } from "./dispatch.ts";
import { Replier, type ReplyObserver } from "./reply.ts";
import { DEFERRED, FREE, HANDLING, Request, stateNames } from "./request.ts";

export type TransportChoice = "auto" | "uring" | "classic";

export interface SessionOptions {
  transport: TransportChoice;
  queueDepth: number;
  maxWrite: number;
  classicSlots: number;
  entryTtl: number;
  attrTtl: number;
  negativeTtl: number;
  writebackCache: boolean;
  kernelPassthrough: boolean;
  /** io_uring setup flags for the ring thread (SINGLE_ISSUER | DEFER_TASKRUN by default) */
  ringSetupFlags: number;
  /** µs the ring thread waits for replies after a doorbell before sleeping (0 = off). */
  ringSpinMicros: number;
  /** Register ring payloads as io_uring fixed buffers for backing I/O (default true). */
  fixedBuffers: boolean;
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
  debug: boolean;
  log: (line: string) => void;
}

export const defaultSessionOptions: SessionOptions = {
  transport: "auto",
  queueDepth: 8,
  maxWrite: 1 << 20,
  classicSlots: 16,
  entryTtl: 1,
  attrTtl: 1,
  negativeTtl: 0,
  writebackCache: false,
  kernelPassthrough: false,
  // Measured on 6.18 (see docs/ARCHITECTURE.md). For experiments (bench/):
  // FUSE_URING_RING_FLAGS overrides the io_uring setup flags, FUSE_URING_SPIN_US the reply
  // spin-wait, FUSE_URING_FIXED_BUFFERS=0 turns fixed buffers off (as --no-fixed-buffers).
  ringSetupFlags:
    process.env.FUSE_URING_RING_FLAGS !== undefined ? Number(process.env.FUSE_URING_RING_FLAGS) : IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
  fixedBuffers: process.env.FUSE_URING_FIXED_BUFFERS !== "0",
  ringSpinMicros: process.env.FUSE_URING_SPIN_US !== undefined ? Number(process.env.FUSE_URING_SPIN_US) : 0,
  requestTimeout: 0,
  slowRequestMs: process.env.FUSE_URING_SLOW_MS !== undefined ? Number(process.env.FUSE_URING_SLOW_MS) : 10_000,
  poison: process.env.FUSE_URING_POISON === "1",
  debug: false,
  log: (line) => process.stderr.write(line + "\n"),
};

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
  errors: number;
  replies: number;
  bufferPools: boolean;
  /** Ring payload buffers registered as io_uring fixed buffers (false: RLIMIT_MEMLOCK too low). */
  fixedBuffers: boolean;
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
}

/** Capabilities requested from the kernel (granted = these ∩ offered). */
function requestedFlags(o: SessionOptions): bigint {
  let f =
    initBit("ASYNC_READ") | initBit("BIG_WRITES") | initBit("MAX_PAGES") | initBit("DO_READDIRPLUS") |
    initBit("READDIRPLUS_AUTO") | initBit("PARALLEL_DIROPS") | initBit("INIT_EXT") | initBit("ABORT_ERROR") |
    initBit("ASYNC_DIO") | initBit("AUTO_INVAL_DATA") | initBit("HANDLE_KILLPRIV_V2") | initBit("SETXATTR_EXT") |
    initBit("CACHE_SYMLINKS") | initBit("NO_EXPORT_SUPPORT"); // AUTO_INVAL_DATA, not EXPLICIT_: scripts change content
  if (o.writebackCache) f |= initBit("WRITEBACK_CACHE");
  if (o.kernelPassthrough && !o.writebackCache) f |= initBit("PASSTHROUGH");
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
  private classic: ClassicSource;
  private uring: UringSource | null = null;
  private readonly reqs = new Map<Source, Request[]>();
  private readonly replier: Replier;
  private readonly dispatcher: Dispatcher;
  private readonly doorbell: JSCallback;
  private readonly flushBound = () => this.flushAll();
  private flushScheduled = false;
  alive = true;
  private stoppedSources = new Set<Source>();
  private transport: TransportKind | "pending" = "pending";
  private transportReason = "";
  private counters = {
    forgets: 0, interrupts: 0, inflight: 0, inflightMax: 0, errors: 0, replies: 0, devRequests: 0, ringRequests: 0, wakeups: 0,
    timeouts: 0, lateResults: 0, deferredAnswers: 0, slowRequests: 0, interruptsUnmatched: 0, interruptsEarly: 0, protocolErrors: 0,
  };
  /** INTERRUPTs that arrived before their request (possible on io_uring): unique and arrival time. */
  private readonly earlyInterrupts = new EarlyInterrupts();
  private readonly watchdog: ReturnType<typeof setInterval> | null = null;
  private poisonPattern: Buffer | null = null;
  private seenErrors = new Set<string>();
  /** Requests answered per opcode (index = opcode; all opcodes are < 64). */
  private readonly opCounts = new Float64Array(64);
  private bufferPools = false;
  initInfo: InitInfo | null = null;

  private readyResolve!: (info: InitInfo) => void;
  private readyReject!: (e: Error) => void;
  /** Settles when INIT was answered (and the ring registered) or failed. */
  readonly ready: Promise<InitInfo>;
  private endedResolve!: (reason: string) => void;
  /** Settles when every source stopped (unmount, abort, daemon shutdown). */
  readonly ended: Promise<string>;
  private endReason = "";

  constructor(readonly fd: number, readonly fs: InodeFS, options: Partial<SessionOptions> = {}) {
    this.opts = { ...defaultSessionOptions, ...options };
    this.ready = new Promise((res, rej) => {
      this.readyResolve = res;
      this.readyReject = rej;
    });
    this.ready.catch(() => {});
    this.ended = new Promise((res) => (this.endedResolve = res));
    this.replier = new Replier(this);
    this.dispatcher = new Dispatcher(fs, this.replier, this.opts, (req) => {
      if (this.opts.debug) this.opts.log(`fuse: unsupported opcode ${opName(req.opcode)} (${req.opcode}) → ENOSYS`);
    });
    this.doorbell = new JSCallback((source: number) => this.onDoorbell(source), { args: ["u32"], returns: "void", threadsafe: true });
    const payloadSize = roundUp(Math.max(8192, this.opts.maxWrite), 4096);
    this.classic = new ClassicSource(this, {
      fd,
      slots: this.opts.classicSlots,
      payloadSize,
      doorbell: this.doorbell.ptr!,
      opSizes: opHeaderSizes(false),
    });
    this.reqs.set(this.classic, this.classic.slots.map((s) => this.newRequest(s)));
    if (this.opts.poison) this.poisonPattern = Buffer.alloc(payloadSize, POISON_BYTE);
    // One timer for all requests (no timer per request): slow-request log and request timeout.
    const tick = this.opts.requestTimeout > 0 ? Math.min(250, this.opts.requestTimeout * 250) : 1000;
    if (this.opts.requestTimeout > 0 || this.opts.slowRequestMs > 0) {
      this.watchdog = setInterval(() => this.checkPending(), tick);
      this.watchdog.unref?.();
    }
  }

  /** A slot's Request, wired to the replier once (no per-request closures). */
  private newRequest(slot: Slot): Request {
    const req = new Request(slot);
    req.onIoComplete = (res, gen) => this.replier.ioDone(req, res, gen);
    return req;
  }

  /** Start reading /dev/fuse; call after the fd is attached to a mount. */
  start(): void {
    this.classic.start();
  }

  // ---- doorbell and batching ------------------------------------------------------------------
  private onDoorbell(source: number): void {
    this.counters.wakeups++;
    if (source === 1) this.uring?.drain();
    else this.classic.drain();
    this.flushAll();
  }

  private flushAll(): void {
    this.flushScheduled = false;
    this.uring?.flush();
  }

  onRequest(slot: Slot): void {
    const req = this.reqs.get(slot.source)![slot.index]!;
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
    if (this.earlyInterrupts.size > 0 && this.earlyInterrupts.take(req.uniqueNumber, req.startedAt)) {
      this.counters.interruptsEarly++;
      req.interrupt();
    }
    if (slot.source.kind === "uring") this.counters.ringRequests++;
    else this.counters.devRequests++;
    const c = this.counters;
    if (++c.inflight > c.inflightMax) c.inflightMax = c.inflight;
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

  private forget(nodeid: number, nlookup: number): void {
    try {
      this.fs.forget?.(nodeid, nlookup);
    } catch (e) {
      this.unexpectedError("FORGET", e);
    }
  }

  /** Interrupt the request with unique `target`; false (and remembered) if it is not known. */
  private interrupt(target: number, now: number): boolean {
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

  onIoDone(slot: Slot, res: number): void {
    this.reqs.get(slot.source)![slot.index]!.ioDone(res);
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
          r.abortForTimeout();
          if (this.opts.debug) this.opts.log(`fuse: #${r.uniqueNumber} ${opName(r.opcode)} timed out after ${(age / 1000).toFixed(1)} s → ETIMEDOUT`);
          this.replier.error(r, Errno.ETIMEDOUT);
        }
      }
    }
    this.earlyInterrupts.expire(now);
  }

  onStopped(source: Source, errno: number): void {
    this.stoppedSources.add(source);
    // The /dev/fuse reader knows best why the connection ended (ENODEV: unmounted,
    // ECONNABORTED: fusectl abort with ABORT_ERROR); ring entries only say ENOTCONN either way.
    const reason = errno === Errno.ENODEV ? "unmounted" : errno === Errno.ECONNABORTED ? "connection aborted" : errno === 0 ? "" : `transport stopped: ${errnoName(errno)}`;
    if (reason && (source === this.classic || (!this.endReason && errno !== Errno.ENOTCONN))) this.endReason = reason;
    if (this.transport === "pending") this.readyReject(new Error(`connection ended before INIT (${this.endReason || reason || "stopped"})`));
    // The classic reader ending means the connection is gone; the ring follows (its entries
    // complete with ENOTCONN). Stop everything so teardown never waits on a dead kernel side.
    this.classic.stop();
    this.uring?.stop();
    const all = this.uring ? this.stoppedSources.has(this.uring) && this.stoppedSources.has(this.classic) : this.stoppedSources.has(this.classic);
    if (all) this.endedResolve(this.endReason || (errno === Errno.ENOTCONN ? "connection ended (ENOTCONN)" : "closed"));
  }

  // ---- INIT -----------------------------------------------------------------------------------
  private handleInit(req: Request): void {
    const h = req.slot.header;
    const init = decodeInitIn(h, HDR_OP_IN);
    if (init.major !== FUSE_KERNEL_VERSION || init.minor < 31) {
      this.replier.error(req, Errno.EPROTO);
      this.readyReject(new Error(`unsupported FUSE protocol ${init.major}.${init.minor} (need 7.31+)`));
      return;
    }
    const o = this.opts;
    let flags = requestedFlags(o) & init.flags;
    this.bufferPools = (init.flags & initBit("HAS_IO_URING_BUFPOOL")) !== 0n;

    // Decide the transport before answering: advertising io_uring and then failing to
    // register entries would block every request (docs/KERNEL.md §3, §4).
    let want = o.transport !== "classic";
    let reason = o.transport === "classic" ? "requested with --transport classic" : explainNoUring(init.flags);
    if (want && reason) want = false;
    const payloadSize = roundUp(Math.max(8192, o.maxWrite), 4096);
    if (want) {
      try {
        this.uring = new UringSource(this, {
          fd: this.fd, queues: possibleCpus(), depth: o.queueDepth, payloadSize,
          // + not |: bit 31 would make the number negative
          setupFlags: o.ringSetupFlags + (o.fixedBuffers ? 0 : FU_RING_NO_FIXED_BUFFERS), doorbell: this.doorbell.ptr!, spinMicros: o.ringSpinMicros,
        });
        const ring = this.uring;
        const ringIo = (slot: Slot, kind: 1 | 2, fd: number, offset: number, len: number) => {
          this.scheduleFlush(); // backing I/O started after an await must be submitted too
          return ring.io(slot, kind, fd, offset, len);
        };
        this.reqs.set(ring, ring.slots.map((s) => Object.assign(this.newRequest(s), { ringIo })));
        flags |= initBit("OVER_IO_URING");
        reason = "kernel offered FUSE_OVER_IO_URING";
      } catch (e) {
        reason = e instanceof UringError ? explainRingError(e.errno) : String(e);
        this.uring = null;
      }
    }
    if (o.transport === "uring" && !this.uring) {
      this.replier.error(req, Errno.EPROTO);
      this.readyReject(new Error(`io_uring transport unavailable: ${reason}`));
      return;
    }
    this.transport = this.uring ? "uring" : "classic";
    this.transportReason = reason;
    this.classic.setOpSizes(opHeaderSizes((flags & initBit("SETXATTR_EXT")) !== 0n));

    const maxPages = Math.min(256, Math.ceil(o.maxWrite / 4096));
    encodeInitOut(req.slot.payloadView, 0, {
      major: FUSE_KERNEL_VERSION,
      minor: FUSE_KERNEL_MINOR_VERSION,
      maxReadahead: init.maxReadahead,
      flags,
      maxBackground: 64,
      congestionThreshold: 48,
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

    if (this.uring) {
      try {
        this.uring.start();
      } catch (e) {
        // Cannot happen short of a shim bug; the kernel would block all I/O, so abort loudly.
        this.readyReject(new Error(`io_uring register failed after INIT: ${String(e)}`));
        return;
      }
    }
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
    };
    this.initInfo = info;
    if (o.debug) {
      o.log(`fuse: INIT kernel ${init.major}.${init.minor} offered [${initFlagNames(init.flags).join(" ")}]`);
      o.log(`fuse: INIT granted [${info.grantedNames.join(" ")}] max_write=${o.maxWrite} max_pages=${maxPages}`);
      o.log(`fuse: transport=${this.transport} (${reason})` + (this.uring ? ` queues=${possibleCpus()} depth=${o.queueDepth} pinned=${this.uring.pinnedBytes} bytes` : ""));
      o.log(this.bufferPools ? "fuse: kernel offers io_uring buffer pools (FUSE 7.46); using per-entry payload buffers" : "fuse: no io_uring buffer pools in this kernel: per-entry payload buffers");
    }
    Promise.resolve(this.fs.init?.(info)).then(
      () => this.readyResolve(info),
      (e) => this.readyReject(e instanceof Error ? e : new Error(String(e))),
    );
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
  /**
   * Ring replies and backing I/O are only queued; submit them once per microtask checkpoint
   * (a doorbell batch flushes at its end anyway), so work queued by handlers that settle later
   * goes out too.
   */
  private scheduleFlush(): void {
    if (!this.flushScheduled && this.uring) {
      this.flushScheduled = true;
      queueMicrotask(this.flushBound);
    }
  }

  done(req: Request, error: number): void {
    this.scheduleFlush();
    this.opCounts[req.opcode & 63]!++;
    const c = this.counters;
    c.inflight--;
    c.replies++;
    if (error) c.errors++;
    if (this.opts.debug) {
      const ms = (performance.now() - req.startedAt).toFixed(3);
      this.opts.log(`fuse: #${req.uniqueNumber} ${opName(req.opcode)} node=${req.nodeid} → ${error ? errnoName(error) : "OK"} ${ms} ms [${req.slot.source.kind}]`);
    }
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
    if (this.seenErrors.has(text)) return;
    if (this.seenErrors.size < 1000) this.seenErrors.add(text);
    this.opts.log(`fuse-uring: handler for ${what} threw (answered EIO): ${text}`);
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

  // ---- stats and teardown ---------------------------------------------------------------------
  stats(): SessionStats {
    const c = this.classic.stats();
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
      errors: this.counters.errors + c.errors + (u?.errors ?? 0),
      replies: this.counters.replies,
      bufferPools: this.bufferPools,
      fixedBuffers: u?.fixedBuffers ?? false,
      ops: this.opsByName(),
      timeouts: this.counters.timeouts,
      lateResults: this.counters.lateResults,
      deferredAnswers: this.counters.deferredAnswers,
      slowRequests: this.counters.slowRequests,
      interruptsUnmatched: this.counters.interruptsUnmatched,
      interruptsEarly: this.counters.interruptsEarly,
      protocolErrors: this.counters.protocolErrors,
    };
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
  async close(graceMs = 2000): Promise<void> {
    if (!this.alive) return;
    if (this.watchdog) clearInterval(this.watchdog);
    this.classic.stop();
    this.uring?.stop();
    const deadline = Date.now() + graceMs;
    while (this.counters.inflight > 0 && Date.now() < deadline) await Bun.sleep(10);
    const leak = this.counters.inflight > 0;
    if (leak) {
      // Handlers that never settled: their callers must not wait forever. Answer what can be
      // answered (the connection may still be alive after a lazy unmount); a handler that
      // settles later is dropped as late. Their memory stays allocated because such a handler
      // may still write into the `out` buffer it was given.
      for (const list of this.reqs.values()) for (const r of list) if (r.state === HANDLING) this.replier.error(r, Errno.EIO);
      this.flushAll();
      this.opts.log(`fuse-uring: ${this.counters.inflight} handler(s) never settled within ${graceMs} ms; answered them EIO and left their buffers allocated`);
      // The sources are not destroyed (that would free the memory), so their threads are not
      // joined: wait until each reported STOPPED (its thread no longer touches /dev/fuse)
      // before the fd is closed, or the fd number could be reused under a live reader.
      const stopDeadline = Date.now() + 2000;
      while (!this.allSourcesStopped() && Date.now() < stopDeadline) await Bun.sleep(10);
    }
    this.alive = false;
    if (!leak) {
      // destroy = stop + join the shim thread + free; only then is the fd closed.
      this.uring?.destroy();
      this.classic.destroy();
    }
    if (!leak || this.allSourcesStopped()) native().fu_close(this.fd);
    else this.opts.log("fuse-uring: a transport thread did not stop; leaving /dev/fuse open rather than closing it under that thread");
    // The shim threads are joined only when the sources were destroyed; a leaked source's
    // thread may still ring, so its callback must stay valid.
    if (!leak) this.doorbell.close();
    this.endedResolve(this.endReason || "closed");
  }

  private allSourcesStopped(): boolean {
    return this.stoppedSources.has(this.classic) && (!this.uring || this.stoppedSources.has(this.uring));
  }
}

const POISON_BYTE = 0xa5;

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

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}
