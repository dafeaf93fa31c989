// Loading a filesystem script for `fuse-uring mount ./myfs.ts MNT`.
//
// The module's default export is one of:
//   - a tree object:        export default { "hello.txt": "Hello, world!\n" }
//   - path handlers:        export default { getattr(path) { … }, readdir(path) { … }, … }
//   - an InodeFS:           export default memfs()
//   - a function (or class) returning/constructing one of those, possibly async; it receives
//     { args, mountpoint } (args: extra command-line arguments, if any).
// Every failure becomes one Error whose message starts with "file:line:" (syntax errors with
// the offending line and a caret), so the CLI prints a single clear line.

import { existsSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, relative, resolve } from "node:path";
import type { InodeFS, ScriptContext } from "./session/filesystem.ts";
import { mount, type MountOptions } from "./mount.ts";
import { attachMount, HandlerShapeError, toInodeFS, type Filesystem } from "./path/convert.ts";
import { isPathFS, type PathFS } from "./path/pathfs.ts";
import { needsHook } from "./reload/swap.ts";

export class ScriptError extends Error {
  override name = "ScriptError";
  /** Local modules a failed load left in the module cache (hot reload evicts them next time). */
  constructor(message: string, readonly modules: string[] = []) {
    super(message);
  }
}

export interface LoadScriptOptions {
  /** Extra arguments for the script's default-export function. */
  args?: string[];
  mountpoint?: string;
  /** Passed through to ScriptContext.shared (a worker copy of a filesystem with shared state). */
  shared?: unknown;
  /**
   * The module is bundled into this program, not a file on disk (the standalone binary's
   * built-in copy modules, lib/embedded-copies.ts): import it with this instead. Nothing is
   * evicted, hashed or watched; a reload evaluates the same module again (its reload hook).
   */
  embedded?: () => Promise<Record<string, unknown>>;
}

/** What a default-export function (and a reload hook) receives (defined with CopiesPlan). */
export type { ScriptContext } from "./session/filesystem.ts";

export function show(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith("..") && !isAbsolute(rel) ? rel : file;
}

interface Position {
  file?: string;
  line?: number;
  column?: number;
  lineText?: string;
}

/** One build message (Bun's BuildMessage/ResolveMessage) as "file:line:col: message". */
function formatBuildMessage(m: { message?: string; position?: Position | null }, fallbackFile: string): string {
  const p = m.position ?? {};
  const file = show(p.file || fallbackFile);
  const line = p.line ?? 1;
  let out = `${file}:${line}${p.column !== undefined ? `:${p.column + 1}` : ""}: ${m.message ?? "error"}`;
  if (p.lineText) {
    const text = p.lineText.replace(/\t/g, " ");
    out += `\n    ${text}\n    ${" ".repeat(Math.max(0, Math.min(p.column ?? 0, text.length)))}^`;
  }
  return out;
}

