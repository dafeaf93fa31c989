// Turning the plain objects path handlers return into complete kernel attributes.

import { FuseError } from "../protocol/errors.ts";
import { nameByteLength } from "../protocol/names.ts";
import type { Attr } from "../protocol/structs.ts";
import { S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK } from "../protocol/structs.ts";
import type { Content, FileType, StatLike, TimeLike } from "./types.ts";

const processUid = typeof process.getuid === "function" ? process.getuid() : 0;
const processGid = typeof process.getgid === "function" ? process.getgid() : 0;

const typeBits: Record<FileType, number> = {
  file: S_IFREG, dir: S_IFDIR, directory: S_IFDIR, symlink: S_IFLNK, fifo: S_IFIFO, socket: S_IFSOCK, char: S_IFCHR, block: S_IFBLK,
};

/** [seconds, nanoseconds] from a Date, milliseconds or a pair. */
export function toTimespec(t: TimeLike, what = "time"): [number, number] {
  let ms: number;
  if (t instanceof Date) ms = t.getTime();
  else if (typeof t === "number") ms = t;
  else if (Array.isArray(t) && t.length === 2) {
    const [s, ns] = t as readonly [number, number];
    if (Number.isFinite(s) && Number.isFinite(ns)) return [Math.floor(s), Math.min(999_999_999, Math.max(0, Math.floor(ns)))];
    ms = NaN;
  } else ms = NaN;
  if (!Number.isFinite(ms)) throw new TypeError(`${what}: ${String(t)} is not a valid time (use a Date, milliseconds or [sec, nsec])`);
  const sec = Math.floor(ms / 1000);
  return [sec, Math.min(999_999_999, Math.max(0, Math.round((ms - sec * 1000) * 1e6)))];
}

function num(v: number | bigint | undefined, what: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  const n = typeof v === "bigint" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) throw new TypeError(`getattr: ${what} must be a number ≥ 0, got ${String(v)}`);
  return Math.floor(n);
}

export interface StatDefaults {
  /** Default times (when the filesystem was created). */
  time: [number, number];
  /** Whether the filesystem can write files / create entries (default permission bits). */
  writable: boolean;
  dirWritable: boolean;
}

/** S_IFMT type bits of a StatLike (see StatLike for the inference rules). */
export function typeOf(st: StatLike, path: string): number {
  const mode = st.mode;
  if (typeof mode === "number" && (mode & S_IFMT) !== 0) return mode & S_IFMT;
  if (st.type !== undefined) {
    const t = typeBits[st.type];
    if (t === undefined) throw new TypeError(`getattr(${JSON.stringify(path)}): unknown type ${JSON.stringify(st.type)} (file, dir, symlink, fifo, socket, char, block)`);
    return t;
  }
  if (typeof st.target === "string") return S_IFLNK;
  return path === "/" ? S_IFDIR : S_IFREG;
}

/** A complete Attr from what a handler returned. `size` overrides st.size when given. */
export function toAttr(st: StatLike, path: string, ino: number, d: StatDefaults, size?: number): Attr {
  if (typeof st !== "object" || st === null) {
    throw new TypeError(`getattr(${JSON.stringify(path)}) returned ${st === null ? "null" : typeof st}; expected an object like { mode, size, mtime } or null for ENOENT`);
  }
  const type = typeOf(st, path);
  let perm: number;
  if (typeof st.mode === "number") perm = st.mode & 0o7777;
  else if (type === S_IFDIR) perm = d.dirWritable ? 0o755 : 0o555;
  else if (type === S_IFLNK) perm = 0o777;
  else perm = d.writable ? 0o644 : 0o444;
  const isDir = type === S_IFDIR;
  let sz = size ?? num(st.size, "size");
  if (sz === undefined) sz = type === S_IFLNK && typeof st.target === "string" ? nameByteLength(st.target) : 0;
  const time = (t: TimeLike | undefined, ms: number | undefined, what: string, dflt: [number, number]): [number, number] =>
    t !== undefined ? toTimespec(t, `getattr(${JSON.stringify(path)}).${what}`) : ms !== undefined ? toTimespec(ms, what) : dflt;
  const mtime = time(st.mtime, st.mtimeMs, "mtime", d.time);
  const atime = time(st.atime, st.atimeMs, "atime", mtime);
  const ctime = time(st.ctime, st.ctimeMs, "ctime", mtime);
  return {
    ino: num(st.ino, "ino") || ino,
    mode: type | perm,
    nlink: num(st.nlink, "nlink") ?? (isDir ? 2 : 1),
    uid: num(st.uid, "uid") ?? processUid,
    gid: num(st.gid, "gid") ?? processGid,
    rdev: num(st.rdev, "rdev") ?? 0,
    size: sz,
    blocks: num(st.blocks, "blocks") ?? Math.ceil(sz / 512),
    blksize: num(st.blksize, "blksize") || 4096,
    atime: atime[0],
    atimeNsec: atime[1],
    mtime: mtime[0],
    mtimeNsec: mtime[1],
    ctime: ctime[0],
    ctimeNsec: ctime[1],
  };
}

/** Whether `st` says nothing about the size (so it may be computed from the content). */
export function hasSize(st: StatLike): boolean {
  return st.size !== undefined && st.size !== null;
}

const encoder = new TextEncoder();

/** Content as bytes (Blobs are read completely). */
export async function contentBytes(c: Content | null | undefined, what: string): Promise<Uint8Array> {
  if (c === null || c === undefined) return new Uint8Array(0);
  if (typeof c === "string") return encoder.encode(c);
  if (c instanceof Uint8Array) return c;
  if (c instanceof ArrayBuffer) return new Uint8Array(c);
  if (ArrayBuffer.isView(c)) return new Uint8Array(c.buffer, c.byteOffset, c.byteLength);
  if (c instanceof Blob) return new Uint8Array(await c.arrayBuffer());
  throw new TypeError(`${what} returned ${describe(c)}; expected a string, Uint8Array, ArrayBuffer or Blob`);
}

/** Byte length of content without copying (Blob: its size). */
export function contentLength(c: Content | null | undefined, what: string): number {
  if (c === null || c === undefined) return 0;
  if (typeof c === "string") return Buffer.byteLength(c, "utf8");
  if (c instanceof Uint8Array || c instanceof ArrayBuffer || ArrayBuffer.isView(c)) return c.byteLength;
  if (c instanceof Blob) return c.size;
  throw new TypeError(`${what} returned ${describe(c)}; expected a string, Uint8Array, ArrayBuffer or Blob`);
}

export function isContent(c: unknown): c is Content {
  return typeof c === "string" || c instanceof Uint8Array || c instanceof ArrayBuffer || ArrayBuffer.isView(c) || c instanceof Blob;
}

export function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return `an object (${(v as object).constructor?.name ?? "no prototype"})`;
  if (typeof v === "function") return "a function";
  return `a ${typeof v} (${String(v).slice(0, 40)})`;
}

/** Throw an errno unless `v` is a non-empty name without "/" and at most 255 bytes. */
export function checkName(name: string): void {
  // In bytes: U+DC80–U+DCFF stand for one byte each (protocol/names.ts).
  if (name.length > 85 && nameByteLength(name) > 255) throw new FuseError("ENAMETOOLONG");
}
