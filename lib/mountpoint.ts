// Attaching a /dev/fuse fd to a mountpoint: mount(2) as root, fusermount3 (the setuid
// helper, `_FUSE_COMMFD` fd passing) otherwise; and detaching again, even when the daemon that
// served the mount is gone.

import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { cstr, native } from "./native.ts";
import { errnoName } from "./protocol/errors.ts";

export interface MountFlags {
  fsname: string;
  subtype: string;
  allowOther: boolean;
  defaultPermissions: boolean;
  readOnly: boolean;
  /** extra comma-separated kernel options, e.g. "max_read=131072" */
  extra?: string;
  vfs?: VfsOptions;
}

/** VFS mount flags and FUSE kernel options beyond the basics (mount -o noexec,noatime,…). */
export interface VfsOptions {
  /** Honour set-user-ID bits (root only; FUSE mounts are nosuid by default). */
  suid?: boolean;
  /** Honour device files (root only; FUSE mounts are nodev by default). */
  dev?: boolean;
  noexec?: boolean;
  noatime?: boolean;
  nodiratime?: boolean;
  sync?: boolean;
  dirsync?: boolean;
  /** Largest READ the kernel sends (the FUSE max_read= option). */
  maxRead?: number;
}

const MS_RDONLY = 1;
const MS_NOSUID = 2;
const MS_NODEV = 4;
const MS_NOEXEC = 8;
const MS_SYNCHRONOUS = 16;
const MS_DIRSYNC = 128;
const MS_NOATIME = 1024;
const MS_NODIRATIME = 2048;
export const MNT_FORCE = 1;
export const MNT_DETACH = 2;

export class MountError extends Error {
  constructor(message: string, readonly errno = 0) {
    super(message);
    this.name = "MountError";
  }
}

/** The kernel parses commas in options; an fsname with a comma would inject options. */
function checkOptionValue(what: string, value: string): void {
  if (/[,\s\\]/.test(value)) throw new MountError(`${what} must not contain commas, spaces or backslashes: ${JSON.stringify(value)}`);
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Explains a mountpoint that cannot be used, or returns null when it looks fine. */
export function checkMountpoint(mountpoint: string): string | null {
  let st;
  try {
    st = statSync(mountpoint);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ENOTCONN") return `${mountpoint} is a dead FUSE mount (Transport endpoint is not connected); clean it up with: fuse-uring unmount ${mountpoint}`;
    if (code === "ENOENT") return `mountpoint ${mountpoint} does not exist (create it with: mkdir -p ${mountpoint})`;
    return `cannot use mountpoint ${mountpoint}: ${code ?? String(e)}`;
  }
  if (!st.isDirectory()) return `mountpoint ${mountpoint} is not a directory`;
  return null;
}

export function isMounted(mountpoint: string): boolean {
  const abs = resolve(mountpoint);
  const text = readFileSync("/proc/self/mountinfo", "utf8");
  for (const line of text.split("\n")) {
    const f = line.split(" ");
    if (f[4] && unescapeMountinfo(f[4]) === abs) return true;
  }
  return false;
}

/**
 * The device ("major:minor", as in mountinfo and st_dev) of the topmost FUSE mount at
 * `mountpoint`, read from /proc/self/mountinfo (never touches the mount itself), or null.
 */
export function fuseDeviceAt(mountpoint: string): string | null {
  const abs = resolve(mountpoint);
  let dev: string | null = null;
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const f = line.split(" ");
    const type = f[f.indexOf("-", 6) + 1] ?? "";
    if (f[4] && unescapeMountinfo(f[4]) === abs && (type === "fuse" || type.startsWith("fuse."))) dev = f[2]!;
  }
  return dev;
}

/** Whether a mount of device `dev` ("major:minor") is still in this mount namespace. */
export function isDeviceMounted(dev: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((line) => line.split(" ")[2] === dev);
}

