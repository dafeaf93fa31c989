// One argument order for every path handler, and the adapter that keeps the old (positional)
// order working for one release.
//
// THE RULE: a handler is `name(path, ctx)` when the path is all it needs, otherwise
// `name(path, args, ctx)` — the path it acts on first, ONE object of named arguments second
// (`{ offset, size, fh }`, `{ data, offset, fh }`, `{ mode }`, `{ newPath }` …), the request
// context last. There are no positional lists to remember.
//
// Which order a handler object uses is never guessed from function arity (`read(path, a, b)` is
// three parameters in both orders): objects passed through `defineFs()` use the named order;
// any other object is read in the 0.1 positional order, and the first time such an object has a
// handler whose order changed, one deprecation warning names them. The positional order goes away
// in the next release (plain objects will then be read in the named order too).
//
// PathFS itself (pathfs.ts) calls handlers in the positional order; `toPositional` wraps a
// defineFs() object once, where paths() builds its handler table. Nothing else knows.
//
// Handlers added after 0.1 (ioctl, poll, locks, …) are declared in types.ts in the named order
// from the start, `(path, { … }, ctx)`: they are not in REORDERED, so both kinds of object pass
// them through unchanged and the public PathHandlers type (Omit<…> below) shows them as declared.

import type { InitInfo, RequestContext } from "../session/filesystem.ts";
import type { Backed, Content, DirEntryLike, MaybePromise, Opened, PathHandlers as PositionalHandlers, StatfsLike, StatLike } from "./types.ts";

export interface OpenArgs {
  /** open(2) flags (O_ACCMODE bits, O_APPEND, O_TRUNC …; see accessMode/openFlags). */
  flags: number;
}
export interface ReadArgs<H = any> {
  offset: number;
  /** At most this many bytes are used; fewer (or null) = end of file. */
  size: number;
  fh: H;
}
export interface WriteArgs<H = any> {
  /** A private copy of the written bytes. */
  data: Buffer;
  offset: number;
  fh: H;
}
export interface WriteFileArgs {
  /** The complete new content. */
  data: Buffer;
}
export interface HandleArgs<H = any> {
  fh: H;
}
export interface FsyncArgs<H = any> {
  /** fdatasync(2): only the data (and the size) must reach stable storage. */
  datasync: boolean;
  fh: H;
}
export interface CreateArgs {
  /** Permission bits, umask applied. */
  mode: number;
  flags: number;
}
export interface MknodArgs {
  /** Type and permission bits (umask applied). */
  mode: number;
  rdev: number;
}
export interface ModeArgs {
  mode: number;
}
export interface NewPathArgs {
  /** rename: where `path` goes (replace it if it exists); link: the new name for `path`. */
  newPath: string;
}
export interface SymlinkArgs {
  /** What the new link at `path` points to. */
  target: string;
}
export interface TruncateArgs<H = any> {
  size: number;
  /** Set when truncating an open file (ftruncate, O_TRUNC). */
  fh: H | undefined;
}
export interface ChownArgs {
  /** -1 = unchanged. */
  uid: number;
  gid: number;
}
export interface UtimensArgs {
  /** undefined = unchanged. */
  atime: Date | undefined;
  mtime: Date | undefined;
}
export interface AccessArgs {
  /** R_OK | W_OK | X_OK bits (0 = F_OK); see accessMask. */
  mask: number;
}
export interface XattrArgs {
  name: string;
}
export interface SetxattrArgs {
  name: string;
  value: Buffer;
  /** XATTR_CREATE, XATTR_REPLACE or 0; see xattrMode. */
  flags: number;
}

/** Handlers whose arguments moved into the named-arguments object. */
export const REORDERED = [
  "open", "read", "write", "writeFile", "flush", "fsync", "release", "create", "mknod", "mkdir", "rename", "link",
  "symlink", "truncate", "chmod", "chown", "utimens", "access", "getxattr", "setxattr", "removexattr",
] as const;
type Reordered = (typeof REORDERED)[number];

type OpenResult<H> = MaybePromise<H | Opened<H> | Backed<H> | void>;

/**
 * Path handlers in the named-arguments order (see the rule at the top of this file). Only
 * `getattr` is required. Handlers not listed here (added by later releases) keep the signature
 * documented on them.
 */
