// Measures the three ways a native thread can wake the JS event loop, as used to choose the
// shim's doorbell (lib/transport, shim/bell.zig): a threadsafe JSCallback, a pipe read by
// Bun's event loop, and an eventfd read through node:fs on the thread pool.
// Run: node_modules/.bin/bun bench/doorbell/run.ts   (builds doorbell.c with zig cc)
import { dlopen, FFIType, JSCallback, ptr } from "bun:ffi";
import { read } from "node:fs";

const dir = import.meta.dir;
const so = `/tmp/fuse-uring-doorbell-${process.pid}.so`;
const cc = Bun.spawnSync(["python3", "-m", "ziglang", "cc", "-O2", "-shared", "-fPIC", "-o", so, `${dir}/doorbell.c`, "-lpthread"]);
if (cc.exitCode !== 0) throw new Error(`zig cc failed: ${cc.stderr}`);
const L = dlopen(so, {
  db_now: { returns: FFIType.u64_fast }, db_sent: { returns: FFIType.u64_fast },
  db_start_cb: { args: ["function", "i32"], returns: "i32" },
  db_start_fd: { args: ["i32", "i32"], returns: "i32" },
  db_eventfd: { returns: "i32" }, db_pipe: { args: ["ptr"], returns: "i32" },
}).symbols;
const N = 2000;
const now = () => Number(L.db_now()), sent = () => Number(L.db_sent());
function pct(a: number[]): string {
  a.sort((x, y) => x - y);
  return `p50 ${(a[a.length >> 1]! / 1000).toFixed(1)} µs, p99 ${(a[Math.floor(a.length * 0.99)]! / 1000).toFixed(1)} µs`;
}
async function callback(): Promise<number[]> {
  const lat: number[] = [];
  let done!: () => void;
  const p = new Promise<void>((r) => (done = r));
  const cb = new JSCallback((i: number) => { lat.push(now() - sent()); if (i === N - 1) done(); }, { args: ["u32"], returns: "void", threadsafe: true });
  L.db_start_cb(cb.ptr!, N);
  await p;
  return lat;
}

async function pipe(): Promise<number[]> {
  const fds = new Int32Array(2);
  L.db_pipe(ptr(fds));
  const lat: number[] = [];
  L.db_start_fd(fds[1]!, N);
  let got = 0;
  for await (const chunk of Bun.file(fds[0]!).stream()) {
    lat.push(now() - sent());
    got += chunk.length / 8;
    if (got >= N) break;
  }
  return lat;
}

async function eventfd(): Promise<number[]> {
  const efd = L.db_eventfd();
  const lat: number[] = [];
  L.db_start_fd(efd, N);
  const b = Buffer.alloc(8);
  let got = 0;
  while (got < N) {
    await new Promise<void>((res, rej) => read(efd, b, 0, 8, null, (e) => (e ? rej(e) : res())));
    lat.push(now() - sent());
    got += Number(b.readBigUInt64LE());
  }
  return lat;
}

// Interleaved rounds (A B C A B C …) so load changes hit every method alike.
const fns = { callback, pipe, eventfd };
const all: Record<keyof typeof fns, number[]> = { callback: [], pipe: [], eventfd: [] };
for (let round = 0; round < 3; round++) for (const k of Object.keys(fns) as (keyof typeof fns)[]) all[k].push(...(await fns[k]()));
console.log(`threadsafe JSCallback        ${pct(all.callback)}`);
console.log(`pipe + Bun.file().stream()   ${pct(all.pipe)}`);
console.log(`eventfd + fs.read (threads)  ${pct(all.eventfd)}`);
process.exit(0);
