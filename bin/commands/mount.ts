// `fuse-uring mount …`: mounts in the foreground and stays until the mount goes away.

import { resolve } from "node:path";
import { statSync } from "node:fs";
import type { InodeFS } from "../../lib/session/filesystem.ts";
import type { ScriptVersion } from "../../lib/script.ts";
import { mount, type Mount, type MountOptions } from "../../lib/mount.ts";
import { knobs, setKnob } from "../../lib/knobs.ts";
import { detach, detachAsync, fuseDeviceAt, isDeviceMounted } from "../../lib/mountpoint.ts";
import type { MountCommand } from "../args.ts";
import { publishStats, statsPathFor } from "../runtime.ts";
import { VERSION } from "../version.ts";

function deadMountError(mountpoint: string): string | null {
  try {
    statSync(mountpoint);
    return null;
  } catch (e) {
    const code = (e as { code?: string }).code;
    return code === "ENOTCONN" || code === "ECONNABORTED" ? code : null;
  }
}

/**
 * A mountpoint left behind by a daemon that died (kill -9, crash): every access fails with
 * "Transport endpoint is not connected". Detach it lazily (also stacked dead mounts) so the new
 * mount can take its place, with a one-line notice. Returns an error message if that fails.
 */
export function cleanStaleMount(mountpoint: string, log: (line: string) => void): string | null {
  for (let i = 0; i < 8; i++) {
    const code = deadMountError(mountpoint);
    if (!code) return null;
    const err = detach(mountpoint, true);
    if (err && deadMountError(mountpoint)) {
      return `${mountpoint} is a dead FUSE mount (${code === "ENOTCONN" ? "Transport endpoint is not connected" : "connection aborted"}) and cleaning it up failed: ${err}`;
    }
    log(`fuse-uring: ${mountpoint} was a dead FUSE mount left by a daemon that exited (${code === "ENOTCONN" ? "Transport endpoint is not connected" : "connection aborted"}); unmounted it (lazy) and mounting again`);
  }
  return `${mountpoint} is still a dead FUSE mount after 8 lazy unmounts`;
}

async function loadFilesystem(cmd: MountCommand): Promise<{ fs: InodeFS; label: string }> {
  switch (cmd.fs.type) {
    case "memfs": {
      const { memfs } = await import("../../lib/fs/memfs.ts");
      return { fs: memfs(), label: "memfs" };
    }
    case "passthrough": {
      const { passthrough } = await import("../../lib/fs/passthrough.ts");
      const fs = passthrough(cmd.fs.source, { kernelPassthrough: cmd.kernelPassthrough, fdBudget: cmd.fdBudget, fileHandles: cmd.fileHandles });
      if (cmd.debug) process.stderr.write(fs.describeDescriptors() + "\n");
      return { fs, label: `passthrough ${cmd.fs.source}` };
    }
    case "script": {
      const { loadScriptVersion } = await import("../../lib/script.ts");
      const script = await loadScriptVersion(cmd.fs.path, { args: cmd.fs.args, mountpoint: cmd.mountpoint });
      loadedScripts.set(script.fs, script);
      return { fs: script.fs, label: cmd.fs.path };
    }
  }
}

/** Tuning and test flags given on the command line (lib/knobs.ts); the rest keeps the environment's. */
function knobFlags(cmd: MountCommand): Partial<MountOptions> {
  const o: Partial<MountOptions> = {};
  if (cmd.slowRequestMs !== undefined) o.slowRequestMs = cmd.slowRequestMs;
  if (cmd.ringWaitMicros !== undefined) o.ringWaitMicros = cmd.ringWaitMicros;
  if (cmd.ringFlags !== undefined) o.ringSetupFlags = cmd.ringFlags;
  if (cmd.nativeSyncMax !== undefined) o.nativeSyncMax = cmd.nativeSyncMax;
  if (cmd.pin === false) o.pinWorkers = false;
  if (cmd.nativeGetattr === false) o.nativeGetattr = false;
  if (cmd.test?.poison) o.poison = true;
  if (cmd.test?.fault) o.fault = cmd.test.fault;
  if (cmd.test?.poolFault) o.poolFault = cmd.test.poolFault;
  return o;
}