function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Opens /dev/fuse and mounts it (root: mount(2); otherwise fusermount3). Returns the fd. */
export function attach(mountpoint: string, flags: MountFlags): { fd: number; via: "mount" | "fusermount3" } {
  checkOptionValue("fsname", flags.fsname);
  checkOptionValue("subtype", flags.subtype);
  const problem = checkMountpoint(mountpoint);
  if (problem) throw new MountError(problem);
  if (!existsSync("/dev/fuse")) throw new MountError("/dev/fuse is missing: load the fuse module (modprobe fuse) or, in a container, pass --device /dev/fuse");
  const target = resolve(mountpoint);
  if (!isRoot()) return attachFusermount(target, flags);
  try {
    return attachRoot(target, flags);
  } catch (e) {
    // uid 0 without CAP_SYS_ADMIN (a rootless container): the setuid helper may still work.
    if (e instanceof MountError && e.errno === 1 && existsSync("/usr/bin/fusermount3")) return attachFusermount(target, flags);
    throw e;
  }
}

function attachRoot(target: string, flags: MountFlags): { fd: number; via: "mount" } {
  const n = native();
  const fd = n.fu_dev_open();
  if (fd < 0) throw new MountError(`cannot open /dev/fuse: ${errnoName(-fd)}`, -fd);
  const rootmode = (statSync(target).mode & 0o170000).toString(8);
  const opts = [`fd=${fd}`, `rootmode=${rootmode}`, `user_id=${process.getuid!()}`, `group_id=${process.getgid!()}`];
  if (flags.defaultPermissions) opts.push("default_permissions");
  if (flags.allowOther) opts.push("allow_other");
  if (flags.extra) opts.push(flags.extra);
  const v = flags.vfs ?? {};
  if (v.maxRead) opts.push(`max_read=${v.maxRead}`);
  let mflags = (v.suid ? 0 : MS_NOSUID) | (v.dev ? 0 : MS_NODEV);
  if (flags.readOnly) mflags |= MS_RDONLY;
  if (v.noexec) mflags |= MS_NOEXEC;
  if (v.noatime) mflags |= MS_NOATIME;
  if (v.nodiratime) mflags |= MS_NODIRATIME;
  if (v.sync) mflags |= MS_SYNCHRONOUS;
  if (v.dirsync) mflags |= MS_DIRSYNC;
  const rc = n.fu_mount(cstr(flags.fsname), cstr(target), cstr(`fuse.${flags.subtype}`), mflags, cstr(opts.join(",")));
  if (rc < 0) {
    n.fu_close(fd);
    const e = -rc;
    const hint = e === 1 ? " (need root or CAP_SYS_ADMIN)" : e === 16 ? " (mountpoint busy)" : e === 19 ? " (fuse filesystem type unknown: modprobe fuse)" : "";
    throw new MountError(`mount(2) of ${target} failed: ${errnoName(e)}${hint}`, e);
  }
  return { fd, via: "mount" };
}

function fusermountPath(): string {
  for (const p of ["/usr/bin/fusermount3", "/bin/fusermount3", "/usr/local/bin/fusermount3"]) if (existsSync(p)) return p;
  throw new MountError("fusermount3 not found: install the fuse3 package (apt-get install fuse3), or run as root");
}

function attachFusermount(target: string, flags: MountFlags): { fd: number; via: "fusermount3" } {
  const n = native();
  const pair = new Int32Array(2);
  const rc = n.fu_socketpair(pair);
  if (rc < 0) throw new MountError(`socketpair failed: ${errnoName(-rc)}`, -rc);
  const opts = [`fsname=${flags.fsname}`, `subtype=${flags.subtype}`, "nosuid", "nodev"];
  if (flags.defaultPermissions) opts.push("default_permissions");
  if (flags.allowOther) opts.push("allow_other");
  if (flags.readOnly) opts.push("ro");
  if (flags.extra) opts.push(flags.extra);
  const v = flags.vfs ?? {};
  if (v.maxRead) opts.push(`max_read=${v.maxRead}`);
  for (const [k, on] of [["noexec", v.noexec], ["noatime", v.noatime], ["nodiratime", v.nodiratime], ["sync", v.sync], ["dirsync", v.dirsync]] as const) if (on) opts.push(k);
  if (v.suid || v.dev) throw new MountError("suid and dev need root (fusermount3 always mounts nosuid,nodev)");
  // fusermount3 receives our end of the socket as fd 3 and sends the /dev/fuse fd back on it.
  const child = spawnSync(fusermountPath(), ["-o", opts.join(","), "--", target], {
    stdio: ["ignore", "inherit", "pipe", pair[1]!],
    env: { ...process.env, _FUSE_COMMFD: "3" },
  });
  n.fu_close(pair[1]!);
  if (child.status !== 0) {
    n.fu_close(pair[0]!);
    const msg = child.stderr?.toString().trim() || `exit ${child.status}`;
    const hint = /allow_other/.test(msg) ? " (add user_allow_other to /etc/fuse.conf)" : "";
    throw new MountError(`fusermount3 failed: ${msg}${hint}`);
  }
  const fd = n.fu_recv_fd(pair[0]!);
  n.fu_close(pair[0]!);
  if (fd < 0) throw new MountError(`fusermount3 did not pass the /dev/fuse fd: ${errnoName(-fd)}`, -fd);
  return { fd, via: "fusermount3" };
}

