// The passthrough's statx decoder (lib/fs/passthrough/stat.ts) against node:fs's own stat of the
// same files: every Attr field, st_dev in node's encoding, the birth time, times before 1970,
// device numbers, and -errno (not a throw) for a missing name.

import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, fstatSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as stat from "../lib/fs/passthrough/stat.ts";
import { utimensFd } from "../lib/fs/passthrough/libc.ts";

const O_PATH = 0o10000000, O_NOFOLLOW = 0o400000, O_DIRECTORY = 0o200000;
const dir = mkdtempSync("/tmp/fuse-uring-statx-");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NS = 1_000_000_000n;
/** node:fs's view of an O_PATH descriptor as an Attr (floor seconds, nsec in [0, 1e9)). */
function expected(fd: number) {
  const s = fstatSync(fd, { bigint: true });
  const split = (ns: bigint) => {
    let sec = ns / NS, nsec = ns % NS;
    if (nsec < 0n) (nsec += NS), (sec -= 1n);
    return [Number(sec), Number(nsec)] as [number, number];
  };
  const [atime, atimeNsec] = split(s.atimeNs), [mtime, mtimeNsec] = split(s.mtimeNs), [ctime, ctimeNsec] = split(s.ctimeNs);
  return {
    attr: {
      ino: Number(s.ino), mode: Number(s.mode), nlink: Number(s.nlink), uid: Number(s.uid), gid: Number(s.gid), rdev: Number(s.rdev),
      size: Number(s.size), blocks: Number(s.blocks), blksize: Number(s.blksize) || 4096,
      atime, atimeNsec, mtime, mtimeNsec, ctime, ctimeNsec,
    },
    dev: Number(s.dev),
    birth: split(s.birthtimeNs),
  };
}

describe("passthrough statx decoder", () => {
  writeFileSync(join(dir, "f"), "hello world");
  mkdirSync(join(dir, "d"));
  symlinkSync("f", join(dir, "l"));
  writeFileSync(join(dir, "old"), "x");
  // Before 1970, set with nanoseconds (node's utimes cannot): -1.5 s and -86400.25 s.
  const ofd = openSync(join(dir, "old"), O_PATH | O_NOFOLLOW);
  utimensFd(ofd, -2, 500_000_000, -86401, 750_000_000);
  closeSync(ofd);

  for (const [name, path] of [["a file", "f"], ["a directory", "d"], ["a symlink (itself)", "l"], ["a file dated before 1970", "old"], ["/dev/null (rdev 1:3)", "/dev/null"]] as const) {
    test(name, () => {
      const fd = openSync(path.startsWith("/") ? path : join(dir, path), O_PATH | O_NOFOLLOW);
      try {
        expect(stat.statFd(fd)).toBe(0);
        const want = expected(fd);
        expect(stat.attr()).toEqual(want.attr);
        expect([stat.dev(), stat.ino(), stat.mode(), stat.nlink()]).toEqual([want.dev, want.attr.ino, want.attr.mode, want.attr.nlink]);
        // tmpfs and ext4 record a birth time; node reports 0 where there is none.
        expect([stat.btimeSec(), stat.btimeNsec()]).toEqual(want.birth);
      } finally {
        closeSync(fd);
      }
    });
  }

  test("pre-1970 times come out as floor seconds and nsec in [0, 1e9)", () => {
    const fd = openSync(join(dir, "old"), O_PATH | O_NOFOLLOW);
    try {
      expect(stat.statFd(fd)).toBe(0);
      const a = stat.attr();
      expect([a.atime, a.atimeNsec]).toEqual([-2, 500_000_000]);
      expect([a.mtime, a.mtimeNsec]).toEqual([-86401, 750_000_000]);
    } finally {
      closeSync(fd);
    }
  });

  test("statAt: a name in a directory descriptor, without following a symlink; -ENOENT for a missing one", () => {
    const dfd = openSync(dir, O_PATH | O_DIRECTORY);
    try {
      expect(stat.statAt(dfd, "l")).toBe(0);
      expect(stat.mode() & 0o170000).toBe(0o120000);
      expect(stat.statAt(dfd, "f")).toBe(0);
      expect(stat.attr().size).toBe(11);
      expect(stat.statAt(dfd, "missing")).toBe(-2);
      // A non-UTF-8 name: "\uDCFF" stands for the one byte 0xff (protocol/names.ts), not U+00FF.
      expect(stat.statAt(dfd, "\uDCFF")).toBe(-2);
      writeFileSync(Buffer.concat([Buffer.from(dir + "/"), Buffer.from([0xff])]), "raw");
      expect(stat.statAt(dfd, "\uDCFF")).toBe(0);
      expect(stat.attr().size).toBe(3);
      expect(stat.statAt(dfd, "\u00FF")).toBe(-2);
    } finally {
      closeSync(dfd);
    }
  });
});
