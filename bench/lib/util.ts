// Small helpers for the benchmark harness: processes, /proc, mounts, statistics, formatting.

import { readFileSync, readdirSync, readlinkSync, statSync, existsSync, writeFileSync } from "node:fs";

export class BenchError extends Error {}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  seconds: number;
}

/** Run a command to completion with a hard timeout (SIGKILL), capturing both streams. */
export async function run(cmd: string[], opts: { timeoutMs: number; cwd?: string; env?: Record<string, string> }): Promise<RunResult> {
  const t0 = performance.now();
  const env = opts.env ? { ...process.env, ...opts.env } : undefined;
  const p = Bun.spawn({ cmd, cwd: opts.cwd, env, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    p.kill("SIGKILL");
  }, opts.timeoutMs);
  try {
    const [stdout, stderr] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    await p.exited;
    return { code: p.exitCode, signal: p.signalCode == null ? null : String(p.signalCode), stdout, stderr, timedOut, seconds: (performance.now() - t0) / 1000 };
  } finally {
    clearTimeout(timer);
  }
}

export interface MountInfo {
  mountpoint: string;
  fstype: string;
  source: string;
  majorMinor: string;
}

const unescapeMount = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));

export function mounts(): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    if (!line) continue;
    const [pre, post] = line.split(" - ");
    const f = pre!.split(" ");
    const g = (post ?? "").split(" ");
    out.push({ mountpoint: unescapeMount(f[4]!), majorMinor: f[2]!, fstype: g[0] ?? "", source: g[1] ?? "" });
  }
  return out;
}

export function mountAt(path: string): MountInfo | undefined {
  // the last entry wins (stacked mounts)
  return mounts().filter((m) => m.mountpoint === path).pop();
}

/** Lazily unmount everything at or below `root` (deepest first); returns what was unmounted. */
export async function unmountBelow(root: string): Promise<string[]> {
  const found = mounts()
    .map((m) => m.mountpoint)
    .filter((p) => p === root || p.startsWith(root + "/"))
    .sort((a, b) => b.length - a.length);
  for (const p of found) {
    abortFuseAt(p);
    await run(["umount", "-l", p], { timeoutMs: 10000 });
  }
  return found;
}

/** Abort the FUSE connection behind a mount (fusectl), so stuck callers get ENOTCONN. */
export function abortFuseAt(path: string): void {
  const m = mountAt(path);
  if (!m || !m.fstype.startsWith("fuse")) return;
  const minor = m.majorMinor.split(":")[1];
  const abort = `/sys/fs/fuse/connections/${minor}/abort`;
  try {
    if (existsSync(abort)) writeFileSync(abort, "1");
  } catch {}
}

const CLK_TCK = 100; // getconf CLK_TCK on Linux (USER_HZ is 100 on every mainstream arch)

/** utime+stime of a process (all threads), in seconds; null when it is gone. */
export function cpuSeconds(pid: number): number | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    // fields after "(comm)": state=0 … utime=11 stime=12 (stat fields 14 and 15)
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return null;
  }
}

/**
 * utime+stime of a process and all its live descendants (all threads), plus the cutime+cstime of
 * each (children that exited and were waited for), in seconds; null when `pid` is gone.
 * Daemons that fork helpers (or a wrapper that execs) are measured whole.
 */
export function treeCpuSeconds(pid: number): number | null {
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const s = readFileSync(`/proc/${e}/stat`, "utf8");
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
      parent.set(Number(e), Number(f[1]));
      ticks.set(Number(e), Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]));
    } catch {}
  }
  if (!ticks.has(pid)) return null;
  let total = 0;
  for (const [p, t] of ticks) {
    for (let q: number | undefined = p, depth = 0; q && q > 1 && depth < 64; q = parent.get(q), depth++) {
      if (q === pid) {
        total += t;
        break;
      }
    }
  }
  return total / CLK_TCK;
}

/** Bytes a process has read through read-like syscalls (`rchar` of /proc/PID/io); null when gone. */
export function rcharBytes(pid: number): number | null {
  const m = readText(`/proc/${pid}/io`).match(/^rchar:\s+(\d+)/m);
  return m ? Number(m[1]) : null;
}

/** How many io_uring instances a process holds open (readlink of /proc/PID/fd/*). */
export function uringFds(pid: number): number {
  let n = 0;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === "anon_inode:[io_uring]") n++;
      } catch {}
    }
  } catch {}
  return n;
}

/** A field of /proc/PID/status in KiB (VmHWM, VmRSS); null when it is gone. */
export function statusKiB(pid: number, field: string): number | null {
  try {
    const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export function mtimeMs(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

export function readText(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}

// ---- statistics ----------------------------------------------------------------------------

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}

// ---- formatting ----------------------------------------------------------------------------

/** 3 significant digits, thousands separated: 1234567 → "1,230,000", 0.01234 → "0.0123". */
export function fmtNum(x: number): string {
  if (!Number.isFinite(x)) return "–";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(Number(x.toPrecision(3))).toLocaleString("en-US");
  return String(Number(x.toPrecision(3)));
}

export function fmtRatio(x: number): string {
  if (!Number.isFinite(x)) return "–";
  return x >= 10 ? `${x.toFixed(1)}×` : x >= 0.1 ? `${x.toFixed(2)}×` : `${x.toFixed(3)}×`;
}

export function fmtDuration(s: number): string {
  if (!Number.isFinite(s) || s < 0) return "?";
  s = Math.round(s);
  const m = Math.floor(s / 60);
  return m ? `${m}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