export interface PathHandlers<H = any> extends Omit<PositionalHandlers<H>, Reordered> {
  init?(info: InitInfo): void | Promise<void>;
  destroy?(): void | Promise<void>;
  getattr(path: string, ctx: RequestContext): MaybePromise<StatLike | null | undefined | false>;
  readdir?(path: string, ctx: RequestContext): MaybePromise<Iterable<DirEntryLike> | AsyncIterable<DirEntryLike>>;
  readFile?(path: string, ctx: RequestContext): MaybePromise<Content | null | undefined>;
  unlink?(path: string, ctx: RequestContext): MaybePromise<void>;
  rmdir?(path: string, ctx: RequestContext): MaybePromise<void>;
  readlink?(path: string, ctx: RequestContext): MaybePromise<string | Uint8Array>;
  statfs?(path: string, ctx: RequestContext): MaybePromise<StatfsLike>;
  listxattr?(path: string, ctx: RequestContext): MaybePromise<string[]>;

  /** Return a handle, `opened(handle, …)`, or `backed(fd | path | Bun.file(path), …)`. */
  open?(path: string, args: OpenArgs, ctx: RequestContext): OpenResult<H>;
  read?(path: string, args: ReadArgs<H>, ctx: RequestContext): MaybePromise<Content | null | undefined>;
  /** Return the number of bytes written (default: all of them). */
  write?(path: string, args: WriteArgs<H>, ctx: RequestContext): MaybePromise<number | void>;
  writeFile?(path: string, args: WriteFileArgs, ctx: RequestContext): MaybePromise<void>;
  flush?(path: string, args: HandleArgs<H>, ctx: RequestContext): MaybePromise<void>;
  /** Not called for backed files (their FSYNC is fsync(2) of the descriptor, natively). */
  fsync?(path: string, args: FsyncArgs<H>, ctx: RequestContext): MaybePromise<void>;
  release?(path: string, args: HandleArgs<H>, ctx: RequestContext): MaybePromise<void>;
  /** Create and open a regular file (O_CREAT). */
  create?(path: string, args: CreateArgs, ctx: RequestContext): OpenResult<H>;
  mknod?(path: string, args: MknodArgs, ctx: RequestContext): MaybePromise<void>;
  mkdir?(path: string, args: ModeArgs, ctx: RequestContext): MaybePromise<void>;
  /** Move `path` to `newPath`, replacing it (RENAME_NOREPLACE is checked by the layer). */
  rename?(path: string, args: NewPathArgs, ctx: RequestContext): MaybePromise<void>;
  /** A hard link: `newPath` becomes another name of `path`. */
  link?(path: string, args: NewPathArgs, ctx: RequestContext): MaybePromise<void>;
  /** Create a symbolic link at `path` pointing to `target`. */
  symlink?(path: string, args: SymlinkArgs, ctx: RequestContext): MaybePromise<void>;
  truncate?(path: string, args: TruncateArgs<H>, ctx: RequestContext): MaybePromise<void>;
  chmod?(path: string, args: ModeArgs, ctx: RequestContext): MaybePromise<void>;
  chown?(path: string, args: ChownArgs, ctx: RequestContext): MaybePromise<void>;
  /** Without this handler, time updates (touch) succeed and are ignored. */
  utimens?(path: string, args: UtimensArgs, ctx: RequestContext): MaybePromise<void>;
  access?(path: string, args: AccessArgs, ctx: RequestContext): MaybePromise<void>;
  getxattr?(path: string, args: XattrArgs, ctx: RequestContext): MaybePromise<string | Uint8Array | null | undefined>;
  setxattr?(path: string, args: SetxattrArgs, ctx: RequestContext): MaybePromise<void>;
  removexattr?(path: string, args: XattrArgs, ctx: RequestContext): MaybePromise<void>;
}

/** The 0.1 positional order (deprecated; read as such only from objects not made by defineFs). */
export type LegacyPathHandlers<H = any> = PositionalHandlers<H>;

export const NAMED_ARGS: unique symbol = Symbol.for("fuse-uring.named-args");

/** What defineFs() returns: the same object, marked as using the named-arguments order. */
export type DefinedFs<H = any> = PathHandlers<H> & { readonly [NAMED_ARGS]: true };

/**
 * Declare a path filesystem: `export default defineFs({ getattr(path) {…}, read(path, { offset, size }) {…} })`.
 * Gives editor checking of every handler's arguments in a single-file script, and marks the
 * object as using the named-arguments order. Returns its argument (marked).
 */
