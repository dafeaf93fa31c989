// A table of file locks — POSIX byte-range locks (fcntl F_SETLK), OFD locks (F_OFD_SETLK) and
// flock(2) locks — for filesystems that answer GETLK/SETLK/SETLKW themselves (FUSE_POSIX_LOCKS,
// FUSE_FLOCK_LOCKS). Its whole state lives in one SharedArrayBuffer, so every thread that serves
// the filesystem (memfs runs one copy per worker) sees and changes the same locks: hand
// `table.buffer` to each thread and build `new LockTable(buffer)` there.
//
// What the kernel tells us, and so what this table keys on:
// - owner: a 64-bit id. POSIX locks: the process's files_struct; OFD and flock locks: the open
//   file. Two locks conflict only when their owners differ. POSIX and OFD locks share one
//   space (they conflict with each other, as on a local filesystem); flock locks are separate.
// - POSIX locks go away when their owner closes any descriptor of the file: the kernel sends
//   FLUSH with that owner (unlockOwner). OFD and flock locks go away when the open file is
//   released: RELEASE of its fh (releaseFh; every lock remembers the fh it was set through).
//
// Not done (tmpfs does them): deadlock detection (EDEADLK) for blocking POSIX locks, and lock
// requests from NFS exports. Blocking requests (SETLKW) never block a thread: they wait with
// Atomics.waitAsync for any unlock anywhere and try again, and give up with EINTR when the
// caller is interrupted.

import { FuseError } from "./errors.ts";

export const F_RDLCK = 0;
export const F_WRLCK = 1;
export const F_UNLCK = 2;

/** A lock as the inode API hands it around (fuse_file_lock). `end` is inclusive; Infinity = to EOF. */
export interface FileLock {
  start: number;
  end: number;
  type: number;
  pid: number;
}

export const LOCK_POSIX = 0;
export const LOCK_FLOCK = 1;
export type LockKind = typeof LOCK_POSIX | typeof LOCK_FLOCK;

// Header (Int32 words): mutex, generation (bumped at every unlock; waiters sleep on it), high
// water mark of used records.
const H_MUTEX = 0, H_GEN = 1, H_HIGH = 2;
const HEADER_BYTES = 64;
// Records: f64 ino, start, end, fh | u32 ownerLo, ownerHi, type, pid, kind, used.
const F_WORDS = 4, U_WORDS = 6;
const RECORD_BYTES = F_WORDS * 8 + U_WORDS * 4 + 8; // padded to 8

export const DEFAULT_LOCK_CAPACITY = 8192;

export class LockTable {
  readonly buffer: SharedArrayBuffer;
  readonly capacity: number;
  private readonly hdr: Int32Array;
  private readonly f: Float64Array;
  private readonly u: Uint32Array;

  /** A new table, or (given the buffer of one) the same table seen from another thread. */
  constructor(shared?: SharedArrayBuffer, capacity = DEFAULT_LOCK_CAPACITY) {
    this.buffer = shared ?? new SharedArrayBuffer(HEADER_BYTES + capacity * RECORD_BYTES);
    this.capacity = Math.floor((this.buffer.byteLength - HEADER_BYTES) / RECORD_BYTES);
    this.hdr = new Int32Array(this.buffer, 0, HEADER_BYTES / 4);
    // Two views over the records: floats first, then the u32 words, record by record.
    this.f = new Float64Array(this.buffer, HEADER_BYTES, (this.capacity * RECORD_BYTES) / 8);
    this.u = new Uint32Array(this.buffer, HEADER_BYTES, (this.capacity * RECORD_BYTES) / 4);
  }

  // ---- record access (index i) ----------------------------------------------------------------
  private fi(i: number): number {
    return (i * RECORD_BYTES) / 8;
  }
  private ui(i: number): number {
    return (i * RECORD_BYTES + F_WORDS * 8) / 4;
  }
  private used(i: number): boolean {
    return this.u[this.ui(i) + 5] === 1;
  }

  // ---- the mutex (held for microseconds: a scan of the records) ------------------------------
  private lock(): void {
    const h = this.hdr;
    for (let spins = 0; Atomics.compareExchange(h, H_MUTEX, 0, 1) !== 0; spins++) {
      if (spins > 100) Atomics.wait(h, H_MUTEX, 1, 1);
    }
  }
  private unlock(): void {
    Atomics.store(this.hdr, H_MUTEX, 0);
    Atomics.notify(this.hdr, H_MUTEX, 1);
  }
  private changed(): void {
    Atomics.add(this.hdr, H_GEN, 1);
    Atomics.notify(this.hdr, H_GEN);
  }

