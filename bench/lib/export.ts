// `bench/run.ts --workload export`: QEMU's FUSE storage-export workload, like for like (issue 28).
//
// fio 70/30 random read/write, 4 KiB, libaio, O_DIRECT, on one image on the machine's disk
// (ext4 under /var/tmp, never tmpfs), iodepth × jobs 1×1, 64×1, 1×4, 64×4, for the raw disk,
// the fuse-uring passthrough (default: O_DIRECT reaches the image; and --backing-cache) and
// libfuse's `passthrough_hp -o io_uring --nopassthrough`, in interleaved rounds (every
// configuration mounted at once over the same image; A B C … per workload). Before every run the
// image is written back and dropped from the page cache (fdatasync + POSIX_FADV_DONTNEED of that
// file only), and its residency (mincore, as fincore shows it) is printed before and after the
// run. Reported per run: IOPS (read + write), p99 completion latency, FUSE requests per I/O
// (the daemon's own counters) and daemon CPU per request (per I/O for libfuse: it has no
// counters).

import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { Daemon, type DaemonStats } from "./daemon.ts";
import { BenchError, fmtDuration, median, readText, run } from "./util.ts";

export const EXPORT_HELP = `Usage: bun bench/run.ts --workload export [options]

  QEMU's FUSE storage-export workload: fio randrw 70/30, 4 KiB, libaio, O_DIRECT, on an image on
  the disk (not tmpfs), QD×jobs 1×1, 64×1, 1×4, 64×4; raw disk, fuse-uring passthrough (O_DIRECT
  honoured; --backing-cache), libfuse passthrough_hp -o io_uring --nopassthrough; interleaved.

  --quick              2 rounds, 4 s runs, 256 MiB image (about 3 min)
  --reps N             rounds (default 3)
  --runtime S          seconds per fio run (default 10)
  --size SIZE          image size (default 1G)
  --dir DIR            where the image goes (default /var/tmp; must not be tmpfs)
  --libfuse PATH       passthrough_hp (also FUSE_URING_LIBFUSE); without it libfuse is skipped
  --pt-args "A B"      extra CLI arguments for every fuse-uring configuration
  --deep               also fuse-uring with --queue-depth 64 --max-write 131072 (64 entries
                       per queue, all pinned: small payloads instead of unpinned entries)
  --depths LIST        also fuse-uring at each of these queue depths (e.g. 8,16,32,64; the
                       CLI's default max_write), to choose the default depth
  --warmup S           unmeasured fio run (1×1, S seconds) on every mount after it comes up
                       (default 1; 0 = none): the steady state, not a fresh daemon's start
  --shapes LIST        QD×jobs to run (default 1x1,64x1,1x4,64x4)
  --variant "A B"      also fuse-uring with these extra CLI arguments (repeatable): an A/B of
                       an option in the same interleaved run (e.g. --variant "--no-pin")
  --no-cache           leave out the --backing-cache configuration
  --out DIR            results directory (default bench/results/<timestamp>-export)
`;

interface ExportOptions {
  reps: number;
  runtimeS: number;
  size: string;
  dir: string;
  libfuse: string | null;
  ptArgs: string[];
  deep: boolean;
  depths: number[];
  variants: string[][];
  shapes: Array<{ qd: number; jobs: number }>;
  cache: boolean;
  warmupS: number;
  out: string | null;
  quick: boolean;
}

interface ExportConfig {
  id: string;
  label: string;
  kind: "raw" | "pt" | "libfuse";
  args: string[];
  colour: string;
}

const SHAPES: Array<{ qd: number; jobs: number }> = [
  { qd: 1, jobs: 1 },
  { qd: 64, jobs: 1 },
  { qd: 1, jobs: 4 },
  { qd: 64, jobs: 4 },
];
const shapeId = (s: { qd: number; jobs: number }) => `${s.qd}x${s.jobs}`;

interface ExportSample {
  round: number;
  config: string;
  shape: string;
  iops: number;
  readIops: number;
  writeIops: number;
  p99ReadUs: number;
  p99WriteUs: number;
  ios: number;
  /** pages of the image in the page cache before / after the run, and the image's pages */
  cachedBefore: number;
  cachedAfter: number;
  imagePages: number;
  daemonCpuS: number | null;
  requests: number | null;
  requestsPerIo: number | null;
  cpuUsPerRequest: number | null;
  ops: Record<string, number> | null;
  nativeDirect: number | null;
  directFallbacks: number | null;
  nativeAsync: number | null;
  nativeSync: number | null;
  /** the daemon's peak resident set (VmHWM of its main process) after the run, KiB */
  peakRssKiB: number | null;
}

