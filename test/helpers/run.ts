// Spawning client processes with a hard timeout. A client blocked on a FUSE request that is never
// answered sits in D state and ignores SIGKILL, so on timeout we kill it and, if it still does not
// go away, abort the FUSE connections of our mounts (the watchdog) so it errors out.
import { clientCgroup, inClientCgroup } from "./cgroup.ts";
import { abortAllMounts, stuckProcesses } from "./mounts.ts";
import { PYTHON, FSOPS, REPO, timeLimit } from "./env.ts";

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** The command line, for failure messages. */
  cmd: string;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Milliseconds before the child is killed (default 30 s; × FUSE_URING_TIME_SCALE). */
  timeoutMs?: number;
  /** Data written to the child's stdin (default: no stdin). */
  stdin?: string | Uint8Array;
  /** Run it in the test clients' memory cgroup (default true; cgroup.ts). */
  clientCgroup?: boolean;
}

export function describeCmd(cmd: string[]): string {
  return cmd.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

async function drain(stream: ReadableStream<Uint8Array> | null | undefined): Promise<string> {
  if (!stream) return "";
  return await new Response(stream).text();
}

export interface Background {
  proc: Bun.Subprocess<"pipe" | "ignore", "pipe", "pipe">;
  /** Resolves when the child exited (after the timeout kill if need be). */
  done: Promise<RunResult>;
  /** True once the child has exited. */
  readonly exited: boolean;
  kill(signal?: NodeJS.Signals | number): void;
}

/** Start a child; `done` resolves with its result. Never rejects. */
export function spawnBg(cmd: string[], opts: RunOptions = {}): Background {
  const timeoutMs = timeLimit(opts.timeoutMs ?? 30_000);
  const proc = Bun.spawn(opts.clientCgroup === false ? cmd : inClientCgroup(cmd), {
    cwd: opts.cwd ?? REPO,
    env: { ...process.env, ...opts.env } as Record<string, string>,
    stdin: opts.stdin !== undefined ? "pipe" : "ignore",
    stdout: "pipe",
    stderr: "pipe",
    // Own process group, so a timeout kills pipelines and grandchildren too.
    detached: true,
  });
  const killGroup = (signal: NodeJS.Signals | number) => {
    try {
      process.kill(-proc.pid, signal);
    } catch {
      try {
        proc.kill(signal);
      } catch {}
    }
  };
  if (opts.stdin !== undefined) {
    const sink = proc.stdin as import("bun").FileSink;
    sink.write(opts.stdin);
    sink.end();
  }
  let timedOut = false;
  let exited = false;
  let escalate: ReturnType<typeof setTimeout> | undefined;
  let giveUp: ReturnType<typeof setTimeout> | undefined;
  let abandon: (r: RunResult) => void = () => {};
  const abandoned = new Promise<RunResult>((res) => (abandon = res));
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup("SIGKILL");
    // Still there after 2 s: it is stuck on an unanswered FUSE request. Abort our connections.
    escalate = setTimeout(() => {
      if (!exited) abortAllMounts(`client timed out and ignores SIGKILL: ${describeCmd(cmd)}`);
    }, 2000);
    // Still there 10 s later: it is stuck for good (D state outside any connection we can
    // abort). Stop waiting for it, so the test fails instead of the suite hanging on it.
    giveUp = setTimeout(() => {
      if (!exited) abandon({ code: null, signal: "SIGKILL", stdout: "", stderr: `child ${proc.pid} did not exit after SIGKILL and a connection abort (D state?)`, timedOut, cmd: describeCmd(cmd) });
    }, 12_000);
  }, timeoutMs);
  const finished = (async () => {
    const [stdout, stderr] = await Promise.all([drain(proc.stdout), drain(proc.stderr)]);
    const code = await proc.exited;
    exited = true;
    clearTimeout(timer);
    if (escalate) clearTimeout(escalate);
    if (giveUp) clearTimeout(giveUp);
    return { code: proc.signalCode ? null : code, signal: proc.signalCode ? String(proc.signalCode) : null, stdout, stderr, timedOut, cmd: describeCmd(cmd) };
  })();
  const done = Promise.race([finished, abandoned]);
  return {
    proc,
    done,
    get exited() {
      return exited;
    },
    kill(signal = "SIGKILL") {
      killGroup(signal);
    },
  };
}

/** Run a command to completion. Never rejects; check `.code`. */
export function run(cmd: string[], opts: RunOptions = {}): Promise<RunResult> {
  return spawnBg(cmd, opts).done;
}

