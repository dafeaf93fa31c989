// Mount bookkeeping and the watchdog. Everything here uses only /proc, /sys and umount2 — never
// the FUSE mount itself — so it works even when a daemon is wedged.
import { chmodSync, existsSync, readFileSync, readdirSync, writeFileSync, rmSync, mkdtempSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { TMP_ROOT, PYTHON } from "./env.ts";
import { fmt, run } from "./run.ts";

export interface MountInfo {
  mountId: number;
  major: number;
  minor: number;
  mountpoint: string;
  options: string;
  fstype: string;
  source: string;
  superOptions: string;
}

function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
}

/** Parse /proc/self/mountinfo. */
export function mountinfo(): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    if (!line) continue;
    const f = line.split(" ");
    const sep = f.indexOf("-", 6);
    const [major, minor] = f[2]!.split(":").map(Number) as [number, number];
    out.push({
      mountId: Number(f[0]),
      major,
      minor,
      mountpoint: unescapeMountinfo(f[4]!),
      options: f[5]!,
      fstype: f[sep + 1]!,
      source: unescapeMountinfo(f[sep + 2]!),
      superOptions: f[sep + 3] ?? "",
    });
  }
  return out;
}

/** All mounts at `mnt` (stacked mounts possible after bugs), topmost last. */
export function mountsAt(mnt: string): MountInfo[] {
  return mountinfo().filter((m) => m.mountpoint === mnt);
}

/** The FUSE mount at `mnt`, if any. */
export function fuseMountAt(mnt: string): MountInfo | undefined {
  return mountsAt(mnt).filter((m) => m.fstype === "fuse" || m.fstype.startsWith("fuse.") || m.fstype === "fuseblk").pop();
}

export function isMounted(mnt: string): boolean {
  return fuseMountAt(mnt) !== undefined;
}

/** fusectl connection number of a FUSE mount: its st_dev (kernel dev_t encoding major<<20|minor). */
export function connectionIdOf(m: MountInfo): number {
  return m.major * 2 ** 20 + m.minor;
}

export const FUSECTL = "/sys/fs/fuse/connections";

/** Mount fusectl at /sys/fs/fuse/connections if it is not mounted yet (needed for abort). */
export function ensureFusectl(): void {
  if (mountinfo().some((m) => m.fstype === "fusectl")) return;
  const r = Bun.spawnSync(["mount", "-t", "fusectl", "none", FUSECTL], { timeout: 10_000 });
  if (r.exitCode !== 0 && !mountinfo().some((m) => m.fstype === "fusectl")) {
    throw new Error(`cannot mount fusectl at ${FUSECTL}: ${r.stderr.toString()}`);
  }
}

/** Write 1 to /sys/fs/fuse/connections/N/abort. Returns false if the connection is gone. */
export function abortConnection(connId: number): boolean {
  ensureFusectl();
  const p = join(FUSECTL, String(connId), "abort");
  if (!existsSync(p)) return false;
  try {
    writeFileSync(p, "1");
    return true;
  } catch {
    return false;
  }
}

/** Number of requests waiting for an answer on a connection (fusectl `waiting`), or null. */
export function connectionWaiting(connId: number): number | null {
  try {
    return Number(readFileSync(join(FUSECTL, String(connId), "waiting"), "utf8").trim());
  } catch {
    return null;
  }
}

/** Connection ids currently listed by fusectl. */
export function fusectlConnections(): number[] {
  ensureFusectl();
  return readdirSync(FUSECTL).map(Number).filter((n) => Number.isFinite(n));
}

/** umount2(mnt, MNT_DETACH) without touching the mount (no stat, no canonicalization). */
export function lazyUnmount(mnt: string): boolean {
  const code = `import ctypes,sys,os\nlibc=ctypes.CDLL(None,use_errno=True)\nr=libc.umount2(sys.argv[1].encode(),2)\nsys.exit(0 if r==0 else ctypes.get_errno())`;
  const r = Bun.spawnSync([PYTHON, "-c", code, mnt], { timeout: 10_000 });
  return r.exitCode === 0;
}

/** Abort the connection of the FUSE mount at `mnt` and lazily unmount it, until nothing is left. */
export function forceUnmount(mnt: string): string[] {
  const actions: string[] = [];
  for (let i = 0; i < 8; i++) {
    const m = fuseMountAt(mnt);
    if (!m) break;
    const id = connectionIdOf(m);
    if (abortConnection(id)) actions.push(`aborted connection ${id}`);
    if (lazyUnmount(mnt)) actions.push(`umount -l ${mnt}`);
  }
  return actions;
}

