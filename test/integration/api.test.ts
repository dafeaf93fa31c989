// The library API used in-process: mount(), Mount.unmount/closed/stats, a filesystem written
// from scratch against lib/fs/types.ts. This process serves the mount, so it never touches the
// mount itself: every access is a spawned child.
import { describe, expect } from "bun:test";
import { mount, memfs, FuseError, S_IFDIR, S_IFREG, defineFs, paths, type LegacyPathHandlers, type StatLike } from "../../lib/index.ts";
import { deprecation } from "../../lib/advanced.ts";
import type { Attr } from "../../lib/protocol/structs.ts";
import type { DirFiller, InodeFS, RequestContext } from "../../lib/session/filesystem.ts";
import { TRANSPORTS, cleanupAfterEach, fmt, fsop, fsopOk, fuseTest, isMounted, makeMountpoint, noteConnection, run, shOk, sleep, transportHooks } from "../helpers/index.ts";

/** A read-only filesystem with one file, /hello, plus a file whose read answers ENOSPC. */
function helloFs(): InodeFS & { calls: Record<string, number> } {
  const calls: Record<string, number> = {};
  const count = (op: string) => (calls[op] = (calls[op] ?? 0) + 1);
  const text = new TextEncoder().encode("hello, world\n");
  const attr = (ino: number): Attr => {
    const t = 1_700_000_000;
    const base = { uid: 0, gid: 0, rdev: 0, blocks: 0, atime: t, atimeNsec: 1, mtime: t, mtimeNsec: 2, ctime: t, ctimeNsec: 3 };
    if (ino === 1) return { ...base, ino, mode: S_IFDIR | 0o755, nlink: 2, size: 0 };
    if (ino === 2) return { ...base, ino, mode: S_IFREG | 0o444, nlink: 1, size: text.length };
    if (ino === 3) return { ...base, ino, mode: S_IFREG | 0o444, nlink: 1, size: 10 };
    throw new FuseError("ENOENT");
  };
  const names: Record<string, number> = { hello: 2, enospc: 3 };
  return {
    calls,
    lookup(_ctx: RequestContext, parent: number, name: string) {
      count("lookup");
      const ino = parent === 1 ? names[name] : undefined;
      if (!ino) throw new FuseError("ENOENT");
      return { ino, attr: attr(ino) };
    },
    getattr(_ctx: RequestContext, ino: number) {
      count("getattr");
      return attr(ino);
    },
    async readdir(_ctx: RequestContext, ino: number, _fh: number, offset: number, filler: DirFiller) {
      count("readdir");
      if (ino !== 1) throw new FuseError("ENOTDIR");
      const entries: [string, number][] = [[".", 1], ["..", 1], ["hello", 2], ["enospc", 3]];
      for (let i = offset; i < entries.length; i++) {
        const [name, e] = entries[i]!;
        if (!filler.add(name, i + 1, { ino: e, attr: attr(e) })) break;
      }
    },
    open(_ctx: RequestContext, ino: number) {
      count("open");
      attr(ino);
      return { fh: 100 + ino };
    },
    async read(_ctx: RequestContext, ino: number, fh: number, offset: number, size: number) {
      count("read");
      if (fh !== 100 + ino) throw new FuseError("EBADF");
      if (ino === 3) throw new FuseError("ENOSPC");
      await Promise.resolve();
      return text.subarray(offset, offset + size);
    },
  };
}

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("mount(memfs()) in-process: children use it, stats(), unmount(), closed", async () => {
      const mnt = makeMountpoint();
      const m = await mount(mnt, memfs(), { transport });
      try {
        noteConnection(mnt);
        expect(isMounted(mnt)).toBe(true);
        expect(m.transport).toBe(transport);
        await shOk('mkdir "$1/d" && echo api > "$1/d/f" && cat "$1/d/f"', [mnt]);
        // With worker threads (--workers auto: memfs runs a copy per CPU) their counts reach the
        // main thread's stats() within half a second.
        let st = m.stats();
        for (let i = 0; i < 40 && (transport === "uring" ? st.ringRequests : st.ringRequests + st.devRequests) === 0; i++) {
          await sleep(50);
          st = m.stats();
        }
        expect(st.transport).toBe(transport);
        expect(st.ringRequests + st.devRequests).toBeGreaterThan(0);
        if (transport === "uring") expect(st.ringRequests).toBeGreaterThan(0);
        let closed = false;
        m.closed.then(() => (closed = true));
        await m.unmount();
        await m.closed;
        expect(closed).toBe(true);
        expect(isMounted(mnt)).toBe(false);
      } finally {
        if (isMounted(mnt)) await m.unmount().catch(() => {});
      }
    });

    fuseTest("a filesystem written against the inode API (lookup/getattr/readdir/open/read)", async () => {
      const mnt = makeMountpoint();
      const fs = helloFs();
      const m = await mount(mnt, fs, { transport });
      try {
        noteConnection(mnt);
        expect(await shOk('cat "$1/hello"', [mnt])).toBe("hello, world\n");
        expect((await shOk('ls -f "$1" | sort', [mnt])).split("\n").filter(Boolean)).toEqual([".", "..", "enospc", "hello"]);
        expect((await shOk('stat -c "%s %a %F" "$1/hello"', [mnt])).trim()).toBe("13 444 regular file");
        expect((await shOk('TZ=UTC stat -c %y "$1/hello"', [mnt])).trim()).toBe("2023-11-14 22:13:20.000000002 +0000");
        expect((await fsop("stat", `${mnt}/missing`)).code).toBe("ENOENT");
        expect((await fsop("read", `${mnt}/enospc`)).code).toBe("ENOSPC");
        // absent methods answer ENOSYS to the kernel, which the caller sees as an error
        const mk = await fsop("mkdir", `${mnt}/newdir`);
        expect(mk.ok).toBe(false);
        const w = await run(["sh", "-c", 'echo x > "$1/hello"', "sh", mnt]);
        expect(w.code, fmt(w)).not.toBe(0);
        expect(fs.calls.lookup).toBeGreaterThan(0);
        expect(fs.calls.read).toBeGreaterThan(0);
        expect(fs.calls.readdir).toBeGreaterThan(0);
        expect((await fsopOk("read", `${mnt}/hello`)).data).toBe("hello, world\n");
      } finally {
        await m.unmount();
      }
      expect(isMounted(mnt)).toBe(false);
    });
  });
}

