// Byte-exact wire vectors for every struct the session encodes or decodes, one commented row
// per field (offsets from the UAPI header, docs/KERNEL.md §2). These sit beside the real-kernel integration
// tests: a wrong offset fails here with the exact byte.

import { describe, expect, test } from "bun:test";
import type { Attr } from "../lib/protocol/structs.ts";
import {
  decodeEntInOut, decodeInitIn, decodeSetattrIn, direntplusSize, encodeUringCmdReq, FOPEN_IO_URING_ZERO_COPY, FUSE_IO_URING_CMD_ADD_BUFPOOL,
  FUSE_IO_URING_CMD_ADD_QUEUE, FUSE_URING_ENT_ZERO_COPY, FUSE_URING_ZERO_COPY, direntSize, encodeAttr, encodeAttrOut, encodeDirentHeader,
  encodeEntryOut, encodeInitOut, encodeOpenOut, encodeOutHeader, encodeStatfsOut, encodeWriteOut, getI64, getU64, setU64,
  decodeFileLock, decodeIoctlIn, decodeLkIn, decodeNotifyRetrieveIn, decodePollIn, encodeFileLock, encodeIoctlOut, encodeLseekOut,
  encodeNotifyDelete, encodeNotifyInvalEntry, encodeNotifyPoll, encodeNotifyRetrieve, encodeNotifyStore, encodePollOut, IOCTL_IN_SIZE,
  IOCTL_IOVEC_SIZE, IOCTL_OUT_SIZE, LK_IN_SIZE, LK_OUT_SIZE, NOTIFY_RETRIEVE_IN_SIZE, POLL_IN_SIZE, POLL_OUT_SIZE,
} from "../lib/protocol/codec.ts";
import {
  initBit, initFlagNames, Op, opHeaderSizes, F_RDLCK, F_UNLCK, F_WRLCK, FUSE_EXPIRE_ONLY, FUSE_IOCTL, FUSE_IOCTL_MAX_IOV, FUSE_LK_FLOCK,
  FUSE_POLL_SCHEDULE_NOTIFY, FUSE_RELEASE_FLOCK_UNLOCK, FUSE_RELEASE_FLUSH, LOCK_END_MAX,
} from "../lib/protocol/constants.ts";
import { le, u64, u32, u16, i32 } from "./helpers/bytes.ts";

/** A native data plane handle (2^47 + slot): fh values above 2^32 must survive decoding. */
const NATIVE = 2 ** 47 + 3;


function buf(n: number): { bytes: Uint8Array; dv: DataView } {
  const bytes = new Uint8Array(n).fill(0xee); // poison: every byte must be written
  return { bytes, dv: new DataView(bytes.buffer) };
}

const attr: Attr = {
  ino: 0x0102030405, size: 2 ** 40 + 7, blocks: 9, atime: 1700000000, atimeNsec: 111, mtime: 1700000001,
  mtimeNsec: 222, ctime: 1700000002, ctimeNsec: 333, mode: 0o100644, nlink: 2, uid: 1000, gid: 1001, rdev: 0x0801,
  blksize: 4096,
};

const attrBytes = [
  ...u64(0x0102030405), // ino @0
  ...u64(2 ** 40 + 7), // size @8
  ...u64(9), // blocks @16
  ...u64(1700000000), // atime @24
  ...u64(1700000001), // mtime @32
  ...u64(1700000002), // ctime @40
  ...u32(111), // atimensec @48
  ...u32(222), // mtimensec @52
  ...u32(333), // ctimensec @56
  ...u32(0o100644), // mode @60
  ...u32(2), // nlink @64
  ...u32(1000), // uid @68
  ...u32(1001), // gid @72
  ...u32(0x0801), // rdev @76
  ...u32(4096), // blksize @80
  ...u32(0), // flags @84
];

