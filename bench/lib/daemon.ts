// One daemon under the harness's control: the fuse-uring CLI (`mount … --stats-file F`), or
// libfuse's passthrough_hp (`--foreground … SRC MNT`; no stats file, ready = mounted).

import { readFileSync } from "node:fs";
import { BenchError, abortFuseAt, mountAt, mtimeMs, run, sleep, statusKiB, treeCpuSeconds, uringFds } from "./util.ts";

/** How late a worker thread's counters can reach the stats file (its 500 ms post period + margin). */
const WORKER_STATS_LAG_MS = 600;

export interface DaemonStats {
  transport: string;
  transportReason?: string;
  ringRequests: number;
  devRequests: number;
  wakeups: number;
  cqes: number;
  submits: number;
  inflightMax: number;
  pinnedBytes: number;
  fixedIo: number;
  errors: number;
  replies?: number;
  forgets?: number;
  interrupts?: number;
  uptimeMs?: number;
  [k: string]: unknown;
}

export interface DaemonSpec {
  id: string;
  /** filesystem arguments: ["--memfs"], ["--passthrough", SRC] or [SCRIPT] */
  fsArgs: string[];
  /** arguments after `--` (a script filesystem's own arguments) */
  scriptArgs?: string[];
  /** run libfuse's passthrough_hp instead of the CLI: the binary, its mode arguments, SRC */
  libfuse?: { binary: string; args: string[]; source: string; env?: Record<string, string> };
  transport: "uring" | "classic";
  mountpoint: string;
  statsFile: string;
  queueDepth: number;
  maxWrite: number;
  extraArgs?: string[];
  /** run the daemon with RLIMIT_NOFILE raised to this (soft and hard), through prlimit(1) */
  nofile?: number;
  /** extra environment of the fuse-uring daemon (e.g. FUSE_URING_NO_PIN=1) */
  env?: Record<string, string>;
}

export interface StopResult {
  exitCode: number | null;
  forced: boolean;
  finalStats: DaemonStats | null;
  leftoverUnmounted: boolean;
}

const READY = "fuse-uring: mounted ";

export class Daemon {
  readonly proc: ReturnType<typeof Bun.spawn>;
  readonly pid: number;
  readonly cmd: string[];
  private all: string[] = [];
  private readyWaiters: Array<(line: string | null) => void> = [];
  readyLine: string | null = null;
  private stopped = false;

  constructor(readonly spec: DaemonSpec, repo: string, bun: string) {
    const prlimit = spec.nofile ? ["prlimit", `--nofile=${spec.nofile}:${spec.nofile}`] : [];
    const lf = spec.libfuse;
    this.cmd = lf
      ? [...prlimit, lf.binary, "--foreground", ...lf.args, lf.source, spec.mountpoint]
      : [
        ...prlimit,
        bun, "bin/fuse-uring.ts", "mount", ...spec.fsArgs, spec.mountpoint,
        "--transport", spec.transport,
        // 0: the CLI's own default (ring sizing)
        ...(spec.queueDepth ? ["--queue-depth", String(spec.queueDepth)] : []),
        ...(spec.maxWrite ? ["--max-write", String(spec.maxWrite)] : []),
        "--stats-file", spec.statsFile,
        ...(spec.extraArgs ?? []),
        ...(spec.scriptArgs?.length ? ["--", ...spec.scriptArgs] : []),
      ];
    const extra = lf ? lf.env : spec.env;
    const env = extra ? { ...process.env, ...extra } : undefined;
    // passthrough_hp prints nothing when mounted: its stdout goes to the same log as stderr
    this.proc = Bun.spawn({ cmd: this.cmd, cwd: repo, env, stdin: "ignore", stdout: lf ? "pipe" : "ignore", stderr: "pipe" });
    this.pid = this.proc.pid;
    void this.pump(this.proc.stderr as ReadableStream<Uint8Array>);
    if (lf) void this.pump(this.proc.stdout as ReadableStream<Uint8Array>);
    void this.proc.exited.then(() => this.wake(null));
  }

  get isLibfuse(): boolean {
    return !!this.spec.libfuse;
  }