/** `sh -c script`; positional parameters $1… are `args`. */
export function sh(script: string, args: string[] = [], opts: RunOptions = {}): Promise<RunResult> {
  return run(["sh", "-c", script, "sh", ...args], opts);
}

/** Human-readable description of a failed result, for assertion messages. */
export function fmt(r: RunResult): string {
  return `$ ${r.cmd}\n→ exit ${r.code}${r.signal ? ` signal ${r.signal}` : ""}${r.timedOut ? " (TIMED OUT, killed)" : ""}\nstdout: ${r.stdout.slice(0, 2000)}\nstderr: ${r.stderr.slice(0, 2000)}`;
}

/** Run and require exit 0; returns stdout. */
export async function ok(cmd: string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(cmd, opts);
  if (r.code !== 0) throw new Error(`command failed:\n${fmt(r)}`);
  return r.stdout;
}

/** `sh -c` and require exit 0; returns stdout. */
export async function shOk(script: string, args: string[] = [], opts: RunOptions = {}): Promise<string> {
  const r = await sh(script, args, opts);
  if (r.code !== 0) throw new Error(`command failed:\n${fmt(r)}`);
  return r.stdout;
}

export interface FsOpResult {
  ok: boolean;
  errno?: number;
  code?: string;
  [key: string]: unknown;
}

/**
 * Run one operation of test/fixtures/fsops.py in a python3 child. Result: `{ok: true, …}` or
 * `{ok: false, errno, code}` when the syscall raised OSError.
 */
export async function fsop(op: string, ...args: (string | number)[]): Promise<FsOpResult> {
  const r = await run([PYTHON, FSOPS, op, ...args.map(String)], { timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(`fsops.py ${op} crashed:\n${fmt(r)}`);
  try {
    return JSON.parse(r.stdout.trim().split("\n").pop()!);
  } catch {
    throw new Error(`fsops.py ${op}: unparsable output:\n${fmt(r)}`);
  }
}

/** fsop that must succeed; returns its result. */
export async function fsopOk(op: string, ...args: (string | number)[]): Promise<FsOpResult> {
  const r = await fsop(op, ...args);
  if (!r.ok) throw new Error(`fsops.py ${op} ${args.join(" ")} failed: ${r.code} (errno ${r.errno})`);
  return r;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** sha256 hex of bytes. */
export function sha256(data: Uint8Array | string): string {
  return new Bun.CryptoHasher("sha256").update(data).digest("hex");
}

/** sha256 of a file, computed by `sha256sum` in a child process (so the read goes through the kernel from another process). */
export async function sha256sum(path: string, opts: RunOptions = {}): Promise<string> {
  const r = await run(["sha256sum", path], { timeoutMs: 60_000, ...opts });
  if (r.code !== 0) throw new Error(`sha256sum failed:\n${fmt(r)}`);
  return r.stdout.split(/\s+/)[0]!;
}

/** Set once a cache drop hung: every later one would hang behind the same superblock. */
let dropCachesWedged: string | null = null;

/**
 * Drop the caches test clients built up (page cache, dentries, inodes) so the next access really
 * asks the daemon, and the kernel FORGETs what it evicts (root only). With the clients' memory
 * cgroup (cgroup.ts) that is its memory.force_empty, which touches only their caches and skips
 * a superblock whose lock is held. Without it, /proc/sys/vm/drop_caches: that walks every
 * superblock, so one FUSE connection stuck in teardown blocks it for good; after the first such
 * hang later calls fail at once, so the suite reports failures instead of spending a test
 * timeout on each.
 */
export async function dropCaches(): Promise<void> {
  const cg = clientCgroup();
  if (cg) {
    const r = await sh('echo 0 > "$1"', [cg.forceEmpty], { timeoutMs: 30_000, clientCgroup: false });
    if (r.code !== 0) throw new Error(`force_empty of the clients' cgroup failed:\n${fmt(r)}`);
    return;
  }
  if (dropCachesWedged) throw new Error(`drop_caches is wedged on this machine since an earlier call: ${dropCachesWedged}`);
  const r = await sh("echo 3 > /proc/sys/vm/drop_caches", [], { timeoutMs: 30_000 });
  if (r.timedOut) dropCachesWedged = `timed out (${stuckProcesses() || "no process in D state found"})`;
  if (r.code !== 0) throw new Error(`drop_caches failed:\n${fmt(r)}`);
}
