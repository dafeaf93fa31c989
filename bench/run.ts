#!/usr/bin/env bun
// fuse-uring benchmark harness: a matrix of configurations × workloads with interleaved rounds.
// See bench/README.md. `npm run bench` (full, ~30 min on 2 CPUs) or `npm run bench -- --quick` (2–3 min);
// `--libfuse PATH` adds libfuse's passthrough_hp and the "fuse-uring ÷ libfuse" table.

import { accessSync, constants as fsConstants, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { configDefs, runsOn, type ConfigState } from "./lib/configs.ts";
import { runExport } from "./lib/export.ts";
import { Daemon, type DaemonStats } from "./lib/daemon.ts";
import { markdown, summarize, svg, type Results, type RoundResource, type Sample, type StatsDelta } from "./lib/report.ts";
import { BenchError, fmtDuration, mounts, rcharBytes, readText, run, unmountBelow } from "./lib/util.ts";
import { MAX_JOBS, WORKLOADS, prepareData, runWorkload, sizeBytes, type Params, type Workload } from "./lib/workloads.ts";

const REPO = resolve(dirname(new URL(import.meta.url).pathname), "..");
/** Where the daemons run from: a snapshot of the code taken at start (see snapshotCode). */
let CODE = REPO;

const HELP = `Usage: bun bench/run.ts [options]      (npm run bench [-- options])

  --quick              short run (2–3 min; 4–5 with --libfuse): 2 rounds, 1.5 s fio runs, 64M
                       files, 2,000 files for the metadata workloads, 6 of the 14 workloads
  --reps N             interleaved rounds (default 3, quick 2)
  --runtime S          seconds per fio run (default 5, quick 1.5)
  --warmup S           an unmeasured run of the same fio job this long before each measured one,
                       for every configuration (default 1, quick 0.5; 0 = none): measure the
                       steady state, not a fresh daemon's JIT compilation. The metadata
                       workloads get an unmeasured run of the same files (readdir phase ≤ S)
  --size SIZE          fio file size per job, e.g. 256M (default 256M, quick 64M)
  --files N            files for the metadata workload (default 20000, quick 2000)
  --queue-depth N      passed to the CLI (io_uring entries per queue; default: the CLI's own)
  --max-write BYTES    passed to the CLI (default 1048576)
  --configs a,b,…      only these configurations (raw, memfs-classic, memfs-uring and pt-uring
                       (the default: a copy per CPU), pt-classic, memfs-uring-1t and
                       pt-uring-1t (--workers 1), pt-uring-fwd (forwarding) and
                       pt-uring-nofixed when the CLI has --workers / --no-fixed-buffers,
                       pt-classic-js and pt-uring-js when it has --data-plane, kpt,
                       burn-w1, burn-w2, burn-paths-w1, burn-paths-w2; with --libfuse also lf-classic, lf-uring, lf-kpt and
                       the metadata-only variants memfs-uring-ttl, pt-classic-ttl, pt-uring-ttl,
                       pt-uring-1t-ttl, kpt-ttl)
  --only a,b,…         the same as --configs
  --libfuse PATH       compare against libfuse's passthrough_hp at PATH (a build with io_uring;
                       also FUSE_URING_LIBFUSE=PATH): adds lf-classic (--nopassthrough),
                       lf-uring (--nopassthrough -o io_uring), lf-kpt (-o io_uring) and the
                       "fuse-uring ÷ libfuse" ratio table. Without it they are skipped
  --workloads a,b,…    only these workloads (ids in bench/README.md, e.g. seqread-1m,meta)
  --aio-engine E       fio engine of the QD16 and 70/30 mix workloads: libaio (default) or
                       io_uring (on tmpfs io_uring punts every I/O to io-wq workers, which
                       cripples the raw baseline)
  --nofile N           RLIMIT_NOFILE of the daemons (default 1048576; 0 = inherit). A passthrough
                       holds one O_PATH descriptor per inode the kernel knows, so 20,000 files
                       need more than the usual limits
  --out DIR            results directory (default bench/results/<timestamp>)
  --workload export    QEMU's storage-export workload instead (fio randrw 70/30 4 KiB O_DIRECT
                       on an image on the disk; raw, passthrough, --backing-cache, libfuse):
                       bun bench/run.ts --workload export --help
  --help
`;

interface Options {
  quick: boolean;
  reps: number;
  params: Params;
  queueDepth: number;
  maxWrite: number;
  configs: string[] | null;
  workloads: string[] | null;
  libfuse: string | null;
  out: string | null;
  nofile: number;
}

function parseOptions(argv: string[]): Options {
  const quick = argv.includes("--quick");
  const o: Options = {
    quick,
    reps: quick ? 2 : 3,
    params: { runtimeS: quick ? 1.5 : 5, warmupS: quick ? 0.5 : 1, size: quick ? "64M" : "256M", metaFiles: quick ? 2000 : 20000, readdirMinS: quick ? 0.25 : 1, aioEngine: "libaio" },
    queueDepth: 0, // 0: not passed, the CLI's default (ringSizing)
    maxWrite: 1 << 20,
    configs: null,
    workloads: null,
    libfuse: process.env.FUSE_URING_LIBFUSE || null,
    out: null,
    nofile: 1 << 20,
  };
  const num = (flag: string, v: string | undefined, min: number) => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < min) throw new BenchError(`${flag} needs a number ≥ ${min}, got ${JSON.stringify(v)}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const val = () => inline ?? argv[++i];
    switch (flag) {
      case "--quick": break;
      case "--help": case "-h": process.stdout.write(HELP); process.exit(0);
      case "--reps": o.reps = Math.floor(num(flag, val(), 1)); break;
      case "--runtime": o.params.runtimeS = num(flag, val(), 0.5); break;
      case "--warmup": o.params.warmupS = num(flag, val(), 0); break;
      case "--size": {
        const v = val();
        if (!v || !/^\d+[KMG]?$/i.test(v)) throw new BenchError(`--size needs e.g. 256M, got ${JSON.stringify(v)}`);
        o.params.size = v.toUpperCase();
        break;
      }
      case "--files": o.params.metaFiles = Math.max(2, Math.floor(num(flag, val(), 2) / 2) * 2); break;
      case "--queue-depth": o.queueDepth = Math.floor(num(flag, val(), 1)); break;
      case "--max-write": o.maxWrite = Math.floor(num(flag, val(), 4096)); break;
      case "--configs": case "--only": o.configs = (val() ?? "").split(",").filter(Boolean); break;
      case "--libfuse": {
        const v = val();
        if (!v) throw new BenchError("--libfuse needs the path of a passthrough_hp binary");
        o.libfuse = resolve(v);
        break;
      }
      case "--workloads": o.workloads = (val() ?? "").split(",").filter(Boolean); break;
      case "--out": o.out = resolve(val() ?? ""); break;
      case "--aio-engine": {
        const v = val();
        if (v !== "libaio" && v !== "io_uring") throw new BenchError(`--aio-engine must be libaio or io_uring, got ${JSON.stringify(v)}`);
        o.params.aioEngine = v;
        break;
      }
      case "--nofile": o.nofile = Math.floor(num(flag, val(), 0)); break;
      default: throw new BenchError(`unknown option ${a}\n\n${HELP}`);
    }
  }
  return o;
}


// ---- progress -----------------------------------------------------------------------------------

const tty = process.stderr.isTTY === true;
let progressShown = false;
function progress(line: string): void {
  if (tty) {
    process.stderr.write(`\r\x1b[K${line}`);
    progressShown = true;
  } else process.stderr.write(line + "\n");
}
function log(line: string): void {
  if (progressShown) {
    process.stderr.write("\r\x1b[K");
    progressShown = false;
  }
  process.stderr.write(`[bench] ${line}\n`);
}

// ---- state shared with cleanup ------------------------------------------------------------------

const live = new Set<Daemon>();
let workRoot = "";
let tmpfsDir = "";
let tmpfsMounted = false;

async function stopDaemon(d: Daemon) {
  try {
    return await d.stop();
  } finally {
    live.delete(d);
  }
}

let cleanupPromise: Promise<void> | null = null;
function cleanup(): Promise<void> {
  cleanupPromise ??= (async () => {
    await Promise.allSettled([...live].map(stopDaemon));
    if (workRoot) {
      const left = await unmountBelow(workRoot);
      const nonTmpfs = left.filter((p) => p !== tmpfsDir);
      if (nonTmpfs.length) log(`cleanup: lazily unmounted leftovers: ${nonTmpfs.join(", ")}`);
      if (!mounts().some((m) => m.mountpoint === workRoot || m.mountpoint.startsWith(workRoot + "/"))) {
        rmSync(workRoot, { recursive: true, force: true });
      } else log(`cleanup: mounts still present under ${workRoot}`);
    }
  })();
  return cleanupPromise;
}

// ---- helpers ------------------------------------------------------------------------------------

function delta(a: DaemonStats, b: DaemonStats): StatsDelta {
  const d = (k: keyof DaemonStats) => Number(b[k] ?? 0) - Number(a[k] ?? 0);
  // counters newer engines add (tolerated when absent): io_uring_enter calls, requests the shim
  // answered without JavaScript
  const opt = (k: string) => (typeof b[k] === "number" ? Number(b[k]) - Number(typeof a[k] === "number" ? a[k] : 0) : undefined);
  const opsSum = (s: DaemonStats) => (s.ops && typeof s.ops === "object" ? Object.values(s.ops as Record<string, number>).reduce((x, y) => x + Number(y || 0), 0) : undefined);
  const oa = opsSum(a), ob = opsSum(b);
  const native = opt("nativeRequests");
  return {
    requests: d("ringRequests") + d("devRequests") + (native ?? 0), ringRequests: d("ringRequests"), devRequests: d("devRequests"),
    // a request forwarded from a worker to the main thread and back is 2 hand-offs (as the daemon's handoffsPerRequest)
    wakeups: d("wakeups") + 2 * (opt("forwarded") ?? 0), cqes: d("cqes"), submits: d("submits"), fixedIo: d("fixedIo"), errors: d("errors"),
    enters: opt("enters"), nativeRequests: native,
    answered: ob !== undefined ? ob - (oa ?? 0) : undefined,
  };
}

/** FUSE requests a daemon handled: through JS on either transport, plus those the shim answered natively. */
function totalRequests(s: DaemonStats): number {
  return s.ringRequests + s.devRequests + (typeof s.nativeRequests === "number" ? s.nativeRequests : 0);
}

function loadavg(): string {
  return readText("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

async function ensureUring(): Promise<string | null> {
  const p = "/sys/module/fuse/parameters/enable_uring";
  if (!existsSync(p)) return "kernel has no FUSE-over-io_uring (no /sys/module/fuse/parameters/enable_uring; needs Linux ≥ 6.14, CONFIG_FUSE_IO_URING)";
  if (readText(p) === "Y") return null;
  try {
    writeFileSync(p, "Y");
  } catch (e) {
    return `enable_uring is N and could not be set (${(e as Error).message}); as root: echo Y > ${p}`;
  }
  return readText(p) === "Y" ? null : "enable_uring did not stay Y";
}

interface Live {
  cfg: ConfigState;
  dir: string;
  daemon?: Daemon;
  snap?: DaemonStats;
  lastActivityEnd: number;
  pending?: Sample;
  workloadCpuS: number;
}

let effectiveNofileForDaemons = 0;

/** How to run passthrough_hp (set up by setupLibfuse when --libfuse / FUSE_URING_LIBFUSE is given). */
let libfuseRun: { binary: string; env?: Record<string, string> } | null = null;

function daemonFor(cfg: ConfigState, mnt: string, src: string, o: Options, statsFile: string): Daemon {
  const d = new Daemon(
    {
      id: cfg.id,
      fsArgs: cfg.kind === "memfs" ? ["--memfs"] : cfg.kind === "script" ? [join(CODE, cfg.script!)] : ["--passthrough", src],
      scriptArgs: cfg.kind === "script" ? ["--size", String(sizeBytes(o.params.size)), "--files", String(MAX_JOBS)] : undefined,
      libfuse: cfg.kind === "libfuse" ? { binary: libfuseRun!.binary, env: libfuseRun!.env, args: cfg.libfuseArgs ?? [], source: src } : undefined,
      transport: cfg.transport!,
      mountpoint: mnt,
      statsFile,
      queueDepth: o.queueDepth,
      maxWrite: o.maxWrite,
      extraArgs: cfg.extraArgs,
      nofile: o.nofile ? effectiveNofileForDaemons : undefined,
    },
    CODE,
    bunPath(),
  );
  live.add(d);
  return d;
}

function bunPath(): string {
  const local = join(REPO, "node_modules/.bin/bun");
  return existsSync(local) ? local : process.execPath;
}

async function smoke(dir: string, context: string, big?: string): Promise<void> {
  const r = await run(["python3", join(REPO, "bench/meta.py"), "probe", dir, ...(big ? [big] : [])], { timeoutMs: 60_000 });
  if (r.code !== 0 || r.stdout.trim() !== "ok") {
    throw new BenchError(`smoke test failed on ${context}${r.timedOut ? " (timed out: the mount hangs)" : ""}: ${(r.stderr || r.stdout).trim().slice(-600)}`);
  }
}

/** The burn filesystem is read-only: read the start of its first file instead of the smoke test. */
async function readCheck(dir: string, context: string): Promise<void> {
  const r = await run(["python3", "-c", "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); n=len(os.pread(fd, 4096, 0)); os.close(fd); print(n)", join(dir, "f.0")], { timeoutMs: 60_000 });
  if (r.code !== 0 || r.stdout.trim() !== "4096") {
    throw new BenchError(`read check failed on ${context}${r.timedOut ? " (timed out: the mount hangs)" : ""}: ${(r.stderr || r.stdout).trim().slice(-600)}`);
  }
}

/** A libfuse daemon uses io_uring iff it holds io_uring instances (its rings, one per queue). */
function checkLibfuseTransport(cfg: ConfigState, d: Daemon, context: string): void {
  const n = d.uringFds();
  if (cfg.transport === "uring" && n === 0) throw new BenchError(`${cfg.label}, ${context}: passthrough_hp holds no io_uring instance (-o io_uring not in effect)`);
  if (cfg.transport === "classic" && n > 0) throw new BenchError(`${cfg.label}, ${context}: passthrough_hp holds ${n} io_uring instances although classic was configured`);
}

const BIG = "probe-big.bin";
const BIG_BYTES = 64 << 20;

/** Probe an optional configuration: mount, smoke test, unmount, check counters. */
async function probeConfig(cfg: ConfigState, o: Options): Promise<void> {
  if (cfg.kind === "passthrough" && !existsSync(join(CODE, "lib/fs/passthrough.ts"))) {
    cfg.available = false;
    cfg.reason = "lib/fs/passthrough.ts does not exist yet";
    return;
  }
  const src = join(tmpfsDir, `probe-src-${cfg.id}`);
  const mnt = join(workRoot, "mnt", `probe-${cfg.id}`);
  mkdirSync(src, { recursive: true });
  mkdirSync(mnt, { recursive: true });
  if (cfg.kind !== "script") writeFileSync(join(src, BIG), Buffer.alloc(BIG_BYTES, 0x5a));
  const statsFile = join(workRoot, `probe-${cfg.id}.stats.json`);
  const d = daemonFor(cfg, mnt, src, o, statsFile);
  let rchar = 0;
  try {
    await d.waitReady(30_000);
    const r0 = rcharBytes(d.pid) ?? 0;
    if (cfg.kind === "script") await readCheck(mnt, `${cfg.label} probe mount`);
    else await smoke(mnt, `${cfg.label} probe mount`, cfg.kind === "memfs" ? undefined : BIG); // memfs starts empty: no big file to read
    rchar = (rcharBytes(d.pid) ?? 0) - r0;
    d.check("after the smoke test");
    if (d.isLibfuse) checkLibfuseTransport(cfg, d, "probe");
  } catch (e) {
    cfg.available = false;
    const first = (e as Error).message.split("\n");
    cfg.reason = `probe failed: ${first[0]}${first.length > 1 ? " — daemon stderr: " + first.slice(1).map((l) => l.replace(/^\s*\|\s?/, "")).filter(Boolean).slice(-3).join(" / ") : ""}`;
  } finally {
    const st = await stopDaemon(d);
    if (cfg.available && d.isLibfuse) {
      // passthrough_hp exits 1 after SIGTERM (its loop reports the signal as an error)
      if (st.exitCode !== 0 && st.exitCode !== 1) cfg.notes.push(`probe daemon exited with code ${st.exitCode} on SIGTERM`);
      if (cfg.libfuseArgs && !cfg.libfuseArgs.includes("--nopassthrough")) {
        // with FUSE_PASSTHROUGH the kernel reads the backing file; without it the daemon does
        if (rchar > 8 << 20) {
          cfg.available = false;
          cfg.reason = `FUSE_PASSTHROUGH not in effect: passthrough_hp itself read ${Math.round(rchar / 2 ** 20)} MiB (rchar) for a probe that reads 64 MiB with O_DIRECT`;
        }
      }
      if (cfg.available) cfg.notes.push(`probe: passthrough_hp read ${fmtMiB(rchar)} MiB itself (rchar) for the smoke test + 64 MiB O_DIRECT read`);
    } else if (cfg.available) {
      const s = st.finalStats;
      const reqs = s ? totalRequests(s) : NaN;
      if (!s) {
        cfg.available = false;
        cfg.reason = "probe: no stats file after exit";
      } else if (s.transport !== cfg.transport) {
        cfg.available = false;
        cfg.reason = `probe: configured transport ${cfg.transport}, stats say ${s.transport}`;
      } else if (st.exitCode !== 0) {
        cfg.notes.push(`probe daemon exited with code ${st.exitCode} on SIGTERM`);
      }
      if (cfg.available && cfg.extraArgs?.includes("--kernel-passthrough") && reqs > 300) {
        cfg.available = false;
        cfg.reason = `FUSE_PASSTHROUGH not in effect: the daemon served ${reqs} requests for a probe that reads 64 MiB with O_DIRECT in 128 KiB pieces (data did not bypass the daemon)`;
      }
      if (cfg.available) cfg.notes.push(cfg.kind === "script" ? `probe: ${reqs} requests to mount and read 4 KiB` : cfg.kind === "memfs" ? `probe: ${reqs} requests for the smoke test` : `probe: ${reqs} requests for the smoke test + 64 MiB O_DIRECT read in 128 KiB pieces`);
    }
    rmSync(src, { recursive: true, force: true });
  }
}

const fmtMiB = (b: number) => (b / 2 ** 20).toFixed(1);

/**
 * Check that the passthrough_hp binary runs. A copied build may carry its library's soname link
 * as a small text file naming the real library (a symlink stored as a file): then link the
 * real library under that name in the work directory and put it on LD_LIBRARY_PATH (the
 * binary's RUNPATH comes after it). Returns why libfuse cannot be compared, or null.
 */
async function setupLibfuse(path: string, notes: string[]): Promise<{ reason: string | null; uring: boolean }> {
  try {
    if (!statSync(path).isFile()) return { reason: `${path} is not a file`, uring: false };
    accessSync(path, fsConstants.X_OK);
  } catch (e) {
    return { reason: `${path}: ${(e as Error).message}`, uring: false };
  }
  let env: Record<string, string> | undefined;
  let h = await run([path, "--help"], { timeoutMs: 10_000 });
  if (h.code !== 0 && /error while loading shared libraries/.test(h.stderr)) {
    const libDir = resolve(dirname(path), "../lib");
    const fixDir = join(workRoot, "libfuse-lib");
    mkdirSync(fixDir, { recursive: true });
    const fixed: string[] = [];
    if (existsSync(libDir)) {
      for (const f of readdirSync(libDir)) {
        const full = join(libDir, f);
        const st = statSync(full);
        if (!st.isFile() || st.size > 255) continue;
        const target = readFileSync(full, "utf8").trim();
        if (/^[\w.+-]+$/.test(target) && target !== f && existsSync(join(libDir, target))) {
          symlinkSync(join(libDir, target), join(fixDir, f));
          fixed.push(`${f} → ${target}`);
        }
      }
    }
    if (fixed.length) {
      env = { LD_LIBRARY_PATH: [fixDir, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":") };
      h = await run([path, "--help"], { timeoutMs: 10_000, env });
      if (h.code === 0) notes.push(`libfuse: ${libDir} holds ${fixed.join(", ")} as text files (symlinks stored as files); the harness linked them in its work directory and runs passthrough_hp with LD_LIBRARY_PATH pointing there`);
    }
  }
  if (h.code !== 0) return { reason: `${path} --help failed (exit ${h.code}): ${(h.stderr || h.stdout).trim().split("\n").slice(0, 2).join(" / ")}`, uring: false };
  libfuseRun = { binary: path, env };
  return { reason: null, uring: /io_uring/.test(h.stdout + h.stderr) };
}

// ---- main ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
  // QEMU's storage-export workload on the disk: its own matrix (bench/lib/export.ts)
  if (process.argv.includes("--workload")) {
    workRoot = mkdtempSync("/tmp/fuse-uring-bench-");
    try {
      return await runExport(process.argv.slice(2), REPO, bunPath(), join(REPO, "bench/results"), async (path, notes) => {
        const r = await setupLibfuse(path, notes);
        return r.reason ? { reason: r.reason } : { env: libfuseRun!.env, uring: r.uring };
      });
    } finally {
      await cleanup();
    }
  }
  const o = parseOptions(process.argv.slice(2));
  const t0 = Date.now();
  const startedAt = new Date(t0).toISOString().replace(/\.\d+Z$/, "Z");
  const outDir = o.out ?? join(REPO, "bench/results", startedAt.replace(/:/g, "-"));

  if (process.getuid?.() !== 0) throw new BenchError("the benchmark mounts tmpfs and FUSE filesystems: run it as root");
  for (const tool of ["fio", "python3", ...(o.nofile ? ["prlimit"] : [])]) {
    if ((await run(["sh", "-c", `command -v ${tool}`], { timeoutMs: 5000 })).code !== 0) throw new BenchError(`${tool} is not installed (scripts/setup.sh installs fio)`);
  }
  if (!mounts().some((m) => m.fstype === "fusectl")) await run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"], { timeoutMs: 5000 });

  // the daemons' descriptor limit: --nofile if prlimit may set it, else the hard limit we have
  let effectiveNofile = o.nofile;
  let nofileWhy = "";
  if (o.nofile) {
    const t = await run(["prlimit", `--nofile=${o.nofile}:${o.nofile}`, "true"], { timeoutMs: 5000 });
    if (t.code !== 0) {
      nofileWhy = t.stderr.trim().replace(/^prlimit: /, "");
      const hard = Number(readText("/proc/self/limits").match(/^Max open files\s+\S+\s+(\d+)/m)?.[1] ?? 1024);
      log(`cannot raise RLIMIT_NOFILE to ${o.nofile} (${nofileWhy}); daemons get ${hard}`);
      effectiveNofile = hard;
    }
  } else {
    effectiveNofile = Number(readText("/proc/self/limits").match(/^Max open files\s+(\d+)/m)?.[1] ?? 1024);
  }
  effectiveNofileForDaemons = effectiveNofile;
  const uringReason = await ensureUring();
  // the daemons run from a private copy of the code: others may edit lib/ during a long run
  workRoot = mkdtempSync("/tmp/fuse-uring-bench-");
  const snap = await snapshotCode(join(workRoot, "code"));
  CODE = snap.dir;
  const help = await run([bunPath(), "bin/fuse-uring.ts", "--help"], { timeoutMs: 30_000, cwd: CODE });
  const noFixed = help.stdout.match(/--no-fixed[\w-]*/)?.[0] ?? null;
  const hasWorkers = /--workers\b/.test(help.stdout);
  const hasDataPlane = /--data-plane\b/.test(help.stdout);
  const configs: ConfigState[] = configDefs({ noFixedFlag: noFixed, hasWorkers, hasDataPlane }).map((d) => ({ ...d, available: true, notes: [] }));
  const setupNotes: string[] = [];
  let libfuseReason: string | null = o.libfuse ? null : "no passthrough_hp given (--libfuse PATH or FUSE_URING_LIBFUSE=PATH; see bench/README.md)";
  let libfuseUring = false;
  if (o.libfuse) ({ reason: libfuseReason, uring: libfuseUring } = await setupLibfuse(o.libfuse, setupNotes));
  for (const c of configs) {
    if (o.configs && !o.configs.includes(c.id)) {
      c.available = false;
      c.reason = "not selected (--configs)";
    } else if (o.quick && c.fullOnly && !o.configs) {
      c.available = false;
      c.reason = "not in the quick profile (full run, or select it with --only)";
    } else if (c.transport === "uring" && uringReason) {
      c.available = false;
      c.reason = uringReason;
    } else if (c.kind === "libfuse" && libfuseReason) {
      c.available = false;
      c.reason = libfuseReason;
    } else if (c.kind === "libfuse" && c.transport === "uring" && !libfuseUring) {
      c.available = false;
      c.reason = `${o.libfuse} --help does not offer -o io_uring (built without io_uring?)`;
    } else if (c.id.endsWith("-ttl") && libfuseReason && !o.configs?.includes(c.id)) {
      c.available = false;
      c.reason = "metadata-only variant for the libfuse comparison: runs with --libfuse";
    } else if (c.extraArgs?.includes("--workers") && !hasWorkers) {
      c.available = false;
      c.reason = "the CLI has no --workers option (bin/fuse-uring.ts --help does not list it): handlers run on one thread";
    }
  }
  if (o.configs) for (const id of o.configs) if (!configs.some((c) => c.id === id)) throw new BenchError(`unknown configuration ${id} (known: ${configs.map((c) => c.id).join(", ")})`);
  const ptUring = configs.find((c) => c.id === "pt-uring-1t") ?? configs.find((c) => c.id === "pt-uring")!;
  if (!noFixed) ptUring.notes.push("fixed buffers are what passthrough over io_uring always does (no CLI switch to turn them off), so it is reported once; fixedIo counts the READ_FIXED/WRITE_FIXED operations");

  let workloads: Workload[] = WORKLOADS.filter((w) => !o.quick || w.inQuick);
  if (o.workloads) {
    for (const id of o.workloads) if (!WORKLOADS.some((w) => w.id === id)) throw new BenchError(`unknown workload ${id} (known: ${WORKLOADS.map((w) => w.id).join(", ")})`);
    workloads = WORKLOADS.filter((w) => o.workloads!.includes(w.id));
  }

  const host = {
    kernel: readText("/proc/sys/kernel/osrelease"),
    cpus: cpus().length,
    memGiB: Math.round(totalmem() / 2 ** 30),
    fio: (await run(["fio", "--version"], { timeoutMs: 5000 })).stdout.trim(),
    bun: (await run([bunPath(), "--version"], { timeoutMs: 5000 })).stdout.trim(),
    python: (await run(["python3", "--version"], { timeoutMs: 5000 })).stdout.trim(),
    git: (await run(["git", "rev-parse", "--short", "HEAD"], { timeoutMs: 5000, cwd: REPO })).stdout.trim() +
      ((await run(["git", "status", "--porcelain", "--untracked-files=no"], { timeoutMs: 5000, cwd: REPO })).stdout.trim() ? " (dirty)" : ""),
    codeHash: snap.hash,
    libfuse: libfuseRun ? { path: libfuseRun.binary, sha256: sha256File(libfuseRun.binary), env: libfuseRun.env ?? null } : null,
    env: Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith("FUSE_URING"))),
    loadStart: loadavg(),
    loadEnd: undefined as string | undefined,
  };
  const results: Results = {
    meta: {
      mode: o.quick ? "quick" : "full",
      reps: o.reps,
      startedAt,
      command: `bun bench/run.ts ${process.argv.slice(2).join(" ")}`.trim(),
      params: { ...o.params, metaWarmup: o.params.warmupS > 0, queueDepth: o.queueDepth, maxWrite: o.maxWrite, dataFiles: MAX_JOBS, daemonNofile: o.nofile ? effectiveNofile : "inherited" },
      host,
      codeSnapshot: "the daemons run from a copy of bin/, lib/ and zig-out/lib taken when the run started (host.codeHash), so edits to the checkout during the run do not mix code versions",
      daemonLifecycle: "one daemon per configuration and round, mounted at the start of the round and kept for all its workloads; all configurations of a round are mounted at once and the workloads interleave them (A B C per workload)",
    },
    configs,
    workloads: workloads.map((w) => ({ id: w.id, label: w.label, description: w.description, metrics: w.metrics })),
    samples: [],
    resources: [],
    warnings: [],
    notes: [],
    valid: false,
  };
  // neighbours: sampled before every step; reported as a warning (they share the CPUs)
  const seen = new Map<string, number>();
  let neighbourChecks = 0, busyChecks = 0;
  const sampleNeighbours = () => {
    const n = busyNeighbours();
    neighbourChecks++;
    if (n.length) busyChecks++;
    for (const c of n) seen.set(c, (seen.get(c) ?? 0) + 1);
  };
  sampleNeighbours();
  if (Number(host.loadStart.split(" ")[0]) > 1) results.warnings.push(`load average at start was ${host.loadStart} on ${host.cpus} CPUs (noisy machine)`);

  let error: Error | null = null;
  try {
    // work area: a dedicated tmpfs for the raw configuration and the passthrough sources
    tmpfsDir = join(workRoot, "tmpfs");
    mkdirSync(tmpfsDir);
    mkdirSync(join(workRoot, "mnt"));
    const nTmpfs = 1 + configs.filter((c) => c.available && (c.kind === "passthrough" || c.kind === "libfuse") && !c.workloads).length;
    const nSrc = configs.filter((c) => c.available && (c.kind === "passthrough" || c.kind === "libfuse")).length;
    const tmpfsBytes = nTmpfs * MAX_JOBS * sizeBytes(o.params.size) * 1.25 + (512 << 20) + (nSrc + 1) * (BIG_BYTES + o.params.metaFiles * 8192);
    const m = await run(["mount", "-t", "tmpfs", "-o", `size=${Math.ceil(tmpfsBytes / 2 ** 20)}m,mode=0755`, "tmpfs", tmpfsDir], { timeoutMs: 10_000 });
    if (m.code !== 0) throw new BenchError(`cannot mount tmpfs at ${tmpfsDir}: ${m.stderr.trim()}`);
    tmpfsMounted = true;

    // optional configurations: probe them (in parallel) and skip with the reason when they fail;
    // a variant (same daemon, other options) inherits its base's verdict when the base is probed
    const baseOf = (c: ConfigState) => (c.variantOf ? configs.find((b) => b.id === c.variantOf && b.available) : undefined);
    const optional = configs.filter((c) => c.available && c.optional && !baseOf(c));
    const variants = configs.filter((c) => c.available && baseOf(c));
    if (optional.length) {
      log(`probing ${optional.map((c) => c.id).join(", ")} …`);
      await Promise.all(optional.map((c) => probeConfig(c, o)));
    }
    for (const c of variants) {
      const b = configs.find((x) => x.id === c.variantOf)!;
      if (!b.available) {
        c.available = false;
        c.reason = `${b.label} is not available: ${b.reason}`;
      }
    }
    results.notes.push(...setupNotes);
    // a workload no available configuration runs is dropped (e.g. the burn workload without burn configurations)
    const dropped = workloads.filter((w) => !configs.some((c) => c.available && runsOn(c, w.id)));
    if (dropped.length) {
      log(`no available configuration runs ${dropped.map((w) => w.id).join(", ")}: skipped`);
      workloads = workloads.filter((w) => !dropped.includes(w));
      results.workloads = results.workloads.filter((w) => !dropped.some((d) => d.id === w.id));
    }
    for (const c of configs) if (!c.available && c.reason !== "not selected (--configs)") log(`skipping ${c.label}: ${c.reason}`);
    // A passthrough holds one O_PATH descriptor per inode the kernel knows: the metadata set
    // must fit the daemon's descriptor limit (same file count for every configuration).
    if (configs.some((c) => c.available && (c.kind === "passthrough" || c.kind === "libfuse")) && workloads.some((w) => w.kind === "meta" || w.kind === "csu")) {
      const fit = Math.floor((effectiveNofile - 1000) / 1000) * 1000;
      if (o.params.metaFiles > fit) {
        results.notes.push(
          `metadata workload uses ${fit} files instead of ${o.params.metaFiles}: the daemons' RLIMIT_NOFILE is ${effectiveNofile}${effectiveNofile < o.nofile ? ` (raising it to ${o.nofile} failed: ${nofileWhy})` : ""}, and the passthrough keeps one O_PATH descriptor per inode the kernel caches (it fails with EMFILE near the limit)`,
        );
        log(`metadata: ${fit} files instead of ${o.params.metaFiles} (daemon RLIMIT_NOFILE ${effectiveNofile})`);
        o.params.metaFiles = fit;
        (results.meta.params as Record<string, unknown>).metaFiles = fit;
      }
    }
    const active = configs.filter((c) => c.available);
    if (!active.length) throw new BenchError("no configuration is available");
    log(`configurations: ${active.map((c) => c.id).join(", ")}; workloads: ${workloads.map((w) => w.id).join(", ")}; ${o.reps} rounds`);

    // ETA model: measured durations replace estimates as they come in
    const measured = new Map<string, number>();
    const estimate = (c: ConfigState, w: Workload) => {
      const k = `${c.id}|${w.id}`;
      if (measured.has(k)) return measured.get(k)!;
      const same = [...measured].filter(([key]) => key.endsWith(`|${w.id}`)).map(([, v]) => v);
      if (same.length) return same.reduce((a, b) => a + b) / same.length;
      if (w.kind === "fio") return o.params.runtimeS + (o.params.warmupS > 0 ? o.params.warmupS + 0.6 : 0) + 0.6;
      const meta = c.kind === "raw" ? o.params.readdirMinS + 0.5 : o.params.metaFiles * 2e-4 + o.params.readdirMinS + 0.5;
      return o.params.warmupS > 0 ? 2 * meta : meta;
    };
    let roundOverhead = 3 + active.length * 0.5;
    const totalSteps = o.reps * workloads.reduce((n, w) => n + active.filter((c) => runsOn(c, w.id)).length, 0);
    let step = 0;
    const eta = (round: number, wi: number, ci: number) => {
      let s = 0;
      for (let r = round; r <= o.reps; r++)
        workloads.forEach((w, j) => active.forEach((c, k) => {
          if (runsOn(c, w.id) && (r > round || j > wi || (j === wi && k >= ci))) s += estimate(c, w);
        }));
      return s + (o.reps - round) * roundOverhead;
    };

    for (let round = 1; round <= o.reps; round++) {
      const tr = Date.now();
      progress(`[bench] round ${round}/${o.reps} │ mounting and preparing ${MAX_JOBS}×${o.params.size} data files │ elapsed ${fmtDuration((Date.now() - t0) / 1000)} │ ETA ${fmtDuration(eta(round, 0, 0))}`);
      const L: Live[] = [];
      try {
        // fresh directories for this round
        for (const c of active) {
          let dir: string;
          if (c.kind === "raw") {
            dir = join(tmpfsDir, "raw");
          } else {
            dir = join(workRoot, "mnt", c.id);
            mkdirSync(dir, { recursive: true });
          }
          L.push({ cfg: c, dir, lastActivityEnd: 0, workloadCpuS: 0 });
        }
        const srcOf = (l: Live) => (l.cfg.kind === "raw" ? l.dir : join(tmpfsDir, `src-${l.cfg.id}`));
        // data files only where a fio workload will use them (not for the metadata-only variants)
        const needsData = (l: Live) => l.cfg.kind !== "script" && workloads.some((w) => w.kind === "fio" && runsOn(l.cfg, w.id));
        for (const l of L) {
          if (l.cfg.kind === "raw" || l.cfg.kind === "passthrough" || l.cfg.kind === "libfuse") {
            rmSync(srcOf(l), { recursive: true, force: true });
            mkdirSync(srcOf(l), { recursive: true });
          }
        }
        // raw and passthrough sources (ours and libfuse's): write the data files straight into tmpfs
        await Promise.all(L.filter((l) => l.cfg.kind !== "memfs" && l.cfg.kind !== "script" && needsData(l)).map((l) =>
          prepareData(srcOf(l), o.params, `${l.cfg.label}, round ${round}`)));
        // mount every FUSE configuration of the round
        for (const l of L) {
          if (l.cfg.kind === "raw") continue;
          l.daemon = daemonFor(l.cfg, l.dir, join(tmpfsDir, `src-${l.cfg.id}`), o, join(workRoot, `${l.cfg.id}.r${round}.stats.json`));
        }
        await Promise.all(L.filter((l) => l.daemon).map(async (l) => {
          await l.daemon!.waitReady(30_000);
          if (l.cfg.kind === "script") await readCheck(l.dir, `${l.cfg.label}, round ${round}`);
          else await smoke(l.dir, `${l.cfg.label}, round ${round}`);
          if (l.cfg.kind === "memfs" && needsData(l)) await prepareData(l.dir, o.params, `${l.cfg.label}, round ${round}`);
          l.daemon!.check("after preparing the data files");
          if (l.daemon!.isLibfuse) checkLibfuseTransport(l.cfg, l.daemon!, `round ${round}`);
        }));
        // baseline counters, and the transport as the daemon itself reports it (libfuse: no stats)
        const tb = Date.now();
        await Promise.all(L.filter((l) => l.daemon && !l.daemon.isLibfuse).map(async (l) => {
          l.snap = await l.daemon!.freshStats(tb);
          if (l.snap.transport !== l.cfg.transport) {
            throw new BenchError(`${l.cfg.label}: configured --transport ${l.cfg.transport} but the stats file reports transport=${l.snap.transport}`);
          }
        }));
        if (round === 1) roundOverhead = (Date.now() - tr) / 1000 + 1;

        for (let wi = 0; wi < workloads.length; wi++) {
          const w = workloads[wi]!;
          for (let ci = 0; ci < L.length; ci++) {
            const l = L[ci]!;
            if (!runsOn(l.cfg, w.id)) continue;
            const d = l.daemon;
            step++;
            progress(`[bench] round ${round}/${o.reps} │ ${l.cfg.id} │ ${w.id} │ step ${step}/${totalSteps} │ elapsed ${fmtDuration((Date.now() - t0) / 1000)} │ ETA ${fmtDuration(eta(round, wi, ci))}`);
            const context = `${l.cfg.label} / ${w.id} / round ${round}`;
            sampleNeighbours();
            if (d) {
              d.check(`before ${w.id}`);
              if (l.pending && !d.isLibfuse) {
                const s = await d.freshStats(l.lastActivityEnd);
                l.pending.stats = delta(l.snap!, s);
                l.snap = s;
                l.pending = undefined;
              }
            }
            // Unmeasured warm-up of the same job (every configuration, libfuse included): the
            // measured run then sees the steady state, not a fresh daemon's JIT compilation and
            // first touches of memory, which cost the first seconds 10–20 % more CPU per request.
            // The metadata workloads get one too (the same files, the readdir phase cut to the
            // warm-up time): without it a fresh daemon compiles its create/lookup/unlink path
            // inside the measured window (the JIT threads took ~40 % of the daemon's CPU over the
            // first 3,000-file create+stat+unlink, on both workers).
            const t = performance.now();
            if (o.params.warmupS > 0) {
              const warm = w.kind === "fio" ? { ...o.params, runtimeS: o.params.warmupS } : { ...o.params, readdirMinS: Math.min(o.params.readdirMinS, o.params.warmupS) };
              await runWorkload(w, l.dir, warm, `${context} (warm-up)`, REPO);
              // The counters of the measured run start after it (the CLI rewrites the file every second).
              if (d && !d.isLibfuse && l.snap) l.snap = await d.freshStats(Date.now());
            }
            const cpu0 = d?.cpuSeconds() ?? null;
            const res = await runWorkload(w, l.dir, o.params, context, REPO);
            const cpu1 = d?.cpuSeconds() ?? null;
            d?.check(`during ${w.id}`);
            const sample: Sample = {
              round, config: l.cfg.id, workload: w.id, values: res.values, seconds: res.seconds, ops: res.ops,
              daemonCpuS: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null, stats: null, detail: res.detail,
            };
            if (sample.daemonCpuS !== null) l.workloadCpuS += sample.daemonCpuS;
            results.samples.push(sample);
            measured.set(`${l.cfg.id}|${w.id}`, (performance.now() - t) / 1000);
            if (d && !d.isLibfuse) {
              l.pending = sample;
              l.lastActivityEnd = Date.now();
            }
          }
        }

        // end of round: last counters, resources, unmount, final checks
        await Promise.all(L.filter((l) => l.daemon).map(async (l) => {
          const d = l.daemon!;
          if (l.pending) {
            const s = await d.freshStats(l.lastActivityEnd);
            l.pending.stats = delta(l.snap!, s);
            l.snap = s;
            l.pending = undefined;
          }
          const peak = d.peakRssKiB();
          const cpu = d.cpuSeconds();
          const st = await stopDaemon(d);
          const rr: RoundResource = {
            round, config: l.cfg.id, pid: d.pid, peakRssKiB: peak, cpuS: cpu, workloadCpuS: l.workloadCpuS,
            pinnedBytes: Number(st.finalStats?.pinnedBytes ?? l.snap?.pinnedBytes ?? 0), finalStats: st.finalStats, exitCode: st.exitCode, forcedStop: st.forced,
          };
          results.resources.push(rr);
          if (d.isLibfuse) validateLibfuseRound(l, st, round, results);
          else validateRound(l, st.finalStats, st, round, results);
        }));
      } finally {
        await Promise.allSettled(L.filter((l) => l.daemon).map((l) => stopDaemon(l.daemon!)));
      }
    }
    results.valid = true;
  } catch (e) {
    error = e as Error;
    results.error = error instanceof BenchError ? error.message.split("\n")[0] : String(error?.stack ?? error);
  } finally {
    await cleanup();
    host.loadEnd = loadavg();
    results.meta.durationS = (Date.now() - t0) / 1000;
    if (busyChecks) {
      const top = [...seen].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([c]) => c);
      results.warnings.push(`other FUSE daemons / tests / fio were running during ${busyChecks} of ${neighbourChecks} steps (shared CPUs: expect noise), e.g. ${top.join("; ")}`);
    }
    const leftovers = mounts().filter((m) => m.mountpoint.startsWith("/tmp/fuse-uring-bench-"));
    if (leftovers.length) results.warnings.push(`mounts left behind: ${leftovers.map((m) => m.mountpoint).join(", ")}`);
  }

  // ---- output --------------------------------------------------------------------------------
  if (progressShown) process.stderr.write("\r\x1b[K");
  results.summary = summarize(results);
  const md = markdown(results);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, "results.json"), JSON.stringify(results, null, 2) + "\n");
  writeFileSync(join(outDir, "results.md"), md + "\n![chart](chart.svg)\n");
  if (results.samples.length) writeFileSync(join(outDir, "chart.svg"), svg(results));
  process.stdout.write(md + "\n");
  if (error) {
    const bar = "!".repeat(78);
    process.stderr.write(`\n${bar}\nBENCHMARK FAILED — results are INVALID\n${error instanceof BenchError ? error.message : error.stack}\n${bar}\n`);
    process.stderr.write(`[bench] partial results (marked invalid) in ${outDir}\n`);
    return 1;
  }
  log(`results: ${outDir}/results.md, results.json, chart.svg (${fmtDuration(results.meta.durationS ?? 0)})`);
  return 0;
}

