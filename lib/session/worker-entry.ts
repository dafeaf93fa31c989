// A worker thread of `--workers N` (lib/session/workers.ts): loads its own copy of the
// filesystem module, creates its own io_uring for its share of the queues (this thread is the
// ring's submitter), and serves those queues like the main thread would in single-thread mode.
// Forwarding mode (no module: the filesystem stays on the main thread): only the ring and the
// native data plane run here (forward-worker.ts).

import { setShimPath } from "../native.ts";
import { loadScriptVersion, type LoadScriptOptions, type ScriptVersion } from "../script.ts";
import { embeddedCopyModule } from "../fs/builtin-copies.ts";
import { needsHook } from "../reload/swap.ts";
import type { InodeFS } from "../fs/types.ts";
import { ForwardEngine } from "./forward-worker.ts";
import { Session, type SessionOptions, type SessionStats } from "./session.ts";
import type { FromWorker, ToWorker } from "./workers.ts";

declare const self: Worker;

let session: Session | null = null;
let forward: ForwardEngine | null = null;
let fs: InodeFS | null = null;
/** The loaded module (hot reload loads the next one from it) and a prepared next version. */
let version: ScriptVersion | null = null;
let loadOptions: LoadScriptOptions | null = null;
let pending: ScriptVersion | null = null;
let statsTimer: ReturnType<typeof setInterval> | null = null;

function post(m: FromWorker): void {
  self.postMessage(m);
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

async function handle(m: ToWorker): Promise<void> {
  switch (m.type) {
    case "load": {
      if (m.shimPath) setShimPath(m.shimPath);
      // Scripts that `import … from "fuse-uring"` get this library, as on the main thread.
      const { registerSelfModule } = await import("../../bin/self-module.ts");
      registerSelfModule();
      if (!m.module) {
        forward = new ForwardEngine(m.fd, m.dataPlane?.handle ?? null, post);
        return post({ type: "loaded" });
      }
      try {
        // The built-in copy modules of the standalone binary come from this bundle, not from disk.
        const embedded = embeddedCopyModule(m.module.path) ?? undefined;
        loadOptions = { args: m.module.args, mountpoint: m.module.mountpoint, shared: m.module.shared, embedded };
        version = await loadScriptVersion(m.module.path, loadOptions);
        fs = version.fs;
      } catch (e) {
        return post({ type: "error", message: message(e) });
      }
      if (fs.replicable !== true) {
        return post({
          type: "error",
          message: `${m.module.path}: --workers needs a filesystem whose copies answer alike: declare \`replicable: true\` on the InodeFS ` +
            `(node ids and file handles computed, not counted per copy); this one keeps per-thread state`,
        });
      }
      const opts = { ...(m.opts as Partial<SessionOptions>), role: "worker" as const, dataPlaneShare: m.dataPlane, log: (line: string) => post({ type: "log", line: `[worker ${m.index}] ${line}` }) };
      session = new Session(m.fd, fs, opts);
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
        const next = await loadScriptVersion(version!.file, loadOptions!, version!);
        const why = next.viaHook ? null : needsHook(version!.fs, next.fs);
        if (why) throw new Error(`reload refused: ${why}`);
        if (next.fs.replicable !== true) throw new Error(`${version!.file}: the new version is not \`replicable: true\`, which --workers needs`);
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
      version!.controller.abort();
      version = next;
      fs = next.fs;
      return post({ type: "reload-committed", inflight });
    }
    case "reload-abort":
      pending?.controller.abort();
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

self.onmessage = (ev: MessageEvent<ToWorker>) => {
  const m = ev.data;
  // The forwarding hot path, without an async frame per message.
  if (m.type === "commit") return forward?.commit(m.pairs);
  handle(m).catch((e) => post({ type: "error", message: message(e) }));
};
