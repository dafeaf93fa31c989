// The passthrough's inode table entries and the bounded cache of their O_PATH descriptors.
//
// Every node the kernel knows used to hold an O_PATH descriptor for its whole life, so a tree
// with more inodes than RLIMIT_NOFILE failed with EMFILE. Now the descriptors are a cache with a
// budget: least-recently-used ones are closed (evicted) and re-opened on demand, so node ids stay
// valid however many the kernel holds. Re-opening uses
// - the kernel file handle (name_to_handle_at, taken once when the node is first evicted, and
//   open_by_handle_at on the source root's descriptor) when permitted: root with
//   CAP_DAC_READ_SEARCH, same filesystem as the source root. It survives renames done anywhere,
//   also directly in the source;
// - else the node's last known link (parent node + name), kept current across LOOKUP, CREATE,
//   RENAME and UNLINK through the mount; the re-opened file must be the same (st_dev, st_ino),
//   or the request answers ESTALE. A node whose only known link went away (unlinked while open)
//   is never evicted.
//
// Pins. A request that holds a descriptor while something else may evict or close it pins the
// node: a pinned descriptor is never closed — not by eviction and not when the file is deleted
// or forgotten (that close is deferred to the last unpin) — and the passthrough never drops a
// pinned node from its table (maybeFree; the last unpin looks again). Closing a descriptor number that a
// queued syscall still uses is what made that syscall fail with EBADF, or act on whatever file
// got the number next (see docs/NAMES-AND-DESCRIPTORS.md). With --workers N the pin counts are
// shared (passthrough/shared.ts) and the passthrough's backing syscalls run outside the table's
// lock on pinned descriptors: a pin is what keeps another thread from closing one mid-syscall.
//
// Descriptors held: root (always) + at most `budget` node descriptors, exceeded only while more
// than `budget` nodes are pinned at once (one or two per request in flight).

import { Errno, FuseError, errnoOf } from "../errors.ts";
import type { Attr, NodeAttrs } from "../types.ts";
import * as libc from "./libc.ts";
import * as stat from "./stat.ts";

const O_PATH = 0o10000000;
const O_NOFOLLOW = 0o400000;
const O_CLOEXEC = 0o2000000;

/** One backing inode the kernel holds references to. */
export class PassthroughNode {
  /** Lookup references held by the kernel. */
  nlookup = 0;
  /** Open file handles (OPEN/CREATE not yet RELEASEd). */
  opens = 0;
  /** Kernel passthrough backing id while handles are open (0 = none). */
  backingId = 0;
  /** Kernel passthrough refused for this inode: serve it through the daemon. */
  noPassthrough = false;
  /** Lost a link through unlink/rename while open: check on the last release. */
  unlinked = false;
  /**
   * Set when the backing file was deleted and its descriptor closed early (so the source frees
   * the space now, not when the kernel gets round to FORGET): GETATTR answers with this.
   */
  deletedAttr: Attr | null = null;
  /** Mode bits as last seen (type bits never change). */
  mode: number;
  /** O_PATH|O_NOFOLLOW descriptor while cached; -1 when evicted (re-opened on demand) or gone. */
  fd = -1;
  /** The backing file is deleted and its descriptor closed for good. */
  gone = false;
  /** Requests using `fd` across an await; a pinned descriptor is never closed. */
  pins = 0;
  /** Close `fd` at the last unpin (deleted or forgotten while pinned). */
  dropPending = false;
  /** Last known link: parent node and name (null parent: unknown). */
  parent: PassthroughNode | null = null;
  name = "";
  /** Nodes whose `parent` is this one (they keep it in the table: their path goes through it). */
  kids = 0;
  /** Kernel file handle (struct file_handle bytes), taken at the first eviction. */
  handle: Buffer | null = null;
  handleFailed = false;
  /** Never evict (no way to re-open it: unlinked while open). */
  noEvict = false;
  /**
   * Birth time (statx; both 0 when the filesystem has none). A re-open by path checks it next
   * to (st_dev, st_ino): ext4 hands a deleted file's inode number to the next new file at once.
   */
  btimeSec = 0;
  btimeNsec = 0;
  lruPrev: PassthroughNode | null = null;
  lruNext: PassthroughNode | null = null;
  inLru = false;
  constructor(
    /** Node id given to the kernel. */
    readonly id: number,
    readonly dev: number,
    readonly ino: number,
    mode: number,
  ) {
    this.mode = mode;
  }
}

