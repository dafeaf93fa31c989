// bench/fs/burn.ts as a paths() script: `fuse-uring mount bench/fs/burn-paths.ts MNT --
// [--threads stateless|single] [--size BYTES] [--files N] [--burn-us US]`. Read-only files f.0 …
// f.(N-1) of BYTES zeros; every READ first does ~US µs of CPU work (default 50), so throughput
// is bound by handler CPU. The handlers keep no state, so with `--threads stateless` (the
// default) every CPU runs its own copy of this script over one shared node table; `--threads
// single` serves everything from one thread, for comparison.

import { paths } from "../../lib/index.ts";

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v < 0) throw new Error(`burn-paths.ts: ${name} needs a number ≥ 0, got ${JSON.stringify(args[i + 1])}`);
  return v;
}

let sink = 0;
/** `n` rounds of xorshift: pure CPU, no allocation (as bench/fs/burn.ts). */
function spin(n: number): void {
  let x = (sink | 1) >>> 0;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
  }
  sink = x;
}

/** Rounds of `spin` per µs on this CPU: the best of a few trials. */
function calibrate(): number {
  spin(200_000);
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

export default function burnPaths({ args = [] }: { args?: string[] }) {
  const t = args.indexOf("--threads");
  const threads = t >= 0 ? args[t + 1] : "stateless";
  if (threads !== "stateless" && threads !== "single") throw new Error(`burn-paths.ts: --threads stateless|single, got ${JSON.stringify(threads)}`);
  const size = option(args, "--size", 64 << 20);
  const files = option(args, "--files", 4);
  const rounds = Math.round(calibrate() * option(args, "--burn-us", 50));
  const zeros = new Uint8Array(1 << 20);
  const fileIndex = (path: string) => {
    const m = /^\/f\.(\d+)$/.exec(path);
    return m && Number(m[1]) < files ? Number(m[1]) : -1;
  };
  return paths(
    {
      getattr: (path) => (path === "/" ? { type: "dir" } : fileIndex(path) >= 0 ? { type: "file", size, mtime: 0 } : null),
      readdir: () => Array.from({ length: files }, (_, i) => `f.${i}`),
      read(_path, offset, length) {
        spin(rounds);
        return zeros.subarray(0, Math.max(0, Math.min(length, size - offset, zeros.length)));
      },
    },
    { threads },
  );
}