export function defineFs<T extends PathHandlers>(handlers: T): T & { readonly [NAMED_ARGS]: true } {
  if (typeof handlers !== "object" || handlers === null || typeof handlers.getattr !== "function") {
    throw new TypeError("defineFs(): path handlers need at least a getattr(path) function");
  }
  if (!isNamedArgs(handlers)) Object.defineProperty(handlers, NAMED_ARGS, { value: true, enumerable: false });
  return handlers as T & { readonly [NAMED_ARGS]: true };
}

export function isNamedArgs(x: unknown): x is DefinedFs {
  return typeof x === "object" && x !== null && (x as { [NAMED_ARGS]?: unknown })[NAMED_ARGS] === true;
}

type Fn = (...a: any[]) => any;

/** Positional → named: how PathFS's call of each reordered handler maps onto the named form. */
const ADAPT: Record<Reordered, (f: Fn) => Fn> = {
  open: (f) => function (this: unknown, p, flags, ctx) { return f.call(this, p, { flags }, ctx); },
  read: (f) => function (this: unknown, p, offset, size, fh, ctx) { return f.call(this, p, { offset, size, fh }, ctx); },
  write: (f) => function (this: unknown, p, data, offset, fh, ctx) { return f.call(this, p, { data, offset, fh }, ctx); },
  writeFile: (f) => function (this: unknown, p, data, ctx) { return f.call(this, p, { data }, ctx); },
  flush: (f) => function (this: unknown, p, fh, ctx) { return f.call(this, p, { fh }, ctx); },
  fsync: (f) => function (this: unknown, p, datasync, fh, ctx) { return f.call(this, p, { datasync, fh }, ctx); },
  release: (f) => function (this: unknown, p, fh, ctx) { return f.call(this, p, { fh }, ctx); },
  create: (f) => function (this: unknown, p, mode, flags, ctx) { return f.call(this, p, { mode, flags }, ctx); },
  mknod: (f) => function (this: unknown, p, mode, rdev, ctx) { return f.call(this, p, { mode, rdev }, ctx); },
  mkdir: (f) => function (this: unknown, p, mode, ctx) { return f.call(this, p, { mode }, ctx); },
  rename: (f) => function (this: unknown, from, to, ctx) { return f.call(this, from, { newPath: to }, ctx); },
  link: (f) => function (this: unknown, existing, newPath, ctx) { return f.call(this, existing, { newPath }, ctx); },
  symlink: (f) => function (this: unknown, target, p, ctx) { return f.call(this, p, { target }, ctx); },
  truncate: (f) => function (this: unknown, p, size, fh, ctx) { return f.call(this, p, { size, fh }, ctx); },
  chmod: (f) => function (this: unknown, p, mode, ctx) { return f.call(this, p, { mode }, ctx); },
  chown: (f) => function (this: unknown, p, uid, gid, ctx) { return f.call(this, p, { uid, gid }, ctx); },
  utimens: (f) => function (this: unknown, p, atime, mtime, ctx) { return f.call(this, p, { atime, mtime }, ctx); },
  access: (f) => function (this: unknown, p, mask, ctx) { return f.call(this, p, { mask }, ctx); },
  getxattr: (f) => function (this: unknown, p, name, ctx) { return f.call(this, p, { name }, ctx); },
  setxattr: (f) => function (this: unknown, p, name, value, flags, ctx) { return f.call(this, p, { name, value, flags }, ctx); },
  removexattr: (f) => function (this: unknown, p, name, ctx) { return f.call(this, p, { name }, ctx); },
};

/** Where the one-time deprecation warning goes (tests replace it). */
export const deprecation = {
  warned: false,
  log: (message: string): void => console.warn(message),
};