function parse(argv: string[]): ExportOptions {
  const o: ExportOptions = {
    reps: 3, runtimeS: 10, size: "1G", dir: "/var/tmp", libfuse: process.env.FUSE_URING_LIBFUSE || null, ptArgs: [], deep: false, depths: [], variants: [], shapes: SHAPES, cache: true, warmupS: 1, out: null, quick: false,
  };
  let reps: number | null = null, runtime: number | null = null, size: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new BenchError(`${a} needs a value\n\n${EXPORT_HELP}`);
      return v;
    };
    switch (a) {
      case "--workload": if (val() !== "export") throw new BenchError("--workload: only 'export' is known"); break;
      case "--quick": o.quick = true; break;
      case "--reps": reps = Number(val()); break;
      case "--runtime": runtime = Number(val()); break;
      case "--size": size = val(); break;
      case "--dir": o.dir = val(); break;
      case "--libfuse": o.libfuse = val(); break;
      case "--pt-args": o.ptArgs = val().split(/\s+/).filter(Boolean); break;
      case "--deep": o.deep = true; break;
      case "--depths": o.depths = val().split(",").map((x) => Number(x)).filter((x) => Number.isInteger(x) && x > 0); break;
      case "--variant": o.variants.push(val().split(/\s+/).filter(Boolean)); break;
      case "--no-cache": o.cache = false; break;
      case "--warmup": o.warmupS = Math.max(0, Math.round(Number(val()) || 0)); break; // fio: whole seconds
      case "--shapes": o.shapes = val().split(",").map((x) => {
        const m = /^(\d+)x(\d+)$/.exec(x.trim());
        if (!m) throw new BenchError(`--shapes: ${x} is not QDxJOBS`);
        return { qd: Number(m[1]), jobs: Number(m[2]) };
      }); break;
      case "--out": o.out = val(); break;
      case "--help": case "-h": process.stdout.write(EXPORT_HELP); process.exit(0);
      default: throw new BenchError(`unknown option ${a}\n\n${EXPORT_HELP}`);
    }
  }
  o.reps = reps ?? (o.quick ? 2 : 3);
  o.runtimeS = runtime ?? (o.quick ? 4 : 10);
  o.size = size ?? (o.quick ? "256M" : "1G");
  return o;
}

function configs(o: ExportOptions): ExportConfig[] {
  const c: ExportConfig[] = [
    { id: "raw", label: "raw disk (O_DIRECT)", kind: "raw", args: [], colour: "#7f7f7f" },
    { id: "pt", label: "fuse-uring passthrough (O_DIRECT honoured)", kind: "pt", args: [...o.ptArgs], colour: "#d94801" },
  ];
  if (o.deep) c.push({ id: "pt-deep", label: "fuse-uring passthrough, queue depth 64", kind: "pt", args: ["--queue-depth", "64", "--max-write", "131072", ...o.ptArgs], colour: "#a63603" });
  const shades = ["#fee6ce", "#fdd0a2", "#fd8d3c", "#e6550d", "#7f2704"];
  o.depths.forEach((d, i) => c.push({ id: `pt-d${d}`, label: `fuse-uring passthrough, queue depth ${d}`, kind: "pt", args: ["--queue-depth", String(d), ...o.ptArgs], colour: shades[i % shades.length]! }));
  o.variants.forEach((v, i) => c.push({ id: `pt-v${i + 1}`, label: `fuse-uring passthrough ${v.join(" ")}`, kind: "pt", args: [...v, ...o.ptArgs], colour: shades[(i + 2) % shades.length]! }));
  if (o.cache) c.push({ id: "pt-cache", label: "fuse-uring passthrough --backing-cache", kind: "pt", args: ["--backing-cache", ...o.ptArgs], colour: "#fdae6b" });
  if (o.libfuse) c.push({ id: "libfuse", label: "libfuse passthrough_hp -o io_uring --nopassthrough", kind: "libfuse", args: ["--nopassthrough", "-o", "io_uring"], colour: "#6a51a3" });
  return c;
}

