// Multi-core serving (`--workers N`): N Bun Workers, each owning the io_uring of a share of the
// kernel's queues (lib/threads/plan.ts: contiguous blocks of the allowed CPUs). Two modes:
//
// - copies: a script that declares `replicable: true` (or the module a filesystem's `copies()`
//   names, with state shared through SharedArrayBuffers) is loaded once per worker, and each
//   worker is a complete ring engine: it reaps, handles and answers its requests on its own
//   thread (lib/transport/uring.ts). Every copy must answer every request the same way (node
//   ids and file handles computed, not counted per copy). The main thread keeps the /dev/fuse
//   reader (INIT, FORGET, INTERRUPT, anything sent before the rings are ready) and forwards
//   FORGET and INTERRUPT to every worker: the kernel does not say which queue served a node.
// - forwarding: any other filesystem stays on the main thread. Each worker serves the native
//   data plane of its rings on its own thread (lib/threads/forward-worker.ts) and posts every
//   other request to the main thread as its entry index; the main thread handles it in place
//   through views over the worker's entries (lib/transport/forwarded.ts) and posts the commit back.

import type { PoolOptions } from "../transport/uring.ts";
import { loadedShimPath } from "../native.ts";
import type { DataPlaneShare } from "../session/dataplane.ts";
import type { SessionStats } from "../session/stats.ts";
import type { ForwardPeer, RingEntries } from "../transport/forwarded.ts";
import type { WorkerModule } from "./plan.ts";

export type { WorkerModule } from "./plan.ts";
export type { RingEntries } from "../transport/forwarded.ts";

/** The ring plan for one worker (all plain data: it crosses postMessage). */
export interface RingPlan {
  qids: number[];
  totalQueues: number;
  depth: number;
  /** Entries per queue with pinned payloads (the session decides it once: ringPlan). */
  pinnedDepth: number;
  payloadSize: number;
  setupFlags: number;
  waitMicros: number;
  /** Native transfers up to this size run synchronously; null: by queue count (nativeSyncLimit). */
  nativeSyncMax: number | null;
  /** Pin the ring's owner (workers; --no-pin turns it off) to `cpus`, else to its queues' CPUs. */
  pin: boolean;
  cpus?: number[];
  /** FUSE 7.46 buffer pools for the ring (null: per-entry payloads). */
  pool: PoolOptions | null;
}

/** INIT facts a worker's filesystem gets in fs.init (functions are recreated in the worker). */
export interface WorkerInit {
  kernelMinor: number;
  offered: string;
  granted: string;
  grantedNames: string[];
  maxWrite: number;
  maxReadahead: number;
}


export type ToWorker =
  | { type: "load"; fd: number; module: WorkerModule | null; opts: Record<string, unknown>; dataPlane: DataPlaneShare | null; index: number; shimPath: string | null }
  | { type: "ring"; plan: RingPlan }
  | { type: "start"; init: WorkerInit }
  | { type: "forget"; pairs: number[] }
  | { type: "interrupt"; unique: number }
  /** Forwarding: answers written in place by the main thread, as [entry, payload length] pairs. */
  | { type: "commit"; pairs: number[] }
  | { type: "reload-prepare" }
  | { type: "reload-commit" }
  | { type: "reload-abort" }
  /** keepMemory: a main-thread handler never settled and may still write into an entry. */
  | { type: "close"; keepMemory?: boolean };

export type FromWorker =
  | { type: "loaded" }
  | { type: "error"; message: string }
  | { type: "ring"; ok: boolean; errno?: number; message?: string; entries?: RingEntries }
  /** Forwarding: entries that hold requests for the main thread (one message per reaped batch). */
  | { type: "requests"; idx: number[] }
  /** Forwarding: the worker's ring stopped (-errno as in a STOPPED record, positive here). */
  | { type: "stopped"; errno: number }
  | { type: "stats"; stats: SessionStats }
  | { type: "started"; stats: SessionStats | null }
  | { type: "ended"; reason: string }
  | { type: "closed" }
  | { type: "reload-prepared" }
  | { type: "reload-committed"; inflight: number }
  | { type: "log"; line: string }
  /** The worker called failStop() (lib/shared/fail-stop.ts): the mount must stop. */
  | { type: "fail-stop"; reason: string };


interface Slot {
  worker: Worker;
  peer: ForwardPeer | null;
  stats: SessionStats | null;
  ended: boolean;
  /** The thread is gone (exited, threw): nothing is posted to it or awaited from it. */
  dead: boolean;
  waiters: Map<string, (m: FromWorker) => void>;
}

