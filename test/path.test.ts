// Unit tests of the path-handler layer, the tree and the script loader, without a mount: the
// InodeFS methods are called directly the way the session calls them.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { errnoOf as errnoOfError, FuseError } from "../lib/protocol/errors.ts";
import type { Entry } from "../lib/protocol/structs.ts";
import type { DirFiller, InodeFS, RequestContext } from "../lib/session/filesystem.ts";
import { memfs } from "../lib/fs/memfs.ts";
import { dir, file, symlink, tree } from "../lib/tree.ts";
import { isPathFS, paths, PathFS } from "../lib/path/pathfs.ts";
import { invalidatePath, toInodeFS } from "../lib/path/convert.ts";
import { opened } from "../lib/path/types.ts";
import { loadScript } from "../lib/script.ts";

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const O_RDONLY = 0;
const O_WRONLY = 1;

function ctx(): RequestContext & { abort(): void } {
  const c = new AbortController();
  return {
    uid: 0, gid: 0, pid: 1, unique: 1n, signal: c.signal,
    backingRead: () => Promise.reject(new Error("no")),
    backingWrite: () => Promise.reject(new Error("no")),
    abort: () => c.abort(),
  };
}

class Filler implements DirFiller {
  entries: { name: string; off: number; entry: Entry }[] = [];
  constructor(readonly plus = false, private readonly room = Infinity) {}
  add(name: string, nextOffset: number, entry: Entry): boolean {
    if (this.entries.length >= this.room) return false;
    this.entries.push({ name, off: nextOffset, entry });
    return true;
  }
  get names(): string[] {
    return this.entries.map((e) => e.name);
  }
}

async function lookupPath(fs: InodeFS, path: string): Promise<Entry> {
  let ino = 1;
  let e: Entry | null | undefined;
  for (const part of path.split("/").filter(Boolean)) {
    e = await fs.lookup!(ctx(), ino, part);
    if (!e) throw new Error(`lookupPath: ${part} of ${path} is missing`);
    ino = e.ino;
  }
  return e!;
}

async function readAll(fs: InodeFS, path: string): Promise<{ text: string; open: { fh: number; directIo?: boolean; keepCache?: boolean; backingFd?: number } }> {
  const e = await lookupPath(fs, path);
  const o = (await fs.open!(ctx(), e.ino, O_RDONLY)) as { fh: number; directIo?: boolean; keepCache?: boolean; backingFd?: number };
  const chunks: Uint8Array[] = [];
  for (let off = 0; ; ) {
    const out = new Uint8Array(4096);
    // A backed open file: what the shim would do (pread on the descriptor), no read handler.
    const r = o.backingFd !== undefined ? readSync(o.backingFd, out, 0, 4096, off) : await fs.read!(ctx(), e.ino, o.fh, off, 4096, out);
    const bytes = typeof r === "number" ? out.subarray(0, r) : r;
    if (bytes.length === 0) break;
    chunks.push(bytes.slice());
    off += bytes.length;
  }
  await fs.release!(ctx(), e.ino, o.fh, 0);
  return { text: Buffer.concat(chunks).toString(), open: o };
}

async function errnoOf(p: Promise<unknown> | unknown): Promise<number | string> {
  try {
    await p;
    return "no error";
  } catch (e) {
    return errnoOfError(e) ?? `not an errno error: ${String(e)}`;
  }
}

describe("toInodeFS", () => {
  test("detects trees, path handlers and InodeFS by shape", () => {
    const t = toInodeFS({ "a.txt": "x" });
    expect(isPathFS(t)).toBe(true);
    const p = toInodeFS({ getattr: () => ({ type: "dir" as const }) });
    expect(p).toBeInstanceOf(PathFS);
    const m = memfs();
    expect(toInodeFS(m)).toBe(m);
    const already = tree({});
    expect(toInodeFS(already)).toBe(already);
    expect(() => toInodeFS(42 as never)).toThrow(/expected a filesystem/);
    expect(() => toInodeFS([] as never)).toThrow(/expected a filesystem/);
  });
});

