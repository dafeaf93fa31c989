// Decodes each request from its slot (in_header @0, per-op header in op_in @128, the rest in
// the payload), calls the filesystem, and encodes the answer into the same slot.
// Handlers may answer synchronously (no allocation here) or with a Promise.

import { Errno, FuseError } from "../protocol/errors.ts";
import type { Attr, AttrReply, CreateReply, Entry, FileLock, IoctlReply, OpenReply, SetattrChanges, Statfs } from "../protocol/structs.ts";
import type { DirFiller, InodeFS } from "./filesystem.ts";
import {
  decodeSetattrIn, direntplusSize, direntSize, encodeAttrOut, encodeDirentHeader, encodeEntryOut,
  encodeOpenOut, encodeStatfsOut, encodeWriteOut, ENTRY_OUT_SIZE, getI64, getU64, OPEN_OUT_SIZE, setU64,
  decodeIoctlIn, decodeLkIn, decodePollIn, encodeFileLock, encodeIoctlOut, encodePollOut, IOCTL_IOVEC_SIZE, IOCTL_OUT_SIZE,
  FOPEN_IO_URING_ZERO_COPY,
} from "../protocol/codec.ts";
import {
  FATTR, HDR_OP_IN, Op, FUSE_GETATTR_FH, FUSE_FSYNC_FDATASYNC, opName, F_UNLCK, FUSE_IOCTL, FUSE_IOCTL_MAX_IOV, FUSE_LK_FLOCK,
  FUSE_POLL_SCHEDULE_NOTIFY, FUSE_RELEASE_FLOCK_UNLOCK, FOPEN,
} from "../protocol/constants.ts";
import { backedCopyFileRange, backedFallocate, backedLseek, type BackedOpCounters } from "./backed-ops.ts";
import { constants as FS } from "node:fs";
import type { DataPlane } from "./dataplane.ts";
import { decodeName, encodeName, nameByteLength } from "../protocol/names.ts";
import type { Replier } from "./reply.ts";
import type { Request } from "./request.ts";

export interface DispatchOptions {
  entryTtl: number;
  attrTtl: number;
  negativeTtl: number;
  /** O_DIRECT opens of native handles keep a buffered backing descriptor (session option). */
  backingCache: boolean;
  writebackCache: boolean;
}

const OP = HDR_OP_IN;
const O_DIRECT = FS.O_DIRECT ?? 0o40000;

function isThenable<T>(v: T | Promise<T>): v is Promise<T> {
  return v !== null && typeof v === "object" && typeof (v as { then?: unknown }).then === "function";
}

export class Dispatcher {
  /** Set by the session when the native data plane is on: OPEN/CREATE replies naming a
   *  backingFd get a handle the shim serves READ/WRITE/FSYNC (and FLUSH with backingFlush) for
   *  (lib/session/dataplane.ts). */
  dataPlane: DataPlane | null = null;
  /** FALLOCATE/LSEEK/COPY_FILE_RANGE answered from backing descriptors (backedOp). */
  readonly backed: BackedOpCounters = { ops: 0, copyFallbacks: 0 };
  /** The ring has zero-copy queues: natively served files are opened FOPEN_IO_URING_ZERO_COPY. */
  zeroCopy = false;

  /** Set by the session for requests it handles itself (INIT, INTERRUPT, FORGET). */
  constructor(
    readonly fs: InodeFS,
    readonly reply: Replier,
    readonly opts: DispatchOptions,
    private readonly unknownOpcode: (req: Request) => void,
  ) {}

  /**
   * Continue with `k` once `r` settles; exceptions anywhere (also in the reply encoder `k`)
   * become errno replies (`onError`, default Replier.fail). A result that arrives after the
   * request was answered (timeout, early answer, interrupt) is dropped before `k` can touch the
   * slot, which may carry another request by then.
   */
  private then<T>(req: Request, r: T | Promise<T>, k: (req: Request, v: T) => void, onError?: (req: Request, e: unknown) => void): void {
    if (isThenable(r)) {
      const gen = req.gen;
      r.then(
        (v) => {
          if (!req.current(gen)) return this.reply.late(req);
          try {
            k.call(this, req, v);
          } catch (e) {
            this.reply.fail(req, e);
          }
        },
        (e) => {
          if (!req.current(gen)) return this.reply.late(req);
          try {
            if (onError) onError.call(this, req, e);
            else this.reply.fail(req, e);
          } catch (e2) {
            this.reply.fail(req, e2);
          }
        },
      );
    } else {
      k.call(this, req, r);
    }
  }

  dispatch(req: Request): void {
    try {
      this.route(req);
    } catch (e) {
      this.reply.fail(req, e);
    }
  }

