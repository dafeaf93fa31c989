// Benchmark filesystem with a CPU-heavy READ handler: `fuse-uring mount bench/fs/burn.ts MNT
// -- [--size BYTES] [--files N] [--burn-us US]`. Read-only files f.0 … f.(N-1) of BYTES zeros
// each; every READ first does ~US µs of CPU work (default 50), so the daemon's throughput is
// bound by handler CPU, not by the transport. bench/run.ts compares one JS thread with
// `--workers 2` on it. Imports nothing of the library (the busy loop: burn-cpu.ts), and an inode
// filesystem with computed node ids (`replicable: true`), so every worker thread can serve any
// request with its own copy.

import { calibrate, option as optionOf, spin } from "./burn-cpu.ts";

interface Ctx {
  args?: string[];
}

const option = (args: string[], name: string, fallback: number) => optionOf(args, name, fallback, "burn.ts");

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
