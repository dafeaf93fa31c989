// `fuse-uring mount …`: mounts in the foreground and stays until the mount goes away.

import type { InodeFS } from "../../lib/fs/types.ts";
import { mount, type Mount } from "../../lib/mount.ts";
import type { MountCommand } from "../args.ts";

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
      return { fs: await loadScript(cmd.fs.path), label: cmd.fs.path };
    }
  }
}

export async function runMount(cmd: MountCommand): Promise<number> {
  const { fs, label } = await loadFilesystem(cmd);
  let m: Mount;
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
      entryTtl: cmd.entryTtl,
      attrTtl: cmd.attrTtl,
      negativeTtl: cmd.negativeTtl,
    });
  } catch (e) {
    process.stderr.write(`fuse-uring: cannot mount ${label} at ${cmd.mountpoint}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  process.stderr.write(`fuse-uring: mounted ${label} at ${cmd.mountpoint} (transport=${m.transport}: ${m.transportReason})\n`);
  let signalled = false;
  const onSignal = (sig: string) => {
    if (signalled) return;
    signalled = true;
    if (cmd.debug) process.stderr.write(`fuse-uring: ${sig}, unmounting ${cmd.mountpoint}\n`);
    m.unmount().catch((e) => process.stderr.write(`fuse-uring: unmount failed: ${e instanceof Error ? e.message : e}\n`));
  };
  process.on("SIGINT", () => onSignal("SIGINT"));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  const reason = await m.closed;
  if (cmd.debug) process.stderr.write(`fuse-uring: session ended (${reason})\n`);
  return 0;
}
