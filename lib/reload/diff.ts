// What a hot reload changed in a path-based filesystem (tree(), paths()), seen through the nodes
// the kernel holds: it can only have cached names, attributes and pages of what it looked up, so
// comparing the old and the new version on those paths finds everything that must be invalidated.

import { FuseError } from "../protocol/errors.ts";
import type { RequestContext } from "../session/filesystem.ts";
import type { PathFS } from "../path/pathfs.ts";
import { contentBytes, toAttr, typeOf, type StatDefaults } from "../path/stat.ts";
import type { PathHandlers } from "../path/types.ts";

export interface PathChanges {
  /** Paths whose type, attributes or content differ. */
  changed: string[];
  /** Names that appeared in directories the kernel knows. */
  added: string[];
  /** Names that disappeared from directories the kernel knows. */
  removed: string[];
  /** Node ids whose attributes and data the kernel must drop. */
  inodes: number[];
  /** Cached names ([parent node id, name]) the kernel must drop. */
  entries: [number, string][];
  /**
   * Names whose nodes leave the table (gone or of another type): they answer like unlinked
   * files. Deepest first, so a detached child still knows its full path.
   */
  drop: [number, string][];
}

/** Largest file whose content is compared byte for byte (bigger: invalidated without comparing). */
const MAX_COMPARE = 16 << 20;
const MAX_NAMES = 100_000;

/** The context handlers get when a reload calls them (no kernel request behind it). */
const reloadContext: RequestContext = {
  uid: process.getuid?.() ?? 0,
  gid: process.getgid?.() ?? 0,
  pid: process.pid,
  unique: 0n,
  signal: new AbortController().signal,
  backingRead: () => Promise.reject(new FuseError("ENOSYS", "no backing I/O outside a request")),
  backingWrite: () => Promise.reject(new FuseError("ENOSYS", "no backing I/O outside a request")),
};

/** One version's view of a path: null = absent; "unknown" = the handler failed. */
type View = { type: number; attrs: string; content: number | bigint | "unknown" } | null | "unknown";

function handlersOf(fs: PathFS): { h: PathHandlers; defaults: StatDefaults } {
  return { h: fs.handlers, defaults: (fs as unknown as { defaults: StatDefaults }).defaults };
}

async function view(fs: PathFS, path: string): Promise<View> {
  const { h, defaults } = handlersOf(fs);
  try {
    const st = await h.getattr(path, reloadContext);
    if (st === null || st === undefined || st === false) return null;
    const type = typeOf(st, path);
    const a = toAttr(st, path, 0, defaults);
    const attrs = `${a.mode}:${a.size}:${a.uid}:${a.gid}:${a.nlink}:${a.rdev}:${a.mtime}.${a.mtimeNsec}:${st.target ?? ""}`;
    let content: number | bigint | "unknown" = 0;
    if (type === 0o100000) {
      // Only whole-file content can be compared; read()-based files are invalidated regardless.
      if (h.read || !h.readFile || a.size > MAX_COMPARE) content = "unknown";
      else {
        const bytes = await contentBytes(await h.readFile(path, reloadContext), path);
        content = bytes.length > MAX_COMPARE ? "unknown" : Bun.hash(bytes);
      }
    }
    return { type, attrs, content };
  } catch (e) {
    if (e instanceof FuseError && (e.errno === 2 || e.errno === 20)) return null; // ENOENT, ENOTDIR
    return "unknown";
  }
}

async function listing(fs: PathFS, path: string): Promise<Set<string> | null> {
  const h = fs.handlers;
  if (!h.readdir) return new Set();
  try {
    const r = await h.readdir(path, reloadContext);
    const out = new Set<string>();
    const add = (e: unknown) => {
      const name = typeof e === "string" ? e : (e as { name?: unknown })?.name;
      if (typeof name === "string" && name !== "." && name !== "..") out.add(name);
    };
    if (Array.isArray(r)) r.forEach(add);
    else if (r && typeof (r as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
      for await (const e of r as AsyncIterable<unknown>) {
        add(e);
        if (out.size >= MAX_NAMES) break;
      }
    } else if (r && typeof (r as Iterable<unknown>)[Symbol.iterator] === "function") {
      for (const e of r as Iterable<unknown>) {
        add(e);
        if (out.size >= MAX_NAMES) break;
      }
    }
    return out;
  } catch {
    return null;
  }
}

function join(dir: string, name: string): string {
  return dir === "/" ? "/" + name : `${dir}/${name}`;
}

/** Compare `old` and `next` on every path the kernel knows (`next` already shares the table). */
export async function diffPathFS(old: PathFS, next: PathFS): Promise<PathChanges> {
  const out: PathChanges = { changed: [], added: [], removed: [], inodes: [], entries: [], drop: [] };
  const known = next.knownNodes();
  const childIno = new Map<string, number>();
  for (const n of known) childIno.set(n.path, n.ino);
  const removedPaths = new Set<string>();
  const drops: { at: [number, string]; depth: number }[] = [];

  for (const n of known) {
    if (removedPaths.has(n.path)) continue; // found missing in its parent's listing already
    const [a, b] = await Promise.all([view(old, n.path), view(next, n.path)]);
    if (a === "unknown" || b === "unknown") {
      out.inodes.push(n.ino); // cannot tell: drop the cached attributes and data to be safe
      continue;
    }
    if (a === null && b === null) continue;
    if (b === null || (a !== null && a.type !== b.type)) {
      if (n.parent === 0) continue; // the root cannot go away
      if (b === null) {
        out.removed.push(n.path);
        removedPaths.add(n.path);
      } else out.changed.push(n.path);
      out.entries.push([n.parent, n.name]);
      drops.push({ at: [n.parent, n.name], depth: n.path.split("/").length });
      continue;
    }
    const contentChanged = a === null || a.content !== b.content || a.content === "unknown";
    if (a === null || a.attrs !== b.attrs || contentChanged) {
      out.inodes.push(n.ino);
      if (a === null || a.attrs !== b.attrs || (a.content !== b.content && a.content !== "unknown")) out.changed.push(n.path);
    }
    if (b.type === 0o040000) {
      const [before, after] = await Promise.all([listing(old, n.path), listing(next, n.path)]);
      if (!before || !after) {
        out.inodes.push(n.ino);
        continue;
      }
      let any = false;
      for (const name of after) {
        if (before.has(name)) continue;
        any = true;
        out.added.push(join(n.path, name));
        out.entries.push([n.ino, name]); // a cached "no such file" (--negative-ttl) must go too
      }
      for (const name of before) {
        if (after.has(name)) continue;
        any = true;
        const p = join(n.path, name);
        if (!removedPaths.has(p)) {
          out.removed.push(p);
          removedPaths.add(p);
          out.entries.push([n.ino, name]);
          if (childIno.has(p)) drops.push({ at: [n.ino, name], depth: p.split("/").length });
        }
      }
      if (any && !out.inodes.includes(n.ino)) out.inodes.push(n.ino);
    }
  }
  out.drop = drops.sort((x, y) => y.depth - x.depth).map((d) => d.at);
  return out;
}