/** "file:line:col" of the first stack frame in `preferFile` (else the first frame with a file). */
export function stackLocation(err: unknown, preferFile?: string): string | undefined {
  const stack = err instanceof Error ? err.stack : undefined;
  if (!stack) return undefined;
  const frames: { file: string; line: string; col: string }[] = [];
  for (const line of stack.split("\n")) {
    const m = /^\s*at (?:.*? \()?(\/.+?|file:\/\/.+?):(\d+):(\d+)\)?\s*$/.exec(line);
    if (m) frames.push({ file: m[1]!.replace(/^file:\/\//, ""), line: m[2]!, col: m[3]! });
  }
  const f = (preferFile && frames.find((x) => x.file === preferFile)) || frames.find((x) => !x.file.includes("/node_modules/")) || frames[0];
  return f ? `${show(f.file)}:${f.line}:${f.col}` : undefined;
}

function lineOf(file: string, re: RegExp): number {
  try {
    const lines = readFileSync(file, "utf8").split("\n");
    const i = lines.findIndex((l) => re.test(l));
    return i >= 0 ? i + 1 : 1;
  } catch {
    return 1;
  }
}

/** The message for an exception thrown by import(). */
function formatImportError(e: unknown, file: string): string {
  const any = e as { errors?: unknown[]; position?: Position | null; message?: string; name?: string };
  if (any && Array.isArray(any.errors) && any.errors.length > 0 && (any.errors[0] as { position?: unknown }).position !== undefined) {
    const first = formatBuildMessage(any.errors[0] as { message?: string; position?: Position }, file);
    const more = any.errors.length - 1;
    return more > 0 ? `${first}\n(and ${more} more error${more > 1 ? "s" : ""})` : first;
  }
  if (any && any.position) return formatBuildMessage(any as { message?: string; position?: Position }, file);
  const msg = e instanceof Error ? e.message : String(e);
  // Missing named import: Bun names neither the importer nor the line; find it.
  const named = /Export named '([^']+)' not found in module '([^']+)'/.exec(msg);
  if (named) {
    const name = named[1]!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return `${show(file)}:${lineOf(file, new RegExp(`\\bimport\\b.*\\b${name}\\b|^\\s*\\b${name}\\b.*[,}]`))}: ${msg}`;
  }
  // A missing module: Bun gives no position; find the import of that specifier.
  const resolveMsg = /Cannot find (?:module|package) ['"]([^'"]+)['"] (?:imported )?from ['"]?([^'"]+?)['"]?$/.exec(msg);
  if (resolveMsg) {
    const importer = resolveMsg[2]!;
    const spec = resolveMsg[1]!.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const where = existsSync(importer) ? importer : file;
    return `${show(where)}:${lineOf(where, new RegExp(`['"]${spec}['"]`))}: cannot find module ${resolveMsg[1]}`;
  }
  const at = stackLocation(e, file);
  return `${at ?? `${show(file)}:1`}: ${e instanceof Error ? `${e.name === "Error" ? "" : e.name + ": "}${msg}` : msg} (while loading ${show(file)})`;
}

function isClass(f: Function): boolean {
  return /^class[\s{]/.test(Function.prototype.toString.call(f));
}

/** Import a filesystem script and turn its default export into an InodeFS. */
export async function loadScript(path: string, options: LoadScriptOptions = {}): Promise<InodeFS> {
  return (await loadScriptVersion(path, options)).fs;
}

/** One loaded version of a script (what hot reload needs to load the next one). */
export interface ScriptVersion {
  fs: InodeFS;
  /** Absolute path of the script. */
  file: string;
  /** Local module files this version loaded (the script and what it imports, no node_modules). */
  modules: string[];
  /** Aborted when this version is replaced by a reload (scripts: `ctx.signal`). */
  controller: AbortController;
  /** Built by the script's reload hook from the previous version. */
  viaHook: boolean;
  /** Content hashes of `modules` as loaded. */
  hashes: Map<string, number | bigint>;
}

function isLocalModule(key: string): boolean {
  return isAbsolute(key) && !key.includes("/node_modules/") && !key.startsWith("/$bunfs/") && !key.includes("?");
}

type ReloadFn = (old: InodeFS, ctx: ScriptContext) => unknown;

/** `export function reload(old, ctx)`, or a static reload(old, ctx) on the default-export class. */
function reloadHookOf(mod: Record<string, unknown>): ReloadFn | undefined {
  if (typeof mod.reload === "function") return mod.reload as ReloadFn;
  const d = mod.default as ((...a: unknown[]) => unknown) & { reload?: unknown };
  if (typeof d === "function" && typeof d.reload === "function") return (d.reload as ReloadFn).bind(d);
  return undefined;
}

/**
 * Load `path` (again). With `previous`, the script's local modules are evicted from the module
 * cache first, so edits to the script and to the files it imports both take effect (packages in
 * node_modules stay loaded), and a reload hook, if the script exports one, builds the new version
 * from the old instance instead of the default export.
 */
export async function loadScriptVersion(
  path: string,
  options: LoadScriptOptions = {},
  previous?: ScriptVersion,
  /** More local modules to evict (what failed loads in between left in the cache). */
  evictAlso: Iterable<string> = [],
): Promise<ScriptVersion> {
  const file = resolve(path);
  if (previous && options.mountpoint && file.startsWith(resolve(options.mountpoint) + "/")) {
    throw new ScriptError(`${path}: is on the mount it serves; it cannot be reloaded from there`);
  }
  if (options.embedded) {
    let mod: Record<string, unknown>;
    try {
      mod = await options.embedded();
    } catch (e) {
      throw new ScriptError(formatImportError(e, file));
    }
    return { ...(await evaluate(mod, file, options, [], previous)), hashes: new Map() };
  }
  if (!existsSync(file)) throw new ScriptError(`${path}: no such file`);
  if (statSync(file).isDirectory()) throw new ScriptError(`${path}: is a directory, expected a .ts/.js module`);
  const cache = require.cache as Record<string, unknown>;
  if (previous) for (const m of [...previous.modules, ...evictAlso, file]) if (isLocalModule(m)) delete cache[m];
  const before = new Set(Object.keys(cache));
  // Modules on the mount itself are never reloaded, hashed or watched: the daemon reading its
  // own mount would wait for an answer only it can give.
  const mnt = options.mountpoint ? resolve(options.mountpoint) + "/" : null;
  const loaded = () => [file, ...Object.keys(cache).filter((k) => !before.has(k) && k !== file && isLocalModule(k) && !(mnt && k.startsWith(mnt)))];
  // Hashed before the import where known, so an edit racing with the load is noticed later.
  const hashes = hashFiles(previous ? [file, ...previous.modules] : [file]);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(file)) as Record<string, unknown>;
  } catch (e) {
    throw new ScriptError(formatImportError(e, file), loaded());
  }
  const modules = loaded();
  for (const [f, h] of hashFiles(modules.filter((f) => !hashes.has(f)))) hashes.set(f, h);
  for (const f of [...hashes.keys()]) if (!modules.includes(f)) hashes.delete(f);
  try {
    return { ...(await evaluate(mod, file, options, modules, previous)), hashes };
  } catch (e) {
    throw e instanceof ScriptError && e.modules.length === 0 ? new ScriptError(e.message, modules) : e;
  }
}

/** Content hashes of files (-1: unreadable); what a watcher compares to skip no-op saves. */
export function hashFiles(files: Iterable<string>): Map<string, number | bigint> {
  const out = new Map<string, number | bigint>();
  for (const f of files) {
    try {
      out.set(f, Bun.hash(readFileSync(f)));
    } catch {
      out.set(f, -1); // gone (an editor's rename in progress, or deleted)
    }
  }
  return out;
}

async function evaluate(mod: Record<string, unknown>, file: string, options: LoadScriptOptions, modules: string[], previous?: ScriptVersion): Promise<Omit<ScriptVersion, "hashes">> {
  const controller = new AbortController();
  const ctx: ScriptContext = { args: options.args ?? [], mountpoint: options.mountpoint, signal: controller.signal };
  if (options.shared !== undefined) ctx.shared = options.shared;
  const hook = previous ? reloadHookOf(mod) : undefined;
  if (previous && !hook) {
    const why = needsHook(previous.fs, null);
    if (why) throw new ScriptError(`${show(file)}: reload refused: ${why}`, modules);
  }
  let value: unknown;
  if (hook) {
    try {
      value = await hook(previous!.fs, ctx);
    } catch (e) {
      throw new ScriptError(`${stackLocation(e, file) ?? `${show(file)}:1`}: the reload hook threw: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else {
    value = await evaluateDefault(mod, file, ctx);
  }
  try {
    const fs = toInodeFS(value as Filesystem);
    if (isPathFS(fs)) pathScript(fs, mod, file, options);
    return { fs, file, modules, controller, viaHook: !!hook };
  } catch (e) {
    // A handler name with a non-function value ({ getattr: 5 }): point at that key's line.
    const key = e instanceof HandlerShapeError ? e.key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : null;
    const line = key ? lineOf(file, new RegExp(`(^|[\\s{,"'])${key}["']?\\s*[:(]`)) : lineOf(file, hook ? /\breload\b/ : /\bexport\s+default\b/);
    const what = hook ? "the reload hook returned something that" : "default export";
    throw new ScriptError(`${show(file)}:${line}: ${what} is not a filesystem: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * A paths()/tree() script: where it came from (so `threads: "stateless"` can have every worker
 * thread load it: PathFS.copies), the declaration when it is on the default export (a function
 * or object with `threads: "stateless"`), and, in a worker, the shared node table to join.
 */
function pathScript(fs: PathFS, mod: Record<string, unknown>, file: string, options: LoadScriptOptions): void {
  fs.scriptSource = { path: file, args: options.args ?? [], mountpoint: options.mountpoint };
  const d = mod.default as { threads?: unknown } | null | undefined;
  // (A tree object's "threads" key is a file: trees declare it with tree(obj, { threads }).)
  const declared = typeof d === "function" || (typeof d === "object" && d !== null && typeof (d as { getattr?: unknown }).getattr === "function") ? d.threads : undefined;
  if (declared === "stateless" || declared === "single") fs.threads = declared;
  else if (declared !== undefined && !isPathFS(d)) throw new TypeError(`threads: ${JSON.stringify(declared)}; expected "stateless" or "single"`);
  if (options.shared !== undefined) fs.joinShare(options.shared);
}

async function evaluateDefault(mod: Record<string, unknown>, file: string, ctx: ScriptContext): Promise<unknown> {
  let value: unknown = mod.default;
  if (value === undefined) {
    const named = Object.keys(mod).filter((k) => k !== "default");
    throw new ScriptError(
      `${show(file)}:1: no default export. Export the filesystem: \`export default { "hello.txt": "hi\\n" }\` ` +
        `(a tree object, path handlers, an InodeFS, or a function returning one)` +
        (named.length ? `; found only named exports: ${named.join(", ")}` : ""),
    );
  }
  if (typeof value === "function") {
    const f = value as Function;
    try {
      value = isClass(f) ? new (f as new (c: ScriptContext) => unknown)(ctx) : await (f as (c: ScriptContext) => unknown)(ctx);
    } catch (e) {
      const at = stackLocation(e, file) ?? `${show(file)}:1`;
      throw new ScriptError(`${at}: the default export ${isClass(f) ? "constructor" : "function"} threw: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else if (value && typeof (value as { then?: unknown }).then === "function") {
    try {
      value = await value;
    } catch (e) {
      throw new ScriptError(`${stackLocation(e, file) ?? `${show(file)}:1`}: the default export rejected: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return value;
}

/**
 * Mount `fs`, print `fuse-uring: mounted MNT (transport=…)` on stderr, unmount on SIGINT/SIGTERM
 * and resolve when the mount is gone (for standalone scripts: `await serve(fs, process.argv[2])`).
 */
export async function serve(fs: Filesystem, mountpoint: string, options: MountOptions = {}): Promise<string> {
  const inode = toInodeFS(fs);
  const m = await mount(mountpoint, inode, options);
  attachMount(inode, m);
  process.stderr.write(`fuse-uring: mounted ${mountpoint} (transport=${m.transport}: ${m.transportReason})\n`);
  const stop = () => {
    m.unmount().catch((e) => process.stderr.write(`fuse-uring: unmount failed: ${e instanceof Error ? e.message : e}\n`));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    return await m.closed;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}
