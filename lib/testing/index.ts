// "fuse-uring/testing": unit-test a filesystem without a mount, root or a kernel. Requests are
// encoded as the kernel sends them (wire.ts), put into a fake slot (the 288-byte ring header and
// a payload buffer) and handed to the REAL dispatcher (lib/session/dispatch.ts) and reply encoder
// (reply.ts), exactly as the Session does it. Every call resolves with the reply's bytes as they
// would go to the kernel (out_header + out args) and the decoded values.
//
//   import { testFs } from "fuse-uring/testing";
//   const t = testFs(defineFs({ getattr: … }));
//   const r = await t.lookup(1, "hello.txt");      // r.error === 0, r.entry.attr.size === 6
//   const o = await t.open(r.entry!.nodeid, O_RDONLY);
//   const d = await t.read(r.entry!.nodeid, o.open!.fh, 0, 4096);  // d.data: the bytes
//
// What the Session does itself is done here the same way: FORGET/BATCH_FORGET call
// `fs.forget`, INTERRUPT aborts `ctx.signal` of the request it names, INIT calls `fs.init` with
// a synthetic InitInfo (`t.init()`).

import { Errno } from "../protocol/errors.ts";
import type { InitInfo, InodeFS } from "../session/filesystem.ts";
import { toInodeFS, type Filesystem } from "../path/convert.ts";
import { encodeOutHeader } from "../protocol/codec.ts";
import { HDR_OP_IN, HDR_PAYLOAD_SZ, initFlagNames, Op, OUT_HEADER_SIZE, RING_HEADER_SIZE } from "../protocol/constants.ts";
import { Dispatcher, type DispatchOptions } from "../session/dispatch.ts";
import { Replier, type ReplyObserver } from "../session/reply.ts";
import { Request } from "../session/request.ts";
import type { Slot, Source, SourceStats } from "../transport/types.ts";
import {
  decodeAttrOut, decodeDirents, decodeEntryOut, decodeNames, decodeOpenOut, decodeSize, decodeStatfsOut, req, type Dirent, type EncodedRequest, type EntryOut,
} from "./wire.ts";

export { req, names, decodeAttr, decodeAttrOut, decodeDirents, decodeEntryOut, decodeNames, decodeOpenOut, decodeSize, decodeStatfsOut } from "./wire.ts";
export type { Dirent, EncodedRequest, EntryOut } from "./wire.ts";

export interface TestFsOptions extends Partial<DispatchOptions> {
  /** Payload buffer of each request (default 1 MiB + 4 KiB, the largest WRITE/READ). */
  payloadSize?: number;
  /** Caller identity of every request (default 0/0/1). */
  uid?: number;
  gid?: number;
  pid?: number;
}

/** One answer, as the kernel would receive it. */
export interface Reply {
  opcode: number;
  unique: number;
  /** 0, or the positive errno (out_header.error is its negative). */
  error: number;
  /** The whole reply: out_header (16 bytes: len, error, unique) followed by the out args. */
  bytes: Uint8Array;
  /** The out args alone (bytes after the out_header). */
  payload: Uint8Array;
  /** FORGET, BATCH_FORGET, INTERRUPT: no reply is sent. */
  noReply: boolean;
}

export interface EntryReply extends Reply { entry?: EntryOut }
export interface AttrReplyOut extends Reply { attr?: ReturnType<typeof decodeAttrOut> }
export interface OpenReplyOut extends Reply { open?: ReturnType<typeof decodeOpenOut> }
export interface DataReply extends Reply { data: Uint8Array }
export interface SizeReply extends Reply { size?: number }
export interface DirReply extends Reply { entries: Dirent[] }
export interface CreateReplyOut extends Reply { entry?: EntryOut; open?: ReturnType<typeof decodeOpenOut> }

class TestSource implements Source {
  readonly kind = "uring" as const;
  readonly slots: Slot[] = [];
  readonly pinnedBytes = 0;
  /** Called when a slot's answer is sent (or it is released without one). */
  onAnswer: (slot: Slot, len: number | null) => void = () => {};
  drain(): void {}
  reply(slot: Slot, payloadLen: number): void {
    this.onAnswer(slot, payloadLen);
  }
  release(slot: Slot): void {
    this.onAnswer(slot, null);
  }
  flush(): void {}
  stop(): void {}
  destroy(): void {}
  stats(): SourceStats {
    return { requests: 0, wakeups: 0, cqes: 0, submits: 0, errors: 0, fixedIo: 0 };
  }
}

