#!/usr/bin/env bun
// fuse-uring benchmark harness: a matrix of configurations × workloads with interleaved rounds.
// See bench/README.md. `npm run bench` (full, ~24 min on 2 CPUs) or `npm run bench -- --quick` (< 3 min).

import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { configDefs, type ConfigState } from "./lib/configs.ts";
import { Daemon, type DaemonStats } from "./lib/daemon.ts";
import { markdown, svg, type Results, type RoundResource, type Sample, type StatsDelta } from "./lib/report.ts";
import { BenchError, fmtDuration, mountAt, mounts, readText, run, sleep, unmountBelow } from "./lib/util.ts";
import { MAX_JOBS, WORKLOADS, prepareData, runWorkload, sizeBytes, type Params, type Workload } from "./lib/workloads.ts";

const REPO = resolve(dirname(new URL(import.meta.url).pathname), "..");
/** Where the daemons run from: a snapshot of the code taken at start (see snapshotCode). */
let CODE = REPO;

const HELP = `Usage: bun bench/run.ts [options]      (npm run bench [-- options])

  --quick              short run (< 3 min): 2 rounds, 1.5 s fio runs, 64M files, 2,000 files
                       for the metadata workload, 5 of the 11 workloads
  --reps N             interleaved rounds (default 3, quick 2)
  --runtime S          seconds per fio run (default 5, quick 1.5)
  --size SIZE          fio file size per job, e.g. 256M (default 256M, quick 64M)
  --files N            files for the metadata workload (default 20000, quick 2000)
  --queue-depth N      passed to the CLI (io_uring entries per queue; default 8)
  --max-write BYTES    passed to the CLI (default 1048576)
  --configs a,b,…      only these configurations (raw, memfs-classic, memfs-uring, pt-classic,
                       pt-uring, pt-uring-nofixed when the CLI has --no-fixed-buffers, kpt)
  --workloads a,b,…    only these workloads (ids in bench/README.md, e.g. seqread-1m,meta)
  --aio-engine E       fio engine of the QD16 and 70/30 mix workloads: libaio (default) or
                       io_uring (on tmpfs io_uring punts every I/O to io-wq workers, which
                       cripples the raw baseline)
  --nofile N           RLIMIT_NOFILE of the daemons (default 1048576; 0 = inherit). A passthrough
                       holds one O_PATH descriptor per inode the kernel knows, so 20,000 files
                       need more than the usual limits
  --out DIR            results directory (default bench/results/<timestamp>)
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
  out: string | null;
  nofile: number;
}

function parseOptions(argv: string[]): Options {
  const quick = argv.includes("--quick");
  const o: Options = {
    quick,
    reps: quick ? 2 : 3,
    params: { runtimeS: quick ? 1.5 : 5, size: quick ? "64M" : "256M", metaFiles: quick ? 2000 : 20000, readdirMinS: quick ? 0.25 : 1, aioEngine: "libaio" },
    queueDepth: 8,
    maxWrite: 1 << 20,
    configs: null,
    workloads: null,
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
      case "--size": {
        const v = val();
        if (!v || !/^\d+[KMG]?$/i.test(v)) throw new BenchError(`--size needs e.g. 256M, got ${JSON.stringify(v)}`);
        o.params.size = v.toUpperCase();
        break;
      }
      case "--files": o.params.metaFiles = Math.max(2, Math.floor(num(flag, val(), 2) / 2) * 2); break;
      case "--queue-depth": o.queueDepth = Math.floor(num(flag, val(), 1)); break;
      case "--max-write": o.maxWrite = Math.floor(num(flag, val(), 4096)); break;
      case "--configs": o.configs = (val() ?? "").split(",").filter(Boolean); break;
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
  return {
    requests: d("ringRequests") + d("devRequests"), ringRequests: d("ringRequests"), devRequests: d("devRequests"),
    wakeups: d("wakeups"), cqes: d("cqes"), submits: d("submits"), fixedIo: d("fixedIo"), errors: d("errors"),
  };
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

function daemonFor(cfg: ConfigState, mnt: string, src: string, o: Options, statsFile: string): Daemon {
  const d = new Daemon(
    {
      id: cfg.id,
      fsArgs: cfg.kind === "memfs" ? ["--memfs"] : ["--passthrough", src],
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

const BIG = "probe-big.bin";
const BIG_BYTES = 64 << 20;

/** Probe an optional (passthrough) configuration: mount, smoke test, unmount, check counters. */
async function probeConfig(cfg: ConfigState, o: Options): Promise<void> {
  if (!existsSync(join(CODE, "lib/fs/passthrough.ts"))) {
    cfg.available = false;
    cfg.reason = "lib/fs/passthrough.ts does not exist yet";
    return;
  }
  const src = join(tmpfsDir, `probe-src-${cfg.id}`);
  const mnt = join(workRoot, "mnt", `probe-${cfg.id}`);
  mkdirSync(src, { recursive: true });
  mkdirSync(mnt, { recursive: true });
  const big = Buffer.alloc(BIG_BYTES, 0x5a);
  writeFileSync(join(src, BIG), big);
  const statsFile = join(workRoot, `probe-${cfg.id}.stats.json`);
  const d = daemonFor(cfg, mnt, src, o, statsFile);
  try {
    await d.waitReady(30_000);
    await smoke(mnt, `${cfg.label} probe mount`, BIG);
    d.check("after the smoke test");
  } catch (e) {
    cfg.available = false;
    const first = (e as Error).message.split("\n");
    cfg.reason = `probe failed: ${first[0]}${first.length > 1 ? " — daemon stderr: " + first.slice(1).map((l) => l.replace(/^\s*\|\s?/, "")).filter(Boolean).slice(-3).join(" / ") : ""}`;
  } finally {
    const st = await stopDaemon(d);
    if (cfg.available) {
      const s = st.finalStats;
      const reqs = s ? s.ringRequests + s.devRequests : NaN;
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
      if (cfg.available) cfg.notes.push(`probe: ${reqs} requests for the smoke test + 64 MiB O_DIRECT read in 128 KiB pieces`);
    }
    rmSync(src, { recursive: true, force: true });
  }
}

// ---- main ---------------------------------------------------------------------------------------

async function main(): Promise<number> {
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
  const configs: ConfigState[] = configDefs(noFixed).map((d) => ({ ...d, available: true, notes: [] }));
  for (const c of configs) {
    if (o.configs && !o.configs.includes(c.id)) {
      c.available = false;
      c.reason = "not selected (--configs)";
    } else if (c.transport === "uring" && uringReason) {
      c.available = false;
      c.reason = uringReason;
    }
  }
  if (o.configs) for (const id of o.configs) if (!configs.some((c) => c.id === id)) throw new BenchError(`unknown configuration ${id} (known: ${configs.map((c) => c.id).join(", ")})`);
  const ptUring = configs.find((c) => c.id === "pt-uring")!;
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
      params: { ...o.params, queueDepth: o.queueDepth, maxWrite: o.maxWrite, dataFiles: MAX_JOBS, daemonNofile: o.nofile ? effectiveNofile : "inherited" },
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
    const nTmpfs = 1 + configs.filter((c) => c.kind === "passthrough").length;
    const tmpfsBytes = nTmpfs * MAX_JOBS * sizeBytes(o.params.size) * 1.25 + (512 << 20) + o.params.metaFiles * 8192;
    const m = await run(["mount", "-t", "tmpfs", "-o", `size=${Math.ceil(tmpfsBytes / 2 ** 20)}m,mode=0755`, "tmpfs", tmpfsDir], { timeoutMs: 10_000 });
    if (m.code !== 0) throw new BenchError(`cannot mount tmpfs at ${tmpfsDir}: ${m.stderr.trim()}`);
    tmpfsMounted = true;

    // optional configurations: probe them (in parallel) and skip with the reason when they fail
    const optional = configs.filter((c) => c.available && c.optional);
    if (optional.length) {
      log(`probing ${optional.map((c) => c.id).join(", ")} …`);
      await Promise.all(optional.map((c) => probeConfig(c, o)));
    }
    for (const c of configs) if (!c.available && c.reason !== "not selected (--configs)") log(`skipping ${c.label}: ${c.reason}`);
    // A passthrough holds one O_PATH descriptor per inode the kernel knows: the metadata set
    // must fit the daemon's descriptor limit (same file count for every configuration).
    if (configs.some((c) => c.available && c.kind === "passthrough") && workloads.some((w) => w.kind === "meta")) {
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
      if (w.kind === "fio") return o.params.runtimeS + 0.6;
      return c.kind === "raw" ? o.params.readdirMinS + 0.5 : o.params.metaFiles * 2e-4 + o.params.readdirMinS + 0.5;
    };
    let roundOverhead = 3 + active.length * 0.5;
    const totalSteps = o.reps * workloads.length * active.length;
    let step = 0;
    const eta = (round: number, wi: number, ci: number) => {
      let s = 0;
      for (let r = round; r <= o.reps; r++)
        workloads.forEach((w, j) => active.forEach((c, k) => {
          if (r > round || j > wi || (j === wi && k >= ci)) s += estimate(c, w);
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
        for (const l of L) {
          const direct = l.cfg.kind === "raw" ? l.dir : l.cfg.kind === "passthrough" ? join(tmpfsDir, `src-${l.cfg.id}`) : null;
          if (direct) {
            rmSync(direct, { recursive: true, force: true });
            mkdirSync(direct, { recursive: true });
          }
        }
        // raw and passthrough sources: write the data files straight into tmpfs
        await Promise.all(L.filter((l) => l.cfg.kind !== "memfs").map((l) =>
          prepareData(l.cfg.kind === "raw" ? l.dir : join(tmpfsDir, `src-${l.cfg.id}`), o.params, `${l.cfg.label}, round ${round}`)));
        // mount every FUSE configuration of the round
        for (const l of L) {
          if (l.cfg.kind === "raw") continue;
          l.daemon = daemonFor(l.cfg, l.dir, join(tmpfsDir, `src-${l.cfg.id}`), o, join(workRoot, `${l.cfg.id}.r${round}.stats.json`));
        }
        await Promise.all(L.filter((l) => l.daemon).map(async (l) => {
          await l.daemon!.waitReady(30_000);
          await smoke(l.dir, `${l.cfg.label}, round ${round}`);
          if (l.cfg.kind === "memfs") await prepareData(l.dir, o.params, `${l.cfg.label}, round ${round}`);
          l.daemon!.check("after preparing the data files");
        }));
        // baseline counters, and the transport as the daemon itself reports it
        const tb = Date.now();
        await Promise.all(L.filter((l) => l.daemon).map(async (l) => {
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
            const d = l.daemon;
            step++;
            progress(`[bench] round ${round}/${o.reps} │ ${l.cfg.id} │ ${w.id} │ step ${step}/${totalSteps} │ elapsed ${fmtDuration((Date.now() - t0) / 1000)} │ ETA ${fmtDuration(eta(round, wi, ci))}`);
            const context = `${l.cfg.label} / ${w.id} / round ${round}`;
            sampleNeighbours();
            if (d) {
              d.check(`before ${w.id}`);
              if (l.pending) {
                const s = await d.freshStats(l.lastActivityEnd);
                l.pending.stats = delta(l.snap!, s);
                l.snap = s;
                l.pending = undefined;
              }
            }
            const cpu0 = d?.cpuSeconds() ?? null;
            const res = await runWorkload(w, l.dir, o.params, context, REPO);
            const cpu1 = d?.cpuSeconds() ?? null;
            d?.check(`during ${w.id}`);
            const sample: Sample = {
              round, config: l.cfg.id, workload: w.id, values: res.values, seconds: res.seconds,
              daemonCpuS: cpu0 !== null && cpu1 !== null ? cpu1 - cpu0 : null, stats: null, detail: res.detail,
            };
            if (sample.daemonCpuS !== null) l.workloadCpuS += sample.daemonCpuS;
            results.samples.push(sample);
            measured.set(`${l.cfg.id}|${w.id}`, res.seconds);
            if (d) {
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
          validateRound(l, st.finalStats, st, round, results);
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
  for (const p of ["bin", "lib", "zig-out/lib", "prebuilt", "package.json", "tsconfig.json", "bunfig.toml"]) {
    const from = join(REPO, p);
    if (existsSync(from)) cpSync(from, join(dir, p), { recursive: true });
  }
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
  const h = new Bun.CryptoHasher("sha256");
  const walk = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : e.isFile() ? [join(d, e.name)] : []));
  for (const f of ["bin", "lib", "zig-out/lib"].flatMap((p) => (existsSync(join(dir, p)) ? walk(join(dir, p)) : [])).sort()) {
    h.update(f.slice(dir.length));
    h.update(readFileSync(f));
  }
  return { dir, hash: h.digest("hex").slice(0, 16) };
}

/** Final counters of one configuration's round must match what was configured. */
function validateRound(l: Live, s: DaemonStats | null, st: { exitCode: number | null; forced: boolean; leftoverUnmounted: boolean }, round: number, results: Results): void {
  const c = l.cfg;
  if (!s) throw new BenchError(`${c.label}, round ${round}: no stats file at exit`);
  if (s.transport !== c.transport) throw new BenchError(`${c.label}, round ${round}: configured --transport ${c.transport} but the stats report transport=${s.transport}`);
  const reqs = s.ringRequests + s.devRequests;
  if (c.transport === "uring" && s.ringRequests < 0.9 * reqs) {
    throw new BenchError(`${c.label}, round ${round}: uring configured but only ${s.ringRequests} of ${reqs} requests came through the ring`);
  }
  if (c.transport === "classic" && s.ringRequests !== 0) throw new BenchError(`${c.label}, round ${round}: classic configured but ${s.ringRequests} requests came through a ring`);
  if (st.forced) results.warnings.push(`${c.label}, round ${round}: the daemon did not exit within 10 s of SIGTERM and was killed`);
  else if (st.exitCode !== 0) results.warnings.push(`${c.label}, round ${round}: the daemon exited with code ${st.exitCode} after SIGTERM`);
  if (st.leftoverUnmounted) results.warnings.push(`${c.label}, round ${round}: the mount was still there after the daemon exited (umount -l)`);
  if (c.id === "pt-uring-nofixed" && s.fixedIo > 0) results.warnings.push(`${c.label}, round ${round}: fixedIo = ${s.fixedIo} although ${c.extraArgs?.join(" ")} was given`);
  if (c.id === "pt-uring" && !(s.fixedIo > 0)) results.warnings.push(`${c.label}, round ${round}: fixedIo = 0 — the passthrough did not use fixed buffers`);
  if (c.id === "kpt") {
    const seq = results.samples.find((x) => x.round === round && x.config === c.id && x.workload === "seqread-1m");
    const bytes = Number(seq?.detail.readBytes ?? 0);
    if (seq?.stats && bytes > 0 && seq.stats.requests > bytes / (1 << 20) / 4) {
      results.warnings.push(`${c.label}, round ${round}: ${seq.stats.requests} requests for ${Math.round(bytes / 2 ** 20)} MiB of O_DIRECT reads — data does not seem to bypass the daemon`);
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
