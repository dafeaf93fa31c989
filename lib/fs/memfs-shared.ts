// One memfs state across threads (`--workers N`, copies mode): every thread runs its own copy
// of memfs (a replica) and all copies apply the same operations in the same order.
//
// - One mutex (a futex word in a SharedArrayBuffer). Every operation of every copy runs under it:
//   lock → apply the log entries this copy has not applied yet → execute → if it changed state,
//   append an entry (what was called, with the time stamp it used) → unlock. memfs is
//   deterministic given the operation and its time, so every copy's JS state (node ids, handles,
//   directories, the page allocator's bookkeeping) ends up identical.
// - The log: a byte ring in a SharedArrayBuffer (LOG_SIZE); every copy has a cursor (how far it
//   applied). A writer needs room: everything every live copy applied can be overwritten. A copy
//   idle in its event loop catches up from a timer (IDLE_MS; CATCH_UP_MS while it finds work)
//   and writes a heartbeat; a writer that finds no room gives up the lock and waits for the
//   laggards. A copy whose heartbeat is
//   older than DEAD_MS while the log is full is evicted (a terminated or stuck thread): its own
//   operations fail with EIO from then on, everyone else goes on. A writer that still finds no
//   room after WAIT_MS answers EIO without executing (the state is unchanged).
// - File data is not in the log: it lives once in the page store's SharedArrayBuffers
//   (memfs-pages.ts); only the copy that executes an operation moves bytes.
// - Neither are time stamps: every node's live in a shared table (memfs.ts `times`), written by
//   the executing copy. So an operation that changes only bytes and time stamps (an overwrite
//   inside the file, a read moving atime) appends nothing: no other copy replays it. Measured
//   (bench/micro/ab-qd1.ts, 4 KiB O_DIRECT random write QD1 ×2): 11.5 → 9.0 µs of daemon CPU
//   per request, +20 % IOPS; a replayed write had cost every other copy (the main thread's
//   included) a replay and moved the log's cache lines between CPUs.
//
// Positions are byte counts since the start, modulo 2^32 (LOG_SIZE divides 2^32). An entry never
// wraps: a PAD entry fills the end of the ring instead.

import { FuseError } from "./errors.ts";

/** Default size of the log ring (a power of two). */
export const LOG_SIZE = 32 << 20;
export const MAX_REPLICAS = 64;
/** Entry header: total length u32, op u32, time seconds f64, time nanoseconds u32, has time u32, payload length u32 (+4 spare). */
export const HDR = 32;
export const OP_PAD = 0;

/** An idle copy looks at the log this often (an idle daemon should stay asleep)… */
const IDLE_MS = 250;
/** …and this often while it finds entries to apply (other copies are busy). */
const CATCH_UP_MS = 10;
const DEAD_MS = 2000;
const WAIT_MS = 10_000;
const LOCK_WAIT_MS = 30_000;
/**
 * How long a copy looks at a held lock before sleeping on it. The lock is held for about a
 * microsecond (a 4 KiB copy), by a thread pinned to the other CPU; a futex sleep and wake-up
 * cost ~20 µs of latency, so spinning up to this long is cheaper whenever the holder runs.
 * (200 looks, ~1 µs, slept on one request in a hundred under 4 KiB QD1 ×2: p99 19 µs.)
 */
const SPIN_MICROS = Number(process.env.FUSE_URING_SPIN_US ?? 20);
/** Looks between two clock reads while spinning. */
const SPIN_BATCH = 64;

// Control words (Int32Array over `ctl`).
const LOCK = 0;
const HEAD = 1;
/**
 * 1 once the log is half full for the first time: a copy that joins later could find its start
 * overwritten (and begin()'s cached bound assumes no cursor behind it), so joining is refused.
 */
const WRAPPED = 2;
/** Never changes: a place to sleep on. */
const SLEEP = 3;
const CURSOR = 8;
const STATE = CURSOR + MAX_REPLICAS;
const BEAT = STATE + MAX_REPLICAS;
const CTL_WORDS = BEAT + MAX_REPLICAS;

const FREE = 0;
const ACTIVE = 1;
const EVICTED = 2;

/** The shared parts of the log (structured-cloneable). */
export interface SharedLog {
  ctl: SharedArrayBuffer;
  log: SharedArrayBuffer;
}