/** The positional signatures, for the warning. */
const POSITIONAL: Record<Reordered, string> = {
  open: "open(path, flags, ctx) → open(path, { flags }, ctx)",
  read: "read(path, offset, size, fh, ctx) → read(path, { offset, size, fh }, ctx)",
  write: "write(path, data, offset, fh, ctx) → write(path, { data, offset, fh }, ctx)",
  writeFile: "writeFile(path, data, ctx) → writeFile(path, { data }, ctx)",
  flush: "flush(path, fh, ctx) → flush(path, { fh }, ctx)",
  fsync: "fsync(path, datasync, fh, ctx) → fsync(path, { datasync, fh }, ctx)",
  release: "release(path, fh, ctx) → release(path, { fh }, ctx)",
  create: "create(path, mode, flags, ctx) → create(path, { mode, flags }, ctx)",
  mknod: "mknod(path, mode, rdev, ctx) → mknod(path, { mode, rdev }, ctx)",
  mkdir: "mkdir(path, mode, ctx) → mkdir(path, { mode }, ctx)",
  rename: "rename(from, to, ctx) → rename(path, { newPath }, ctx)",
  link: "link(existing, newPath, ctx) → link(path, { newPath }, ctx)",
  symlink: "symlink(target, path, ctx) → symlink(path, { target }, ctx)",
  truncate: "truncate(path, size, fh, ctx) → truncate(path, { size, fh }, ctx)",
  chmod: "chmod(path, mode, ctx) → chmod(path, { mode }, ctx)",
  chown: "chown(path, uid, gid, ctx) → chown(path, { uid, gid }, ctx)",
  utimens: "utimens(path, atime, mtime, ctx) → utimens(path, { atime, mtime }, ctx)",
  access: "access(path, mask, ctx) → access(path, { mask }, ctx)",
  getxattr: "getxattr(path, name, ctx) → getxattr(path, { name }, ctx)",
  setxattr: "setxattr(path, name, value, flags, ctx) → setxattr(path, { name, value, flags }, ctx)",
  removexattr: "removexattr(path, name, ctx) → removexattr(path, { name }, ctx)",
};

/**
 * The source text of a function's second parameter starts with "{" or "[" (a destructuring
 * pattern): `read(path, { offset, size })`. No positional handler takes an object there, so an
 * unmarked object with such a handler was written for the named order and forgot defineFs().
 */
export function destructuresSecondParam(f: Fn): boolean {
  let src: string;
  try {
    src = Function.prototype.toString.call(f);
  } catch {
    return false;
  }
  const open = src.indexOf("(");
  if (open < 0) return false;
  const arrow = src.indexOf("=>");
  if (arrow >= 0 && arrow < open) return false; // `p => …`: one parameter
  let depth = 0;
  let param = 0;
  for (let i = open; i < src.length; i++) {
    const c = src[i]!;
    if (c === "(" || c === "{" || c === "[") {
      if (depth === 1 && param === 1 && c !== "(" && src.slice(src.lastIndexOf(",", i) + 1, i).trim() === "") return true;
      depth++;
    } else if (c === ")" || c === "}" || c === "]") {
      depth--;
      if (depth === 0) return false;
    } else if (c === "," && depth === 1) {
      param++;
      if (param > 1) return false;
    }
  }
  return false;
}

/**
 * The handler table PathFS calls (positional order). A defineFs() object gets a wrapper whose
 * prototype is the object itself (so `this.x` in a handler still reaches the object's state);
 * any other object is used as it is, in the deprecated positional order.
 */
export function toPositional<H>(handlers: PathHandlers<H> | LegacyPathHandlers<H>): LegacyPathHandlers<H> {
  if (typeof handlers !== "object" || handlers === null) return handlers as LegacyPathHandlers<H>;
  const rec = handlers as unknown as Record<string, unknown>;
  if (isNamedArgs(handlers)) {
    const out = Object.create(handlers) as Record<string, unknown>;
    for (const name of REORDERED) {
      const f = rec[name];
      if (typeof f === "function") out[name] = ADAPT[name](f as Fn);
    }
    return out as unknown as LegacyPathHandlers<H>;
  }
  const old = REORDERED.filter((n) => typeof rec[n] === "function");
  if (old.length === 0) return handlers as LegacyPathHandlers<H>; // the same in both orders
  const named = old.filter((n) => destructuresSecondParam(rec[n] as Fn));
  if (named.length > 0) {
    throw new TypeError(
      `${named.map((n) => `${n}(path, { … })`).join(", ")} use${named.length === 1 ? "s" : ""} the named-arguments order: wrap the handlers in defineFs({ … }) ` +
        `(import { defineFs } from "fuse-uring"); objects without it are read in the old positional order`,
    );
  }
  if (!deprecation.warned) {
    deprecation.warned = true;
    deprecation.log(
      `fuse-uring: deprecated: path handlers in the positional argument order (removed in the next release). ` +
        `Wrap them in defineFs({ … }) and use (path, args, ctx): ${old.map((n) => POSITIONAL[n]).join("; ")}`,
    );
  }
  return handlers as LegacyPathHandlers<H>;
}