describe("tree", () => {
  test("static file: size, read-only mode, cached open", async () => {
    const fs = tree({ "hello.txt": "Hello, world!\n" });
    const e = await lookupPath(fs, "/hello.txt");
    expect(e.attr.size).toBe(14);
    expect(e.attr.mode).toBe(S_IFREG | 0o444);
    const r = await readAll(fs, "/hello.txt");
    expect(r.text).toBe("Hello, world!\n");
    expect(r.open.keepCache).toBe(true);
    expect(await errnoOf(fs.lookup!(ctx(), 1, "nope"))).toBe(2);
    expect(await errnoOf(fs.open!(ctx(), e.ino, O_WRONLY))).toBe(13);
  });

  test("computed file: produced only at open (never at lookup/getattr), served with direct I/O", async () => {
    let n = 0;
    const fs = tree({ "count.txt": () => "x".repeat(++n * 3000) });
    const e = await lookupPath(fs, "/count.txt");
    expect(n).toBe(0); // lookup did not run the producer
    expect(e.attr.size).toBe(0); // nothing produced yet
    expect(e.attrTtl).toBe(0); // the kernel must ask again: the size changes at open
    const r = await readAll(fs, "/count.txt");
    expect(n).toBe(1);
    expect(r.open.directIo).toBe(true);
    expect(r.text.length).toBe(3000); // every byte of the open's snapshot
    // stat now reports the size the last open produced, still without producing
    const g = (await fs.getattr!(ctx(), e.ino, undefined)) as { attr: { size: number }; attrTtl?: number };
    expect(g.attr.size).toBe(3000);
    expect(g.attrTtl).toBe(0);
    expect(n).toBe(1);
    // fstat on the open file reports the snapshot's size
    const o = (await fs.open!(ctx(), e.ino, O_RDONLY)) as { fh: number };
    const a = (await fs.getattr!(ctx(), e.ino, o.fh)) as { attr: { size: number } };
    expect(a.attr.size).toBe(6000);
  });

  test("async producers, bytes, Blob, nested objects, Map, dir() and symlink()", async () => {
    const fs = tree({
      "a.txt": async () => "async\n",
      "b.bin": new Uint8Array([1, 2, 3]),
      "c.txt": new Blob(["blob!"]),
      sub: { deeper: new Map([["m.txt", "from a map"]]) },
      live: dir(() => ({ [`n${1 + 1}`]: "2" })),
      link: symlink("a.txt"),
      gone: null,
    });
    expect((await readAll(fs, "/a.txt")).text).toBe("async\n");
    expect((await lookupPath(fs, "/b.bin")).attr.size).toBe(3);
    expect((await readAll(fs, "/c.txt")).text).toBe("blob!");
    expect((await readAll(fs, "/sub/deeper/m.txt")).text).toBe("from a map");
    expect((await lookupPath(fs, "/sub")).attr.mode).toBe(S_IFDIR | 0o555);
    expect((await readAll(fs, "/live/n2")).text).toBe("2");
    const l = await lookupPath(fs, "/link");
    expect(l.attr.mode & 0o170000).toBe(S_IFLNK);
    expect(await fs.readlink!(ctx(), l.ino)).toBe("a.txt");
    expect(await errnoOf(fs.lookup!(ctx(), 1, "gone"))).toBe(2);
    expect(await errnoOf(lookupPath(fs, "/a.txt/x"))).toBe(20);
  });

  test("Bun.file entries report the file's size and content", async () => {
    const tmp = mkdtempSync("/tmp/pathtest-");
    try {
      writeFileSync(join(tmp, "f"), "on disk\n");
      const fs = tree({ f: Bun.file(join(tmp, "f")), missing: Bun.file(join(tmp, "nope")) });
      expect((await lookupPath(fs, "/f")).attr.size).toBe(8);
      const r = await readAll(fs, "/f");
      expect(r.text).toBe("on disk\n");
      expect(r.open.backingFd).toBeGreaterThan(2); // served from the file (natively when mounted)
      expect(await errnoOf(lookupPath(fs, "/missing"))).toBe(2);
    } finally {
      rmSync(tmp, { recursive: true });
    }
  });

  test("the object is live: changes show on the next lookup", async () => {
    const obj: Record<string, string> = { "a.txt": "1" };
    const fs = tree(obj);
    expect((await readAll(fs, "/a.txt")).text).toBe("1");
    obj["a.txt"] = "22";
    obj["b.txt"] = "new";
    expect((await readAll(fs, "/a.txt")).text).toBe("22");
    expect((await readAll(fs, "/b.txt")).text).toBe("new");
  });

  test("file({ read, write }): write receives the whole new content at flush", async () => {
    let value = "old value\n";
    const writes: string[] = [];
    const fs = tree({ cfg: file({ read: () => value, write: (d) => void writes.push((value = d.toString())) }) });
    const e = await lookupPath(fs, "/cfg");
    expect(e.attr.mode).toBe(S_IFREG | 0o644);
    // `echo new > cfg`: open O_WRONLY, truncate through the handle, write, flush, release
    const o = (await fs.open!(ctx(), e.ino, O_WRONLY)) as { fh: number };
    await fs.setattr!(ctx(), e.ino, { size: 0, fh: o.fh, valid: 0 });
    expect(await fs.write!(ctx(), e.ino, o.fh, 0, Buffer.from("new\n"), 0, O_WRONLY)).toBe(4);
    expect(writes).toEqual([]);
    await fs.flush!(ctx(), e.ino, o.fh, 0n);
    await fs.release!(ctx(), e.ino, o.fh, 0);
    expect(writes).toEqual(["new\n"]);
    // partial overwrite keeps the rest (read-modify-write of the snapshot)
    const o2 = (await fs.open!(ctx(), e.ino, 2)) as { fh: number };
    await fs.write!(ctx(), e.ino, o2.fh, 1, Buffer.from("E"), 0, 2);
    await fs.flush!(ctx(), e.ino, o2.fh, 0n);
    await fs.release!(ctx(), e.ino, o2.fh, 0);
    expect(value).toBe("nEw\n");
    // truncate by path
    await fs.setattr!(ctx(), e.ino, { size: 2, valid: 0 });
    expect(value).toBe("nE");
  });

  test("shell redirection: O_TRUNC as SETATTR without fh, flush before the write", async () => {
    const writes: string[] = [];
    const fs = tree({ v: file({ read: () => "1\n", write: (d) => void writes.push(d.toString()) }) });
    const e = await lookupPath(fs, "/v");
    // `echo 42 > v`: open, SETATTR size=0 (no fh), dup2+close → FLUSH, WRITE, FLUSH, RELEASE
    const o = (await fs.open!(ctx(), e.ino, O_WRONLY)) as { fh: number };
    const a = (await fs.setattr!(ctx(), e.ino, { size: 0, valid: 8 | 512 })) as { attr: { size: number } };
    expect(a.attr.size).toBe(0);
    await fs.flush!(ctx(), e.ino, o.fh, 0n);
    expect(writes).toEqual([]); // nothing written yet: the empty intermediate state is not saved
    await fs.write!(ctx(), e.ino, o.fh, 0, Buffer.from("42\n"), 0, O_WRONLY);
    await fs.flush!(ctx(), e.ino, o.fh, 0n);
    await fs.release!(ctx(), e.ino, o.fh, 0);
    expect(writes).toEqual(["42\n"]);
    // `: > v`: truncation only, saved at release
    const o2 = (await fs.open!(ctx(), e.ino, O_WRONLY)) as { fh: number };
    await fs.setattr!(ctx(), e.ino, { size: 0, valid: 8 });
    await fs.flush!(ctx(), e.ino, o2.fh, 0n);
    await fs.release!(ctx(), e.ino, o2.fh, 0);
    expect(writes).toEqual(["42\n", ""]);
  });

  test("a plain { read, write } object is a writable file; dir() forces a directory", async () => {
    let v = "a";
    const fs = tree({ f: { read: () => v, write: (d: Buffer) => void (v = d.toString()) }, d: dir({ read: "r" }) });
    const e = await lookupPath(fs, "/f");
    expect(e.attr.mode).toBe(S_IFREG | 0o644);
    const o = (await fs.open!(ctx(), e.ino, O_WRONLY)) as { fh: number };
    await fs.write!(ctx(), e.ino, o.fh, 0, Buffer.from("b"), 0, O_WRONLY);
    await fs.release!(ctx(), e.ino, o.fh, 0);
    expect(v).toBe("b");
    expect((await lookupPath(fs, "/d")).attr.mode & 0o170000).toBe(S_IFDIR);
    expect((await readAll(fs, "/d/read")).text).toBe("r");
  });

  test("a write handler that throws FuseError fails the flush with that errno", async () => {
    const fs = tree({ cfg: file({ read: () => "", write: () => { throw new FuseError("EINVAL"); } }) });
    const e = await lookupPath(fs, "/cfg");
    const o = (await fs.open!(ctx(), e.ino, O_WRONLY)) as { fh: number };
    await fs.write!(ctx(), e.ino, o.fh, 0, Buffer.from("x"), 0, O_WRONLY);
    expect(await errnoOf(fs.flush!(ctx(), e.ino, o.fh, 0n))).toBe(22);
  });

  test("readdir: . and .., resumable offsets, READDIRPLUS lookup references", async () => {
    const fs = tree({ a: "1", b: { c: "2" }, d: () => "dyn" }) as PathFS;
    const root = 1;
    const fh = (await fs.opendir(ctx(), root)) as number;
    const f1 = new Filler(false, 3);
    await fs.readdir(ctx(), root, fh, 0, f1);
    expect(f1.names).toEqual([".", "..", "a"]);
    const f2 = new Filler(false);
    await fs.readdir(ctx(), root, fh, f1.entries.at(-1)!.off, f2);
    expect(f2.names).toEqual(["b", "d"]);
    expect(f2.entries[0]!.entry.attr.mode & 0o170000).toBe(S_IFDIR);
    await fs.releasedir(ctx(), root, fh);

    const before = fs.nodeCount;
    const fh2 = (await fs.opendir(ctx(), root)) as number;
    const plus = new Filler(true);
    await fs.readdir(ctx(), root, fh2, 0, plus);
    await fs.releasedir(ctx(), root, fh2);
    const a = plus.entries.find((x) => x.name === "a")!;
    const d = plus.entries.find((x) => x.name === "d")!;
    expect(a.entry.ino).toBeGreaterThan(1); // full entry: a lookup reference
    expect(a.entry.attr.size).toBe(1);
    expect(d.entry.ino).toBe(0); // computed: the kernel will look it up (size is evaluated then)
    expect(fs.nodeCount).toBe(before + 2); // a and b
    fs.forget(a.entry.ino, 1);
    fs.forget(plus.entries.find((x) => x.name === "b")!.entry.ino, 1);
    expect(fs.nodeCount).toBe(before);
  });

  test("bad tree values answer with a clear error", async () => {
    const fs = tree({ bad: 42 as never });
    expect(String(await fs.lookup!(ctx(), 1, "bad").catch((e) => e))).toMatch(/\/bad is a number/);
    expect(() => tree("x" as never)).toThrow(/root must be an object/);
  });
});

