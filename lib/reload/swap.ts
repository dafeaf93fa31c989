// Hot reload of a mounted filesystem: the mount, the /dev/fuse connection and the transports
// stay; the filesystem behind the session is replaced. Requests that arrive after the swap go to
// the new version, requests in flight finish on the old one (the dispatcher took the filesystem
// once per request), so every request is still answered exactly once.
//
// Node ids the kernel holds must keep meaning the same thing:
// - tree() / paths() (PathFS): the new version adopts the old one's node table, so ids are kept
//   for paths that still exist; names that vanished are detached like unlinked files (ENOENT).
//   The kernel's caches are then invalidated for exactly what changed (diff.ts).
// - the inode API: only the filesystem knows its ids, so a reload needs a hook that receives the
//   old instance (`m.reload((old) => …)`, or `export function reload(old)` in a script);
//   without one the reload is refused and the old version keeps serving.

import type { InodeFS } from "../session/filesystem.ts";
import { servesAsCopy } from "../threads/plan.ts";
import { attachMount, toInodeFS, type Filesystem } from "../path/convert.ts";
import { isPathFS, type Notifier, type PathFS } from "../path/pathfs.ts";
import { adoptTreeState } from "../tree.ts";
import { diffPathFS } from "./diff.ts";

export class ReloadError extends Error {
  override name = "ReloadError";
}

/** A reload hook: builds the next version from the one serving now (carry its state over). */
export type ReloadHook = (old: InodeFS) => Filesystem | Promise<Filesystem>;

export interface ReloadReport {
  /** Paths whose attributes or content changed (tree/paths only). */
  changed: string[];
  added: string[];
  removed: string[];
  /** Milliseconds the swap itself took (adopting the node table and switching the session). */
  swapMs: number;
  /** Milliseconds spent comparing versions and invalidating kernel caches after the swap. */
  invalidateMs: number;
  /** Requests in flight at the swap (they finish on the old version). */
  inflight: number;
  /** Kernel cache notifications sent (names, attributes/data). */
  notifications: number;
  /** "paths" when the node table was carried over, "hook" when a reload hook built the version. */
  kind: "paths" | "hook";
  /** Set when the swap worked but something after it did not. */
  warning?: string;
}

/** What reload needs of a Mount (structural: no import cycle with mount.ts). */
export interface Reloadable extends Notifier {
  readonly session: {
    readonly fs: InodeFS;
    readonly initInfo: import("../session/filesystem.ts").InitInfo | null;
    replaceFilesystem(fs: InodeFS): number;
    prepareWorkerReload?(): Promise<(() => Promise<number>) | null>;
  };
  readonly reloadCounters: { reloads: number; reloadErrors: number };
}

function describeFs(fs: InodeFS): string {
  if (isPathFS(fs)) return "a tree/paths filesystem";
  const name = (fs as { constructor?: { name?: string } }).constructor?.name;
  return `an inode-API filesystem${name && name !== "Object" ? ` (${name})` : ""}`;
}

/**
 * Why `next` cannot replace `old` without a hook, or null if it can (`next` null: not known yet).
 * Stateless filesystems (`threads: "stateless"` / `replicable: true`, see --workers) compute their node ids from what
 * the request names, so a new version agrees with the old one on them as copies do.
 */
export function needsHook(old: InodeFS, next: InodeFS | null): string | null {
  if (isPathFS(old) && (next === null || isPathFS(next))) return null;
  if (servesAsCopy(old) && (next === null || servesAsCopy(next))) return null;
  const what = !isPathFS(old) ? `the mounted version is ${describeFs(old)}` : `the new version is ${describeFs(next!)}`;
  return (
    `${what}, whose node ids only it knows; a reload needs a hook that carries the old instance's ` +
    `state over (a script: \`export function reload(old) { … return next; }\` or a static ` +
    `reload(old) on the exported class; the API: m.reload((old) => …)), or unmount and mount again`
  );
}

