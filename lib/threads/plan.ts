// The thread plan: the one place that decides how many threads serve a mount's io_uring queues,
// what each of them runs, and which queues and CPUs each owns. Nothing else looks at a
// filesystem's threading declaration (InodeFS.threads, or the older `replicable` / `copies()`).
//
// Made when INIT has chosen the io_uring transport (Session.negotiate): on the classic
// transport, or when the rings cannot be set up, no worker runs. Modes (stats `workerMode`):
//   single      the main thread serves every queue (--workers 1, a filesystem that declares
//               nothing with --workers auto, one allowed CPU);
//   copies      every worker runs its own instance of the filesystem: a "stateless" one loads
//               the filesystem's own module again (the app says which: a script's file), one
//               with shared state loads the module its `shared()` plan names;
//   forwarding  (only when asked for with an explicit --workers N) the filesystem stays on the
//               main thread; workers serve the native data plane and forward the rest.
//
// Queues → workers: the kernel has a queue per possible CPU and puts each request on the queue
// of its caller's CPU. Workers take contiguous blocks of the CPUs this process may run on (its
// affinity mask: `taskset -c 0-3 fuse-uring mount …` puts workers on CPUs 0–3 only) and are
// pinned there, so the kernel's wake-up of a queue's owner stays on the caller's CPU. Every
// queue must still have an owner (callers on other CPUs use the mount too): a CPU outside the
// mask is served by the worker whose block comes before it (worker 0 for CPUs below the first
// allowed one), at the price of a cross-CPU wake-up for its callers.

import type { CopiesPlan, InodeFS, ThreadSupport } from "../session/filesystem.ts";
import { allowedCpus } from "../transport/affinity.ts";

/** How a worker loads an instance of the filesystem (plain data: it crosses postMessage). */
export interface WorkerModule {
  path: string;
  args: string[];
  mountpoint?: string;
  /** CopiesPlan.shared (SharedArrayBuffers stay shared). */
  shared?: unknown;
}

export type WorkerMode = "single" | "copies" | "forwarding";

export interface ThreadPlan {
  mode: WorkerMode;
  /** Worker threads (0 in single mode). */
  workers: number;
  /** copies: what each worker loads. */
  module: WorkerModule | null;
  /** copies over one shared state: FORGET is applied once, by the main thread's instance. */
  sharedState: boolean;
  /** Per worker: the queue ids it owns (contiguous), and the CPUs it is pinned to. */
  queues: number[][];
  cpus: number[][];
}

export interface PlanInput {
  fs: InodeFS;
  /** --workers: a count, or "auto" (a worker per allowed CPU, at most AUTO_MAX, when the filesystem can run as copies). */
  requested: number | "auto";
  /** Queues the kernel has (possible CPUs). */
  possibleCpus: number;
  /** CPUs this process may run on (default: its affinity mask). */
  allowed?: number[];
  /**
   * How a worker loads a fresh instance of this filesystem if it declares itself "stateless"
   * (the app knows: a script's file); null: it cannot (an object handed to mount()).
   */
  source: WorkerModule | null;
  log: (line: string) => void;
}

/** Each worker is a JS heap of its own (~12 MiB), and few filesystems scale past this on one mount. */
export const AUTO_MAX = 8;

/**
 * What a filesystem declares about threads. `threads` wins; otherwise `copies()` means shared
 * state and `replicable: true` means stateless (the older spellings of the same thing).
 */
export function declaredThreads(fs: InodeFS): ThreadSupport {
  if (typeof fs.threads === "object") return fs.threads;
  // copies() names the shared state its copies need: it wins over a plain "stateless" (a
  // paths() script's PathFS is "stateless" and shares its node table through copies()).
  if (typeof fs.copies === "function" && fs.threads !== "single") return { shared: () => fs.copies!() };
  if (fs.threads !== undefined) return fs.threads;
  if (fs.replicable === true) return "stateless";
  return "single";
}

/**
 * True when an instance loaded on a worker may serve that worker's queues: it answers alike
 * from the request alone ("stateless", `replicable: true`; what a `shared()` plan's module must
 * return for its copies too).
 */
export function servesAsCopy(fs: InodeFS): boolean {
  return fs.threads === "stateless" || fs.replicable === true;
}

const SINGLE: ThreadPlan = { mode: "single", workers: 0, module: null, sharedState: false, queues: [], cpus: [] };

/** The plan for a mount whose INIT chose io_uring. Calls the filesystem's `shared()` (once). */
export function planThreads(input: PlanInput): ThreadPlan {
  const possible = Math.max(1, input.possibleCpus);
  const allowed = usableCpus(input.allowed ?? allowedCpus(), possible);
  const auto = input.requested === "auto";
  // At most a worker per queue: a worker without a queue would have nothing to serve.
  const count = Math.min(auto ? Math.min(allowed.length, AUTO_MAX) : (input.requested as number), possible);
  if (count <= 1) return SINGLE;
  const declared = declaredThreads(input.fs);
  let module: WorkerModule | null = null;
  let sharedState = false;
  if (declared === "stateless") module = input.source;
  else if (typeof declared === "object") {
    let plan: CopiesPlan | null = null;
    try {
      plan = declared.shared();
    } catch (e) {
      input.log(`fuse-uring: the filesystem cannot run as copies (${e instanceof Error ? e.message : String(e)}); forwarding to this thread instead`);
    }
    if (plan) {
      module = { path: plan.module, args: plan.args ?? [], mountpoint: plan.mountpoint, shared: plan.shared };
      sharedState = plan.sharedState === true;
    }
  }
  // Forwarding makes metadata slower than one thread: never chosen automatically.
  if (!module && auto) return SINGLE;
  return { mode: module ? "copies" : "forwarding", workers: count, module, sharedState, ...queueBlocks(count, possible, allowed) };
}

/** The allowed CPUs that have a queue, sorted; all queues' CPUs when none is allowed (no mask). */
function usableCpus(allowed: number[], possible: number): number[] {
  const out = [...new Set(allowed.filter((c) => Number.isInteger(c) && c >= 0 && c < possible))].sort((a, b) => a - b);
  return out.length ? out : Array.from({ length: possible }, (_, i) => i);
}

/** `n` contiguous runs of `items`, sizes differing by at most one (the first ones longer). */
function split<T>(items: T[], n: number): T[][] {
  const out: T[][] = [];
  let at = 0;
  for (let w = 0; w < n; w++) {
    const len = Math.floor(items.length / n) + (w < items.length % n ? 1 : 0);
    out.push(items.slice(at, at + len));
    at += len;
  }
  return out;
}

/**
 * Queues and CPUs per worker (see the top of this file). `allowed` is sorted and non-empty.
 * More workers than allowed CPUs (an explicit --workers N under taskset): the queues are split
 * evenly and a worker whose queues' CPUs are all outside the mask may run on any allowed CPU.
 */
export function queueBlocks(workers: number, possible: number, allowed: number[]): { queues: number[][]; cpus: number[][] } {
  const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);
  if (workers <= allowed.length) {
    const cpus = split(allowed, workers);
    const starts = cpus.map((b, w) => (w === 0 ? 0 : b[0]!));
    const queues = starts.map((s, w) => range(s, w + 1 < workers ? starts[w + 1]! : possible));
    return { queues, cpus };
  }
  const queues = split(range(0, possible), workers);
  const cpus = queues.map((q) => {
    const mine = q.filter((c) => allowed.includes(c));
    return mine.length ? mine : [...allowed];
  });
  return { queues, cpus };
}
