// attr({...}) and entry({...}): complete Attr / Entry values from the few fields that matter, so
// an inode filesystem never hand-writes the 14 fields of an Attr. Defaults follow stat(2) of a
// fresh file owned by the daemon: regular file 0644 (dir 0755, symlink 0777), nlink 1 (dir 2),
// the process's uid/gid, size 0, blocks = ceil(size / 512), blksize 4096, all times = now.

import { nowTimespec } from "../fs/attr.ts";
import type { Attr, AttrReply, Entry } from "../protocol/structs.ts";
import { S_IFDIR, S_IFLNK, S_IFMT } from "../protocol/structs.ts";
import { toTimespec, typeOf } from "../path/stat.ts";
import type { FileType, TimeLike } from "../path/types.ts";

const processUid = typeof process.getuid === "function" ? process.getuid() : 0;
const processGid = typeof process.getgid === "function" ? process.getgid() : 0;

export interface AttrInit {
  /** st_ino (default 0: the kernel shows the node id's inode number only if you set it). */
  ino?: number;
  /** Type bits and/or permission bits; S_IFMT bits win over `type`. */
  mode?: number;
  /** "file" (default), "dir", "symlink", "fifo", "socket", "char", "block". */
  type?: FileType;
  size?: number;
  nlink?: number;
  uid?: number;
  gid?: number;
  rdev?: number;
  blocks?: number;
  blksize?: number;
  /** Sets atime, mtime and ctime at once (each of them still wins). */
  time?: TimeLike;
  atime?: TimeLike;
  mtime?: TimeLike;
  ctime?: TimeLike;
}

function count(v: number | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new TypeError(`attr(): ${what} must be a number ≥ 0, got ${String(v)}`);
  return Math.floor(v);
}

/** A complete Attr: `attr({ ino: 2, type: "dir" })`, `attr({ ino, size: 5, mtime: new Date() })`. */
export function attr(init: AttrInit = {}): Attr {
  if (typeof init !== "object" || init === null) throw new TypeError("attr(): expected an object like { ino, mode, size }");
  // typeOf: mode's S_IFMT bits, else `type`, else a regular file (the path "" is never the root).
  const type = typeOf({ mode: init.mode, type: init.type }, "");
  const perm = typeof init.mode === "number" && (init.mode & ~S_IFMT) !== 0 ? init.mode & 0o7777 : type === S_IFDIR ? 0o755 : type === S_IFLNK ? 0o777 : 0o644;
  const size = count(init.size, "size") ?? 0;
  const base = init.time !== undefined ? toTimespec(init.time, "attr().time") : nowTimespec();
  const t = (v: TimeLike | undefined, what: string) => (v === undefined ? base : toTimespec(v, `attr().${what}`));
  const [atime, atimeNsec] = t(init.atime, "atime");
  const [mtime, mtimeNsec] = t(init.mtime, "mtime");
  const [ctime, ctimeNsec] = t(init.ctime, "ctime");
  return {
    ino: count(init.ino, "ino") ?? 0,
    mode: type | perm,
    nlink: count(init.nlink, "nlink") ?? (type === S_IFDIR ? 2 : 1),
    uid: count(init.uid, "uid") ?? processUid,
    gid: count(init.gid, "gid") ?? processGid,
    rdev: count(init.rdev, "rdev") ?? 0,
    size,
    blocks: count(init.blocks, "blocks") ?? Math.ceil(size / 512),
    blksize: count(init.blksize, "blksize") || 4096,
    atime, atimeNsec, mtime, mtimeNsec, ctime, ctimeNsec,
  };
}

export interface EntryInit extends AttrInit {
  /** The node id handed to the kernel (one lookup reference; FORGET gives it back). */
  ino: number;
  /** A prepared Attr (from attr() or your table); else built from the other fields. */
  attr?: Attr;
  generation?: number;
  /** Seconds the kernel may cache the name (default: the mount's entryTtl). */
  entryTtl?: number;
  /** Seconds the kernel may cache the attributes (default: the mount's attrTtl). */
  attrTtl?: number;
}

/**
 * An Entry for lookup/mkdir/mknod/symlink/link/create replies: `entry({ ino: 5, type: "dir" })`.
 * The attributes' st_ino defaults to the node id.
 */
export function entry(init: EntryInit): Entry {
  if (typeof init !== "object" || init === null || typeof init.ino !== "number") throw new TypeError("entry(): expected an object with the node id, { ino, … }");
  const { attr: given, generation, entryTtl, attrTtl, ...rest } = init;
  const e: Entry = { ino: init.ino, attr: given ?? attr(rest) };
  if (generation !== undefined) e.generation = generation;
  if (entryTtl !== undefined) e.entryTtl = entryTtl;
  if (attrTtl !== undefined) e.attrTtl = attrTtl;
  return e;
}

/** A cached negative entry (node id 0) for lookup: the kernel remembers the name is absent. */
export function negativeEntry(entryTtl?: number): Entry {
  const e: Entry = { ino: 0, attr: attr() };
  if (entryTtl !== undefined) e.entryTtl = entryTtl;
  return e;
}

/** A getattr/setattr reply with its own attribute TTL. */
export function attrReply(a: Attr | AttrInit, attrTtl?: number): AttrReply {
  const full = isAttr(a) ? a : attr(a);
  return attrTtl === undefined ? { attr: full } : { attr: full, attrTtl };
}

function isAttr(a: Attr | AttrInit): a is Attr {
  return typeof (a as Attr).atimeNsec === "number" && typeof (a as Attr).mode === "number" && typeof (a as Attr).nlink === "number";
}
