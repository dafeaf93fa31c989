// Workload definitions (fio jobs and the metadata helper) and how to run and validate them.

import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { BenchError, run } from "./util.ts";

export interface Metric {
  id: string;
  label: string;
  unit: string;
  higherIsBetter: boolean;
}

export interface Params {
  runtimeS: number;
  /** Seconds of the same fio job run unmeasured just before each measured fio run (0: none). */
  warmupS: number;
  size: string;
  metaFiles: number;
  readdirMinS: number;
  /** engine of the queue-depth workloads: libaio (default) or io_uring */
  aioEngine: "libaio" | "io_uring";
}

export interface Workload {
  id: string;
  label: string;
  kind: "fio" | "meta" | "csu";
  /** fio arguments besides the common ones (see fioCommand) */
  fio?: string[];
  /** data files this workload reads/writes: f.0 … f.(jobs-1) */
  jobs: number;
  metrics: Metric[];
  inQuick: boolean;
  description: string;
}

const MIBS = (id: string, label: string): Metric => ({ id, label, unit: "MiB/s", higherIsBetter: true });
const IOPS = (id: string, label: string): Metric => ({ id, label, unit: "IOPS", higherIsBetter: true });
const OPS = (id: string, label: string): Metric => ({ id, label, unit: "ops/s", higherIsBetter: true });
const USEC = (id: string, label: string): Metric => ({ id, label, unit: "µs", higherIsBetter: false });

const sync2 = ["--ioengine=sync", "--numjobs=2"];
/** placeholder for the asynchronous engine (Params.aioEngine) */
const AIO = "--ioengine=@AIO";
const mix = (qd: number, jobs: number): Workload => ({
  id: `mix70-qd${qd}-j${jobs}`,
  label: `4K 70/30 randrw QD${qd} ×${jobs}`,
  kind: "fio",
  fio: ["--rw=randrw", "--rwmixread=70", "--bs=4k", "--direct=1", AIO, `--iodepth=${qd}`, `--numjobs=${jobs}`],
  jobs,
  metrics: [IOPS(`mix70-qd${qd}-j${jobs}`, `4K 70/30 randrw QD${qd} ×${jobs}`)],
  inQuick: false,
  description: `fio randrw 70 % reads, 4 KiB, O_DIRECT, async engine (--aio-engine), iodepth ${qd}, numjobs ${jobs}; read+write IOPS`,
});

export const WORKLOADS: Workload[] = [
  {
    id: "seqread-1m", label: "seq read 1M direct ×2", kind: "fio", jobs: 2, inQuick: true,
    fio: ["--rw=read", "--bs=1M", "--direct=1", ...sync2],
    metrics: [MIBS("seqread-1m", "seq read 1M direct ×2")],
    description: "fio sequential read, 1 MiB blocks, O_DIRECT, sync engine, numjobs 2",
  },
  {
    id: "seqwrite-1m", label: "seq write 1M direct ×2", kind: "fio", jobs: 2, inQuick: true,
    fio: ["--rw=write", "--bs=1M", "--direct=1", ...sync2],
    metrics: [MIBS("seqwrite-1m", "seq write 1M direct ×2")],
    description: "fio sequential write, 1 MiB blocks, O_DIRECT, sync engine, numjobs 2",
  },
  {
    id: "read-1m-buffered", label: "seq read 1M buffered ×2", kind: "fio", jobs: 2, inQuick: false,
    fio: ["--rw=read", "--bs=1M", "--direct=0", "--invalidate=1", ...sync2],
    metrics: [MIBS("read-1m-buffered", "seq read 1M buffered ×2")],
    description: "fio sequential read, 1 MiB blocks, through the page cache (invalidated at open), sync engine, numjobs 2",
  },
  {
    id: "randread-4k-qd1", label: "rand read 4K QD1 ×2", kind: "fio", jobs: 2, inQuick: true,
    fio: ["--rw=randread", "--bs=4k", "--direct=1", ...sync2],
    metrics: [
      IOPS("randread-4k-qd1", "rand read 4K QD1 ×2"),
      USEC("randread-4k-qd1-p50", "rand read 4K QD1 p50 latency"),
      USEC("randread-4k-qd1-p99", "rand read 4K QD1 p99 latency"),
    ],
    description: "fio random read, 4 KiB, O_DIRECT, sync engine (QD1), numjobs 2; IOPS and clat p50/p99",
  },
  {
    id: "randwrite-4k-qd1", label: "rand write 4K QD1 ×2", kind: "fio", jobs: 2, inQuick: true,
    fio: ["--rw=randwrite", "--bs=4k", "--direct=1", ...sync2],
    metrics: [
      IOPS("randwrite-4k-qd1", "rand write 4K QD1 ×2"),
      USEC("randwrite-4k-qd1-p50", "rand write 4K QD1 p50 latency"),
      USEC("randwrite-4k-qd1-p99", "rand write 4K QD1 p99 latency"),
    ],
    description: "fio random write, 4 KiB, O_DIRECT, sync engine (QD1), numjobs 2; IOPS and clat p50/p99",
  },
  {
    id: "randread-4k-qd16", label: "rand read 4K QD16", kind: "fio", jobs: 1, inQuick: false,
    fio: ["--rw=randread", "--bs=4k", "--direct=1", AIO, "--iodepth=16", "--numjobs=1"],
    metrics: [IOPS("randread-4k-qd16", "rand read 4K QD16")],
    description: "fio random read, 4 KiB, O_DIRECT, async engine (--aio-engine, default libaio), iodepth 16, numjobs 1",
  },
  {
    id: "csu", label: "create/stat/unlink", kind: "csu", jobs: 0, inQuick: true,
    metrics: [
      OPS("csu-create", "create (csu)"),
      OPS("csu-stat", "stat (csu, statx force-sync)"),
      OPS("csu-unlink", "unlink (csu)"),
      OPS("csu", "create+stat+unlink"),
    ],
    description: "bench/meta.py csu (separate process): create N files in 2 directories, statx(AT_STATX_FORCE_SYNC) each, unlink all; create+stat+unlink = 3N ÷ the three phases' time",
  },
  {
    id: "burn-read-4k-qd1", label: "burn fs: rand read 4K QD1 ×2", kind: "fio", jobs: 2, inQuick: true,
    fio: ["--rw=randread", "--bs=4k", "--direct=1", ...sync2],
    metrics: [IOPS("burn-read-4k-qd1", "burn fs: rand read 4K QD1 ×2 (50 µs handler)")],
    description: "fio random read, 4 KiB, O_DIRECT, sync engine (QD1), numjobs 2, on bench/fs/burn.ts (READ handler burns ~50 µs of CPU): only the burn configurations",
  },
  mix(1, 1),
  mix(1, 4),
  mix(64, 1),
  mix(64, 4),
  {
    id: "meta", label: "metadata", kind: "meta", jobs: 0, inQuick: false,
    metrics: [
      OPS("meta-create", "create files"),
      OPS("meta-stat", "stat files (statx force-sync)"),
      OPS("meta-readdir", "readdir entries"),
      OPS("meta-unlink", "unlink files"),
    ],
    description: "bench/meta.py (separate process): create N files in 2 directories, statx(AT_STATX_FORCE_SYNC) each, list the min(10000, 3N/4)-entry directory repeatedly, unlink all",
  },
];