interface Pending {
  req: Request;
  resolve: (r: Reply) => void;
}

/** A filesystem under test: send requests, get the replies. */
export class FsTester {
  readonly fs: InodeFS;
  private readonly source = new TestSource();
  private readonly replier: Replier;
  private readonly dispatcher: Dispatcher;
  private readonly pending = new Map<Slot, Pending>();
  private readonly free: Slot[] = [];
  /** One Request per slot, reused like the Session's. */
  private readonly requests = new Map<Slot, Request>();
  private nextUnique = 2;
  private readonly payloadSize: number;
  /** Exceptions the filesystem threw that became EIO (the Session logs them once). */
  readonly unexpected: unknown[] = [];
  /** Protocol errors (answered twice, …): a test should expect this to stay empty. */
  readonly protocolErrors: string[] = [];
  /** Handlers that settled after their request was answered (interrupt, …). */
  late = 0;

  constructor(filesystem: Filesystem, readonly options: TestFsOptions = {}) {
    this.fs = toInodeFS(filesystem);
    this.payloadSize = options.payloadSize ?? (1 << 20) + 4096;
    const self = this;
    const observer: ReplyObserver = {
      alive: true,
      done: () => {},
      unexpected: (_r, e) => void self.unexpected.push(e),
      protocolError: (_r, what) => void self.protocolErrors.push(what),
      late: () => void self.late++,
      deferred: () => {},
    };
    this.replier = new Replier(observer);
    const opts: DispatchOptions = { entryTtl: options.entryTtl ?? 1, attrTtl: options.attrTtl ?? 1, negativeTtl: options.negativeTtl ?? 0, backingCache: false, writebackCache: false };
    this.dispatcher = new Dispatcher(this.fs, this.replier, opts, () => {});
    this.source.onAnswer = (slot, len) => this.answered(slot, len);
  }

  /** INIT as the Session runs it: fs.init with a synthetic InitInfo (nothing is negotiated). */
  async init(info: Partial<InitInfo> = {}): Promise<void> {
    const full: InitInfo = {
      kernelMinor: 45, offered: 0n, granted: 0n, grantedNames: initFlagNames(info.granted ?? 0n), maxWrite: 1 << 20, maxReadahead: 128 << 10,
      transport: "uring",
      backingOpen: () => {
        throw new Error("no kernel passthrough in fuse-uring/testing");
      },
      backingClose: () => {},
      ...info,
    };
    await this.fs.init?.(full);
  }

  /** DESTROY: fs.destroy, answered like the Session does. */
  destroy(): Promise<Reply> {
    return this.send({ opcode: Op.DESTROY, nodeid: 0, opIn: new Uint8Array(0), payload: new Uint8Array(0) });
  }

  private slot(): Slot {
    const reuse = this.free.pop();
    if (reuse) return reuse;
    const headerBytes = new Uint8Array(RING_HEADER_SIZE);
    const payload = new Uint8Array(this.payloadSize);
    const slot: Slot = {
      source: this.source,
      index: this.source.slots.length,
      header: new DataView(headerBytes.buffer),
      headerBytes,
      payload,
      payloadView: new DataView(payload.buffer),
      payloadText: Buffer.from(payload.buffer, 0, payload.length),
    };
    this.source.slots.push(slot);
    return slot;
  }

  private answered(slot: Slot, len: number | null): void {
    const p = this.pending.get(slot);
    if (!p) {
      this.protocolErrors.push(`an answer for slot ${slot.index}, which carries no request`);
      return;
    }
    this.pending.delete(slot);
    const h = slot.header;
    let reply: Reply;
    if (len === null) {
      reply = { opcode: p.req.opcode, unique: p.req.uniqueNumber, error: 0, bytes: new Uint8Array(0), payload: new Uint8Array(0), noReply: true };
    } else {
      const bytes = new Uint8Array(OUT_HEADER_SIZE + len);
      bytes.set(slot.headerBytes.subarray(0, OUT_HEADER_SIZE), 0);
      bytes.set(slot.payload.subarray(0, len), OUT_HEADER_SIZE);
      reply = { opcode: p.req.opcode, unique: p.req.uniqueNumber, error: -h.getInt32(4, true) || 0, bytes, payload: bytes.subarray(OUT_HEADER_SIZE), noReply: false };
    }
    this.free.push(slot);
    p.resolve(reply);
  }