describe("paths", () => {
  test("lookup counts: forget frees nodes, ids stay stable while referenced", async () => {
    const fs = paths({ getattr: (p) => (p === "/" || p === "/d" ? { type: "dir" } : p.startsWith("/d/") ? { size: 1 } : null) });
    const d1 = await fs.lookup(ctx(), 1, "d");
    const d2 = await fs.lookup(ctx(), 1, "d");
    expect(d2.ino).toBe(d1.ino);
    const f = await fs.lookup(ctx(), d1.ino, "f");
    expect(fs.resolve("/d/f")).toBe(f.ino);
    fs.forget(d1.ino, 2); // the child keeps its parent
    expect(fs.resolve("/d")).toBe(d1.ino);
    fs.forget(f.ino, 1);
    expect(fs.resolve("/d/f")).toBeUndefined();
    expect(fs.resolve("/d")).toBeUndefined();
    expect(fs.nodeCount).toBe(1);
    expect(await errnoOf(fs.lookup(ctx(), 1, "x"))).toBe(2);
    expect(fs.nodeCount).toBe(1); // failed lookups leave nothing behind
  });

  test("stat defaults and inference", async () => {
    const t = new Date("2020-01-02T03:04:05.678Z");
    const fs = paths({
      getattr: (p) =>
        ({
          "/": { type: "dir" as const },
          "/f": { size: 10, mtime: t },
          "/m": { mode: 0o100600, mtime: t.getTime() },
          "/l": { target: "f" },
          "/s": Bun.file(import.meta.path).size >= 0 ? { type: "socket" as const, mtime: [5, 6] as [number, number] } : null,
        })[p] ?? null,
    });
    const f = (await fs.lookup(ctx(), 1, "f")).attr;
    expect(f.mode).toBe(S_IFREG | 0o444);
    expect(f.nlink).toBe(1);
    expect(f.uid).toBe(process.getuid!());
    expect(f.blocks).toBe(1);
    expect([f.mtime, f.mtimeNsec]).toEqual([Math.floor(t.getTime() / 1000), 678_000_000]);
    expect(f.atime).toBe(f.mtime);
    expect((await fs.lookup(ctx(), 1, "m")).attr.mode).toBe(S_IFREG | 0o600);
    const l = await fs.lookup(ctx(), 1, "l");
    expect(l.attr.mode).toBe(S_IFLNK | 0o777);
    expect(l.attr.size).toBe(1);
    expect(await fs.readlink(ctx(), l.ino)).toBe("f");
    const s = (await fs.lookup(ctx(), 1, "s")).attr;
    expect([s.mtime, s.mtimeNsec]).toEqual([5, 6]);
    const root = (await fs.getattr(ctx(), 1, undefined)).attr;
    expect(root.mode).toBe(S_IFDIR | 0o555);
    expect(root.nlink).toBe(2);
  });

  test("fs.Stats objects are accepted as they are", async () => {
    const { statSync } = await import("node:fs");
    const fs = paths({ getattr: (p) => statSync(p === "/" ? "/tmp" : import.meta.path) });
    const a = (await fs.lookup(ctx(), 1, "x")).attr;
    const st = statSync(import.meta.path);
    expect(a.size).toBe(st.size);
    expect(a.mode).toBe(st.mode);
    expect(a.ino).toBe(st.ino);
  });

  test("read/write handlers get offsets, the open handle and the context", async () => {
    const store = new Map<string, Buffer>([["/f", Buffer.from("0123456789")]]);
    const seen: unknown[] = [];
    const fs = paths({
      getattr: (p) => (p === "/" ? { type: "dir" } : store.has(p) ? { size: store.get(p)!.length } : null),
      open: (p, flags) => opened({ p, flags }, { directIo: true }),
      read(p, off, size, fh, c) {
        seen.push(fh, c.uid);
        return store.get(p)!.subarray(off, off + size);
      },
      write(p, data, off) {
        const b = Buffer.alloc(Math.max(store.get(p)!.length, off + data.length));
        store.get(p)!.copy(b);
        data.copy(b, off);
        store.set(p, b);
      },
    });
    const e = await fs.lookup(ctx(), 1, "f");
    const o = await fs.open(ctx(), e.ino, 2);
    expect(o.directIo).toBe(true);
    const out = new Uint8Array(4);
    const r = await fs.read(ctx(), e.ino, o.fh, 3, 4, out);
    expect(Buffer.from(r as Uint8Array).toString()).toBe("3456");
    expect(seen).toEqual([{ p: "/f", flags: 2 }, 0]);
    expect(await fs.write(ctx(), e.ino, o.fh, 8, Buffer.from("XYZ"))).toBe(3);
    expect(store.get("/f")!.toString()).toBe("01234567XYZ");
    const m = await fs.read(ctx(), e.ino, o.fh, 0, 100, new Uint8Array(100));
    expect((m as Uint8Array).length).toBe(11);
  });

  test("readFile without size: size computed, direct I/O, created files get writeFile on close", async () => {
    const files = new Map<string, string>([["/a", "alpha"]]);
    const fs = paths({
      getattr: (p) => (p === "/" ? { type: "dir" } : files.has(p) ? { type: "file" } : null),
      readdir: async function* () {
        for (const k of files.keys()) yield k.slice(1);
      },
      readFile: (p) => files.get(p) ?? "",
      writeFile: (p, d) => void files.set(p, d.toString()),
      create: (p) => void files.set(p, ""),
    });
    const a = await fs.lookup(ctx(), 1, "a");
    expect(a.attr.size).toBe(5);
    expect(a.attr.mode).toBe(S_IFREG | 0o644);
    const c = await fs.create(ctx(), 1, "new", 0o100666, 0o022, O_WRONLY | 0o100);
    expect(c.entry.attr.mode).toBe(S_IFREG | 0o644);
    const fh = (c.open as { fh: number }).fh;
    await fs.write(ctx(), c.entry.ino, fh, 0, Buffer.from("hello"));
    await fs.release(ctx(), c.entry.ino, fh);
    expect(files.get("/new")).toBe("hello");
    const dfh = fs.opendir(ctx(), 1);
    const fl = new Filler();
    await fs.readdir(ctx(), 1, dfh, 0, fl);
    expect(fl.names).toEqual([".", "..", "a", "new"]);
  });

  test("errors: FuseError names and numbers, null getattr, missing handlers", async () => {
    const fs = paths({
      getattr: (p) => (p === "/" ? { type: "dir" } : p === "/e" ? { size: 1 } : p === "/n" ? { size: 1 } : null),
      read: (p) => {
        if (p === "/e") throw new FuseError("EPERM");
        throw new FuseError(61);
      },
    });
    const e = await fs.lookup(ctx(), 1, "e");
    const o = await fs.open(ctx(), e.ino, O_RDONLY);
    expect(await errnoOf(fs.read(ctx(), e.ino, o.fh, 0, 1, new Uint8Array(1)))).toBe(1);
    const n = await fs.lookup(ctx(), 1, "n");
    const on = await fs.open(ctx(), n.ino, O_RDONLY);
    expect(await errnoOf(fs.read(ctx(), n.ino, on.fh, 0, 1, new Uint8Array(1)))).toBe(61);
    expect(await errnoOf(fs.open(ctx(), e.ino, O_WRONLY))).toBe(13);
    expect(await errnoOf(fs.mkdir(ctx(), 1, "d", 0o755, 0))).toBe(13);
    expect(await errnoOf(fs.unlink(ctx(), 1, "e"))).toBe(13);
    expect(() => paths({} as never)).toThrow(/getattr/);
  });

  test("rename and unlink keep node ids attached to the right file", async () => {
    const files = new Set(["/a", "/b"]);
    const fs = paths({
      getattr: (p) => (p === "/" ? { type: "dir" } : files.has(p) ? { size: 0 } : null),
      rename: (from, to) => {
        files.delete(from);
        files.add(to);
      },
      unlink: (p) => void files.delete(p),
    });
    const a = await fs.lookup(ctx(), 1, "a");
    const b = await fs.lookup(ctx(), 1, "b");
    await fs.rename(ctx(), 1, "a", 1, "c", 0);
    expect(fs.resolve("/c")).toBe(a.ino);
    expect(fs.resolve("/a")).toBeUndefined();
    expect(await errnoOf(fs.rename(ctx(), 1, "c", 1, "b", 1))).toBe(17); // RENAME_NOREPLACE
    expect(await errnoOf(fs.rename(ctx(), 1, "c", 1, "b", 2))).toBe(22); // RENAME_EXCHANGE
    await fs.rename(ctx(), 1, "c", 1, "b", 0);
    expect(fs.resolve("/b")).toBe(a.ino);
    expect(fs.pathOf(b.ino)).toBe("/b"); // the replaced node keeps its old path for handles
    await fs.unlink(ctx(), 1, "b");
    expect(fs.resolve("/b")).toBeUndefined();
    fs.forget(a.ino, 1);
    fs.forget(b.ino, 1);
    expect(fs.nodeCount).toBe(1);
  });

  test("the context's signal reaches handlers (interrupts)", async () => {
    const fs = paths({
      getattr: (p) => (p === "/" ? { type: "dir" } : { size: 100 }),
      read: (_p, _o, _s, _fh, c) =>
        new Promise<Uint8Array>((resolve, reject) => {
          const t = setTimeout(() => resolve(new Uint8Array(1)), 5000);
          c.signal.addEventListener("abort", () => {
            clearTimeout(t);
            reject(new FuseError("EINTR"));
          });
        }),
    });
    const e = await fs.lookup(ctx(), 1, "slow");
    const o = await fs.open(ctx(), e.ino, O_RDONLY);
    const c = ctx();
    const p = fs.read(c, e.ino, o.fh, 0, 1, new Uint8Array(1));
    setTimeout(() => c.abort(), 20);
    const t0 = Date.now();
    expect(await errnoOf(p)).toBe(4);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  test("invalidate: resolves paths to node ids for the notifier", async () => {
    const fs = tree({ d: { f: "x" } });
    const calls: string[] = [];
    const m = {
      session: { fs },
      invalidateInode: async (ino: number, off = 0, len = 0) => (calls.push(`inode ${ino} ${off} ${len}`), 0),
      invalidateEntry: async (parent: number, name: string) => (calls.push(`entry ${parent} ${name}`), 0),
    };
    expect(() => fs.invalidate("/d/f")).toThrow(/not mounted/);
    const d = await fs.lookup(ctx(), 1, "d");
    const f = await fs.lookup(ctx(), d.ino, "f");
    expect(await invalidatePath(m, "/d/f")).toBe(true);
    expect(calls).toEqual([`inode ${f.ino} 0 0`, `entry ${d.ino} f`]);
    calls.length = 0;
    expect(await fs.invalidate("/unknown/x")).toBe(false); // nothing cached: nothing to do
    expect(calls).toEqual([]);
    expect(await fs.invalidateEntry("/d", "new")).toBe(true);
    expect(calls).toEqual([`entry ${d.ino} new`]);
    // From inside a handler of that directory: sent only after the request was answered.
    calls.length = 0;
    let answered = false;
    const pending = fs.lookup(ctx(), d.ino, "f").then((e) => {
      answered = true;
      return e;
    });
    const inv = fs.invalidate("/d/f").then((r) => {
      calls.push(`answered before notify: ${answered}`);
      return r;
    });
    await pending;
    expect(await inv).toBe(true);
    expect(calls).toEqual([`inode ${f.ino} 0 0`, `entry ${d.ino} f`, "answered before notify: true"]);
  });
});

describe("loadScript", () => {
  const dir = mkdtempSync("/tmp/loadscript-");
  const write = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  test("tree object, path handlers, InodeFS, function, class, promise", async () => {
    expect(isPathFS(await loadScript(write("a.ts", `export default { "x.txt": "x" };\n`)))).toBe(true);
    expect(isPathFS(await loadScript(write("b.ts", `export default { getattr: () => ({ type: "dir" }) };\n`)))).toBe(true);
    const m = await loadScript(write("c.ts", `import { memfs } from "${process.cwd()}/lib/fs/memfs.ts";\nexport default memfs();\n`));
    expect(typeof m.lookup).toBe("function");
    const f = await loadScript(write("d.ts", `export default async ({ args }: { args: string[] }) => ({ "n.txt": String(args.length) });\n`), { args: ["a", "b"] });
    expect((await readAll(f, "/n.txt")).text).toBe("2");
    expect(isPathFS(await loadScript(write("e.ts", `export default class { getattr() { return { type: "dir" }; } }\n`)))).toBe(true);
    expect(isPathFS(await loadScript(write("f.ts", `export default Promise.resolve({ a: "b" });\n`)))).toBe(true);
  });

  test("syntax error: file:line:col, the line and a caret", async () => {
    const p = write("bad.ts", `const a = 1;\nexport default {\n  "x": "y",,\n};\n`);
    const err = await loadScript(p).catch((e: Error) => e.message);
    expect(err).toMatch(new RegExp(`${p.replace(/[.]/g, "\\.")}:3:\\d+: `));
    expect(err).toContain(`"x": "y",,`);
    expect(err).toContain("^");
  });

  test("missing default export, runtime errors, wrong export, missing file", async () => {
    const p = write("nodef.ts", `export const fs = { a: "b" };\n`);
    const m1 = await loadScript(p).catch((e: Error) => e.message);
    expect(m1).toContain(`${p}:1: no default export`);
    expect(m1).toContain("named exports: fs");
    const p2 = write("throws.ts", `const x = 1;\n\nthrow new Error("kaput");\n`);
    expect(await loadScript(p2).catch((e: Error) => e.message)).toMatch(new RegExp(`${p2}:3:\\d+: kaput`));
    const p3 = write("num.ts", `// a comment\nexport default 42;\n`);
    expect(await loadScript(p3).catch((e: Error) => e.message)).toMatch(new RegExp(`${p3}:2: default export is not a filesystem: .*a number`));
    const p4 = write("fthrows.ts", `export default function () {\n  throw new Error("no config");\n}\n`);
    expect(await loadScript(p4).catch((e: Error) => e.message)).toMatch(new RegExp(`${p4}:2:\\d+: the default export function threw: no config`));
    expect(await loadScript(join(dir, "missing.ts")).catch((e: Error) => e.message)).toContain("no such file");
    const p5 = write("imp.ts", `import { nothing } from "./nodef.ts";\nexport default nothing;\n`);
    expect(await loadScript(p5).catch((e: Error) => e.message)).toMatch(new RegExp(`${p5}:1: .*nothing`));
    const p6 = write("res.ts", `\nimport x from "./does-not-exist.ts";\nexport default x;\n`);
    expect(await loadScript(p6).catch((e: Error) => e.message)).toMatch(new RegExp(`${p6}:2: .*does-not-exist`));
  });
});
