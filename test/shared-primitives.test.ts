// lib/shared/: the mutex (re-entrant, holder id in the lock word, bound → fail-stop), the slab,
// the arena and the page store, on one thread (memfs-copies.test.ts and passthrough-shared.test.ts
// use them across threads).

import { describe, expect, test } from "bun:test";
import { threadId } from "node:worker_threads";
import { Arena, ARENA_WORDS } from "../lib/shared/arena.ts";
import { FailStopError } from "../lib/shared/fail-stop.ts";
import { growable } from "../lib/shared/growable.ts";
import { MUTEX_WORDS, SharedMutex } from "../lib/shared/mutex.ts";
import { PAGES_WORDS, PageStore, pageFreeStack } from "../lib/shared/pages.ts";
import { Slab, SLAB_WORDS } from "../lib/shared/slab.ts";

describe("SharedMutex", () => {
  test("re-entrant; the lock word names the holder; unlock without lock is a BUG", () => {
    const w = new Int32Array(new SharedArrayBuffer(4 * MUTEX_WORDS));
    const m = new SharedMutex(w);
    m.lock();
    m.lock();
    expect(w[0]! & 0x3fffffff).toBe(threadId + 1);
    m.unlock();
    expect(m.held).toBe(true);
    m.unlock();
    expect(w[0]).toBe(0);
    expect(w[1]).toBe(1); // one acquisition (the nested lock is not one)
    expect(() => m.unlock()).toThrow(/BUG/);
  });

  test("a holder seen past the bound: the waiter fail-stops naming it", () => {
    const w = new Int32Array(new SharedArrayBuffer(4 * MUTEX_WORDS));
    Atomics.store(w, 0, 42 + 1); // "thread 42" holds it and never lets go
    const m = new SharedMutex(w, 0, { boundMs: 200, name: "test state" });
    const t0 = performance.now();
    expect(() => m.lock()).toThrow(FailStopError);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(200);
    try {
      m.lock();
    } catch (e) {
      expect((e as Error).message).toContain("test state: the lock has been held by thread 42");
    }
    expect(m.waits).toBe(2);
  });
});

describe("Slab, Arena, PageStore", () => {
  test("slab: slot 0 is never handed out; freed slots come back last-freed first; full → 0", () => {
    const M = new Int32Array(new SharedArrayBuffer(4 * SLAB_WORDS));
    Slab.init(M, 0);
    const s = new Slab(growable(0, 4 * 8 * 4), 8, M, 0); // room for 4 records (slot 0 included)
    expect([s.alloc(), s.alloc(), s.alloc()]).toEqual([1, 2, 3]);
    expect(s.alloc()).toBe(0);
    s.free(2);
    s.free(1);
    expect(s.count).toBe(1);
    expect([s.alloc(), s.alloc()]).toEqual([1, 2]);
  });

  test("arena: power-of-two blocks, reused whole after free, never offset 0", () => {
    const M = new Int32Array(new SharedArrayBuffer(4 * ARENA_WORDS));
    Arena.init(M, 0);
    const a = new Arena(growable(0, 1 << 20), M, 0);
    const x = a.alloc(10);
    expect(x).toBeGreaterThan(0);
    expect(x % 8).toBe(0);
    expect(a.capacity(x)).toBe(24); // 10 + the 8-byte header: a 32-byte block
    const y = a.alloc(100);
    expect(a.capacity(y)).toBe(120);
    a.free(y);
    expect(a.alloc(90)).toBe(y);
    expect(a.alloc(2 << 20)).toBe(0); // past the buffer's maximum
  });

  test("pages: fresh pages, then freed ones (reused, flagged so the caller zeroes them)", () => {
    const M = new Int32Array(new SharedArrayBuffer(4 * PAGES_WORDS));
    const p = new PageStore(4, PageStore.segments(4), pageFreeStack(4), M, 0);
    expect([p.alloc(), p.alloc()]).toEqual([0, 1]);
    expect(p.reused).toBe(false);
    p.release(0);
    expect(p.alloc()).toBe(0);
    expect(p.reused).toBe(true);
    expect([p.alloc(), p.alloc()]).toEqual([2, 3]);
    expect(() => p.alloc()).toThrow(/exhausted/);
  });
});
