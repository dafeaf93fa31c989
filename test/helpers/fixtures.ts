// bun:test glue: per-test watchdog, cleanup hooks, shared daemons, enable_uring handling.
import { afterAll, afterEach, beforeAll, beforeEach, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { abortAllMounts, cleanupMountpoints, isMounted, registeredMountpoints } from "./mounts.ts";
import { killAllDaemons, startDaemon, type Daemon, type StartOptions } from "./daemon.ts";
import { timeLimit, TIME_SCALE, type Transport } from "./env.ts";

/**
 * `test()` with a watchdog: shortly before `timeoutMs` it aborts the FUSE connections of all our
 * mounts, so clients stuck on a wedged daemon error out (the test then fails) instead of leaving
 * D-state processes behind.
 */
export function fuseTest(name: string, fn: () => Promise<void> | void, limitMs = 60_000): void {
  const timeoutMs = timeLimit(limitMs); // × FUSE_URING_TIME_SCALE (the TCG guest)
  test(
    name,
    async () => {
      let fired: string[] | undefined;
      const timer = setTimeout(() => {
        fired = abortAllMounts(`test "${name}" ran into its ${timeoutMs} ms limit${TIME_SCALE > 1 ? ` (${limitMs} ms × FUSE_URING_TIME_SCALE ${TIME_SCALE})` : ""}`);
      }, Math.max(1000, timeoutMs - 3000));
      try {
        await fn();
      } finally {
        clearTimeout(timer);
      }
      if (fired) throw new Error(`watchdog fired (test took too long): ${fired.join(", ") || "nothing to abort"}`);
    },
    timeoutMs,
  );
}

/**
 * Register hooks that clean up after every test of the enclosing describe: daemons started by
 * the test are killed, their mounts aborted and unmounted. `keep` returns mountpoints to spare
 * (shared daemons).
 */
const sharedMounts = new Set<string>();

async function cleanupNonShared(): Promise<void> {
  await killAllDaemons(sharedMounts);
  const all = new Set<string>();
  for (const m of registeredMountpoints()) if (!sharedMounts.has(m)) all.add(m);
  cleanupMountpoints(all);
}

export function cleanupAfterEach(): void {
  afterEach(cleanupNonShared, 30_000);
  afterAll(cleanupNonShared, 30_000);
}

export interface SharedDaemon {
  /** The current daemon (restarted before a test if the previous one died). */
  readonly d: Daemon;
  readonly mnt: string;
  /** How many times it had to be restarted. */
  readonly restarts: number;
}

/**
 * One daemon for a whole describe block. beforeAll starts it; if a test kills it (a daemon bug),
 * afterEach fails that test with the daemon's stderr and beforeEach starts a new one, so one bug
 * does not cascade into every following test.
 */
export function sharedDaemon(args: string[] | (() => string[]), opts: StartOptions = {}): SharedDaemon {
  let cur: Daemon | undefined;
  let restarts = 0;
  const argv = () => (typeof args === "function" ? args() : args);
  const start = async () => {
    cur = await startDaemon(argv(), opts);
    sharedMounts.add(cur.mnt);
  };
  beforeAll(start, 30_000);
  beforeEach(async () => {
    if (!cur || cur.exited || !isMounted(cur.mnt)) {
      if (cur) {
        await cur.kill();
        sharedMounts.delete(cur.mnt);
        cleanupMountpoints(new Set([cur.mnt]));
      }
      restarts++;
      await start();
    }
  }, 30_000);
  afterEach(async () => {
    if (!cur) return;
    if (cur.exited || !isMounted(cur.mnt)) {
      const d = cur;
      await d.kill();
      throw new Error(
        `daemon died during this test (exit ${d.exitCode ?? `signal ${d.proc.signalCode}`}, mounted: ${isMounted(d.mnt)})\n$ ${d.cmd}\n--- stderr ---\n${d.stderr().slice(-6000)}`,
      );
    }
  });
  afterAll(async () => {
    if (!cur) return;
    const d = cur;
    try {
      if (!d.exited) await d.stop("SIGTERM", 10_000);
    } finally {
      await d.kill();
      sharedMounts.delete(d.mnt);
      cleanupMountpoints(new Set([d.mnt]));
    }
  }, 30_000);
  return {
    get d() {
      if (!cur) throw new Error("shared daemon not started (beforeAll failed?)");
      return cur;
    },
    get mnt() {
      return this.d.mnt;
    },
    get restarts() {
      return restarts;
    },
  };
}

// ---- enable_uring ------------------------------------------------------------------------------

export const ENABLE_URING = "/sys/module/fuse/parameters/enable_uring";

export function getEnableUring(): "Y" | "N" {
  if (!existsSync(ENABLE_URING)) throw new Error(`${ENABLE_URING} does not exist (kernel without FUSE io_uring support?)`);
  return readFileSync(ENABLE_URING, "utf8").trim() === "Y" ? "Y" : "N";
}

export function setEnableUring(v: "Y" | "N"): void {
  writeFileSync(ENABLE_URING, v);
  const now = getEnableUring();
  if (now !== v) throw new Error(`could not set ${ENABLE_URING} to ${v} (reads ${now})`);
}

/** beforeAll: set enable_uring to `v` (remembering the old value); afterAll: restore it. */
export function withEnableUring(v: "Y" | "N"): void {
  let old: "Y" | "N" | undefined;
  beforeAll(() => {
    old = getEnableUring();
    setEnableUring(v);
  });
  afterAll(() => {
    if (old) setEnableUring(old);
  });
}

/** The uring transport needs enable_uring=Y; classic works either way. */
export function transportHooks(transport: Transport): void {
  if (transport === "uring") withEnableUring("Y");
}

/**
 * For a test file: `const scratchDir = scratchDirs("fuse-uring-x-")` gives a fresh directory
 * under one /tmp parent per call; the parent is removed after the file's tests.
 */
export function scratchDirs(prefix: string): () => string {
  const parent = mkdtempSync(`/tmp/${prefix}`);
  afterAll(() => rmSync(parent, { recursive: true, force: true }));
  let n = 0;
  return () => mkdtempSync(join(parent, `${++n}-`));
}
