// The CPU work of the burn filesystems (bench/fs/burn.ts, bench/fs/burn-paths.ts): a calibrated
// busy loop a READ handler runs for ~US µs, and their number options. No imports, so the burn
// scripts stay independent of the library version they are mounted with.
//
// The work is a calibrated loop, not a clock spin, so a preempted handler still costs the
// same CPU when it runs again.

/** The number after `name` in `args` (≥ 0), or `fallback`; `who` names the script in the error. */
export function option(args: string[], name: string, fallback: number, who: string): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v < 0) throw new Error(`${who}: ${name} needs a number ≥ 0, got ${JSON.stringify(args[i + 1])}`);
  return v;
}

let sink = 0;
/** `n` rounds of xorshift: pure CPU, no allocation; the result goes to `sink` so it is not optimised away. */
export function spin(n: number): void {
  let x = (sink | 1) >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
  }
  sink = x;
}

/** Rounds of `spin` per µs on this CPU: the best of a few 2 ms trials (the machine may be busy). */
export function calibrate(): number {
  spin(200_000); // warm up the JIT
  let best = 0;
  for (let t = 0; t < 5; t++) {
    const n = 400_000;
    const t0 = Bun.nanoseconds();
    spin(n);
    const us = (Bun.nanoseconds() - t0) / 1000;
    if (us > 0) best = Math.max(best, n / us);
  }
  return best;
}
