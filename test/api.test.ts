// The public face without a mount: constants and decoders, attr()/entry() builders, defineFs()
// and the argument-order adapter (old positional order still works and warns once), the split
// between "fuse-uring", "fuse-uring/advanced" and "fuse-uring/testing".

import { describe, expect, spyOn, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as pub from "../lib/index.ts";
import {
  accessMask, accessMode, attr, attrReply, defineFs, entry, fallocMode, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
  FuseError, negativeEntry, O_APPEND, O_CREAT, O_DIRECTORY, O_RDONLY, O_RDWR, O_SYNC, O_TMPFILE, O_TRUNC, O_WRONLY, openFlags, paths,
  R_OK, RENAME_EXCHANGE, RENAME_NOREPLACE, renameFlags, S_IFDIR, S_IFLNK, S_IFREG, SEEK_DATA, SEEK_HOLE, W_OK, X_OK, XATTR_CREATE,
  XATTR_REPLACE, xattrMode, type LegacyPathHandlers,
} from "../lib/index.ts";
import * as advanced from "../lib/advanced.ts";
import { deprecation, destructuresSecondParam, toPositional } from "../lib/path/args.ts";
import { testFs } from "../lib/testing/index.ts";

const REPO = join(import.meta.dir, "..");

describe("constants and decoders", () => {
  test("values are Linux's (x86-64/arm64 numbers where they differ)", () => {
    const x86 = process.arch !== "arm64";
    expect([O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, O_SYNC]).toEqual([0, 1, 2, 0o100, 0o1000, 0o2000, 0o4010000]);
    expect(O_DIRECTORY).toBe(x86 ? 0o200000 : 0o40000);
    expect(O_TMPFILE).toBe(0o20000000 | O_DIRECTORY);
    expect([RENAME_NOREPLACE, RENAME_EXCHANGE, XATTR_CREATE, XATTR_REPLACE]).toEqual([1, 2, 1, 2]);
    expect([FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, SEEK_DATA, SEEK_HOLE]).toEqual([1, 2, 0x10, 3, 4]);
    expect([R_OK, W_OK, X_OK]).toEqual([4, 2, 1]);
  });

  test("decoders", () => {
    expect(accessMode(O_RDONLY | O_CREAT)).toBe("read");
    expect(accessMode(O_WRONLY | O_TRUNC)).toBe("write");
    expect(accessMode(O_RDWR | O_APPEND)).toBe("readwrite");
    const f = openFlags(O_WRONLY | O_APPEND | O_CREAT | O_SYNC);
    expect(f).toMatchObject({ access: "write", append: true, create: true, truncate: false, sync: true, dsync: true, exclusive: false });
    expect(openFlags(O_RDONLY).sync).toBe(false);
    expect(renameFlags(RENAME_NOREPLACE)).toEqual({ noReplace: true, exchange: false, whiteout: false });
    expect(fallocMode(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)).toMatchObject({ keepSize: true, punchHole: true, zeroRange: false });
    expect([xattrMode(0), xattrMode(XATTR_CREATE), xattrMode(XATTR_REPLACE)]).toEqual(["either", "create", "replace"]);
    expect(accessMask(R_OK | X_OK)).toEqual(["read", "execute"]);
    expect(accessMask(0)).toEqual([]);
  });
});

describe("attr() / entry() builders", () => {
  test("defaults: a regular file 0644 of the daemon's user, now, blocks from size", () => {
    const before = Math.floor(Date.now() / 1000);
    const a = attr({ ino: 5, size: 1025 });
    expect(a).toMatchObject({ ino: 5, mode: S_IFREG | 0o644, nlink: 1, size: 1025, blocks: 3, blksize: 4096, rdev: 0 });
    expect(a.uid).toBe(process.getuid!());
    expect(a.mtime).toBeGreaterThanOrEqual(before);
    expect(a.atime).toBe(a.mtime);
    expect(Object.keys(a).sort()).toEqual(["atime", "atimeNsec", "blksize", "blocks", "ctime", "ctimeNsec", "gid", "ino", "mode", "mtime", "mtimeNsec", "nlink", "rdev", "size", "uid"]);
  });

  test("type and mode: dir 0755 nlink 2, symlink 0777, explicit bits win; times as Date, ms or [s, ns]", () => {
    expect(attr({ type: "dir" })).toMatchObject({ mode: S_IFDIR | 0o755, nlink: 2 });
    expect(attr({ type: "symlink" }).mode).toBe(S_IFLNK | 0o777);
    expect(attr({ mode: S_IFDIR | 0o700 }).mode).toBe(S_IFDIR | 0o700);
    expect(attr({ type: "file", mode: 0o600 }).mode).toBe(S_IFREG | 0o600);
    const a = attr({ time: [100, 5], mtime: new Date(2000), ctime: 3500 });
    expect([a.atime, a.atimeNsec, a.mtime, a.mtimeNsec, a.ctime, a.ctimeNsec]).toEqual([100, 5, 2, 0, 3, 500_000_000]);
    expect(() => attr({ size: -1 })).toThrow(TypeError);
    expect(() => attr({ type: "bogus" as never })).toThrow(/unknown type/);
  });

  test("entry(): node id as st_ino by default; TTLs and generation only when given; negativeEntry/attrReply", () => {
    const e = entry({ ino: 7, type: "dir" });
    expect(e.ino).toBe(7);
    expect(e.attr.ino).toBe(7);
    expect(e.attr.mode).toBe(S_IFDIR | 0o755);
    expect("entryTtl" in e || "generation" in e).toBe(false);
    const given = attr({ ino: 99 });
    expect(entry({ ino: 7, attr: given, entryTtl: 5, generation: 2 })).toEqual({ ino: 7, attr: given, entryTtl: 5, generation: 2 });
    expect(negativeEntry(3)).toMatchObject({ ino: 0, entryTtl: 3 });
    expect(attrReply({ ino: 1, size: 3 }, 9)).toMatchObject({ attr: { ino: 1, size: 3 }, attrTtl: 9 });
    expect(attrReply(given).attr).toBe(given);
    expect(() => entry({} as never)).toThrow(/node id/);
  });
});

describe("defineFs() and the argument-order adapter", () => {
  test("a defineFs() object: handlers get (path, { … }, ctx); `this` is the object; other handlers pass through", async () => {
    const got: unknown[] = [];
    const fs = defineFs({
      prefix: "v:",
      getattr: (p) => (p === "/" ? { type: "dir" } : { size: 3 }),
      read(p, { offset, size, fh }) {
        got.push({ p, offset, size, fh });
        return (this as unknown as { prefix: string }).prefix;
      },
      open: (_p, { flags }) => 40 + (flags & 3),
    });
    const t = testFs(paths(fs));
    await t.lookup(1, "a");
    const o = await t.open(2, O_RDONLY);
    const r = await t.read(2, o.open!.fh, 0, 3);
    expect(Buffer.from(r.data).toString()).toBe("v:");
    expect(got).toEqual([{ p: "/a", offset: 0, size: 3, fh: 40 }]);
    // Handlers the adapter does not know (added by later releases) are kept as they are.
    const extra = (() => 1) as () => number;
    const wrapped = toPositional(defineFs({ getattr: () => null, ioctlLike: extra } as never)) as unknown as Record<string, unknown>;
    expect(wrapped.ioctlLike).toBe(extra);
  });

  test("the positional order still works, and warns once per process naming the changed handlers", async () => {
    const logged: string[] = [];
    const spy = spyOn(deprecation, "log").mockImplementation((m: string) => void logged.push(m));
    const saved = deprecation.warned;
    deprecation.warned = false;
    try {
      const old: LegacyPathHandlers = {
        getattr: (p) => (p === "/" ? { type: "dir" } : { size: 5 }),
        read: (_p, offset, size) => Buffer.from("hello").subarray(offset, offset + size),
        truncate() {},
      };
      const t = testFs(paths(old));
      paths({ getattr: () => null, mkdir() {} });
      await t.lookup(1, "x");
      const o = await t.open(2, 0);
      expect(Buffer.from((await t.read(2, o.open!.fh, 1, 3)).data).toString()).toBe("ell");
      expect(logged.length).toBe(1);
      expect(logged[0]).toContain("read(path, offset, size, fh, ctx) → read(path, { offset, size, fh }, ctx)");
      expect(logged[0]).toContain("truncate(path, size, fh, ctx) → truncate(path, { size, fh }, ctx)");
      expect(logged[0]).not.toContain("mkdir"); // the second object: no second warning
    } finally {
      spy.mockRestore();
      deprecation.warned = saved;
    }
  });

  test("no warning for objects whose handlers read the same in both orders (getattr, readdir, readFile …)", () => {
    const spy = spyOn(deprecation, "log").mockImplementation(() => {});
    const saved = deprecation.warned;
    deprecation.warned = false;
    try {
      paths({ getattr: () => null, readdir: () => [], readFile: () => "x", unlink() {} });
      expect(spy).not.toHaveBeenCalled();
      expect(deprecation.warned).toBe(false);
    } finally {
      spy.mockRestore();
      deprecation.warned = saved;
    }
  });

  test("named-order handlers without defineFs() are refused with a clear error, never misread", () => {
    const unmarked = { getattr: () => null, read: (_p: string, { offset }: { offset: number }) => String(offset) };
    expect(() => paths(unmarked as never)).toThrow(/read\(path, \{ … \}\) uses the named-arguments order: wrap the handlers in defineFs/);
    expect(destructuresSecondParam(function (_p: string, { a }: { a: number }) { return a; })).toBe(true);
    expect(destructuresSecondParam((_p: string, [a]: number[]) => a)).toBe(true);
    expect(destructuresSecondParam((p: string, offset: number, size = { x: 1 }) => p + offset + size.x)).toBe(false);
    expect(destructuresSecondParam(async (p: string) => p)).toBe(false);
    expect(destructuresSecondParam((p: string) => ({ p }))).toBe(false);
  });

  test("defineFs() needs getattr; marks without copying; FuseError from a named handler is the answer", async () => {
    expect(() => defineFs({} as never)).toThrow(/getattr/);
    const h = { getattr: (p: string) => (p === "/" ? { type: "dir" as const } : { size: 1 }), access: (_p: string, { mask }: { mask: number }) => {
      if (mask & W_OK) throw new FuseError("EROFS");
    } };
    const d = defineFs(h);
    expect(d).toBe(h as typeof d);
    expect(Object.keys(d)).toEqual(["getattr", "access"]); // the mark is not enumerable
    const t = testFs(d);
    await t.lookup(1, "f");
    expect((await t.access(2, R_OK)).error).toBe(0);
    expect((await t.access(2, W_OK)).error).toBe(30);
  });
});

describe("entry points", () => {
  test('"fuse-uring" exports the public face only; internals are in "fuse-uring/advanced"', () => {
    for (const name of ["Session", "PathFS", "loadScript", "toInodeFS", "attachMount", "ScriptError", "watchScript"]) {
      expect(name in pub).toBe(false);
      expect(name in advanced).toBe(true);
    }
    for (const name of ["mount", "paths", "tree", "defineFs", "attr", "entry", "accessMode", "O_RDONLY", "FuseError", "memfs", "serve", "backed", "opened"]) expect(name in pub).toBe(true);
  });

  test("package.json exports name files that exist; examples import only public entry points", () => {
    const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8"));
    expect(Object.keys(pkg.exports)).toEqual([".", "./advanced", "./testing"]);
    for (const f of Object.values(pkg.exports) as string[]) expect(() => readFileSync(join(REPO, f))).not.toThrow();
    for (const ex of ["clock.ts", "hello.ts", "json.ts", "mirror.ts", "sqlite.ts"]) {
      const src = readFileSync(join(REPO, "examples", ex), "utf8");
      const imports = [...src.matchAll(/from "([^"]+)"/g)].map((m) => m[1]!).filter((s) => s.startsWith(".") || s.startsWith("fuse-uring"));
      for (const s of imports) expect(["../lib/index.ts", "fuse-uring"]).toContain(s);
    }
  });
});

test("the README's per-request I/O example: open gets the access mode as fh, write/read/truncate in the named order", async () => {
  const t = testFs((await import("./fixtures/log-readme.ts")).default);
  const l = await t.lookup(1, "log");
  const ino = l.entry!.nodeid;
  const w = await t.open(ino, O_WRONLY);
  expect((await t.write(ino, w.open!.fh, 0, "hello world")).size).toBe(11);
  await t.setattr(ino, { valid: 1 << 3, size: 5 }); // truncate
  const r = await t.open(ino, O_RDONLY);
  expect(Buffer.from((await t.read(ino, r.open!.fh, 1, 100)).data).toString()).toBe("ello");
  expect((await t.getattr(ino)).attr!.attr.size).toBe(5);
});
