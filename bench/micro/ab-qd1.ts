// A/B of two checkouts: daemon CPU per request and IOPS, fio 4 KiB O_DIRECT random I/O at QD1
// (randread; AB_RW=randwrite for writes; AB_RW=csu: create+stat+unlink, JOBS bench/meta.py csu
// processes of 3000 files each, ops/s = 3 × files ÷ the three phases' time, CPU per operation).
// Interleaves the checkouts round by round (the machine is shared and noisy: compare medians).
//
//   bun bench/micro/ab-qd1.ts memfs|passthrough JOBS ROUNDS CHECKOUT_A CHECKOUT_B …
//
// AB_ARGS: extra daemon arguments, space-separated (e.g. "--entry-ttl 86400 --attr-ttl 86400
// --negative-ttl 86400", bench/run.ts's -ttl configurations).
//
// Each checkout needs its own `bash scripts/setup.sh` (node_modules and the shim). Root.
import { spawn, spawnSync } from "bun";
import { mkdtempSync, readFileSync } from "node:fs";

const [fsKind, jobs, rounds, ...trees] = process.argv.slice(2);
if (!fsKind || !jobs || !rounds || trees.length === 0) {
  console.error("usage: bun bench/micro/ab-qd1.ts memfs|passthrough JOBS ROUNDS CHECKOUT…");
  process.exit(2);
}
const rw = process.env.AB_RW ?? "randread";
if (rw !== "randread" && rw !== "randwrite" && rw !== "csu") {
  console.error("AB_RW: randread, randwrite or csu");
  process.exit(2);
}
const extraArgs = (process.env.AB_ARGS ?? "").split(" ").filter((a) => a !== "");
const ticksOf = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]); // utime + stime, 1/100 s
};
const results: Record<string, { iops: number; cpu: number; p99?: number }[]> = {};
for (let r = 0; r < Number(rounds); r++) {
  for (const tree of trees) {
    const mnt = mkdtempSync("/tmp/ab-mnt-");
    const src = mkdtempSync("/tmp/ab-src-");
    spawnSync(["mount", "-t", "tmpfs", "-o", "size=300M", "tmpfs", src]);
    const args = fsKind === "memfs" ? ["--memfs"] : ["--passthrough", src];
    const d = spawn([`${tree}/node_modules/.bin/bun`, `${tree}/bin/fuse-uring.ts`, "mount", ...args, mnt, "--transport", "uring", ...extraArgs], { stderr: "pipe", stdout: "ignore" });
    const rd = d.stderr.getReader();
    let err = "";
    while (!err.includes("mounted")) {
      const { value, done } = await rd.read();
      if (done) throw new Error(`daemon of ${tree} exited: ${err}`);
      err += new TextDecoder().decode(value);
    }
    if (rw === "csu") {
      const files = 3000;
      const meta = (tag: string) => Array.from({ length: Number(jobs) }, (_, j) => {
        spawnSync(["mkdir", "-p", `${mnt}/${tag}${j}`]);
        return spawn(["python3", `${tree}/bench/meta.py`, "csu", `${mnt}/${tag}${j}`, String(files)], { stdout: "pipe" });
      });
      await Promise.all(meta("warm").map((p) => p.exited)); // unmeasured: JIT, caches
      const t0 = ticksOf(d.pid);
      const ps = meta("m");
      const outs = await Promise.all(ps.map(async (p) => JSON.parse(await new Response(p.stdout).text())));
      const t1 = ticksOf(d.pid);
      let ops = 0, secs = 0;
      for (const o of outs) {
        ops += o.create.ops + o.stat.ops + o.unlink.ops;
        secs = Math.max(secs, o.create.s + o.stat.s + o.unlink.s);
      }
      (results[tree] ??= []).push({ iops: Math.round(ops / secs), cpu: ((t1 - t0) * 10_000) / ops });
      d.kill("SIGTERM");
      await d.exited;
      spawnSync(["umount", src]);
      spawnSync(["rm", "-rf", mnt]);
      spawnSync(["rmdir", src]);
      continue;
    }
    const fioArgs = (runtime: number) => ["fio", "--name=q", `--directory=${mnt}`, `--rw=${rw}`, "--bs=4k", "--direct=1", "--ioengine=sync",
      `--numjobs=${jobs}`, "--time_based", `--runtime=${runtime}`, "--size=32M", "--group_reporting", "--output-format=json"];
    // Unmeasured first run: lays the files out and warms the daemon up (JIT, caches).
    spawnSync(fioArgs(1));
    const t0 = ticksOf(d.pid);
    const fio = spawnSync(fioArgs(4));
    const t1 = ticksOf(d.pid);
    const read = JSON.parse(fio.stdout.toString()).jobs[0][rw === "randread" ? "read" : "write"];
    const p99 = Number(read.clat_ns?.percentile?.["99.000000"] ?? NaN) / 1000;
    (results[tree] ??= []).push({ iops: Math.round(read.iops), cpu: ((t1 - t0) * 10_000) / read.total_ios, p99 });
    d.kill("SIGTERM");
    await d.exited;
    spawnSync(["umount", src]);
    spawnSync(["rmdir", src, mnt]);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
for (const [tree, rs] of Object.entries(results)) {
  console.log(`${tree}: IOPS ${rs.map((r) => r.iops).join(", ")} (median ${median(rs.map((r) => r.iops))}); ` +
    `daemon CPU µs/request ${rs.map((r) => r.cpu.toFixed(1)).join(", ")} (median ${median(rs.map((r) => r.cpu)).toFixed(1)})` +
    (rs[0]?.p99 !== undefined ? `; fio p99 µs ${rs.map((r) => r.p99!.toFixed(1)).join(", ")} (median ${median(rs.map((r) => r.p99!)).toFixed(1)})` : ""));
}