export interface FdCacheStats {
  budget: number;
  /** Node descriptors open now (root not counted). */
  held: number;
  /** Most node descriptors ever open at once. */
  maxHeld: number;
  evictions: number;
  reopenedByHandle: number;
  reopenedByPath: number;
  /** EMFILE/ENFILE from the system answered by evicting and retrying. */
  shed: number;
  /** Requests answered EMFILE/ENFILE because no descriptor could be had. */
  failures: number;
  /** How evicted nodes are re-opened: "handle" (kernel file handles) or "path". */
  mode: "handle" | "path";
  /** Copies mode (--workers N): times a thread waited for another to release the node table. */
  tableLockWaits?: number;
}

/**
 * The cache's counters and LRU ends. Plain fields for one thread; in copies mode (--workers N,
 * passthrough/shared.ts) words of the SharedArrayBuffer every copy's cache uses, under its lock.
 */
export interface FdCacheState {
  held: number;
  maxHeld: number;
  evictions: number;
  reopenedByHandle: number;
  reopenedByPath: number;
  shed: number;
  failures: number;
  /** Most recently used end. */
  head: PassthroughNode | null;
  /** Least recently used end. */
  tail: PassthroughNode | null;
}

class LocalFdCacheState implements FdCacheState {
  held = 0;
  maxHeld = 0;
  evictions = 0;
  reopenedByHandle = 0;
  reopenedByPath = 0;
  shed = 0;
  failures = 0;
  head: PassthroughNode | null = null;
  tail: PassthroughNode | null = null;
}

export class FdCache {
  /** Counters and LRU ends (shared between the copies in copies mode). */
  readonly s: FdCacheState;
  get held(): number {
    return this.s.held;
  }
  get maxHeld(): number {
    return this.s.maxHeld;
  }
  get evictions(): number {
    return this.s.evictions;
  }
  get reopenedByHandle(): number {
    return this.s.reopenedByHandle;
  }
  get reopenedByPath(): number {
    return this.s.reopenedByPath;
  }
  get shed(): number {
    return this.s.shed;
  }
  get failures(): number {
    return this.s.failures;
  }
  private lastFailLog = 0;
  private quietFailures = 0;

  /** Kernel file handles work here (probed at start). */
  readonly useHandles: boolean;

  /**
   * The shim's node table (InitInfo.nodeAttrs), or null: told of every node descriptor this
   * cache admits, and — before it is closed or when its file is deleted — of its end, so
   * the shim answers GETATTR from open descriptors only.
   */
  nodeAttrs: NodeAttrs | null = null;

  constructor(
    readonly budget: number,
    readonly root: PassthroughNode,
    /** Read-only descriptor of the source root for open_by_handle_at; -1: re-open by path only. */
    readonly mountFd: number,
    private readonly log: (line: string) => void,
    state?: FdCacheState,
  ) {
    this.useHandles = mountFd >= 0;
    this.s = state ?? new LocalFdCacheState();
  }

  stats(): FdCacheStats {
    return {
      budget: this.budget, held: this.s.held, maxHeld: this.s.maxHeld, evictions: this.s.evictions,
      reopenedByHandle: this.s.reopenedByHandle, reopenedByPath: this.s.reopenedByPath, shed: this.s.shed,
      failures: this.s.failures, mode: this.useHandles ? "handle" : "path",
    };
  }

  /** n's descriptor for immediate (synchronous) use; re-opened if it was evicted. */
  fd(n: PassthroughNode): number {
    if (n.fd >= 0) {
      if (n.inLru && n !== this.s.head) {
        this.unlink(n);
        this.pushHead(n);
      }
      return n.fd;
    }
    if (n.gone) throw new FuseError("ENOENT", "passthrough: the backing file was deleted");
    return this.reopen(n);
  }

  /** fd(n), kept open until the matching unpin(n) (use across awaits, or outside the lock in copies mode). */
  pin(n: PassthroughNode): number {
    const fd = this.fd(n);
    n.pins++;
    return fd;
  }

  /** Keep n as it is (its descriptor, if any, not closed; the node not freed) until unpin(n), without needing its descriptor. */
  hold(n: PassthroughNode): void {
    n.pins++;
  }

