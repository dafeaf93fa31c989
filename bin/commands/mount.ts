// `fuse-uring mount …`: mounts in the foreground and stays until the mount goes away.

import { statSync } from "node:fs";
import type { InodeFS } from "../../lib/fs/types.ts";
import { mount, type Mount } from "../../lib/mount.ts";
import { detach, isFuseMount } from "../../lib/mountpoint.ts";
import type { MountCommand } from "../args.ts";

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
      return { fs: passthrough(cmd.fs.source, { kernelPassthrough: cmd.kernelPassthrough }), label: `passthrough ${cmd.fs.source}` };
    }
    case "script": {
      const { loadScript } = await import("../../lib/script.ts");
      return { fs: await loadScript(cmd.fs.path, { args: cmd.fs.args, mountpoint: cmd.mountpoint }), label: cmd.fs.path };
    }
  }
}

/** Exit code when the connection was aborted (fusectl abort, or the kernel gave up on it). */
export const EXIT_ABORTED = 3;

export async function runMount(cmd: MountCommand): Promise<number> {
  const { fs, label } = await loadFilesystem(cmd);
  const stale = cleanStaleMount(cmd.mountpoint, (line) => process.stderr.write(line + "\n"));
  if (stale) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${stale}\n`);
    return 1;
  }
  if (isFuseMount(cmd.mountpoint)) {
    // Stacking a second FUSE mount hides the first one's files: almost always a mistake.
    process.stderr.write(`fuse-uring: ${cmd.mountpoint} is already a FUSE mount (served by another daemon); unmount it first: fuse-uring unmount ${cmd.mountpoint}\n`);
    return 2;
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
      entryTtl: cmd.entryTtl,
      attrTtl: cmd.attrTtl,
      negativeTtl: cmd.negativeTtl,
      requestTimeout: cmd.requestTimeout,
    });
  } catch (e) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  process.stderr.write(`fuse-uring: mounted ${label} at ${cmd.mountpoint} (transport=${m.transport}: ${m.transportReason})\n`);
  if (signalled) unmountNow(m);
  const reason = await m.closed;
  if (cmd.debug) process.stderr.write(`fuse-uring: session ended: ${reason}${signalled ? ` (after ${signalled})` : reason === "unmounted" ? " (external unmount)" : ""}\n`);
  if (reason.startsWith("connection aborted")) {
    const detached = reason.includes("detaching the dead mount failed") ? "" : "; the dead mount was detached";
    process.stderr.write(`fuse-uring: ${cmd.mountpoint}: ${reason} (fusectl abort, or the kernel ended the connection)${detached}\n`);
    return EXIT_ABORTED;
  }
  return 0;
}