export const MAX_JOBS = Math.max(...WORKLOADS.map((w) => w.jobs));

const JOB = "fuj";

export function fioCommon(dir: string, p: Params): string[] {
  return [
    // The job name must not name an existing non-file in fio's cwd: fio then uses the job name as
    // the one file of all jobs (that is how it treats block devices). fio also runs in `dir`.
    `--name=${JOB}`, `--directory=${dir}`, "--filename_format=f.$jobnum", `--size=${p.size}`,
    "--group_reporting", "--output-format=json",
  ];
}

export function fioCommand(w: Workload, dir: string, p: Params): string[] {
  return ["fio", ...fioCommon(dir, p), "--time_based", `--runtime=${Math.round(p.runtimeS * 1000)}ms`, ...w.fio!.map((a) => a.replace("@AIO", p.aioEngine))];
}

/** Lay out the data files f.0 … f.(MAX_JOBS-1) with real (non-zero, non-sparse) data. */
export async function prepareData(dir: string, p: Params, context: string): Promise<void> {
  const cmd = ["fio", ...fioCommon(dir, p), "--rw=write", "--bs=1M", "--ioengine=sync", "--direct=0", `--numjobs=${MAX_JOBS}`, "--end_fsync=0"];
  const r = await run(cmd, { timeoutMs: 300_000, cwd: dir });
  parseFio(r, cmd, `${context}: preparing data files`);
  const want = sizeBytes(p.size);
  for (let i = 0; i < MAX_JOBS; i++) {
    const f = join(dir, `f.${i}`);
    const got = existsSync(f) ? statSync(f).size : -1;
    if (got !== want) throw new BenchError(`${context}: data file ${f} has ${got < 0 ? "not been created" : `${got} bytes`}, expected ${want}`);
  }
}

export const sizeBytes = (s: string) => Number(s.replace(/[KMG]$/i, "")) * ({ K: 1024, M: 2 ** 20, G: 2 ** 30 }[s.slice(-1).toUpperCase()] ?? 1);

interface FioJob {
  jobname: string;
  error: number;
  job_runtime?: number;
  read: FioDir;
  write: FioDir;
}
interface FioDir {
  io_bytes: number;
  bw_bytes: number;
  iops: number;
  total_ios?: number;
  clat_ns?: { percentile?: Record<string, number>; mean?: number };
}

