// The per-opcode latency histograms behind stats().latencyUs (fixed buckets, no allocation).
import { describe, expect, test } from "bun:test";
import { bucketOf, bucketUpper, LatencyHistograms } from "../lib/session/latency.ts";

describe("latency histograms", () => {
  test("every value lands in a bucket whose upper bound is ≥ it and < 1.25 × it + 1", () => {
    for (let v = 0; v < 100000; v += 1 + Math.floor(v / 50)) {
      const b = bucketOf(v);
      expect(bucketUpper(b)).toBeGreaterThanOrEqual(v);
      expect(bucketUpper(b)).toBeLessThan(v * 1.25 + 1);
      if (b > 0) expect(bucketUpper(b - 1)).toBeLessThan(v);
    }
    expect(bucketOf(1e12)).toBe(bucketOf(2 ** 32)); // huge values share the last bucket
  });

  test("count, p50, p99, max per opcode", () => {
    const h = new LatencyHistograms();
    for (let i = 1; i <= 1000; i++) h.record(15, i); // READ: 1..1000 µs
    h.record(1, 42); // LOOKUP
    const s = h.summarize((op) => (op === 15 ? "READ" : op === 1 ? "LOOKUP" : `OP${op}`));
    expect(Object.keys(s).sort()).toEqual(["LOOKUP", "READ"]);
    expect(s.READ!.count).toBe(1000);
    expect(s.READ!.max).toBe(1000);
    expect(s.READ!.p50).toBeGreaterThanOrEqual(500);
    expect(s.READ!.p50).toBeLessThan(500 * 1.25);
    expect(s.READ!.p99).toBeGreaterThanOrEqual(990);
    expect(s.READ!.p99).toBeLessThanOrEqual(1000);
    expect(s.READ!.mean).toBeCloseTo(500.5, 1);
    expect(s.LOOKUP).toEqual({ count: 1, p50: 42, p99: 42, max: 42, mean: 42 });
  });
});
