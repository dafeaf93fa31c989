// `fuse-uring mount …`: mounts in the foreground and stays until the mount goes away.

import { statSync } from "node:fs";
import type { InodeFS } from "../../lib/fs/types.ts";
import { mount, type Mount } from "../../lib/mount.ts";
import { detach } from "../../lib/mountpoint.ts";
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
      const fs = passthrough(cmd.fs.source, { kernelPassthrough: cmd.kernelPassthrough, fdBudget: cmd.fdBudget, fileHandles: cmd.fileHandles });
      if (cmd.debug) process.stderr.write(fs.describeDescriptors() + "\n");
      return { fs, label: `passthrough ${cmd.fs.source}` };
    }
    case "script": {
      const { loadScript } = await import("../../lib/script.ts");
      return { fs: await loadScript(cmd.fs.path, { args: cmd.fs.args, mountpoint: cmd.mountpoint }), label: cmd.fs.path };
    }
  }
}

export async function runMount(cmd: MountCommand): Promise<number> {
  const { fs, label } = await loadFilesystem(cmd);
  const stale = cleanStaleMount(cmd.mountpoint, (line) => process.stderr.write(line + "\n"));
  if (stale) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${stale}\n`);
    return 1;
  }
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
    });
  } catch (e) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  process.stderr.write(`fuse-uring: mounted ${label} at ${cmd.mountpoint} (transport=${m.transport}: ${m.transportReason})\n`);
  if (signalled) unmountNow(m);
  const reason = await m.closed;
  if (cmd.debug) process.stderr.write(`fuse-uring: session ended (${reason})\n`);
  return 0;
}