/**
 * Unmount from a child process, for the daemon that serves the mount. umount(2) waits in the
 * kernel until the connection's requests are done; on the io_uring transport some of them can
 * only complete by task work on the ring's owner thread, so an owner that unmounts its own
 * mount synchronously can wait for itself forever, unkillable (docs/KERNEL.md, "unmounting from
 * the owner thread"). The child does the waiting while this thread keeps serving.
 * `umount` (util-linux) as root, `fusermount3 -u` otherwise; lazily when busy or `lazy`.
 * Resolves null on success, else an explanation.
 */
export async function detachAsync(mountpoint: string, lazy = false): Promise<string | null> {
  const target = resolve(mountpoint);
  const tool = isRoot() ? umountPath() : fusermountPath();
  // Without util-linux's umount (never on Debian: `mount` is essential) fall back to the call.
  if (!tool) return detach(mountpoint, lazy);
  const args = (lazyNow: boolean) => (isRoot() ? [tool, "-i", ...(lazyNow ? ["-l"] : []), "--", target] : [tool, "-u", ...(lazyNow ? ["-z"] : []), "--", target]);
  const runOnce = async (lazyNow: boolean) => {
    const child = Bun.spawn(args(lazyNow), { stdin: "ignore", stdout: "ignore", stderr: "pipe", cwd: "/" });
    const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
    return { code, stderr: stderr.trim() };
  };
  let r = await runOnce(lazy);
  if (r.code !== 0 && !lazy) r = await runOnce(true);
  if (r.code !== 0) return `${describeTool(tool)} ${target} failed: ${r.stderr || `exit ${r.code}`}`;
  return null;
}

function describeTool(tool: string): string {
  return tool.endsWith("fusermount3") ? "fusermount3 -u" : "umount";
}

function umountPath(): string | null {
  for (const p of ["/usr/bin/umount", "/bin/umount", "/usr/sbin/umount", "/sbin/umount"]) if (existsSync(p)) return p;
  return null;
}

/**
 * Unmounts; lazily (MNT_DETACH) when busy or `lazy`. Works when the daemon is dead.
 * Returns null on success, else an explanation.
 */
export function detach(mountpoint: string, lazy = false): string | null {
  const target = resolve(mountpoint);
  if (isRoot()) {
    const n = native();
    let rc = n.fu_umount(cstr(target), lazy ? MNT_DETACH : 0);
    if (rc === -16 /* EBUSY */ && !lazy) rc = n.fu_umount(cstr(target), MNT_DETACH);
    if (rc < 0) return `umount ${target} failed: ${errnoName(-rc)}${-rc === 22 ? " (not mounted)" : ""}`;
    return null;
  }
  const r = spawnSync(fusermountPath(), ["-u", ...(lazy ? ["-z"] : []), "--", target], { encoding: "utf8" });
  if (r.status !== 0) {
    const again = lazy ? r : spawnSync(fusermountPath(), ["-u", "-z", "--", target], { encoding: "utf8" });
    if (again.status !== 0) return `fusermount3 -u ${target} failed: ${(again.stderr || "").trim()}`;
  }
  return null;
}