  /**
   * Copies mode: descriptors this thread retired under the table's lock, closed by
   * flushCloses() once the lock is free. The final close of an O_PATH descriptor can be the last
   * reference to a deleted inode (the source then frees its blocks; NFS talks to the server):
   * backing work that must not run under the lock. Null: close at once (one thread).
   */
  closeLater: number[] | null = null;
  /** The node id of each closeLater descriptor (its node-table entry is drained before the close). */
  private readonly closeLaterIds: number[] = [];

  /** Close what was retired under the lock (lock not held). */
  flushCloses(): void {
    const l = this.closeLater;
    if (l === null) return;
    const ids = this.closeLaterIds, na = this.nodeAttrs;
    for (let i = 0; i < l.length; i++) {
      // A native GETATTR may still be in its statx of this descriptor: wait for it first.
      if (na !== null) na.drain(ids[i]!);
      closeQuiet(l[i]!);
    }
    l.length = 0;
    ids.length = 0;
  }

  unpin(n: PassthroughNode): void {
    if (--n.pins > 0) return;
    n.pins = 0;
    if (n.dropPending) {
      n.dropPending = false;
      this.closeNow(n);
    } else if (this.s.held > this.budget) this.trim();
  }

  /** Give node n the fresh O_PATH descriptor `fd` (it had none), or close `fd` (it had one). */
  adopt(n: PassthroughNode, fd: number): void {
    if (n.fd >= 0 || n.gone) {
      closeQuiet(fd);
      if (n.fd >= 0) this.fd(n); // touch
      return;
    }
    this.admit(n, fd);
  }

  /** The root's descriptor is held outside the budget and never evicted. */
  setRoot(fd: number): void {
    this.root.fd = fd;
  }

  /** Close n's descriptor for good (file deleted, node forgotten); deferred while pinned. */
  drop(n: PassthroughNode): void {
    if (n.fd < 0 || n === this.root) return;
    // Deleted: GETATTR comes to the handler (its deletedAttr), even while a pin defers the close.
    if (this.nodeAttrs !== null) this.nodeAttrs.detach(n.id);
    if (n.pins > 0) {
      n.dropPending = true;
      return;
    }
    this.closeNow(n);
  }

  /** n got a known link again: it may be evicted from now on. */
  linked(n: PassthroughNode): void {
    if (n.fd >= 0 && !n.inLru && !n.noEvict && n !== this.root) this.pushHead(n);
  }

  /** Stop evicting n (it cannot be re-opened). */
  pinForever(n: PassthroughNode): void {
    n.noEvict = true;
    if (n.inLru) this.unlink(n);
  }

  /** Close every node descriptor (unmount). */
  closeAll(nodes: Iterable<PassthroughNode>): void {
    for (const n of nodes) if (n !== this.root && n.fd >= 0) this.closeNow(n);
    this.s.head = this.s.tail = null;
  }

  /**
   * Run `open` (which allocates a descriptor). On EMFILE/ENFILE evict a slice of the cache and
   * try once more; if that fails too, answer EMFILE/ENFILE with one log line.
   */
  async withRoom<T>(what: string, open: () => Promise<T>): Promise<T> {
    try {
      return await open();
    } catch (e) {
      if (!isFdShortage(e) || !this.shedSome()) throw this.shortage(e, what);
    }
    try {
      return await open();
    } catch (e) {
      throw isFdShortage(e) ? this.shortage(e, what) : e;
    }
  }

  /**
   * openat(dirfd, the name at namePtr (libc.setName), flags, mode) with the same shedding: a
   * descriptor or -errno (-EMFILE/-ENFILE after one logged failure). Nothing thrown: the hot path.
   */
  openat(what: string, dirfd: number, namePtr: number, flags: number, mode: number): number {
    let fd = libc.openatRaw(dirfd, namePtr, flags, mode);
    if ((fd === -Errno.EMFILE || fd === -Errno.ENFILE) && this.shedSome()) fd = libc.openatRaw(dirfd, namePtr, flags, mode);
    if (fd === -Errno.EMFILE || fd === -Errno.ENFILE) this.shortageOf(-fd, what);
    return fd;
  }

