// lib/fs/locks.ts without a mount: POSIX range semantics (split, merge, downgrade, GETLK),
// OFD/flock ownership, FLUSH and RELEASE cleanup, SETLKW waiting without blocking and giving up
// on interrupt, and mutual exclusion across threads sharing the table (memfs serves from one
// copy per worker thread). The same answers through a real mount, compared with tmpfs:
// test/integration/protocol-ops.test.ts.

import { describe, expect, test } from "bun:test";
import { F_RDLCK, F_UNLCK, F_WRLCK, LOCK_FLOCK, LOCK_POSIX, LockTable } from "../lib/fs/locks.ts";
import { FuseError } from "../lib/protocol/errors.ts";

const A = 1n, B = 2n;
const L = (start: number, end: number, type: number, pid = 0) => ({ start, end, type, pid });

describe("LockTable", () => {
  test("POSIX: conflicts between owners only; GETLK names the holder; read locks share", () => {
    const t = new LockTable();
    expect(t.trySet(1, 10, A, L(0, 99, F_WRLCK, 100))).toBe(true);
    expect(t.trySet(1, 11, B, L(50, 59, F_WRLCK))).toBe(false);
    expect(t.trySet(1, 11, B, L(100, 199, F_WRLCK))).toBe(true); // beside: fine
    expect(t.test(1, B, L(0, 1000, F_RDLCK))).toEqual(L(0, 99, F_WRLCK, 100));
    expect(t.test(1, A, L(0, 150, F_WRLCK))).toEqual(L(100, 199, F_WRLCK, 0)); // A's own lock never conflicts for A
    expect(t.test(2, B, L(0, 99, F_WRLCK)).type).toBe(F_UNLCK); // another inode
    expect(t.trySet(1, 10, A, L(0, 99, F_RDLCK, 100))).toBe(true); // downgrade in place
    expect(t.trySet(1, 11, B, L(0, 9, F_RDLCK))).toBe(true);
    expect(t.trySet(1, 11, B, L(0, 9, F_WRLCK))).toBe(false);
  });

  test("POSIX: unlocking the middle splits a lock; same-type neighbours merge", () => {
    const t = new LockTable();
    t.trySet(1, 10, A, L(0, 99, F_WRLCK, 5));
    t.trySet(1, 10, A, L(40, 59, F_UNLCK));
    expect(t.count()).toBe(2);
    expect(t.test(1, B, L(0, 1000, F_RDLCK))).toEqual(L(0, 39, F_WRLCK, 5));
    expect(t.test(1, B, L(40, 1000, F_RDLCK))).toEqual(L(60, 99, F_WRLCK, 5));
    t.trySet(1, 10, A, L(40, 59, F_WRLCK, 5));
    expect(t.count()).toBe(1); // merged back into one
    expect(t.test(1, B, L(0, 1000, F_RDLCK))).toEqual(L(0, 99, F_WRLCK, 5));
    t.trySet(1, 10, A, L(100, Infinity, F_WRLCK, 5)); // adjacent, to EOF: merges
    expect(t.test(1, B, L(5000, 5000, F_RDLCK))).toEqual(L(0, Infinity, F_WRLCK, 5));
  });

  test("FLUSH drops an owner's POSIX locks on the inode; RELEASE drops what was set through the fh", () => {
    const t = new LockTable();
    t.trySet(1, 10, A, L(0, 9, F_WRLCK));
    t.trySet(2, 10, A, L(0, 9, F_WRLCK));
    t.trySet(1, 12, B, L(20, 29, F_WRLCK), LOCK_POSIX);
    t.unlockOwner(1, A);
    expect(t.test(1, B, L(0, 9, F_WRLCK)).type).toBe(F_UNLCK);
    expect(t.test(2, B, L(0, 9, F_WRLCK)).type).toBe(F_WRLCK); // other inode untouched
    t.releaseFh(12);
    expect(t.test(1, A, L(20, 29, F_WRLCK)).type).toBe(F_UNLCK);
  });

  test("flock: whole file, shared/exclusive, separate from POSIX locks; conversion drops the old lock first", () => {
    const t = new LockTable();
    expect(t.trySet(1, 10, A, L(0, Infinity, F_WRLCK), LOCK_FLOCK)).toBe(true);
    expect(t.trySet(1, 11, B, L(0, Infinity, F_RDLCK), LOCK_FLOCK)).toBe(false);
    expect(t.trySet(1, 11, B, L(0, Infinity, F_WRLCK), LOCK_POSIX)).toBe(true); // independent
    expect(t.trySet(1, 10, A, L(0, Infinity, F_RDLCK), LOCK_FLOCK)).toBe(true);
    expect(t.trySet(1, 11, B, L(0, Infinity, F_RDLCK), LOCK_FLOCK)).toBe(true);
    expect(t.trySet(1, 11, B, L(0, Infinity, F_WRLCK), LOCK_FLOCK)).toBe(false); // A shares it
    expect(t.trySet(1, 10, A, L(0, Infinity, F_WRLCK), LOCK_FLOCK)).toBe(true); // B's was dropped by its failed upgrade (as Linux)
  });

  test("SETLKW waits for the unlock without blocking the thread, and gives up with EINTR when interrupted", async () => {
    const t = new LockTable();
    t.trySet(1, 10, A, L(0, 9, F_WRLCK));
    let got = false;
    const waiting = t.set(1, 11, B, L(0, 9, F_WRLCK), LOCK_POSIX, true).then(() => (got = true));
    await Bun.sleep(50);
    expect(got).toBe(false); // still waiting, and this thread runs
    t.trySet(1, 10, A, L(0, 9, F_UNLCK));
    await waiting;
    expect(got).toBe(true);
    const ac = new AbortController();
    const p = t.set(1, 12, 3n, L(0, 9, F_RDLCK), LOCK_POSIX, true, ac.signal);
    setTimeout(() => ac.abort(), 50);
    const e = await p.then(() => null, (x) => x);
    expect(e).toBeInstanceOf(FuseError);
    expect((e as FuseError).errno).toBe(4); // EINTR
    await expect(t.set(1, 12, 3n, L(0, 9, F_RDLCK), LOCK_POSIX, false)).rejects.toMatchObject({ errno: 11 }); // EAGAIN
  });

  test("a full table answers ENOLCK", () => {
    const t = new LockTable(undefined, 4);
    for (let i = 0; i < 4; i++) expect(t.trySet(1, 10, BigInt(i + 1), L(i * 10, i * 10 + 1, F_RDLCK))).toBe(true);
    expect(() => t.trySet(1, 10, 9n, L(100, 101, F_RDLCK))).toThrow(FuseError);
  });

  test("across threads: one write lock, one holder at a time, every round counted", async () => {
    const t = new LockTable();
    const counters = new SharedArrayBuffer(12);
    const N = 4, rounds = 300;
    const workers = Array.from({ length: N }, () => new Worker(new URL("./fixtures/locks-worker.ts", import.meta.url).href));
    await Promise.all(workers.map((w, id) => new Promise<void>((resolve) => {
      w.onmessage = () => resolve();
      w.postMessage({ buffer: t.buffer, counters, id, rounds });
    })));
    for (const w of workers) w.terminate();
    const c = new Int32Array(counters);
    expect(c[0]).toBe(N * rounds);
    expect(c[2]).toBe(1);
    expect(t.count()).toBe(0);
  }, 60_000);
});
