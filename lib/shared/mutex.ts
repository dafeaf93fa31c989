// One futex mutex for every state shared between the daemon's threads (memfs, the passthrough's
// node table), with one failure policy.
//
// Three Int32 words at `at` in a shared Int32Array:
//   LOCK   0 = free; else the holder's thread id + 1, | WAITERS when a thread sleeps on it
//   COUNT  acquisitions (written by the holder): a waiter tells a stuck holder from a busy one
//   WAITS  times any thread found the mutex held and had to wait (diagnostics)
//
// Taking it: one compareExchange when free (no syscall). When held: look again for up to
// SPIN_MICROS before sleeping on the futex. The holder runs on another CPU for about a
// microsecond (memfs: a 4 KiB copy), and a futex sleep and wake-up cost ~20 µs of latency, so
// spinning that long is cheaper whenever the holder runs. (200 looks, ~1 µs, slept on one
// request in a hundred under 4 KiB QD1 ×2: p99 19 µs.) The clock is read once every SPIN_BATCH
// looks: a clock read costs more than a look.
//
// The bound: a waiter that sees the same holder with the same acquisition count for longer
// than `boundMs` (a thread that died or stalls inside its critical section) calls failStop():
// the state the holder was changing may be half-changed, and every other thread would wait
// forever. Never a silent give-up that leaves the lock held.
//
// Re-entrant per thread (a handler that calls another handler must not deadlock on itself).

import { knobs } from "../knobs.ts";
import { threadId } from "node:worker_threads";
import { failStop } from "./fail-stop.ts";

const LOCK = 0;
const COUNT = 1;
const WAITS = 2;
/** Words a mutex takes in its Int32Array. */
export const MUTEX_WORDS = 3;
const WAITERS = 1 << 30;
const HOLDER = WAITERS - 1;

/** How long a waiter looks at a held lock before sleeping on it (µs). */
const SPIN_MICROS = knobs.lockSpinMicros();
/** Looks between two clock reads while spinning. */
const SPIN_BATCH = 64;
/** Default bound on one holder (ms). */
export const DEFAULT_BOUND_MS = 5000;
/** A sleeping waiter wakes this often to check the bound (ms). */
const WAIT_SLICE_MS = 100;

export interface MutexOptions {
  /** A holder seen this long (same acquisition) makes the waiter fail-stop (ms). */
  boundMs?: number;
  /** What the mutex protects, for the fail-stop line ("memfs", "passthrough node table"). */
  name?: string;
  /**
   * How long a waiter spins before sleeping (µs; default SPIN_MICROS). 0: one batch of looks
   * only — for a holder that may be inside a syscall, where spinning longer
   * burns CPU the holder's syscall does not give back.
   */
  spinMicros?: number;
}

export class SharedMutex {
  private depth = 0;
  /** This thread's mark in the lock word. */
  private readonly me = (threadId & HOLDER) + 1;
  private readonly boundMs: number;
  private readonly name: string;
  private readonly spinMs: number;

  constructor(
    private readonly w: Int32Array,
    private readonly at = 0,
    options: MutexOptions = {},
  ) {
    this.boundMs = options.boundMs ?? DEFAULT_BOUND_MS;
    this.name = options.name ?? "shared state";
    this.spinMs = (options.spinMicros ?? SPIN_MICROS) / 1000;
  }

  /** Times any thread had to wait for the mutex. */
  get waits(): number {
    return Atomics.load(this.w, this.at + WAITS);
  }

  /** Whether this thread holds it. */
  get held(): boolean {
    return this.depth > 0;
  }

  lock(): void {
    if (this.depth > 0) {
      this.depth++;
      return;
    }
    const w = this.w, L = this.at + LOCK;
    if (Atomics.compareExchange(w, L, 0, this.me) !== 0 && !this.spin()) this.sleep();
    this.depth = 1;
    w[this.at + COUNT] = (w[this.at + COUNT]! + 1) | 0;
  }

  unlock(): void {
    if (--this.depth > 0) return;
    if (this.depth < 0) {
      this.depth = 0;
      throw new Error(`BUG: ${this.name}: unlock without lock`);
    }
    if ((Atomics.exchange(this.w, this.at + LOCK, 0) & WAITERS) !== 0) Atomics.notify(this.w, this.at + LOCK, 1);
  }

  /** Look for the lock for up to spinMicros (at least one batch of looks). True: taken. */
  private spin(): boolean {
    const w = this.w, L = this.at + LOCK, me = this.me;
    let deadline = 0;
    for (;;) {
      for (let i = 0; i < SPIN_BATCH; i++) {
        if (Atomics.load(w, L) === 0 && Atomics.compareExchange(w, L, 0, me) === 0) return true;
      }
      if (this.spinMs === 0) return false;
      const now = performance.now();
      if (deadline === 0) deadline = now + this.spinMs;
      else if (now > deadline) return false;
    }
  }

  /** Sleep on the futex until taken; fail-stop on a holder that keeps it past the bound. */
  private sleep(): void {
    const w = this.w, L = this.at + LOCK, me = this.me;
    Atomics.add(w, this.at + WAITS, 1);
    let seenHolder = -1, seenCount = 0, since = 0;
    for (;;) {
      const v = Atomics.load(w, L);
      if (v === 0) {
        // Taken with the waiters mark: others may still sleep on it.
        if (Atomics.compareExchange(w, L, 0, me | WAITERS) === 0) return;
        continue;
      }
      if ((v & WAITERS) === 0 && Atomics.compareExchange(w, L, v, v | WAITERS) !== v) continue;
      Atomics.wait(w, L, v | WAITERS, WAIT_SLICE_MS);
      const now = Atomics.load(w, L);
      if (now === 0) continue;
      const holder = now & HOLDER, count = Atomics.load(w, this.at + COUNT);
      const t = performance.now();
      if (holder !== seenHolder || count !== seenCount) {
        seenHolder = holder;
        seenCount = count;
        since = t;
      } else if (t - since > this.boundMs) {
        failStop(`${this.name}: the lock has been held by thread ${holder - 1} for more than ${Math.round(this.boundMs)} ms (it died or stalls inside its critical section)`);
      }
    }
  }
}
