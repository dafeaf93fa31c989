// Named-argument forms of the inode API for the methods whose positional lists are long
// (copyFileRange has 9 parameters). Opt-in with defineInodeFs({ … }); every existing InodeFS
// (memfs, passthrough, classes implementing InodeFS) keeps the positional form the dispatcher
// calls, untouched. The rule: `method(ctx, <the node the request addresses>, { … the rest })` —
// the request context first, then the node id (or parent + name), then one object.
//
// The positional form stays the allocation-free one: the adapter builds one small object per
// call, which is nothing next to a handler that allocates anyway, but a hot-path filesystem that
// cares can keep writing positional methods (both forms mix freely in one object).

import type { CreateReply, DirFiller, Entry, InodeFS, RequestContext } from "./types.ts";

type P<T> = T | Promise<T>;

export interface InodeReadArgs {
  fh: number;
  offset: number;
  size: number;
  /** A view of the reply buffer, exactly `size` bytes: fill it and return the count, or return bytes. Valid only until the handler settles. */
  out: Uint8Array;
}
export interface InodeWriteArgs {
  fh: number;
  offset: number;
  /** A view of the request buffer, valid only until the handler settles (copy what you keep). */
  data: Uint8Array;
  /** FUSE_WRITE_* bits (FUSE_WRITE_CACHE: from the page cache). */
  writeFlags: number;
  /** The open file's flags. */
  openFlags: number;
}
export interface InodeCreateArgs {
  mode: number;
  umask: number;
  flags: number;
}
export interface InodeMknodArgs {
  mode: number;
  rdev: number;
  umask: number;
}
export interface InodeMkdirArgs {
  mode: number;
  umask: number;
}
export interface InodeRenameArgs {
  newParent: number;
  newName: string;
  /** RENAME_NOREPLACE / RENAME_EXCHANGE / RENAME_WHITEOUT (see renameFlags). */
  flags: number;
}
export interface InodeFallocateArgs {
  fh: number;
  offset: number;
  length: number;
  /** FALLOC_FL_* bits (see fallocMode). */
  mode: number;
}
export interface InodeLseekArgs {
  fh: number;
  offset: number;
  /** SEEK_DATA or SEEK_HOLE. */
  whence: number;
}
export interface InodeSetxattrArgs {
  name: string;
  /** A view of the request buffer, valid only until the handler settles. */
  value: Uint8Array;
  /** XATTR_CREATE / XATTR_REPLACE (see xattrMode). */
  flags: number;
}
export interface InodeReaddirArgs {
  fh: number;
  offset: number;
  filler: DirFiller;
}
export interface FileRange {
  ino: number;
  fh: number;
  offset: number;
}
export interface InodeCopyArgs {
  from: FileRange;
  to: FileRange;
  length: number;
  flags: number;
}

const NAMED = [
  "read", "write", "create", "mknod", "mkdir", "rename", "fallocate", "lseek", "setxattr", "readdir", "copyFileRange",
] as const;
type Named = (typeof NAMED)[number];

/** An inode filesystem whose long-list methods take one object (see the rule above). */
export interface NamedInodeFS extends Omit<InodeFS, Named> {
  read?(ctx: RequestContext, ino: number, args: InodeReadArgs): P<number | Uint8Array>;
  write?(ctx: RequestContext, ino: number, args: InodeWriteArgs): P<number>;
  create?(ctx: RequestContext, parent: number, name: string, args: InodeCreateArgs): P<CreateReply>;
  mknod?(ctx: RequestContext, parent: number, name: string, args: InodeMknodArgs): P<Entry>;
  mkdir?(ctx: RequestContext, parent: number, name: string, args: InodeMkdirArgs): P<Entry>;
  rename?(ctx: RequestContext, parent: number, name: string, args: InodeRenameArgs): P<void>;
  fallocate?(ctx: RequestContext, ino: number, args: InodeFallocateArgs): P<void>;
  lseek?(ctx: RequestContext, ino: number, args: InodeLseekArgs): P<number>;
  setxattr?(ctx: RequestContext, ino: number, args: InodeSetxattrArgs): P<void>;
  readdir?(ctx: RequestContext, ino: number, args: InodeReaddirArgs): P<void>;
  copyFileRange?(ctx: RequestContext, args: InodeCopyArgs): P<number>;
}

type Fn = (...a: any[]) => any;

const ADAPT: Record<Named, (f: Fn) => Fn> = {
  read: (f) => function (this: unknown, ctx, ino, fh, offset, size, out) { return f.call(this, ctx, ino, { fh, offset, size, out }); },
  write: (f) => function (this: unknown, ctx, ino, fh, offset, data, writeFlags, openFlags) { return f.call(this, ctx, ino, { fh, offset, data, writeFlags, openFlags }); },
  create: (f) => function (this: unknown, ctx, parent, name, mode, umask, flags) { return f.call(this, ctx, parent, name, { mode, umask, flags }); },
  mknod: (f) => function (this: unknown, ctx, parent, name, mode, rdev, umask) { return f.call(this, ctx, parent, name, { mode, rdev, umask }); },
  mkdir: (f) => function (this: unknown, ctx, parent, name, mode, umask) { return f.call(this, ctx, parent, name, { mode, umask }); },
  rename: (f) => function (this: unknown, ctx, parent, name, newParent, newName, flags) { return f.call(this, ctx, parent, name, { newParent, newName, flags }); },
  fallocate: (f) => function (this: unknown, ctx, ino, fh, offset, length, mode) { return f.call(this, ctx, ino, { fh, offset, length, mode }); },
  lseek: (f) => function (this: unknown, ctx, ino, fh, offset, whence) { return f.call(this, ctx, ino, { fh, offset, whence }); },
  setxattr: (f) => function (this: unknown, ctx, ino, name, value, flags) { return f.call(this, ctx, ino, { name, value, flags }); },
  readdir: (f) => function (this: unknown, ctx, ino, fh, offset, filler) { return f.call(this, ctx, ino, { fh, offset, filler }); },
  copyFileRange: (f) =>
    function (this: unknown, ctx, inoIn, fhIn, offIn, inoOut, fhOut, offOut, length, flags) {
      return f.call(this, ctx, { from: { ino: inoIn, fh: fhIn, offset: offIn }, to: { ino: inoOut, fh: fhOut, offset: offOut }, length, flags });
    },
};

/**
 * An InodeFS from methods in the named form: `defineInodeFs({ lookup(ctx, parent, name) {…},
 * read(ctx, ino, { fh, offset, size, out }) {…} })`. The result's prototype is the given object
 * (so `this` and its other members work); only the named-form methods are wrapped.
 */
export function defineInodeFs<T extends NamedInodeFS>(fs: T): InodeFS & Omit<T, Named> {
  if (typeof fs !== "object" || fs === null) throw new TypeError("defineInodeFs(): expected an object of inode methods");
  const out = Object.create(fs) as Record<string, unknown>;
  for (const name of NAMED) {
    const f = (fs as unknown as Record<string, unknown>)[name];
    if (typeof f === "function") out[name] = ADAPT[name](f as Fn);
  }
  return out as unknown as InodeFS & Omit<T, Named>;
}
