// The --debug request trace, modelled on go-fuse's rx/tx lines: one line when a request
// arrives, one when its answer goes out, both keyed by the kernel's unique id:
//
//   rx 12 LOOKUP n1 "hello.txt"
//   tx 12 OK n2 mode=0100644 size=14 nlink=1  0.081 ms [uring]
//   rx 13 READ n2 fh=3 off=0 size=4096 flags=O_RDONLY
//   tx 13 OK 14 bytes  0.052 ms [uring]
//   tx 14 ENOENT  0.031 ms [classic]
//
// Only formatting lives here. The session creates a Tracer only when debug is on and wraps the
// sources' reply() (traceReplies), so the non-debug hot path has no trace code at all. The tx
// line is formatted at reply time, while the slot still holds the answer: once handed back, a
// classic slot may be refilled by the reader thread.

import { errnoName } from "../protocol/errors.ts";
import { getU64 } from "../protocol/codec.ts";
import { FATTR, HDR_OP_IN, Op, opName } from "../protocol/constants.ts";
import type { Slot, Source } from "../transport/types.ts";
import type { Request } from "./request.ts";

const OP = HDR_OP_IN;

/** A name from the payload as a quoted string; bytes that are not UTF-8 as \xNN. */
export function quoteName(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("utf8");
  if (!text.includes("\ufffd")) return JSON.stringify(text);
  let out = '"';
  for (const b of bytes) out += b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`;
  return out + '"';
}

const OPEN_FLAG_NAMES: [number, string][] = [
  [0o100, "O_CREAT"], [0o200, "O_EXCL"], [0o400, "O_NOCTTY"], [0o1000, "O_TRUNC"], [0o2000, "O_APPEND"],
  [0o4000, "O_NONBLOCK"], [0o4010000, "O_SYNC"], [0o10000, "O_DSYNC"], [0o40000, "O_DIRECT"], [0o100000, "O_LARGEFILE"],
  [0o200000, "O_DIRECTORY"], [0o400000, "O_NOFOLLOW"], [0o1000000, "O_NOATIME"], [0o2000000, "O_CLOEXEC"], [0o10000000, "O_PATH"],
];

/** open(2) flags as O_RDONLY|O_CREAT|…, unknown bits in hex. */
export function openFlagNames(flags: number): string {
  const acc = flags & 3;
  const parts = [acc === 0 ? "O_RDONLY" : acc === 1 ? "O_WRONLY" : acc === 2 ? "O_RDWR" : "O_ACCMODE"];
  let rest = flags & ~3;
  for (const [bit, name] of OPEN_FLAG_NAMES) {
    if ((rest & bit) === bit) {
      parts.push(name);
      rest &= ~bit;
    }
  }
  if (rest) parts.push(`0x${(rest >>> 0).toString(16)}`);
  return parts.join("|");
}

function bitNames(flags: number, names: [number, string][]): string {
  const parts: string[] = [];
  let rest = flags;
  for (const [bit, name] of names) {
    if (rest & bit) {
      parts.push(name);
      rest &= ~bit;
    }
  }
  if (rest) parts.push(`0x${(rest >>> 0).toString(16)}`);
  return parts.length ? parts.join("|") : "0";
}

const WRITE_FLAGS: [number, string][] = [[1, "CACHE"], [2, "LOCKOWNER"], [4, "KILL_SUIDGID"]];
const FOPEN_FLAGS: [number, string][] = [
  [1, "DIRECT_IO"], [2, "KEEP_CACHE"], [4, "NONSEEKABLE"], [8, "CACHE_DIR"], [16, "STREAM"], [32, "NOFLUSH"], [64, "PARALLEL_DIRECT_WRITES"], [128, "PASSTHROUGH"],
];
const SETATTR_FIELDS: [number, string][] = Object.entries(FATTR).map(([k, v]) => [v as number, k.toLowerCase()]);

function mode(m: number): string {
  return "0" + m.toString(8);
}

/** fuse_attr at `off` of `dv`: the fields a reader checks first. */
function attr(dv: DataView, off: number): string {
  return `mode=${mode(dv.getUint32(off + 60, true))} size=${getU64(dv, off + 8)} nlink=${dv.getUint32(off + 64, true)}`;
}

/** fuse_entry_out at `off`: node id, then its attributes (n0 = negative entry). */
function entry(dv: DataView, off: number): string {
  const node = getU64(dv, off);
  return node === 0 ? "n0 (negative entry)" : `n${node} ${attr(dv, off + 40)}`;
}

export class Tracer {
  constructor(private readonly log: (line: string) => void) {}

  /** The NUL-terminated name at `start` of the payload, and where the next one starts. */
  private name(req: Request, start: number): [string, number] {
    const p = req.slot.payload;
    let end = p.indexOf(0, start);
    if (end < 0 || end > req.payloadSize) end = req.payloadSize;
    return [quoteName(p.subarray(start, end)), end + 1];
  }

  /** What the request asks, beyond opcode and node. */
  private rxDetail(req: Request): string {
    const h = req.slot.header;
    switch (req.opcode) {
      case Op.LOOKUP: case Op.UNLINK: case Op.RMDIR: case Op.GETXATTR: case Op.REMOVEXATTR:
        return this.name(req, 0)[0] + (req.opcode === Op.GETXATTR ? ` size=${h.getUint32(OP, true)}` : "");
      case Op.MKDIR:
        return `${this.name(req, 0)[0]} mode=${mode(h.getUint32(OP, true))} umask=${mode(h.getUint32(OP + 4, true))}`;
      case Op.MKNOD:
        return `${this.name(req, 0)[0]} mode=${mode(h.getUint32(OP, true))} rdev=${h.getUint32(OP + 4, true)}`;
      case Op.CREATE:
        return `${this.name(req, 0)[0]} flags=${openFlagNames(h.getUint32(OP, true))} mode=${mode(h.getUint32(OP + 4, true))}`;
      case Op.SYMLINK: {
        const [name, next] = this.name(req, 0);
        return `${name} -> ${this.name(req, next)[0]}`;
      }
      case Op.LINK:
        return `n${getU64(h, OP)} as ${this.name(req, 0)[0]}`;
      case Op.RENAME: case Op.RENAME2: {
        const [from, next] = this.name(req, 0);
        const flags = req.opcode === Op.RENAME2 ? h.getUint32(OP + 8, true) : 0;
        return `${from} -> n${getU64(h, OP)} ${this.name(req, next)[0]}${flags ? ` flags=${bitNames(flags, [[1, "NOREPLACE"], [2, "EXCHANGE"], [4, "WHITEOUT"]])}` : ""}`;
      }
      case Op.SETXATTR:
        return `${this.name(req, 0)[0]} size=${h.getUint32(OP, true)} flags=${h.getUint32(OP + 4, true)}`;
      case Op.OPEN: case Op.OPENDIR:
        return `flags=${openFlagNames(h.getUint32(OP, true))}`;
      case Op.READ:
        return `fh=${getU64(h, OP)} off=${getU64(h, OP + 8)} size=${h.getUint32(OP + 16, true)} flags=${openFlagNames(h.getUint32(OP + 32, true))}`;
      case Op.WRITE:
        return `fh=${getU64(h, OP)} off=${getU64(h, OP + 8)} size=${h.getUint32(OP + 16, true)} wflags=${bitNames(h.getUint32(OP + 20, true), WRITE_FLAGS)} flags=${openFlagNames(h.getUint32(OP + 32, true))}`;
      case Op.READDIR: case Op.READDIRPLUS:
        return `fh=${getU64(h, OP)} off=${getU64(h, OP + 8)} size=${h.getUint32(OP + 16, true)}`;
      case Op.RELEASE: case Op.RELEASEDIR: case Op.FLUSH: case Op.FSYNC: case Op.FSYNCDIR:
        return `fh=${getU64(h, OP)}`;
      case Op.GETATTR: {
        const flags = h.getUint32(OP, true);
        return flags & 1 ? `fh=${getU64(h, OP + 8)}` : "";
      }
      case Op.SETATTR: {
        const valid = h.getUint32(OP, true);
        const parts = [bitNames(valid, SETATTR_FIELDS)];
        if (valid & FATTR.SIZE) parts.push(`size=${getU64(h, OP + 16)}`);
        if (valid & FATTR.MODE) parts.push(`mode=${mode(h.getUint32(OP + 68, true))}`);
        return parts.join(" ");
      }
      case Op.ACCESS:
        return `mask=${h.getUint32(OP, true)}`;
      case Op.LISTXATTR:
        return `size=${h.getUint32(OP, true)}`;
      case Op.FALLOCATE:
        return `fh=${getU64(h, OP)} off=${getU64(h, OP + 8)} len=${getU64(h, OP + 16)} mode=${h.getUint32(OP + 24, true)}`;
      case Op.LSEEK:
        return `fh=${getU64(h, OP)} off=${getU64(h, OP + 8)} whence=${h.getUint32(OP + 16, true)}`;
      case Op.FORGET:
        return `nlookup=${getU64(h, OP)}`;
      case Op.BATCH_FORGET:
        return `count=${h.getUint32(OP, true)}`;
      case Op.INTERRUPT:
        return `unique=${getU64(h, OP)}`;
      default:
        return "";
    }
  }

  /** A request arrived (its header is decoded into `req`). */
  rx(req: Request): void {
    const detail = this.rxDetail(req);
    this.log(`rx ${req.uniqueNumber} ${opName(req.opcode)} n${req.nodeid}${detail ? " " + detail : ""}`);
  }

  /** What the answer says, from the out args already in the payload. */
  private txDetail(req: Request, len: number): string {
    const dv = req.slot.payloadView;
    switch (req.opcode) {
      case Op.LOOKUP: case Op.MKDIR: case Op.MKNOD: case Op.SYMLINK: case Op.LINK:
        return len >= 128 ? entry(dv, 0) : "";
      case Op.CREATE:
        return len >= 144 ? `${entry(dv, 0)} fh=${getU64(dv, 128)} open=${bitNames(dv.getUint32(136, true), FOPEN_FLAGS)}` : "";
      case Op.GETATTR: case Op.SETATTR:
        return len >= 104 ? attr(dv, 16) : "";
      case Op.OPEN: case Op.OPENDIR:
        return len >= 16 ? `fh=${getU64(dv, 0)} open=${bitNames(dv.getUint32(8, true), FOPEN_FLAGS)}` : "";
      case Op.WRITE: case Op.COPY_FILE_RANGE:
        return len >= 4 ? `${dv.getUint32(0, true)} bytes written` : "";
      case Op.LSEEK:
        return len >= 8 ? `off=${getU64(dv, 0)}` : "";
      case Op.INIT:
        return "";
      default:
        return len ? `${len} bytes` : "";
    }
  }

  /** The answer to `req` is about to be handed to its transport. */
  tx(req: Request, payloadLen: number): void {
    const error = -req.slot.header.getInt32(4, true);
    const ms = req.startedAt ? `  ${(performance.now() - req.startedAt).toFixed(3)} ms` : "";
    const what = error ? errnoName(error) : `OK${((d) => (d ? " " + d : ""))(this.txDetail(req, payloadLen))}`;
    this.log(`tx ${req.uniqueNumber} ${what}${ms} [${req.slot.source.kind}]`);
  }
}

/**
 * Make `source` report every reply to the tracer before sending it. Only called with --debug:
 * wrapping the instance's method keeps the untraced path free of any check.
 */
export function traceReplies(source: Source, tracer: Tracer, requestOf: (slot: Slot) => Request): void {
  const send = source.reply.bind(source);
  source.reply = (slot: Slot, payloadLen: number) => {
    tracer.tx(requestOf(slot), payloadLen);
    send(slot, payloadLen);
  };
}