  private async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    const dec = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of stream) {
        buf += dec.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          this.onLine(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      }
    } catch {}
    if (buf) this.onLine(buf);
  }

  private onLine(line: string): void {
    if (this.all.length < 2000) this.all.push(line);
    else this.all[this.all.length - 1] = line;
    if (line.startsWith(READY) && !this.readyLine) {
      this.readyLine = line;
      this.wake(line);
    }
  }

  private wake(v: string | null): void {
    const w = this.readyWaiters;
    this.readyWaiters = [];
    for (const f of w) f(v);
  }

  /** The daemon's own error lines plus the last few lines of its stderr, indented. */
  stderrTail(n = 8): string {
    const pick = new Set<number>();
    this.all.forEach((l, i) => {
      if (/^fuse-uring:|error|panic|Segmentation/i.test(l) && pick.size < 6) pick.add(i);
    });
    for (let i = Math.max(0, this.all.length - n); i < this.all.length; i++) pick.add(i);
    return [...pick].sort((a, b) => a - b).map((i) => `    | ${this.all[i]}`).join("\n");
  }

  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode == null;
  }

  /** Wait for the "mounted" line and check the mount table and the reported transport. */
  async waitReady(timeoutMs: number): Promise<void> {
    const what = `${this.spec.id} (${this.cmd.join(" ")})`;
    if (this.isLibfuse) return this.waitMounted(timeoutMs, what);
    let line = this.readyLine;
    if (!line) {
      line = await new Promise<string | null>((res) => {
        const t = setTimeout(() => res(null), timeoutMs);
        this.readyWaiters.push((v) => {
          clearTimeout(t);
          res(v);
        });
        if (!this.alive) res(null);
      });
    }
    if (!line) {
      const why = this.alive ? `no "mounted" line within ${timeoutMs / 1000}s` : `daemon exited (code ${this.proc.exitCode}, signal ${this.proc.signalCode})`;
      throw new BenchError(`mount did not come up: ${what}: ${why}\n${this.stderrTail()}`);
    }
    const m = mountAt(this.spec.mountpoint);
    if (!m || !m.fstype.startsWith("fuse")) {
      throw new BenchError(`mount did not come up: ${what}: ${this.spec.mountpoint} is not a FUSE mount in /proc/self/mountinfo (found ${m ? m.fstype : "nothing"})\n${this.stderrTail()}`);
    }
    const t = line.match(/\(transport=(\w+)/)?.[1];
    if (t !== this.spec.transport) {
      throw new BenchError(`${this.spec.id}: configured --transport ${this.spec.transport} but the daemon reported transport=${t ?? "?"}: ${line}`);
    }
  }

  /** passthrough_hp says nothing when it is ready: wait for its FUSE mount to appear. */
  private async waitMounted(timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (mountAt(this.spec.mountpoint)?.fstype.startsWith("fuse")) return;
      if (!this.alive) throw new BenchError(`mount did not come up: ${what}: daemon exited (code ${this.proc.exitCode}, signal ${this.proc.signalCode})\n${this.stderrTail()}`);
      if (Date.now() > deadline) throw new BenchError(`mount did not come up: ${what}: no FUSE mount at ${this.spec.mountpoint} within ${timeoutMs / 1000}s\n${this.stderrTail()}`);
      await sleep(20);
    }
  }

  /** io_uring instances the daemon holds (libfuse: one ring per queue when io_uring is in use). */
  uringFds(): number {
    return uringFds(this.pid);
  }

  /** Throw unless the daemon runs and its mount is in place. */
  check(context: string): void {
    if (!this.alive) {
      throw new BenchError(`${this.spec.id}: daemon exited ${context} (code ${this.proc.exitCode}, signal ${this.proc.signalCode})\n${this.stderrTail()}`);
    }
    const m = mountAt(this.spec.mountpoint);
    if (!m || !m.fstype.startsWith("fuse")) {
      throw new BenchError(`${this.spec.id}: mount ${this.spec.mountpoint} disappeared ${context}\n${this.stderrTail()}`);
    }
  }

  readStatsFile(): DaemonStats | null {
    for (let i = 0; i < 5; i++) {
      try {
        return JSON.parse(readFileSync(this.spec.statsFile, "utf8")) as DaemonStats;
      } catch {}
    }
    return null;
  }

  /**
   * Counters as of a moment after `afterMs` (wall clock): the daemon rewrites the stats file
   * every second, so wait (bounded) for a write newer than that moment.
   */
  async freshStats(afterMs: number, timeoutMs = 3500): Promise<DaemonStats> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Worker threads post their counters to the main thread every 500 ms (worker-entry.ts):
      // a file written less than that after `afterMs` may still miss the workers' last requests.
      if (mtimeMs(this.spec.statsFile) > afterMs + WORKER_STATS_LAG_MS) {
        const s = this.readStatsFile();
        if (s) return s;
      }
      if (!this.alive) this.check("while waiting for its stats file");
      if (Date.now() > deadline) {
        throw new BenchError(`${this.spec.id}: stats file ${this.spec.statsFile} not refreshed within ${timeoutMs / 1000}s (the CLI writes it every second)`);
      }
      await sleep(40);
    }
  }

  /** CPU of the daemon's process tree (all threads, and any child processes). */
  cpuSeconds(): number | null {
    return treeCpuSeconds(this.pid);
  }

  peakRssKiB(): number | null {
    return statusKiB(this.pid, "VmHWM");
  }

  /** SIGTERM (the CLI unmounts and exits 0); escalate to abort + SIGKILL + umount -l. */
  async stop(graceMs = 10000): Promise<StopResult> {
    if (this.stopped) return { exitCode: this.proc.exitCode, forced: false, finalStats: this.isLibfuse ? null : this.readStatsFile(), leftoverUnmounted: false };
    this.stopped = true;
    let forced = false;
    if (this.alive) {
      this.proc.kill("SIGTERM");
      const done = await Promise.race([this.proc.exited.then(() => true), sleep(graceMs).then(() => false)]);
      if (!done) {
        forced = true;
        abortFuseAt(this.spec.mountpoint);
        this.proc.kill("SIGKILL");
        await Promise.race([this.proc.exited, sleep(5000)]);
      }
    }
    let leftoverUnmounted = false;
    if (mountAt(this.spec.mountpoint)?.fstype.startsWith("fuse")) {
      leftoverUnmounted = true;
      abortFuseAt(this.spec.mountpoint);
      await run(["umount", "-l", this.spec.mountpoint], { timeoutMs: 10000 });
    }
    return { exitCode: this.proc.exitCode, forced, finalStats: this.isLibfuse ? null : this.readStatsFile(), leftoverUnmounted };
  }
}
