// The public entry point: mount a filesystem, get a handle that unmounts, reports stats and
// sends cache invalidations.

import { renameSync, writeFileSync } from "node:fs";
import { reloadMount, type ReloadHook, type ReloadReport } from "./reload/swap.ts";
import { attachMount, invalidateEntryPath, invalidatePath, toInodeFS, type Filesystem } from "./path/convert.ts";
import { existsSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { attach, detach, detachAsync, fuseDeviceAt, isMounted, MountError, type MountFlags, type VfsOptions } from "./mountpoint.ts";
import { Notify } from "./protocol/constants.ts";
import { nameToBytes } from "./protocol/names.ts";
import type { FdCacheStats } from "./fs/passthrough/nodes.ts";
import type { Notifications } from "./session/filesystem.ts";
import { defaultSessionOptions, Session, type SessionOptions, type SessionStats } from "./session/session.ts";

/** Answering INIT (ring and worker set-up) after it arrived; see mount(). */
const SETUP_TIMEOUT_MS = 120_000;

export interface MountOptions extends Partial<SessionOptions> {
  fsname?: string;
  subtype?: string;
  allowOther?: boolean;
  /** Let the kernel check permissions from mode/uid/gid (default true). */
  defaultPermissions?: boolean;
  readOnly?: boolean;
  /** VFS flags and kernel options: noexec, noatime, suid/dev (root), maxRead, … */
  vfs?: VfsOptions;
  /** Write stats JSON here at least once a second and at exit. */
  statsFile?: string;
  /** Give up if the kernel does not complete INIT within this time (ms). */
  initTimeoutMs?: number;
}

export interface MountStats extends SessionStats {
  /** Hot reloads that swapped the filesystem / that failed (old version kept serving). */
  reloads: number;
  reloadErrors: number;
  mountpoint: string;
  uptimeMs: number;
  /** Passthrough: the inode descriptor cache (budget, held, maxHeld, evictions, re-opens, …). */
  descriptors?: FdCacheStats;
}

export class Mount implements AsyncDisposable {
  /**
   * Settles with the reason when the kernel side goes away and memory is freed: "unmounted",
   * "connection aborted" (fusectl abort, or the kernel gave up; the dead mount is detached
   * lazily so it does not linger as "Transport endpoint is not connected"), "closed", …
   */
  readonly closed: Promise<string>;
  /** major:minor of this mount in mountinfo, to recognise it among stacked mounts. */
  private readonly device: string | null;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly startedAt = Date.now();
  private unmounting: Promise<void> | null = null;
  /** Counted by reload() and by script watchers (lib/reload/). */
  readonly reloadCounters = { reloads: 0, reloadErrors: 0 };

  constructor(readonly mountpoint: string, readonly session: Session, private readonly statsFile?: string) {
    this.timer = setInterval(() => this.writeStats(), 1000);
    this.device = fuseDeviceAt(mountpoint);
    this.closed = session.ended.then(async (reason) => {
      await session.close();
      clearInterval(this.timer);
      this.writeStats();
      return this.detachDead(reason);
    });
  }

  /**
   * Name why the session ended, from what the kernel said and whether our mount is still
   * there. Gone: it was unmounted (a ring may only report ENOTCONN for that). Still there
   * without anyone unmounting: the connection was aborted; every access would fail with
   * ENOTCONN until someone unmounts, so detach it (lazily).
   */
  private detachDead(reason: string): string {
    const vague = reason === "unmounted" || reason === "closed" || reason.startsWith("connection ended");
    const ours = this.device !== null && fuseDeviceAt(this.mountpoint) === this.device;
    if (!ours) return vague ? "unmounted" : reason;
    if (this.unmounting) return reason;
    // Ended by the kernel side (abort: ECONNABORTED, or only ENOTCONN/ENODEV seen) with the
    // mount left in place: that is an abort, whatever the transports managed to say.
    const failStop = reason.startsWith("fail-stop:");
    const why = !failStop && (vague || /\b(ENOTCONN|ENODEV|ECONNABORTED)\b/.test(reason)) ? "connection aborted" : reason;
    const err = detach(this.mountpoint, true);
    return err ? `${why}; detaching the dead mount failed: ${err}` : why;
  }

  get transport(): "uring" | "classic" {
    return this.session.transportInfo.transport as "uring" | "classic";
  }

  get transportReason(): string {
    return this.session.transportInfo.reason;
  }

  stats(): MountStats {
    const fdStats = (this.session.fs as { fdStats?: () => FdCacheStats }).fdStats;
    const descriptors = typeof fdStats === "function" ? { descriptors: fdStats.call(this.session.fs) } : {};
    return { ...this.session.stats(), mountpoint: this.mountpoint, uptimeMs: Date.now() - this.startedAt, ...descriptors, ...this.reloadCounters };
  }

  private writeStats(): void {
    if (!this.statsFile) return;
    try {
      const tmp = `${this.statsFile}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(this.stats()) + "\n");
      renameSync(tmp, this.statsFile);
    } catch {
      // A stats file that cannot be written must not take the filesystem down.
    }
  }

  /**
   * Hot reload: serve `next` from now on without unmounting (see lib/reload/swap.ts). A tree or
   * path-handler filesystem keeps the node table and the kernel's caches are invalidated for
   * what changed; an inode-API filesystem needs a hook `(old) => next` that carries its state
   * over. Rejects with ReloadError while the old version keeps serving.
   */
  reload(next: Filesystem | ReloadHook): Promise<ReloadReport> {
    return reloadMount(this, next);
  }

  /** Unmount (lazily if busy) and wait until the session has shut down. */
  unmount(): Promise<void> {
    this.unmounting ??= (async () => {
      if (isMounted(this.mountpoint)) {
        // From a child process: this thread may own a ring whose task work the kernel's
        // unmount waits for (detachAsync).
        const err = await detachAsync(this.mountpoint);
        if (err && isMounted(this.mountpoint)) throw new MountError(err);
      }
      // A lazily detached mount stays connected while files are open: do not wait forever.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<string>((res) => (timer = setTimeout(() => res("timeout"), 1500)));
      const outcome = await Promise.race([this.session.ended, timeout]);
      clearTimeout(timer);
      if (outcome === "timeout") await this.session.close(500);
      await this.closed;
    })();
    return this.unmounting;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.unmount();
  }

  /** Drop cached data (off ≥ 0; len 0 = to EOF) or just attributes (off < 0) of an inode. 0 or -errno. */
  invalidateInode(ino: number, off = 0, len = 0): Promise<number> {
    const b = new DataView(new ArrayBuffer(24));
    b.setBigUint64(0, BigInt(ino), true);
    b.setBigInt64(8, BigInt(off), true);
    b.setBigInt64(16, BigInt(len), true);
    return this.session.notify(Notify.INVAL_INODE, new Uint8Array(b.buffer));
  }

  /**
   * Drop the cached name `name` in directory `parent` (a node id, or a path for path-based
   * filesystems). Node id form resolves to 0 or -errno; path form to whether anything was cached.
   */
  invalidateEntry(parent: number, name: string): Promise<number>;
  invalidateEntry(parent: string, name: string): Promise<boolean>;
  invalidateEntry(parent: number | string, name: string): Promise<number | boolean> {
    if (typeof parent === "string") return invalidateEntryPath(this, parent, name);
    const nameBytes = nameToBytes(name); // lone surrogates U+DC80–U+DCFF are raw bytes
    const body = new Uint8Array(16 + nameBytes.length + 1);
    const dv = new DataView(body.buffer);
    dv.setBigUint64(0, BigInt(parent), true);
    dv.setUint32(8, nameBytes.length, true);
    body.set(nameBytes, 16);
    return this.session.notify(Notify.INVAL_ENTRY, body);
  }

  /**
   * Every FUSE notification by node id: poll wakeups, invalInode/invalEntry (with expireOnly),
   * delete, store and retrieve (lib/session/filesystem.ts Notifications; the same object as
   * InitInfo.notify).
   */
  get notify(): Notifications {
    return this.session.notifications;
  }

  /** Path-based filesystems (tree, paths): drop what the kernel cached for `path`. */
  invalidate(path: string): Promise<boolean> {
    return invalidatePath(this, path);
  }
}

/** Fail before mounting when the stats file could never be written (the writer stays quiet later). */
function checkStatsFile(path: string): void {
  const dir = dirname(path);
  if (!existsSync(dir)) throw new MountError(`stats file ${path}: directory ${dir} does not exist`);
  if (!statSync(dir).isDirectory()) throw new MountError(`stats file ${path}: ${dir} is not a directory`);
  if (existsSync(path) && statSync(path).isDirectory()) throw new MountError(`stats file ${path} is a directory`);
}

/**
 * The module worker threads start from (lib/worker-main.ts). In the standalone binary
 * (scripts/compile.sh builds it as a second entry point) embedded modules live under
 * /$bunfs/root/ by their path from the repository root, not next to this bundle.
 */
function workerMain(): string {
  if (import.meta.url.includes("/$bunfs/")) return "/$bunfs/root/lib/worker-main.ts";
  return new URL("./worker-main.ts", import.meta.url).href;
}

/** fusectl's connection id of a FUSE mount's device "major:minor" (the kernel's dev_t encoding). */
function connectionOf(dev: string | null): number | null {
  const m = dev ? /^(\d+):(\d+)$/.exec(dev) : null;
  return m ? Number(m[1]) * 2 ** 20 + Number(m[2]) : null;
}

/** Mount `fs` at `mountpoint`; resolves once the kernel finished INIT. */
export async function mount(mountpoint: string, filesystem: Filesystem, options: MountOptions = {}): Promise<Mount> {
  const fs = toInodeFS(filesystem);
  if (options.statsFile) checkStatsFile(options.statsFile);
  const flags: MountFlags = {
    fsname: options.fsname ?? "fuse-uring",
    subtype: options.subtype ?? "fuse-uring",
    allowOther: options.allowOther ?? false,
    defaultPermissions: options.defaultPermissions ?? true,
    readOnly: options.readOnly ?? false,
    vfs: options.vfs,
  };
  const { fd } = attach(mountpoint, flags);
  let session: Session;
  try {
    session = new Session(fd, fs, { ...defaultSessionOptions, workerEntry: workerMain(), ...options, connection: connectionOf(fuseDeviceAt(mountpoint)) });
  } catch (e) {
    detach(mountpoint, true);
    throw e;
  }
  try {
    session.start();
  } catch (e) {
    detach(mountpoint, true);
    await session.close(200);
    throw e;
  }
  // Two bounds: the kernel's INIT must arrive within initTimeoutMs; answering it (rings, worker
  // threads loading the filesystem) gets its own, longer bound, since a slow machine (an
  // emulated CPU, a loaded host) may take seconds there and that is not the kernel's silence.
  const timeoutMs = options.initTimeoutMs ?? 10000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = (ms: number, why: string) => {
    clearTimeout(timer);
    return new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new MountError(why)), ms)));
  };
  try {
    await Promise.race([
      session.ready,
      bound(timeoutMs, `kernel did not send INIT within ${timeoutMs} ms`),
      session.initSeen.then(() => bound(SETUP_TIMEOUT_MS, `INIT arrived, but the transport and worker threads were not set up within ${SETUP_TIMEOUT_MS} ms`)),
    ]);
  } catch (e) {
    clearTimeout(timer);
    detach(mountpoint, true);
    await session.close(200);
    throw e;
  }
  clearTimeout(timer);
  const m = new Mount(mountpoint, session, options.statsFile);
  attachMount(fs, m);
  return m;
}
