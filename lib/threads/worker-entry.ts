// A worker thread of `--workers N` (lib/threads/pool.ts): loads its own instance of the
// filesystem, creates its own io_uring for its share of the queues (this thread is the ring's
// submitter), and serves those queues like the main thread would in single-thread mode.
// Forwarding mode (no module: the filesystem stays on the main thread): only the ring and the
// native data plane run here (forward-worker.ts).
//
// The engine does not know how a module is loaded (scripts, the standalone binary's embedded
// copy modules, hot reload): the app's worker entry (lib/worker-main.ts) calls serveWorker()
// with a WorkerLoader that does.

import { setShimPath } from "../native.ts";
import { onFailStop } from "../shared/fail-stop.ts";
import type { InodeFS } from "../session/filesystem.ts";
import { Session, type SessionOptions } from "../session/session.ts";
import type { SessionStats } from "../session/stats.ts";
import { ForwardEngine } from "./forward-worker.ts";
import { servesAsCopy, type WorkerModule } from "./plan.ts";
import type { FromWorker, ToWorker } from "./pool.ts";

/** How a worker gets the filesystem it runs: the app layer knows (lib/worker-main.ts). */
export interface WorkerLoader {
  load(module: WorkerModule): Promise<LoadedFilesystem>;
}

/** One loaded version of a worker's filesystem module. */
export interface LoadedFilesystem {
  fs: InodeFS;
  /** Hot reload: load the module's next version (rejects with why it cannot replace this one). */
  next(): Promise<LoadedFilesystem>;
  /** This version was replaced or dropped: stop what it runs (its ScriptContext.signal aborts). */
  retire(): void;
  /** Where it came from, for messages. */
  readonly file: string;
}

declare const self: Worker;

let loader: WorkerLoader | null = null;
let session: Session | null = null;
let forward: ForwardEngine | null = null;
let fs: InodeFS | null = null;
/** The loaded version (hot reload loads the next one from it) and a prepared next version. */
let version: LoadedFilesystem | null = null;
let pending: LoadedFilesystem | null = null;
let statsTimer: ReturnType<typeof setInterval> | null = null;

function post(m: FromWorker): void {
  self.postMessage(m);
}

// Fail-stop on this thread (a shared lock held too long, a broken invariant, a script's
// failStop()): the main thread's session aborts the connection and ends the daemon.
let failStopped = false;
function reportFailStop(reason: string): void {
  if (failStopped) return;
  failStopped = true;
  post({ type: "fail-stop", reason });
}
onFailStop(reportFailStop);

/**
 * Test fault (FUSE_URING_FAULT=worker-exit:W:K or worker-throw:W:K): worker W serves K
 * requests, then in the middle of the next handler exits the thread or throws an uncaught
 * error. Only the test options turn this on; a filesystem without the fault is not wrapped.
 */
