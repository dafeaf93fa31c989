// Benchmark filesystem with a CPU-heavy READ handler: `fuse-uring mount bench/fs/burn.ts MNT
// -- [--size BYTES] [--files N] [--burn-us US]`. Read-only files f.0 … f.(N-1) of BYTES zeros
// each; every READ first does ~US µs of CPU work (default 50), so the daemon's throughput is
// bound by handler CPU, not by the transport. bench/run.ts compares one JS thread with
// `--workers 2` on it. Self-contained (no imports): each worker thread may load its own copy.
//
// The work is a calibrated loop, not a clock spin, so a preempted handler still costs the
// same CPU when it runs again.

interface Ctx {
  args?: string[];
}

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v < 0) throw new Error(`burn.ts: ${name} needs a number ≥ 0, got ${JSON.stringify(args[i + 1])}`);
  return v;
}

let sink = 0;
/** `n` rounds of xorshift: pure CPU, no allocation; the result goes to `sink` so it is not optimised away. */
function spin(n: number): void {
  let x = (sink | 1) >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
  }
  sink = x;
}

/** Rounds of `spin` per µs on this CPU: the best of a few 2 ms trials (the machine may be busy). */
function calibrate(): number {
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

export default function burnfs(ctx: Ctx = {}) {
  const args = ctx.args ?? [];
  const size = option(args, "--size", 64 << 20);
  const files = option(args, "--files", 4);
  const burnUs = option(args, "--burn-us", 50);
  const rounds = Math.round(calibrate() * burnUs);
  const names = Array.from({ length: files }, (_, i) => `f.${i}`);
  const isFile = (path: string) => /^\/f\.\d+$/.test(path) && Number(path.slice(3)) < files;
  const zeros = new Uint8Array(1 << 20);
  return {
    getattr(path: string) {
      if (path === "/") return { type: "dir" as const };
      return isFile(path) ? { type: "file" as const, size } : null;
    },
    readdir(path: string) {
      return path === "/" ? names : [];
    },
    read(path: string, offset: number, length: number) {
      spin(rounds);
      const n = Math.max(0, Math.min(length, size - offset, zeros.length));
      return zeros.subarray(0, n);
    },
  };
}
