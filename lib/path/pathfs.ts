// PathFS: serves PathHandlers through the inode API. It owns what path-based authors should not
// have to think about:
// - the inode table (nodes.ts): node ids for paths the kernel knows, kept while the kernel holds
//   lookup references (LOOKUP, CREATE, MKDIR, READDIRPLUS … add one, FORGET gives them back) or
//   a file is open, updated on rename/unlink so ids stay attached to the right file. One
//   thread's table by default; `threads: "stateless"` scripts run a PathFS per thread over one
//   table in SharedArrayBuffers (nodes-shared.ts), see copies();
// - file handles: whatever `open` returns is handed back to read/write/release;
// - whole-file snapshots for `readFile`/`writeFile` handlers;
// - backed open files (`backed()`): the descriptor the shim serves READ/WRITE/FSYNC from, its
//   size in stat while open, truncation and fsync on it, closing it (backing.ts);
// - directory streams with stable offsets (the listing is taken once per opendir);
// - path → node id resolution for cache invalidation (`invalidate`).

import { Errno, errnoOf, FuseError } from "../protocol/errors.ts";
import type { Attr, AttrReply, CreateReply, Entry, IoctlReply, OpenReply, SetattrChanges, Statfs } from "../protocol/structs.ts";
import type { DirFiller, InitInfo, InodeFS, RequestContext } from "../session/filesystem.ts";
import { S_IFDIR, S_IFLNK, S_IFMT, S_IFREG } from "../protocol/structs.ts";
import { nowTimespec } from "../fs/attr.ts";
import { decodeName } from "../protocol/names.ts";
import { readSync, writeSync } from "node:fs";
import { checkName, contentBytes, contentLength, describe, hasSize, toAttr, toTimespec, typeOf, type StatDefaults } from "./stat.ts";
import { applySize, BackingFile, checkDescriptor, notDirectory, O_ACCMODE, O_RDONLY, O_TRUNC, O_WRONLY, type BackedSize } from "./backing.ts";
import { isBacked, isOpened, type Backed, type Content, type DirEntryLike, type PathFSOptions, type PathHandlers, type StatLike } from "./types.ts";
import { toPositional, type DefinedFs } from "./args.ts";
import { DYNAMIC, joinPath, LocalNodes, ROOT, SIZE_AT_OPEN, type HandleRecord, type NodeTable } from "./nodes.ts";
import { createPathTable, isPathTableShare, SharedNodes, type PathTableShare } from "./nodes-shared.ts";
import type { CopiesPlan } from "../session/filesystem.ts";

export const PATHFS: unique symbol = Symbol.for("fuse-uring.pathfs");
/** Set by tree() on its PathFS (tree.ts's TREE_FS): its writeFile is a tree's, see copies(). */
const TREE_MARK: unique symbol = Symbol.for("fuse-uring.treefs") as never;

const RENAME_NOREPLACE = 1;

interface FileHandle {
  kind: "file";
  fh: number;
  ino: number;
  /** Shared table: the record's serial number (a cached view of a released fh is stale). */
  serial: number;
  /** The path when opened (stays valid for handlers even if the file is unlinked). */
  path: string;
  value: unknown;
  flags: number;
  /** Snapshot mode: the content (null = not loaded yet). */
  data: Uint8Array | null;
  /** Length of `data` in use (data may have spare capacity). */
  length: number;
  /** A Blob served lazily (Bun.file) instead of bytes, for read-only opens. */
  blob: Blob | null;
  dirty: boolean;
  /** write() was called since open (a flush of a merely truncated file is deferred). */
  written: boolean;
  snapshot: boolean;
  /** backed(): the descriptor READ/WRITE/FSYNC are served from. */
  backing: BackingFile | null;
}

interface DirHandle {
  kind: "dir";
  ino: number;
  serial: number;
  path: string;
  entries: DirEntryLike[];
  iterator: Iterator<DirEntryLike> | AsyncIterator<DirEntryLike> | null;
  done: boolean;
}

type Handle = FileHandle | DirHandle;

const defaultStatfs: Statfs = { blocks: 0, bfree: 0, bavail: 0, files: 0, ffree: 0, bsize: 4096, namelen: 255, frsize: 4096 };

/** Split "/a/b/c" into ["a", "b", "c"]; "" and "/" are the root. Rejects "..". */
export function splitPath(path: string): string[] {
  if (typeof path !== "string") throw new TypeError(`path must be a string, got ${describe(path)}`);
  const parts = path.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw new TypeError(`path ${JSON.stringify(path)}: ".." is not allowed`);
  return parts;
}