  // ---- string helpers ---------------------------------------------------------------------
  private nameEnd = 0;
  /**
   * NUL-terminated name at `start` of the payload; sets nameEnd past the NUL. Names are bytes:
   * decodeName is lossless (invalid UTF-8 bytes become U+DC80–U+DCFF, see protocol/names.ts).
   */
  private name(req: Request, start: number): string {
    const p = req.slot.payload;
    let end = p.indexOf(0, start);
    if (end < 0 || end > req.payloadSize) end = req.payloadSize;
    this.nameEnd = end + 1;
    return decodeName(req.text, start, end);
  }

  private missing(req: Request): void {
    this.reply.error(req, Errno.ENOSYS);
  }

  /**
   * Each opcode's decoding is its own small method, called through a table by opcode: the JIT
   * compiles (and, when a workload's phase sends other opcodes, recompiles) one small function
   * per opcode instead of one switch over all of them (60-80 ms per recompile of the whole
   * switch, measured on create+stat+unlink, each thread's VM its own).
   */
  private route(req: Request): void {
    const op = req.opcode;
    const f = op >= 0 && op < ROUTES.length ? ROUTES[op] : undefined;
    if (f !== undefined) return f.call(this, req);
    // BMAP, STATX, …
    this.unknownOpcode(req);
    return this.missing(req);
  }