  private conflicts(i: number, ino: number, owner: bigint, kind: LockKind, l: FileLock): boolean {
    const fi = this.fi(i), ui = this.ui(i);
    const f = this.f, u = this.u;
    if (f[fi] !== ino || u[ui + 4] !== kind) return false;
    if (u[ui] === Number(owner & 0xffffffffn) && u[ui + 1] === Number(owner >> 32n)) return false;
    if (u[ui + 2] !== F_WRLCK && l.type !== F_WRLCK) return false;
    return f[fi + 1]! <= l.end && l.start <= f[fi + 2]!;
  }

  private read(i: number): FileLock {
    const fi = this.fi(i), ui = this.ui(i);
    return { start: this.f[fi + 1]!, end: this.f[fi + 2]!, type: this.u[ui + 2]!, pid: this.u[ui + 3]! };
  }

  private isOwn(i: number, ino: number, owner: bigint, kind: LockKind): boolean {
    const ui = this.ui(i);
    return this.used(i) && this.f[this.fi(i)] === ino && this.u[ui + 4] === kind &&
      this.u[ui] === Number(owner & 0xffffffffn) && this.u[ui + 1] === Number(owner >> 32n);
  }

  private put(ino: number, fh: number, owner: bigint, kind: LockKind, start: number, end: number, type: number, pid: number): void {
    const high = this.hdr[H_HIGH]!;
    let i = 0;
    while (i < high && this.used(i)) i++;
    if (i === high) {
      if (high >= this.capacity) throw new FuseError("ENOLCK", "lock table full");
      this.hdr[H_HIGH] = high + 1;
    }
    const fi = this.fi(i), ui = this.ui(i);
    this.f[fi] = ino;
    this.f[fi + 1] = start;
    this.f[fi + 2] = end;
    this.f[fi + 3] = fh;
    this.u[ui] = Number(owner & 0xffffffffn);
    this.u[ui + 1] = Number(owner >> 32n);
    this.u[ui + 2] = type;
    this.u[ui + 3] = pid;
    this.u[ui + 4] = kind;
    this.u[ui + 5] = 1;
  }

  private drop(i: number): void {
    this.u[this.ui(i) + 5] = 0;
    const high = this.hdr[H_HIGH]!;
    if (i === high - 1) {
      let h = i;
      while (h > 0 && !this.used(h - 1)) h--;
      this.hdr[H_HIGH] = h;
    }
  }

  /** The first lock of another owner that conflicts with `l`, or `l` with type F_UNLCK (GETLK). */
  test(ino: number, owner: bigint, l: FileLock, kind: LockKind = LOCK_POSIX): FileLock {
    this.lock();
    try {
      const high = this.hdr[H_HIGH]!;
      for (let i = 0; i < high; i++) if (this.used(i) && this.conflicts(i, ino, owner, kind, l)) return this.read(i);
      return { start: l.start, end: l.end, type: F_UNLCK, pid: 0 };
    } finally {
      this.unlock();
    }
  }