/**
 * A small in-memory path filesystem, written once in the named-arguments order (defineFs) and
 * once in the deprecated positional order; `calls` records what each handler received.
 */
function mapFs() {
  const files = new Map<string, { data: Buffer; mode: number; target?: string; xattrs: Map<string, Buffer> }>();
  const dirs = new Set<string>(["/"]);
  const calls: Record<string, unknown[]> = {};
  const note = (op: string, v: unknown) => (calls[op] ??= []).push(v);
  const get = (p: string) => {
    const f = files.get(p);
    if (!f) throw new FuseError("ENOENT");
    return f;
  };
  const stat = (p: string): StatLike | null => {
    if (dirs.has(p)) return { type: "dir", mode: 0o755 };
    const f = files.get(p);
    if (!f) return null;
    return f.target !== undefined ? { type: "symlink", target: f.target } : { type: "file", mode: f.mode, size: f.data.length };
  };
  const list = (p: string) => [...dirs, ...files.keys()].filter((x) => x !== "/" && x.slice(0, x.lastIndexOf("/") || 1) === p).map((x) => x.slice(x.lastIndexOf("/") + 1));
  const ops = {
    write(p: string, data: Buffer, offset: number) {
      const f = get(p);
      const end = offset + data.length;
      if (end > f.data.length) f.data = Buffer.concat([f.data, Buffer.alloc(end - f.data.length)]);
      data.copy(f.data, offset);
      return data.length;
    },
    truncate(p: string, size: number) {
      const f = get(p);
      f.data = size <= f.data.length ? f.data.subarray(0, size) : Buffer.concat([f.data, Buffer.alloc(size - f.data.length)]);
    },
    rename(from: string, to: string) {
      files.set(to, get(from));
      files.delete(from);
    },
  };
  const named = defineFs({
    getattr: (p) => stat(p),
    readdir: (p) => list(p),
    open(p, { flags }) {
      note("open", { p, flags });
      get(p);
      return 7;
    },
    read(p, { offset, size, fh }) {
      note("read", { p, offset, size, fh });
      return get(p).data.subarray(offset, offset + size);
    },
    write(p, { data, offset, fh }) {
      note("write", { p, offset, fh, data: data.toString() });
      return ops.write(p, data, offset);
    },
    create(p, { mode, flags }) {
      note("create", { p, mode, flags });
      files.set(p, { data: Buffer.alloc(0), mode, xattrs: new Map() });
      return 8;
    },
    truncate(p, { size, fh }) {
      note("truncate", { p, size, fh });
      ops.truncate(p, size);
    },
    mkdir(p, { mode }) {
      note("mkdir", { p, mode });
      dirs.add(p);
    },
    rename(p, { newPath }) {
      note("rename", { p, newPath });
      ops.rename(p, newPath);
    },
    symlink(p, { target }) {
      note("symlink", { p, target });
      files.set(p, { data: Buffer.alloc(0), mode: 0o777, target, xattrs: new Map() });
    },
    readlink: (p) => get(p).target!,
    unlink(p) {
      get(p);
      files.delete(p);
    },
    chmod(p, { mode }) {
      note("chmod", { p, mode });
      if (!dirs.has(p)) get(p).mode = mode;
    },
    utimens(p, { mtime }) {
      note("utimens", { p, mtime: mtime?.getTime() });
    },
    setxattr(p, { name, value, flags }) {
      note("setxattr", { p, name, value: value.toString(), flags });
      get(p).xattrs.set(name, Buffer.from(value));
    },
    getxattr: (p, { name }) => get(p).xattrs.get(name) ?? null,
    listxattr: (p) => [...get(p).xattrs.keys()],
    release(p, { fh }) {
      note("release", { p, fh });
    },
  });
  const positional: LegacyPathHandlers = {
    getattr: (p) => stat(p),
    readdir: (p) => list(p),
    open: (p) => (get(p), 7),
    read: (p, offset, size) => get(p).data.subarray(offset, offset + size),
    write(p, data, offset, fh) {
      note("write", { p, offset, fh, data: data.toString() });
      return ops.write(p, data, offset);
    },
    create(p, mode) {
      files.set(p, { data: Buffer.alloc(0), mode, xattrs: new Map() });
      return 8;
    },
    truncate: (p, size) => ops.truncate(p, size),
    rename(from, to) {
      note("rename", { p: from, newPath: to });
      ops.rename(from, to);
    },
  };
  return { named, positional, calls };
}

