// Test clients (every child spawnBg starts: coreutils, python, fio) run in a memory cgroup of
// their own, so dropCaches() can drop exactly the caches they built up — the page cache of the
// files they read, the dentries and inodes of their lookups (whose eviction sends FORGET) — with
// the cgroup's memory.force_empty. /proc/sys/vm/drop_caches instead walks every superblock on
// the machine and waits for each one's lock: a single FUSE connection stuck in teardown
// anywhere (another test run's, another program's) blocks it, and every later call, forever
// (docs/KERNEL.md §5, unmounting from the owner thread). Daemons are started outside it.
// cgroup v1 memory controller only; elsewhere dropCaches() falls back to drop_caches.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from "node:fs";

export interface ClientCgroup {
  dir: string;
  procs: string;
  forceEmpty: string;
}

let cached: ClientCgroup | null | undefined;
const PREFIX = "fuse-uring-test-clients-";

/**
 * Earlier runs' cgroups (bun test exits without running "exit" handlers): only those whose test
 * process is gone and that hold no process — another run's cgroup is empty between its tests.
 */
function removeStale(parent: string): void {
  try {
    for (const name of readdirSync(parent)) {
      if (!name.startsWith(PREFIX) || existsSync(`/proc/${name.slice(PREFIX.length)}`)) continue;
      try {
        if (readFileSync(`${parent}/${name}/cgroup.procs`, "utf8").trim() === "") rmdirSync(`${parent}/${name}`);
      } catch {}
    }
  } catch {}
}

/** The clients' memory cgroup, created on first use (root, cgroup v1 memory), else null. */
export function clientCgroup(): ClientCgroup | null {
  if (cached !== undefined) return cached;
  cached = null;
  if (process.getuid?.() !== 0 || process.env.FUSE_TEST_NO_CGROUP === "1") return cached;
  try {
    const line = readFileSync("/proc/self/cgroup", "utf8").split("\n").find((l) => /^\d+:memory:/.test(l));
    if (!line) return cached;
    const own = line.slice(line.indexOf(":memory:") + ":memory:".length).replace(/\/$/, "");
    const parent = `/sys/fs/cgroup/memory${own}`;
    removeStale(parent);
    const dir = `${parent}/${PREFIX}${process.pid}`;
    if (!existsSync(dir)) mkdirSync(dir);
    const cg = { dir, procs: `${dir}/cgroup.procs`, forceEmpty: `${dir}/memory.force_empty` };
    if (!existsSync(cg.procs) || !existsSync(cg.forceEmpty)) return cached;
    process.on("exit", () => {
      try {
        rmdirSync(dir); // fails while a stuck client is still in it: then it stays
      } catch {}
    });
    cached = cg;
  } catch {
    cached = null;
  }
  return cached;
}

/** `cmd` started inside the clients' cgroup (same pid: the shell execs it). */
export function inClientCgroup(cmd: string[]): string[] {
  const cg = clientCgroup();
  // Joining is best effort: the command runs even if the cgroup is gone (its caches then stay).
  return cg ? ["sh", "-c", 'echo $$ > "$0" 2>/dev/null; exec "$@"', cg.procs, ...cmd] : cmd;
}