describe("codec: replies", () => {
  test("fuse_attr is 88 bytes, field by field", () => {
    const { bytes, dv } = buf(88);
    expect(encodeAttr(dv, 0, attr)).toBe(88);
    expect([...bytes]).toEqual(attrBytes);
  });

  test("fuse_attr times before 1970: seconds floor and nanoseconds in [0, 1e9) whatever the split given", () => {
    const { dv } = buf(88);
    // -1.5 s given as (-1, -500000000) (a truncating division), -2.25 s as (-2, -250000000),
    // and 1.5 s as (0, 1500000000): all must come out as (floor, 0 <= nsec < 1e9).
    encodeAttr(dv, 0, { ...attr, atime: -1, atimeNsec: -500_000_000, mtime: -2, mtimeNsec: -250_000_000, ctime: 0, ctimeNsec: 1_500_000_000 });
    expect([getI64(dv, 24), dv.getUint32(48, true)]).toEqual([-2, 500_000_000]);
    expect([getI64(dv, 32), dv.getUint32(52, true)]).toEqual([-3, 750_000_000]);
    expect([getI64(dv, 40), dv.getUint32(56, true)]).toEqual([1, 500_000_000]);
    // Already normalised values are untouched.
    encodeAttr(dv, 0, { ...attr, atime: -1, atimeNsec: 999_999_999 });
    expect([getI64(dv, 24), dv.getUint32(48, true)]).toEqual([-1, 999_999_999]);
  });

  test("fuse_entry_out (128 B): nodeid, generation, ttls split into sec + nsec, attr", () => {
    const { bytes, dv } = buf(128);
    expect(encodeEntryOut(dv, 0, { ino: 42, generation: 3, attr }, 1.5, 0.25)).toBe(128);
    expect([...bytes]).toEqual([
      ...u64(42), // nodeid @0
      ...u64(3), // generation @8
      ...u64(1), // entry_valid @16
      ...u64(0), // attr_valid @24
      ...u32(500000000), // entry_valid_nsec @32
      ...u32(250000000), // attr_valid_nsec @36
      ...attrBytes, // attr @40
    ]);
  });

  test("entry ttl from the entry overrides the session default", () => {
    const { dv } = buf(128);
    encodeEntryOut(dv, 0, { ino: 1, attr, entryTtl: 7, attrTtl: 9 }, 1, 1);
    expect(getU64(dv, 16)).toBe(7);
    expect(getU64(dv, 24)).toBe(9);
  });

  test("fuse_attr_out (104 B)", () => {
    const { bytes, dv } = buf(104);
    expect(encodeAttrOut(dv, 0, attr, 2)).toBe(104);
    expect([...bytes]).toEqual([
      ...u64(2), // attr_valid @0
      ...u32(0), // attr_valid_nsec @8
      ...u32(0), // dummy @12
      ...attrBytes, // attr @16
    ]);
  });

  test("fuse_open_out (16 B) with flags and passthrough backing id", () => {
    const { bytes, dv } = buf(16);
    encodeOpenOut(dv, 0, { fh: 0x1122334455, directIo: true, keepCache: true, backingId: 3 });
    expect([...bytes]).toEqual([
      ...u64(0x1122334455), // fh @0
      ...u32(1 | 2 | 128), // open_flags @8: DIRECT_IO | KEEP_CACHE | PASSTHROUGH
      ...i32(3), // backing_id @12
    ]);
  });

  test("fuse_write_out (8 B)", () => {
    const { bytes, dv } = buf(8);
    expect(encodeWriteOut(dv, 0, 1048576)).toBe(8);
    expect([...bytes]).toEqual([...u32(1048576), ...u32(0)]);
  });

  test("fuse_kstatfs (80 B)", () => {
    const { bytes, dv } = buf(80);
    encodeStatfsOut(dv, 0, { blocks: 100, bfree: 50, bavail: 40, files: 1000, ffree: 900, bsize: 4096, namelen: 255, frsize: 4096 });
    expect([...bytes]).toEqual([
      ...u64(100), ...u64(50), ...u64(40), ...u64(1000), ...u64(900), // blocks bfree bavail files ffree
      ...u32(4096), ...u32(255), ...u32(4096), // bsize @40 namelen @44 frsize @48
      ...u32(0), ...new Array(24).fill(0), // padding @52, spare[6] @56
    ]);
  });

  test("fuse_out_header (16 B) with a negative errno and a 64-bit unique", () => {
    const { bytes, dv } = buf(16);
    encodeOutHeader(dv, 0, 16, -2, 0x89abcdef, 0x1);
    expect([...bytes]).toEqual([...u32(16), ...i32(-2), ...u32(0x89abcdef), ...u32(1)]);
  });

  test("fuse_init_out (64 B)", () => {
    const { bytes, dv } = buf(64);
    const flags = initBit("ASYNC_READ") | initBit("INIT_EXT") | initBit("OVER_IO_URING");
    encodeInitOut(dv, 0, {
      major: 7, minor: 45, maxReadahead: 131072, flags, maxBackground: 64, congestionThreshold: 48, maxWrite: 1 << 20,
      timeGran: 1, maxPages: 256, maxStackDepth: 1, requestTimeout: 0,
    });
    expect([...bytes]).toEqual([
      ...u32(7), // major @0
      ...u32(45), // minor @4
      ...u32(131072), // max_readahead @8
      ...u32(0x40000001), // flags @12: ASYNC_READ | INIT_EXT
      ...u16(64), // max_background @16
      ...u16(48), // congestion_threshold @18
      ...u32(1 << 20), // max_write @20
      ...u32(1), // time_gran @24
      ...u16(256), // max_pages @28
      ...u16(0), // map_alignment @30
      ...u32(0x200), // flags2 @32: OVER_IO_URING (bit 41)
      ...u32(1), // max_stack_depth @36
      ...u16(0), // request_timeout @40
      ...new Array(22).fill(0), // unused[11] @42
    ]);
  });

  test("fuse_dirent: header, name, zero padding to 8", () => {
    const { bytes, dv } = buf(32);
    bytes.set(new TextEncoder().encode("hello"), 24);
    expect(encodeDirentHeader(bytes, dv, 0, 5, 3, 5, 0o040755)).toBe(32);
    expect([...bytes]).toEqual([
      ...u64(5), // ino @0
      ...u64(3), // off (next cookie) @8
      ...u32(5), // namelen @16
      ...u32(4), // type @20: DT_DIR
      ...[104, 101, 108, 108, 111], // "hello" @24
      0, 0, 0, // pad to 32
    ]);
    expect(direntSize(5)).toBe(32);
    expect(direntSize(8)).toBe(32);
    expect(direntSize(9)).toBe(40);
    expect(direntplusSize(1)).toBe(160);
  });
});