/** One line of a worker's uncaught error (Bun's ErrorEvent message carries a source excerpt). */
function errorLine(ev: ErrorEvent): string {
  if (ev.error instanceof Error) return `${ev.error.name === "Error" ? "" : ev.error.name + ": "}${ev.error.message}`;
  const text = String(ev.message ?? ev);
  const m = /^(?:\w*error|\w*Error): (.*)$/m.exec(text);
  return (m ? m[1]! : text.split("\n")[0]!).trim();
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private endedResolve!: (reason: string) => void;
  /** Settles when every worker's ring has stopped (unmount, abort). */
  readonly ended: Promise<string>;
  private endReason = "";

  /** True: the filesystem stays on the main thread and workers forward requests to it. */
  readonly forwarding: boolean;

  /** Set by close(): workers exiting from now on are expected. */
  private closing = false;

  /**
   * `failStop` is called (once per cause) when a worker can no longer serve its queues: it
   * exited, threw an uncaught error, or called failStop() itself. Its queues would get no more
   * answers, so the session stops the whole mount (fail-stop) rather than serve half of it.
   */
  /**
   * `entry`: the module a worker thread starts from — the app's (lib/worker-main.ts), which
   * calls serveWorker() (lib/threads/worker-entry.ts) with what the app knows how to load.
   */
  constructor(
    entry: string,
    readonly count: number,
    private readonly log: (line: string) => void,
    forwarding = false,
    private readonly failStop: (reason: string) => void = () => {},
    /** Queue ids and CPUs of each worker (lib/threads/plan.ts: contiguous CPU blocks). */
    private readonly queues: number[][] = [],
    private readonly cpus: number[][] = [],
  ) {
    this.forwarding = forwarding;
    this.ended = new Promise((res) => (this.endedResolve = res));
    for (let i = 0; i < count; i++) {
      const worker = new Worker(entry);
      const slot: Slot = { worker, peer: null, stats: null, ended: false, dead: false, waiters: new Map() };
      worker.onmessage = (ev: MessageEvent<FromWorker>) => this.onMessage(slot, i, ev.data);
      worker.onerror = (ev) => this.lost(slot, i, `worker ${i} threw an uncaught error: ${errorLine(ev as ErrorEvent)}`);
      worker.addEventListener("close", (ev) => {
        if (!this.closing) this.lost(slot, i, `worker ${i} exited (code ${(ev as unknown as { code?: number }).code ?? "?"})`);
      });
      this.slots.push(slot);
    }
  }

  /** Worker `i` stopped serving: it is dead to the pool, and the mount must stop. */
  private lost(slot: Slot, i: number, why: string): void {
    if (slot.dead) return;
    slot.dead = true;
    this.markEnded(slot, why);
    // Whoever waits for this worker gets the failure now, not after a timeout.
    for (const waiter of slot.waiters.values()) waiter({ type: "error", message: why });
    slot.waiters.clear();
    // Forwarding: its ring is gone; the main thread's end stops too (its requests are the kernel's now).
    slot.peer?.onStopped(103 /* ECONNABORTED */);
    if (this.closing) return this.log(`fuse-uring: ${why} while closing`);
    try {
      slot.worker.terminate();
    } catch {}
    this.failStop(why);
  }

  private onMessage(slot: Slot, i: number, m: FromWorker): void {
    switch (m.type) {
      case "fail-stop":
        return this.failStop(`worker ${i}: ${m.reason}`);
      case "requests":
        slot.peer?.onRequests(m.idx);
        return;
      case "stopped":
        slot.peer?.onStopped(m.errno);
        return;
      case "stats":
        slot.stats = m.stats;
        return;
      case "started":
        if (m.stats) slot.stats = m.stats;
        break;
      case "ended":
        return this.markEnded(slot, m.reason);
      case "log":
        return this.log(m.line);
    }
    const key = m.type === "error" ? [...slot.waiters.keys()][0] : m.type;
    const waiter = key !== undefined ? slot.waiters.get(key) : undefined;
    if (waiter && key !== undefined) {
      slot.waiters.delete(key);
      waiter(m);
    }
  }

  private markEnded(slot: Slot, reason: string): void {
    if (slot.ended) return;
    slot.ended = true;
    if (!this.endReason) this.endReason = reason;
    if (this.slots.every((s) => s.ended)) this.endedResolve(this.endReason);
  }

  private request(slot: Slot, msg: ToWorker, reply: FromWorker["type"], timeoutMs = 30_000): Promise<FromWorker> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        slot.waiters.delete(reply);
        resolve({ type: "error", message: `worker did not answer ${msg.type} within ${timeoutMs} ms` });
      }, timeoutMs);
      slot.waiters.set(reply, (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      slot.worker.postMessage(msg);
    });
  }

  /** Every worker imports the module (copies) or just the shim (forwarding: module null);
   *  rejects with the first worker's error message. */
  async load(fd: number, module: WorkerModule | null, opts: Record<string, unknown>, dataPlane: DataPlaneShare | null): Promise<void> {
    // Workers load the shim this thread loaded (in the standalone binary, the extracted copy).
    const shimPath = loadedShimPath();
    const answers = await Promise.all(this.slots.map((s, index) => this.request(s, { type: "load", fd, module, opts, dataPlane, index, shimPath }, "loaded")));
    const bad = answers.find((a) => a.type === "error");
    if (bad && bad.type === "error") throw new Error(bad.message);
  }

  /** Queue ids of worker `w` (the plan's block; q mod count without a plan). */
  qidsOf(w: number, totalQueues: number): number[] {
    if (this.queues[w]) return this.queues[w]!;
    const out: number[] = [];
    for (let q = w; q < totalQueues; q += this.count) out.push(q);
    return out;
  }

  /**
   * Each worker creates its ring (on its own thread: the ring's submitter). Resolves to every
   * worker's entries (forwarding needs them; empty in copies mode), or why not.
   */
  async createRings(plan: Omit<RingPlan, "qids">): Promise<{ errno: number; message: string } | { entries: RingEntries[] }> {
    const answers = await Promise.all(this.slots.map((s, w) => this.request(s, { type: "ring", plan: { ...plan, qids: this.qidsOf(w, plan.totalQueues), ...(this.cpus[w] ? { cpus: this.cpus[w] } : {}) } }, "ring")));
    const entries: RingEntries[] = [];
    for (const a of answers) {
      if (a.type === "error") return { errno: 0, message: a.message };
      if (a.type === "ring" && !a.ok) return { errno: a.errno ?? 0, message: a.message ?? "ring setup failed" };
      if (a.type === "ring" && a.entries) entries.push(a.entries);
    }
    return { entries };
  }

  /** Forwarding: where worker `w`'s requests go. */
  attach(w: number, peer: ForwardPeer): void {
    this.slots[w]!.peer = peer;
  }

  /** Forwarding: answers for worker `w` (posted once per batch). */
  commit(w: number, pairs: number[]): void {
    const s = this.slots[w]!;
    if (!s.ended && !s.dead) s.worker.postMessage({ type: "commit", pairs } satisfies ToWorker);
  }

  /** Every worker registers its ring's entries (after adding its queues' buffer pools);
   *  resolves once all did, with their first stats (the ready line says what the pools became). */
  async start(init: WorkerInit): Promise<void> {
    await Promise.all(this.slots.map((s) => this.request(s, { type: "start", init }, "started")));
  }

  forget(pairs: number[]): void {
    for (const s of this.slots) if (!s.ended) s.worker.postMessage({ type: "forget", pairs } satisfies ToWorker);
  }

  interrupt(unique: number): void {
    for (const s of this.slots) if (!s.ended) s.worker.postMessage({ type: "interrupt", unique } satisfies ToWorker);
  }

  /**
   * Hot reload (lib/reload/): every worker loads the new version of its module beside the old
   * one. Resolves to a commit (swap everywhere; resolves to the requests in flight) once all
   * loaded, or rejects with the first worker's error after telling the others to drop theirs.
   */
  async prepareReload(): Promise<() => Promise<number>> {
    const live = this.slots.filter((s) => !s.ended);
    const answers = await Promise.all(live.map((s) => this.request(s, { type: "reload-prepare" }, "reload-prepared")));
    const bad = answers.find((a) => a.type === "error");
    if (bad && bad.type === "error") {
      for (const s of live) s.worker.postMessage({ type: "reload-abort" } satisfies ToWorker);
      throw new Error(bad.message);
    }
    return async () => {
      const done = await Promise.all(live.map((s) => this.request(s, { type: "reload-commit" }, "reload-committed", 5000)));
      return done.reduce((n, a) => n + (a.type === "reload-committed" ? a.inflight : 0), 0);
    };
  }

  /** Latest stats of every worker (posted twice a second and when it ends). */
  stats(): (SessionStats | null)[] {
    return this.slots.map((s) => s.stats);
  }

  /** Workers that got no ring (classic fallback) never end on their own. */
  endAll(reason: string): void {
    for (const s of this.slots) this.markEnded(s, reason);
  }

  /** keepMemory (forwarding): leave the rings' memory mapped; a handler may still write into it. */
  async close(keepMemory = false): Promise<void> {
    this.closing = true;
    for (const s of this.slots) s.peer = null;
    const live = this.slots.filter((s) => !s.dead);
    await Promise.all(live.map((s) => this.request(s, { type: "close", keepMemory }, "closed", 5000)));
    for (const s of this.slots) s.worker.terminate();
  }
}