export function createSharedLog(size = LOG_SIZE): SharedLog {
  if (!(size >= 1 << 16 && size <= 1 << 30 && (size & (size - 1)) === 0)) throw new RangeError("memfs: the shared log size must be a power of two in 64 KiB..1 GiB");
  return { ctl: new SharedArrayBuffer(CTL_WORDS * 4), log: new SharedArrayBuffer(size) };
}

/** Apply one entry written by another copy: `op`, payload at bytes[off, off + len). */
export type ApplyFn = (op: number, off: number, len: number, time: [number, number] | null) => void;

/**
 * Heartbeat clock, compared between threads: the wall clock (one for the whole process), in
 * ms modulo 2^31. Not performance.timeOrigin + now(): each Worker has its own time origin and
 * monotonic zero, and under load (a CI run) a live copy's heartbeat read 42 ms in the future of
 * the evicting thread's clock: it looked 2^31 ms old and was evicted while alive.
 */
function nowMs(): number {
  return Date.now() & 0x7fffffff;
}

/** Milliseconds since heartbeat `beat` (0 if it lies ahead: the wall clock was stepped back). */
export function ageMs(now: number, beat: number): number {
  const d = (now - beat) & 0x7fffffff;
  return d >= 0x40000000 ? 0 : d;
}

export class Replicator {
  readonly bytes: Uint8Array;
  readonly dv: DataView;
  /** The ring's size (LOG_SIZE unless created smaller, for tests). */
  private readonly size: number;
  private readonly ctl: Int32Array;
  /** This copy's slot (cursor, state, heartbeat). */
  readonly id: number;
  /** Where the payload of the entry being prepared starts (after begin). */
  pos = 0;
  private locked = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  /** Entries applied from other copies (diagnostics). */
  applied = 0;
  private broken: string | null = null;
  /**
   * A position no live copy's cursor was behind when last computed (cursors only move forward,
   * so it stays a safe bound): begin() rescans the cursors only when this bound says "full".
   */
  private oldest = 0;

  constructor(shared: SharedLog, private readonly apply: ApplyFn, private readonly log: (line: string) => void = (l) => console.error(l)) {
    this.ctl = new Int32Array(shared.ctl);
    this.bytes = new Uint8Array(shared.log);
    this.size = shared.log.byteLength;
    this.dv = new DataView(shared.log);
    this.lock();
    try {
      if (Atomics.load(this.ctl, WRAPPED) !== 0) {
        throw new Error("memfs: a copy cannot join: the shared log has filled since the filesystem was created");
      }
      let id = -1;
      for (let i = 0; i < MAX_REPLICAS; i++) {
        if (Atomics.load(this.ctl, STATE + i) === FREE) {
          id = i;
          break;
        }
      }
      if (id < 0) throw new Error(`memfs: more than ${MAX_REPLICAS} copies`);
      this.id = id;
      Atomics.store(this.ctl, CURSOR + id, 0);
      Atomics.store(this.ctl, BEAT + id, nowMs());
      Atomics.store(this.ctl, STATE + id, ACTIVE);
      // The state is rebuilt from the log at the first lock (the owner first wires up `apply`).
    } finally {
      this.unlock();
    }
  }

  /** Bytes ever logged (modulo 2^32) and entries this copy applied from others (diagnostics). */
  position(): { logged: number; applied: number } {
    return { logged: Atomics.load(this.ctl, HEAD) >>> 0, applied: this.applied };
  }

  /** Keep up while idle (the timer does not keep the thread alive). */
  startTimer(): void {
    if (this.timer || this.closed) return;
    const tick = () => {
      const busy = this.idle();
      if (this.closed) return;
      this.timer = setTimeout(tick, busy ? CATCH_UP_MS : IDLE_MS);
      (this.timer as { unref?: () => void }).unref?.();
    };
    this.timer = setTimeout(tick, IDLE_MS);
    (this.timer as { unref?: () => void }).unref?.();
  }

  /** Leave: the log no longer waits for this copy. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.broken ??= "memfs: this copy left the shared state (destroy)";
    if (Atomics.load(this.ctl, STATE + this.id) === ACTIVE) Atomics.store(this.ctl, STATE + this.id, FREE);
  }

  /** Heartbeat, and catch up if behind; returns whether there was something to apply. */
  private idle(): boolean {
    Atomics.store(this.ctl, BEAT + this.id, nowMs());
    if (this.locked || this.broken) return false;
    if (Atomics.load(this.ctl, HEAD) === Atomics.load(this.ctl, CURSOR + this.id)) return false;
    try {
      if (Atomics.load(this.ctl, STATE + this.id) === ACTIVE) this.catchUp(false);
    } catch {
      // evicted or broken: its operations report it
    }
    return true;
  }

