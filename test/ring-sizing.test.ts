// Default ring sizing (lib/transport/uring.ts ringSizing): every possible CPU gets a queue. The
// first entries of each queue get pinned payloads of max_write (the 64 MiB budget), the deeper
// ones payloads touched only when used (UNPINNED_BUDGET, the worst case); FUSE's max_background
// follows the entries (maxBackground).
import { describe, expect, test } from "bun:test";
import { MAX_DEFAULT_DEPTH, PINNED_BUDGET, UNPINNED_BUDGET, maxBackground, pinnedDepth, ringSizing } from "../lib/transport/uring.ts";

const perEntry = (w: number) => w + 4096;

describe("ringSizing: default queue depth, max_write and pinned entries", () => {
  test("pinned: as many 1 MiB payloads as the budget allows ; unpinned entries beyond, at most MAX_DEFAULT_DEPTH in all", () => {
    expect(MAX_DEFAULT_DEPTH).toBe(128);
    expect(ringSizing(1)).toEqual({ depth: 128, maxWrite: 1 << 20, pinnedDepth: 63 });
    expect(ringSizing(2)).toEqual({ depth: 126, maxWrite: 1 << 20, pinnedDepth: 31 });
    expect(ringSizing(4)).toEqual({ depth: 62, maxWrite: 1 << 20, pinnedDepth: 15 });
    expect(ringSizing(8)).toEqual({ depth: 30, maxWrite: 1 << 20, pinnedDepth: 7 });
    expect(ringSizing(24)).toEqual({ depth: 9, maxWrite: 1 << 20, pinnedDepth: 2 });
  });

  test("never above the pinned budget, nor the unpinned worst case, for any CPU count", () => {
    for (const q of [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024]) {
      const { depth, maxWrite, pinnedDepth: pinned } = ringSizing(q);
      expect(depth).toBeGreaterThanOrEqual(1);
      expect(pinned).toBeGreaterThanOrEqual(1);
      expect(pinned).toBeLessThanOrEqual(depth);
      expect(maxWrite % 4096).toBe(0);
      expect(q * pinned * perEntry(maxWrite)).toBeLessThanOrEqual(PINNED_BUDGET);
      expect(q * (depth - pinned) * perEntry(maxWrite)).toBeLessThanOrEqual(UNPINNED_BUDGET);
      // What the ring computes from depth and payload size is the same split.
      expect(pinnedDepth(q, depth, maxWrite)).toBe(pinned);
    }
  });

  test("many CPUs: fewer entries first, then smaller payloads, all pinned", () => {
    const s = ringSizing(64);
    expect(s.depth).toBeLessThanOrEqual(2);
    expect(s.maxWrite).toBeLessThan(1 << 20);
    expect(s.pinnedDepth).toBe(s.depth);
  });

  test("an explicit depth pins what fits: --queue-depth 64 --max-write 131072 all of it, 64 × 1 MiB on 2 CPUs 31", () => {
    expect(pinnedDepth(2, 64, 131072)).toBe(64);
    expect(pinnedDepth(2, 64, 1 << 20)).toBe(31);
    expect(pinnedDepth(2, 8, 1 << 20)).toBe(8);
  });

  test("max_background: every entry of every queue, at least the classic 64, at most 65535", () => {
    expect(maxBackground(2, 126)).toBe(252);
    expect(maxBackground(2, 8)).toBe(64);
    expect(maxBackground(1024, 128)).toBe(65535);
  });
});
