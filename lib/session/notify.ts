// The filesystem's side of FUSE notifications (InitInfo.notify, Mount.notify): poll wakeups,
// cache invalidation, delete, store and retrieve. Each is one write to /dev/fuse (Session.notify:
// off the JS thread, so a notification that waits for a kernel lock held by a request we have
// not answered yet does not stop this thread from answering it).
//
// RETRIEVE is the one with an answer: the kernel sends a NOTIFY_REPLY request whose unique is
// the notify_unique we chose, carrying the cached bytes. Our uniques are odd and above 2^52:
// the kernel's own request uniques are even and counted up from 2, so the two never meet (a
// ring finds the entry to commit by unique).

import { FuseError } from "../protocol/errors.ts";
import type { Notifications } from "./filesystem.ts";
import {
  decodeNotifyRetrieveIn, encodeNotifyDelete, encodeNotifyInvalEntry, encodeNotifyPoll, encodeNotifyRetrieve, encodeNotifyStore,
  NOTIFY_RETRIEVE_IN_SIZE,
} from "../protocol/codec.ts";
import { FUSE_EXPIRE_ONLY, Notify } from "../protocol/constants.ts";
import { nameToBytes } from "../protocol/names.ts";

/** How long a RETRIEVE waits for the kernel's NOTIFY_REPLY before giving up (ETIMEDOUT). */
const RETRIEVE_TIMEOUT_MS = 10_000;
const UNIQUE_BASE = 2 ** 52 + 1;

interface Pending {
  resolve(data: Uint8Array): void;
  reject(e: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

export class SessionNotifications implements Notifications {
  private nextUnique = UNIQUE_BASE;
  private readonly pending = new Map<number, Pending>();
  /** Sent / failed notifications, and NOTIFY_REPLY requests matched (stats). */
  sent = 0;
  failed = 0;
  retrieved = 0;

  constructor(private readonly send: (code: number, body: Uint8Array) => Promise<number>) {}

  private async write(code: number, body: Uint8Array): Promise<number> {
    const rc = await this.send(code, body);
    if (rc < 0) this.failed++;
    else this.sent++;
    return rc;
  }

  poll(kh: bigint): Promise<number> {
    return this.write(Notify.POLL, encodeNotifyPoll(kh));
  }

  invalInode(ino: number, off = 0, len = 0): Promise<number> {
    const b = new Uint8Array(24);
    const dv = new DataView(b.buffer);
    dv.setBigUint64(0, BigInt(ino), true);
    dv.setBigInt64(8, BigInt(off), true);
    dv.setBigInt64(16, BigInt(len), true);
    return this.write(Notify.INVAL_INODE, b);
  }

  invalEntry(parent: number, name: string, expireOnly = false): Promise<number> {
    return this.write(Notify.INVAL_ENTRY, encodeNotifyInvalEntry(parent, nameToBytes(name), expireOnly ? FUSE_EXPIRE_ONLY : 0));
  }

  delete(parent: number, child: number, name: string): Promise<number> {
    return this.write(Notify.DELETE, encodeNotifyDelete(parent, child, nameToBytes(name)));
  }

  store(ino: number, offset: number, data: Uint8Array): Promise<number> {
    return this.write(Notify.STORE, encodeNotifyStore(ino, offset, data));
  }

  retrieve(ino: number, offset: number, size: number): Promise<Uint8Array> {
    const unique = this.nextUnique;
    this.nextUnique += 2;
    return new Promise<Uint8Array>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.pending.delete(unique)) reject(new FuseError("ETIMEDOUT", "no NOTIFY_REPLY for a retrieve (with --workers, it may have reached another thread)"));
      }, RETRIEVE_TIMEOUT_MS);
      this.pending.set(unique, { resolve, reject, timer });
      this.write(Notify.RETRIEVE, encodeNotifyRetrieve(unique, ino, offset, size)).then((rc) => {
        if (rc < 0 && this.pending.delete(unique)) {
          clearTimeout(timer);
          reject(new FuseError(-rc, `notify retrieve refused: errno ${-rc}`));
        }
      });
    });
  }

  /**
   * A NOTIFY_REPLY request (opcode 41): `unique` is the notify_unique of a retrieve; `payload`
   * holds fuse_notify_retrieve_in and the data. The bytes are copied (the slot is reused).
   * False if no retrieve of ours waits for it.
   */
  onReply(unique: number, payload: Uint8Array, payloadSize: number): boolean {
    const p = this.pending.get(unique);
    if (!p) return false;
    this.pending.delete(unique);
    clearTimeout(p.timer);
    this.retrieved++;
    const dv = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    const hdr = decodeNotifyRetrieveIn(dv, 0);
    const n = Math.max(0, Math.min(hdr.size, payloadSize - NOTIFY_RETRIEVE_IN_SIZE));
    p.resolve(payload.slice(NOTIFY_RETRIEVE_IN_SIZE, NOTIFY_RETRIEVE_IN_SIZE + n));
    return true;
  }

  /** The session ends: nothing will answer the retrieves still waiting. */
  close(): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(new FuseError("ENOTCONN", "the session ended"));
    }
    this.pending.clear();
  }
}