const PY_CACHE = `
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
path, evict = sys.argv[1], sys.argv[2] == "1"
fd = os.open(path, os.O_RDONLY)
if evict:
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
size = os.fstat(fd).st_size
page = os.sysconf("SC_PAGE_SIZE")
pages = (size + page - 1) // page
addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
vec = ctypes.create_string_buffer(pages)
assert libc.mincore(addr, size, vec) == 0
libc.munmap(addr, size)
os.close(fd)
print(sum(b & 1 for b in vec.raw), pages)
`;

/** Pages of `path` in the page cache (and its page count); with `evict` written back and dropped first. */
async function pageCache(path: string, evict: boolean): Promise<{ cached: number; pages: number }> {
  const r = await run(["python3", "-c", PY_CACHE, path, evict ? "1" : "0"], { timeoutMs: 120_000 });
  if (r.code !== 0) throw new BenchError(`page-cache check of ${path} failed: ${r.stderr.trim()}`);
  const [cached, pages] = r.stdout.trim().split(" ").map(Number);
  return { cached: cached!, pages: pages! };
}

function fioArgs(file: string, qd: number, jobs: number, runtimeS: number, size: string): string[] {
  return [
    "fio", "--name=export", `--filename=${file}`, `--size=${size}`, "--rw=randrw", "--rwmixread=70", "--bs=4k", "--direct=1",
    "--ioengine=libaio", `--iodepth=${qd}`, `--numjobs=${jobs}`, "--time_based", `--runtime=${runtimeS}`, "--norandommap",
    "--randrepeat=0", "--group_reporting", "--output-format=json",
  ];
}

interface FioOut {
  readIops: number;
  writeIops: number;
  ios: number;
  p99ReadUs: number;
  p99WriteUs: number;
}

function parseFio(stdout: string, context: string): FioOut {
  const start = stdout.indexOf("{");
  if (start < 0) throw new BenchError(`${context}: fio printed no JSON: ${stdout.slice(0, 300)}`);
  const j = JSON.parse(stdout.slice(start)) as { jobs: Array<Record<string, { iops: number; total_ios: number; clat_ns?: { percentile?: Record<string, number> } }>> };
  const job = j.jobs[0]!;
  const p99 = (x: { clat_ns?: { percentile?: Record<string, number> } }) => (x.clat_ns?.percentile?.["99.000000"] ?? 0) / 1000;
  const r = job.read!, w = job.write!;
  return { readIops: r.iops, writeIops: w.iops, ios: r.total_ios + w.total_ios, p99ReadUs: p99(r), p99WriteUs: p99(w) };
}

function totalRequests(s: DaemonStats): number {
  return s.ringRequests + s.devRequests + (typeof s.nativeRequests === "number" ? s.nativeRequests : 0);
}

function opsDelta(a: DaemonStats, b: DaemonStats): Record<string, number> {
  const oa = (a.ops ?? {}) as Record<string, number>, ob = (b.ops ?? {}) as Record<string, number>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(ob)) if (v - (oa[k] ?? 0) > 0) out[k] = v - (oa[k] ?? 0);
  return out;
}

const num = (s: DaemonStats, k: string) => (typeof s[k] === "number" ? (s[k] as number) : 0);

function log(line: string): void {
  process.stderr.write(`[bench export] ${line}\n`);
}

/** Checks passthrough_hp runs (fixing its library links if needed): the environment to run it with, or why not. */
export type LibfuseSetup = (path: string, notes: string[]) => Promise<{ reason?: string; env?: Record<string, string>; uring?: boolean }>;

