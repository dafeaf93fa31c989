// The module every worker thread of `--workers N` starts from (lib/threads/pool.ts; in the
// standalone binary the second entry point of scripts/compile.sh). It is the app's side of a
// worker: it knows how a filesystem module is loaded — a script (lib/script.ts), the standalone
// binary's built-in copy modules (lib/embedded-copies.ts), a hot reload (lib/reload/swap.ts) —
// and hands that to the engine's worker runtime (lib/threads/worker-entry.ts).

import { embeddedCopyModule } from "./embedded-copies.ts";
import { needsHook } from "./reload/swap.ts";
import { loadScriptVersion, type LoadScriptOptions, type ScriptVersion } from "./script.ts";
import { registerSelfModule } from "./self-module.ts";
import { serveWorker, type LoadedFilesystem } from "./threads/worker-entry.ts";

function loaded(version: ScriptVersion, options: LoadScriptOptions): LoadedFilesystem {
  return {
    fs: version.fs,
    file: version.file,
    async next() {
      const next = await loadScriptVersion(version.file, options, version);
      const why = next.viaHook ? null : needsHook(version.fs, next.fs);
      if (why) throw new Error(`reload refused: ${why}`);
      return loaded(next, options);
    },
    retire: () => version.controller.abort(),
  };
}

// Scripts that `import … from "fuse-uring"` get this library, as on the main thread.
registerSelfModule();
// A handler's stray promise that rejects is logged and the worker serves on, as on the main
// thread (bin/commands/mount.ts); only an uncaught exception or an exit stops the mount.
const seenRejections = new Set<string>();
process.on("unhandledRejection", (e) => {
  const text = e instanceof Error ? (e.stack ?? e.message) : String(e);
  if (seenRejections.has(text)) return;
  if (seenRejections.size < 100) seenRejections.add(text);
  console.error(`fuse-uring: unhandled promise rejection in the filesystem (ignored; return or await the promise): ${text}`);
});
serveWorker({
  async load(module) {
    // The built-in copy modules of the standalone binary come from this bundle, not from disk.
    const embedded = embeddedCopyModule(module.path) ?? undefined;
    const options: LoadScriptOptions = { args: module.args, mountpoint: module.mountpoint, shared: module.shared, embedded };
    return loaded(await loadScriptVersion(module.path, options), options);
  },
});
