// The passthrough's O_PATH descriptor cache (lib/fs/passthrough/nodes.ts) on real descriptors of
// a temporary directory: eviction order, the budget, pins (a pinned descriptor is never closed,
// a close for deletion waits for the last unpin — the EBADF/wrong-file fix), re-open by path
// and by kernel file handle, and EMFILE shedding.

import { afterAll, describe, expect, test } from "bun:test";
import { fstatSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FdCache, PassthroughNode, probeHandles } from "../lib/fs/passthrough/nodes.ts";
import { FuseError } from "../lib/protocol/errors.ts";

const O_PATH = 0o10000000, O_NOFOLLOW = 0o400000, O_DIRECTORY = 0o200000;
const dir = mkdtempSync("/tmp/fuse-uring-fdcache-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function isOpen(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}

function setup(budget: number, handles: boolean, files = 6) {
  const base = mkdtempSync(join(dir, "t-"));
  mkdirSync(join(base, "sub"));
  const rootFd = openSync(base, O_PATH | O_DIRECTORY);
  const rst = fstatSync(rootFd);
  const root = new PassthroughNode(1, rst.dev, rst.ino, rst.mode);
  root.fd = rootFd;
  const mountFd = handles ? probeHandles(rootFd).mountFd : -1;
  const logs: string[] = [];
  const cache = new FdCache(budget, root, mountFd, (l) => logs.push(l));
  const sfd = openSync(join(base, "sub"), O_PATH | O_NOFOLLOW);
  const sst = fstatSync(sfd);
  const sub = new PassthroughNode(2, sst.dev, sst.ino, sst.mode);
  sub.parent = root;
  sub.name = "sub";
  root.kids++;
  cache.adopt(sub, sfd);
  const nodes: PassthroughNode[] = [];
  for (let i = 0; i < files; i++) {
    writeFileSync(join(base, "sub", `f${i}`), `content ${i}`);
    const fd = openSync(join(base, "sub", `f${i}`), O_PATH | O_NOFOLLOW);
    const st = fstatSync(fd);
    const n = new PassthroughNode(10 + i, st.dev, st.ino, st.mode);
    const birth = fstatSync(fd, { bigint: true }).birthtimeNs;
    n.btimeSec = Number(birth / 1_000_000_000n);
    n.btimeNsec = Number(birth % 1_000_000_000n);
    n.parent = sub;
    n.name = `f${i}`;
    sub.kids++;
    cache.adopt(n, fd);
    nodes.push(n);
  }
  return { base, root, sub, nodes, cache, logs };
}

for (const handles of [false, true]) {
  describe(`FdCache (re-open by ${handles ? "file handle" : "path"})`, () => {
    test("holds at most `budget` descriptors, evicting the least recently used", () => {
      const { nodes, cache, sub } = setup(3, handles);
      expect(cache.held).toBe(3);
      expect(cache.maxHeld).toBeLessThanOrEqual(4);
      // sub and f0..f2 were evicted in order; f3..f5 are held
      expect(sub.fd).toBe(-1);
      expect(nodes.slice(0, 3).every((n) => n.fd === -1)).toBe(true);
      expect(nodes.slice(3).every((n) => n.fd >= 0 && isOpen(n.fd))).toBe(true);
      // using f3 makes f4 the least recently used
      cache.fd(nodes[3]!);
      const fd = cache.fd(nodes[0]!); // re-open evicts f4
      expect(fstatSync(fd).ino).toBe(nodes[0]!.ino);
      expect(nodes[4]!.fd).toBe(-1);
      expect(nodes[3]!.fd).toBeGreaterThanOrEqual(0);
      expect(cache.held).toBe(3);
      const s = cache.stats();
      expect(handles ? s.reopenedByHandle : s.reopenedByPath).toBeGreaterThan(0);
      expect(s.mode).toBe(handles ? "handle" : "path");
    });

    test("a pinned descriptor is never evicted; a drop while pinned closes at the last unpin", () => {
      const { nodes, cache } = setup(2, handles);
      const n = nodes[5]!;
      const fd = cache.pin(n);
      cache.pin(n);
      for (const m of nodes.slice(0, 4)) cache.fd(m); // pressure: n is the least recently used
      expect(n.fd).toBe(fd);
      expect(isOpen(fd)).toBe(true);
      n.gone = true;
      cache.drop(n); // file deleted while a request still uses the descriptor
      expect(isOpen(fd)).toBe(true);
      expect(n.dropPending).toBe(true);
      cache.unpin(n);
      expect(isOpen(fd) && n.fd === fd).toBe(true);
      cache.unpin(n);
      expect(n.fd).toBe(-1);
      expect(() => cache.fd(n)).toThrow(FuseError); // gone: ENOENT, never re-opened
      expect(cache.held).toBeLessThanOrEqual(2);
    });

    test("re-open finds the file after its directory was renamed (path kept current / handle)", () => {
      const { base, nodes, cache, sub } = setup(2, handles);
      const n = nodes[0]!;
      expect(n.fd).toBe(-1);
      renameSync(join(base, "sub"), join(base, "moved"));
      sub.name = "moved"; // what PassthroughFS.rename does for a rename through the mount
      const fd = cache.fd(n);
      expect(fstatSync(fd).ino).toBe(n.ino);
    });

    test("another file at the last known path: ESTALE, not the wrong file", () => {
      const { base, nodes, cache } = setup(2, handles);
      const n = nodes[1]!;
      expect(n.fd).toBe(-1);
      rmSync(join(base, "sub", "f1"));
      writeFileSync(join(base, "sub", "f1"), "impostor");
      let err: unknown;
      try {
        cache.fd(n);
      } catch (e) {
        err = e;
      }
      expect((err as FuseError).errno).toBe(116); // ESTALE
    });
  });
}

test("probeHandles: root with CAP_DAC_READ_SEARCH gets a read-only mount descriptor", () => {
  const fd = openSync(dir, O_PATH | O_DIRECTORY);
  const p = probeHandles(fd);
  if (process.getuid?.() === 0) expect(p.mountFd).toBeGreaterThanOrEqual(0);
  else expect(p.mountFd).toBe(-1);
});