export async function runExport(argv: string[], repo: string, bun: string, outRoot: string, setupLibfuse: LibfuseSetup): Promise<number> {
  const o = parse(argv);
  if (process.getuid?.() !== 0) throw new BenchError("the export benchmark mounts FUSE filesystems: run it as root");
  const fsType = (await run(["stat", "-f", "-c", "%T", o.dir], { timeoutMs: 5000 })).stdout.trim();
  if (fsType === "tmpfs" || fsType === "ramfs") throw new BenchError(`${o.dir} is ${fsType}: the export workload needs the disk`);
  const notes: string[] = [];
  let libfuseEnv: Record<string, string> | undefined;
  if (o.libfuse) {
    if (!existsSync(o.libfuse)) throw new BenchError(`--libfuse ${o.libfuse}: no such file`);
    const s = await setupLibfuse(o.libfuse, notes);
    if (s.reason) throw new BenchError(`libfuse: ${s.reason}`);
    if (!s.uring) throw new BenchError(`${o.libfuse} does not offer -o io_uring`);
    libfuseEnv = s.env;
  }
  const cfgs = configs(o);
  const work = mkdtempSync(join(o.dir, "fuse-uring-export-"));
  const src = join(work, "src");
  mkdirSync(src);
  const image = join(src, "img");
  const t0 = Date.now();
  const samples: ExportSample[] = [];
  const live: Daemon[] = [];
  const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
  const outDir = o.out ?? join(outRoot, `${stamp}-export`);
  let error: Error | null = null;
  const host = {
    kernel: readText("/proc/sys/kernel/osrelease"), cpus: cpus().length, imageFs: fsType, imageDir: o.dir,
    fio: (await run(["fio", "--version"], { timeoutMs: 5000 })).stdout.trim(),
    git: (await run(["git", "rev-parse", "--short", "HEAD"], { timeoutMs: 5000, cwd: repo })).stdout.trim(),
    loadStart: readText("/proc/loadavg"),
  };
  try {
    log(`writing the ${o.size} image on ${fsType} (${image}) …`);
    const mb = Math.round(sizeBytes(o.size) / 2 ** 20);
    const dd = await run(["dd", "if=/dev/urandom", `of=${image}`, "bs=1M", `count=${mb}`, "oflag=direct", "status=none"], { timeoutMs: 600_000 });
    if (dd.code !== 0) throw new BenchError(`cannot write the image: ${dd.stderr.trim()}`);
    for (let round = 1; round <= o.reps; round++) {
      // every configuration of the round mounted at once over the same image
      const mnts = new Map<string, { dir: string; d: Daemon | null; stats: string }>();
      for (const c of cfgs) {
        if (c.kind === "raw") {
          mnts.set(c.id, { dir: src, d: null, stats: "" });
          continue;
        }
        const dir = join(work, `mnt-${c.id}`);
        mkdirSync(dir, { recursive: true });
        const stats = join(work, `${c.id}.r${round}.stats.json`);
        const d = new Daemon({
          id: c.id, fsArgs: ["--passthrough", src], transport: "uring", mountpoint: dir, statsFile: stats, queueDepth: 0, maxWrite: 0, // the CLI's defaults unless args say otherwise
          extraArgs: c.args,
          libfuse: c.kind === "libfuse" ? { binary: o.libfuse!, args: c.args, source: src, env: libfuseEnv } : undefined,
        }, repo, bun);
        live.push(d);
        mnts.set(c.id, { dir, d, stats });
      }
      for (const m of mnts.values()) if (m.d) await m.d.waitReady(30_000);
      // The first fio run on a fresh mount paid the daemon's start (threads, JIT, first
      // OPEN): in round 1 it cost fuse-uring 1×1 a third of its IOPS. Unmeasured, like the
      // main bench's --warmup; the image is dropped from the page cache before every run anyway.
      if (o.warmupS > 0) {
        for (const [id, m] of mnts) {
          if (!m.d) continue;
          const w = await run(fioArgs(join(m.dir, "img"), 1, 1, o.warmupS, o.size), { timeoutMs: (o.warmupS + 120) * 1000 });
          if (w.code !== 0) throw new BenchError(`${id} warm-up round ${round}: fio failed: ${w.stderr.trim().slice(-500)}`);
        }
      }
      for (const s of o.shapes) {
        for (const c of cfgs) {
          const m = mnts.get(c.id)!;
          const file = join(m.dir, "img");
          const context = `${c.id} ${shapeId(s)} round ${round}`;
          const before = await pageCache(image, true);
          const st0 = m.d && !m.d.isLibfuse ? await m.d.freshStats(Date.now()) : null;
          const cpu0 = m.d?.cpuSeconds() ?? null;
          const r = await run(fioArgs(file, s.qd, s.jobs, o.runtimeS, o.size), { timeoutMs: (o.runtimeS + 120) * 1000 });
          if (r.code !== 0) throw new BenchError(`${context}: fio failed: ${r.stderr.trim().slice(-500)}`);
          const cpu1 = m.d?.cpuSeconds() ?? null;
          const f = parseFio(r.stdout, context);
          const st1 = m.d && !m.d.isLibfuse ? await m.d.freshStats(Date.now()) : null;
          const after = await pageCache(image, false);
          const requests = st0 && st1 ? totalRequests(st1) - totalRequests(st0) : null;
          const cpu = cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null;
          const sample: ExportSample = {
            round, config: c.id, shape: shapeId(s), iops: f.readIops + f.writeIops, readIops: f.readIops, writeIops: f.writeIops,
            p99ReadUs: f.p99ReadUs, p99WriteUs: f.p99WriteUs, ios: f.ios,
            cachedBefore: before.cached, cachedAfter: after.cached, imagePages: before.pages,
            daemonCpuS: cpu, requests, requestsPerIo: requests !== null && f.ios ? requests / f.ios : null,
            cpuUsPerRequest: cpu !== null ? (cpu * 1e6) / (requests ?? f.ios) : null,
            ops: st0 && st1 ? opsDelta(st0, st1) : null,
            nativeDirect: st0 && st1 ? num(st1, "nativeDirect") - num(st0, "nativeDirect") : null,
            directFallbacks: st0 && st1 ? num(st1, "directFallbacks") - num(st0, "directFallbacks") : null,
            nativeAsync: st0 && st1 ? num(st1, "nativeAsync") - num(st0, "nativeAsync") : null,
            nativeSync: st0 && st1 ? num(st1, "nativeSync") - num(st0, "nativeSync") : null,
            peakRssKiB: m.d?.peakRssKiB() ?? null,
          };
          samples.push(sample);
          log(`round ${round} ${shapeId(s).padEnd(5)} ${c.id.padEnd(8)} image cached before ${before.cached}/${before.pages} pages, after ${after.cached}; ` +
            `${Math.round(sample.iops)} IOPS, p99 r/w ${f.p99ReadUs.toFixed(0)}/${f.p99WriteUs.toFixed(0)} µs` +
            (sample.requestsPerIo !== null ? `, ${sample.requestsPerIo.toFixed(3)} req/IO` : "") +
            (sample.cpuUsPerRequest !== null ? `, ${sample.cpuUsPerRequest.toFixed(1)} µs CPU/${requests !== null ? "req" : "IO"}` : "") +
            (sample.peakRssKiB !== null ? `, peak RSS ${(sample.peakRssKiB / 1024).toFixed(0)} MiB` : "") +
            ` (${fmtDuration((Date.now() - t0) / 1000)})`);
        }
      }
      for (const m of mnts.values()) if (m.d) {
        await m.d.stop();
        live.splice(live.indexOf(m.d), 1);
      }
    }
  } catch (e) {
    error = e as Error;
  } finally {
    for (const d of live) await d.stop().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
  const results = {
    meta: {
      command: `bun bench/run.ts ${argv.join(" ")}`, startedAt: new Date(t0).toISOString(), durationS: (Date.now() - t0) / 1000,
      options: o, host: { ...host, loadEnd: readText("/proc/loadavg") },
      method: "one image on the disk shared by every configuration (all mounted at once over its directory); before each fio run the image is fdatasync'ed and dropped from the page cache (POSIX_FADV_DONTNEED of that file), and its residency (mincore) recorded before and after",
    },
    configs: cfgs, shapes: o.shapes.map(shapeId), samples, notes, error: error ? String(error.message ?? error) : null,
  };
  const md = exportMarkdown(results);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, "results.json"), JSON.stringify(results, null, 2) + "\n");
  writeFileSync(join(outDir, "results.md"), md + "\n![chart](chart.svg)\n");
  if (samples.length) writeFileSync(join(outDir, "chart.svg"), exportSvg(results));
  process.stdout.write(md + "\n");
  if (error) {
    process.stderr.write(`[bench export] FAILED — results are INVALID: ${error instanceof BenchError ? error.message : error.stack}\n`);
    return 1;
  }
  log(`results: ${outDir}/results.md (${fmtDuration((Date.now() - t0) / 1000)})`);
  return 0;
}