function isAsyncIterable(x: unknown): x is AsyncIterable<DirEntryLike> {
  return typeof x === "object" && x !== null && typeof (x as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === "function";
}

function isIterable(x: unknown): x is Iterable<DirEntryLike> {
  return typeof x === "object" && x !== null && typeof (x as { [Symbol.iterator]?: unknown })[Symbol.iterator] === "function";
}

/** What Mount offers for notifications (a structural subset of lib/mount.ts's Mount). */
/** Notifications resolve to 0 or -errno; they are written off the JS thread (see Session.notify). */
export interface Notifier {
  invalidateInode(ino: number, off?: number, len?: number): Promise<number>;
  invalidateEntry(parent: number, name: string): Promise<number>;
}

/** Where a script-loaded PathFS came from (lib/script.ts sets it): what copies() names. */
export interface PathScriptSource {
  path: string;
  args: string[];
  mountpoint?: string;
}

export class PathFS implements InodeFS {
  readonly [PATHFS] = true;
  private table: NodeTable = new LocalNodes();
  /** This thread's open handles (shared table: also views of other threads' handles). */
  private handles = new Map<number, Handle>();
  /** Backed open files per node (newest last): stat reports the descriptor's size. */
  private backedOf = new Map<number, FileHandle[]>();
  /**
   * "stateless": the handlers keep no per-instance state (or keep it where every thread sees it:
   * files, a database, SharedArrayBuffers), so a PathFS per thread may serve them over one shared
   * node table. From PathFSOptions.threads, the handlers' `threads`, or set by the script loader.
   */
  threads: "single" | "stateless";
  /** The script this PathFS was loaded from (lib/script.ts), so other threads can load it too. */
  scriptSource: PathScriptSource | null = null;
  private readonly defaults: StatDefaults;
  private readonly snapshotReads: boolean;
  private readonly snapshotWrites: boolean;
  private notifier: Notifier | null = null;
  /** FUSE_WRITEBACK_CACHE granted (set at init): paths are then opened as the kernel's cache needs. */
  private writebackCache = false;

  constructor(readonly handlers: PathHandlers, readonly options: PathFSOptions = {}) {
    if (typeof handlers !== "object" || handlers === null || typeof handlers.getattr !== "function") {
      throw new TypeError("path handlers need at least a getattr(path) function");
    }
    const h = handlers;
    const declared = options.threads ?? (handlers as { threads?: unknown }).threads;
    if (declared !== undefined && declared !== "single" && declared !== "stateless") {
      throw new TypeError(`threads: ${describe(declared)}; expected "stateless" (handlers safe to run on several threads at once) or "single"`);
    }
    this.threads = declared ?? "single";
    this.defaults = {
      time: nowTimespec(),
      writable: !!(h.write || h.writeFile || h.truncate),
      dirWritable: !!(h.create || h.writeFile || h.mkdir || h.mknod || h.symlink || h.unlink || h.rename),
    };
    // Only what the handlers provide reaches the kernel: without an ioctl or poll handler the
    // kernel learns ENOSYS once and stops asking (poll: files are always ready).
    const self = this as { ioctl?: unknown; poll?: unknown };
    if (typeof h.ioctl !== "function") self.ioctl = undefined;
    if (typeof h.poll !== "function") self.poll = undefined;
    this.snapshotReads = !h.read && typeof h.readFile === "function";
    this.snapshotWrites = !h.write && typeof h.writeFile === "function";
    this.trackBusyNodes();
  }

  // ---- requests in flight (so notifications never deadlock) ---------------------------------
  //
  // The kernel holds a directory's lock while LOOKUP/CREATE/… in it wait for our answer, and page
  // locks while READs wait. A notification for that directory (INVAL_ENTRY) or inode
  // (INVAL_INODE) blocks in write(2) until those locks are free, and with one JS thread the
  // answer would never come. So notifications wait until no request on those nodes is in flight
  // here and its reply has been sent (the next macrotask).

  private readonly busy = new Map<number, number>();
  private readonly pendingNotes: { inos: number[]; run: () => void }[] = [];
  private drainScheduled = false;

  private trackBusyNodes(): void {
    const which: Record<string, (a: unknown[]) => unknown[]> = {
      lookup: (a) => [a[1]], getattr: (a) => [a[1]], setattr: (a) => [a[1]], readlink: (a) => [a[1]],
      symlink: (a) => [a[1]], mknod: (a) => [a[1]], mkdir: (a) => [a[1]], unlink: (a) => [a[1]], rmdir: (a) => [a[1]],
      rename: (a) => [a[1], a[3]], link: (a) => [a[1], a[2]], open: (a) => [a[1]], read: (a) => [a[1]], write: (a) => [a[1]],
      flush: (a) => [a[1]], fsync: (a) => [a[1]], release: (a) => [a[1]], create: (a) => [a[1]], readdir: (a) => [a[1]],
    };
    const self = this as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const [name, pick] of Object.entries(which)) {
      const orig = self[name]!.bind(this);
      self[name] = (...args: unknown[]) => {
        const inos = pick(args) as number[];
        this.enter(inos);
        let r: unknown;
        try {
          r = orig(...args);
        } catch (e) {
          this.leave(inos);
          throw e;
        }
        return Promise.resolve(r).finally(() => this.leave(inos));
      };
    }
  }

  private enter(inos: number[]): void {
    for (const i of inos) this.busy.set(i, (this.busy.get(i) ?? 0) + 1);
  }

  private leave(inos: number[]): void {
    for (const i of inos) {
      const n = (this.busy.get(i) ?? 1) - 1;
      if (n > 0) this.busy.set(i, n);
      else this.busy.delete(i);
    }
    if (this.pendingNotes.length && !this.drainScheduled) {
      this.drainScheduled = true;
      setImmediate(() => this.drainNotes());
    }
  }

  private drainNotes(): void {
    this.drainScheduled = false;
    for (let i = 0; i < this.pendingNotes.length; ) {
      const note = this.pendingNotes[i]!;
      if (note.inos.some((ino) => this.busy.has(ino))) {
        i++;
        continue;
      }
      this.pendingNotes.splice(i, 1);
      note.run();
    }
  }

  /** Run `f` (which writes notifications) once no request on `inos` is in flight. */
  private whenIdle<T>(inos: number[], f: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pendingNotes.push({
        inos,
        run: () => {
          f().then(resolve, reject);
        },
      });
      if (!this.drainScheduled) {
        this.drainScheduled = true;
        setImmediate(() => this.drainNotes());
      }
    });
  }

  // ---- public helpers ---------------------------------------------------------------------------

  /** Node id of `path` if the kernel currently knows it (else undefined: nothing is cached). */
  resolve(path: string): number | undefined {
    let n: number | undefined = ROOT;
    for (const part of splitPath(path)) {
      n = this.table.childOf(n, part);
      if (n === undefined) return undefined;
    }
    return n;
  }

  /** Path of a node id the kernel holds (diagnostics, InodeFS wrappers). */
  pathOf(ino: number): string | undefined {
    return this.table.pathOf(ino);
  }

  /** Number of nodes in the table (root included): bounded by what the kernel holds. */
  get nodeCount(): number {
    return this.table.count;
  }

  /** Called by mount() so that invalidate() works; returns a function that detaches. */
  attach(notifier: Notifier): () => void {
    this.notifier = notifier;
    return () => {
      if (this.notifier === notifier) this.notifier = null;
    };
  }

  /**
   * Tell the kernel that `path` changed: its cached data and attributes are dropped, and the
   * name itself is forgotten (so a changed type or a deleted file is noticed). Resolves to false
   * if the kernel had nothing cached for it. Safe to call from inside handlers: the
   * notification is sent once requests on the affected nodes have been answered.
   */
  invalidate(path: string): Promise<boolean> {
    const n = this.notifierOrThrow();
    const parts = splitPath(path);
    const parentPath = "/" + parts.slice(0, -1).join("/");
    const inos = [this.resolve(path), parts.length ? this.resolve(parentPath) : undefined].filter((x): x is number => x !== undefined);
    if (inos.length === 0) return Promise.resolve(false);
    return this.whenIdle(inos, async () => {
      let any = false;
      const ino = this.resolve(path);
      if (ino !== undefined) any = okNotify(await n.invalidateInode(ino, 0, 0)) || any;
      const parent = parts.length ? this.resolve(parentPath) : undefined;
      if (parent !== undefined) any = okNotify(await n.invalidateEntry(parent, parts[parts.length - 1]!)) || any;
      return any;
    });
  }

  /** Drop the cached name `name` in directory `parentPath` (e.g. after adding or removing it). */
  invalidateEntry(parentPath: string, name: string): Promise<boolean> {
    const n = this.notifierOrThrow();
    const parent = this.resolve(parentPath);
    if (parent === undefined) return Promise.resolve(false);
    return this.whenIdle([parent], async () => {
      const p = this.resolve(parentPath);
      return p !== undefined && okNotify(await n.invalidateEntry(p, name));
    });
  }

  private notifierOrThrow(): Notifier {
    if (!this.notifier) throw new Error("invalidate: the filesystem is not mounted (or mount() did not attach it)");
    return this.notifier;
  }

  // ---- node table (nodes.ts) and handles -----------------------------------------------------------

  /** The path of a node the kernel holds (ESTALE if it does not). */
  private nodePath(ino: number): string {
    const p = this.table.pathOf(ino);
    if (p === undefined) throw new FuseError("ESTALE", `unknown node id ${ino}`);
    return p;
  }

  private sharedTable(): SharedNodes | null {
    return this.table.share ? (this.table as SharedNodes) : null;
  }

  /**
   * The handle `fh`. With a shared table it may have been opened by another thread (the caller
   * moved to another CPU): this thread then builds its own view from the shared record (the
   * handler's value, a backed descriptor; snapshots and listings are taken again here).
   */
  private handleOf(fh: number): Handle | undefined {
    const local = this.handles.get(fh);
    const t = this.sharedTable();
    if (!t) return local;
    if (local && local.serial === t.serial(fh)) return local;
    if (local) this.handles.delete(fh);
    const rec = t.handle(fh);
    if (!rec) return undefined;
    const path = this.table.pathOf(rec.ino) ?? "/";
    let h: Handle;
    if (rec.dir) h = { kind: "dir", ino: rec.ino, serial: rec.serial, path, entries: [], iterator: null, done: false };
    else {
      const f = this.newHandle(rec.ino, path, rec.value === undefined ? undefined : JSON.parse(rec.value), rec.flags);
      f.fh = fh;
      f.serial = rec.serial;
      f.snapshot = rec.snapshot;
      if (rec.fd >= 0) f.backing = new BackingFile(rec.fd, rec.owned, `fd ${rec.fd}`, rec.writable);
      h = f;
    }
    this.handles.set(fh, h);
    return h;
  }

  /**
   * A shared table keeps the handler's handle value as JSON (other threads get a copy): refuse
   * what would not survive that, after giving it back to the handler.
   */
  private async checkShareable(ctx: RequestContext, path: string, v: unknown): Promise<void> {
    if (!this.table.share) return;
    const value = isOpened(v) || isBacked(v) ? v.handle : v;
    const why = unshareable(value);
    if (!why) return;
    try {
      await this.handlers.release?.(path, value, ctx);
    } finally {
      throw new TypeError(`${JSON.stringify(path)}: threads: "stateless" hands file handles to other threads as JSON, but open/create returned ${why}; return a number, a string or plain data (keep the rest in a shared place keyed by it)`);
    }
  }

  // ---- attributes ----------------------------------------------------------------------------------

  private async stat(path: string, ctx: RequestContext): Promise<StatLike> {
    const st = await this.handlers.getattr(path, ctx);
    if (st === null || st === undefined || st === false) throw new FuseError("ENOENT");
    if (typeof st !== "object") throw new TypeError(`getattr(${JSON.stringify(path)}) returned ${describe(st)}; expected an object like { mode, size, mtime } or null for ENOENT`);
    return st;
  }

  /** getattr + size computed from readFile where needed; `node` gets its dynamic flag. */
  private async attrOf(path: string, ctx: RequestContext, ino: number, track: boolean): Promise<Attr> {
    const sized = track ? this.backedSize(ino) : null;
    const st = await this.stat(path, ctx);
    let size: number | undefined;
    let dynamic = false;
    const atOpen = st.sizeAtOpen === true && typeOf(st, path) === S_IFREG;
    if (atOpen) {
      dynamic = true;
      if (!hasSize(st)) size = track ? this.table.openedSize(ino) : 0;
    } else if (this.snapshotReads && !hasSize(st) && typeOf(st, path) === S_IFREG) {
      size = contentLength(await this.handlers.readFile!(path, ctx), `readFile(${JSON.stringify(path)})`);
      dynamic = true;
    }
    if (track) this.table.setFlags(ino, DYNAMIC | SIZE_AT_OPEN, (dynamic ? DYNAMIC : 0) | (atOpen ? SIZE_AT_OPEN : 0));
    return applySize(toAttr(st, path, ino, this.defaults, size), sized);
  }

  /** Native writes change a backed file's size without JS seeing them: ask the descriptor. */
  private backedSize(ino: number): BackedSize | null {
    const b = this.liveBacked(ino);
    if (b && b.length > 0) return b[b.length - 1]!.backing!.size();
    // Shared table: a backed open of another thread (descriptors are the process's).
    const fd = this.table.share ? this.table.backedFd(ino) : -1;
    return fd >= 0 ? new BackingFile(fd, false, `fd ${fd}`, false).size() : null;
  }

  /** This thread's backed handles of `ino` (shared table: those another thread released dropped). */
  private liveBacked(ino: number): FileHandle[] | undefined {
    const b = this.backedOf.get(ino);
    const t = this.sharedTable();
    if (!b || !t) return b;
    for (let i = b.length - 1; i >= 0; i--) if (t.serial(b[i]!.fh) !== b[i]!.serial) b.splice(i, 1);
    if (b.length === 0) this.backedOf.delete(ino);
    return b.length ? b : undefined;
  }

  private entry(ino: number, attr: Attr): Entry {
    this.table.addLookup(ino, 1);
    const e: Entry = { ino, attr };
    if (this.options.entryTtl !== undefined) e.entryTtl = this.options.entryTtl;
    if (this.options.attrTtl !== undefined) e.attrTtl = this.options.attrTtl;
    if (this.table.flags(ino) & SIZE_AT_OPEN) e.attrTtl = 0; // the size changes at every open
    return e;
  }

  private attrReply(attr: Attr): AttrReply {
    return this.options.attrTtl !== undefined ? { attr, attrTtl: this.options.attrTtl } : { attr };
  }

  /** Attributes of a fresh name under `parent` and a lookup reference to it. */
  private async newEntry(ctx: RequestContext, parent: number, name: string): Promise<Entry> {
    const path = joinPath(this.nodePath(parent), name);
    // Create the node first so its id is in the attributes; drop it again on failure.
    const ino = this.table.hold(parent, name);
    try {
      const attr = await this.attrOf(path, ctx, ino, true);
      return this.entry(ino, attr);
    } finally {
      this.table.unhold(ino);
    }
  }

  // ---- InodeFS ----------------------------------------------------------------------------------------

  init(info: InitInfo): void | Promise<void> {
    this.info = info;
    this.writebackCache = info.grantedNames.includes("WRITEBACK_CACHE");
    return this.handlers.init?.(info);
  }

  private info: InitInfo | null = null;

  /**
   * DESTROY, or the session's end: files still open (the kernel sends no RELEASE after an
   * unmount) are released as if closed — dirty snapshots saved with writeFile, the handler's
   * release called, backing descriptors the layer owns closed — then the destroy handler.
   */
  async destroy(): Promise<void> {
    for (const [fh, h] of [...this.handles]) {
      if (h.kind !== "file") continue;
      try {
        await this.release(TEARDOWN_CTX, h.ino, fh, 0);
      } catch {
        // one failing release must not keep the others' descriptors open
      }
    }
    await this.handlers.destroy?.();
  }

  async lookup(ctx: RequestContext, parent: number, name: string): Promise<Entry> {
    checkName(name);
    this.nodePath(parent);
    return this.newEntry(ctx, parent, name);
  }

  forget(ino: number, nlookup: number): void {
    this.table.forget(ino, nlookup);
  }

  async getattr(ctx: RequestContext, ino: number, fh: number | undefined): Promise<AttrReply> {
    const path = this.nodePath(ino);
    const handle = fh !== undefined ? this.handleOf(fh) : undefined;
    if (handle?.kind === "file" && handle.backing) {
      const sized = handle.backing.size();
      const st = await this.stat(handle.path, ctx).catch((e) => {
        if (errnoOf(e) === Errno.ENOENT) return {} as StatLike; // open but unlinked
        throw e;
      });
      return this.attrReply(applySize(toAttr({ type: "file", ...st }, handle.path, ino, this.defaults), sized));
    }
    if (handle?.kind === "file" && handle.snapshot && (handle.data || handle.blob || handle.dirty)) {
      const st = await this.stat(handle.path, ctx).catch((e) => {
        if (errnoOf(e) === Errno.ENOENT) return {} as StatLike; // open but unlinked
        throw e;
      });
      const size = handle.data ? handle.length : handle.blob ? handle.blob.size : undefined;
      return this.attrReply(toAttr({ type: "file", ...st }, handle.path, ino, this.defaults, size));
    }
    const attr = await this.attrOf(path, ctx, ino, true);
    return this.table.flags(ino) & SIZE_AT_OPEN ? { attr, attrTtl: 0 } : this.attrReply(attr);
  }

  async setattr(ctx: RequestContext, ino: number, c: SetattrChanges): Promise<AttrReply> {
    const nodePath = this.nodePath(ino);
    const h = this.handlers;
    const handle = c.fh !== undefined ? this.handleOf(c.fh) : undefined;
    const fileHandle = handle?.kind === "file" ? handle : undefined;
    const path = fileHandle?.path ?? nodePath;
    if (c.mode !== undefined) {
      if (!h.chmod) throw new FuseError("EPERM", "no chmod handler");
      await h.chmod(path, c.mode & 0o7777, ctx);
    }
    if (c.uid !== undefined || c.gid !== undefined) {
      if (!h.chown) throw new FuseError("EPERM", "no chown handler");
      await h.chown(path, c.uid ?? -1, c.gid ?? -1, ctx);
    }
    let sizedBy = fileHandle ? c.fh : undefined;
    if (c.size !== undefined) sizedBy = (await this.truncate(ctx, path, c.size, fileHandle, ino)) ?? sizedBy;
    if ((c.atime !== undefined || c.mtime !== undefined) && h.utimens) {
      const date = (t: [number, number] | "now" | undefined): Date | undefined =>
        t === undefined ? undefined : t === "now" ? new Date() : new Date(t[0] * 1000 + Math.floor(t[1] / 1e6));
      await h.utimens(path, date(c.atime), date(c.mtime), ctx);
    }
    return this.getattr(ctx, ino, sizedBy);
  }

  /** Returns the fh whose copy now defines the size, if the truncation went to open copies. */
  private async truncate(ctx: RequestContext, path: string, size: number, handle: FileHandle | undefined, ino?: number): Promise<number | undefined> {
    const h = this.handlers;
    if (handle?.backing && !h.truncate) {
      await handle.backing.truncate(size);
      return handle.fh;
    }
    // open(O_TRUNC) (a SETATTR without fh, after the OPEN) or truncate(2) while backed writers
    // are open: their descriptors are the file.
    const writers = !handle && !h.truncate && ino !== undefined ? this.liveBacked(ino)?.filter((x) => x.backing!.writable) : undefined;
    if (writers && writers.length > 0) {
      const done = new Set<number>();
      for (const w of writers) {
        if (done.has(w.backing!.fd)) continue;
        done.add(w.backing!.fd);
        await w.backing!.truncate(size);
      }
      return writers[writers.length - 1]!.fh;
    }
    if (handle && handle.snapshot && !h.truncate) {
      if (size > 0) await this.load(handle, ctx);
      this.resize(handle, size);
      handle.dirty = true;
      return handle.fh;
    }
    if (h.truncate) {
      await h.truncate(path, size, handle?.value, ctx);
      return undefined;
    }
    // open(O_TRUNC) arrives as a SETATTR without a file handle (kernel 6.18): truncate the copies
    // of the writers that have the file open; they save it when closed.
    if (!handle && ino !== undefined && this.snapshotWrites) {
      const writers = [...this.handles.values()].filter((x): x is FileHandle => x.kind === "file" && x.ino === ino && x.snapshot && this.writable(x.flags));
      if (writers.length > 0) {
        for (const w of writers) {
          if (size > 0) await this.load(w, ctx);
          this.resize(w, size);
          w.dirty = true;
        }
        return writers[writers.length - 1]!.fh;
      }
    }
    if (this.snapshotWrites) {
      // Truncate by path: read, resize, write back.
      const data = size > 0 && h.readFile ? await contentBytes(await h.readFile(path, ctx), `readFile(${JSON.stringify(path)})`) : new Uint8Array(0);
      const out = Buffer.alloc(size);
      out.set(data.subarray(0, size));
      await h.writeFile!(path, out, ctx);
      return undefined;
    }
    throw new FuseError("EACCES", "no truncate/writeFile handler");
  }

  async readlink(ctx: RequestContext, ino: number): Promise<string> {
    const path = this.nodePath(ino);
    if (this.handlers.readlink) {
      const t = await this.handlers.readlink(path, ctx);
      if (t instanceof Uint8Array) return decodeName(t, 0, t.length); // raw target bytes
      if (typeof t !== "string") throw new TypeError(`readlink(${JSON.stringify(path)}) returned ${describe(t)}; expected a string or Uint8Array`);
      return t;
    }
    const st = await this.stat(path, ctx);
    if (typeof st.target === "string") return st.target;
    throw new FuseError("EINVAL");
  }

  async symlink(ctx: RequestContext, parent: number, name: string, target: string): Promise<Entry> {
    checkName(name);
    const dir = this.nodePath(parent);
    if (!this.handlers.symlink) throw new FuseError("EPERM", "no symlink handler");
    await this.handlers.symlink(target, joinPath(dir, name), ctx);
    return this.newEntry(ctx, parent, name);
  }

  async mknod(ctx: RequestContext, parent: number, name: string, mode: number, rdev: number, umask: number): Promise<Entry> {
    checkName(name);
    const path = joinPath(this.nodePath(parent), name);
    const h = this.handlers;
    if (h.mknod) await h.mknod(path, mode & ~umask, rdev, ctx);
    else if ((mode & S_IFMT) === S_IFREG && h.create) {
      const v = await h.create(path, mode & ~umask & 0o7777, O_WRONLY, ctx);
      const file = isBacked(v) ? await this.openBacking(ctx, path, v, O_WRONLY, mode & ~umask, true) : null; // creates it
      try {
        await h.release?.(path, isOpened(v) || isBacked(v) ? v.handle : v, ctx);
      } finally {
        file?.close();
      }
    } else if ((mode & S_IFMT) === S_IFREG && h.writeFile && !h.create) {
      await h.writeFile(path, Buffer.alloc(0), ctx); // writeFile implies creation (see create)
    } else throw new FuseError("EACCES", "no mknod/create handler (add create, or writeFile to create files by writing them)");
    return this.newEntry(ctx, parent, name);
  }

  async mkdir(ctx: RequestContext, parent: number, name: string, mode: number, umask: number): Promise<Entry> {
    checkName(name);
    const dir = this.nodePath(parent);
    if (!this.handlers.mkdir) throw new FuseError("EACCES", "no mkdir handler");
    await this.handlers.mkdir(joinPath(dir, name), mode & ~umask & 0o7777, ctx);
    return this.newEntry(ctx, parent, name);
  }

  async unlink(ctx: RequestContext, parent: number, name: string): Promise<void> {
    const dir = this.nodePath(parent);
    if (!this.handlers.unlink) throw new FuseError("EACCES", "no unlink handler");
    await this.handlers.unlink(joinPath(dir, name), ctx);
    this.table.detach(parent, name);
  }

  async rmdir(ctx: RequestContext, parent: number, name: string): Promise<void> {
    const dir = this.nodePath(parent);
    if (!this.handlers.rmdir) throw new FuseError("EACCES", "no rmdir handler");
    await this.handlers.rmdir(joinPath(dir, name), ctx);
    this.table.detach(parent, name);
  }

  async rename(ctx: RequestContext, parent: number, name: string, newParent: number, newName: string, flags: number): Promise<void> {
    checkName(newName);
    const dir = this.nodePath(parent);
    const newDir = this.nodePath(newParent);
    const h = this.handlers;
    if (!h.rename) throw new FuseError("EACCES", "no rename handler");
    if (flags & ~RENAME_NOREPLACE) throw new FuseError("EINVAL", "RENAME_EXCHANGE/WHITEOUT are not supported by path handlers");
    const from = joinPath(dir, name);
    const to = joinPath(newDir, newName);
    if (flags & RENAME_NOREPLACE) {
      const exists = await Promise.resolve(h.getattr(to, ctx)).catch((e) => {
        if (errnoOf(e) === Errno.ENOENT) return null;
        throw e;
      });
      if (exists) throw new FuseError("EEXIST");
    }
    await h.rename(from, to, ctx);
    if (parent === newParent && name === newName) return;
    // Move the node (if the kernel knows it) so its id follows the file.
    this.table.move(parent, name, newParent, newName);
  }

  async link(ctx: RequestContext, ino: number, newParent: number, newName: string): Promise<Entry> {
    checkName(newName);
    const path = this.nodePath(ino);
    const newDir = this.nodePath(newParent);
    if (!this.handlers.link) throw new FuseError("EPERM", "no link handler");
    await this.handlers.link(path, joinPath(newDir, newName), ctx);
    return this.newEntry(ctx, newParent, newName);
  }

  // ---- files ----------------------------------------------------------------------------------------

  private newHandle(ino: number, path: string, value: unknown, flags: number): FileHandle {
    return { kind: "file", fh: 0, ino, serial: 0, path, value, flags, data: null, length: 0, blob: null, dirty: false, written: false, snapshot: false, backing: null };
  }

  private register(h: Handle): number {
    this.table.addOpen(h.ino);
    let fh: number;
    try {
      fh = this.table.newHandle(this.table.share ? recordOf(h) : null);
    } catch (e) {
      this.table.unhold(h.ino);
      throw e;
    }
    h.serial = this.sharedTable()?.serial(fh) ?? 0;
    this.handles.set(fh, h);
    if (h.kind === "file") h.fh = fh;
    return fh;
  }

  /** Release bookkeeping of a handle (any thread's): the table forgets it, the node may go. */
  private unregister(fh: number, h: Handle): void {
    this.handles.delete(fh);
    this.table.freeHandle(fh);
    this.table.unhold(h.ino);
  }

  private writable(flags: number): boolean {
    return (flags & O_ACCMODE) !== O_RDONLY;
  }

  async open(ctx: RequestContext, ino: number, flags: number): Promise<OpenReply> {
    const path = this.nodePath(ino);
    const h = this.handlers;
    const writes = !!(h.write || h.writeFile);
    // With an open handler the answer may be a backed file, which needs no write handler.
    if (this.writable(flags) && !writes && !h.open) throw new FuseError("EACCES", "read-only file (no write/writeFile handler)");
    // A writeFile snapshot lives in the thread that opened it: with other threads serving the
    // same handle (a shared table), its writes could be lost.
    if (this.table.share && this.writable(flags) && this.snapshotWrites && !h.open) throw new FuseError("EACCES", sharedSnapshotWrite(path));
    this.table.addOpen(ino); // keep the node while handlers run
    try {
      const v = h.open ? await h.open(path, flags, ctx) : undefined;
      await this.checkShareable(ctx, path, v);
      if (isBacked(v)) return this.backedReply(ino, path, v, await this.openBacking(ctx, path, v, flags, 0, false), flags);
      if (this.table.share && this.writable(flags) && this.snapshotWrites && !h.write) {
        await h.release?.(path, isOpened(v) ? v.handle : v, ctx);
        throw new FuseError("EACCES", sharedSnapshotWrite(path));
      }
      if (this.writable(flags) && !writes) {
        await h.release?.(path, isOpened(v) ? v.handle : v, ctx);
        throw new FuseError("EACCES", "read-only file (no write/writeFile handler; open can return backed())");
      }
      const handle = this.newHandle(ino, path, isOpened(v) ? v.handle : v, flags);
      const snapshotWrite = this.writable(flags) && this.snapshotWrites;
      handle.snapshot = this.snapshotReads || snapshotWrite;
      if (handle.snapshot) {
        if (flags & O_TRUNC && snapshotWrite) handle.data = new Uint8Array(0);
        else if ((flags & O_ACCMODE) !== O_WRONLY) await this.load(handle, ctx);
      }
      const reply = this.openFlags(v, handle.snapshot && (this.table.flags(ino) & DYNAMIC) !== 0);
      reply.fh = this.register(handle);
      return reply;
    } finally {
      this.table.unhold(ino);
    }
  }

  /**
   * The descriptor for a backed() open/create. On any failure the handler's release still runs
   * (it returned a handle), then what the layer owns is closed, then the open fails: with the
   * errno of open(2) for paths, EIO and one log line for a descriptor that cannot serve it.
   */
  private async openBacking(ctx: RequestContext, path: string, b: Backed, flags: number, mode: number, create: boolean): Promise<BackingFile> {
    let file: BackingFile | undefined;
    try {
      file = BackingFile.open(b, flags, mode, { create, writebackCache: this.writebackCache });
      const bad = typeof b.source === "number" ? checkDescriptor(file.fd, flags, this.writebackCache) : notDirectory(file.fd);
      if (bad) {
        if (!bad.open) file.owned = false; // not open: by the time we would close it, the number may be someone else's
        const why = `${create ? "create" : "open"}(${JSON.stringify(path)}): backed(${file.source}) cannot serve it: ${bad.why}`;
        console.error(`fuse-uring: ${why}; answering EIO`);
        throw new FuseError("EIO", why);
      }
      return file;
    } catch (e) {
      try {
        await this.handlers.release?.(path, b.handle, ctx);
      } catch (re) {
        console.error(`fuse-uring: release(${JSON.stringify(path)}) after a failed backed open: ${re instanceof Error ? re.message : String(re)}`);
      } finally {
        file?.close();
      }
      throw e;
    }
  }

  /** Register a backed open file; its reply names the descriptor (served natively). */
  private backedReply(ino: number, path: string, b: Backed, file: BackingFile, flags: number): OpenReply {
    const handle = this.newHandle(ino, path, b.handle, flags);
    handle.backing = file;
    let fh: number;
    try {
      fh = this.register(handle);
    } catch (e) {
      file.close();
      throw e;
    }
    let list = this.backedOf.get(ino);
    if (!list) this.backedOf.set(ino, (list = []));
    list.push(handle);
    this.table.setBackedFd(ino, file.fd);
    return { fh, backingFd: file.fd, directIo: b.directIo ?? this.options.directIo, keepCache: b.keepCache ?? this.options.keepCache };
  }

  /** FOPEN_* flags: what open/create asked for with opened(), else the defaults. */
  private openFlags(v: unknown, computedSize: boolean): OpenReply {
    if (isOpened(v)) return { fh: 0, directIo: v.directIo, keepCache: v.keepCache, nonSeekable: v.nonSeekable };
    // A size computed from the content may be stale by the time of the open: read to EOF.
    if (computedSize || this.options.directIo) return { fh: 0, directIo: true };
    return { fh: 0, keepCache: this.options.keepCache };
  }

  /** Load the snapshot of a handle (readFile); Blobs stay lazy for read-only handles. */
  private async load(handle: FileHandle, ctx: RequestContext): Promise<void> {
    if (handle.data || handle.blob) return;
    const h = this.handlers;
    if (!h.readFile) {
      handle.data = new Uint8Array(0);
      return;
    }
    const c: Content | null | undefined = await h.readFile(handle.path, ctx);
    if (handle.data || handle.blob) return; // loaded concurrently
    if (c instanceof Blob && !this.writable(handle.flags)) {
      handle.blob = c;
      this.table.setOpenedSize(handle.ino, c.size);
      return;
    }
    const bytes = await contentBytes(c, `readFile(${JSON.stringify(handle.path)})`);
    if (handle.data || handle.blob) return;
    // A private copy when writable (the handler may keep returning the same buffer).
    handle.data = this.writable(handle.flags) ? new Uint8Array(bytes) : bytes;
    handle.length = bytes.length;
    this.table.setOpenedSize(handle.ino, bytes.length);
  }

  private resize(handle: FileHandle, size: number): void {
    let data = handle.data ?? new Uint8Array(0);
    if (size > data.length) {
      const grown = new Uint8Array(Math.max(size, Math.min(data.length * 2, size + (64 << 20))));
      grown.set(data.subarray(0, handle.length));
      data = grown;
    } else if (size < handle.length) {
      data.fill(0, size, handle.length);
    }
    handle.data = data;
    handle.length = size;
  }

  private fileHandle(fh: number): FileHandle {
    const handle = this.handleOf(fh);
    if (!handle || handle.kind !== "file") throw new FuseError("EBADF");
    return handle;
  }

  async read(ctx: RequestContext, _ino: number, fh: number, offset: number, size: number, out: Uint8Array): Promise<number | Uint8Array> {
    const handle = this.fileHandle(fh);
    // The JS data plane (--data-plane js, or the native table was full): the same descriptor,
    // read straight into the reply buffer.
    if (handle.backing) return ctx.backingRead(handle.backing.fd, offset, size);
    const h = this.handlers;
    if (h.read && !(handle.snapshot && handle.data && handle.dirty)) {
      const r = await h.read(handle.path, offset, size, handle.value, ctx);
      if (r === null || r === undefined) return 0;
      if (r instanceof Blob) return new Uint8Array(await r.slice(0, size).arrayBuffer());
      if (typeof r === "string") return Buffer.from(r, "utf8").subarray(0, size);
      return contentBytes(r, `read(${JSON.stringify(handle.path)})`);
    }
    if (!handle.snapshot) throw new FuseError("ENOSYS", "no read/readFile handler");
    await this.load(handle, ctx);
    if (handle.blob) {
      const b = handle.blob;
      if (offset >= b.size) return 0;
      return new Uint8Array(await b.slice(offset, Math.min(b.size, offset + size)).arrayBuffer());
    }
    const data = handle.data!;
    if (offset >= handle.length) return 0;
    const n = Math.min(size, handle.length - offset);
    out.set(data.subarray(offset, offset + n));
    return n;
  }

  async write(ctx: RequestContext, _ino: number, fh: number, offset: number, data: Uint8Array, _writeFlags = 0, _openFlags = 0): Promise<number> {
    const handle = this.fileHandle(fh);
    if (handle.backing) return ctx.backingWrite(handle.backing.fd, offset, data.length);
    const h = this.handlers;
    if (h.write) {
      const n = await h.write(handle.path, Buffer.from(data), offset, handle.value, ctx);
      return typeof n === "number" ? n : data.length;
    }
    if (!handle.snapshot) throw new FuseError("EBADF");
    if (!handle.data) await this.load(handle, ctx);
    if (handle.blob) throw new FuseError("EBADF");
    const end = offset + data.length;
    if (end > handle.length) this.resize(handle, end);
    handle.data!.set(data, offset);
    handle.dirty = true;
    handle.written = true;
    return data.length;
  }

  /** Hand the complete new content of a dirty snapshot to writeFile. */
  private async save(handle: FileHandle, ctx: RequestContext): Promise<void> {
    if (!handle.dirty || !this.handlers.writeFile) return;
    handle.dirty = false;
    const data = handle.data ?? new Uint8Array(0);
    try {
      await this.handlers.writeFile(handle.path, Buffer.from(data.buffer, data.byteOffset, handle.length), ctx);
    } catch (e) {
      handle.dirty = true;
      throw e;
    }
  }

  async flush(ctx: RequestContext, _ino: number, fh: number, _lockOwner = 0n): Promise<void> {
    const handle = this.handleOf(fh);
    if (!handle || handle.kind !== "file") return;
    // `echo x > f` in a shell: open(O_TRUNC), dup2 + close (FLUSH), write, close (FLUSH). Saving
    // the empty intermediate state would hand writeFile an empty file first; a truncation
    // without writes is saved at release instead.
    if (handle.written) await this.save(handle, ctx);
    await this.handlers.flush?.(handle.path, handle.value, ctx);
  }

  async fsync(ctx: RequestContext, _ino: number, fh: number, datasync: boolean): Promise<void> {
    const handle = this.handleOf(fh);
    if (!handle || handle.kind !== "file") return;
    // Like the native plane, which answers FSYNC itself: the handler is not called.
    if (handle.backing) return handle.backing.sync(datasync);
    await this.save(handle, ctx);
    await this.handlers.fsync?.(handle.path, datasync, handle.value, ctx);
  }

  async release(ctx: RequestContext, _ino: number, fh: number, _flags = 0): Promise<void> {
    const handle = this.handleOf(fh);
    if (!handle || handle.kind !== "file") return;
    try {
      await this.save(handle, ctx); // writes without a flush (e.g. through mmap)
      await this.handlers.release?.(handle.path, handle.value, ctx);
    } finally {
      if (handle.backing) {
        const b = this.backedOf.get(handle.ino);
        const i = b ? b.indexOf(handle) : -1;
        if (i >= 0) b!.splice(i, 1);
        if (b && b.length === 0) this.backedOf.delete(handle.ino);
        const newest = b && b.length ? b[b.length - 1]!.backing!.fd : -1;
        this.table.setBackedFd(handle.ino, newest, handle.backing.fd);
        handle.backing.close(); // after the handler's release: whoever opened it closes it
      }
      this.unregister(fh, handle);
    }
  }

  async create(ctx: RequestContext, parent: number, name: string, mode: number, umask: number, flags: number): Promise<CreateReply> {
    checkName(name);
    const h = this.handlers;
    const path = joinPath(this.nodePath(parent), name);
    let v: unknown;
    if (h.create) {
      v = await h.create(path, mode & ~umask & 0o7777, flags, ctx);
      await this.checkShareable(ctx, path, v);
    }
    // Without a create handler, writeFile creates: the new file starts empty (so getattr can
    // find it) and gets its content when the writer closes it.
    else if (h.writeFile) await h.writeFile(path, Buffer.alloc(0), ctx);
    else throw new FuseError("EACCES", "no create handler (add create, or writeFile to create files by writing them)");
    if (isBacked(v)) {
      // Opened (and so created, for a path) before the entry: getattr must find the file.
      const file = await this.openBacking(ctx, path, v, flags, mode & ~umask, true);
      let entry: Entry;
      try {
        entry = await this.newEntry(ctx, parent, name);
      } catch (e) {
        try {
          await h.release?.(path, v.handle, ctx);
        } finally {
          file.close();
        }
        throw e;
      }
      return { entry, open: this.backedReply(entry.ino, path, v, file, flags) };
    }
    const entry = await this.newEntry(ctx, parent, name);
    const handle = this.newHandle(entry.ino, path, isOpened(v) ? v.handle : v, flags);
    handle.snapshot = (this.writable(flags) && this.snapshotWrites) || this.snapshotReads;
    if (handle.snapshot) handle.data = new Uint8Array(0);
    const open = this.openFlags(v, handle.snapshot && this.snapshotReads);
    open.fh = this.register(handle);
    return { entry, open };
  }

  // ---- directories ---------------------------------------------------------------------------------

  opendir(_ctx: RequestContext, ino: number, _flags = 0): number {
    return this.register({ kind: "dir", ino, serial: 0, path: this.nodePath(ino), entries: [], iterator: null, done: false });
  }

  private async startListing(d: DirHandle, ctx: RequestContext): Promise<void> {
    const h = this.handlers;
    if (!h.readdir) {
      d.done = true;
      return;
    }
    const r = await h.readdir(d.path, ctx);
    if (Array.isArray(r)) {
      d.entries = r.slice();
      d.done = true;
    } else if (isAsyncIterable(r)) d.iterator = r[Symbol.asyncIterator]();
    else if (isIterable(r)) d.iterator = r[Symbol.iterator]();
    else throw new TypeError(`readdir(${JSON.stringify(d.path)}) returned ${describe(r)}; expected an array or (async) iterable of names or { name, ...stat }`);
  }

  /** Make sure entries[i] is fetched (or the listing is exhausted). */
  private async fetch(d: DirHandle, i: number, ctx: RequestContext): Promise<boolean> {
    while (d.entries.length <= i && !d.done) {
      if (!d.iterator) {
        await this.startListing(d, ctx);
        continue;
      }
      const r = await d.iterator.next();
      if (r.done) d.done = true;
      else d.entries.push(r.value);
    }
    return i < d.entries.length;
  }

  // Offsets: "." = 1, ".." = 2, entries[i] = i + 3 (the cookie to continue *after* an entry).
  async readdir(ctx: RequestContext, ino: number, fh: number, offset: number, filler: DirFiller): Promise<void> {
    const d = this.handleOf(fh);
    if (!d || d.kind !== "dir") throw new FuseError("EBADF");
    this.nodePath(ino);
    const dirAttr = (i: number): Attr => toAttr({ type: "dir" }, "/", i, this.defaults);
    if (offset < 1 && !filler.add(".", 1, { ino: 0, attr: dirAttr(ino) })) return;
    if (offset < 2 && !filler.add("..", 2, { ino: 0, attr: dirAttr(this.table.parentOf(ino) || ino) })) return;
    const seen = new Set<string>();
    for (let i = Math.max(0, offset - 2); await this.fetch(d, i, ctx); i++) {
      const e = d.entries[i]!;
      const name = typeof e === "string" ? e : e?.name;
      if (typeof name !== "string" || name === "" || name.includes("/") || name.includes("\0")) {
        throw new TypeError(`readdir(${JSON.stringify(d.path)}): entry ${i} is ${describe(e)}; expected a name or { name, ...stat } (no "/" in names)`);
      }
      if (name === "." || name === "..") continue;
      if (seen.has(name)) continue;
      seen.add(name);
      const path = joinPath(d.path, name);
      if (typeof e === "object" && (e.mode !== undefined || e.type !== undefined || e.size !== undefined || e.target !== undefined)) {
        // Attributes given: a complete READDIRPLUS entry (one lookup reference if accepted).
        const { name: _n, ...st } = e;
        const dynamic = this.snapshotReads && !hasSize(st) && typeOf(st, path) === S_IFREG;
        if (filler.plus && !dynamic) {
          const child = this.table.hold(ino, name);
          try {
            const attr = applySize(toAttr(st, path, child, this.defaults), this.backedSize(child));
            if (!filler.add(name, i + 3, { ino: child, attr })) return;
            this.table.addLookup(child, 1);
          } finally {
            this.table.unhold(child);
          }
          continue;
        }
        const existing = this.table.childOf(ino, name);
        const attr = toAttr(st, path, existing ?? pseudoIno(path), this.defaults, dynamic ? 0 : undefined);
        if (!filler.add(name, i + 3, { ino: 0, attr })) return;
        continue;
      }
      // A bare name: type unknown (DT_UNKNOWN); the kernel looks it up when it needs it.
      const attr = toAttr({ mode: 0 }, path, this.table.childOf(ino, name) ?? pseudoIno(path), this.defaults);
      attr.mode = 0;
      if (!filler.add(name, i + 3, { ino: 0, attr })) return;
    }
  }

  async releasedir(_ctx: RequestContext, _ino: number, fh: number): Promise<void> {
    const d = this.handleOf(fh);
    if (!d || d.kind !== "dir") return;
    this.unregister(fh, d);
    if (d.iterator && !d.done) await d.iterator.return?.();
  }

  // ---- misc ---------------------------------------------------------------------------------------------

  async statfs(ctx: RequestContext, ino: number): Promise<Statfs> {
    if (!this.handlers.statfs) return defaultStatfs;
    const s = await this.handlers.statfs(this.table.pathOf(ino) ?? "/", ctx);
    return { ...defaultStatfs, ...s };
  }

  async access(ctx: RequestContext, ino: number, mask: number): Promise<void> {
    if (this.handlers.access) await this.handlers.access(this.nodePath(ino), mask, ctx);
  }

  async getxattr(ctx: RequestContext, ino: number, name: string): Promise<string | Uint8Array> {
    if (!this.handlers.getxattr) throw new FuseError("ENOTSUP");
    const v = await this.handlers.getxattr(this.nodePath(ino), name, ctx);
    if (v === null || v === undefined) throw new FuseError("ENODATA");
    return v;
  }

  async setxattr(ctx: RequestContext, ino: number, name: string, value: Uint8Array, flags: number): Promise<void> {
    if (!this.handlers.setxattr) throw new FuseError("ENOTSUP");
    await this.handlers.setxattr(this.nodePath(ino), name, Buffer.from(value), flags, ctx);
  }

  async listxattr(ctx: RequestContext, ino: number): Promise<string[]> {
    if (!this.handlers.listxattr) return [];
    return this.handlers.listxattr(this.nodePath(ino), ctx);
  }

  async removexattr(ctx: RequestContext, ino: number, name: string): Promise<void> {
    if (!this.handlers.removexattr) throw new FuseError("ENOTSUP");
    await this.handlers.removexattr(this.nodePath(ino), name, ctx);
  }

  // ---- threads: "stateless" (every CPU runs a PathFS of its own over one shared table) --------------

  /**
   * True once this PathFS serves from a shared table: copies of it on other threads answer
   * alike (same node ids, same handles), which the engine's copies mode asks of a filesystem.
   */
  get replicable(): boolean {
    return this.table.share !== null;
  }

  /**
   * The engine's copies plan (today's `--workers`/auto mechanism): a script that declared
   * `threads: "stateless"` is loaded by every worker thread, whose PathFS joins this one's node
   * table (the SharedArrayBuffers in `shared`); FORGET is applied once, here. Null (one thread,
   * as without the declaration) when not declared, not loaded from a script file, already
   * serving, or when the handlers keep written data in one thread (writeFile snapshots).
   */
  copies(): CopiesPlan | null {
    if (this.threads !== "stateless" || !this.scriptSource) return null;
    if (this.snapshotWrites && !(this as { [TREE_MARK]?: boolean })[TREE_MARK]) {
      console.error(`fuse-uring: ${this.scriptSource.path}: threads: "stateless" is ignored (one thread): files are written through writeFile, whose open-file snapshot lives in one thread; give a write() handler or return backed() from open to serve on every CPU`);
      return null;
    }
    if (!this.table.share) {
      if (this.table.count !== 1 || this.handles.size !== 0) return null; // already serving: ids counted here
      this.table = new SharedNodes(createPathTable(), 0);
    }
    const src = this.scriptSource;
    return { module: src.path, args: src.args, mountpoint: src.mountpoint, shared: this.table.share as PathTableShare, sharedState: true };
  }

  /** A worker's copy (lib/script.ts, given CopiesPlan.shared): serve from the shared table. */
  joinShare(share: unknown): boolean {
    if (!isPathTableShare(share)) return false;
    if (this.table.count !== 1 || this.handles.size !== 0) throw new Error("joinShare: this PathFS is already serving");
    this.table = new SharedNodes(share, 0);
    return true;
  }

  // ---- backed handles without the native data plane; ioctl, poll ------------------------------------
  // With the native data plane (default) the session answers FALLOCATE, LSEEK and
  // COPY_FILE_RANGE of backed files from their descriptors before they get here; these serve the
  // same from the same descriptors with `--data-plane js` (or a full table). Files that are not
  // backed have no handler for them: EOPNOTSUPP (never ENOSYS, which would make the kernel stop
  // asking for the backed ones too).

  async fallocate(_ctx: RequestContext, _ino: number, fh: number, offset: number, length: number, mode: number): Promise<void> {
    const b = this.handles.get(fh);
    if (b?.kind !== "file" || !b.backing) throw new FuseError("EOPNOTSUPP", "fallocate needs a backed file");
    const libc = await import("../fs/passthrough/libc.ts");
    libc.fallocate(b.backing.fd, mode, offset, length);
  }

  async lseek(ctx: RequestContext, ino: number, fh: number, offset: number, whence: number): Promise<number> {
    const b = this.handles.get(fh);
    if (b?.kind === "file" && b.backing) {
      const libc = await import("../fs/passthrough/libc.ts");
      return libc.lseek(b.backing.fd, offset, whence);
    }
    // No holes in files served by handlers: data up to the size, the hole at the end.
    const size = (await this.getattr(ctx, ino, fh)).attr.size;
    if (offset >= size) throw new FuseError("ENXIO");
    return whence === 3 /* SEEK_DATA */ ? offset : size;
  }

  async copyFileRange(_ctx: RequestContext, _inoIn: number, fhIn: number, offIn: number, _inoOut: number, fhOut: number, offOut: number, len: number, flags: number): Promise<number> {
    const a = this.handles.get(fhIn), b = this.handles.get(fhOut);
    if (a?.kind !== "file" || !a.backing || b?.kind !== "file" || !b.backing) throw new FuseError("EOPNOTSUPP", "copy_file_range between backed files only");
    const libc = await import("../fs/passthrough/libc.ts");
    const n = Math.min(len, 1 << 30);
    try {
      return libc.copyFileRange(a.backing.fd, offIn, b.backing.fd, offOut, n, flags);
    } catch (e) {
      const errno = errnoOf(e);
      if (flags !== 0 || (errno !== Errno.EXDEV && errno !== Errno.EINVAL && errno !== Errno.ENOSYS && errno !== Errno.EOPNOTSUPP)) throw e;
    }
    // Not between these two files (another filesystem, …): read and write.
    const buf = Buffer.allocUnsafe(Math.min(n, 1 << 20));
    let done = 0;
    while (done < n) {
      const got = readSync(a.backing.fd, buf, 0, Math.min(buf.length, n - done), offIn + done);
      if (got === 0) break;
      let w = 0;
      while (w < got) w += writeSync(b.backing.fd, buf, w, got - w, offOut + done + w);
      done += got;
    }
    return done;
  }

  /** Present only when the handlers have ioctl (see the constructor). */
  async ioctl(ctx: RequestContext, ino: number, fh: number, cmd: number, _arg: bigint, data: Uint8Array, outSize: number, _flags: number): Promise<IoctlReply> {
    const handle = this.handles.get(fh);
    const path = handle?.path ?? this.nodePath(ino);
    const value = handle?.kind === "file" ? handle.value : undefined;
    const r = await this.handlers.ioctl!(path, cmd, Buffer.from(data), outSize, value, ctx);
    if (r === undefined || r === null) return 0;
    if (typeof r === "number") return r;
    if (r instanceof Uint8Array) return { result: 0, data: r };
    if (typeof r === "object" && ("result" in r || "data" in r)) return r;
    throw new TypeError(`ioctl(${JSON.stringify(path)}) returned ${describe(r)}; expected a number, bytes, or { result, data }`);
  }

  /** Present only when the handlers have poll (see the constructor). */
  async poll(ctx: RequestContext, ino: number, fh: number, kh: bigint | null, events: number): Promise<number> {
    const handle = this.handles.get(fh);
    const path = handle?.path ?? this.nodePath(ino);
    const value = handle?.kind === "file" ? handle.value : undefined;
    const notify = this.info?.notify;
    let woken = false;
    // Once per poll request: the kernel polls again after a wakeup and hands out a new kh.
    const wakeup = kh !== null && notify ? () => {
      if (woken) return;
      woken = true;
      void notify.poll(kh);
    } : null;
    const r = await this.handlers.poll!(path, events, wakeup, value, ctx);
    if (typeof r !== "number") throw new TypeError(`poll(${JSON.stringify(path)}) returned ${describe(r)}; expected the ready events (a number, e.g. POLLIN = 1)`);
    return r;
  }

  // ---- hot reload (lib/reload/) -------------------------------------------------------------------

  /**
   * Take over `old`'s node table, open handles, id counters, in-flight tracking and notifier, so
   * the node ids the kernel holds stay valid in this new version. Both objects then share one
   * state: `old`'s fields forward here, so requests still running on the old version (and
   * FORGETs) update the same table and never hand out an id twice.
   */
  adopt(old: PathFS): void {
    const self = this as unknown as Record<string, unknown>;
    for (const key of ["table", "handles", "backedOf", "busy", "pendingNotes", "notifier"]) {
      self[key] = (old as unknown as Record<string, unknown>)[key];
      Object.defineProperty(old, key, { get: () => self[key], set: (v) => void (self[key] = v), configurable: true });
    }
    this.defaults.time = old.defaults.time; // unchanged files keep their default times
  }

  /** Nodes the kernel holds (or has open) under their current paths: what a reload compares. */
  knownNodes(): { ino: number; path: string; parent: number; name: string }[] {
    return this.table.known();
  }

  /** A name vanished (or changed type) in a reload: detach its node as unlink does. */
  dropName(parent: number, name: string): void {
    this.table.detach(parent, name);
  }

  /**
   * Drop the kernel's cached attributes and data of `inodes` and the cached names `entries`
   * ([parent node id, name]), once no request on those nodes is in flight. Resolves to the
   * number of notifications the kernel acted on.
   */
  invalidateNodes(inodes: number[], entries: [number, string][]): Promise<number> {
    const n = this.notifierOrThrow();
    const inos = [...inodes, ...entries.map((e) => e[0])];
    if (inos.length === 0) return Promise.resolve(0);
    return this.whenIdle(inos, async () => {
      let acted = 0;
      for (const [parent, name] of entries) if (okNotify(await n.invalidateEntry(parent, name))) acted++;
      for (const ino of inodes) if (okNotify(await n.invalidateInode(ino, 0, 0))) acted++;
      return acted;
    });
  }
}

