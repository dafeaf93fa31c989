// `-o opt[,opt…]`: the mount options every FUSE filesystem accepts (libfuse, mount.fuse(8),
// fstab), mapped onto the long flags. Also what mount(8) hands to bin/mount.fuse.fuse-uring,
// so fuse-uring's own settings have -o spellings too (transport=, queue_depth=, …).
// Unknown options are errors that name the option: a typo must not be silently ignored.

import { UsageError, type MountCommand } from "./command.ts";

export type OptionTarget = Omit<MountCommand, "fs" | "mountpoint">;

/** Options of mount(8)/fstab itself; they mean nothing to the filesystem and are dropped. */
const BOOKKEEPING = new Set(["defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "_netdev", "nofail", "loop"]);

function intValue(opt: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (v === "" || !Number.isInteger(n) || n < min || n > max) throw new UsageError(`-o ${opt}= must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
  return n;
}

function secondsValue(opt: string, v: string): number {
  const n = Number(v);
  if (v === "" || !Number.isFinite(n) || n < 0) throw new UsageError(`-o ${opt}= must be a number of seconds ≥ 0, got ${JSON.stringify(v)}`);
  return n;
}

function textValue(opt: string, v: string): string {
  if (v === "") throw new UsageError(`-o ${opt}= needs a value`);
  return v;
}

type Setter = (c: OptionTarget, value: string | undefined, opt: string) => void;
const flag = (f: (c: OptionTarget) => void): Setter => (c, v, opt) => {
  if (v !== undefined) throw new UsageError(`-o ${opt} takes no value`);
  f(c);
};
const valued = (f: (c: OptionTarget, v: string, opt: string) => void): Setter => (c, v, opt) => {
  if (v === undefined) throw new UsageError(`-o ${opt} needs a value (${opt}=…)`);
  f(c, v, opt);
};
type VfsSwitch = "suid" | "dev" | "noexec" | "noatime" | "nodiratime" | "sync" | "dirsync";
const kernelFlag = (name: VfsSwitch, on: boolean): Setter => flag((c) => void ((c.vfs ??= {})[name] = on));

/** Every accepted option; documented in USAGE (args.ts) and README. */
export const MOUNT_OPTIONS: Record<string, Setter> = {
  ro: flag((c) => void (c.readOnly = true)),
  rw: flag((c) => void (c.readOnly = false)),
  allow_other: flag((c) => void (c.allowOther = true)),
  default_permissions: flag((c) => void (c.defaultPermissions = true)),
  no_default_permissions: flag((c) => void (c.defaultPermissions = false)),
  fsname: valued((c, v, o) => void (c.fsname = textValue(o, v))),
  subtype: valued((c, v, o) => void (c.subtype = textValue(o, v))),
  max_read: valued((c, v, o) => void ((c.vfs ??= {}).maxRead = intValue(o, v, 4096, 1 << 20))),
  max_write: valued((c, v, o) => void (c.maxWrite = intValue(o, v, 4096, 1 << 20))),
  entry_timeout: valued((c, v, o) => void (c.entryTtl = secondsValue(o, v))),
  attr_timeout: valued((c, v, o) => void (c.attrTtl = secondsValue(o, v))),
  negative_timeout: valued((c, v, o) => void (c.negativeTtl = secondsValue(o, v))),
  writeback_cache: flag((c) => void (c.writebackCache = true)),
  debug: flag((c) => void (c.debug = true)),
  // VFS flags (MS_*): nosuid and nodev are always on for FUSE unless root asks for suid/dev.
  nosuid: kernelFlag("suid", false),
  suid: kernelFlag("suid", true),
  nodev: kernelFlag("dev", false),
  dev: kernelFlag("dev", true),
  noexec: kernelFlag("noexec", true),
  exec: kernelFlag("noexec", false),
  noatime: kernelFlag("noatime", true),
  atime: kernelFlag("noatime", false),
  relatime: kernelFlag("noatime", false),
  nodiratime: kernelFlag("nodiratime", true),
  diratime: kernelFlag("nodiratime", false),
  sync: kernelFlag("sync", true),
  async: kernelFlag("sync", false),
  dirsync: kernelFlag("dirsync", true),
  // fuse-uring's own settings (for fstab / mount -t fuse.fuse-uring, where only -o passes)
  transport: valued((c, v) => {
    if (v !== "auto" && v !== "uring" && v !== "classic") throw new UsageError(`-o transport= must be auto, uring or classic, got ${JSON.stringify(v)}`);
    c.transport = v;
  }),
  queue_depth: valued((c, v, o) => void (c.queueDepth = intValue(o, v, 1, 1024))),
  stats_file: valued((c, v, o) => void (c.statsFile = textValue(o, v))),
  kernel_passthrough: flag((c) => void (c.kernelPassthrough = true)),
  no_fixed_buffers: flag((c) => void (c.fixedBuffers = false)),
  backing_cache: flag((c) => void (c.backingCache = true)),
  pool_size: valued((c, v, o) => void (c.poolSize = intValue(o, v, 0, 1 << 30))),
  no_zero_copy: flag((c) => void (c.zeroCopy = false)),
  request_timeout: valued((c, v, o) => {
    const t = secondsValue(o, v);
    if (t <= 0) throw new UsageError("-o request_timeout= must be > 0 seconds (leave it out to wait forever)");
    c.requestTimeout = t;
  }),
};

/** Split at commas not preceded by a backslash (mount(8) escaping), then unescape. */
function splitOptions(s: string): string[] {
  return s.split(/(?<!\\),/).map((o) => o.replace(/\\,/g, ","));
}

/** Apply one `-o` argument ("ro,fsname=x,…") to `cmd`. */
export function applyMountOptions(cmd: OptionTarget, list: string): void {
  if (list === "") throw new UsageError("-o needs a comma-separated list of mount options");
  for (const item of splitOptions(list)) {
    if (item === "") continue;
    const eq = item.indexOf("=");
    const name = eq < 0 ? item : item.slice(0, eq);
    const value = eq < 0 ? undefined : item.slice(eq + 1);
    if (BOOKKEEPING.has(name) || name.startsWith("x-") || name === "comment") continue;
    const set = MOUNT_OPTIONS[name];
    if (!set) throw new UsageError(`unknown mount option ${JSON.stringify(name)} in -o ${list}`);
    set(cmd, value, name);
  }
}

/** Whether `name` is an option `-o` accepts (or ignores as mount(8)/fstab bookkeeping). */
export function isKnownMountOption(name: string): boolean {
  return name in MOUNT_OPTIONS || BOOKKEEPING.has(name) || name.startsWith("x-") || name === "comment";
}