function sizeBytes(s: string): number {
  const m = /^(\d+)([KMG]?)$/i.exec(s);
  if (!m) throw new BenchError(`bad size ${s} (e.g. 256M, 1G)`);
  return Number(m[1]) * 1024 ** (m[2] ? "KMG".indexOf(m[2].toUpperCase()) + 1 : 0);
}

type ExportResults = { configs: ExportConfig[]; shapes: string[]; samples: ExportSample[]; meta: { command: string }; error: string | null };

function med(r: ExportResults, config: string, shape: string, f: (s: ExportSample) => number | null): number | null {
  const xs = r.samples.filter((s) => s.config === config && s.shape === shape).map(f).filter((x): x is number => x !== null && Number.isFinite(x));
  return xs.length ? median(xs) : null;
}

const fmt = (x: number | null, d = 0) => (x === null ? "–" : x.toFixed(d));

export function exportMarkdown(r: ExportResults): string {
  const lines: string[] = [];
  lines.push(`# Storage export workload (fio randrw 70/30, 4 KiB, libaio, O_DIRECT, image on disk)`, "");
  lines.push(`Command: \`${r.meta.command}\`. Medians of ${Math.max(...r.samples.map((s) => s.round), 0)} interleaved rounds.`, "");
  if (r.error) lines.push(`**INVALID: ${r.error}**`, "");
  const head = `| QD × jobs | ${r.configs.map((c) => c.label).join(" | ")} |`;
  const sep = `|---|${r.configs.map(() => "---").join("|")}|`;
  lines.push("## IOPS (read + write)", "", head, sep);
  for (const s of r.shapes) lines.push(`| ${s.replace("x", "×")} | ${r.configs.map((c) => fmt(med(r, c.id, s, (x) => x.iops))).join(" | ")} |`);
  const lf = r.configs.find((c) => c.kind === "libfuse"), raw = r.configs.find((c) => c.kind === "raw");
  const ratios = r.configs.filter((c) => c.kind === "pt");
  if (ratios.length && (lf || raw)) {
    lines.push("", "## Ratios (median IOPS)", "", `| QD × jobs | ${ratios.flatMap((c) => [lf ? `${c.id} ÷ libfuse` : null, raw ? `${c.id} ÷ raw` : null].filter(Boolean)).join(" | ")} |`,
      `|---|${ratios.flatMap(() => [lf ? "---" : null, raw ? "---" : null].filter(Boolean)).join("|")}|`);
    for (const s of r.shapes) {
      const cells = ratios.flatMap((c) => {
        const a = med(r, c.id, s, (x) => x.iops);
        const out: string[] = [];
        if (lf) { const b = med(r, lf.id, s, (x) => x.iops); out.push(a !== null && b ? `${(a / b).toFixed(2)}×` : "–"); }
        if (raw) { const b = med(r, raw.id, s, (x) => x.iops); out.push(a !== null && b ? `${(a / b).toFixed(2)}×` : "–"); }
        return out;
      });
      lines.push(`| ${s.replace("x", "×")} | ${cells.join(" | ")} |`);
    }
  }
  lines.push("", "## p99 completion latency, read / write (µs)", "", head, sep);
  for (const s of r.shapes) lines.push(`| ${s.replace("x", "×")} | ${r.configs.map((c) => `${fmt(med(r, c.id, s, (x) => x.p99ReadUs))} / ${fmt(med(r, c.id, s, (x) => x.p99WriteUs))}`).join(" | ")} |`);
  lines.push("", "## FUSE requests per I/O (daemon counters) and daemon CPU per request (µs; libfuse: per I/O)", "", head, sep);
  for (const s of r.shapes) {
    lines.push(`| ${s.replace("x", "×")} | ${r.configs.map((c) => c.kind === "raw" ? "–" : `${fmt(med(r, c.id, s, (x) => x.requestsPerIo), 3)} req/IO, ${fmt(med(r, c.id, s, (x) => x.cpuUsPerRequest), 1)} µs`).join(" | ")} |`);
  }
  lines.push("", "## Daemon peak RSS (VmHWM, MiB, max over rounds)", "", head, sep);
  for (const s of r.shapes) lines.push(`| ${s.replace("x", "×")} | ${r.configs.map((c) => {
    const xs = r.samples.filter((x) => x.config === c.id && x.shape === s && x.peakRssKiB !== null && x.peakRssKiB !== undefined);
    return xs.length ? (Math.max(...xs.map((x) => x.peakRssKiB!)) / 1024).toFixed(0) : "–";
  }).join(" | ")} |`);
  lines.push("", "## Image in the host page cache: pages before → after each run (max over rounds; of the image's pages)", "", head, sep);
  for (const s of r.shapes) {
    lines.push(`| ${s.replace("x", "×")} | ${r.configs.map((c) => {
      const xs = r.samples.filter((x) => x.config === c.id && x.shape === s);
      if (!xs.length) return "–";
      return `${Math.max(...xs.map((x) => x.cachedBefore))} → ${Math.max(...xs.map((x) => x.cachedAfter))} / ${xs[0]!.imagePages}`;
    }).join(" | ")} |`);
  }
  const pts = r.samples.filter((x) => x.nativeDirect !== null);
  if (pts.length) {
    lines.push("", "## Data plane counters (sum over rounds)", "", "| config | QD × jobs | nativeDirect | nativeAsync | nativeSync | directFallbacks | other requests |", "|---|---|---|---|---|---|---|");
    for (const c of r.configs.filter((c) => c.kind === "pt")) for (const s of r.shapes) {
      const xs = pts.filter((x) => x.config === c.id && x.shape === s);
      const sum = (f: (x: ExportSample) => number | null) => xs.reduce((a, x) => a + (f(x) ?? 0), 0);
      const other: Record<string, number> = {};
      for (const x of xs) for (const [k, v] of Object.entries(x.ops ?? {})) other[k] = (other[k] ?? 0) + v;
      lines.push(`| ${c.id} | ${s.replace("x", "×")} | ${sum((x) => x.nativeDirect)} | ${sum((x) => x.nativeAsync)} | ${sum((x) => x.nativeSync)} | ${sum((x) => x.directFallbacks)} | ${Object.entries(other).map(([k, v]) => `${k} ${v}`).join(", ") || "none"} |`);
    }
  }
  return lines.join("\n");
}