function withFault(target: InodeFS, fault: string, index: number): InodeFS {
  const m = fault.split(",").map((f) => /^worker-(exit|throw):(\d+):(\d+)$/.exec(f)).find(Boolean);
  if (!m || Number(m[2]) !== index) return target;
  const kind = m[1]!;
  let left = Number(m[3]);
  return new Proxy(target, {
    get(t, key, recv) {
      const v = Reflect.get(t, key, recv);
      if (typeof v !== "function" || typeof key !== "string" || key === "init" || key === "forget" || key === "destroy") return v;
      return function (this: unknown, ...args: unknown[]) {
        if (left-- === 0) {
          if (kind === "exit") process.exit(70);
          // Uncaught: outside the handler's call, so the dispatcher cannot answer it as EIO.
          setTimeout(() => {
            throw new Error(`test fault: worker ${index} throws after ${m[3]} requests`);
          }, 0);
          return new Promise(() => {}); // this request is never answered by the worker
        }
        return (v as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function handle(m: ToWorker): Promise<void> {
  switch (m.type) {
    case "load": {
      if (m.shimPath) setShimPath(m.shimPath);
      if (!m.module) {
        forward = new ForwardEngine(m.fd, m.dataPlane?.handle ?? null, post);
        return post({ type: "loaded" });
      }
      try {
        version = await loader!.load(m.module);
        fs = version.fs;
      } catch (e) {
        return post({ type: "error", message: message(e) });
      }
      if (!servesAsCopy(fs)) {
        return post({
          type: "error",
          message: `${m.module.path}: --workers needs a filesystem whose copies answer alike: declare \`replicable: true\` on the InodeFS ` +
            `(node ids and file handles computed, not counted per copy); this one keeps per-thread state`,
        });
      }
      const opts = {
        ...(m.opts as Partial<SessionOptions>), role: "worker" as const, dataPlaneShare: m.dataPlane, reportFailStop,
        log: (line: string) => post({ type: "log", line: `[worker ${m.index}] ${line}` }),
      };
      const fault = (m.opts as Partial<SessionOptions>).fault ?? "";
      session = new Session(m.fd, fault ? withFault(fs, fault, m.index) : fs, opts);
      return post({ type: "loaded" });
    }
    case "ring": {
      try {
        if (forward) return post({ type: "ring", ok: true, entries: forward.createRing(m.plan) });
        session!.createRing(m.plan);
        return post({ type: "ring", ok: true });
      } catch (e) {
        return post({ type: "ring", ok: false, errno: (e as { errno?: number }).errno ?? 0, message: message(e) });
      }
    }
    case "start": {
      if (forward) {
        const f = forward;
        f.start();
        post({ type: "started", stats: null });
        statsTimer = setInterval(() => post({ type: "stats", stats: f.stats() as SessionStats }), 250); // fresher than copies: the bench reads forwarded and native counts per workload
        void f.stopped.then(() => {
          post({ type: "stats", stats: f.stats() as SessionStats });
          post({ type: "ended", reason: "ring stopped" });
        });
        return;
      }
      const s = session!;
      s.startWorker(m.init);
      post({ type: "started", stats: s.stats() });
      statsTimer = setInterval(() => post({ type: "stats", stats: s.stats() }), 500);
      void s.ended.then((reason) => {
        post({ type: "stats", stats: s.stats() });
        post({ type: "ended", reason });
      });
      return;
    }
    case "commit":
      forward?.commit(m.pairs);
      return;
    case "forget":
      for (let i = 0; i + 1 < m.pairs.length; i += 2) session?.forgetNode(m.pairs[i]!, m.pairs[i + 1]!);
      return;
    case "interrupt":
      session?.interruptUnique(m.unique);
      return;
    case "reload-prepare": {
      try {
        const next = await version!.next();
        if (!servesAsCopy(next.fs)) throw new Error(`${version!.file}: the new version is not \`threads: "stateless"\` (or \`replicable: true\`), which --workers needs`);
        if (session?.initInfo && next.fs.init) await next.fs.init(session.initInfo);
        pending = next;
      } catch (e) {
        return post({ type: "error", message: message(e) });
      }
      return post({ type: "reload-prepared" });
    }
    case "reload-commit": {
      const next = pending;
      pending = null;
      if (!next || !session) return post({ type: "reload-committed", inflight: 0 });
      const inflight = session.replaceFilesystem(next.fs);
      version!.retire();
      version = next;
      fs = next.fs;
      return post({ type: "reload-committed", inflight });
    }
    case "reload-abort":
      pending?.retire();
      pending = null;
      return;
    case "close": {
      if (statsTimer) clearInterval(statsTimer);
      if (forward) {
        await forward.close(m.keepMemory === true);
        post({ type: "stats", stats: forward.stats() as SessionStats });
      }
      if (session) {
        post({ type: "stats", stats: session.stats() });
        await session.close();
      }
      post({ type: "closed" });
      return;
    }
  }
}

/** Serve this worker thread: the pool's messages drive it; `how` loads what it runs. */
export function serveWorker(how: WorkerLoader): void {
  loader = how;
  self.onmessage = (ev: MessageEvent<ToWorker>) => {
    const m = ev.data;
    // The forwarding hot path, without an async frame per message.
    if (m.type === "commit") return forward?.commit(m.pairs);
    handle(m).catch((e) => post({ type: "error", message: message(e) }));
  };
}