// ---- registry of our mountpoints -------------------------------------------------------------

interface Registered {
  mnt: string;
  /** Directory to remove at cleanup (parent of mnt). */
  dir: string;
  /** Connection id seen when the mount became ready. */
  connId?: number;
}

const registry = new Map<string, Registered>();

/** Create a fresh empty mountpoint under /tmp and register it for cleanup. */
export function makeMountpoint(prefix = "fuse-uring-test-"): string {
  const dir = mkdtempSync(join(TMP_ROOT, prefix));
  const mnt = join(dir, "mnt");
  mkdirSync(mnt);
  registry.set(mnt, { mnt, dir });
  return mnt;
}

/** Register an externally created mountpoint (e.g. one owned by another user). */
export function registerMountpoint(mnt: string, dir?: string): void {
  if (!registry.has(mnt)) registry.set(mnt, { mnt, dir: dir ?? "" });
}

/** Remember the connection id of a mount (done when the daemon reports ready). */
export function noteConnection(mnt: string): number | undefined {
  const m = fuseMountAt(mnt);
  const reg = registry.get(mnt);
  if (m && reg) reg.connId = connectionIdOf(m);
  return m ? connectionIdOf(m) : undefined;
}

/**
 * The watchdog: abort the FUSE connection of every registered mount that is still mounted, so
 * clients stuck on unanswered requests fail instead of hanging. Returns what it did.
 */
export function abortAllMounts(reason: string): string[] {
  const actions: string[] = [];
  for (const reg of registry.values()) {
    const m = fuseMountAt(reg.mnt);
    if (!m) continue;
    const id = connectionIdOf(m);
    if (abortConnection(id)) actions.push(`aborted connection ${id} (${reg.mnt})`);
  }
  if (actions.length) console.error(`[watchdog] ${reason}: ${actions.join(", ")}`);
  return actions;
}

/** Unmount (forcefully) every registered mountpoint and delete its directory. */
export function cleanupMountpoints(only?: Set<string>): string[] {
  const actions: string[] = [];
  for (const reg of [...registry.values()]) {
    if (only && !only.has(reg.mnt)) continue;
    actions.push(...forceUnmount(reg.mnt));
    if (!isMounted(reg.mnt)) {
      if (reg.dir) {
        try {
          rmSync(reg.dir, { recursive: true, force: true });
        } catch {}
      }
      registry.delete(reg.mnt);
    }
  }
  return actions;
}

export function registeredMountpoints(): string[] {
  return [...registry.keys()];
}

// ---- tmpfs sources for passthrough tests --------------------------------------------------------

const tmpfsSources = new Set<string>();

/** A fresh tmpfs (`-o options`) mounted at a new directory under /tmp, mode 0755. */
export async function mountTmpfsSource(options = "size=512m", prefix = "fuse-uring-src-"): Promise<string> {
  const dir = mkdtempSync(join(TMP_ROOT, prefix));
  const r = await run(["mount", "-t", "tmpfs", "-o", options, "fuse-uring-src", dir], { timeoutMs: 10_000 });
  if (r.code !== 0) throw new Error(`cannot mount a tmpfs source:\n${fmt(r)}`);
  chmodSync(dir, 0o755);
  tmpfsSources.add(dir);
  return dir;
}

export async function unmountTmpfsSource(dir: string): Promise<void> {
  await run(["umount", "-l", dir], { timeoutMs: 10_000 });
  tmpfsSources.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/** For a file's afterAll: every tmpfs source still mounted. */
export async function unmountTmpfsSources(): Promise<void> {
  for (const d of [...tmpfsSources]) await unmountTmpfsSource(d);
}

/** The state letter of a process (R, S, D, Z, …), or null when it is gone. */
function processState(pid: number | string): { state: string; comm: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = stat.lastIndexOf(")");
    return { state: stat.charAt(close + 2), comm: stat.slice(stat.indexOf("(") + 1, close) };
  } catch {
    return null;
  }
}

/** True when none of `pids` is in uninterruptible sleep (D state); gone processes are fine. */
export function noneInDState(pids: number[]): boolean {
  return pids.every((pid) => processState(pid)?.state !== "D");
}

/** Every process on the machine in D state, as "pid comm (wchan)", for failure messages. */
export function stuckProcesses(): string {
  const out: string[] = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const p = processState(pid);
    if (p?.state !== "D") continue;
    let wchan = "";
    try {
      wchan = readFileSync(`/proc/${pid}/wchan`, "utf8");
    } catch {}
    out.push(`${pid} ${p.comm}${wchan ? ` (${wchan})` : ""}`);
  }
  return out.join(", ");
}
