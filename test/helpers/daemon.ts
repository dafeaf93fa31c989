// Starting and stopping daemons (the CLI or a fixture script) as child processes.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, CLI, REPO, timeLimit, type Transport } from "./env.ts";
import { describeCmd, sleep } from "./run.ts";
import {
  abortConnection,
  connectionIdOf,
  ensureFusectl,
  forceUnmount,
  fuseMountAt,
  isMounted,
  makeMountpoint,
  noteConnection,
} from "./mounts.ts";

export const READY_PREFIX = "fuse-uring: mounted";

export interface Daemon {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  mnt: string;
  /** Transport named in the ready line. */
  transport: Transport;
  /** The ready line itself. */
  readyLine: string;
  /** fusectl connection id of the mount. */
  connId: number;
  cmd: string;
  /** Everything the daemon wrote to stderr so far. */
  stderr(): string;
  stdout(): string;
  readonly exited: boolean;
  /** Exit code (null if killed by a signal), once exited. */
  readonly exitCode: number | null;
  /** Resolves with the exit code (null = signal) when the process ends. */
  waitExit(timeoutMs?: number): Promise<{ exited: boolean; code: number | null; signal: string | null }>;
  /**
   * SIGTERM (or `signal`) and wait for exit. If it does not exit in `timeoutMs`, the watchdog
   * aborts the connection, SIGKILLs it, unmounts, and this throws.
   */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  /** Last resort: abort the connection, SIGKILL, lazy unmount. Never throws. */
  kill(): Promise<void>;
}

export interface StartOptions {
  /** Use this mountpoint instead of a fresh one. */
  mnt?: string;
  /** argv builder: default `[BUN, CLI, "mount", "--memfs", mnt, ...args]`. */
  command?: (mnt: string, args: string[]) => string[];
  /** Prepended to the argv (e.g. ["taskset", "-c", "0"] or ["runuser", "-u", user, "--"]). */
  prefix?: string[];
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Milliseconds to wait for the ready line (default 15 s). */
  readyTimeoutMs?: number;
  /** Expect a FUSE mount at mnt after the ready line (default true). */
  checkMount?: boolean;
}

const live = new Set<Daemon>();

/** argv for the CLI daemon. */
export function cliMountCommand(mnt: string, args: string[]): string[] {
  return [BUN, CLI, "mount", "--memfs", mnt, ...args];
}

/** argv for a fixture script (test/fixtures/NAME.ts MNT args…). */
export function fixtureCommand(fixture: string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, `${REPO}/test/fixtures/${fixture}`, mnt, ...args];
}

/**
 * Start options for a one-file script in `dir` that mounts `class NAME extends PassthroughFS {
 * BODY }` over `src` (PassthroughFS, FuseError and the handler types are imported for the body).
 * Tests of what a subclass changes (an overridden handler loses a native path) use it.
 */
export function passthroughSubclass(dir: string, name: string, body: string, src: string): StartOptions {
  const script = join(dir, `${name}.ts`);
  writeFileSync(script, `
import { PassthroughFS } from ${JSON.stringify(`${REPO}/lib/fs/passthrough.ts`)};
import { FuseError } from ${JSON.stringify(`${REPO}/lib/fs/errors.ts`)};
import type { DirFiller, RequestContext } from ${JSON.stringify(`${REPO}/lib/fs/types.ts`)};
class ${name} extends PassthroughFS {
${body}
}
export default () => new ${name}(process.env.PT_SRC!);
`);
  return { command: (mnt, args) => [BUN, CLI, "mount", script, mnt, ...args], env: { PT_SRC: src } };
}

export class DaemonStartError extends Error {}

/**
 * FUSE_TEST_WORKERS=N: every io_uring mount gets `--workers N` (right after `--transport uring`,
 * so it stays before a script's `--`). scripts/test.sh's second pass sets 1: the default
 * (`--workers auto`: a copy per CPU for memfs, the passthrough, replicable scripts) runs in the
 * first pass, one thread's engine in the second. A test about one mode passes `--workers` itself.
 */
export function withTestWorkers(args: string[]): string[] {
  const n = process.env.FUSE_TEST_WORKERS;
  if (!n || Number(n) < 1 || args.includes("--workers")) return args;
  const t = args.indexOf("--transport");
  if (t < 0 || args[t + 1] !== "uring") return args;
  return [...args.slice(0, t + 2), "--workers", n, ...args.slice(t + 2)];
}

/**
 * Spawn a daemon and wait for its `fuse-uring: mounted … transport=X` line on stderr.
 * Rejects (after cleaning up) if it exits first or does not become ready in time; the message
 * contains the daemon's stderr.
 */
