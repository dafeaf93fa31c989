// The per-request state machine (lib/session/request.ts, reply.ts) driven directly: a Session
// over an unmounted /dev/fuse fd whose transport's reply()/release() are replaced by a
// recorder, requests written into its slots by hand. This reaches orders of events the kernel
// produces only by chance (an INTERRUPT before its request, an unknown target), on top of the
// real-mount tests in test/integration/exactly-once.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FuseError } from "../lib/protocol/errors.ts";
import type { InodeFS, RequestContext } from "../lib/session/filesystem.ts";
import { native } from "../lib/native.ts";
import { HDR_OP_IN, HDR_PAYLOAD_SZ, Op } from "../lib/protocol/constants.ts";
import { Session } from "../lib/session/session.ts";
import type { Slot, Source } from "../lib/transport/types.ts";

interface Sent {
  slot: number;
  kind: "reply" | "release";
  error?: number;
  unique?: bigint;
}

const dir = mkdtempSync("/tmp/fuse-uring-state-test-");
const backingPath = join(dir, "backing");
let backingFd = -1;
let fifoFd = -1;
beforeAll(() => {
  writeFileSync(backingPath, Buffer.alloc(8192, "b"));
  backingFd = openSync(backingPath, "r");
  const fifo = join(dir, "fifo");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  fifoFd = openSync(fifo, "r+"); // O_RDWR: opening does not wait for a writer
});
afterAll(() => {
  closeSync(backingFd);
  closeSync(fifoFd);
  rmSync(dir, { recursive: true, force: true });
});

/** READ handlers by node id: 2 waits for ctx.signal, 3 starts backing I/O and throws, 4 never settles. */
const fs: InodeFS = {
  read(ctx: RequestContext, ino: number, _fh: number, _off: number, size: number) {
    if (ino === 2) {
      return new Promise<number>((_, reject) => {
        if (ctx.signal.aborted) return reject(ctx.signal.reason);
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
      });
    }
    if (ino === 4) return new Promise<number>(() => {});
    if (ino === 5) return ctx.backingRead(fifoFd, -1, 16); // blocks until the test writes to the FIFO
    if (ino === 3) {
      void ctx.backingRead(backingFd, 0, Math.min(size, 4096));
      throw new Error("throws while its backing I/O runs");
    }
    throw new FuseError("ENOENT");
  },
};