/**
 * Copy what the daemon runs (bin/, lib/, the built shim, package metadata) so that every round
 * runs the same code even while others edit the checkout; node_modules is linked. Returns the
 * directory and a hash of the copied files.
 */
async function snapshotCode(dir: string): Promise<{ dir: string; hash: string }> {
  mkdirSync(dir, { recursive: true });
  for (const p of ["bin", "lib", "zig-out/lib", "prebuilt", "bench/fs", "package.json", "tsconfig.json", "bunfig.toml"]) {
    const from = join(REPO, p);
    if (existsSync(from)) cpSync(from, join(dir, p), { recursive: true });
  }
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
  const h = new Bun.CryptoHasher("sha256");
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : e.isFile() ? [join(d, e.name)] : []));
  for (const f of ["bin", "lib", "zig-out/lib", "bench/fs"].flatMap((p) => (existsSync(join(dir, p)) ? walk(join(dir, p)) : [])).sort()) {
    h.update(f.slice(dir.length));
    h.update(readFileSync(f));
  }
  return { dir, hash: h.digest("hex").slice(0, 16) };
}

function sha256File(path: string): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(readFileSync(path));
  return h.digest("hex");
}

/** Final counters of one configuration's round must match what was configured. */
function validateRound(l: Live, s: DaemonStats | null, st: { exitCode: number | null; forced: boolean; leftoverUnmounted: boolean }, round: number, results: Results): void {
  const c = l.cfg;
  if (!s) throw new BenchError(`${c.label}, round ${round}: no stats file at exit`);
  if (s.transport !== c.transport) throw new BenchError(`${c.label}, round ${round}: configured --transport ${c.transport} but the stats report transport=${s.transport}`);
  // FORGET, BATCH_FORGET and INTERRUPT always come through /dev/fuse (the kernel does not put
  // them on the ring), as do INIT and anything before the ring is registered
  const ops = (s.ops ?? {}) as Record<string, number>;
  const devOnly = (ops.FORGET ?? 0) + (ops.BATCH_FORGET ?? 0) + (ops.INTERRUPT ?? 0);
  // requests the shim answered natively (engines with a data plane) came over the configured transport
  const native = typeof s.nativeRequests === "number" ? s.nativeRequests : 0;
  const reqs = s.ringRequests + native + Math.max(0, s.devRequests - devOnly);
  if (c.transport === "uring" && s.ringRequests + native < 0.9 * reqs) {
    throw new BenchError(`${c.label}, round ${round}: uring configured but only ${s.ringRequests + native} of ${reqs} requests (FORGET/INTERRUPT not counted) came through the ring`);
  }
  if (c.transport === "classic" && s.ringRequests !== 0) throw new BenchError(`${c.label}, round ${round}: classic configured but ${s.ringRequests} requests came through a ring`);
  if (st.forced) results.warnings.push(`${c.label}, round ${round}: the daemon did not exit within 10 s of SIGTERM and was killed`);
  else if (st.exitCode !== 0) results.warnings.push(`${c.label}, round ${round}: the daemon exited with code ${st.exitCode} after SIGTERM`);
  if (st.leftoverUnmounted) results.warnings.push(`${c.label}, round ${round}: the mount was still there after the daemon exited (umount -l)`);
  if (c.id === "pt-uring-nofixed" && s.fixedIo > 0) results.warnings.push(`${c.label}, round ${round}: fixedIo = ${s.fixedIo} although ${c.extraArgs?.join(" ")} was given`);
  // One thread serves every queue and sends native transfers above 64 KiB through its ring with
  // fixed buffers; a copy per CPU (thread per queue) does them all with pread/pwrite instead.
  if (c.id === "pt-uring-1t" && !(s.fixedIo > 0)) results.warnings.push(`${c.label}, round ${round}: fixedIo = 0 — the passthrough did not use fixed buffers`);
  if (c.id === "kpt") {
    const seq = results.samples.find((x) => x.round === round && x.config === c.id && x.workload === "seqread-1m");
    const bytes = Number(seq?.detail.readBytes ?? 0);
    if (seq?.stats && bytes > 0 && seq.stats.requests > bytes / (1 << 20) / 4) {
      results.warnings.push(`${c.label}, round ${round}: ${seq.stats.requests} requests for ${Math.round(bytes / 2 ** 20)} MiB of O_DIRECT reads — data does not seem to bypass the daemon`);
    }
  }
}

