// Results → markdown tables and a hand-written SVG chart (no dependencies).

import { LIBFUSE_PAIRS, META_WORKLOADS, type ConfigState } from "./configs.ts";
import type { Metric } from "./workloads.ts";
import { fmtDuration, fmtNum, fmtRatio, median } from "./util.ts";

export interface StatsDelta {
  requests: number;
  ringRequests: number;
  devRequests: number;
  wakeups: number;
  cqes: number;
  submits: number;
  fixedIo: number;
  errors: number;
  /** io_uring_enter calls (engines that count them) */
  enters?: number;
  /** requests answered in the shim without JavaScript (engines with a native data plane) */
  nativeRequests?: number;
  /** requests answered, from the stats file's per-opcode `ops` counts */
  answered?: number;
}

export interface Sample {
  round: number;
  config: string;
  workload: string;
  values: Record<string, number>;
  seconds: number;
  /** operations the workload performed (fio I/Os, metadata operations) */
  ops?: number;
  daemonCpuS: number | null;
  stats: StatsDelta | null;
  detail: Record<string, unknown>;
}

export interface RoundResource {
  round: number;
  config: string;
  pid: number;
  peakRssKiB: number | null;
  cpuS: number | null;
  workloadCpuS: number;
  pinnedBytes: number;
  finalStats: Record<string, unknown> | null;
  exitCode: number | null;
  forcedStop: boolean;
}

export interface WorkloadInfo {
  id: string;
  label: string;
  description: string;
  metrics: Metric[];
}

export interface Results {
  meta: Record<string, unknown> & {
    mode: string;
    reps: number;
    startedAt: string;
    durationS?: number;
    command: string;
    params: Record<string, unknown>;
    host: Record<string, unknown>;
  };
  configs: ConfigState[];
  workloads: WorkloadInfo[];
  samples: Sample[];
  resources: RoundResource[];
  warnings: string[];
  /** facts about this run a reader needs (e.g. parameters the harness had to adapt) */
  notes: string[];
  valid: boolean;
  error?: string;
  /** derived tables (also in results.md): fuse-uring ÷ libfuse ratios, CPU per operation */
  summary?: Summary;
}

