#!/usr/bin/env bun
// Micro-benchmark of the passthrough's metadata handlers, called directly (no mount, no
// kernel): the daemon CPU a request costs inside PassthroughFS, without the transport.
//
//   bun bench/micro/passthrough-meta.ts [--lib DIR] [--src DIR] [--n N] [--rounds R]
//
// --lib: the repository whose lib/fs/passthrough.ts to load (default: this one), so an older
// checkout can be measured with the same script. --src: the source directory (default: a fresh
// directory under /dev/shm, a tmpfs). Prints the best and median of R rounds, in µs per op (wall and CPU time).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : dflt;
};
const lib = resolve(opt("--lib", join(import.meta.dir, "../..")));
const n = Number(opt("--n", "2000"));
const rounds = Number(opt("--rounds", "7"));
const src = opt("--src", "") || mkdtempSync("/dev/shm/pt-meta-");
const { PassthroughFS } = await import(join(lib, "lib/fs/passthrough.ts"));

const fs = new PassthroughFS(src, { log: () => {} });
const ctx = { uid: process.getuid!(), gid: process.getgid!(), pid: process.pid } as never;
const O_WRONLY = 1, O_CREAT = 0o100;

/** Call a handler that may answer synchronously or with a Promise. */
async function call<T>(v: T | Promise<T>): Promise<T> {
  return v instanceof Promise ? await v : v;
}

writeFileSync(join(src, "existing"), "x");
const names = Array.from({ length: n }, (_, i) => `file-${i}`);

const cases: Record<string, () => Promise<number>> = {
  // touch + rm as the kernel sends it: LOOKUP (negative), CREATE, RELEASE, UNLINK, FORGET.
  "create+unlink": async () => {
    for (const name of names) {
      try {
        await call(fs.lookup(ctx, 1, name));
      } catch {}
      const c = await call(fs.create(ctx, 1, name, 0o100644, 0, O_WRONLY | O_CREAT));
      await call(fs.release(ctx, c.entry.ino, c.open.fh));
      await call(fs.unlink(ctx, 1, name));
      fs.forget(c.entry.ino, 1);
    }
    return n;
  },
  "lookup (negative)": async () => {
    for (const name of names) {
      try {
        await call(fs.lookup(ctx, 1, name));
      } catch {}
    }
    return n;
  },
  "lookup+forget": async () => {
    for (let i = 0; i < n; i++) {
      const e = await call(fs.lookup(ctx, 1, "existing"));
      fs.forget(e.ino, 1);
    }
    return n;
  },
  getattr: async () => {
    const e = await call(fs.lookup(ctx, 1, "existing"));
    for (let i = 0; i < n; i++) await call(fs.getattr(ctx, e.ino));
    fs.forget(e.ino, 1);
    return n;
  },
  "mkdir+rmdir": async () => {
    for (const name of names) {
      const e = await call(fs.mkdir(ctx, 1, name, 0o40755));
      await call(fs.rmdir(ctx, 1, name));
      fs.forget(e.ino, 1);
    }
    return n;
  },
};

const only = opt("--only", "");
for (const [name, f] of Object.entries(cases)) {
  if (only && !name.includes(only)) continue;
  await f(); // warm up
  // Wall time and this process's CPU time (user + system: the syscalls count) per op; on a
  // shared machine the CPU time is the steadier of the two.
  const us: number[] = [], cpu: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now(), c0 = process.cpuUsage();
    const ops = await f();
    const c = process.cpuUsage(c0);
    us.push(((performance.now() - t0) * 1000) / ops);
    cpu.push((c.user + c.system) / ops);
  }
  us.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  const f2 = (v: number) => v.toFixed(2).padStart(7);
  console.log(`${name.padEnd(20)} wall best ${f2(us[0]!)} µs  median ${f2(us[us.length >> 1]!)} µs   cpu best ${f2(cpu[0]!)} µs  median ${f2(cpu[cpu.length >> 1]!)} µs`);
}
fs.destroy();
if (!opt("--src", "")) rmSync(src, { recursive: true, force: true });