for (const transport of TRANSPORTS) {
  describe(`path handlers in the named-arguments order over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("defineFs(): every handler gets (path, { … }, ctx) through a mount, driven by a separate process", async () => {
      const mnt = makeMountpoint();
      const { named, calls } = mapFs();
      const m = await mount(mnt, named, { transport, attrTtl: 0, entryTtl: 0 });
      try {
        noteConnection(mnt);
        await shOk('printf hello > "$1/f" && printf XY | dd of="$1/f" bs=2 seek=3 oflag=seek_bytes conv=notrunc status=none', [mnt]);
        expect(await shOk('cat "$1/f"', [mnt])).toBe("helXY");
        await shOk('truncate -s 2 "$1/f" && mkdir -m 700 "$1/d" && mv "$1/f" "$1/d/g" && ln -s somewhere "$1/s"', [mnt]);
        await shOk('chmod 640 "$1/d/g" && touch -m -d @1700000000 "$1/d/g" && setfattr -n user.k -v val "$1/d/g"', [mnt]);
        expect(await shOk('cat "$1/d/g"; echo; readlink "$1/s"; stat -c %a "$1/d/g"; getfattr --only-values -n user.k "$1/d/g"', [mnt])).toBe("he\nsomewhere\n640\nval");
        expect(calls.create).toEqual([{ p: "/f", mode: 0o644, flags: expect.any(Number) }]);
        expect(calls.write).toContainEqual({ p: "/f", offset: 0, fh: 8, data: "hello" });
        expect(calls.write).toContainEqual({ p: "/f", offset: 3, fh: 7, data: "XY" });
        expect(calls.read).toContainEqual({ p: "/f", offset: 0, size: expect.any(Number), fh: 7 });
        expect(calls.truncate).toContainEqual({ p: "/f", size: 2, fh: 7 }); // truncate(1) opens the file and ftruncates it
        expect(calls.mkdir).toEqual([{ p: "/d", mode: 0o700 }]);
        expect(calls.rename).toEqual([{ p: "/f", newPath: "/d/g" }]);
        expect(calls.symlink).toEqual([{ p: "/s", target: "somewhere" }]);
        expect(calls.chmod).toContainEqual({ p: "/d/g", mode: 0o640 });
        expect(calls.utimens).toContainEqual({ p: "/d/g", mtime: 1700000000000 });
        expect(calls.setxattr).toEqual([{ p: "/d/g", name: "user.k", value: "val", flags: 0 }]);
        expect(calls.release!.length).toBeGreaterThan(0);
        expect((calls.open as { flags: number }[]).some((o) => (o.flags & 3) === 1)).toBe(true); // dd opened O_WRONLY
      } finally {
        await m.unmount();
      }
    });

    fuseTest("the positional order (deprecated) still works through a mount and warns once", async () => {
      const mnt = makeMountpoint();
      const { positional, calls } = mapFs();
      const logged: string[] = [];
      const saved = { ...deprecation };
      deprecation.warned = false;
      deprecation.log = (msg) => logged.push(msg);
      let m: Awaited<ReturnType<typeof mount>> | undefined;
      try {
        m = await mount(mnt, positional, { transport });
        paths(mapFs().positional); // a second positional object: no second warning
        noteConnection(mnt);
        await shOk('printf abc > "$1/f" && mv "$1/f" "$1/g"', [mnt]);
        expect(await shOk('cat "$1/g"', [mnt])).toBe("abc");
        expect(calls.write).toEqual([{ p: "/f", offset: 0, fh: 8, data: "abc" }]);
        expect(calls.rename).toEqual([{ p: "/f", newPath: "/g" }]);
        expect(logged.length).toBe(1);
        expect(logged[0]).toContain("deprecated");
        expect(logged[0]).toContain("read(path, offset, size, fh, ctx) → read(path, { offset, size, fh }, ctx)");
        expect(logged[0]).toContain("defineFs");
      } finally {
        deprecation.warned = saved.warned;
        deprecation.log = saved.log;
        await m?.unmount();
      }
    });
  });
}