  private onLookup(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.lookup) return this.missing(req);
    const name = this.name(req, 0);
    // The encoder (entryReply) may reject the handler's value (e.g. undefined): inside
    // then() that becomes EIO like a throw, never an unhandled rejection.
    // A handler that throws at once (a plain function) must become a negative entry too,
    // not only one that rejects: route()'s caller would answer the bare errno.
    let r: Entry | null | Promise<Entry | null>;
    try {
      r = fs.lookup(req, nodeid, name);
    } catch (e) {
      return this.lookupFailed(req, e);
    }
    return this.then(req, r, this.lookupReply, this.lookupFailed);
  }

  private onGetattr(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.getattr) return this.missing(req);
    const flags = h.getUint32(OP, true);
    const fh = flags & FUSE_GETATTR_FH ? getU64(h, OP + 8) : undefined;
    return this.then(req, fs.getattr(req, nodeid, fh), this.attrReply);
  }

  private onSetattr(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.setattr) return this.missing(req);
    return this.then(req, fs.setattr(req, nodeid, setattrChanges(h)), this.attrReply);
  }

  private onReadlink(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.readlink) return this.missing(req);
    return this.then(req, fs.readlink(req, nodeid), this.bytesReply);
  }

  private onSymlink(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.symlink) return this.missing(req);
    const name = this.name(req, 0);
    const target = this.name(req, this.nameEnd);
    return this.then(req, fs.symlink(req, nodeid, name, target), this.entryReply);
  }

  private onMknod(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.mknod) return this.missing(req);
    const mode = h.getUint32(OP, true), rdev = h.getUint32(OP + 4, true), umask = h.getUint32(OP + 8, true);
    return this.then(req, fs.mknod(req, nodeid, this.name(req, 0), mode, rdev, umask), this.entryReply);
  }

  private onMkdir(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.mkdir) return this.missing(req);
    const mode = h.getUint32(OP, true), umask = h.getUint32(OP + 4, true);
    return this.then(req, fs.mkdir(req, nodeid, this.name(req, 0), mode, umask), this.entryReply);
  }

  private onUnlink(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.unlink) return this.missing(req);
    return this.then(req, fs.unlink(req, nodeid, this.name(req, 0)), this.emptyReply);
  }

  private onRmdir(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.rmdir) return this.missing(req);
    return this.then(req, fs.rmdir(req, nodeid, this.name(req, 0)), this.emptyReply);
  }

  private onRename(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.rename) return this.missing(req);
    const newdir = getU64(h, OP);
    const flags = req.opcode === Op.RENAME2 ? h.getUint32(OP + 8, true) : 0;
    const oldName = this.name(req, 0);
    const newName = this.name(req, this.nameEnd);
    return this.then(req, fs.rename(req, nodeid, oldName, newdir, newName, flags), this.emptyReply);
  }

  private onLink(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.link) return this.missing(req);
    const oldnode = getU64(h, OP);
    return this.then(req, fs.link(req, oldnode, nodeid, this.name(req, 0)), this.entryReply);
  }

  private onOpen(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    const flags = h.getUint32(OP, true);
    const handler = req.opcode === Op.OPEN ? fs.open : fs.opendir;
    if (!handler) return this.openReply(req, undefined);
    return this.then(req, handler.call(fs, req, nodeid, flags), this.openReply);
  }

  private onRead(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.read) return this.missing(req);
    const fh = getU64(h, OP), offset = getU64(h, OP + 8), size = h.getUint32(OP + 16, true);
    req.size = size;
    return this.then(req, fs.read(req, nodeid, fh, offset, size, req.payloadPrefix(size)), this.readReply);
  }

  private onWrite(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.write) return this.missing(req);
    const fh = getU64(h, OP), offset = getU64(h, OP + 8), size = h.getUint32(OP + 16, true);
    const writeFlags = h.getUint32(OP + 20, true), openFlags = h.getUint32(OP + 32, true);
    if (size > req.payloadSize) throw new FuseError("EIO", `WRITE of ${size} bytes with ${req.payloadSize} payload`);
    return this.then(req, fs.write(req, nodeid, fh, offset, req.payloadPrefix(size), writeFlags, openFlags), this.writeReply);
  }

  private onStatfs(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.statfs) return this.statfsReply(req, defaultStatfs);
    return this.then(req, fs.statfs(req, nodeid), this.statfsReply);
  }

  private onRelease(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    const fh = getU64(h, OP), flags = h.getUint32(OP + 8, true);
    if (req.opcode === Op.RELEASE) {
      if (fs.flock && h.getUint32(OP + 12, true) & FUSE_RELEASE_FLOCK_UNLOCK) return this.releaseFlock(req, fh, flags);
      if (!fs.release) return this.emptyReply(req);
      return this.then(req, fs.release(req, nodeid, fh, flags), this.emptyReply);
    }
    if (!fs.releasedir) return this.emptyReply(req);
    return this.then(req, fs.releasedir(req, nodeid, fh), this.emptyReply);
  }

  private onFsync(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    const fh = getU64(h, OP), datasync = (h.getUint32(OP + 8, true) & FUSE_FSYNC_FDATASYNC) !== 0;
    const handler = req.opcode === Op.FSYNC ? fs.fsync : fs.fsyncdir;
    if (!handler) return this.missing(req);
    return this.then(req, handler.call(fs, req, nodeid, fh, datasync), this.emptyReply);
  }

  private onFlush(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.flush) return this.missing(req);
    const fh = getU64(h, OP);
    const lockOwner = h.getBigUint64(OP + 16, true);
    return this.then(req, fs.flush(req, nodeid, fh, lockOwner), this.emptyReply);
  }

  private onSetxattr(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.setxattr) return this.missing(req);
    const size = h.getUint32(OP, true), flags = h.getUint32(OP + 4, true);
    const name = this.name(req, 0);
    const start = this.nameEnd;
    const value = req.slot.payload.subarray(start, start + size);
    return this.then(req, fs.setxattr(req, nodeid, name, value, flags), this.emptyReply);
  }

  private onGetxattr(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.getxattr) return this.missing(req);
    req.size = h.getUint32(OP, true);
    return this.then(req, fs.getxattr(req, nodeid, this.name(req, 0)), this.xattrReply);
  }

  private onListxattr(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.listxattr) return this.missing(req);
    req.size = h.getUint32(OP, true);
    return this.then(req, fs.listxattr(req, nodeid), this.listxattrReply);
  }

  private onRemovexattr(req: Request): void {
    const fs = this.fs;
    const nodeid = req.nodeid;
    if (!fs.removexattr) return this.missing(req);
    return this.then(req, fs.removexattr(req, nodeid, this.name(req, 0)), this.emptyReply);
  }

  private onReaddir(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.readdir) return this.missing(req);
    const fh = getU64(h, OP), offset = getU64(h, OP + 8);
    req.size = h.getUint32(OP + 16, true);
    const filler = this.filler(req, req.opcode === Op.READDIRPLUS);
    return this.then(req, fs.readdir(req, nodeid, fh, offset, filler), this.readdirReply);
  }

  private onAccess(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.access) return this.missing(req);
    return this.then(req, fs.access(req, nodeid, h.getUint32(OP, true)), this.emptyReply);
  }

  private onCreate(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.create) return this.missing(req);
    const flags = h.getUint32(OP, true), mode = h.getUint32(OP + 4, true), umask = h.getUint32(OP + 8, true);
    return this.then(req, fs.create(req, nodeid, this.name(req, 0), mode, umask, flags), this.createReply);
  }

  private onFallocate(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (this.dataPlane && this.dataPlane.fdIn >= 0) return this.backedOp(req);
    if (!fs.fallocate) return this.missing(req);
    const fh = getU64(h, OP), offset = getU64(h, OP + 8), length = getU64(h, OP + 16), mode = h.getUint32(OP + 24, true);
    return this.then(req, fs.fallocate(req, nodeid, fh, offset, length, mode), this.emptyReply);
  }

  private onLseek(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (this.dataPlane && this.dataPlane.fdIn >= 0) return this.backedOp(req);
    if (!fs.lseek) return this.missing(req);
    const fh = getU64(h, OP), offset = getI64(h, OP + 8), whence = h.getUint32(OP + 16, true);
    return this.then(req, fs.lseek(req, nodeid, fh, offset, whence), this.lseekReply);
  }

  private onCopyFileRange(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (this.dataPlane && this.dataPlane.fdIn >= 0 && this.dataPlane.fdOut >= 0) return this.backedOp(req);
    if (!fs.copyFileRange) return this.missing(req);
    const fhIn = getU64(h, OP), offIn = getU64(h, OP + 8), nodeOut = getU64(h, OP + 16);
    const fhOut = getU64(h, OP + 24), offOut = getU64(h, OP + 32), len = getU64(h, OP + 40);
    const flags = Number(h.getBigUint64(OP + 48, true));
    const r = fs.copyFileRange(req, nodeid, fhIn, offIn, nodeOut, fhOut, offOut, len, flags);
    return this.then(req, r, req.opcode === Op.COPY_FILE_RANGE ? this.writeReply : this.copyRange64Reply);
  }

  private onTmpfile(req: Request): void {
    const fs = this.fs;
    const h = req.slot.header;
    const nodeid = req.nodeid;
    if (!fs.tmpfile) return this.missing(req);
    const flags = h.getUint32(OP, true), mode = h.getUint32(OP + 4, true), umask = h.getUint32(OP + 8, true);
    return this.then(req, fs.tmpfile(req, nodeid, mode, umask, flags), this.createReply);
  }

  private onDestroy(req: Request): void {
    const fs = this.fs;
    const r = fs.destroy?.();
    return this.then(req, r, this.emptyReply);
  }

  // ---- reply encoders -----------------------------------------------------------------------
  private emptyReply(req: Request): void {
    this.reply.ok(req, 0);
  }

  private entryReply(req: Request, e: Entry): void {
    if (e === null || typeof e !== "object" || e.attr === null || typeof e.attr !== "object") {
      throw new TypeError(`${opName(req.opcode).toLowerCase()} handler returned ${shortDescribe(e)}; expected an Entry { ino, attr } (throw FuseError("ENOENT") for a missing name)`);
    }
    encodeEntryOut(req.slot.payloadView, 0, e, this.opts.entryTtl, this.opts.attrTtl);
    this.reply.ok(req, ENTRY_OUT_SIZE);
  }

  /** LOOKUP's answer: `null` is a missing name, as a thrown ENOENT is. */
  private lookupReply(req: Request, e: Entry | null): void {
    if (e === null) return this.missingName(req);
    this.entryReply(req, e);
  }

  private lookupFailed(req: Request, err: unknown): void {
    if (err instanceof FuseError && err.errno === Errno.ENOENT) return this.missingName(req);
    this.reply.fail(req, err);
  }

  /** A missing name: cached as a negative entry (nodeid 0) when negativeTtl > 0, else ENOENT. */
  private missingName(req: Request): void {
    if (this.opts.negativeTtl > 0) {
      const dv = req.slot.payloadView;
      req.slot.payload.fill(0, 0, ENTRY_OUT_SIZE);
      setU64(dv, 16, Math.floor(this.opts.negativeTtl));
      dv.setUint32(32, Math.round((this.opts.negativeTtl % 1) * 1e9), true);
      return this.reply.ok(req, ENTRY_OUT_SIZE);
    }
    this.reply.error(req, Errno.ENOENT);
  }

  private attrReply(req: Request, a: Attr | AttrReply): void {
    const isReply = "attr" in a;
    const attr = isReply ? (a as AttrReply).attr : (a as Attr);
    const ttl = isReply ? ((a as AttrReply).attrTtl ?? this.opts.attrTtl) : this.opts.attrTtl;
    this.reply.ok(req, encodeAttrOut(req.slot.payloadView, 0, attr, ttl));
  }

  /** READLINK: a target string is a name (lone surrogates U+DC80–U+DCFF are raw bytes). */
  private bytesReply(req: Request, v: string | Uint8Array): void {
    if (typeof v === "string") return this.reply.ok(req, encodeName(v, req.text, 0));
    req.slot.payload.set(v, 0);
    this.reply.ok(req, v.length);
  }

  private openReply(req: Request, o: OpenReply | number | void): void {
    const dv = req.slot.payloadView;
    if (o === undefined || o === null) encodeOpenOut(dv, 0, zeroOpen);
    else if (typeof o === "number") {
      setU64(dv, 0, o);
      dv.setUint32(8, 0, true);
      dv.setUint32(12, 0, true);
    } else this.encodeOpen(req, dv, 0, o, req.nodeid);
    this.reply.ok(req, OPEN_OUT_SIZE);
  }

  private createReply(req: Request, c: CreateReply): void {
    const dv = req.slot.payloadView;
    encodeEntryOut(dv, 0, c.entry, this.opts.entryTtl, this.opts.attrTtl);
    const o = c.open;
    if (typeof o === "number") {
      setU64(dv, ENTRY_OUT_SIZE, o);
      dv.setUint32(ENTRY_OUT_SIZE + 8, 0, true);
      dv.setUint32(ENTRY_OUT_SIZE + 12, 0, true);
    } else this.encodeOpen(req, dv, ENTRY_OUT_SIZE, o, c.entry.ino);
    this.reply.ok(req, ENTRY_OUT_SIZE + OPEN_OUT_SIZE);
  }

  /**
   * Encodes the open reply at `off`, with the kernel-facing fh of a natively served handle. An open that asked
   * for O_DIRECT (OPEN and CREATE carry the open flags first in op_in) gets a backing
   * descriptor with O_DIRECT (unless backingCache or writebackCache; the shim reopens the
   * filesystem's buffered one and keeps that as the fallback for unaligned requests) and
   * FOPEN_DIRECT_IO: the kernel's direct path, which a caller's O_DIRECT means anyway (no page
   * cache of the mount), revalidates no attributes per read (AUTO_INVAL_DATA: a GETATTR after
   * every write), looks up no security.capability per write (GETXATTR after every attribute
   * refresh), and with FOPEN_PARALLEL_DIRECT_WRITES takes the inode lock shared for writes
   * inside the file. Set-user-ID clearing still happens: the kernel flags unprivileged direct
   * writes FUSE_WRITE_KILL_SUIDGID, and such files are not native (the passthrough).
   */
  private encodeOpen(req: Request, dv: DataView, off: number, o: OpenReply, ino: number): void {
    encodeOpenOut(dv, off, o);
    if (o.backingFd === undefined || !this.dataPlane || o.backingId) return;
    const direct = (req.slot.header.getUint32(OP, true) & O_DIRECT) !== 0;
    const backingDirect = direct && !this.opts.backingCache && !this.opts.writebackCache;
    const fh = this.dataPlane.map(o.fh, o.backingFd, backingDirect, ino, o.backingFlush === true, o.backingRelease === true && this.fs.releaseClosed !== undefined);
    // Patched in place (no copy of the handler's object per open). Only a mapped handle is
    // served natively (a full table leaves it to JS) and only a mapped one is zero-copy (for
    // direct handles too: the shim's EINVAL fallback keeps working, docs/DATAPLANE.md).
    let flags = dv.getUint32(off + 8, true) & ~FOPEN_IO_URING_ZERO_COPY;
    if (fh !== o.fh) {
      setU64(dv, off, fh);
      if (this.zeroCopy) flags |= FOPEN_IO_URING_ZERO_COPY;
      if (direct && !this.opts.writebackCache) flags |= FOPEN.DIRECT_IO | FOPEN.PARALLEL_DIRECT_WRITES;
    }
    dv.setUint32(off + 8, flags, true);
  }

  // ---- issue 24: backed handles, locks, ioctl, poll -------------------------------------------

  /** FALLOCATE/LSEEK/COPY_FILE_RANGE of natively served handles, from their descriptors. */
  private backedOp(req: Request): void {
    const h = req.slot.header;
    const dp = this.dataPlane!;
    this.backed.ops++;
    switch (req.opcode) {
      case Op.FALLOCATE:
        backedFallocate(dp.fdIn, h.getUint32(OP + 24, true), getU64(h, OP + 8), getU64(h, OP + 16));
        return this.emptyReply(req);
      case Op.LSEEK:
        return this.lseekReply(req, backedLseek(dp.fdIn, getI64(h, OP + 8), h.getUint32(OP + 16, true)));
      default: {
        const n = backedCopyFileRange(dp.fdIn, getU64(h, OP + 8), dp.fdOut, getU64(h, OP + 32), getU64(h, OP + 40), Number(h.getBigUint64(OP + 48, true)), this.backed);
        return req.opcode === Op.COPY_FILE_RANGE ? this.writeReply(req, n) : this.copyRange64Reply(req, n);
      }
    }
  }

  /** RELEASE after the last close of a file that had flock locks: unlock them, then release. */
  private releaseFlock(req: Request, fh: number, flags: number): void {
    const fs = this.fs;
    const owner = req.slot.header.getBigUint64(OP + 16, true);
    const release = () => (fs.release ? fs.release(req, req.nodeid, fh, flags) : undefined);
    let r: void | Promise<void>;
    try {
      r = fs.flock!(req, req.nodeid, fh, owner, F_UNLCK, false);
    } catch {
      r = undefined; // the release still happens
    }
    if (isThenable(r)) return this.then(req, r.then(release, release), this.emptyReply);
    return this.then(req, release(), this.emptyReply);
  }

  private lockRequest(req: Request): void {
    const fs = this.fs;
    const lk = decodeLkIn(req.slot.header, OP);
    const wait = req.opcode === Op.SETLKW;
    if (lk.lkFlags & FUSE_LK_FLOCK) {
      if (!fs.flock || req.opcode === Op.GETLK) return this.missing(req);
      return this.then(req, fs.flock(req, req.nodeid, lk.fh, lk.owner, lk.lock.type, wait), this.emptyReply);
    }
    if (req.opcode === Op.GETLK) {
      if (!fs.getlk) return this.missing(req);
      return this.then(req, fs.getlk(req, req.nodeid, lk.fh, lk.owner, lk.lock), this.lockReply);
    }
    if (!fs.setlk) return this.missing(req);
    return this.then(req, fs.setlk(req, req.nodeid, lk.fh, lk.owner, lk.lock, wait), this.emptyReply);
  }

  private lockReply(req: Request, l: FileLock): void {
    if (l === null || typeof l !== "object" || typeof l.type !== "number") throw new TypeError(`getlk handler returned ${shortDescribe(l)}; expected { start, end, type, pid }`);
    this.reply.ok(req, encodeFileLock(req.slot.payloadView, 0, l));
  }

  private ioctlRequest(req: Request): void {
    const fs = this.fs;
    if (!fs.ioctl) return this.missing(req);
    const io = decodeIoctlIn(req.slot.header, OP);
    if (io.inSize > req.payloadSize) throw new FuseError("EIO", `IOCTL with in_size ${io.inSize} and ${req.payloadSize} bytes of payload`);
    req.size = io.outSize;
    const data = req.payloadPrefix(io.inSize);
    return this.then(req, fs.ioctl(req, req.nodeid, io.fh, io.cmd, io.arg, data, io.outSize, io.flags), this.ioctlReply);
  }

  private ioctlReply(req: Request, r: IoctlReply): void {
    const dv = req.slot.payloadView;
    if (typeof r === "number") return this.reply.ok(req, encodeIoctlOut(dv, 0, r, 0));
    if (r === null || typeof r !== "object") throw new TypeError(`ioctl handler returned ${shortDescribe(r)}; expected a number, { result, data } or { retry }`);
    if ("retry" in r) {
      // Only unrestricted ioctls (CUSE) may ask for their data again; the kernel answers EIO otherwise.
      if (!(req.slot.header.getUint32(OP + 8, true) & FUSE_IOCTL.UNRESTRICTED)) throw new FuseError("EIO", "ioctl retry asked for a restricted ioctl (only CUSE sends unrestricted ones)");
      const { in: ins, out: outs } = r.retry;
      if (ins.length + outs.length > FUSE_IOCTL_MAX_IOV) throw new FuseError("EIO", "ioctl retry with more than FUSE_IOCTL_MAX_IOV iovecs");
      if (IOCTL_OUT_SIZE + (ins.length + outs.length) * IOCTL_IOVEC_SIZE > req.slot.payload.length) throw new FuseError("EIO", "ioctl retry iovecs do not fit");
      return this.reply.ok(req, encodeIoctlOut(dv, 0, 0, FUSE_IOCTL.RETRY, ins, outs));
    }
    const data = r.data;
    const n = data ? data.length : 0;
    if (n > req.size) throw new FuseError("EIO", `ioctl answered ${n} bytes; the caller's buffer takes ${req.size}`);
    encodeIoctlOut(dv, 0, r.result ?? 0, 0);
    if (data) req.slot.payload.set(data, IOCTL_OUT_SIZE);
    this.reply.ok(req, IOCTL_OUT_SIZE + n);
  }

  private pollRequest(req: Request): void {
    const fs = this.fs;
    if (!fs.poll) return this.missing(req);
    const p = decodePollIn(req.slot.header, OP);
    const kh = p.flags & FUSE_POLL_SCHEDULE_NOTIFY ? p.kh : null;
    return this.then(req, fs.poll(req, req.nodeid, p.fh, kh, p.events), this.pollReply);
  }

  private pollReply(req: Request, revents: number): void {
    if (typeof revents !== "number") throw new TypeError(`poll handler returned ${shortDescribe(revents)}; expected the ready events (a number)`);
    this.reply.ok(req, encodePollOut(req.slot.payloadView, 0, revents));
  }

  private readReply(req: Request, r: number | Uint8Array): void {
    if (typeof r === "number") {
      if (!(r >= 0 && r <= req.size)) throw new Error(`read handler returned ${r} for a ${req.size}-byte read`);
      return this.reply.ok(req, r);
    }
    const n = Math.min(r.length, req.size);
    // The handler may have returned the very view it was given: no copy needed then.
    if (r.buffer !== req.slot.payload.buffer || r.byteOffset !== req.slot.payload.byteOffset) {
      req.slot.payload.set(n === r.length ? r : r.subarray(0, n), 0);
    }
    this.reply.ok(req, n);
  }

  private writeReply(req: Request, n: number): void {
    this.reply.ok(req, encodeWriteOut(req.slot.payloadView, 0, n));
  }

  private copyRange64Reply(req: Request, n: number): void {
    setU64(req.slot.payloadView, 0, n);
    this.reply.ok(req, 8);
  }

  private lseekReply(req: Request, off: number): void {
    setU64(req.slot.payloadView, 0, off);
    this.reply.ok(req, 8);
  }

  private statfsReply(req: Request, s: Statfs): void {
    this.reply.ok(req, encodeStatfsOut(req.slot.payloadView, 0, s));
  }

  private xattrReply(req: Request, v: Uint8Array | string): void {
    const bytes = typeof v === "string" ? Buffer.from(v, "utf8") : v;
    if (req.size === 0) return this.reply.ok(req, encodeWriteOut(req.slot.payloadView, 0, bytes.length));
    if (bytes.length > req.size) return this.reply.error(req, Errno.ERANGE);
    req.slot.payload.set(bytes, 0);
    this.reply.ok(req, bytes.length);
  }

  private listxattrReply(req: Request, names: string[]): void {
    let total = 0;
    for (const n of names) total += nameByteLength(n) + 1;
    if (req.size === 0) return this.reply.ok(req, encodeWriteOut(req.slot.payloadView, 0, total));
    if (total > req.size) return this.reply.error(req, Errno.ERANGE);
    let off = 0;
    for (const n of names) {
      off += encodeName(n, req.text, off);
      req.slot.payload[off++] = 0;
    }
    this.reply.ok(req, off);
  }

  private readdirReply(req: Request): void {
    this.reply.ok(req, this.fillers.get(req)!.pos);
  }

  // ---- readdir ------------------------------------------------------------------------------
  private readonly fillers = new Map<Request, Filler>();
  private filler(req: Request, plus: boolean): Filler {
    let f = this.fillers.get(req);
    if (!f) {
      f = new Filler(req, this.opts);
      this.fillers.set(req, f);
    }
    f.reset(plus);
    return f;
  }
}