function harness(requestTimeout = 0) {
  const fd = native().fu_dev_open();
  expect(fd).toBeGreaterThanOrEqual(0);
  const logs: string[] = [];
  const session = new Session(fd, fs, { transport: "classic", slowRequestMs: 0, requestTimeout, log: (l) => logs.push(l) });
  const internals = session as unknown as { classic: Source; transport: string };
  internals.transport = "classic";
  const source = internals.classic;
  const sent: Sent[] = [];
  source.reply = (slot: Slot) => {
    sent.push({ slot: slot.index, kind: "reply", error: slot.header.getInt32(4, true), unique: slot.header.getBigUint64(8, true) });
  };
  source.release = (slot: Slot) => {
    sent.push({ slot: slot.index, kind: "release" });
  };
  /** Put a request into slot `i` as the transport would and hand it to the session. */
  const deliver = (i: number, opcode: number, unique: number, nodeid: number, opIn: (h: DataView) => void = () => {}) => {
    const slot = source.slots[i]!;
    const h = slot.header;
    h.setUint32(0, 80, true);
    h.setUint32(4, opcode, true);
    h.setBigUint64(8, BigInt(unique), true);
    h.setBigUint64(16, BigInt(nodeid), true);
    h.setUint32(HDR_PAYLOAD_SZ, 0, true);
    opIn(h);
    session.onRequest(slot);
  };
  const read = (size: number) => (h: DataView) => {
    h.setBigUint64(HDR_OP_IN, 0n, true);
    h.setBigUint64(HDR_OP_IN + 8, 0n, true);
    h.setUint32(HDR_OP_IN + 16, size, true);
  };
  const interrupt = (target: number) => (h: DataView) => h.setBigUint64(HDR_OP_IN, BigInt(target), true);
  return { session, sent, logs, deliver, read, interrupt, internals, fd };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("request state machine", () => {
  test("INTERRUPT of a known request aborts ctx.signal; the handler's EINTR is the one answer", async () => {
    const h = harness();
    h.deliver(0, Op.READ, 10, 2, h.read(4096));
    expect(h.sent).toEqual([]);
    h.deliver(1, Op.INTERRUPT, 11, 0, h.interrupt(10));
    await tick();
    expect(h.sent).toEqual([
      { slot: 1, kind: "release" },
      { slot: 0, kind: "reply", error: -4, unique: 10n },
    ]);
    expect(h.session.stats().interruptsUnmatched).toBe(0);
    await h.session.close(100);
  });

  test("classic: INTERRUPT of an unknown request is answered EAGAIN (the kernel queues it again)", async () => {
    const h = harness();
    h.deliver(0, Op.INTERRUPT, 21, 0, h.interrupt(20));
    expect(h.sent).toEqual([{ slot: 0, kind: "reply", error: -11, unique: 21n }]);
    expect(h.session.stats().interruptsUnmatched).toBe(1);
    await h.session.close(100);
  });

  test("io_uring: an INTERRUPT that arrives before its request is remembered and applied on arrival", async () => {
    const h = harness();
    h.internals.transport = "uring";
    h.deliver(0, Op.INTERRUPT, 31, 0, h.interrupt(30));
    expect(h.sent).toEqual([{ slot: 0, kind: "release" }]); // EAGAIN could not be delivered for a ring request
    h.deliver(1, Op.READ, 30, 2, h.read(4096));
    await tick();
    expect(h.sent[1]).toEqual({ slot: 1, kind: "reply", error: -4, unique: 30n });
    const s = h.session.stats();
    expect(s.interruptsUnmatched).toBe(1);
    expect(s.interruptsEarly).toBe(1);
    await h.session.close(100);
  });

  test("an answer while backing I/O runs waits for the I/O, then goes out exactly once", async () => {
    const h = harness();
    h.deliver(0, Op.READ, 40, 3, h.read(4096));
    // the handler threw, but the thread pool may still write into the slot: nothing sent yet
    expect(h.sent).toEqual([]);
    expect(h.session.stats().deferredAnswers).toBe(1);
    const deadline = Date.now() + 5000;
    while (h.sent.length === 0 && Date.now() < deadline) await Bun.sleep(5);
    expect(h.sent).toEqual([{ slot: 0, kind: "reply", error: -5, unique: 40n }]);
    await Bun.sleep(20);
    expect(h.sent.length).toBe(1);
    const s = h.session.stats();
    expect(s.inflight).toBe(0);
    expect(s.protocolErrors).toBe(0);
    await h.session.close(100);
  });

  test("answering a request twice, or an I/O completion nobody asked for, is a loud protocol error, not a second reply", async () => {
    const h = harness();
    h.deliver(0, Op.READ, 50, 9, h.read(4096)); // ENOENT at once
    expect(h.sent.length).toBe(1);
    const internals = h.session as unknown as { replier: { ok(r: unknown, n: number): void }; reqs: Map<Source, { ioDone(n: number): void }[]> };
    const req = [...internals.reqs.values()][0]![0]!;
    internals.replier.ok(req, 0);
    req.ioDone(4096);
    expect(h.sent.length).toBe(1);
    expect(h.session.stats().protocolErrors).toBe(2);
    expect(h.logs.filter((l) => l.includes("BUG:")).length).toBe(2);
    await h.session.close(100);
  });

  test("a timeout while backing I/O runs: ETIMEDOUT waits for the I/O, goes out once, the handler's result is dropped", async () => {
    const h = harness(0.1);
    h.deliver(0, Op.READ, 80, 5, h.read(4096));
    await Bun.sleep(400); // the timeout fired meanwhile, but the thread pool still reads into the slot
    let s = h.session.stats();
    expect(s.timeouts).toBe(1);
    expect(s.deferredAnswers).toBe(1);
    expect(h.sent).toEqual([]);
    writeFileSync(`/proc/self/fd/${fifoFd}`, "x"); // the backing read completes
    const deadline = Date.now() + 5000;
    while (h.sent.length === 0 && Date.now() < deadline) await Bun.sleep(5);
    await Bun.sleep(20);
    expect(h.sent).toEqual([{ slot: 0, kind: "reply", error: -110, unique: 80n }]);
    s = h.session.stats();
    expect(s.lateResults).toBe(1);
    expect(s.protocolErrors).toBe(0);
    expect(s.inflight).toBe(0);
    await h.session.close(100);
  });

  test("item 6: close() with a handler that never settles answers it EIO and closes /dev/fuse only after the reader thread stopped", async () => {
    const h = harness();
    h.session.start(); // the reader thread: on an unmounted fd its first read fails and it stops
    h.deliver(0, Op.READ, 60, 4, h.read(4096));
    await h.session.close(50);
    expect(h.sent).toContainEqual({ slot: 0, kind: "reply", error: -5, unique: 60n });
    expect(h.logs.join("\n")).toContain("never settled");
    expect(() => readlinkSync(`/proc/self/fd/${h.fd}`)).toThrow(); // closed
  });

  test("item 6: … and leaves /dev/fuse open when a transport thread never reports that it stopped", async () => {
    const h = harness(); // never started: nothing will report STOPPED
    h.deliver(0, Op.READ, 70, 4, h.read(4096));
    await h.session.close(50);
    expect(h.logs.join("\n")).toContain("leaving /dev/fuse open");
    expect(readlinkSync(`/proc/self/fd/${h.fd}`)).toBe("/dev/fuse");
    closeSync(h.fd);
  });
});