export async function startDaemon(args: string[] = [], opts: StartOptions = {}): Promise<Daemon> {
  ensureFusectl();
  const mnt = opts.mnt ?? makeMountpoint();
  const argv = [...(opts.prefix ?? []), ...(opts.command ?? cliMountCommand)(mnt, withTestWorkers(args))];
  const cmd = describeCmd(argv);
  const proc = Bun.spawn(argv, {
    cwd: opts.cwd ?? REPO,
    env: { ...process.env, ...opts.env } as Record<string, string>,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true, // own process group: kill() takes wrappers (runuser, taskset) and children along
  });
  const killGroup = () => {
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {
      try {
        proc.kill("SIGKILL");
      } catch {}
    }
  };
  let err = "";
  let out = "";
  let exited = false;
  let exitCode: number | null = null;
  let readyLine: string | undefined;
  let onReady: (() => void) | undefined;
  const MAX = 4 * 1024 * 1024;
  const keep = (s: string) => (s.length > MAX ? s.slice(0, 64 * 1024) + "\n[…truncated…]\n" + s.slice(-(MAX / 2)) : s);

  // Drain both pipes for the daemon's whole life (a full pipe would block its JS thread).
  (async () => {
    const dec = new TextDecoder();
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) {
      err = keep(err + dec.decode(chunk, { stream: true }));
      if (!readyLine) {
        const line = err.split("\n").find((l) => l.startsWith(READY_PREFIX) && /\btransport=(uring|classic)\b/.test(l));
        if (line && err.includes(line + "\n")) {
          readyLine = line;
          onReady?.();
        }
      }
    }
  })().catch(() => {});
  (async () => {
    const dec = new TextDecoder();
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out = keep(out + dec.decode(chunk, { stream: true }));
  })().catch(() => {});
  const exitedP = proc.exited.then((c) => {
    exited = true;
    exitCode = proc.signalCode ? null : c;
    onReady?.();
    return c;
  });

  const readyTimeoutMs = timeLimit(opts.readyTimeoutMs ?? 15_000);
  const deadline = Date.now() + readyTimeoutMs;
  while (!readyLine && !exited && Date.now() < deadline) {
    await new Promise<void>((resolve) => {
      onReady = resolve;
      setTimeout(resolve, 100);
    });
  }
  onReady = undefined;

  const fail = async (why: string): Promise<never> => {
    if (!exited) {
      const m = fuseMountAt(mnt);
      if (m) abortConnection(connectionIdOf(m));
      killGroup();
      await Promise.race([exitedP, sleep(5000)]);
    }
    const cleaned = forceUnmount(mnt);
    await sleep(50); // let the stderr reader catch the last bytes
    throw new DaemonStartError(
      `${why}\n$ ${cmd}\nexit: ${exited ? (exitCode ?? `signal ${proc.signalCode}`) : "still running (killed)"}` +
        (cleaned.length ? `\ncleanup: ${cleaned.join(", ")}` : "") +
        `\n--- daemon stderr ---\n${err.slice(-8000)}\n--- daemon stdout ---\n${out.slice(-2000)}`,
    );
  };

  if (!readyLine) {
    if (exited) return fail(`daemon exited before printing "${READY_PREFIX} … transport=…"`);
    return fail(`daemon did not print "${READY_PREFIX} … transport=…" within ${readyTimeoutMs} ms`);
  }
  const transport = /\btransport=(uring|classic)\b/.exec(readyLine)![1] as Transport;
  let connId = -1;
  if (opts.checkMount !== false) {
    const id = noteConnection(mnt);
    if (id === undefined) return fail(`daemon printed "${readyLine}" but there is no FUSE mount at ${mnt} in /proc/self/mountinfo`);
    connId = id;
  }

  const d: Daemon = {
    proc,
    mnt,
    transport,
    readyLine,
    connId,
    cmd,
    stderr: () => err,
    stdout: () => out,
    get exited() {
      return exited;
    },
    get exitCode() {
      return exitCode;
    },
    async waitExit(timeoutMs = 10_000) {
      await Promise.race([exitedP, sleep(timeLimit(timeoutMs))]);
      return { exited, code: exitCode, signal: proc.signalCode ? String(proc.signalCode) : null };
    },
    async stop(signal = "SIGTERM", timeoutMs = 10_000) {
      if (!exited) proc.kill(signal);
      const r = await d.waitExit(timeoutMs);
      if (!r.exited) {
        await d.kill();
        throw new Error(`daemon did not exit within ${timeoutMs} ms after ${signal} (watchdog aborted it)\n$ ${cmd}\n--- stderr ---\n${err.slice(-6000)}`);
      }
      live.delete(d);
      return r.code;
    },
    async kill() {
      const m = fuseMountAt(mnt);
      if (m) abortConnection(connectionIdOf(m));
      if (!exited) {
        killGroup();
        await Promise.race([exitedP, sleep(5000)]);
      }
      forceUnmount(mnt);
      live.delete(d);
    },
  };
  live.add(d);
  return d;
}

/** Kill every daemon still alive and unmount its mount (used by cleanup hooks). */
export async function killAllDaemons(spare: Set<string> = new Set()): Promise<string[]> {
  const killed: string[] = [];
  for (const d of [...live]) {
    if (spare.has(d.mnt)) continue;
    if (!d.exited || isMounted(d.mnt)) killed.push(`${d.cmd} (pid ${d.proc.pid})`);
    await d.kill();
  }
  return killed;
}

export function liveDaemons(): Daemon[] {
  return [...live].filter((d) => !d.exited);
}

export interface Stats {
  transport: Transport;
  ringRequests: number;
  devRequests: number;
  wakeups: number;
  cqes: number;
  submits: number;
  inflightMax: number;
  pinnedBytes: number;
  [k: string]: unknown;
}

/** Read a --stats-file; retries while it is missing or half-written. */
export async function readStats(path: string, opts: { timeoutMs?: number; until?: (s: Stats) => boolean } = {}): Promise<Stats> {
  const deadline = Date.now() + timeLimit(opts.timeoutMs ?? 5000);
  let last: Stats | undefined;
  let lastErr = "";
  for (;;) {
    try {
      last = JSON.parse(readFileSync(path, "utf8")) as Stats;
      if (!opts.until || opts.until(last)) return last;
    } catch (e) {
      lastErr = String(e);
    }
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  if (last) return last; // caller's assertions report the values
  throw new Error(`stats file ${path} never became readable JSON: ${lastErr}`);
}