export function exportSvg(r: ExportResults): string {
  const W = 760, H = 360, left = 70, bottom = 300, top = 40;
  const groups = r.shapes;
  const n = r.configs.length;
  const max = Math.max(1, ...r.samples.map((s) => s.iops));
  const gw = (W - left - 20) / groups.length, bw = (gw - 20) / n;
  const y = (v: number) => bottom - ((bottom - top) * v) / max;
  const parts: string[] = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    `<text x="${left}" y="20" font-size="13">Export workload: IOPS (median; dots: rounds), fio randrw 70/30 4 KiB O_DIRECT, image on disk</text>`,
    `<line x1="${left}" y1="${bottom}" x2="${W - 10}" y2="${bottom}" stroke="#000"/>`];
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4;
    parts.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${Math.round(v / 1000)}k</text><line x1="${left}" y1="${y(v)}" x2="${W - 10}" y2="${y(v)}" stroke="#ddd"/>`);
  }
  groups.forEach((g, gi) => {
    const gx = left + gi * gw + 10;
    parts.push(`<text x="${gx + (n * bw) / 2}" y="${bottom + 16}" text-anchor="middle">QD${g.replace("x", " ×")}</text>`);
    r.configs.forEach((c, ci) => {
      const v = med(r, c.id, g, (s) => s.iops);
      if (v === null) return;
      const x = gx + ci * bw;
      parts.push(`<rect x="${x}" y="${y(v)}" width="${bw - 2}" height="${bottom - y(v)}" fill="${c.colour}"><title>${c.label}: ${Math.round(v)} IOPS</title></rect>`);
      for (const s of r.samples.filter((s) => s.config === c.id && s.shape === g)) parts.push(`<circle cx="${x + bw / 2 - 1}" cy="${y(s.iops)}" r="2" fill="#000"/>`);
    });
  });
  r.configs.forEach((c, ci) => {
    const lx = left + (ci % 3) * 230, ly = bottom + 34 + Math.floor(ci / 3) * 14;
    parts.push(`<rect x="${lx}" y="${ly - 9}" width="10" height="10" fill="${c.colour}"/><text x="${lx + 14}" y="${ly}">${c.label}</text>`);
  });
  parts.push("</svg>");
  return parts.join("\n");
}