/** libfuse has no counters: check how it stopped and that kernel passthrough kept data away from it. */
function validateLibfuseRound(l: Live, st: { exitCode: number | null; forced: boolean; leftoverUnmounted: boolean }, round: number, results: Results): void {
  const c = l.cfg;
  if (st.forced) results.warnings.push(`${c.label}, round ${round}: passthrough_hp did not exit within 10 s of SIGTERM and was killed`);
  else if (st.exitCode !== 0 && st.exitCode !== 1) results.warnings.push(`${c.label}, round ${round}: passthrough_hp exited with code ${st.exitCode} after SIGTERM`);
  if (st.leftoverUnmounted) results.warnings.push(`${c.label}, round ${round}: the mount was still there after passthrough_hp exited (umount -l)`);
  if (c.id === "lf-kpt") {
    const seq = results.samples.find((x) => x.round === round && x.config === c.id && x.workload === "seqread-1m");
    if (seq && seq.daemonCpuS !== null && seq.daemonCpuS > 0.1 * seq.seconds) {
      results.warnings.push(`${c.label}, round ${round}: passthrough_hp used ${Math.round((100 * seq.daemonCpuS) / seq.seconds)} % CPU during seqread-1m — data does not seem to bypass it`);
    }
  }
}

/** This process and its parents (npm, the shell running `bash scripts/setup.sh && bun …`). */
function ancestors(): Set<number> {
  const out = new Set<number>();
  let pid = process.pid;
  while (pid > 1 && !out.has(pid)) {
    out.add(pid);
    const st = readText(`/proc/${pid}/stat`);
    pid = Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]);
    if (!Number.isFinite(pid)) break;
  }
  return out;
}

/** Other fuse-uring daemons, test runs or fio jobs on the machine (they share the CPUs). */
function busyNeighbours(): string[] {
  const out: string[] = [];
  const mine = ancestors();
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || mine.has(Number(pid))) continue;
    let cmd = "";
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    } catch {
      continue;
    }
    if (workRoot && cmd.includes(workRoot)) continue; // ours
    if (/fuse-uring\.ts mount|bun test|\bfio\b|bench\/run\.ts/.test(cmd)) out.push(cmd.replace(/\s+--.*$/, "").slice(0, 90));
  }
  return out;
}

for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    log(`${sig}: stopping daemons and unmounting …`);
    cleanup().finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  async (e) => {
    await cleanup();
    process.stderr.write(`[bench] ${e instanceof BenchError ? e.message : (e as Error)?.stack ?? e}\n`);
    process.exit(1);
  },
);
