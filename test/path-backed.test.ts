// Unit tests of backed() in the path layer (lib/path/backing.ts, lib/path/pathfs.ts) without a
// mount: the pure flag logic, the descriptor checks on real descriptors, and the InodeFS
// methods called the way the session calls them. What the shim would do with the reply's
// backingFd (pread/pwrite) is done here with readSync/writeSync on that descriptor.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, fstatSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { errnoOf, FuseError } from "../lib/protocol/errors.ts";
import type { Entry, OpenReply } from "../lib/protocol/structs.ts";
import type { DirFiller, InitInfo, RequestContext } from "../lib/session/filesystem.ts";
import {
  accessProblem, backingOpenFlags, checkDescriptor, O_APPEND, O_CLOEXEC, O_CREAT, O_PATH, O_RDONLY, O_RDWR, O_SYNC, O_TRUNC, O_WRONLY, parseFdinfoFlags,
} from "../lib/path/backing.ts";
import { paths } from "../lib/path/pathfs.ts";
import { backed, isBacked, type PathHandlers } from "../lib/path/types.ts";
import { tree, file } from "../lib/tree.ts";
import * as api from "../lib/index.ts";

const O_DSYNC = 0o10000;
const O_DIRECTORY = 0o200000;
const tmp = mkdtempSync("/tmp/fuse-uring-path-backed-");
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const fresh = (content?: string) => {
  const p = join(tmp, `f${++n}`);
  if (content !== undefined) writeFileSync(p, content);
  return p;
};

function fdFlags(fd: number): number {
  return parseFdinfoFlags(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))!;
}

function isOpen(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}

interface Calls {
  backingRead: [number, number, number][];
  backingWrite: [number, number, number][];
}

function ctx(calls?: Calls): RequestContext {
  return {
    uid: 0, gid: 0, pid: 1, unique: 1n, signal: new AbortController().signal,
    backingRead: (fd, off, size) => (calls?.backingRead.push([fd, off, size]), Promise.resolve(size)),
    backingWrite: (fd, off, size) => (calls?.backingWrite.push([fd, off, size]), Promise.resolve(size)),
  };
}

const info = (granted: string[] = []): InitInfo => ({
  kernelMinor: 45, offered: 0n, granted: 0n, grantedNames: granted, maxWrite: 1 << 20, maxReadahead: 1 << 20, transport: "classic",
  backingOpen: () => 0, backingClose: () => {},
});

class Filler implements DirFiller {
  entries: { name: string; entry: Entry }[] = [];
  constructor(readonly plus: boolean) {}
  add(name: string, _off: number, entry: Entry): boolean {
    this.entries.push({ name, entry });
    return true;
  }
}

async function errno(p: Promise<unknown>): Promise<number | string> {
  try {
    await p;
    return "no error";
  } catch (e) {
    return errnoOf(e) ?? String(e);
  }
}

/** Path handlers over one file `real` at "/f" (size from getattr: `size`, stale on purpose). */
function oneFile(open: PathHandlers["open"], extra: Partial<PathHandlers> = {}) {
  const releases: unknown[] = [];
  const h: PathHandlers = {
    getattr: (p) => (p === "/" ? { type: "dir" } : p === "/f" ? { mode: 0o100644, size: 7 } : null),
    readdir: () => [{ name: "f", mode: 0o100644, size: 7 }],
    open,
    release: (_p, fh) => void releases.push(fh),
    ...extra,
  };
  return { fs: paths(h), releases };
}