  /** open("/proc/self/fd/N", flags) (a real descriptor of an O_PATH one) with the same shedding. */
  reopenFd(what: string, fd: number, flags: number): number {
    let r = libc.reopenRaw(fd, flags);
    if ((r === -Errno.EMFILE || r === -Errno.ENFILE) && this.shedSome()) r = libc.reopenRaw(fd, flags);
    if (r === -Errno.EMFILE || r === -Errno.ENFILE) this.shortageOf(-r, what);
    return r;
  }

  /**
   * A call that allocates a descriptor answered `rc`: if that is -EMFILE/-ENFILE, evict a slice
   * of the cache and say whether to try once more.
   */
  makeRoom(rc: number): boolean {
    return (rc === -Errno.EMFILE || rc === -Errno.ENFILE) && this.shedSome();
  }

  withRoomSync<T>(what: string, open: () => T): T {
    try {
      return open();
    } catch (e) {
      if (!isFdShortage(e) || !this.shedSome()) throw this.shortage(e, what);
    }
    try {
      return open();
    } catch (e) {
      throw isFdShortage(e) ? this.shortage(e, what) : e;
    }
  }

  // ---- internals ------------------------------------------------------------------------

  private shortage(e: unknown, what: string): unknown {
    const errno = errnoOf(e);
    if (errno !== Errno.EMFILE && errno !== Errno.ENFILE) return e;
    this.shortageOf(errno, what);
    return new FuseError(errno, `passthrough: ${what}: out of file descriptors`);
  }

  /** Count (and at most every 5 s log) a request answered EMFILE/ENFILE. */
  shortageOf(errno: number, what: string): void {
    this.s.failures++;
    const now = Date.now();
    if (now - this.lastFailLog >= 5000) {
      const more = this.quietFailures ? ` (${this.quietFailures} more since the last report)` : "";
      this.log(
        `fuse-uring: passthrough: ${what}: out of file descriptors (${errno === Errno.EMFILE ? "EMFILE" : "ENFILE"}) with ${this.s.held} cached node descriptors (budget ${this.budget}); answered ${errno === Errno.EMFILE ? "EMFILE" : "ENFILE"}${more}`,
      );
      this.lastFailLog = now;
      this.quietFailures = 0;
    } else this.quietFailures++;
  }

  /** Evict up to an eighth of the budget (at least 8) to make room; whether any was closed. */
  private shedSome(): boolean {
    const want = Math.max(8, this.budget >> 3);
    let got = 0;
    while (got < want && this.evictOne(null)) got++;
    if (got) this.s.shed++;
    return got > 0;
  }

  private reopen(n: PassthroughNode): number {
    let fd = -1;
    if (n.handle && this.useHandles) {
      try {
        fd = this.withRoomSync("re-open by handle", () => libc.openByHandle(this.mountFd, n.handle!, O_PATH | O_CLOEXEC));
        this.s.reopenedByHandle++;
      } catch (e) {
        // ESTALE: this inode is deleted. The path would only find another file there now.
        if (isFdShortage(e) || n.parent === null || errnoOf(e) === Errno.ESTALE) throw e;
      }
    }
    if (fd < 0) {
      const p = n.parent;
      if (!p) throw new FuseError("ESTALE", `passthrough: node ${n.id} was evicted and has no known path`);
      const pfd = this.pin(p);
      try {
        const name = libc.setName(0, n.name);
        fd = name ? this.openat("re-open by path", pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) : -libc.ENAMETOOLONG;
      } finally {
        this.unpin(p);
      }
      if (fd === -Errno.ENOENT) throw new FuseError("ESTALE", `passthrough: node ${n.id} is no longer at its last known path`);
      if (fd < 0) throw new FuseError(-fd, `passthrough: re-open of node ${n.id} by path: errno ${-fd}`);
      const rc = stat.statFd(fd);
      if (rc < 0) {
        closeQuiet(fd);
        throw new FuseError(-rc);
      }
      const bs = stat.btimeSec(), bn = stat.btimeNsec();
      const hasBirth = n.btimeSec !== 0 || n.btimeNsec !== 0;
      if (stat.dev() !== n.dev || stat.ino() !== n.ino || (hasBirth && (bs !== n.btimeSec || bn !== n.btimeNsec))) {
        closeQuiet(fd);
        throw new FuseError("ESTALE", `passthrough: node ${n.id}: another file is at its last known path now`);
      }
      this.s.reopenedByPath++;
    }
    this.admit(n, fd);
    return fd;
  }

