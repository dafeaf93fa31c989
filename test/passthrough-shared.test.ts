// The passthrough's shared state for copies mode (lib/fs/passthrough/shared.ts), without a
// mount: node table (ids, generations, (dev, ino) index, growth and rehash), the directory
// listing arena (compaction), the mutex between threads, and a copy built from the share.

import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SharedDirStore, SharedNodeTable, createShare, type PassthroughShare } from "../lib/fs/passthrough/shared.ts";
import { PassthroughFS } from "../lib/fs/passthrough.ts";

function newShare(): PassthroughShare {
  const share = createShare({ source: "/", emulateOwnership: true, fileHandles: true, handleProbe: "test", budget: 100 });
  SharedNodeTable.init(share, { dev: 1, ino: 2, mode: 0o40755, fd: 99, mountFd: -1 });
  return share;
}

describe("SharedNodeTable", () => {
  test("ids decode alike in every view; a freed slot's id goes stale; index by (dev, ino)", () => {
    const share = newShare();
    const a = new SharedNodeTable(share), b = new SharedNodeTable(share);
    expect(a.root.id).toBe(1);
    expect(a.get(1)!.fd).toBe(99);
    const n = a.create(7, 1000, 0o100644);
    expect(n.id).toBe(2);
    expect(b.get(2)!.ino).toBe(1000);
    expect(b.find(7, 1000)!.id).toBe(2);
    expect(b.find(8, 1000)).toBeUndefined();
    expect(b.knownIno(1000)).toBe(true);
    b.get(2)!.nlookup += 3;
    expect(a.get(2)!.nlookup).toBe(3);
    a.remove(n);
    expect(b.get(2)).toBeUndefined();
    expect(b.find(7, 1000)).toBeUndefined();
    const m = b.create(7, 1001, 0o100644); // same slot, next generation
    expect(m.id).toBe(2 ** 32 + 2);
    expect(a.get(2 ** 32 + 2)!.ino).toBe(1001);
    expect(a.get(2)).toBeUndefined();
    expect(a.size).toBe(2);
  });

  test("10000 nodes: the slots grow and the index is rehashed; every node found; unindex keeps the id", () => {
    const share = newShare();
    const t = new SharedNodeTable(share), other = new SharedNodeTable(share);
    const ids: number[] = [];
    for (let i = 0; i < 10000; i++) ids.push(t.create(3, 5_000_000_000 + i * 7, 0o100644).id);
    expect(share.slots.byteLength).toBeGreaterThan(1024 * 352);
    for (let i = 0; i < 10000; i += 97) expect(other.find(3, 5_000_000_000 + i * 7)!.id).toBe(ids[i]!);
    const n = other.get(ids[5]!)!;
    other.unindex(n);
    expect(t.find(3, n.ino)).toBeUndefined();
    expect(t.get(ids[5]!)!.ino).toBe(5_000_000_035);
    expect([...other.values()].length).toBe(10001);
    t.clear();
    expect(other.size).toBe(1);
  });

  test("node fields: flags, deleted attributes, kernel file handle bytes", () => {
    const t = new SharedNodeTable(newShare());
    const n = t.create(1, 5, 0o100600);
    expect(n.fd).toBe(-1);
    n.gone = true;
    n.noEvict = true;
    n.noEvict = false;
    expect([n.gone, n.noEvict, n.unlinked]).toEqual([true, false, false]);
    expect(n.deletedAttr).toBeNull();
    n.deletedAttr = { ino: 5, mode: 0o100600, nlink: 0, uid: 1, gid: 2, rdev: 0, size: 12, blocks: 8, atime: -5, atimeNsec: 7, mtime: 1, mtimeNsec: 2, ctime: 3, ctimeNsec: 4 };
    expect(n.deletedAttr!.size).toBe(12);
    expect(n.deletedAttr!.atime).toBe(-5);
    n.handle = Buffer.from([8, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect([...n.handle!]).toEqual([8, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(n.parent).toBeNull();
  });
});

describe("SharedDirStore", () => {
  test("listings read from another view; compaction keeps live listings; growth", () => {
    const share = newShare();
    const M = new Int32Array(share.meta);
    const a = new SharedDirStore(share, M), b = new SharedDirStore(share, M);
    a.open(5);
    a.open(3000); // the record table grows to hold descriptor 3000
    expect(b.get(5)!.loaded).toBe(false);
    const names = Array.from({ length: 5000 }, (_, i) => `entry-${i}-\uDCFF`);
    a.store(5, names, names.map((_, i) => i * 2 ** 40), names.map(() => 8));
    expect(b.get(5)!.count).toBe(5000);
    expect(b.get(5)!.name(4321)).toBe("entry-4321-\uDCFF");
    expect(b.get(5)!.ino(4321)).toBe(4321 * 2 ** 40);
    expect(b.get(5)!.type(1)).toBe(8);
    // Re-snapshot 3000 many times: dead listings are compacted away instead of growing forever.
    for (let r = 0; r < 200; r++) b.store(3000, [`r${r}`, "x".repeat(200)], [r, 1], [4, 8]);
    expect(a.get(5)!.name(4999)).toBe("entry-4999-\uDCFF");
    expect(a.get(3000)!.name(0)).toBe("r199");
    expect(share.arena.byteLength).toBeLessThanOrEqual(1 << 20);
    expect(a.close(5)).toBe(true);
    expect(b.get(5)).toBeNull();
    expect(b.close(5)).toBe(false);
    expect(a.fds()).toEqual([3000]);
  });
});

describe("SharedMutex", () => {
  test("two threads increment a plain counter under it: no update lost", async () => {
    const share = newShare();
    const counter = new SharedArrayBuffer(8);
    const code = `
      import { SharedNodeTable } from ${JSON.stringify(join(import.meta.dir, "../lib/fs/passthrough/shared.ts"))};
      self.onmessage = (e) => {
        const t = new SharedNodeTable(e.data.share);
        const c = new Float64Array(e.data.counter);
        for (let i = 0; i < 200000; i++) { t.mutex.lock(); c[0] = c[0] + 1; t.mutex.unlock(); }
        postMessage("done");
      };`;
    const dir = mkdtempSync(join(tmpdir(), "ptcopies-mutex-"));
    try {
      const file = join(dir, "w.ts");
      writeFileSync(file, code);
      const workers = [new Worker(file), new Worker(file)];
      const done = workers.map((w) => new Promise((res) => (w.onmessage = res)));
      for (const w of workers) w.postMessage({ share, counter });
      // This thread takes part too.
      const t = new SharedNodeTable(share);
      const c = new Float64Array(counter);
      for (let i = 0; i < 100000; i++) {
        t.mutex.lock();
        c[0] = c[0]! + 1;
        t.mutex.unlock();
      }
      await Promise.all(done);
      for (const w of workers) w.terminate();
      expect(c[0]).toBe(500000);
      expect(new Int32Array(share.meta)[13]).toBe(0); // the lock word (M_MUTEX): free
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("PassthroughFS.copies", () => {
  test("the main instance switches to shared state; a copy built from the share sees its nodes; forwarding where copies cannot work", () => {
    const src = mkdtempSync(join(tmpdir(), "ptcopies-src-"));
    try {
      mkdirSync(join(src, "d"));
      writeFileSync(join(src, "d", "f"), "x");
      const main = new PassthroughFS(src, { log: () => {} });
      const plan = main.copies();
      if (!main.fds.useHandles) {
        expect(plan).toBeNull(); // no kernel file handles here (not root): forwarding
        return;
      }
      expect(plan!.sharedState).toBe(true);
      expect(plan!.module.endsWith("/lib/fs/passthrough/copy.ts")).toBe(true);
      expect(main.shared).toBe(true);
      const ctx = { uid: 0, gid: 0, pid: 0 } as never;
      const d = main.lookup(ctx, 1, "d") as { ino: number };
      const copy = PassthroughFS.fromShare(plan!.shared as PassthroughShare, () => {});
      const f = copy.lookup(ctx, d.ino, "f") as { ino: number; attr: { size: number } };
      expect(f.attr.size).toBe(1);
      expect(main.nodeCount).toBe(3);
      main.forget(f.ino, 1);
      expect(copy.nodeCount).toBe(2);
      expect(main.copies()).toEqual(plan); // asked again: the same plan
      expect(new PassthroughFS(src, { log: () => {}, fileHandles: false }).copies()).toBeNull();
      expect(new PassthroughFS(src, { log: () => {}, kernelPassthrough: true }).copies()).toBeNull();
      class Sub extends PassthroughFS {}
      expect(new Sub(src, { log: () => {} }).copies()).toBeNull();
      copy.destroy(); // a copy's destroy leaves the shared state alone
      expect(main.nodeCount).toBe(2);
      main.destroy();
      expect(main.nodeCount).toBe(1);
    } finally {
      rmSync(src, { recursive: true, force: true });
    }
  });
});
