// Backed open files (`backed()` in types.ts): the descriptor behind one open file of the path
// layer. This module opens paths with the flags the caller's open needs, checks descriptors a
// handler hands over (a bad one would make every native READ/WRITE fail, or worse, succeed on
// the wrong kind of file), and does the few syscalls the layer needs on it: fstat for the
// size stat reports, ftruncate, fsync, close. The data itself never passes through here: the
// shim serves READ/WRITE/FSYNC from the descriptor (docs/DATAPLANE.md).

import { closeSync, fchmodSync, fdatasync, fstatSync, fsync, ftruncate, openSync, readFileSync } from "node:fs";
import type { Attr } from "../protocol/structs.ts";
import { fsPath } from "../protocol/names.ts";
import type { Backed, BackingSource } from "./types.ts";

// Linux (x86-64 and arm64 share these).
export const O_ACCMODE = 3;
export const O_RDONLY = 0;
export const O_WRONLY = 1;
export const O_RDWR = 2;
export const O_CREAT = 0o100;
export const O_EXCL = 0o200;
export const O_TRUNC = 0o1000;
export const O_APPEND = 0o2000;
/** O_SYNC is __O_SYNC | O_DSYNC, so masking with it keeps O_DSYNC alone too. */
export const O_SYNC = 0o4010000;
export const O_CLOEXEC = 0o2000000;
export const O_PATH = 0o10000000;

export interface BackingModes {
  /** From `create`: add O_CREAT (with the file's mode). */
  create: boolean;
  /** FUSE_WRITEBACK_CACHE granted: the kernel reads pages of files open for writing and does appends itself. */
  writebackCache: boolean;
}

/** open(2) flags for a path backing an open with the kernel's `flags`. */
export function backingOpenFlags(flags: number, m: BackingModes): number {
  let acc = flags & O_ACCMODE;
  let keep = flags & (O_APPEND | O_TRUNC | O_SYNC);
  if (m.writebackCache) {
    if (acc === O_WRONLY) acc = O_RDWR;
    keep &= ~O_APPEND; // an O_APPEND fd would put the kernel's page writes at the end
  }
  return acc | keep | (m.create ? O_CREAT : 0) | O_CLOEXEC;
}

/** The `flags:` line of /proc/self/fdinfo/N (octal), or null. */
export function parseFdinfoFlags(text: string): number | null {
  const m = /^flags:\s*([0-7]+)\s*$/m.exec(text);
  return m ? parseInt(m[1]!, 8) : null;
}

/** Why a descriptor with status flags `fdFlags` cannot serve an open with `flags` (null: it can). */
export function accessProblem(fdFlags: number, flags: number, writebackCache: boolean): string | null {
  if (fdFlags & O_PATH) return "it is an O_PATH descriptor (no I/O through it)";
  const have = fdFlags & O_ACCMODE;
  const want = flags & O_ACCMODE;
  const canRead = have === O_RDONLY || have === O_RDWR;
  const canWrite = have === O_WRONLY || have === O_RDWR;
  const writes = want === O_WRONLY || want === O_RDWR;
  if (writes && !canWrite) return "it is open read-only, but the caller opened the file for writing";
  if (want !== O_WRONLY && !canRead) return "it is open write-only, but the caller opened the file for reading";
  if (writes && writebackCache) {
    if (!canRead) return "it is open write-only; with --writeback-cache the kernel reads pages of files open for writing (open it O_RDWR)";
    if (fdFlags & O_APPEND) return "it has O_APPEND, which --writeback-cache cannot use (the kernel writes pages back at their offsets)";
  }
  return null;
}

/** Why descriptor `fd` cannot back an open with `flags`, or null. `open` false: fd is not open at all. */
export function checkDescriptor(fd: number, flags: number, writebackCache: boolean): { why: string; open: boolean } | null {
  let info: string;
  try {
    info = readFileSync(`/proc/self/fdinfo/${fd}`, "utf8");
  } catch {
    return { why: "it is not an open file descriptor", open: false };
  }
  const fdFlags = parseFdinfoFlags(info);
  if (fdFlags === null) return { why: `/proc/self/fdinfo/${fd} shows no flags`, open: true };
  const why = accessProblem(fdFlags, flags, writebackCache);
  if (why) return { why, open: true };
  return notDirectory(fd);
}