describe("codec: requests", () => {
  test("fuse_init_in (64 B): flags | flags2 << 32", () => {
    const { bytes, dv } = buf(64);
    bytes.set([...u32(7), ...u32(45), ...u32(131072), ...u32(0x73fffffb), ...u32(0x7fd), ...new Array(44).fill(0)]);
    const init = decodeInitIn(dv, 0);
    expect(init).toEqual({ major: 7, minor: 45, maxReadahead: 131072, flags: (0x7fdn << 32n) | 0x73fffffbn });
    // The 6.18 offer observed on the test machine: io_uring and passthrough offered, no buffer pools.
    expect(initFlagNames(init.flags)).toContain("OVER_IO_URING");
    expect(initFlagNames(init.flags)).toContain("PASSTHROUGH");
    expect(initFlagNames(init.flags)).not.toContain("HAS_IO_URING_BUFPOOL");
  });

  test("fuse_setattr_in (88 B)", () => {
    const { bytes, dv } = buf(88);
    bytes.set([
      ...u32(0x1 | 0x8 | 0x20), // valid @0: MODE | SIZE | MTIME
      ...u32(0), // padding @4
      ...u64(77), // fh @8
      ...u64(4096), // size @16
      ...u64(0), // lock_owner @24
      ...u64(10), // atime @32
      ...u64(1700000000), // mtime @40
      ...u64(12), // ctime @48
      ...u32(1), // atimensec @56
      ...u32(999999999), // mtimensec @60
      ...u32(3), // ctimensec @64
      ...u32(0o644), // mode @68
      ...u32(0), // unused4 @72
      ...u32(1000), // uid @76
      ...u32(1001), // gid @80
      ...u32(0), // unused5 @84
    ]);
    expect(decodeSetattrIn(dv, 0)).toEqual({
      valid: 0x29, fh: 77, size: 4096, atime: 10, mtime: 1700000000, ctime: 12, atimensec: 1, mtimensec: 999999999,
      ctimensec: 3, mode: 0o644, uid: 1000, gid: 1001,
    });
  });

  test("u64 helpers are exact up to 2^53 and i64 keeps the sign", () => {
    const { dv } = buf(16);
    setU64(dv, 0, 2 ** 53 - 1);
    expect(getU64(dv, 0)).toBe(2 ** 53 - 1);
    dv.setBigInt64(8, -5n, true);
    expect(getI64(dv, 8)).toBe(-5);
  });

  test("per-op header sizes match the uapi structs (what io_uring puts in op_in)", () => {
    const t = opHeaderSizes(false);
    expect(t[Op.LOOKUP]).toBe(0); // zero-size placeholder: the name is payload
    expect(t[Op.READ]).toBe(40); // fuse_read_in
    expect(t[Op.WRITE]).toBe(40); // fuse_write_in, data follows in payload
    expect(t[Op.SETATTR]).toBe(88);
    expect(t[Op.CREATE]).toBe(16);
    expect(t[Op.COPY_FILE_RANGE]).toBe(56);
    expect(t[Op.SETXATTR]).toBe(8); // FUSE_COMPAT_SETXATTR_IN_SIZE without SETXATTR_EXT
    expect(opHeaderSizes(true)[Op.SETXATTR]).toBe(16);
    expect(t[Op.UNLINK]).toBe(0);
    expect(t[Op.RENAME2]).toBe(16);
  });
});