  /** Take the mutex and apply what the other copies logged. Throws EIO when this copy cannot serve. */
  lock(): void {
    if (this.broken) throw new FuseError("EIO", this.broken);
    const c = this.ctl;
    // Most of the way without the lock (catchUp), the rest under it.
    if (this.id !== undefined && Atomics.load(c, HEAD) !== Atomics.load(c, CURSOR + this.id) && Atomics.load(c, STATE + this.id) === ACTIVE) this.catchUp(false);
    if (Atomics.compareExchange(c, LOCK, 0, 1) !== 0 && !this.spin()) {
      const deadline = performance.now() + LOCK_WAIT_MS;
      // Futex mutex (Drepper's "mutex 2"): 2 = locked with waiters.
      let v = Atomics.exchange(c, LOCK, 2);
      while (v !== 0) {
        Atomics.wait(c, LOCK, 2, 100);
        v = Atomics.exchange(c, LOCK, 2);
        if (v !== 0 && performance.now() > deadline) {
          throw new FuseError("EIO", "memfs: the shared lock was held for 30 s (a copy died holding it?)");
        }
      }
    }
    this.locked = true;
    if (this.id !== undefined && Atomics.load(c, STATE + this.id) === EVICTED) {
      this.broken = "memfs: this copy fell behind the shared log and was evicted";
      this.unlock();
      this.log(`fuse-uring: ${this.broken}; its requests fail with EIO`);
      throw new FuseError("EIO", this.broken);
    }
    if (this.id !== undefined) this.catchUp(true);
  }

  /**
   * The lock is held for about a microsecond: look for it a little before sleeping on the futex
   * (a sleep and a wake-up cost more, and the holder runs on the other CPU). True: taken.
   */
  private spin(): boolean {
    const c = this.ctl;
    let deadline = 0;
    for (;;) {
      for (let i = 0; i < SPIN_BATCH; i++) {
        if (Atomics.load(c, LOCK) === 0 && Atomics.compareExchange(c, LOCK, 0, 1) === 0) return true;
      }
      const now = performance.now();
      if (deadline === 0) deadline = now + SPIN_MICROS / 1000;
      else if (now > deadline) return false;
    }
  }

  unlock(): void {
    this.locked = false;
    if (Atomics.exchange(this.ctl, LOCK, 0) === 2) Atomics.notify(this.ctl, LOCK, 1);
  }

  /**
   * Apply what the other copies logged. Needs no lock (`locked` false): the entries up to the
   * head are complete (written before the head moved, which Atomics orders), no writer
   * overwrites them before this copy's cursor passes them, and a replay touches no shared bytes
   * — only this copy's own state. So a copy replays mostly outside the lock and holds it only for
   * the last few entries and its own operation.
   */
  private catchUp(locked: boolean): void {
    const c = this.ctl;
    const head = Atomics.load(c, HEAD) >>> 0;
    let cur = Atomics.load(c, CURSOR + this.id) >>> 0;
    if (cur === head) return;
    const dv = this.dv;
    const time: [number, number] = [0, 0];
    try {
      while (cur !== head) {
        const off = cur & (this.size - 1);
        const len = dv.getUint32(off, true);
        const op = dv.getUint32(off + 4, true);
        if (len < 8 || (len & 7) !== 0 || off + len > this.size || ((head - cur) >>> 0) < len) throw new Error(`memfs: corrupt shared log entry at ${cur} (length ${len})`);
        if (op !== OP_PAD) {
          const has = dv.getUint32(off + 20, true) !== 0;
          if (has) {
            time[0] = dv.getFloat64(off + 8, true);
            time[1] = dv.getUint32(off + 16, true);
          }
          this.apply(op, off + HDR, dv.getUint32(off + 24, true), has ? [time[0], time[1]] : null);
          this.applied++;
        }
        cur = (cur + len) >>> 0;
      }
    } catch (e) {
      // A replay that fails means the copies diverged: this copy can no longer answer.
      this.broken = `BUG: memfs copy ${this.id} diverged from the shared log: ${e instanceof Error ? e.message : String(e)}`;
      this.log(`fuse-uring: ${this.broken}`);
      Atomics.store(c, STATE + this.id, EVICTED);
      if (locked) this.unlock();
      throw new FuseError("EIO", this.broken);
    } finally {
      if (!this.broken) Atomics.store(c, CURSOR + this.id, cur | 0);
    }
  }