function parseFio(r: Awaited<ReturnType<typeof run>>, cmd: string[], context: string): FioJob[] {
  const where = `${context}: \`${cmd.join(" ")}\``;
  if (r.timedOut) throw new BenchError(`fio timed out (mount hung?) — ${where}\n${r.stderr.slice(-2000)}`);
  const i = r.stdout.indexOf("{");
  let json: { jobs?: FioJob[] } | null = null;
  if (i >= 0) {
    try {
      json = JSON.parse(r.stdout.slice(i));
    } catch {}
  }
  if (r.code !== 0 || !json?.jobs?.length) {
    throw new BenchError(`fio failed (exit ${r.code}${r.signal ? `, ${r.signal}` : ""}) — ${where}\n${(r.stderr + r.stdout.slice(0, i >= 0 ? i : undefined)).trim().slice(-2000)}`);
  }
  const bad = json.jobs.filter((j) => j.error !== 0);
  if (bad.length) {
    throw new BenchError(`fio reported errors (${bad.map((j) => `${j.jobname}: error ${j.error}`).join(", ")}) — ${where}\n${r.stderr.trim().slice(-2000)}`);
  }
  if (/io_u error|\berr=\s*-?[1-9]/.test(r.stderr)) {
    throw new BenchError(`fio printed an error — ${where}\n${r.stderr.trim().slice(-2000)}`);
  }
  const bytes = json.jobs.reduce((a, j) => a + j.read.io_bytes + j.write.io_bytes, 0);
  if (bytes <= 0) throw new BenchError(`fio moved no data — ${where}`);
  return json.jobs;
}

export interface WorkloadResult {
  values: Record<string, number>;
  /** operations the workload performed (fio I/Os; files × phases for the metadata helper) */
  ops: number;
  seconds: number;
  detail: Record<string, unknown>;
}

export async function runWorkload(w: Workload, dir: string, p: Params, context: string, repo: string): Promise<WorkloadResult> {
  if (w.kind === "fio") {
    const cmd = fioCommand(w, dir, p);
    const r = await run(cmd, { timeoutMs: (p.runtimeS + 90) * 1000, cwd: dir });
    const jobs = parseFio(r, cmd, context);
    const j = jobs[0]!; // --group_reporting: one aggregate
    const values: Record<string, number> = {};
    const m0 = w.metrics[0]!;
    if (m0.unit === "MiB/s") values[m0.id] = (j.read.bw_bytes + j.write.bw_bytes) / 2 ** 20;
    else values[m0.id] = j.read.iops + j.write.iops;
    for (const m of w.metrics.slice(1)) {
      const q = m.id.endsWith("p50") ? "50.000000" : "99.000000";
      // the side that did the I/O: reads, or writes for a write-only workload
      const side = j.read.total_ios || !j.write.total_ios ? j.read : j.write;
      const ns = side.clat_ns?.percentile?.[q];
      if (ns === undefined) throw new BenchError(`fio JSON has no clat percentile ${q} — ${context}`);
      values[m.id] = ns / 1000;
    }
    return {
      values,
      ops: (j.read.total_ios ?? 0) + (j.write.total_ios ?? 0),
      seconds: r.seconds,
      detail: {
        readBytes: j.read.io_bytes, writeBytes: j.write.io_bytes, readIops: j.read.iops, writeIops: j.write.iops,
        readClatMeanUs: (j.read.clat_ns?.mean ?? 0) / 1000, jobRuntimeMs: j.job_runtime,
      },
    };
  }
  const cmd = w.kind === "csu"
    ? ["python3", join(repo, "bench/meta.py"), "csu", dir, String(p.metaFiles)]
    : ["python3", join(repo, "bench/meta.py"), "meta", dir, String(p.metaFiles), String(p.readdirMinS)];
  const r = await run(cmd, { timeoutMs: 600_000 });
  if (r.timedOut || r.code !== 0) {
    throw new BenchError(`metadata helper failed${r.timedOut ? " (timed out)" : ` (exit ${r.code})`} — ${context}: \`${cmd.join(" ")}\`\n${r.stderr.trim().slice(-2000)}`);
  }
  const out = JSON.parse(r.stdout) as Record<string, { ops: number; s: number; passes?: number }> & { statMode: string };
  const values: Record<string, number> = {};
  const phases = w.kind === "csu" ? ["create", "stat", "unlink"] : ["create", "stat", "readdir", "unlink"];
  for (const ph of phases) values[`${w.id}-${ph}`] = out[ph]!.ops / out[ph]!.s;
  let ops = 0;
  if (w.kind === "csu") {
    ops = out.create!.ops + out.stat!.ops + out.unlink!.ops;
    values.csu = ops / (out.create!.s + out.stat!.s + out.unlink!.s);
  } else {
    // a readdir pass (opendir, READDIRPLUS batches, releasedir) counts as one operation
    ops = out.create!.ops + out.stat!.ops + out.unlink!.ops + (out.readdir!.passes ?? 0);
  }
  return { values, ops, seconds: r.seconds, detail: out };
}