/** Exit codes of `fuse-uring mount` (documented in USAGE and README). */
export const EXIT = { unmount: 0, signal: 0, error: 1, usage: 2, aborted: 3, failStop: 4 } as const;

/**
 * How the session ended, as the one stop line names it, and the exit code that tells the ways
 * apart. `reason` is the session's end reason (Mount.closed). A connection aborted through
 * fusectl leaves its mount (device `dev`) in place, which identifies it also when the session
 * reports the end generically.
 */
export function stopReason(reason: string, signal: string | null, dev: string | null): { text: string; code: number } {
  // The daemon stopped itself (lib/shared/fail-stop.ts): a worker died, a lock or an invariant broke.
  if (reason.startsWith("fail-stop:")) return { text: reason.replace(/; detaching the dead mount failed: .*/, ""), code: EXIT.failStop };
  if (signal) return { text: `signal ${signal}`, code: EXIT.signal };
  // "connection aborted" (the dead mount was detached) or "…; detaching the dead mount failed: …"
  if (/abort/i.test(reason)) return { text: reason.startsWith("connection aborted") ? reason : "connection aborted", code: EXIT.aborted };
  // The transports may see the end as ENODEV (/dev/fuse) or ENOTCONN (ring entries) first.
  if (reason === "unmounted" || /\b(ENOTCONN|ENODEV)\b/.test(reason)) {
    if (dev && isDeviceMounted(dev)) return { text: "connection aborted", code: EXIT.aborted };
    return { text: "unmount", code: EXIT.unmount };
  }
  return { text: `error: ${reason}`, code: EXIT.error };
}