  /**
   * Set (F_RDLCK/F_WRLCK) or remove (F_UNLCK) `owner`'s lock on [l.start, l.end] of `ino`.
   * False when another owner's lock is in the way (nothing changed, except that a flock
   * conversion first drops the old lock, as Linux does).
   */
  trySet(ino: number, fh: number, owner: bigint, l: FileLock, kind: LockKind = LOCK_POSIX): boolean {
    if (!(l.start >= 0) || !(l.end >= l.start)) throw new FuseError("EINVAL", `lock range ${l.start}..${l.end}`);
    if (l.type !== F_RDLCK && l.type !== F_WRLCK && l.type !== F_UNLCK) throw new FuseError("EINVAL", `lock type ${l.type}`);
    this.lock();
    let changed = false;
    try {
      if (kind === LOCK_FLOCK) {
        // flock: one lock per owner on the whole file; converting drops the old one first.
        const high = this.hdr[H_HIGH]!;
        for (let i = 0; i < high; i++) {
          if (this.isOwn(i, ino, owner, kind)) {
            this.drop(i);
            changed = true;
          }
        }
        if (l.type === F_UNLCK) return true;
        for (let i = 0; i < this.hdr[H_HIGH]!; i++) if (this.used(i) && this.conflicts(i, ino, owner, kind, l)) return false;
        this.put(ino, fh, owner, kind, 0, Infinity, l.type, l.pid);
        return true;
      }
      if (l.type !== F_UNLCK) {
        const high = this.hdr[H_HIGH]!;
        for (let i = 0; i < high; i++) if (this.used(i) && this.conflicts(i, ino, owner, kind, l)) return false;
      }
      // Cut [start, end] out of the owner's locks (splitting one that spans it), then merge the
      // new lock with the owner's adjacent or overlapping locks of the same type.
      let start = l.start, end = l.end;
      const high = this.hdr[H_HIGH]!;
      const pieces: [number, number, number, number, number][] = []; // start, end, type, pid, fh
      for (let i = 0; i < high; i++) {
        if (!this.isOwn(i, ino, owner, kind)) continue;
        const fi = this.fi(i), ui = this.ui(i);
        const s = this.f[fi + 1]!, e = this.f[fi + 2]!, type = this.u[ui + 2]!, pid = this.u[ui + 3]!, rfh = this.f[fi + 3]!;
        const touches = s <= end + 1 && start <= e + 1;
        if (!touches) continue;
        if (l.type !== F_UNLCK && type === l.type) {
          // Same type, overlapping or adjacent: becomes part of the new lock.
          start = Math.min(start, s);
          end = Math.max(end, e);
          this.drop(i);
          changed = true;
          continue;
        }
        if (s > end || e < start) continue; // adjacent, other type: stays
        this.drop(i);
        changed = true;
        if (s < start) pieces.push([s, start - 1, type, pid, rfh]);
        if (e > end) pieces.push([end + 1, e, type, pid, rfh]);
      }
      for (const [s, e, type, pid, rfh] of pieces) this.put(ino, rfh, owner, kind, s, e, type, pid);
      if (l.type !== F_UNLCK) this.put(ino, fh, owner, kind, start, end, l.type, l.pid);
      return true;
    } finally {
      this.unlock();
      if (changed || l.type === F_UNLCK) this.changed();
    }
  }

  /**
   * trySet, waiting (without blocking the thread) until the lock can be had when `wait` is set;
   * EAGAIN when it cannot and `wait` is not set; EINTR when `signal` aborts (FUSE_INTERRUPT).
   */
  async set(ino: number, fh: number, owner: bigint, l: FileLock, kind: LockKind, wait: boolean, signal?: AbortSignal): Promise<void> {
    for (;;) {
      const gen = Atomics.load(this.hdr, H_GEN);
      if (this.trySet(ino, fh, owner, l, kind)) return;
      if (!wait) throw new FuseError("EAGAIN");
      if (signal?.aborted) throw new FuseError("EINTR");
      await this.changeAfter(gen, signal);
      if (signal?.aborted) throw new FuseError("EINTR");
    }
  }

  /** Resolves when any lock was dropped since `gen` (or after a while, or on abort). */
  private changeAfter(gen: number, signal?: AbortSignal): Promise<void> {
    const w = Atomics.waitAsync(this.hdr, H_GEN, gen, 1000);
    if (!w.async) return Promise.resolve();
    if (!signal) return w.value.then(() => {});
    return new Promise<void>((resolve) => {
      const onAbort = () => resolve();
      signal.addEventListener("abort", onAbort, { once: true });
      w.value.then(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }

  /** Drop every lock `owner` holds on `ino` (POSIX: the owner closed a descriptor: FLUSH). */
  unlockOwner(ino: number, owner: bigint, kind: LockKind = LOCK_POSIX): void {
    this.lock();
    let n = 0;
    try {
      const high = this.hdr[H_HIGH]!;
      for (let i = 0; i < high; i++) {
        if (this.isOwn(i, ino, owner, kind)) {
          this.drop(i);
          n++;
        }
      }
    } finally {
      this.unlock();
    }
    if (n) this.changed();
  }

  /** Drop every lock set through open file `fh` (RELEASE: OFD and flock locks end with it). */
  releaseFh(fh: number): void {
    this.lock();
    let n = 0;
    try {
      const high = this.hdr[H_HIGH]!;
      for (let i = 0; i < high; i++) {
        if (this.used(i) && this.f[this.fi(i) + 3] === fh) {
          this.drop(i);
          n++;
        }
      }
    } finally {
      this.unlock();
    }
    if (n) this.changed();
  }

  /** Locks held now (tests, diagnostics). */
  count(): number {
    this.lock();
    try {
      let n = 0;
      for (let i = 0; i < this.hdr[H_HIGH]!; i++) if (this.used(i)) n++;
      return n;
    } finally {
      this.unlock();
    }
  }
}