  private admit(n: PassthroughNode, fd: number): void {
    n.fd = fd;
    if (n === this.root) return;
    if (this.nodeAttrs !== null && !n.gone) this.nodeAttrs.set(n.id, fd);
    this.s.held++;
    if (this.s.held > this.s.maxHeld) this.s.maxHeld = this.s.held;
    if (!n.noEvict) this.pushHead(n);
    if (this.s.held > this.budget) this.trim(n);
  }

  /** Evict until within budget (or nothing more can be evicted). */
  private trim(keep: PassthroughNode | null = null): void {
    while (this.s.held > this.budget && this.evictOne(keep)) {}
  }

  /** Close the least recently used descriptor that can be re-opened later; false if none. */
  private evictOne(keep: PassthroughNode | null): boolean {
    let v = this.s.tail;
    while (v) {
      const prev = v.lruPrev;
      if (v !== keep && v.pins === 0) {
        if (this.canReopen(v)) {
          this.closeNow(v);
          this.s.evictions++;
          return true;
        }
        this.unlink(v); // cannot come back: keep its descriptor, stop considering it
      }
      v = prev;
    }
    return false;
  }

  private canReopen(v: PassthroughNode): boolean {
    if (v.noEvict || v.gone) return false;
    if (this.useHandles && v.dev === this.root.dev && !v.handleFailed) {
      if (!v.handle) {
        try {
          v.handle = libc.fileHandle(v.fd);
        } catch {
          v.handleFailed = true;
        }
      }
      if (v.handle) return true;
    }
    return v.parent !== null;
  }

  private closeNow(n: PassthroughNode): void {
    if (n.inLru) this.unlink(n);
    if (n.fd < 0) return;
    // The shim's node table lets go of it first: detached now (under the lock), drained — a
    // statx still running on another thread waited for — just before the close, which in
    // copies mode runs after the lock is released (a statx on a slow source never holds it).
    if (this.nodeAttrs !== null) this.nodeAttrs.detach(n.id);
    if (this.closeLater !== null) {
      this.closeLater.push(n.fd);
      this.closeLaterIds.push(n.id);
    } else {
      if (this.nodeAttrs !== null) this.nodeAttrs.drain(n.id);
      closeQuiet(n.fd);
    }
    n.fd = -1;
    if (n !== this.root) this.s.held--;
  }

  private pushHead(n: PassthroughNode): void {
    n.lruPrev = null;
    n.lruNext = this.s.head;
    if (this.s.head) this.s.head.lruPrev = n;
    this.s.head = n;
    if (!this.s.tail) this.s.tail = n;
    n.inLru = true;
  }

  private unlink(n: PassthroughNode): void {
    if (n.lruPrev) n.lruPrev.lruNext = n.lruNext;
    else this.s.head = n.lruNext;
    if (n.lruNext) n.lruNext.lruPrev = n.lruPrev;
    else this.s.tail = n.lruPrev;
    n.lruPrev = n.lruNext = null;
    n.inLru = false;
  }
}

function isFdShortage(e: unknown): boolean {
  const errno = errnoOf(e);
  return errno === Errno.EMFILE || errno === Errno.ENFILE;
}

export function closeQuiet(fd: number): void {
  libc.closeRaw(fd);
}

/**
 * Whether evicted nodes can be re-opened by kernel file handle here: name_to_handle_at and
 * open_by_handle_at on the source root itself (EPERM without CAP_DAC_READ_SEARCH, EOPNOTSUPP on
 * filesystems without export support). open_by_handle_at wants a real (not O_PATH) descriptor on
 * the filesystem: `mountFd`, a read-only descriptor of the source root, held from then on.
 */
export function probeHandles(rootFd: number): { mountFd: number; why: string } {
  let mountFd = -1;
  try {
    mountFd = libc.openat(rootFd, ".", O_RDONLY_DIRECTORY | O_CLOEXEC);
    const h = libc.fileHandle(rootFd);
    const fd = libc.openByHandle(mountFd, h, O_PATH | O_CLOEXEC);
    closeQuiet(fd);
    return { mountFd, why: "open_by_handle_at works" };
  } catch (e) {
    if (mountFd >= 0) closeQuiet(mountFd);
    return { mountFd: -1, why: e instanceof Error ? e.message : String(e) };
  }
}

const O_RDONLY_DIRECTORY = 0o200000; // O_RDONLY | O_DIRECTORY
