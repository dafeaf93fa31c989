// Default ring sizing (lib/transport/uring.ts ringSizing): every possible CPU gets a queue, each
// entry a pinned payload of max_write, so the default depth is what the 64 MiB budget allows.
import { describe, expect, test } from "bun:test";
import { MAX_DEFAULT_DEPTH, PINNED_BUDGET, ringSizing } from "../lib/transport/uring.ts";

const perEntry = (w: number) => w + 4096;

describe("ringSizing: default queue depth and max_write", () => {
  test("as deep as the budget allows with 1 MiB payloads, at most MAX_DEFAULT_DEPTH", () => {
    expect(MAX_DEFAULT_DEPTH).toBe(32);
    expect(ringSizing(1)).toEqual({ depth: 32, maxWrite: 1 << 20 });
    expect(ringSizing(2)).toEqual({ depth: 31, maxWrite: 1 << 20 });
    expect(ringSizing(4)).toEqual({ depth: 15, maxWrite: 1 << 20 });
    expect(ringSizing(8)).toEqual({ depth: 7, maxWrite: 1 << 20 });
    expect(ringSizing(24)).toEqual({ depth: 2, maxWrite: 1 << 20 });
  });

  test("never above the pinned budget, for any CPU count", () => {
    for (const q of [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024]) {
      const { depth, maxWrite } = ringSizing(q);
      expect(depth).toBeGreaterThanOrEqual(1);
      expect(maxWrite % 4096).toBe(0);
      expect(q * depth * perEntry(maxWrite)).toBeLessThanOrEqual(PINNED_BUDGET);
    }
  });

  test("many CPUs: fewer entries first, then smaller payloads", () => {
    const s = ringSizing(64);
    expect(s.depth).toBeLessThanOrEqual(2);
    expect(s.maxWrite).toBeLessThan(1 << 20);
  });
});
