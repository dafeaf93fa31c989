// toInodeFS: what mount() and the script loader accept, turned into the inode API.

import type { InodeFS } from "../session/filesystem.ts";
import { isTreeDir, tree, type DirEntries, type DirSpec } from "../tree.ts";
import { isPathFS, paths, type Notifier, type PathFS } from "./pathfs.ts";
import { describe } from "./stat.ts";
import type { PathHandlers } from "./types.ts";
import type { DefinedFs } from "./args.ts";

/** Anything mount() can serve: an InodeFS, path handlers (defineFs() or positional), or a tree object. */
export type Filesystem = InodeFS | DefinedFs | PathHandlers | DirEntries | DirSpec;

function isInodeFS(x: object): x is InodeFS {
  return typeof (x as { lookup?: unknown }).lookup === "function";
}

function isPathHandlers(x: object): x is PathHandlers {
  return typeof (x as { getattr?: unknown }).getattr === "function";
}

/** Method names of path handlers and of the inode API: a value under one of these is a handler. */
const HANDLER_NAMES = new Set([
  "init", "destroy", "getattr", "readdir", "open", "read", "write", "readFile", "writeFile", "flush", "fsync", "release",
  "create", "mknod", "mkdir", "unlink", "rmdir", "rename", "link", "symlink", "readlink", "truncate", "chmod", "chown",
  "utimens", "statfs", "access", "getxattr", "setxattr", "listxattr", "removexattr",
  "lookup", "forget", "setattr", "opendir", "releasedir", "fsyncdir", "fallocate", "lseek", "copyFileRange",
  "ioctl", "poll", "tmpfile", "getlk", "setlk", "flock",
]);

/** A TypeError about one key of the filesystem object (the script loader points at its line). */
export class HandlerShapeError extends TypeError {
  constructor(readonly key: string, message: string) {
    super(message);
  }
}

/**
 * A plain object with a handler name whose value is not a function: `{ getattr: 5 }` would
 * otherwise become a tree with an unreadable file "getattr" and answer EIO forever. A value that
 * is valid tree content (`{ read: "text" }`, a file called "read") stays a tree, unless the
 * object also has real handlers (then every handler name must be a function).
 */
function checkHandlerShape(x: object): void {
  const proto = Object.getPrototypeOf(x);
  if (proto !== Object.prototype && proto !== null) return;
  const rec = x as Record<string, unknown>;
  const keys = Object.keys(rec).filter((k) => HANDLER_NAMES.has(k));
  if (keys.length === 0) return;
  const hasHandlers = keys.some((k) => typeof rec[k] === "function");
  for (const k of keys) {
    const v = rec[k];
    if (typeof v === "function") continue;
    const treeContent = typeof v === "string" || v instanceof Uint8Array || v instanceof ArrayBuffer || v instanceof Blob || (typeof v === "object" && v !== null);
    if (hasHandlers || !treeContent) {
      throw new HandlerShapeError(k, `handler "${k}" is ${describe(v)}; a handler must be a function, e.g. ${k}(${k === "getattr" ? "path" : "…"}) { … }`);
    }
  }
}

/**
 * Convert by shape: a PathFS (from paths()/tree()) or any object with a `lookup` method is an
 * InodeFS; an object with a `getattr` method is a set of path handlers; any other plain object
 * or Map (or dir()) is a tree.
 */
export function toInodeFS(x: Filesystem): InodeFS {
  if (typeof x !== "object" || x === null) {
    throw new TypeError(`expected a filesystem (a tree object, path handlers with getattr(), or an InodeFS with lookup()), got ${describe(x)}`);
  }
  if (isPathFS(x)) return x;
  checkHandlerShape(x);
  if (isInodeFS(x)) return x;
  if (isPathHandlers(x)) return paths(x);
  if (isTreeDir(x)) return tree(x);
  throw new TypeError(
    `expected a filesystem (a tree object, path handlers with getattr(), or an InodeFS with lookup()), got ${describe(x)}`,
  );
}

/** The parts of Mount the helpers below use (structural, so there is no import cycle). */
export interface MountLike extends Notifier {
  readonly session: { readonly fs: InodeFS };
}

function pathFSOf(m: MountLike): PathFS {
  const fs = m.session.fs;
  if (!isPathFS(fs)) throw new TypeError("invalidate(path) needs a path-based filesystem (tree(), paths() or a plain object); use invalidateInode(ino) for an InodeFS");
  return fs;
}

/**
 * Connect a mounted filesystem to its Mount so that `fs.invalidate(path)` works from inside the
 * filesystem (scripts run by the CLI have no Mount object). Called by mount(); harmless for an
 * InodeFS that is not path based.
 */
export function attachMount(fs: InodeFS, m: Notifier): void {
  if (isPathFS(fs)) fs.attach(m);
}

/**
 * Drop what the kernel cached for `path` (data, attributes and the name). Returns false if it
 * had nothing cached. `m.invalidate(path)`.
 */
export function invalidatePath(m: MountLike, path: string): Promise<boolean> {
  const fs = pathFSOf(m);
  fs.attach(m);
  return fs.invalidate(path);
}

/** Drop the cached name `name` in directory `parentPath`. `m.invalidateEntry(parentPath, name)`. */
export function invalidateEntryPath(m: MountLike, parentPath: string, name: string): Promise<boolean> {
  const fs = pathFSOf(m);
  fs.attach(m);
  return fs.invalidateEntry(parentPath, name);
}
