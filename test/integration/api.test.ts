// The library API used in-process: mount(), Mount.unmount/closed/stats, a filesystem written
// from scratch against lib/fs/types.ts. This process serves the mount, so it never touches the
// mount itself: every access is a spawned child.
import { describe, expect } from "bun:test";
import { mount, memfs, FuseError, S_IFDIR, S_IFREG } from "../../lib/index.ts";
import type { Attr, DirFiller, InodeFS, RequestContext } from "../../lib/fs/types.ts";
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
