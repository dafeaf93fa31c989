// The declarative tree: a filesystem from a plain object.
//
//   tree({
//     "hello.txt": "hi\n",                                  // static text
//     "now.txt": () => new Date().toISOString() + "\n",     // computed at every open
//     "data.bin": new Uint8Array([1, 2, 3]),                // bytes
//     "passwd": Bun.file("/etc/passwd"),                    // a file on disk, served natively
//     "config": file({ read: () => cfg, write: (d) => { cfg = d.toString(); } }),
//     "flag": { read: () => flag, write: (d) => { flag = d.toString(); } }, // file() implied
//     "docs": { "a.md": "# A\n" },                          // nested object = directory
//     "live": dir(async () => ({ [`${Date.now()}`]: "x" })), // directory computed per access
//     "link": symlink("hello.txt"),
//   })
//
// The object is read live: mutate it (or the values behind its functions) and call
// `m.invalidate(path)` to make the kernel drop what it cached. Content functions run only when a
// file is opened, never for stat, ls or lookups (a slow or failing producer must not slow down or
// hide the listing): every open takes a snapshot that is served with direct I/O, so `cat` always
// sees every byte of one consistent evaluation, and stat reports the size of the last snapshot
// (0 before the first open; give `size` in file() to report one up front). A producer that
// throws fails the open with its errno (EIO for plain errors). null/undefined values are absent.
//
// A bare object given to mount()/toInodeFS() is a tree unless it has a `lookup` function
// (an InodeFS) or a `getattr` function (path handlers); wrap it in tree() to be explicit.

import { FuseError } from "./protocol/errors.ts";
import type { RequestContext } from "./session/filesystem.ts";
import { nowTimespec } from "./fs/attr.ts";
import { PathFS } from "./path/pathfs.ts";
import { contentLength, describe, isContent } from "./path/stat.ts";
import { backed, opened, type Content, type DirEntryLike, type MaybePromise, type PathFSOptions, type StatLike, type TimeLike } from "./path/types.ts";

const TREE: unique symbol = Symbol.for("fuse-uring.tree");

/** Content, or something that produces it when a file is opened. */
export type FileSource = Content | Promise<Content> | ((ctx: RequestContext) => MaybePromise<Content>);

export interface FileOptions {
  /** Produces the content at every open (never at stat or in listings). */
  read?: (ctx: RequestContext) => MaybePromise<Content>;
  /**
   * Makes the file writable: called with the complete new content when a writer closes the file
   * (or fsyncs). Throw FuseError to fail the close (e.g. EINVAL for bad input).
   */
  write?: (data: Buffer, ctx: RequestContext) => MaybePromise<void>;
  /** Permission bits (default 0o644 if writable, else 0o444). */
  mode?: number;
  /** Size reported by stat when known in advance (else: the size of the last open's content). */
  size?: number;
  mtime?: TimeLike;
  /** Serve with direct I/O (default: true for computed content, false for static). */
  directIo?: boolean;
}

export interface FileSpec extends FileOptions {
  readonly [TREE]: "file";
  /** Static content or a producer (from `file(content)`). */
  source?: FileSource;
}

export type DirEntries = { readonly [name: string]: TreeValue } | ReadonlyMap<string, TreeValue>;

export interface DirSpec {
  readonly [TREE]: "dir";
  entries: DirEntries | ((ctx: RequestContext) => MaybePromise<DirEntries>);
  mode?: number;
  mtime?: TimeLike;
}

export interface LinkSpec {
  readonly [TREE]: "symlink";
  target: string;
}

export type TreeValue = FileSource | FileSpec | FileOptions | DirSpec | LinkSpec | DirEntries | null | undefined;

/** A file with options: `file({ read, write })`, `file("text", { mode: 0o600 })`. */
export function file(options: FileOptions): FileSpec;
export function file(source: FileSource, options?: Omit<FileOptions, "read">): FileSpec;
export function file(a: FileSource | FileOptions, options: Omit<FileOptions, "read"> = {}): FileSpec {
  if (isContent(a) || typeof a === "function" || isThenable(a)) return { [TREE]: "file", ...options, source: a as FileSource };
  if (typeof a === "object" && a !== null) return { [TREE]: "file", ...(a as FileOptions) };
  throw new TypeError(`file(): expected content, a function or { read, write }, got ${describe(a)}`);
}

