// What the command line parses into (bin/args.ts) and the error a bad one raises: its own module
// so that the -o parser (bin/mount-options.ts) and the flag parser share it without importing
// each other.

import type { VfsOptions } from "../lib/mountpoint.ts";
import type { StatsCommand } from "./commands/stats.ts";

export class UsageError extends Error {}

export interface MountCommand {
  kind: "mount";
  fs: { type: "memfs" } | { type: "passthrough"; source: string } | { type: "script"; path: string; args: string[] };
  mountpoint: string;
  transport: "auto" | "uring" | "classic";
  /** 0 = sized to the pinned-memory budget */
  queueDepth: number;
  /** 0 = sized to the pinned-memory budget */
  maxWrite: number;
  dataPlane: "native" | "js";
  /** Threads serving the ring queues (copies of a replicable script, else forwarding to the main thread); "auto": Session. */
  workers: number | "auto";
  statsFile?: string;
  debug: boolean;
  /** Hot-reload the script when it (or a local file it imports) changes. */
  watch?: boolean;
  allowOther: boolean;
  defaultPermissions: boolean;
  readOnly: boolean;
  fsname?: string;
  subtype?: string;
  writebackCache: boolean;
  kernelPassthrough: boolean;
  /** --passthrough: O_PATH descriptor budget (undefined: the default). */
  fdBudget?: number;
  /** --passthrough: re-open evicted inodes by kernel file handle when permitted (default true). */
  fileHandles: boolean;
  fixedBuffers: boolean;
  /** --backing-cache: O_DIRECT opens keep a buffered backing descriptor (host page cache). */
  backingCache: boolean;
  /** --pool-size: buffer pool bytes per queue (Linux >= 7.3); -1 default, 0 off. */
  poolSize: number;
  /** false: --no-zero-copy. */
  zeroCopy: boolean;
  entryTtl: number;
  attrTtl: number;
  negativeTtl: number;
  /** Seconds; 0 = no timeout. */
  requestTimeout: number;
  /** Tuning flags (lib/knobs.ts); undefined: the environment or the default. */
  slowRequestMs?: number;
  ringWaitMicros?: number;
  ringFlags?: number;
  nativeSyncMax?: number;
  /** false: --no-pin. */
  pin?: boolean;
  /** false: --no-native-getattr. */
  nativeGetattr?: boolean;
  lockSpinMicros?: number;
  /** --test NAME[=VALUE]: the suite's test options. */
  test?: { poison?: boolean; fault?: string; poolFault?: string };
  /** VFS flags and kernel options from -o (noexec, noatime, max_read=, …). */
  vfs?: VfsOptions;
}

export interface DoctorCommand {
  kind: "doctor";
  json: boolean;
}

export type Command = { kind: "help" } | { kind: "version" } | StatsCommand | { kind: "unmount"; mountpoint: string } | DoctorCommand | MountCommand;