/** A directory would answer every READ with EISDIR: refuse it at open. */
export function notDirectory(fd: number): { why: string; open: boolean } | null {
  try {
    if (fstatSync(fd).isDirectory()) return { why: "it is a directory", open: true };
  } catch (e) {
    return { why: `fstat failed (${(e as { code?: string }).code ?? String(e)})`, open: true };
  }
  return null;
}

/** "fd 7", "/srv/a.txt" — for log lines. */
export function describeSource(src: BackingSource): string {
  if (typeof src === "number") return `fd ${src}`;
  if (typeof src === "string") return JSON.stringify(src);
  return `Bun.file(${JSON.stringify((src as { name?: string }).name)})`;
}

function done(resolve: () => void, reject: (e: unknown) => void) {
  return (err: NodeJS.ErrnoException | null) => (err ? reject(err) : resolve());
}

export interface BackedSize {
  size: number;
  blocks: number;
}

/** Put a descriptor's size (from BackingFile.size) into attributes. */
export function applySize(attr: Attr, s: BackedSize | null): Attr {
  if (s) {
    attr.size = s.size;
    attr.blocks = s.blocks;
  }
  return attr;
}

/** The descriptor of one backed open file. */
export class BackingFile {
  private closed = false;
  /**
   * @param owned the layer closes it after release: it opened it (path, Bun.file) or was told
   *   to (`close: true`).
   */
  constructor(readonly fd: number, public owned: boolean, readonly source: string, readonly writable: boolean) {}

  /** Open (path, Bun.file) or adopt (descriptor) what `b` names, for an open with `flags`. */
  static open(b: Backed, flags: number, mode: number, m: BackingModes): BackingFile {
    const src = b.source;
    const writable = (flags & O_ACCMODE) !== O_RDONLY;
    if (typeof src === "number") return new BackingFile(src, b.close === true, describeSource(src), writable);
    const path = fsPath(typeof src === "string" ? src : (src as unknown as { name: string }).name); // names are bytes
    // Synchronous like the passthrough's opens: a local open is microseconds, and an error
    // keeps its errno (ENOENT, EACCES, …) for the caller.
    const f = backingOpenFlags(flags, m);
    if (!m.create) return new BackingFile(openSync(path, f), true, describeSource(src), writable);
    // Created here: the mode (the caller's umask already applied) is set exactly, whatever the
    // daemon's own umask strips. O_EXCL tells whether this open created the file.
    let fd: number;
    try {
      fd = openSync(path, f | O_EXCL, mode & 0o7777);
    } catch (e) {
      if ((e as { code?: string }).code !== "EEXIST" || flags & O_EXCL) throw e;
      return new BackingFile(openSync(path, f & ~O_CREAT), true, describeSource(src), writable);
    }
    const file = new BackingFile(fd, true, describeSource(src), writable);
    try {
      fchmodSync(fd, mode & 0o7777);
    } catch (e) {
      file.close();
      throw e;
    }
    return file;
  }

  /**
   * The descriptor's size and blocks (native writes change them without JS knowing), or null.
   * Taken when a GETATTR starts, before the handler's getattr is awaited: a RELEASE handled
   * meanwhile may close the descriptor (and the number be reused) before that resolves.
   */
  size(): BackedSize | null {
    try {
      const st = fstatSync(this.fd);
      return { size: st.size, blocks: st.blocks };
    } catch {
      return null; // closed behind our back: the handler's getattr stands
    }
  }

  truncate(size: number): Promise<void> {
    return new Promise((resolve, reject) => ftruncate(this.fd, size, done(resolve, reject)));
  }

  /** On the thread pool: fsync can block for a long time. */
  sync(datasync: boolean): Promise<void> {
    return new Promise((resolve, reject) => (datasync ? fdatasync : fsync)(this.fd, done(resolve, reject)));
  }

  close(): void {
    if (this.closed || !this.owned) return;
    this.closed = true;
    try {
      closeSync(this.fd);
    } catch {}
  }
}