export interface Cell {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function cell(r: Results, metric: string, config: string): Cell | null {
  const xs = r.samples.filter((s) => s.config === config && s.values[metric] !== undefined).map((s) => s.values[metric]!);
  if (!xs.length) return null;
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

/** Relative performance a vs b (> 1 = a better), from medians. */
function perf(m: Metric, a: Cell | null, b: Cell | null): number {
  if (!a || !b || !a.median || !b.median) return NaN;
  return m.higherIsBetter ? a.median / b.median : b.median / a.median;
}

const allMetrics = (r: Results) => r.workloads.flatMap((w) => w.metrics);
const ran = (r: Results) => r.configs.filter((c) => c.available && r.samples.some((s) => s.config === c.id));

function table(head: string[], rows: string[][], align?: string[]): string {
  const a = align ?? head.map((_, i) => (i === 0 ? ":---" : "---:"));
  return [`| ${head.join(" | ")} |`, `| ${a.join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

function sumStats(r: Results, config: string, workload?: string): StatsDelta | null {
  const ss = r.samples.filter((s) => s.config === config && (!workload || s.workload === workload) && s.stats).map((s) => s.stats!);
  if (!ss.length) return null;
  const z: StatsDelta = { requests: 0, ringRequests: 0, devRequests: 0, wakeups: 0, cqes: 0, submits: 0, fixedIo: 0, errors: 0 };
  for (const s of ss) for (const k of ["requests", "ringRequests", "devRequests", "wakeups", "cqes", "submits", "fixedIo", "errors"] as const) z[k] += s[k];
  // counters only some engines have: a sum only when every sample has them
  for (const k of ["enters", "nativeRequests", "answered"] as const) {
    if (ss.every((s) => typeof s[k] === "number")) z[k] = ss.reduce((a, s) => a + s[k]!, 0);
  }
  return z;
}

// ---- derived figures (results.json `summary` and the tables below) -----------------------------

export interface RatioRow {
  metric: string;
  label: string;
  unit: string;
  /** per pair: the fuse-uring configuration used (the long-TTL variant for metadata rows), medians, ratio */
  cells: Array<{ a: string; b: string; aMedian: number | null; bMedian: number | null; ratio: number | null } | null>;
}

export interface Summary {
  libfuse: { pairs: typeof LIBFUSE_PAIRS; rows: RatioRow[]; note: string } | null;
  /** µs of daemon CPU per workload operation (fio I/O or metadata op), median over rounds */
  cpuPerOpUs: Record<string, Record<string, number | null>>;
  /** fuse-uring: µs of daemon CPU per FUSE request answered, median over rounds */
  cpuPerRequestUs: Record<string, Record<string, number | null>>;
  /** fuse-uring, per workload: hand-offs (JS wake-ups from another thread), io_uring_enter calls and CQEs per enter */
  perRequest: Record<string, Record<string, { handoffs: number | null; enters: number | null; cqesPerEnter: number | null; native: number | null } | null>>;
}

const finite = (x: number) => (Number.isFinite(x) ? x : null);
const metricWorkload = (r: Results, metric: string) => r.workloads.find((w) => w.metrics.some((m) => m.id === metric))?.id ?? "";

/** The fuse-uring side of a libfuse pair for a metric: its long-TTL variant on the metadata rows, when it ran. */
function fuseSide(r: Results, a: string, metric: string): string {
  if (!META_WORKLOADS.includes(metricWorkload(r, metric))) return a;
  const v = `${a}-ttl`;
  return r.samples.some((s) => s.config === v && s.values[metric] !== undefined) ? v : a;
}

function medianOver(xs: number[]): number | null {
  const ok = xs.filter((x) => Number.isFinite(x));
  return ok.length ? median(ok) : null;
}

export function summarize(r: Results): Summary {
  const ids = new Set(r.samples.map((s) => s.config));
  const pairs = LIBFUSE_PAIRS.filter((p) => ids.has(p.b) && (ids.has(p.a) || ids.has(`${p.a}-ttl`)));
  let libfuse: Summary["libfuse"] = null;
  if (pairs.length) {
    const rows: RatioRow[] = [];
    for (const m of allMetrics(r)) {
      const cells = pairs.map((p) => {
        const a = fuseSide(r, p.a, m.id);
        const ca = cell(r, m.id, a), cb = cell(r, m.id, p.b);
        if (!ca && !cb) return null;
        return { a, b: p.b, aMedian: ca?.median ?? null, bMedian: cb?.median ?? null, ratio: finite(perf(m, ca, cb)) };
      });
      if (cells.some((c) => c?.ratio !== null && c?.ratio !== undefined)) rows.push({ metric: m.id, label: m.label, unit: m.unit, cells });
    }
    libfuse = {
      pairs, rows,
      note: "ratio = fuse-uring median ÷ libfuse median (> 1: fuse-uring better; latency rows inverted). Metadata rows (create/stat/unlink, metadata) use the fuse-uring configuration's ttl86400 variant (--entry-ttl/--attr-ttl/--negative-ttl 86400, passthrough_hp's cache lifetimes) when it ran",
    };
  }
  const cpuPerOpUs: Summary["cpuPerOpUs"] = {};
  const cpuPerRequestUs: Summary["cpuPerRequestUs"] = {};
  const perRequest: Summary["perRequest"] = {};
  for (const w of r.workloads) {
    cpuPerOpUs[w.id] = {};
    cpuPerRequestUs[w.id] = {};
    perRequest[w.id] = {};
    for (const c of ran(r).filter((c) => c.kind !== "raw")) {
      const ss = r.samples.filter((s) => s.config === c.id && s.workload === w.id);
      if (!ss.length) continue;
      cpuPerOpUs[w.id]![c.id] = medianOver(ss.map((s) => (s.daemonCpuS !== null && s.ops ? (1e6 * s.daemonCpuS) / s.ops : NaN)));
      if (c.kind === "libfuse") continue;
      cpuPerRequestUs[w.id]![c.id] = medianOver(ss.map((s) => {
        // JS-answered requests by opcode, plus those the shim answered natively (not in `ops`)
        const n = s.stats ? (s.stats.answered !== undefined ? s.stats.answered + (s.stats.nativeRequests ?? 0) : s.stats.requests) : 0;
        return s.daemonCpuS !== null && n > 0 ? (1e6 * s.daemonCpuS) / n : NaN;
      }));
      const st = sumStats(r, c.id, w.id);
      const reqs = st ? st.requests : 0;
      perRequest[w.id]![c.id] = st && reqs > 0
        ? {
          handoffs: per(st.wakeups, reqs),
          enters: st.enters !== undefined ? per(st.enters, reqs) : null,
          cqesPerEnter: st.enters !== undefined ? finite(per(st.cqes, st.enters)) : null,
          native: st.nativeRequests !== undefined ? per(st.nativeRequests, reqs) : null,
        }
        : null;
    }
  }
  return { libfuse, cpuPerOpUs, cpuPerRequestUs, perRequest };
}

const per = (a: number, b: number) => (b > 0 ? a / b : NaN);

export function markdown(r: Results): string {
  const cfgs = ran(r);
  const raw = cfgs.find((c) => c.id === "raw");
  const out: string[] = [];
  const p = r.meta.params;
  const h = r.meta.host;
  out.push(`## Results — ${r.meta.startedAt} (${r.meta.mode}, ${r.meta.reps} interleaved rounds${r.meta.durationS ? `, ${fmtDuration(r.meta.durationS)}` : ""})`);
  out.push("");
  if (!r.valid) out.push(`> **INVALID RUN — ${r.error}**\n`);
  out.push(
    `Machine: ${h.cpus} CPUs, ${h.memGiB} GiB, Linux ${h.kernel}; ${h.fio}, bun ${h.bun}; code: git ${h.git}, snapshot ${h.codeHash}${h.env && Object.keys(h.env as object).length ? `, env ${Object.entries(h.env as object).map(([k, v]) => `${k}=${v}`).join(" ")}` : ""}; load average at start ${h.loadStart}, at end ${h.loadEnd ?? "?"}. ` +
      `Parameters: fio \`--size=${p.size}\` per job file, \`--runtime=${p.runtimeS}\` (time based) after an unmeasured ${p.warmupS ?? 0} s run of the same job, queue-depth workloads with \`--ioengine=${p.aioEngine}\`; metadata ${p.metaFiles} files (readdir of ${Math.min(10000, Number(p.metaFiles) - Math.floor(Number(p.metaFiles) / 4))} entries)${p.metaWarmup ? ", after an unmeasured run of the same files" : ""}; ` +
      `daemon \`${p.queueDepth ? `--queue-depth ${p.queueDepth}` : "(default queue depth)"} --max-write ${p.maxWrite}\`, RLIMIT_NOFILE ${p.daemonNofile}. ` +
      (h.libfuse ? `libfuse: \`${(h.libfuse as { path: string }).path}\` (sha256 ${(h.libfuse as { sha256: string }).sha256.slice(0, 16)}…). ` : "") +
      `Command: \`${r.meta.command}\`.`,
  );
  out.push("");
  out.push(`Median of ${r.meta.reps} rounds, [min–max] below it. Higher is better except latency (µs).`);
  out.push("");
  const head = ["Workload", "Unit", ...cfgs.map((c) => c.label)];
  const rows: string[][] = [];
  for (const m of allMetrics(r)) {
    const cells = cfgs.map((c) => cell(r, m.id, c.id));
    if (cells.every((x) => !x)) continue;
    rows.push([m.label, m.unit, ...cells.map((x) => (x ? `**${fmtNum(x.median)}** [${fmtNum(x.min)}–${fmtNum(x.max)}]` : "–"))]);
  }
  out.push(table(head, rows));
  out.push("");

  // ratios
  const pairs: Array<[string, string, string]> = [];
  const has = (id: string) => cfgs.some((c) => c.id === id);
  if (has("memfs-uring") && has("memfs-classic")) pairs.push(["memfs uring ÷ classic", "memfs-uring", "memfs-classic"]);
  if (has("pt-uring") && has("pt-classic")) pairs.push(["passthrough uring ÷ classic", "pt-uring", "pt-classic"]);
  if (has("memfs-uring") && has("memfs-uring-1t")) pairs.push(["memfs uring copies ÷ one thread", "memfs-uring", "memfs-uring-1t"]);
  if (has("pt-uring") && has("pt-uring-1t")) pairs.push(["pt uring copies ÷ one thread", "pt-uring", "pt-uring-1t"]);
  if (has("pt-uring-1t") && has("pt-uring-nofixed")) pairs.push(["pt uring fixed ÷ not fixed (one thread)", "pt-uring-1t", "pt-uring-nofixed"]);
  if (has("kpt") && has("pt-uring")) pairs.push(["kernel pt ÷ pt uring", "kpt", "pt-uring"]);
  if (has("pt-classic") && has("memfs-classic")) pairs.push(["pt classic ÷ memfs classic", "pt-classic", "memfs-classic"]);
  if (has("pt-uring") && has("pt-uring-js")) pairs.push(["pt uring native ÷ JS data plane", "pt-uring", "pt-uring-js"]);
  if (has("pt-classic") && has("pt-classic-js")) pairs.push(["pt classic native ÷ JS data plane", "pt-classic", "pt-classic-js"]);
  if (has("burn-w2") && has("burn-w1")) pairs.push(["burn 2 workers ÷ 1 worker", "burn-w2", "burn-w1"]);
  if (has("burn-paths-w2") && has("burn-paths-w1")) pairs.push(["burn paths() stateless ÷ 1 worker", "burn-paths-w2", "burn-paths-w1"]);
  // the ÷ raw columns: only configurations that run the raw workloads (not the metadata-only or burn ones)
  const vsRaw = raw ? cfgs.filter((c) => c.id !== "raw" && !c.workloads) : [];
  out.push(`Relative performance from the medians (> 1 = the first is better; for latency the inverse ratio of µs). "÷ raw" is the fraction of the raw tmpfs figure.`);
  out.push("");
  const rhead = ["Workload", ...pairs.map((x) => x[0]), ...vsRaw.map((c) => `${c.label} ÷ raw`)];
  const rrows: string[][] = [];
  for (const m of allMetrics(r)) {
    const vals = [
      ...pairs.map(([, a, b]) => perf(m, cell(r, m.id, a), cell(r, m.id, b))),
      ...vsRaw.map((c) => perf(m, cell(r, m.id, c.id), cell(r, m.id, "raw"))),
    ];
    if (vals.every((v) => !Number.isFinite(v))) continue;
    rrows.push([m.label, ...vals.map((v, i) => (i < pairs.length && Number.isFinite(v) ? `**${fmtRatio(v)}**` : fmtRatio(v)))]);
  }
  out.push(table(rhead, rrows));
  out.push("");

  // fuse-uring ÷ libfuse
  const sum = r.summary ?? summarize(r);
  if (sum.libfuse) {
    const lf = sum.libfuse;
    out.push(`**fuse-uring ÷ libfuse** (passthrough_hp), from the medians of the interleaved rounds: > 1 = fuse-uring better (latency: inverse ratio of µs). Metadata rows marked † compare the ttl86400 variant (\`--entry-ttl 86400 --attr-ttl 86400 --negative-ttl 86400\`, passthrough_hp's cache lifetimes). Absolute values are in the first table.`);
    out.push("");
    const lrows = lf.rows.map((row) => [
      row.label,
      ...row.cells.map((c, i) => {
        if (!c || c.ratio === null) return "–";
        const ttl = c.a !== lf.pairs[i]!.a ? "†" : "";
        return `**${fmtRatio(c.ratio)}**${ttl}`;
      }),
    ]);
    out.push(table(["Workload", ...lf.pairs.map((p) => p.label)], lrows));
    out.push("");
  }

  // CPU per operation
  const fuseCfgs = cfgs.filter((c) => c.kind !== "raw");
  if (fuseCfgs.length) {
    out.push(`Daemon CPU per operation, µs (utime+stime of the daemon's process tree over the workload ÷ fio I/Os or metadata operations; median over rounds). For fuse-uring also "/ req": per FUSE request answered (the stats file's per-opcode \`ops\` counts).`);
    out.push("");
    const crows = r.workloads.map((w) => [
      w.label,
      ...fuseCfgs.map((c) => {
        const op = sum.cpuPerOpUs[w.id]?.[c.id];
        if (op === undefined) return "–";
        const rq = sum.cpuPerRequestUs[w.id]?.[c.id];
        return `${op === null ? "?" : fmtNum(op)}${rq !== undefined && rq !== null ? ` · ${fmtNum(rq)} / req` : ""}`;
      }),
    ]);
    out.push(table(["Workload", ...fuseCfgs.map((c) => c.label)], crows));
    out.push("");
  }

  // resources
  out.push(`Daemon resources per configuration (per round: one daemon per configuration and round). Peak RSS = VmHWM at the end of the round; CPU = utime+stime of the daemon (all threads) while the workloads ran; requests/CQEs per wake-up over all workloads.`);
  out.push("");
  const fuse = cfgs.filter((c) => c.kind !== "raw");
  const ours = fuse.filter((c) => c.kind !== "libfuse");
  const anyEnters = ours.some((c) => sumStats(r, c.id)?.enters !== undefined);
  const anyNative = ours.some((c) => sumStats(r, c.id)?.nativeRequests !== undefined);
  const resRows = fuse.map((c) => {
    const rs = r.resources.filter((x) => x.config === c.id);
    const rss = rs.map((x) => x.peakRssKiB).filter((x): x is number => x !== null);
    const cpu = rs.map((x) => x.workloadCpuS);
    const s = sumStats(r, c.id);
    const pinned = rs[0]?.pinnedBytes ?? 0;
    return [
      c.label,
      rss.length ? `${fmtNum(median(rss) / 1024)} [${fmtNum(Math.max(...rss) / 1024)}]` : "–",
      cpu.length ? `${fmtNum(median(cpu))} [${fmtNum(Math.min(...cpu))}–${fmtNum(Math.max(...cpu))}]` : "–",
      fmtNum(pinned / 2 ** 20),
      s ? fmtNum(s.requests) : "–",
      s ? fmtNum(s.wakeups) : "–",
      s ? fmtNum(per(s.requests, s.wakeups)) : "–",
      s ? (c.transport === "uring" ? fmtNum(per(s.cqes, s.wakeups)) : "–") : "–",
      s ? fmtNum(per(s.wakeups, s.requests)) : "–",
      ...(anyEnters ? [s?.enters !== undefined ? fmtNum(per(s.enters, s.requests)) : "–", s?.enters !== undefined ? fmtNum(per(s.cqes, s.enters)) : "–"] : []),
      ...(anyNative ? [s?.nativeRequests !== undefined ? fmtNum(s.nativeRequests) : "–"] : []),
      s ? fmtNum(s.fixedIo) : "–",
      s ? fmtNum(s.errors) : "–",
    ];
  });
  out.push(table([
    "Configuration", "Peak RSS MiB (median [max])", "CPU s per round", "Pinned MiB", "Requests", "Wake-ups", "Req/wake-up", "CQEs/wake-up", "Hand-offs/req",
    ...(anyEnters ? ["Enters/req", "CQEs/enter"] : []), ...(anyNative ? ["Native req"] : []), "Fixed I/O", "Error replies",
  ], resRows));
  out.push("");
  out.push(`Requests = \`ringRequests + devRequests\` (+ \`nativeRequests\` when the stats file has it). Hand-offs per request = \`wakeups ÷ requests\`: how often a JS thread had to be woken from another thread per FUSE request (0 when requests are served on the thread that waited for them).${anyEnters ? " Enters/req = io_uring_enter calls per request; CQEs/enter = completions reaped per call." : " (Enters/req and CQEs/enter appear when the stats file has `enters`.)"} libfuse has no counters: its rows show RSS and CPU only.`);
  out.push("");
  if (ours.length) {
    out.push(`Per FUSE request and workload (fuse-uring): hand-offs${anyEnters ? " · io_uring_enter calls · CQEs per enter" : ""}${anyNative ? " · share answered natively" : ""}.`);
    out.push("");
    const prows = r.workloads.map((w) => [
      w.label,
      ...ours.map((c) => {
        const x = sum.perRequest[w.id]?.[c.id];
        if (!x) return "–";
        const parts = [x.handoffs === null ? "?" : fmtNum(x.handoffs)];
        if (anyEnters) parts.push(x.enters === null ? "–" : fmtNum(x.enters), x.cqesPerEnter === null ? "–" : fmtNum(x.cqesPerEnter));
        if (anyNative) parts.push(x.native === null ? "–" : `${Math.round(100 * x.native)} %`);
        return parts.join(" · ");
      }),
    ]);
    out.push(table(["Workload", ...ours.map((c) => c.label)], prows));
    out.push("");
  }

  // batching and CPU per workload
  if (fuse.length) {
    out.push(`Per workload: requests per wake-up · CQEs per wake-up (uring) and daemon CPU (% of one CPU, median over rounds).`);
    out.push("");
    const brows = r.workloads.map((w) => [
      w.label,
      ...fuse.map((c) => {
        const s = sumStats(r, c.id, w.id);
        const cpu = r.samples.filter((x) => x.config === c.id && x.workload === w.id && x.daemonCpuS !== null).map((x) => (100 * x.daemonCpuS!) / x.seconds);
        if (!s && !cpu.length) return "–";
        const b = s ? (c.transport === "uring" ? `${fmtNum(per(s.requests, s.wakeups))} · ${fmtNum(per(s.cqes, s.wakeups))}` : fmtNum(per(s.requests, s.wakeups))) : c.kind === "libfuse" ? "–" : "?";
        return `${b} · ${cpu.length ? `${Math.round(median(cpu))} %` : "?"}`;
      }),
    ]);
    out.push(table(["Workload", ...fuse.map((c) => c.label)], brows));
    out.push("");
  }

  const skipped = r.configs.filter((c) => !c.available);
  const notes = r.configs.filter((c) => c.notes.length);
  if (skipped.length || notes.length || r.warnings.length || r.notes.length) {
    for (const n of r.notes) out.push(`- **note:** ${n}`);
    for (const c of skipped) out.push(`- **${c.label}: skipped** — ${c.reason}`);
    for (const c of notes) for (const n of c.notes) out.push(`- ${c.label}: ${n}`);
    for (const w of r.warnings) out.push(`- warning: ${w}`);
    out.push("");
  }
  return out.join("\n");
}

// ---- SVG ----------------------------------------------------------------------------------------

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * Grouped bars: one group per metric, one bar per FUSE configuration, height = performance
 * relative to raw tmpfs on a log scale (1 = raw, drawn as a line), min–max whiskers, the ratio
 * written above each bar, the absolute median in the tooltip.
 */
export function svg(r: Results): string {
  const cfgs = ran(r).filter((c) => c.id !== "raw");
  const hasRaw = ran(r).some((c) => c.id === "raw");
  const metrics = allMetrics(r).filter((m) => cfgs.some((c) => cell(r, m.id, c.id)));
  const ratio = (m: Metric, x: number, base: number) => (m.higherIsBetter ? x / base : base / x);
  // reference per metric: raw median, else the best configuration
  const refOf = (m: Metric) => {
    if (hasRaw) {
      const c = cell(r, m.id, "raw");
      if (c) return c.median;
    }
    const meds = cfgs.map((c) => cell(r, m.id, c.id)?.median).filter((x): x is number => !!x);
    return m.higherIsBetter ? Math.max(...meds) : Math.min(...meds);
  };
  let lo = 1, hi = 1;
  for (const m of metrics) {
    const ref = refOf(m);
    for (const c of cfgs) {
      const x = cell(r, m.id, c.id);
      if (!x) continue;
      for (const v of [x.min, x.max, x.median]) {
        const q = ratio(m, v, ref);
        if (q > 0 && Number.isFinite(q)) {
          lo = Math.min(lo, q);
          hi = Math.max(hi, q);
        }
      }
    }
  }
  const dLo = Math.floor(Math.log10(lo));
  const dHi = Math.max(Math.log10(hi) + 0.25, dLo + 1); // headroom for the labels above the bars
  const barW = 14, gap = 22, left = 64, top = 70, plotH = 360, bottom = 170;
  // a group has a bar for each configuration that ran the metric (metadata-only and burn
  // configurations appear only in their own groups)
  const groupCfgs = metrics.map((m) => cfgs.filter((c) => cell(r, m.id, c.id)));
  const groupX: number[] = [];
  let gxNext = left + 10;
  for (const g of groupCfgs) {
    groupX.push(gxNext);
    gxNext += g.length * barW + gap;
  }
  const width = Math.max(720, gxNext + 20);
  const height = top + plotH + bottom;
  const y = (q: number) => top + plotH - ((Math.log10(q) - dLo) / (dHi - dLo)) * plotH;
  const o: string[] = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`);
  o.push(`<rect width="${width}" height="${height}" fill="#fff"/>`);
  o.push(`<text x="${left}" y="22" font-size="15" font-weight="bold">${esc(`fuse-uring benchmark — performance relative to ${hasRaw ? "raw tmpfs" : "the best configuration"} (log scale, higher is better)`)}</text>`);
  o.push(`<text x="${left}" y="40" fill="#444">${esc(`${r.meta.startedAt} · ${r.meta.mode} · median of ${r.meta.reps} interleaved rounds, whiskers min–max · latency rows use inverse ratio · bar label = ratio to ${hasRaw ? "raw" : "best"}`)}</text>`);
  // legend
  let lx = left;
  for (const c of cfgs) {
    o.push(`<rect x="${lx}" y="50" width="11" height="11" fill="${c.colour}"/><text x="${lx + 15}" y="60">${esc(c.label)}</text>`);
    lx += 30 + c.label.length * 6.2;
  }
  // grid
  for (let d = dLo; d <= Math.floor(dHi); d++) {
    for (const k of [1, 2, 5]) {
      const q = k * 10 ** d;
      if (Math.log10(q) > dHi + 1e-9) continue;
      const yy = y(q).toFixed(1);
      o.push(`<line x1="${left}" x2="${width - 10}" y1="${yy}" y2="${yy}" stroke="${k === 1 ? "#ccc" : "#eee"}"/>`);
      if (k === 1 || dHi - dLo <= 2) o.push(`<text x="${left - 6}" y="${Number(yy) + 4}" text-anchor="end" fill="#555">${q >= 1 ? q : q.toPrecision(1)}×</text>`);
    }
  }
  const y1 = y(1).toFixed(1);
  o.push(`<line x1="${left}" x2="${width - 10}" y1="${y1}" y2="${y1}" stroke="#222" stroke-dasharray="5,3"/>`);
  o.push(`<text x="${width - 12}" y="${Number(y1) - 4}" text-anchor="end" fill="#222">${hasRaw ? "raw tmpfs = 1×" : "best = 1×"}</text>`);
  metrics.forEach((m, gi) => {
    const gx = groupX[gi]!;
    const groupW = groupCfgs[gi]!.length * barW;
    const ref = refOf(m);
    groupCfgs[gi]!.forEach((c, ci) => {
      const x = cell(r, m.id, c.id);
      if (!x) return;
      const bx = gx + ci * barW;
      const q = ratio(m, x.median, ref);
      const base = y(10 ** dLo);
      const by = Math.min(y(q), base);
      o.push(`<rect x="${bx}" y="${by.toFixed(1)}" width="${barW - 2}" height="${Math.max(0.5, base - by).toFixed(1)}" fill="${c.colour}"><title>${esc(`${c.label} — ${m.label}: ${fmtNum(x.median)} ${m.unit} [${fmtNum(x.min)}–${fmtNum(x.max)}], ${fmtRatio(q)} of ${hasRaw ? "raw" : "best"}`)}</title></rect>`);
      const qa = ratio(m, x.min, ref), qb = ratio(m, x.max, ref);
      const cx = bx + (barW - 2) / 2;
      o.push(`<line x1="${cx}" x2="${cx}" y1="${y(Math.max(qa, qb)).toFixed(1)}" y2="${y(Math.min(qa, qb)).toFixed(1)}" stroke="#000" stroke-width="1"/>`);
      const ty = Math.min(y(Math.max(qa, qb)), by) - 3;
      o.push(`<text transform="translate(${cx + 3.5},${ty.toFixed(1)}) rotate(-90)" font-size="9" fill="#222">${esc(fmtRatio(q))}</text>`);
    });
    const lxg = gx + groupW / 2;
    o.push(
      `<text transform="translate(${lxg},${top + plotH + 12}) rotate(-40)" text-anchor="end" fill="#222"><tspan x="0">${esc(m.label)}</tspan>` +
        `<tspan x="0" dy="12" fill="#777" font-size="9">${esc(`${hasRaw && cell(r, m.id, "raw") ? "raw" : "best"} ${fmtNum(ref)} ${m.unit}`)}</tspan></text>`,
    );
  });
  o.push(`<line x1="${left}" x2="${left}" y1="${top}" y2="${top + plotH}" stroke="#888"/>`);
  o.push(`</svg>`);
  return o.join("\n") + "\n";
}