  /** Requests waiting for their answers (for INTERRUPT): unique → request. */
  private inFlight(unique: number): Request | undefined {
    for (const p of this.pending.values()) if (p.req.uniqueNumber === unique) return p.req;
    return undefined;
  }

  /** The unique id the next request will carry (to interrupt it). */
  get nextUniqueId(): number {
    return this.nextUnique;
  }

  /**
   * Send one request; resolves with its reply. The request goes through the dispatcher exactly
   * as in a mount (same decoding, same encoders, same error mapping).
   */
  send(r: EncodedRequest, who: { uid?: number; gid?: number; pid?: number } = {}): Promise<Reply> {
    if (r.payload.length > this.payloadSize) throw new RangeError(`payload of ${r.payload.length} bytes > payloadSize ${this.payloadSize}`);
    const slot = this.slot();
    let request = this.requests.get(slot);
    if (!request) {
      const r = new Request(slot);
      r.onIoComplete = (res, gen) => this.replier.ioDone(r, res, gen);
      this.requests.set(slot, (request = r));
    }
    const h = slot.header;
    slot.headerBytes.fill(0);
    const unique = this.nextUnique;
    this.nextUnique += 2;
    h.setUint32(0, 40 + r.opIn.length + r.payload.length, true);
    h.setUint32(4, r.opcode, true);
    h.setBigUint64(8, BigInt(unique), true);
    h.setBigUint64(16, BigInt(r.nodeid), true);
    h.setUint32(24, who.uid ?? this.options.uid ?? 0, true);
    h.setUint32(28, who.gid ?? this.options.gid ?? 0, true);
    h.setUint32(32, who.pid ?? this.options.pid ?? 1, true);
    slot.headerBytes.set(r.opIn, HDR_OP_IN);
    h.setUint32(HDR_PAYLOAD_SZ, r.payload.length, true);
    slot.payload.fill(0);
    slot.payload.set(r.payload, 0);
    // As Session.onRequest decodes the in_header.
    request.opcode = r.opcode;
    request.uniqueLo = unique >>> 0;
    request.uniqueHi = Math.floor(unique / 4294967296);
    request.nodeid = r.nodeid;
    request.uid = h.getUint32(24, true);
    request.gid = h.getUint32(28, true);
    request.pid = h.getUint32(32, true);
    request.payloadSize = r.payload.length;
    request.begin(performance.now());
    const done = new Promise<Reply>((resolve) => this.pending.set(slot, { req: request, resolve }));
    // What Session.onRequest handles itself, done the same way; everything else is dispatched.
    switch (r.opcode) {
      case Op.FORGET:
      case Op.BATCH_FORGET: {
        const pairs: [number, number][] = [];
        if (r.opcode === Op.FORGET) pairs.push([r.nodeid, Number(new DataView(r.opIn.buffer, r.opIn.byteOffset).getBigUint64(0, true))]);
        else {
          const dv = new DataView(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength);
          for (let i = 0; (i + 1) * 16 <= r.payload.length; i++) pairs.push([Number(dv.getBigUint64(i * 16, true)), Number(dv.getBigUint64(i * 16 + 8, true))]);
        }
        for (const [ino, n] of pairs) {
          try {
            this.fs.forget?.(ino, n);
          } catch (e) {
            this.unexpected.push(e);
          }
        }
        this.replier.none(request);
        break;
      }
      case Op.INIT:
        throw new Error("fuse-uring/testing: call t.init() (INIT is negotiated by the Session, not the dispatcher)");
      case Op.INTERRUPT: {
        const target = Number(new DataView(r.opIn.buffer, r.opIn.byteOffset).getBigUint64(0, true));
        const t = this.inFlight(target);
        if (t) t.interrupt();
        if (t) this.replier.none(request);
        else this.replier.error(request, Errno.EAGAIN);
        break;
      }
      default:
        this.dispatcher.dispatch(request);
    }
    return done;
  }