describe("backed(): the pure parts", () => {
  test("open flags: the caller's access mode, O_APPEND/O_TRUNC/O_SYNC kept, O_CREAT from create, always O_CLOEXEC", () => {
    const noWb = { create: false, writebackCache: false };
    expect(backingOpenFlags(O_RDONLY, noWb)).toBe(O_RDONLY | O_CLOEXEC);
    expect(backingOpenFlags(O_WRONLY | O_APPEND | O_TRUNC | O_SYNC | 0o100000 /* O_LARGEFILE */ | O_DIRECTORY, noWb)).toBe(O_WRONLY | O_APPEND | O_TRUNC | O_SYNC | O_CLOEXEC);
    expect(backingOpenFlags(O_RDWR | O_DSYNC, noWb)).toBe(O_RDWR | O_DSYNC | O_CLOEXEC);
    expect(backingOpenFlags(O_RDWR | O_CREAT, noWb)).toBe(O_RDWR | O_CLOEXEC); // O_CREAT only from create
    expect(backingOpenFlags(O_WRONLY, { create: true, writebackCache: false })).toBe(O_WRONLY | O_CREAT | O_CLOEXEC);
  });

  test("--writeback-cache: writers open read-write, never O_APPEND; readers stay read-only", () => {
    const wb = { create: false, writebackCache: true };
    expect(backingOpenFlags(O_WRONLY | O_APPEND, wb)).toBe(O_RDWR | O_CLOEXEC);
    expect(backingOpenFlags(O_RDWR | O_APPEND | O_TRUNC, wb)).toBe(O_RDWR | O_TRUNC | O_CLOEXEC);
    expect(backingOpenFlags(O_RDONLY, wb)).toBe(O_RDONLY | O_CLOEXEC);
  });

  test("fdinfo flags are octal", () => {
    expect(parseFdinfoFlags("pos:\t0\nflags:\t02102002\nmnt_id:\t27\n")).toBe(0o2102002);
    expect(parseFdinfoFlags("pos:\t0\n")).toBeNull();
  });

  test("access checks: what the caller asked for must be possible through the descriptor", () => {
    expect(accessProblem(O_RDONLY, O_RDONLY, false)).toBeNull();
    expect(accessProblem(O_RDWR, O_WRONLY, false)).toBeNull();
    expect(accessProblem(O_RDWR, O_RDONLY, false)).toBeNull();
    expect(accessProblem(O_RDONLY, O_WRONLY, false)).toContain("read-only");
    expect(accessProblem(O_RDONLY, O_RDWR, false)).toContain("read-only");
    expect(accessProblem(O_WRONLY, O_RDONLY, false)).toContain("write-only");
    expect(accessProblem(O_WRONLY, O_RDWR, false)).toContain("write-only");
    expect(accessProblem(O_PATH | O_RDONLY, O_RDONLY, false)).toContain("O_PATH");
    expect(accessProblem(O_WRONLY, O_WRONLY, false)).toBeNull();
    expect(accessProblem(O_WRONLY, O_WRONLY, true)).toContain("writeback-cache");
    expect(accessProblem(O_RDWR | O_APPEND, O_WRONLY, true)).toContain("O_APPEND");
    expect(accessProblem(O_RDWR | O_APPEND, O_WRONLY, false)).toBeNull();
    expect(accessProblem(O_RDONLY | O_APPEND, O_RDONLY, true)).toBeNull(); // readers are not written through
  });

  test("checkDescriptor on real descriptors: not open, O_PATH, directory, access", () => {
    const p = fresh("x");
    const ro = openSync(p, O_RDONLY);
    const rw = openSync(p, O_RDWR);
    const opath = openSync(p, O_PATH);
    const dir = openSync(tmp, O_RDONLY | O_DIRECTORY);
    const gone = openSync(p, O_RDONLY);
    closeSync(gone);
    try {
      expect(checkDescriptor(ro, O_RDONLY, false)).toBeNull();
      expect(checkDescriptor(rw, O_WRONLY, false)).toBeNull();
      expect(checkDescriptor(ro, O_WRONLY, false)?.why).toContain("read-only");
      expect(checkDescriptor(opath, O_RDONLY, false)?.why).toContain("O_PATH");
      expect(checkDescriptor(dir, O_RDONLY, false)).toEqual({ why: "it is a directory", open: true });
      expect(checkDescriptor(gone, O_RDONLY, false)).toEqual({ why: "it is not an open file descriptor", open: false });
    } finally {
      for (const fd of [ro, rw, opath, dir]) closeSync(fd);
    }
  });

  test("backed() validates its source and is exported from the package", () => {
    expect(() => backed(-1)).toThrow(TypeError);
    expect(() => backed(1.5)).toThrow(TypeError);
    expect(() => backed("")).toThrow(TypeError);
    expect(() => backed(new Blob(["x"]))).toThrow(TypeError); // a Blob with no path
    expect(() => backed({} as unknown as number)).toThrow(TypeError);
    const b = backed(Bun.file("/etc/hostname"), { handle: 5, keepCache: true });
    expect(isBacked(b)).toBe(true);
    expect(b.handle).toBe(5);
    expect(isBacked({ source: 3 })).toBe(false);
    expect(api.backed).toBe(backed);
  });
});

