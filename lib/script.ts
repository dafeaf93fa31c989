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
import type { InodeFS } from "./fs/types.ts";
import { mount, type MountOptions } from "./mount.ts";
import { attachMount, HandlerShapeError, toInodeFS, type Filesystem } from "./path/convert.ts";

export class ScriptError extends Error {
  override name = "ScriptError";
}

export interface LoadScriptOptions {
  /** Extra arguments for the script's default-export function. */
  args?: string[];
  mountpoint?: string;
}

/** What a default-export function receives. */
export interface ScriptContext {
  args: string[];
  mountpoint?: string;
}

function show(file: string): string {
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
  const file = resolve(path);
  if (!existsSync(file)) throw new ScriptError(`${path}: no such file`);
  if (statSync(file).isDirectory()) throw new ScriptError(`${path}: is a directory, expected a .ts/.js module`);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(file)) as Record<string, unknown>;
  } catch (e) {
    throw new ScriptError(formatImportError(e, file));
  }
  let value: unknown = mod.default;
  if (value === undefined) {
    const named = Object.keys(mod).filter((k) => k !== "default");
    throw new ScriptError(
      `${show(file)}:1: no default export. Export the filesystem: \`export default { "hello.txt": "hi\\n" }\` ` +
        `(a tree object, path handlers, an InodeFS, or a function returning one)` +
        (named.length ? `; found only named exports: ${named.join(", ")}` : ""),
    );
  }
  const ctx: ScriptContext = { args: options.args ?? [], mountpoint: options.mountpoint };
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
  try {
    return toInodeFS(value as Filesystem);
  } catch (e) {
    const key = e instanceof HandlerShapeError ? e.key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") : null;
    const line = key ? lineOf(file, new RegExp(`(^|[\\s{,"'])${key}["']?\\s*[:(]`)) : lineOf(file, /\bexport\s+default\b/);
    throw new ScriptError(`${show(file)}:${line}: default export is not a filesystem: ${e instanceof Error ? e.message : String(e)}`);
  }
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