  /** FORGET `nlookup` references to `ino` (no reply). */
  forget(ino: number, nlookup = 1): Promise<Reply> {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(nlookup), true);
    return this.send({ opcode: Op.FORGET, nodeid: ino, opIn: b, payload: new Uint8Array(0) });
  }

  /** BATCH_FORGET of [ino, nlookup] pairs (no reply). */
  batchForget(pairs: [number, number][]): Promise<Reply> {
    const head = new Uint8Array(8);
    new DataView(head.buffer).setUint32(0, pairs.length, true);
    const payload = new Uint8Array(pairs.length * 16);
    const dv = new DataView(payload.buffer);
    pairs.forEach(([ino, n], i) => {
      dv.setBigUint64(i * 16, BigInt(ino), true);
      dv.setBigUint64(i * 16 + 8, BigInt(n), true);
    });
    return this.send({ opcode: Op.BATCH_FORGET, nodeid: 0, opIn: head, payload });
  }

  /** INTERRUPT the request with unique id `unique` (its handler sees ctx.signal abort). */
  interrupt(unique: number): Promise<Reply> {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(unique), true);
    return this.send({ opcode: Op.INTERRUPT, nodeid: 0, opIn: b, payload: new Uint8Array(0) });
  }

  // ---- one method per opcode, with the reply decoded ------------------------------------------

  private async withEntry(r: EncodedRequest): Promise<EntryReply> {
    const rep: EntryReply = await this.send(r);
    if (!rep.error) rep.entry = decodeEntryOut(rep.payload);
    return rep;
  }
  private async withAttr(r: EncodedRequest): Promise<AttrReplyOut> {
    const rep: AttrReplyOut = await this.send(r);
    if (!rep.error) rep.attr = decodeAttrOut(rep.payload);
    return rep;
  }
  private async withOpen(r: EncodedRequest): Promise<OpenReplyOut> {
    const rep: OpenReplyOut = await this.send(r);
    if (!rep.error) rep.open = decodeOpenOut(rep.payload);
    return rep;
  }
  private async withData(r: EncodedRequest): Promise<DataReply> {
    const rep = await this.send(r);
    return { ...rep, data: rep.payload };
  }
  private async withSize(r: EncodedRequest): Promise<SizeReply> {
    const rep: SizeReply = await this.send(r);
    if (!rep.error) rep.size = decodeSize(rep.payload);
    return rep;
  }

  lookup = (parent: number, name: string) => this.withEntry(req.lookup(parent, name));
  getattr = (ino: number, fh?: number) => this.withAttr(req.getattr(ino, fh));
  setattr = (ino: number, s: Parameters<typeof req.setattr>[1]) => this.withAttr(req.setattr(ino, s));
  readlink = (ino: number) => this.withData(req.readlink(ino));
  symlink = (parent: number, name: string, target: string) => this.withEntry(req.symlink(parent, name, target));
  mknod = (parent: number, name: string, mode: number, rdev = 0, umask = 0) => this.withEntry(req.mknod(parent, name, mode, rdev, umask));
  mkdir = (parent: number, name: string, mode: number, umask = 0) => this.withEntry(req.mkdir(parent, name, mode, umask));
  unlink = (parent: number, name: string) => this.send(req.unlink(parent, name));
  rmdir = (parent: number, name: string) => this.send(req.rmdir(parent, name));
  rename = (parent: number, name: string, newParent: number, newName: string, flags?: number) => this.send(req.rename(parent, name, newParent, newName, flags));
  link = (ino: number, newParent: number, newName: string) => this.withEntry(req.link(ino, newParent, newName));
  open = (ino: number, flags: number) => this.withOpen(req.open(ino, flags));
  opendir = (ino: number, flags = 0) => this.withOpen(req.opendir(ino, flags));
  read = (ino: number, fh: number, offset: number, size: number) => this.withData(req.read(ino, fh, offset, size));
  write = (ino: number, fh: number, offset: number, data: Uint8Array | string, writeFlags = 0, flags = 0) => this.withSize(req.write(ino, fh, offset, data, writeFlags, flags));
  statfs = async (ino = 1) => {
    const rep = await this.send(req.statfs(ino));
    return { ...rep, statfs: rep.error ? undefined : decodeStatfsOut(rep.payload) };
  };
  release = (ino: number, fh: number, flags = 0) => this.send(req.release(ino, fh, flags));
  releasedir = (ino: number, fh: number) => this.send(req.releasedir(ino, fh));
  fsync = (ino: number, fh: number, datasync = false) => this.send(req.fsync(ino, fh, datasync));
  fsyncdir = (ino: number, fh: number, datasync = false) => this.send({ ...req.fsync(ino, fh, datasync), opcode: Op.FSYNCDIR });
  flush = (ino: number, fh: number, lockOwner: bigint = 0n) => this.send(req.flush(ino, fh, lockOwner));
  setxattr = (ino: number, name: string, value: Uint8Array | string, flags = 0) => this.send(req.setxattr(ino, name, value, flags));
  /** size 0 asks for the value's size (reply: size); otherwise the value (reply: data). */
  getxattr = async (ino: number, name: string, size: number) => {
    const rep = await this.send(req.getxattr(ino, name, size));
    return { ...rep, data: rep.payload, size: !rep.error && size === 0 ? decodeSize(rep.payload) : undefined };
  };
  listxattr = async (ino: number, size: number) => {
    const rep = await this.send(req.listxattr(ino, size));
    return { ...rep, names: !rep.error && size > 0 ? decodeNames(rep.payload) : [], size: !rep.error && size === 0 ? decodeSize(rep.payload) : undefined };
  };
  removexattr = (ino: number, name: string) => this.send(req.removexattr(ino, name));
  readdir = async (ino: number, fh: number, offset: number, size: number): Promise<DirReply> => {
    const rep = await this.send(req.readdir(ino, fh, offset, size));
    return { ...rep, entries: rep.error ? [] : decodeDirents(rep.payload) };
  };
  readdirplus = async (ino: number, fh: number, offset: number, size: number): Promise<DirReply> => {
    const rep = await this.send(req.readdirplus(ino, fh, offset, size));
    return { ...rep, entries: rep.error ? [] : decodeDirents(rep.payload, true) };
  };
  access = (ino: number, mask: number) => this.send(req.access(ino, mask));
  create = async (parent: number, name: string, flags: number, mode: number, umask = 0): Promise<CreateReplyOut> => {
    const rep: CreateReplyOut = await this.send(req.create(parent, name, flags, mode, umask));
    if (!rep.error) {
      rep.entry = decodeEntryOut(rep.payload);
      rep.open = decodeOpenOut(rep.payload, 128);
    }
    return rep;
  };
  fallocate = (ino: number, fh: number, offset: number, length: number, mode = 0) => this.send(req.fallocate(ino, fh, offset, length, mode));
  lseek = async (ino: number, fh: number, offset: number, whence: number) => {
    const rep = await this.send(req.lseek(ino, fh, offset, whence));
    return { ...rep, offset: rep.error ? undefined : Number(new DataView(rep.payload.buffer, rep.payload.byteOffset).getBigUint64(0, true)) };
  };
  copyFileRange = (inoIn: number, fhIn: number, offIn: number, inoOut: number, fhOut: number, offOut: number, len: number, flags = 0) =>
    this.withSize(req.copyFileRange(inoIn, fhIn, offIn, inoOut, fhOut, offOut, len, flags));
}

/** A tester for `filesystem` (anything mount() accepts). */
export function testFs(filesystem: Filesystem, options: TestFsOptions = {}): FsTester {
  return new FsTester(filesystem, options);
}

/** Out header bytes for a reply of `len` payload bytes and errno `errno` (0 = success). */
export function outHeader(len: number, errno: number, unique: number): Uint8Array {
  const b = new Uint8Array(OUT_HEADER_SIZE);
  encodeOutHeader(new DataView(b.buffer), 0, OUT_HEADER_SIZE + len, -errno, unique >>> 0, Math.floor(unique / 4294967296));
  return b;
}