/** A short description of a wrong value for error messages ("undefined", "a string", …). */
function shortDescribe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (typeof v === "string") return v.length > 40 ? `a string (${JSON.stringify(v.slice(0, 40))}…)` : `a string (${JSON.stringify(v)})`;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return `${typeof v} ${String(v)}`;
  if (typeof v === "function") return "a function";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object" && !("attr" in v)) return `an object without attr (keys: ${Object.keys(v).slice(0, 6).join(", ") || "none"})`;
  return `an object with a bad attr`;
}

/** The InodeFS method that handles an opcode (for log lines about slow handlers). */
export function handlerNameOf(opcode: number): string {
  switch (opcode) {
    case Op.COPY_FILE_RANGE: case Op.COPY_FILE_RANGE_64: return "copyFileRange";
    case Op.RENAME2: return "rename";
    case Op.SETLKW: return "setlk";
    case Op.READDIRPLUS: return "readdir";
    default: return opName(opcode).toLowerCase();
  }
}

const zeroOpen: OpenReply = { fh: 0 };

const defaultStatfs: Statfs = { blocks: 0, bfree: 0, bavail: 0, files: 0, ffree: 0, bsize: 512, namelen: 255, frsize: 512 };

/** Writes fuse_dirent / fuse_direntplus records straight into the reply payload. */
class Filler implements DirFiller {
  plus = false;
  pos = 0;
  constructor(private readonly req: Request, private readonly opts: DispatchOptions) {}