describe("FUSE 7.46 buffer-pool encodings (offsets of the Linux 7.3 uapi header)", () => {
  test("fuse_uring_cmd_req for ADD_BUFPOOL: flags, commit_id, qid, padding, bufpool {uaddr, len, reserved}", () => {
    const { bytes, dv } = buf(40);
    expect(encodeUringCmdReq(dv, 0, { flags: 0, commitId: 0, qid: 3, bufpool: { uaddr: 0x7f0000001000, len: 16 << 20 } })).toBe(40);
    expect([...bytes]).toEqual([
      ...u64(0), //            flags @0
      ...u64(0), //            commit_id @8
      ...u16(3), //            qid @16
      0, 0, 0, 0, 0, 0, //     padding[6] @18
      ...u64(0x7f0000001000), // bufpool.uaddr @24
      ...u32(16 << 20), //     bufpool.len @32
      ...u32(0), //            bufpool.reserved @36
    ]);
  });

  test("fuse_uring_cmd_req for ADD_QUEUE with ZERO_COPY and REGISTER with ent_zero_copy_buf_index", () => {
    const { bytes, dv } = buf(40);
    encodeUringCmdReq(dv, 0, { flags: FUSE_URING_ZERO_COPY, commitId: 0, qid: 1 });
    expect([...bytes]).toEqual([...u64(1), ...u64(0), ...u16(1), ...new Array(22).fill(0)]);
    encodeUringCmdReq(dv, 0, { flags: 0, commitId: 0, qid: 0, zeroCopyBufIndex: 517 });
    expect([...bytes]).toEqual([...u64(0), ...u64(0), ...u16(0), 0, 0, 0, 0, 0, 0, ...u16(517), ...new Array(14).fill(0)]);
    expect([FUSE_IO_URING_CMD_ADD_QUEUE, FUSE_IO_URING_CMD_ADD_BUFPOOL, FOPEN_IO_URING_ZERO_COPY]).toEqual([3, 4, 256]);
  });

  test("fuse_uring_ent_in_out: the 6.18 padding u32 @20 is the 7.46 pool offset", () => {
    const bytes = new Uint8Array([...u64(FUSE_URING_ENT_ZERO_COPY), ...u64(0x1234), ...u32(4096), ...u32(3 << 20), ...u64(0)]);
    expect(decodeEntInOut(new DataView(bytes.buffer), 0)).toEqual({ flags: 1, commitId: 0x1234, payloadSz: 4096, offset: 3 << 20 });
  });
});