/** A directory with options, or one computed per access: `dir(async () => ({ … }))`. */
export function dir(entries: DirSpec["entries"], options: { mode?: number; mtime?: TimeLike } = {}): DirSpec {
  return { [TREE]: "dir", entries, ...options };
}

export function symlink(target: string): LinkSpec {
  if (typeof target !== "string" || target === "") throw new TypeError("symlink(): target must be a non-empty string");
  return { [TREE]: "symlink", target };
}

function isThenable(v: unknown): v is Promise<unknown> {
  return typeof v === "object" && v !== null && typeof (v as { then?: unknown }).then === "function";
}

function brand(v: unknown): "file" | "dir" | "symlink" | undefined {
  return typeof v === "object" && v !== null ? ((v as { [TREE]?: "file" | "dir" | "symlink" })[TREE]) : undefined;
}

function isPlainObject(v: unknown): v is Record<string, TreeValue> {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

const FILE_OPTION_KEYS = new Set(["read", "write", "mode", "size", "mtime", "directIo"]);

/**
 * `{ read() {…}, write(data) {…} }` without file(): a plain object whose keys are all file options
 * and that has a read or write function. (Use dir() for a directory with such names.)
 */
function isFileOptions(v: unknown): v is FileOptions {
  if (!isPlainObject(v)) return false;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  return keys.length > 0 && keys.every((k) => FILE_OPTION_KEYS.has(k)) && (typeof o.read === "function" || typeof o.write === "function");
}

/** Whether `v` is something tree() takes as a directory. */
export function isTreeDir(v: unknown): v is DirEntries | DirSpec {
  return brand(v) === "dir" || v instanceof Map || (isPlainObject(v) && brand(v) === undefined);
}

interface BunFileLike extends Blob {
  name?: string;
  stat?: () => Promise<{ size: number; mtime: Date; mtimeMs: number }>;
}

function isBunFile(v: unknown): v is BunFileLike & { name: string; stat: NonNullable<BunFileLike["stat"]> } {
  return v instanceof Blob && typeof (v as BunFileLike).name === "string" && typeof (v as BunFileLike).stat === "function";
}

type Kind = { t: "dir"; entries: DirEntries; spec?: DirSpec } | { t: "file"; v: FileSource | FileSpec } | { t: "symlink"; target: string };

export interface TreeOptions extends PathFSOptions {}

class Tree {
  private readonly created: [number, number] = nowTimespec();
  /** Computed files: content hash and when it last changed (their mtime). */
  private readonly seen = new Map<string, { hash: bigint | number; mtime: [number, number] }>();

  adopt(old: Tree): void {
    const self = this as unknown as { created: [number, number]; seen: Tree["seen"] };
    self.created = old.created;
    self.seen = old.seen;
  }

  constructor(private readonly root: TreeValue) {
    if (!isTreeDir(root)) throw new TypeError(`tree(): the root must be an object (a directory), got ${describe(root)}`);
  }

  private async entriesOf(v: DirEntries | DirSpec, ctx: RequestContext): Promise<DirEntries> {
    if (brand(v) === "dir") {
      const spec = v as DirSpec;
      const e = typeof spec.entries === "function" ? await spec.entries(ctx) : spec.entries;
      if (!(e instanceof Map) && !isPlainObject(e)) throw new TypeError(`dir(): entries must be an object or a Map, got ${describe(e)}`);
      return e;
    }
    return v as DirEntries;
  }

  private childOf(entries: DirEntries, name: string): TreeValue {
    if (entries instanceof Map) return entries.get(name);
    return Object.hasOwn(entries, name) ? (entries as Record<string, TreeValue>)[name] : undefined;
  }

  private classify(v: TreeValue, path: string): Kind | null {
    if (v === null || v === undefined) return null;
    const b = brand(v);
    if (b === "symlink") return { t: "symlink", target: (v as LinkSpec).target };
    if (b === "file") return { t: "file", v: v as FileSpec };
    if (b === "dir") return { t: "dir", entries: {}, spec: v as DirSpec };
    if (isContent(v) || typeof v === "function" || isThenable(v)) return { t: "file", v: v as FileSource };
    if (isFileOptions(v)) return { t: "file", v: file(v) };
    if (v instanceof Map || isPlainObject(v)) return { t: "dir", entries: v as DirEntries };
    throw new TypeError(`tree: ${path} is ${describe(v)}; expected a string, bytes, a function, Bun.file(), a nested object, file(), dir() or symlink()`);
  }

  /** The value at `path` (directories: their entries resolved). */
  async resolve(path: string, ctx: RequestContext): Promise<Kind | null> {
    let cur = this.classify(this.root, "/");
    let at = "";
    for (const part of path.split("/")) {
      if (part === "") continue;
      if (!cur) return null;
      if (cur.t !== "dir") throw new FuseError("ENOTDIR");
      const entries = cur.spec ? await this.entriesOf(cur.spec, ctx) : cur.entries;
      at += "/" + part;
      cur = this.classify(this.childOf(entries, part), at);
    }
    if (cur?.t === "dir" && cur.spec) cur = { t: "dir", entries: await this.entriesOf(cur.spec, ctx), spec: cur.spec };
    return cur;
  }

  private static isComputed(v: FileSource | FileSpec): boolean {
    if (brand(v) === "file") {
      const s = v as FileSpec;
      return !!s.read || (s.source !== undefined && !isContent(s.source));
    }
    return !isContent(v);
  }

  private static writer(v: FileSource | FileSpec): FileSpec["write"] {
    return brand(v) === "file" ? (v as FileSpec).write : undefined;
  }

  /** Evaluate a file's content now. */
  async content(v: FileSource | FileSpec, ctx: RequestContext, path: string): Promise<Content> {
    let src: unknown = v;
    if (brand(v) === "file") {
      const s = v as FileSpec;
      src = s.read ?? s.source ?? "";
    }
    if (typeof src === "function") src = await (src as (ctx: RequestContext) => unknown)(ctx);
    else if (isThenable(src)) src = await src;
    if (src === null || src === undefined) return "";
    if (typeof src === "number" || typeof src === "boolean" || typeof src === "bigint") return String(src);
    if (!isContent(src)) throw new TypeError(`tree: ${path} produced ${describe(src)}; expected a string, Uint8Array, ArrayBuffer or Blob`);
    return src;
  }

  /** Track when computed content changed: that is its mtime. */
  private async mtimeOf(path: string, c: Content): Promise<[number, number]> {
    let hash: bigint | number;
    if (typeof c === "string" || c instanceof Uint8Array || c instanceof ArrayBuffer) hash = Bun.hash(c);
    else if (ArrayBuffer.isView(c)) hash = Bun.hash(new Uint8Array(c.buffer, c.byteOffset, c.byteLength));
    else {
      const b = c as Blob & { name?: string; lastModified?: number };
      hash = Bun.hash(`${b.size}:${b.name ?? ""}:${b.lastModified ?? ""}`);
    }
    const s = this.seen.get(path);
    if (s && s.hash === hash) return s.mtime;
    const mtime = s ? nowTimespec() : this.created;
    if (this.seen.size > 10000) this.seen.clear();
    this.seen.set(path, { hash, mtime });
    return mtime;
  }

  async stat(k: Kind, path: string, ctx: RequestContext, cheap: boolean): Promise<StatLike | null> {
    if (k.t === "dir") return { type: "dir", mode: k.spec?.mode ?? 0o555, mtime: k.spec?.mtime ?? this.created };
    if (k.t === "symlink") return { type: "symlink", target: k.target, mtime: this.created };
    const v = k.v;
    const spec = brand(v) === "file" ? (v as FileSpec) : undefined;
    const mode = spec?.mode ?? (Tree.writer(v) ? 0o644 : 0o444);
    const src = spec ? (spec.read ?? spec.source) : v;
    if (spec?.size !== undefined) return { type: "file", mode, size: spec.size, mtime: spec.mtime ?? this.created };
    if (isBunFile(src)) {
      if (cheap) return { type: "file" };
      const st = await src.stat();
      return { type: "file", mode, size: st.size, mtime: spec?.mtime ?? st.mtime };
    }
    if (isContent(src)) return { type: "file", mode, size: contentLength(src, path), mtime: spec?.mtime ?? this.created };
    if (cheap) return { type: "file" }; // readdir: the kernel looks it up
    // Computed: never evaluated here; the size and mtime are those of the last open's content.
    return { type: "file", mode, sizeAtOpen: true, mtime: spec?.mtime ?? this.seen.get(path)?.mtime ?? this.created };
  }

  fs(options: TreeOptions): PathFS {
    const self = this;
    return new PathFS(
      {
        async getattr(path, ctx) {
          const k = await self.resolve(path, ctx);
          return k ? self.stat(k, path, ctx, false) : null;
        },
        async readdir(path, ctx) {
          const k = await self.resolve(path, ctx);
          if (!k) throw new FuseError("ENOENT");
          if (k.t !== "dir") throw new FuseError("ENOTDIR");
          const names = k.entries instanceof Map ? [...k.entries.keys()] : Object.keys(k.entries);
          const out: DirEntryLike[] = [];
          for (const name of names) {
            if (name === "" || name.includes("/") || name.includes("\0") || name === "." || name === "..") {
              throw new TypeError(`tree: ${JSON.stringify(name)} in ${path} is not a valid file name`);
            }
            const childPath = path === "/" ? "/" + name : path + "/" + name;
            const ck = self.classify(self.childOf(k.entries, name), childPath);
            if (!ck) continue;
            const st = await self.stat(ck, childPath, ctx, true);
            if (st) out.push({ name, ...st });
          }
          return out;
        },
        async open(path, flags, ctx) {
          const k = await self.resolve(path, ctx);
          if (!k) throw new FuseError("ENOENT");
          if (k.t !== "file") throw new FuseError("EISDIR");
          if ((flags & 3) !== 0 && !Tree.writer(k.v)) throw new FuseError("EACCES", `${path} is read-only (use file({ read, write }) to make it writable)`);
          const spec = brand(k.v) === "file" ? (k.v as FileSpec) : undefined;
          const src = spec ? (spec.read ?? spec.source) : k.v;
          const directIo = spec?.directIo ?? (Tree.isComputed(k.v) || !!Tree.writer(k.v));
          // A file on disk, opened for reading: the shim serves it from the file itself (no
          // JavaScript per READ). Writers of writable entries keep the snapshot (write() gets
          // the whole new content at close).
          if ((flags & 3) === 0 && isBunFile(src)) return backed(src, directIo ? { directIo: true } : {});
          if (directIo) return opened(undefined, { directIo: true });
          // Files on disk may change: let the kernel drop its cache at each open (the default).
          return opened(undefined, isBunFile(src) ? {} : { keepCache: true });
        },
        async readFile(path, ctx) {
          const k = await self.resolve(path, ctx);
          if (!k) throw new FuseError("ENOENT");
          if (k.t !== "file") throw new FuseError("EISDIR");
          const c = await self.content(k.v, ctx, path);
          if (Tree.isComputed(k.v)) await self.mtimeOf(path, c);
          return c;
        },
        async writeFile(path, data, ctx) {
          const k = await self.resolve(path, ctx);
          // Also called to create a file (PathFS: no create handler): a tree has fixed names.
          if (!k) throw new FuseError("EACCES", `tree: cannot create ${path} (names come from the tree object)`);
          if (k.t !== "file") throw new FuseError("EISDIR");
          const w = Tree.writer(k.v);
          if (!w) throw new FuseError("EACCES");
          await w(data, ctx);
        },
      },
      options,
    );
  }
}

export const TREE_FS: unique symbol = Symbol.for("fuse-uring.treefs");

/** A filesystem from a (live) object; see the top of this file. */
export function tree(root: DirEntries | DirSpec, options: TreeOptions = {}): PathFS {
  const t = new Tree(root);
  const fs = t.fs(options);
  Object.defineProperty(fs, TREE_FS, { value: true });
  Object.defineProperty(fs, TREE_STATE, { value: t });
  return fs;
}

const TREE_STATE: unique symbol = Symbol.for("fuse-uring.tree-state");

/**
 * Hot reload: the new version of a tree keeps the old one's creation time (the mtime of static
 * files) and its record of computed content, so files that did not change keep their mtime.
 */
export function adoptTreeState(next: PathFS, old: PathFS): void {
  const n = (next as { [TREE_STATE]?: Tree })[TREE_STATE];
  const o = (old as { [TREE_STATE]?: Tree })[TREE_STATE];
  if (n && o) n.adopt(o);
}