/** The caller of what the layer does on its own at teardown (releasing files still open). */
const TEARDOWN_CTX: RequestContext = {
  uid: 0, gid: 0, pid: 0, unique: 0n, signal: new AbortController().signal,
  backingRead: () => Promise.reject(new FuseError("EIO", "no request at teardown")),
  backingWrite: () => Promise.reject(new FuseError("EIO", "no request at teardown")),
};

/** A stable non-zero d_ino for names the kernel has not looked up (FNV-1a, high bit set). */
function pseudoIno(path: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    h ^= path.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return 2 ** 40 + (h >>> 0);
}

/** Why a handle value cannot go to other threads as JSON (null: it can). */
function unshareable(v: unknown): string | null {
  if (v === undefined || v === null || typeof v === "number" || typeof v === "string" || typeof v === "boolean") return null;
  if (typeof v !== "object") return describe(v);
  const proto = Object.getPrototypeOf(v);
  if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) return describe(v);
  try {
    if (JSON.stringify(v) === undefined) return describe(v);
  } catch (e) {
    return `${describe(v)} (${e instanceof Error ? e.message : String(e)})`;
  }
  return null;
}

/** What other threads need to serve a handle they did not open (shared tables). */
function recordOf(h: Handle): HandleRecord {
  if (h.kind === "dir") return { dir: true, ino: h.ino, flags: 0, snapshot: false, fd: -1, owned: false, writable: false, value: undefined, owner: 0 };
  const b = h.backing;
  return {
    dir: false, ino: h.ino, flags: h.flags, snapshot: h.snapshot, fd: b ? b.fd : -1, owned: b ? b.owned : false, writable: b ? b.writable : false,
    value: h.value === undefined ? undefined : JSON.stringify(h.value), owner: 0,
  };
}