describe("issue 24: locks, ioctl, poll, notifications", () => {
  const LK_FLOCK = 1;
  test("fuse_lk_in (48 B) → fh, owner (u64, exact), fuse_file_lock {start, end, type, pid}, lk_flags", () => {
    const bytes = new Uint8Array([
      ...u64(NATIVE), //             fh @0
      ...u64(0xfedcba9876543210n), // owner @8
      ...u64(100), //                lk.start @16
      ...u64(199), //                lk.end @24 (inclusive)
      ...u32(1), //                  lk.type F_WRLCK @32
      ...u32(4242), //               lk.pid @36
      ...u32(LK_FLOCK), //           lk_flags @40
      ...u32(0), //                  padding @44
    ]);
    expect(bytes.length).toBe(LK_IN_SIZE);
    expect(decodeLkIn(new DataView(bytes.buffer), 0)).toEqual({
      fh: NATIVE, owner: 0xfedcba9876543210n, lock: { start: 100, end: 199, type: F_WRLCK, pid: 4242 }, lkFlags: FUSE_LK_FLOCK,
    });
  });

  test("fuse_file_lock end OFFSET_MAX (to EOF) decodes as Infinity and encodes back exactly", () => {
    const bytes = new Uint8Array([...u64(0), ...u64(0x7fffffffffffffffn), ...u32(0), ...u32(7)]);
    const l = decodeFileLock(new DataView(bytes.buffer), 0);
    expect(l).toEqual({ start: 0, end: Infinity, type: F_RDLCK, pid: 7 });
    const { bytes: out, dv } = buf(LK_OUT_SIZE);
    expect(encodeFileLock(dv, 0, l)).toBe(24);
    expect([...out]).toEqual([...bytes]);
  });

  test("fuse_lk_out (24 B): the conflicting lock", () => {
    const { bytes, dv } = buf(24);
    encodeFileLock(dv, 0, { start: 4096, end: 8191, type: F_UNLCK, pid: 0 });
    expect([...bytes]).toEqual([...u64(4096), ...u64(8191), ...u32(2), ...u32(0)]);
  });

  test("fuse_ioctl_in (32 B) → fh, flags, cmd, arg (u64 exact), in_size, out_size", () => {
    const bytes = new Uint8Array([
      ...u64(9), //                    fh @0
      ...u32(FUSE_IOCTL.DIR | FUSE_IOCTL["32BIT"]), // flags @8
      ...u32(0x80046d01), //           cmd @12 (_IOR('m', 1, u32))
      ...u64(0x7ffd12345678n), //      arg @16
      ...u32(64), //                   in_size @24
      ...u32(4), //                    out_size @28
    ]);
    expect(bytes.length).toBe(IOCTL_IN_SIZE);
    expect(decodeIoctlIn(new DataView(bytes.buffer), 0)).toEqual({ fh: 9, flags: 0x18, cmd: 0x80046d01, arg: 0x7ffd12345678n, inSize: 64, outSize: 4 });
  });

  test("fuse_ioctl_out (16 B): result (i32), flags, in_iovs, out_iovs; a retry appends the iovecs (16 B each)", () => {
    let { bytes, dv } = buf(16);
    expect(encodeIoctlOut(dv, 0, -25, 0)).toBe(IOCTL_OUT_SIZE);
    expect([...bytes]).toEqual([...i32(-25), ...u32(0), ...u32(0), ...u32(0)]);
    ({ bytes, dv } = buf(16 + 3 * IOCTL_IOVEC_SIZE));
    const n = encodeIoctlOut(dv, 0, 0, FUSE_IOCTL.RETRY, [{ base: 0x1000n, len: 8 }], [{ base: 0x2000n, len: 16 }, { base: 0x3000n, len: 4 }]);
    expect(n).toBe(16 + 48);
    expect([...bytes]).toEqual([
      ...i32(0), ...u32(4), ...u32(1), ...u32(2), // result, flags RETRY, in_iovs, out_iovs
      ...u64(0x1000), ...u64(8), //                  in iovec: base, len
      ...u64(0x2000), ...u64(16), ...u64(0x3000), ...u64(4), // out iovecs
    ]);
  });

  test("fuse_poll_in (24 B) and fuse_poll_out (8 B); fuse_notify_poll_wakeup_out (8 B)", () => {
    const bytes = new Uint8Array([...u64(5), ...u64(0xabcdef0123456789n), ...u32(FUSE_POLL_SCHEDULE_NOTIFY), ...u32(0x41)]);
    expect(bytes.length).toBe(POLL_IN_SIZE);
    expect(decodePollIn(new DataView(bytes.buffer), 0)).toEqual({ fh: 5, kh: 0xabcdef0123456789n, flags: 1, events: 0x41 });
    const { bytes: out, dv } = buf(8);
    expect(encodePollOut(dv, 0, 0x45)).toBe(POLL_OUT_SIZE);
    expect([...out]).toEqual([...u32(0x45), ...u32(0)]);
    expect([...encodeNotifyPoll(0xabcdef0123456789n)]).toEqual(u64(0xabcdef0123456789n));
  });

  test("fuse_notify_inval_entry_out (16 B) + name + NUL, with FUSE_EXPIRE_ONLY", () => {
    expect([...encodeNotifyInvalEntry(7, Buffer.from("ab"), FUSE_EXPIRE_ONLY)]).toEqual([
      ...u64(7), ...u32(2), ...u32(1), 0x61, 0x62, 0, // parent, namelen, flags, "ab\0"
    ]);
  });

  test("fuse_notify_delete_out (24 B) + name + NUL", () => {
    expect([...encodeNotifyDelete(1, 0x123456789, Buffer.from([0xff, 0x41]))]).toEqual([
      ...u64(1), ...u64(0x123456789), ...u32(2), ...u32(0), 0xff, 0x41, 0, // parent, child, namelen, padding, name
    ]);
  });

  test("fuse_notify_store_out (24 B) + data", () => {
    expect([...encodeNotifyStore(3, 2 ** 40, Buffer.from("xyz"))]).toEqual([...u64(3), ...u64(2 ** 40), ...u32(3), ...u32(0), 0x78, 0x79, 0x7a]);
  });

  test("fuse_notify_retrieve_out (32 B) and fuse_notify_retrieve_in (40 B, the NOTIFY_REPLY's header)", () => {
    expect([...encodeNotifyRetrieve(2 ** 52 + 1, 4, 8192, 65536)]).toEqual([...u64(2 ** 52 + 1), ...u64(4), ...u64(8192), ...u32(65536), ...u32(0)]);
    const inBytes = new Uint8Array([...u64(0), ...u64(8192), ...u32(4096), ...u32(0), ...u64(0), ...u64(0)]);
    expect(inBytes.length).toBe(NOTIFY_RETRIEVE_IN_SIZE);
    expect(decodeNotifyRetrieveIn(new DataView(inBytes.buffer), 0)).toEqual({ offset: 8192, size: 4096 });
  });

  test("fuse_lseek_out (8 B)", () => {
    const { bytes, dv } = buf(8);
    expect(encodeLseekOut(dv, 0, 2 ** 33 + 5)).toBe(8);
    expect([...bytes]).toEqual(u64(2 ** 33 + 5));
  });

  test("constants: FUSE_LK_FLOCK, release flags, ioctl flags, POLL_SCHEDULE_NOTIFY, EXPIRE_ONLY, lock types", () => {
    expect([FUSE_LK_FLOCK, FUSE_RELEASE_FLUSH, FUSE_RELEASE_FLOCK_UNLOCK, FUSE_POLL_SCHEDULE_NOTIFY, FUSE_EXPIRE_ONLY]).toEqual([1, 1, 2, 1, 1]);
    expect(FUSE_IOCTL).toEqual({ COMPAT: 1, UNRESTRICTED: 2, RETRY: 4, "32BIT": 8, DIR: 16, COMPAT_X32: 32 });
    expect([F_RDLCK, F_WRLCK, F_UNLCK, FUSE_IOCTL_MAX_IOV]).toEqual([0, 1, 2, 256]);
    expect(LOCK_END_MAX).toBe(2n ** 63n - 1n);
  });
});