  /** Largest lag (bytes not yet applied) of the live copies other than this one. */
  private maxLag(head: number): number {
    let lag = 0;
    const c = this.ctl;
    for (let i = 0; i < MAX_REPLICAS; i++) {
      if (i === this.id || Atomics.load(c, STATE + i) !== ACTIVE) continue;
      const l = (head - (Atomics.load(c, CURSOR + i) >>> 0)) >>> 0;
      if (l > lag) lag = l;
    }
    return lag;
  }

  /**
   * Lock, catch up and make room for an entry with a `payload`-byte payload; `pos` is where its
   * payload goes. Then either commit() or abort(). Throws EIO (unlocked) when there is no room.
   */
  begin(payload: number): void {
    this.lock();
    this.reserve(payload);
  }

  /** begin() for a copy that holds the lock already (it looked at its state first). */
  reserve(payload: number): void {
    const total = (HDR + payload + 7) & ~7;
    if (total * 4 > this.size) {
      this.unlock();
      throw new FuseError("EIO", "memfs: operation too large for the shared log");
    }
    let head = Atomics.load(this.ctl, HEAD) >>> 0;
    if (((head - this.oldest) >>> 0) + total * 2 > this.size) {
      const lag = this.maxLag(head);
      this.oldest = (head - lag) >>> 0;
      if (lag + total * 2 > this.size) head = this.waitRoom(total * 2);
    }
    let off = head & (this.size - 1);
    if (off + total > this.size) {
      const pad = this.size - off;
      this.dv.setUint32(off, pad, true);
      this.dv.setUint32(off + 4, OP_PAD, true);
      head = this.advance(head, pad);
      off = 0;
    }
    this.pos = off + HDR;
  }

  private advance(head: number, len: number): number {
    const next = (head + len) >>> 0;
    if (next < head || next >= this.size / 2) Atomics.store(this.ctl, WRAPPED, 1);
    Atomics.store(this.ctl, HEAD, next | 0);
    Atomics.store(this.ctl, CURSOR + this.id, next | 0);
    return next;
  }

  /** Wait (unlocked) until the laggards applied enough; evict the dead ones. Returns the head, locked. */
  private waitRoom(need: number): number {
    const start = performance.now();
    let head = 0;
    for (;;) {
      this.unlock();
      Atomics.wait(this.ctl, SLEEP, 0, 1);
      this.lock();
      head = Atomics.load(this.ctl, HEAD) >>> 0;
      const lag = this.maxLag(head);
      this.oldest = (head - lag) >>> 0;
      if (lag + need <= this.size) return head;
      const waited = performance.now() - start;
      const now = nowMs();
      for (let i = 0; i < MAX_REPLICAS; i++) {
        if (i === this.id || Atomics.load(this.ctl, STATE + i) !== ACTIVE) continue;
        const lag = (head - (Atomics.load(this.ctl, CURSOR + i) >>> 0)) >>> 0;
        const age = ageMs(now, Atomics.load(this.ctl, BEAT + i));
        if (lag + need > this.size && (age > DEAD_MS || waited > WAIT_MS)) {
          Atomics.store(this.ctl, STATE + i, EVICTED);
          this.log(`fuse-uring: memfs copy ${i} stopped applying the shared log (last seen ${age} ms ago); evicted, its requests fail with EIO`);
        }
      }
      const left = this.maxLag(head);
      this.oldest = (head - left) >>> 0;
      if (left + need <= this.size) return head;
      if (waited > WAIT_MS) {
        this.unlock();
        throw new FuseError("EIO", "memfs: the shared log stayed full");
      }
    }
  }

  /** Append the prepared entry (payload already at `pos`) and unlock. */
  commit(op: number, payload: number, time: [number, number] | null): void {
    const off = this.pos - HDR;
    const total = (HDR + payload + 7) & ~7;
    const dv = this.dv;
    dv.setUint32(off, total, true);
    dv.setUint32(off + 4, op, true);
    if (time) {
      dv.setFloat64(off + 8, time[0], true);
      dv.setUint32(off + 16, time[1], true);
      dv.setUint32(off + 20, 1, true);
    } else {
      dv.setUint32(off + 20, 0, true);
    }
    dv.setUint32(off + 24, payload, true);
    this.advance(Atomics.load(this.ctl, HEAD) >>> 0, total);
    this.unlock();
  }

  /** Nothing to log: unlock. */
  abort(): void {
    this.unlock();
  }
}
