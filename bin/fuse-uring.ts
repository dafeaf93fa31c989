#!/usr/bin/env bun
// fuse-uring command line: mount a filesystem in the foreground, unmount (also after a crash),
// check the system (doctor).

import { parseArgs, UsageError, USAGE } from "./args.ts";
import { registerSelfModule } from "./self-module.ts";
import { reexecWithoutFtl } from "./jit.ts";

async function main(argv: string[]): Promise<number> {
  let cmd;
  try {
    cmd = parseArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`fuse-uring: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    throw e;
  }
  switch (cmd.kind) {
    case "help":
      process.stdout.write(USAGE);
      return 0;
    case "version": {
      const { versionLine } = await import("./version.ts");
      process.stdout.write(versionLine() + "\n");
      return 0;
    }
    case "unmount": {
      const { unmount } = await import("./commands/unmount.ts");
      return unmount(cmd.mountpoint);
    }
    case "stats": {
      const { stats } = await import("./commands/stats.ts");
      return stats(cmd);
    }
    case "doctor": {
      const { doctor } = await import("./commands/doctor.ts");
      return doctor(cmd);
    }
    case "mount": {
      // Before anything else: the built-in passthrough runs without the FTL JIT tier (bin/jit.ts).
      if (cmd.fs.type === "passthrough") reexecWithoutFtl();
      registerSelfModule();
      const { runMount } = await import("./commands/mount.ts");
      return runMount(cmd);
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`fuse-uring: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