  reset(plus: boolean): void {
    this.plus = plus;
    this.pos = 0;
  }

  add(name: string, nextOffset: number, entry: Entry): boolean {
    if (typeof name !== "string" || typeof nextOffset !== "number" || entry === null || typeof entry !== "object" || typeof entry.attr !== "object" || entry.attr === null) {
      throw new TypeError(
        `DirFiller.add(name: string, nextOffset: number, entry: { ino, attr }) called with (${shortDescribe(name)}, ${shortDescribe(nextOffset)}, ${shortDescribe(entry)})`,
      );
    }
    const req = this.req;
    const nameLen = nameByteLength(name);
    if (nameLen === 0 || nameLen > 1024) throw new FuseError("EIO", `readdir: bad name length ${nameLen}`);
    const size = this.plus ? direntplusSize(nameLen) : direntSize(nameLen);
    if (this.pos + size > req.size) return false;
    const dv = req.slot.payloadView;
    let off = this.pos;
    if (this.plus) {
      const dot = name === "." || name === "..";
      if (dot || entry.ino === 0) req.slot.payload.fill(0, off, off + ENTRY_OUT_SIZE);
      else encodeEntryOut(dv, off, entry, this.opts.entryTtl, this.opts.attrTtl);
      off += ENTRY_OUT_SIZE;
    }
    encodeName(name, req.text, off + 24);
    encodeDirentHeader(req.slot.payload, dv, off, entry.attr.ino || entry.ino, nextOffset, nameLen, entry.attr.mode);
    this.pos += size;
    return true;
  }
}

