// `threads: "stateless"`: several PathFS instances (one per thread in a mount) over one node
// table in SharedArrayBuffers (lib/path/nodes-shared.ts). Here two instances in one thread
// stand for two workers: ids, handles and lookup counts must agree whichever one answers.
import { describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { errnoOf } from "../lib/protocol/errors.ts";
import type { Entry } from "../lib/protocol/structs.ts";
import type { DirFiller, RequestContext } from "../lib/session/filesystem.ts";
import { backed, paths, type PathHandlers } from "../lib/path/index.ts";
import { PathFS } from "../lib/path/pathfs.ts";
import { tree } from "../lib/tree.ts";
import { createPathTable, SharedNodes } from "../lib/path/nodes-shared.ts";
import { loadScript } from "../lib/script.ts";

const S_IFREG = 0o100000;
const O_RDONLY = 0, O_WRONLY = 1, O_RDWR = 2;

function ctx(): RequestContext {
  return {
    uid: 0, gid: 0, pid: 1, unique: 1n, signal: new AbortController().signal,
    backingRead: () => Promise.reject(new Error("no")),
    backingWrite: () => Promise.reject(new Error("no")),
  } as RequestContext;
}

class Filler implements DirFiller {
  entries: { name: string; entry: Entry }[] = [];
  constructor(readonly plus = false) {}
  add(name: string, _next: number, entry: Entry): boolean {
    this.entries.push({ name, entry });
    return true;
  }
}

/** A tiny filesystem whose state is a Map both "threads" see (as a file or database would be). */
function handlers(files: Map<string, string>, log: string[] = []): PathHandlers {
  return {
    threads: "stateless",
    getattr: (p) => (p === "/" ? { type: "dir" } : files.has(p) ? { type: "file", size: files.get(p)!.length } : null),
    readdir: () => [...files.keys()].map((k) => k.slice(1)),
    open: (p, flags) => ({ path: p, flags, n: 7 }),
    create(p) {
      files.set(p, "");
      return 42;
    },
    read: (p, off, size) => files.get(p)!.slice(off, off + size),
    write(p, data, off, fh) {
      log.push(`write ${p} ${JSON.stringify(fh)}`);
      const s = files.get(p)!;
      files.set(p, s.slice(0, off).padEnd(off, "\0") + data.toString() + s.slice(off + data.length));
    },
    release: (p, fh) => void log.push(`release ${p} ${JSON.stringify(fh)}`),
    unlink: (p) => void files.delete(p),
    rename(a, b) {
      files.set(b, files.get(a)!);
      files.delete(a);
    },
  };
}

/** Two instances over one table, as `thread 0` and `thread 1`. */
function pair(h: PathHandlers): [PathFS, PathFS, SharedNodes] {
  const a = paths(h);
  a.scriptSource = { path: "/x/script.ts", args: ["--x"], mountpoint: "/mnt" };
  const plan = a.copies();
  expect(plan).not.toBeNull();
  expect(plan!.sharedState).toBe(true);
  expect(plan!.module).toBe("/x/script.ts");
  expect(plan!.args).toEqual(["--x"]);
  expect(plan!.mountpoint).toBe("/mnt");
  const b = paths(h);
  expect(b.joinShare(plan!.shared)).toBe(true);
  expect(a.replicable && b.replicable).toBe(true);
  return [a, b, new SharedNodes(plan!.shared as never, 9)];
}

describe("a shared node table (threads: \"stateless\")", () => {
  test("one id per path whichever instance looks it up; lookups add up; FORGET frees once", async () => {
    const files = new Map([["/a", "hello"]]);
    const [a, b] = pair(handlers(files));
    const ea = await a.lookup(ctx(), 1, "a");
    const eb = await b.lookup(ctx(), 1, "a");
    expect(eb.ino).toBe(ea.ino);
    expect(a.nodeCount).toBe(2);
    expect(b.pathOf(ea.ino)).toBe("/a");
    // Two lookups (one per instance): the node lives until both are given back.
    a.forget(ea.ino, 1);
    expect(b.resolve("/a")).toBe(ea.ino);
    b.forget(ea.ino, 1);
    expect(a.resolve("/a")).toBeUndefined();
    expect(a.nodeCount).toBe(1);
    // A new lookup gets a new id (the slot's generation moved on): the old one is stale.
    const again = await b.lookup(ctx(), 1, "a");
    expect(again.ino).not.toBe(ea.ino);
    expect(errnoOf(await a.getattr(ctx(), ea.ino, undefined).catch((e) => e))).toBe(116); // ESTALE
    // READDIRPLUS entries count as lookups too, in the same table.
    const f = new Filler(true);
    const d = a.opendir(ctx(), 1);
    await a.readdir(ctx(), 1, d, 0, f);
    expect(f.entries.find((x) => x.name === "a")!.entry.ino).toBe(0); // a bare name: no reference taken
    expect(f.entries.find((x) => x.name === "a")!.entry.attr.ino).toBe(again.ino); // but the id it has
  });

  test("rename and unlink through one instance move the ids the other sees", async () => {
    const files = new Map([["/a", "x"], ["/b", "y"]]);
    const [a, b] = pair(handlers(files));
    const ia = (await a.lookup(ctx(), 1, "a")).ino;
    const ib = (await b.lookup(ctx(), 1, "b")).ino;
    await b.rename(ctx(), 1, "a", 1, "c", 0);
    expect(a.resolve("/c")).toBe(ia);
    expect(a.resolve("/a")).toBeUndefined();
    await a.unlink(ctx(), 1, "b");
    expect(b.resolve("/b")).toBeUndefined();
    expect(b.pathOf(ib)).toBe("/b"); // still held by the kernel: keeps the path it had
    b.forget(ib, 1);
    expect(a.pathOf(ib)).toBeUndefined();
  });

  test("a handle opened by one instance serves requests on the other (value as JSON), released once", async () => {
    const files = new Map([["/a", "hello"]]);
    const log: string[] = [];
    const [a, b, t] = pair(handlers(files, log));
    const ino = (await a.lookup(ctx(), 1, "a")).ino;
    const o = await a.open(ctx(), ino, O_RDWR);
    expect(t.handleCount).toBe(1);
    expect(await b.write(ctx(), ino, o.fh, 0, Buffer.from("J"))).toBe(1);
    const out = new Uint8Array(16);
    const r = await a.read(ctx(), ino, o.fh, 0, 16, out);
    expect(Buffer.from(r as Uint8Array).toString()).toBe("Jello");
    await b.release(ctx(), ino, o.fh);
    expect(log).toEqual([`write /a {"path":"/a","flags":2,"n":7}`, `release /a {"path":"/a","flags":2,"n":7}`]);
    expect(t.handleCount).toBe(0);
    // The opener's cached view is gone with the record: EBADF, not a stale handle.
    expect(errnoOf(await a.read(ctx(), ino, o.fh, 0, 16, out).catch((e) => e))).toBe(9);
    // The node was kept by the open only as long as it was open.
    a.forget(ino, 1);
    expect(a.nodeCount).toBe(1);
  });

  test("create's handle, directory handles, and handle values that cannot cross threads", async () => {
    const files = new Map<string, string>();
    const log: string[] = [];
    const h = handlers(files, log);
    const [a, b] = pair(h);
    const c = await a.create(ctx(), 1, "n", S_IFREG | 0o644, 0, O_WRONLY);
    const fh = typeof c.open === "number" ? c.open : c.open.fh;
    await b.write(ctx(), c.entry.ino, fh, 0, Buffer.from("new"));
    await b.release(ctx(), c.entry.ino, fh);
    expect(files.get("/n")).toBe("new");
    expect(log).toEqual(["write /n 42", "release /n 42"]);
    const d = a.opendir(ctx(), 1);
    const f = new Filler();
    await b.readdir(ctx(), 1, d, 0, f); // a listing taken again on the other instance
    expect(f.entries.map((e) => e.name)).toEqual([".", "..", "n"]);
    await b.releasedir(ctx(), 1, d);
    // A class instance as the handle: refused (after the handler's release), with the reason.
    h.open = () => new (class Cursor {})();
    const ino = (await a.lookup(ctx(), 1, "n")).ino;
    const err = await a.open(ctx(), ino, O_RDONLY).catch((e) => e);
    expect(String(err)).toContain('threads: "stateless" hands file handles to other threads as JSON');
    expect(log.at(-1)).toBe("release /n {}");
  });

  test("backed(): the descriptor is the process's; the other instance reports its size and closes it at release", async () => {
    const dir = mkdtempSync("/tmp/fuse-uring-path-shared-");
    try {
      writeFileSync(join(dir, "f"), "12345");
      const h: PathHandlers = { threads: "stateless", getattr: (p) => (p === "/" ? { type: "dir" } : { type: "file", size: 1 }), open: (p) => backed(join(dir, p)) };
      const [a, b] = pair(h);
      const ino = (await a.lookup(ctx(), 1, "f")).ino;
      const o = await a.open(ctx(), ino, O_RDONLY);
      expect(o.backingFd).toBeGreaterThan(2);
      expect((await b.getattr(ctx(), ino, undefined)).attr.size).toBe(5); // from the descriptor, not getattr's 1
      await b.release(ctx(), ino, o.fh);
      expect(() => closeSync(o.backingFd!)).toThrow(); // closed by the instance that released it
      expect((await a.getattr(ctx(), ino, undefined)).attr.size).toBe(1);
      expect(readFileSync(join(dir, "f"), "utf8")).toBe("12345");
      void openSync;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the declaration: options, handlers, default export; refused for writeFile snapshots; trees write on one thread only", async () => {
    expect(paths({ getattr: () => null }).threads).toBe("single");
    expect(paths({ getattr: () => null }, { threads: "stateless" }).threads).toBe("stateless");
    expect(() => paths({ getattr: () => null, threads: "many" as never })).toThrow('expected "stateless"');
    // Not from a script file, or not declared: no plan (one thread, as before).
    expect(paths({ getattr: () => null }, { threads: "stateless" }).copies()).toBeNull();
    const single = paths({ getattr: () => null });
    single.scriptSource = { path: "/s.ts", args: [] };
    expect(single.copies()).toBeNull();
    // writeFile without write keeps an open file's bytes in one thread: not offered.
    const snap = paths({ threads: "stateless", getattr: () => null, readFile: () => "", writeFile: () => {} });
    snap.scriptSource = { path: "/s.ts", args: [] };
    const errors: string[] = [];
    const orig = console.error;
    console.error = (m: string) => void errors.push(m);
    try {
      expect(snap.copies()).toBeNull();
    } finally {
      console.error = orig;
    }
    expect(errors.join("\n")).toContain("give a write() handler or return backed()");
    // A stateless tree serves on every thread but refuses writers (its writes are per thread).
    const t = tree({ "r.txt": "read me\n", "w.txt": { read: () => "w", write: () => {} } }, { threads: "stateless" });
    t.scriptSource = { path: "/t.ts", args: [] };
    expect(t.copies()).not.toBeNull();
    const w = (await t.lookup(ctx(), 1, "w.txt")).ino;
    expect(errnoOf(await t.open(ctx(), w, O_WRONLY).catch((e) => e))).toBe(13);
    const r = (await t.lookup(ctx(), 1, "r.txt")).ino;
    expect((await t.open(ctx(), r, O_RDONLY)).fh).toBeGreaterThan(0);
    // The script loader records the source and reads a declaration on the default export.
    const dir = mkdtempSync("/tmp/fuse-uring-path-shared-");
    try {
      const f = join(dir, "s.ts");
      writeFileSync(f, `export default Object.assign(() => ({ getattr: () => null }), { threads: "stateless" });\n`);
      const fs = (await loadScript(f, { args: ["1"], mountpoint: "/m" })) as PathFS;
      expect(fs.threads).toBe("stateless");
      expect(fs.scriptSource).toEqual({ path: f, args: ["1"], mountpoint: "/m" });
      const plan = fs.copies()!;
      const copy = (await loadScript(f, { args: ["1"], mountpoint: "/m", shared: plan.shared })) as PathFS;
      expect(copy.replicable).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the table grows (nodes, hash buckets, handles) without losing anything; names over 255 bytes are refused", async () => {
    const share = createPathTable();
    const t = new SharedNodes(share, 0);
    const ids: number[] = [];
    for (let i = 0; i < 5000; i++) {
      const id = t.hold(1, `n${i}`);
      t.addLookup(id, 1);
      t.unhold(id);
      ids.push(id);
    }
    const other = new SharedNodes(share, 1);
    for (let i = 0; i < 5000; i += 499) expect(other.childOf(1, `n${i}`)).toBe(ids[i]);
    expect(other.count).toBe(5001);
    for (const id of ids) other.forget(id, 1);
    expect(t.count).toBe(1);
    const fhs = Array.from({ length: 600 }, (_, i) => t.newHandle({ dir: false, ino: 1, flags: i, snapshot: false, fd: -1, owned: false, writable: false, value: String(i), owner: 0 }));
    expect(other.handle(fhs[599]!)!.value).toBe("599");
    for (const fh of fhs) other.freeHandle(fh);
    expect(t.handleCount).toBe(0);
    expect(errnoOf((() => { try { t.hold(1, "x".repeat(256)); } catch (e) { return e; } })())).toBe(36); // ENAMETOOLONG
  });
});
