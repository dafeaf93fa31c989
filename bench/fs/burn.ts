// Benchmark filesystem with a CPU-heavy READ handler: `fuse-uring mount bench/fs/burn.ts MNT
// -- [--size BYTES] [--files N] [--burn-us US]`. Read-only files f.0 … f.(N-1) of BYTES zeros
// each; every READ first does ~US µs of CPU work (default 50), so the daemon's throughput is
// bound by handler CPU, not by the transport. bench/run.ts compares one JS thread with
// `--workers 2` on it. Self-contained (no imports: test/integration/ship.test.ts mounts a copy of
// this file alone with the standalone binary), and an inode filesystem with computed node ids
// (`replicable: true`), so every worker thread can serve any request with its own copy. Its busy
// loop and option parser are exported for bench/fs/burn-paths.ts.
//
// The work is a calibrated loop, not a clock spin, so a preempted handler still costs the
// same CPU when it runs again.

interface Ctx {
  args?: string[];
}

/** The number after `name` in `args` (≥ 0), or `fallback`; `who` names the script in the error. */
export function option(args: string[], name: string, fallback: number, who = "burn.ts"): number {
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

const S_IFDIR = 0o040000, S_IFREG = 0o100000;

export default function burnfs(ctx: Ctx = {}) {
  const args = ctx.args ?? [];
  const size = option(args, "--size", 64 << 20);
  const files = option(args, "--files", 4);
  const burnUs = option(args, "--burn-us", 50);
  const rounds = Math.round(calibrate() * burnUs);
  const zeros = new Uint8Array(1 << 20);
  // node 1 = root, node 2 + i = f.i: the same numbers in every copy
  const attr = (ino: number) => ({
    ino, mode: ino === 1 ? S_IFDIR | 0o755 : S_IFREG | 0o444, nlink: ino === 1 ? 2 : 1, uid: 0, gid: 0, rdev: 0,
    size: ino === 1 ? 0 : size, blocks: ino === 1 ? 0 : Math.ceil(size / 512),
    atime: 0, atimeNsec: 0, mtime: 0, mtimeNsec: 0, ctime: 0, ctimeNsec: 0,
  });
  const enoent = () => Object.assign(new Error("ENOENT"), { code: "ENOENT", errno: -2 });
  return {
    replicable: true,
    lookup(_ctx: unknown, parent: number, name: string) {
      const m = /^f\.(\d+)$/.exec(name);
      if (parent !== 1 || !m || Number(m[1]) >= files) throw enoent();
      const ino = 2 + Number(m[1]);
      return { ino, attr: attr(ino) };
    },
    getattr(_ctx: unknown, ino: number) {
      if (ino < 1 || ino >= 2 + files) throw enoent();
      return attr(ino);
    },
    readdir(_ctx: unknown, ino: number, _fh: number, offset: number, filler: { add(name: string, next: number, e: { ino: number; attr: ReturnType<typeof attr> }): boolean }) {
      if (ino !== 1) return;
      for (let i = offset; i < files; i++) if (!filler.add(`f.${i}`, i + 1, { ino: 2 + i, attr: attr(2 + i) })) break;
    },
    read(_ctx: unknown, _ino: number, _fh: number, offset: number, length: number) {
      spin(rounds);
      const n = Math.max(0, Math.min(length, size - offset, zeros.length));
      return zeros.subarray(0, n);
    },
  };
}