function setattrChanges(h: DataView): SetattrChanges {
  const s = decodeSetattrIn(h, OP);
  const c: SetattrChanges = { valid: s.valid };
  if (s.valid & FATTR.MODE) c.mode = s.mode;
  if (s.valid & FATTR.UID) c.uid = s.uid;
  if (s.valid & FATTR.GID) c.gid = s.gid;
  if (s.valid & FATTR.SIZE) c.size = s.size;
  if (s.valid & FATTR.ATIME_NOW) c.atime = "now";
  else if (s.valid & FATTR.ATIME) c.atime = [s.atime, s.atimensec];
  if (s.valid & FATTR.MTIME_NOW) c.mtime = "now";
  else if (s.valid & FATTR.MTIME) c.mtime = [s.mtime, s.mtimensec];
  if (s.valid & FATTR.CTIME) c.ctime = [s.ctime, s.ctimensec];
  if (s.valid & FATTR.FH) c.fh = s.fh;
  return c;
}

/** route()'s table: opcode → its method (opcodes are < 64; unlisted ones are unknown). */
const ROUTES: (((this: Dispatcher, req: Request) => void) | undefined)[] = new Array(64).fill(undefined);
ROUTES[Op.LOOKUP] = Dispatcher.prototype["onLookup"];
ROUTES[Op.GETATTR] = Dispatcher.prototype["onGetattr"];
ROUTES[Op.SETATTR] = Dispatcher.prototype["onSetattr"];
ROUTES[Op.READLINK] = Dispatcher.prototype["onReadlink"];
ROUTES[Op.SYMLINK] = Dispatcher.prototype["onSymlink"];
ROUTES[Op.MKNOD] = Dispatcher.prototype["onMknod"];
ROUTES[Op.MKDIR] = Dispatcher.prototype["onMkdir"];
ROUTES[Op.UNLINK] = Dispatcher.prototype["onUnlink"];
ROUTES[Op.RMDIR] = Dispatcher.prototype["onRmdir"];
ROUTES[Op.RENAME] = Dispatcher.prototype["onRename"];
ROUTES[Op.RENAME2] = Dispatcher.prototype["onRename"];
ROUTES[Op.LINK] = Dispatcher.prototype["onLink"];
ROUTES[Op.OPEN] = Dispatcher.prototype["onOpen"];
ROUTES[Op.OPENDIR] = Dispatcher.prototype["onOpen"];
ROUTES[Op.READ] = Dispatcher.prototype["onRead"];
ROUTES[Op.WRITE] = Dispatcher.prototype["onWrite"];
ROUTES[Op.STATFS] = Dispatcher.prototype["onStatfs"];
ROUTES[Op.RELEASE] = Dispatcher.prototype["onRelease"];
ROUTES[Op.RELEASEDIR] = Dispatcher.prototype["onRelease"];
ROUTES[Op.FSYNC] = Dispatcher.prototype["onFsync"];
ROUTES[Op.FSYNCDIR] = Dispatcher.prototype["onFsync"];
ROUTES[Op.FLUSH] = Dispatcher.prototype["onFlush"];
ROUTES[Op.SETXATTR] = Dispatcher.prototype["onSetxattr"];
ROUTES[Op.GETXATTR] = Dispatcher.prototype["onGetxattr"];
ROUTES[Op.LISTXATTR] = Dispatcher.prototype["onListxattr"];
ROUTES[Op.REMOVEXATTR] = Dispatcher.prototype["onRemovexattr"];
ROUTES[Op.READDIR] = Dispatcher.prototype["onReaddir"];
ROUTES[Op.READDIRPLUS] = Dispatcher.prototype["onReaddir"];
ROUTES[Op.ACCESS] = Dispatcher.prototype["onAccess"];
ROUTES[Op.CREATE] = Dispatcher.prototype["onCreate"];
ROUTES[Op.FALLOCATE] = Dispatcher.prototype["onFallocate"];
ROUTES[Op.LSEEK] = Dispatcher.prototype["onLseek"];
ROUTES[Op.COPY_FILE_RANGE] = Dispatcher.prototype["onCopyFileRange"];
ROUTES[Op.COPY_FILE_RANGE_64] = Dispatcher.prototype["onCopyFileRange"];
ROUTES[Op.SYNCFS] = Dispatcher.prototype["emptyReply"];
ROUTES[Op.GETLK] = Dispatcher.prototype["lockRequest"];
ROUTES[Op.SETLK] = Dispatcher.prototype["lockRequest"];
ROUTES[Op.SETLKW] = Dispatcher.prototype["lockRequest"];
ROUTES[Op.IOCTL] = Dispatcher.prototype["ioctlRequest"];
ROUTES[Op.POLL] = Dispatcher.prototype["pollRequest"];
ROUTES[Op.TMPFILE] = Dispatcher.prototype["onTmpfile"];
ROUTES[Op.DESTROY] = Dispatcher.prototype["onDestroy"];