function sharedSnapshotWrite(path: string): string {
  return `${JSON.stringify(path)}: threads: "stateless" cannot write through writeFile (the open file's snapshot would live in one thread); give a write() handler or return backed() from open`;
}

function okNotify(rc: number): boolean {
  // ENOENT: the kernel had nothing cached for it, which is fine.
  if (rc === 0) return true;
  if (rc === -Errno.ENOENT) return false;
  throw new FuseError(-rc, `invalidation failed: ${-rc}`);
}

/**
 * Serve path handlers: `paths(defineFs({ getattr, readdir, read }))`. Objects from defineFs() use
 * the named-arguments order, others the deprecated positional one (args.ts).
 */
export function paths<H = any>(handlers: DefinedFs<H>, options?: PathFSOptions): PathFS;
/** The positional order (deprecated for the handlers whose order changed; args.ts warns once). */
export function paths<H = any>(handlers: PathHandlers<H>, options?: PathFSOptions): PathFS;
export function paths<H = any>(handlers: DefinedFs<H> | PathHandlers<H>, options?: PathFSOptions): PathFS {
  return new PathFS(toPositional(handlers) as PathHandlers, options);
}

export function isPathFS(x: unknown): x is PathFS {
  return typeof x === "object" && x !== null && (x as { [PATHFS]?: unknown })[PATHFS] === true;
}

// Re-exported helpers used by tree.ts and tests.
export { S_IFDIR, S_IFLNK, S_IFREG, toTimespec };