describe("backed() through PathFS", () => {
  test("path: opened with the caller's flags, the reply names the descriptor, closed after the handler's release", async () => {
    const p = fresh("content");
    const { fs, releases } = oneFile(() => backed(p, { handle: "mine", directIo: true }));
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_WRONLY | O_APPEND)) as OpenReply;
    const fd = o.backingFd!;
    expect(fd).toBeGreaterThan(2);
    expect(o.directIo).toBe(true);
    expect(fdFlags(fd) & (3 | O_APPEND | O_CLOEXEC)).toBe(O_WRONLY | O_APPEND | O_CLOEXEC);
    writeSync(fd, "+more"); // the shim's pwrite; O_APPEND puts it at the end
    expect(readFileSync(p, "utf8")).toBe("content+more");
    await fs.release(ctx(), e.ino, o.fh, 0);
    expect(releases).toEqual(["mine"]);
    expect(isOpen(fd)).toBe(false);
  });

  test("Bun.file: the same as a path; with --writeback-cache writers get O_RDWR without O_APPEND", async () => {
    const p = fresh("abc");
    const { fs } = oneFile(() => backed(Bun.file(p)));
    await fs.init(info(["WRITEBACK_CACHE"]));
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_WRONLY | O_APPEND)) as OpenReply;
    expect(fdFlags(o.backingFd!) & (3 | O_APPEND)).toBe(O_RDWR);
    await fs.release(ctx(), e.ino, o.fh, 0);
    expect(isOpen(o.backingFd!)).toBe(false);
  });

  test("a descriptor stays the caller's; { close: true } hands it over (closed after release)", async () => {
    const p = fresh("abc");
    const mine = openSync(p, O_RDONLY);
    const given = openSync(p, O_RDONLY);
    let which = mine;
    const { fs, releases } = oneFile(() => (which === mine ? backed(mine, { handle: 1 }) : backed(given, { handle: 2, close: true })));
    const e = await fs.lookup(ctx(), 1, "f");
    const o1 = (await fs.open(ctx(), e.ino, O_RDONLY)) as OpenReply;
    expect(o1.backingFd).toBe(mine);
    await fs.release(ctx(), e.ino, o1.fh, 0);
    expect(isOpen(mine)).toBe(true);
    closeSync(mine);
    which = given;
    const o2 = (await fs.open(ctx(), e.ino, O_RDONLY)) as OpenReply;
    expect(o2.backingFd).toBe(given);
    await fs.release(ctx(), e.ino, o2.fh, 0);
    expect(releases).toEqual([1, 2]);
    expect(isOpen(given)).toBe(false);
  });

  test("create: the path is created with O_CREAT and the mode (umask applied) before the entry's getattr", async () => {
    const dir = join(tmp, `d${++n}`);
    mkdirSync(dir);
    const seen: string[] = [];
    const fs = paths({
      getattr: (p) => {
        if (p === "/") return { type: "dir" };
        try {
          return statSync(join(dir, p));
        } catch {
          return null;
        }
      },
      create: (p, mode) => (seen.push(`${p} ${mode.toString(8)}`), backed(join(dir, p))),
    });
    // The daemon's own umask (022 here) must not strip what the caller asked for.
    const old = process.umask(0o022);
    try {
      const c = await fs.create(ctx(), 1, "new", 0o100666, 0, O_WRONLY | O_CREAT);
      expect(seen).toEqual(["/new 666"]);
      expect(c.entry.attr.mode).toBe(0o100666);
      expect(statSync(join(dir, "new")).mode & 0o777).toBe(0o666);
      const o = c.open as OpenReply;
      expect(fdFlags(o.backingFd!) & 3).toBe(O_WRONLY);
      await fs.release(ctx(), c.entry.ino, o.fh, 0);
      expect(isOpen(o.backingFd!)).toBe(false);
      // An existing file (the kernel had a stale negative entry): opened, its mode untouched.
      const c2 = await fs.create(ctx(), 1, "new", 0o100600, 0o022, O_WRONLY | O_CREAT);
      expect(statSync(join(dir, "new")).mode & 0o777).toBe(0o666);
      await fs.release(ctx(), c2.entry.ino, (c2.open as OpenReply).fh, 0);
      // …unless the caller said O_EXCL.
      expect(await errno(fs.create(ctx(), 1, "new", 0o100600, 0, O_WRONLY | O_CREAT | 0o200))).toBe(17);
    } finally {
      process.umask(old);
    }
  });

  test("stat while open reports the descriptor's size and blocks (GETATTR with and without fh, LOOKUP, READDIRPLUS)", async () => {
    const p = fresh("1234567"); // getattr says 7 forever
    const { fs } = oneFile(() => backed(p));
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_RDWR)) as OpenReply;
    writeSync(o.backingFd!, Buffer.alloc(9000, 1), 0, 9000, 0); // a native write
    const blocks = fstatSync(o.backingFd!).blocks;
    expect((await fs.getattr(ctx(), e.ino, undefined)).attr.size).toBe(9000);
    expect((await fs.getattr(ctx(), e.ino, o.fh)).attr.size).toBe(9000);
    expect((await fs.getattr(ctx(), e.ino, undefined)).attr.blocks).toBe(blocks);
    expect((await fs.lookup(ctx(), 1, "f")).attr.size).toBe(9000);
    const dh = fs.opendir(ctx(), 1);
    const plus = new Filler(true);
    await fs.readdir(ctx(), 1, dh, 0, plus);
    expect(plus.entries.find((x) => x.name === "f")!.entry.attr.size).toBe(9000);
    await fs.release(ctx(), e.ino, o.fh, 0);
    expect((await fs.getattr(ctx(), e.ino, undefined)).attr.size).toBe(7); // closed: the handler's answer again
  });

  test("a RELEASE while the handler's getattr is pending: the size was taken when the GETATTR started", async () => {
    const p = fresh("");
    let gate: () => void = () => {};
    let slow = false;
    const { fs } = oneFile(() => backed(p), {
      getattr: async (q) => {
        if (q === "/") return { type: "dir" };
        if (slow) await new Promise<void>((r) => (gate = r));
        return { mode: 0o100644, size: 0 };
      },
    });
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_RDWR)) as OpenReply;
    writeSync(o.backingFd!, "12345", 0);
    slow = true;
    const pending = fs.getattr(ctx(), e.ino, undefined);
    await fs.release(ctx(), e.ino, o.fh, 0);
    gate();
    expect((await pending).attr.size).toBe(5);
  });

  test("truncate without a truncate handler: ftruncate of the descriptor (with fh, and O_TRUNC's SETATTR without fh)", async () => {
    const p = fresh("0123456789");
    const { fs } = oneFile(() => backed(p));
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_RDWR)) as OpenReply;
    expect((await fs.setattr(ctx(), e.ino, { size: 4, fh: o.fh, valid: 0 })).attr.size).toBe(4);
    expect(readFileSync(p, "utf8")).toBe("0123");
    expect((await fs.setattr(ctx(), e.ino, { size: 0, valid: 0 })).attr.size).toBe(0);
    expect(statSync(p).size).toBe(0);
    await fs.release(ctx(), e.ino, o.fh, 0);
    // Nothing open, no truncate handler, no writeFile: refused as before.
    expect(await errno(fs.setattr(ctx(), e.ino, { size: 0, valid: 0 }))).toBe(13);
  });

  test("a truncate handler wins over the layer's ftruncate", async () => {
    const p = fresh("0123456789");
    const calls: [string, number, unknown][] = [];
    const { fs } = oneFile(() => backed(p, { handle: "h" }), { truncate: (q, size, fh) => void calls.push([q, size, fh]) });
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_RDWR)) as OpenReply;
    await fs.setattr(ctx(), e.ino, { size: 2, fh: o.fh, valid: 0 });
    expect(calls).toEqual([["/f", 2, "h"]]);
    expect(statSync(p).size).toBe(10);
    await fs.release(ctx(), e.ino, o.fh, 0);
  });

  test("JS data plane: READ/WRITE go to ctx.backingRead/backingWrite on the descriptor; FSYNC is fsync(2), not the handler", async () => {
    const p = fresh("abc");
    let fsyncs = 0;
    const { fs } = oneFile(() => backed(p), { read: () => "wrong", write: () => 0, fsync: () => void fsyncs++ });
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_RDWR)) as OpenReply;
    const calls: Calls = { backingRead: [], backingWrite: [] };
    expect(await fs.read(ctx(calls), e.ino, o.fh, 10, 4096, new Uint8Array(4096))).toBe(4096);
    expect(await fs.write(ctx(calls), e.ino, o.fh, 7, new Uint8Array(3), 0, 0)).toBe(3);
    expect(calls).toEqual({ backingRead: [[o.backingFd!, 10, 4096]], backingWrite: [[o.backingFd!, 7, 3]] });
    await fs.fsync(ctx(), e.ino, o.fh, false);
    await fs.fsync(ctx(), e.ino, o.fh, true);
    expect(fsyncs).toBe(0);
    await fs.release(ctx(), e.ino, o.fh, 0);
  });

  test("bad descriptors: EIO, one log line naming the path and the reason, release still called, close: true honoured", async () => {
    const p = fresh("x");
    const logs: string[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void logs.push(a.join(" "));
    try {
      const ro = openSync(p, O_RDONLY);
      const { fs, releases } = oneFile(() => backed(ro, { handle: "bad", close: true }));
      const e = await fs.lookup(ctx(), 1, "f");
      expect(await errno(fs.open(ctx(), e.ino, O_WRONLY))).toBe(5);
      expect(releases).toEqual(["bad"]);
      expect(isOpen(ro)).toBe(false); // closed after the release
      expect(logs.length).toBe(1);
      expect(logs[0]).toContain(`"/f"`);
      expect(logs[0]).toContain("read-only");
      // A number that is not open is never closed (it may be someone else's by then).
      const gone = openSync(p, O_RDONLY);
      closeSync(gone);
      const { fs: fs2 } = oneFile(() => backed(gone, { close: true }));
      const e2 = await fs2.lookup(ctx(), 1, "f");
      expect(await errno(fs2.open(ctx(), e2.ino, O_RDONLY))).toBe(5);
      expect(logs[1]).toContain("not an open file descriptor");
      // A path that is a directory: EIO; a missing path: open(2)'s errno, and no log line.
      const { fs: fs3, releases: r3 } = oneFile(() => backed(tmp, { handle: 3 }));
      const e3 = await fs3.lookup(ctx(), 1, "f");
      expect(await errno(fs3.open(ctx(), e3.ino, O_RDONLY))).toBe(5);
      expect(logs[2]).toContain("a directory");
      const { fs: fs4, releases: r4 } = oneFile(() => backed(join(tmp, "missing"), { handle: 4 }));
      const e4 = await fs4.lookup(ctx(), 1, "f");
      expect(await errno(fs4.open(ctx(), e4.ino, O_RDONLY))).toBe(2);
      expect(logs.length).toBe(3);
      expect([r3, r4]).toEqual([[3], [4]]);
    } finally {
      console.error = orig;
    }
  });

  test("without write handlers a writable open is fine when backed, refused (after release) otherwise", async () => {
    const p = fresh("x");
    let back = true;
    const { fs, releases } = oneFile(() => (back ? backed(p) : "plain"));
    const e = await fs.lookup(ctx(), 1, "f");
    const o = (await fs.open(ctx(), e.ino, O_WRONLY)) as OpenReply;
    expect(o.backingFd).toBeGreaterThan(2);
    await fs.release(ctx(), e.ino, o.fh, 0);
    back = false;
    expect(await errno(fs.open(ctx(), e.ino, O_WRONLY))).toBe(13);
    expect(releases).toEqual([undefined, "plain"]);
    // No open handler at all: refused before anything runs, as before.
    const ro = paths({ getattr: (q) => (q === "/" ? { type: "dir" } : { mode: 0o100644 }) });
    const e2 = await ro.lookup(ctx(), 1, "g");
    expect(await errno(ro.open(ctx(), e2.ino, O_WRONLY))).toBe(13);
  });

  test("tree(): Bun.file readers are backed; computed, string and writer opens are not", async () => {
    const p = fresh("on disk\n");
    const fs = tree({
      disk: Bun.file(p),
      rw: file(Bun.file(p), { write: () => {} }),
      text: "text",
      computed: () => "now",
    });
    const open = async (name: string, flags: number) => {
      const e = await fs.lookup(ctx(), 1, name);
      const o = (await fs.open(ctx(), e.ino, flags)) as OpenReply;
      await fs.release(ctx(), e.ino, o.fh, 0);
      return o;
    };
    const disk = await open("disk", O_RDONLY);
    expect(disk.backingFd).toBeGreaterThan(2);
    expect(disk.directIo).toBeFalsy();
    expect(isOpen(disk.backingFd!)).toBe(false);
    const rw = await open("rw", O_RDONLY);
    expect(rw.backingFd).toBeGreaterThan(2);
    expect(rw.directIo).toBe(true);
    expect((await open("rw", O_WRONLY)).backingFd).toBeUndefined(); // the snapshot path: write() gets the content
    expect((await open("text", O_RDONLY)).backingFd).toBeUndefined();
    expect((await open("computed", O_RDONLY)).backingFd).toBeUndefined();
  });

  test("errors from the handler's release do not hide why the open failed", async () => {
    const logs: string[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => void logs.push(a.join(" "));
    try {
      const { fs } = oneFile(() => backed(join(tmp, "missing")), { release: () => { throw new FuseError("EPERM"); } });
      const e = await fs.lookup(ctx(), 1, "f");
      expect(await errno(fs.open(ctx(), e.ino, O_RDONLY))).toBe(2);
      expect(logs.some((l) => l.includes("release") && l.includes("/f"))).toBe(true);
    } finally {
      console.error = orig;
    }
  });
});