export async function runMount(cmd: MountCommand): Promise<number> {
  // Read by the filesystem's threads (memfs copies) at load time: set for the process first.
  if (cmd.lockSpinMicros !== undefined) setKnob("FUSE_URING_SPIN_US", String(cmd.lockSpinMicros));
  const { fs, label } = await loadFilesystem(cmd);
  const stale = cleanStaleMount(cmd.mountpoint, (line) => process.stderr.write(line + "\n"));
  if (stale) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${stale}\n`);
    return 1;
  }
  if (fuseDeviceAt(cmd.mountpoint) !== null) {
    // Stacking a second FUSE mount hides the first one's files: almost always a mistake.
    process.stderr.write(`fuse-uring: ${cmd.mountpoint} is already a FUSE mount (served by another daemon); unmount it first: fuse-uring unmount ${cmd.mountpoint}\n`);
    return EXIT.usage;
  }
  // A handler's stray promise (fire-and-forget, not returned) that rejects must not take the
  // whole mount down with every caller: log it once per distinct error and serve on.
  const seenRejections = new Set<string>();
  process.on("unhandledRejection", (e) => {
    const text = e instanceof Error ? (e.stack ?? e.message) : String(e);
    if (seenRejections.has(text)) return;
    if (seenRejections.size < 100) seenRejections.add(text);
    process.stderr.write(`fuse-uring: unhandled promise rejection in the filesystem (ignored; return or await the promise): ${text}\n`);
  });
  // Handlers go in before mounting: Bun installs them asynchronously, and a SIGTERM that
  // arrives right after the ready line must unmount, not kill the daemon mid-mount.
  let m: Mount | null = null;
  let signalled: string | null = null;
  const unmountNow = (mnt: Mount) =>
    mnt.unmount().catch((e) => process.stderr.write(`fuse-uring: unmount failed: ${e instanceof Error ? e.message : e}
`));
  const onSignal = (sig: string) => {
    if (signalled) return;
    signalled = sig;
    if (cmd.debug) process.stderr.write(`fuse-uring: ${sig}, unmounting ${cmd.mountpoint}
`);
    if (m) unmountNow(m);
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  try {
    m = await mount(cmd.mountpoint, fs, {
      transport: cmd.transport,
      queueDepth: cmd.queueDepth,
      maxWrite: cmd.maxWrite,
      statsFile: cmd.statsFile,
      debug: cmd.debug,
      allowOther: cmd.allowOther,
      defaultPermissions: cmd.defaultPermissions,
      readOnly: cmd.readOnly,
      fsname: cmd.fsname,
      subtype: cmd.subtype,
      writebackCache: cmd.writebackCache,
      kernelPassthrough: cmd.kernelPassthrough,
      fixedBuffers: cmd.fixedBuffers,
      backingCache: cmd.backingCache,
      poolSize: cmd.poolSize,
      zeroCopy: cmd.zeroCopy && knobs.zeroCopy(),
      dataPlane: cmd.dataPlane,
      workers: cmd.workers,
      // How a worker loads this script again if it is stateless (lib/threads/plan.ts decides).
      workerModule: cmd.fs.type === "script" ? { path: resolve(cmd.fs.path), args: cmd.fs.args, mountpoint: cmd.mountpoint } : null,
      entryTtl: cmd.entryTtl,
      attrTtl: cmd.attrTtl,
      negativeTtl: cmd.negativeTtl,
      requestTimeout: cmd.requestTimeout,
      vfs: cmd.vfs,
      ...knobFlags(cmd),
    });
  } catch (e) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  process.stderr.write(`fuse-uring: mounted ${label} at ${cmd.mountpoint} (transport=${m.transport}: ${m.transportReason}; buffers: ${m.stats().bufferPoolsReason})\n`);
  // Exactly one stop line, whichever way the daemon ends.
  let stopped = false;
  const stopLine = (text: string) => {
    if (stopped) return;
    stopped = true;
    process.stderr.write(`fuse-uring: unmounted ${cmd.mountpoint} (${text})\n`);
  };
  void m.session.failed.then(({ reason, aborted }) => {
    // Aborted: the transports end and m.closed settles below (bounded here). Not aborted (no
    // fusectl mounted): only this process ending ends the connection (its rings and /dev/fuse
    // close, KERNEL.md §5): detach the mount from a child process, then exit.
    setTimeout(async () => {
      if (stopped) return;
      await Promise.race([detachAsync(cmd.mountpoint, true), Bun.sleep(2000)]);
      stopLine(`fail-stop: ${reason}`);
      process.exit(EXIT.failStop);
    }, aborted ? 5000 : 0);
  });
  const dev = fuseDeviceAt(cmd.mountpoint);
  // Live stats for `fuse-uring stats MNT`, found through the mount's device number.
  const mounted = m;
  const live = dev ? publishStats(statsPathFor(dev), () => ({ ...mounted.stats(), pid: process.pid, version: VERSION, label, device: dev })) : null;
  if (signalled) unmountNow(m);
  if (cmd.watch) await startWatching(cmd, m, loadedScripts.get(fs), label);
  const reason = await m.closed;
  live?.stop();
  if (cmd.debug) process.stderr.write(`fuse-uring: session ended: ${reason}${signalled ? ` (after ${signalled})` : reason === "unmounted" ? " (external unmount)" : ""}\n`);
  const stop = stopReason(reason, signalled, dev);
  stopLine(stop.text);
  return stop.code;
}

/** The loaded version of a script filesystem, for --watch (which reloads from it). */
const loadedScripts = new WeakMap<InodeFS, ScriptVersion>();

/** --watch: reload the script in place when it or a local file it imports changes; SIGHUP forces it. */
async function startWatching(cmd: MountCommand, m: Mount, script: ScriptVersion | undefined, label: string): Promise<void> {
  if (!script || cmd.fs.type !== "script") return;
  const { watchScript } = await import("../../lib/reload/watch.ts");
  const w = watchScript(m, script, { args: cmd.fs.args, mountpoint: cmd.mountpoint });
  process.on("SIGHUP", () => void w.reload(true));
  const n = w.watchedFiles.length;
  process.stderr.write(`fuse-uring: watching ${n} file${n === 1 ? "" : "s"} for changes (${label} and its local imports); edits reload in place\n`);
}