/**
 * Replace the filesystem of a mounted session. `next` is the new version, or a hook that builds
 * it from the old one. Rejects with ReloadError (old version still serving) if it cannot.
 */
export function reloadMount(m: Reloadable, next: Filesystem | ReloadHook): Promise<ReloadReport> {
  // One at a time: two versions adopting the same old one would each count node ids on their own.
  const run = (queues.get(m) ?? Promise.resolve()).then(async () => {
    try {
      return await swap(m, next);
    } catch (e) {
      m.reloadCounters.reloadErrors++;
      throw e;
    }
  });
  queues.set(m, run.catch(() => {}));
  return run;
}

const queues = new WeakMap<Reloadable, Promise<unknown>>();

async function swap(m: Reloadable, next: Filesystem | ReloadHook): Promise<ReloadReport> {
  const old = m.session.fs;
  const viaHook = typeof next === "function";
  let fs: InodeFS;
  try {
    fs = toInodeFS(viaHook ? await (next as ReloadHook)(old) : (next as Filesystem));
  } catch (e) {
    if (e instanceof ReloadError) throw e;
    throw new ReloadError(viaHook ? `the reload hook failed: ${e instanceof Error ? e.message : String(e)}` : e instanceof Error ? e.message : String(e));
  }
  if (!viaHook) {
    const why = needsHook(old, fs);
    if (why) throw new ReloadError(`reload refused: ${why}`);
  }
  // The new version's init() runs before it serves anything (as at mount time).
  if (fs !== old && m.session.initInfo && fs.init) {
    try {
      await fs.init(m.session.initInfo);
    } catch (e) {
      throw new ReloadError(`the new version's init() failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  // --workers N: every worker loads its copy of the new version first, so all threads swap or none.
  let commitWorkers: (() => Promise<number>) | null = null;
  try {
    commitWorkers = (await m.session.prepareWorkerReload?.()) ?? null;
  } catch (e) {
    throw new ReloadError(`a worker could not load the new version: ${e instanceof Error ? e.message : String(e)}`);
  }

  // Adopt and swap synchronously: no request can arrive in between.
  const t0 = performance.now();
  const paths = fs !== old && isPathFS(old) && isPathFS(fs);
  if (paths) {
    (fs as PathFS).adopt(old as PathFS);
    adoptTreeState(fs as PathFS, old as PathFS);
  }
  let inflight = m.session.replaceFilesystem(fs);
  attachMount(fs, m);
  if (commitWorkers) inflight += await commitWorkers();
  const swapMs = performance.now() - t0;
  m.reloadCounters.reloads++;

  const report: ReloadReport = { changed: [], added: [], removed: [], swapMs, invalidateMs: 0, inflight, notifications: 0, kind: paths ? "paths" : "hook" };
  if (!paths) return report;
  const t1 = performance.now();
  try {
    const d = await diffPathFS(old as PathFS, fs as PathFS);
    for (const [parent, name] of d.drop) (fs as PathFS).dropName(parent, name);
    report.changed = d.changed;
    report.added = d.added;
    report.removed = d.removed;
    report.notifications = await (fs as PathFS).invalidateNodes(d.inodes, d.entries);
  } catch (e) {
    // The new version serves; only the kernel's caches may lag behind by their TTLs.
    report.warning = `invalidating the kernel's caches failed (they expire with their TTLs): ${e instanceof Error ? e.message : String(e)}`;
  }
  report.invalidateMs = performance.now() - t1;
  return report;
}

/** "2 changed (/a, /b), 1 added (/c)" — or "nothing the kernel has cached changed". */
export function summarize(r: ReloadReport, max = 5): string {
  const list = (what: string, xs: string[]) => (xs.length ? `${xs.length} ${what} (${xs.slice(0, max).join(", ")}${xs.length > max ? ", …" : ""})` : "");
  if (r.kind === "hook") return "new version from the reload hook";
  const parts = [list("changed", r.changed), list("added", r.added), list("removed", r.removed)].filter(Boolean);
  return parts.length ? parts.join(", ") : "nothing the kernel has cached changed";
}
