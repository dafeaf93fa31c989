// Metadata and the less common operations: links, attributes, times, truncate, xattrs, statfs,
// special files, fallocate, SEEK_DATA/SEEK_HOLE, copy_file_range.
import { describe, expect } from "bun:test";
import {
  TRANSPORTS,
  cleanupAfterEach,
  dropCaches,
  fmt,
  fsop,
  fsopOk,
  fuseTest,
  run,
  sharedDaemon,
  shOk,
  transportHooks,
} from "../helpers/index.ts";

const UTC = { env: { TZ: "UTC", LC_ALL: "C" } };

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport]);
    const fresh = async (name: string) => {
      const d = `${s.mnt}/meta-${name}`;
      await shOk('rm -rf "$1" && mkdir "$1"', [d]);
      return d;
    };

    fuseTest("symlink and readlink (relative, absolute, dangling, long target)", async () => {
      const d = await fresh("symlink");
      await shOk('echo content > "$1/target" && ln -s target "$1/rel" && ln -s "$1/target" "$1/abs" && ln -s nowhere "$1/dangling"', [d]);
      expect((await shOk('readlink "$1/rel"', [d])).trim()).toBe("target");
      expect((await shOk('readlink "$1/abs"', [d])).trim()).toBe(`${d}/target`);
      expect((await shOk('stat -c %F "$1/rel"', [d])).trim()).toBe("symbolic link");
      expect(Number((await shOk('stat -c %s "$1/rel"', [d])).trim())).toBe("target".length);
      expect(await shOk('cat "$1/rel" "$1/abs"', [d])).toBe("content\ncontent\n");
      expect((await fsop("stat", `${d}/dangling`)).code).toBe("ENOENT");
      expect((await fsopOk("lstat", `${d}/dangling`)).type).toBe(0o120000);
      const long = "L/".repeat(1000) + "end"; // 2003 bytes
      await fsopOk("symlink", long, `${d}/long`);
      await dropCaches();
      expect((await fsopOk("readlink", `${d}/long`)).target).toBe(long);
      expect((await shOk('readlink "$1/rel"', [d])).trim()).toBe("target");
      // symlink loop
      await shOk('ln -s loop2 "$1/loop1" && ln -s loop1 "$1/loop2"', [d]);
      expect((await fsop("stat", `${d}/loop1`)).code).toBe("ELOOP");
    });

    fuseTest("hard links share the inode; nlink follows link/unlink", async () => {
      const d = await fresh("hardlink");
      await shOk('echo one > "$1/a" && ln "$1/a" "$1/b" && ln "$1/a" "$1/sub-c" ', [d]);
      expect((await shOk('stat -c "%h %i" "$1/a"', [d])).trim()).toBe((await shOk('stat -c "%h %i" "$1/b"', [d])).trim());
      expect(Number((await shOk('stat -c %h "$1/a"', [d])).trim())).toBe(3);
      await shOk('echo two >> "$1/b"', [d]);
      expect(await shOk('cat "$1/a"', [d])).toBe("one\ntwo\n");
      await shOk('rm "$1/a"', [d]);
      expect(Number((await shOk('stat -c %h "$1/b"', [d])).trim())).toBe(2);
      await dropCaches();
      expect(Number((await shOk('stat -c %h "$1/b"', [d])).trim())).toBe(2);
      expect(await shOk('cat "$1/sub-c"', [d])).toBe("one\ntwo\n");
      await shOk('rm "$1/sub-c"', [d]);
      expect(Number((await shOk('stat -c %h "$1/b"', [d])).trim())).toBe(1);
      // a hard link to a directory is refused
      await shOk('mkdir "$1/dir"', [d]);
      expect((await fsop("link", `${d}/dir`, `${d}/dirlink`)).code).toBe("EPERM");
    });

    fuseTest("an unlinked file stays readable through an open descriptor", async () => {
      const d = await fresh("orphan");
      await shOk('echo still-here > "$1/f"', [d]);
      const out = await shOk('exec 3<"$1/f"; rm "$1/f"; cat <&3; [ ! -e "$1/f" ] && echo gone', [d]);
      expect(out).toBe("still-here\ngone\n");
    });

    fuseTest("chmod and chown persist (also after the kernel forgets the inode)", async () => {
      const d = await fresh("chmod");
      await shOk('touch "$1/f" && mkdir "$1/dir" && chmod 640 "$1/f" && chmod 2751 "$1/dir" && chown 1234:5678 "$1/f"', [d]);
      expect((await shOk('stat -c "%a %u %g" "$1/f"', [d])).trim()).toBe("640 1234 5678");
      expect((await shOk('stat -c %a "$1/dir"', [d])).trim()).toBe("2751");
      await dropCaches();
      expect((await shOk('stat -c "%a %u %g" "$1/f"', [d])).trim()).toBe("640 1234 5678");
      expect((await shOk('stat -c "%a %F" "$1/dir"', [d])).trim()).toBe("2751 directory");
      await shOk('chown :42 "$1/f" && chmod u+x,o-r "$1/f"', [d]);
      expect((await shOk('stat -c "%a %u %g" "$1/f"', [d])).trim()).toBe("740 1234 42");
    });

    fuseTest("touch -d sets atime/mtime with nanosecond precision", async () => {
      const d = await fresh("times");
      await shOk('touch "$1/f"', [d]);
      await shOk('touch -m -d "2001-02-03 04:05:06.123456789" "$1/f"', [d], UTC);
      await shOk('touch -a -d "1999-12-31 23:59:59.000000001" "$1/f"', [d], UTC);
      expect((await shOk('stat -c %y "$1/f"', [d], UTC)).trim()).toBe("2001-02-03 04:05:06.123456789 +0000");
      expect((await shOk('stat -c %x "$1/f"', [d], UTC)).trim()).toBe("1999-12-31 23:59:59.000000001 +0000");
      await dropCaches();
      expect((await shOk('stat -c %y "$1/f"', [d], UTC)).trim()).toBe("2001-02-03 04:05:06.123456789 +0000");
      expect((await shOk('stat -c %x "$1/f"', [d], UTC)).trim()).toBe("1999-12-31 23:59:59.000000001 +0000");
      // utimensat with explicit nanoseconds past 2038
      await fsopOk("utime_ns", `${d}/f`, "1000000000000000001", "4102444800999999999");
      await dropCaches();
      const st = await fsopOk("stat", `${d}/f`);
      expect(st.atime_ns).toBe("1000000000000000001");
      expect(st.mtime_ns).toBe("4102444800999999999");
      // UTIME_NOW: `touch` without -d moves mtime to the present
      const before = Date.now() / 1000 - 60;
      await shOk('touch "$1/f"', [d]);
      const now = Number((await shOk('stat -c %Y "$1/f"', [d])).trim());
      expect(now).toBeGreaterThan(before);
    });

    fuseTest("utimensat before 1970 (negative seconds) round-trips", async () => {
      const d = await fresh("times-neg");
      await shOk('touch "$1/f"', [d]);
      await fsopOk("utime_ns", `${d}/f`, "-1000000001", "-86400000000000");
      await dropCaches();
      const st = await fsopOk("stat", `${d}/f`);
      expect(st.atime_ns).toBe("-1000000001");
      expect(st.mtime_ns).toBe("-86400000000000");
      expect((await shOk('stat -c %y "$1/f"', [d], UTC)).trim()).toBe("1969-12-31 00:00:00.000000000 +0000");
    });

    fuseTest("truncate up (zero-filled) and down, via truncate -s", async () => {
      const d = await fresh("truncate");
      const f = `${d}/f`;
      const orig = await fsopOk("pwrite_pattern", f, 0, 10_000, "t");
      await shOk('truncate -s 100000 "$1"', [f]);
      expect((await fsopOk("stat", f)).size).toBe(100_000);
      expect((await fsopOk("pread_sha", f, 0, 10_000)).sha256).toBe(orig.sha256);
      expect((await fsopOk("pread_sha", f, 10_000, 90_000)).allzero).toBe(true);
      await shOk('truncate -s 5 "$1"', [f]);
      await dropCaches();
      expect((await fsopOk("stat", f)).size).toBe(5);
      expect((await fsopOk("pread_sha", f, 0, 5)).sha256).toBe((await fsopOk("pattern_sha", 5, "t")).sha256);
      // grow again: the old bytes past 5 must not come back
      await shOk('truncate -s 20000 "$1"', [f]);
      await dropCaches();
      const tail = await fsopOk("pread_sha", f, 5, 19_995);
      expect(tail.size).toBe(19_995);
      expect(tail.allzero).toBe(true);
      await shOk('truncate -s 0 "$1"', [f]);
      expect(Number((await shOk('stat -c %s "$1"', [f])).trim())).toBe(0);
      expect(await shOk('cat "$1"', [f])).toBe("");
    });

    fuseTest("xattrs: set, get, list, replace/create flags, size probe, ERANGE, remove, ENODATA", async () => {
      const d = await fresh("xattr");
      const f = `${d}/f`;
      await shOk('touch "$1" && setfattr -n user.color -v blue "$1" && setfattr -n user.empty "$1"', [f]);
      expect(await shOk('getfattr --only-values -n user.color "$1"', [f])).toBe("blue");
      expect((await fsopOk("getxattr", f, "user.empty")).size).toBe(0);
      const big = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) & 0xff)).toString("hex");
      await fsopOk("setxattr_hex", f, "user.big", big);
      expect((await fsopOk("getxattr", f, "user.big")).hex).toBe(big);
      expect((await fsopOk("getxattr_size", f, "user.big", 0)).size).toBe(3000);
      expect((await fsop("getxattr_size", f, "user.big", 10)).code).toBe("ERANGE");
      expect((await fsopOk("listxattr", f)).names).toEqual(["user.big", "user.color", "user.empty"]);
      const dump = await shOk('getfattr -d "$1"', [f]);
      expect(dump).toContain('user.color="blue"');
      // flags
      expect((await fsop("setxattr", f, "user.color", "red", "create")).code).toBe("EEXIST");
      expect((await fsop("setxattr", f, "user.nope", "x", "replace")).code).toBe("ENODATA");
      await fsopOk("setxattr", f, "user.color", "red", "replace");
      await dropCaches();
      expect((await fsopOk("getxattr", f, "user.color")).value).toBe("red");
      // removal
      await shOk('setfattr -x user.color "$1"', [f]);
      expect((await fsop("getxattr", f, "user.color")).code).toBe("ENODATA");
      expect((await fsop("removexattr", f, "user.color")).code).toBe("ENODATA");
      const g = await run(["getfattr", "-n", "user.color", f]);
      expect(g.code).not.toBe(0);
      expect(g.stderr).toContain("No such attribute");
      expect((await fsopOk("listxattr", f)).names).toEqual(["user.big", "user.empty"]);
      // on a directory too
      await shOk('setfattr -n user.dirattr -v 1 "$1"', [d]);
      expect((await fsopOk("getxattr", d, "user.dirattr")).value).toBe("1");
      expect((await fsop("getxattr", `${d}/missing`, "user.x")).code).toBe("ENOENT");
    });

    fuseTest("statfs: stat -f, df and statvfs agree and are sane", async () => {
      const sv = await fsopOk("statvfs", s.mnt);
      expect(sv.f_bsize as number).toBeGreaterThan(0);
      expect(sv.f_blocks as number).toBeGreaterThanOrEqual(sv.f_bfree as number);
      expect(sv.f_bfree as number).toBeGreaterThanOrEqual(sv.f_bavail as number);
      expect(sv.f_files as number).toBeGreaterThanOrEqual(sv.f_ffree as number);
      expect(sv.f_namemax).toBe(255);
      const sf = (await shOk('stat -f -c "%b %f %a %l" "$1"', [s.mnt])).trim().split(" ").map(Number);
      expect(sf).toEqual([sv.f_blocks, sv.f_bfree, sv.f_bavail, sv.f_namemax] as number[]);
      const df = await run(["df", "-P", s.mnt]);
      expect(df.code, fmt(df)).toBe(0);
      expect(df.stdout).toContain(s.mnt);
      // statfs of a subdirectory answers too
      const d = await fresh("statfs");
      expect((await fsopOk("statvfs", d)).f_namemax).toBe(255);
    });

    fuseTest("mkfifo and mknod (character and block devices)", async () => {
      const d = await fresh("mknod");
      await shOk('mkfifo "$1/fifo" && mknod "$1/null" c 1 3 && mknod "$1/blk" b 7 0', [d]);
      expect((await shOk('stat -c %F "$1/fifo"', [d])).trim()).toBe("fifo");
      expect((await shOk('stat -c "%F %t %T" "$1/null"', [d])).trim()).toBe("character special file 1 3");
      expect((await shOk('stat -c "%F %t %T" "$1/blk"', [d])).trim()).toBe("block special file 7 0");
      await dropCaches();
      const st = await fsopOk("lstat", `${d}/null`);
      expect([st.type, st.rdev_major, st.rdev_minor]).toEqual([0o020000, 1, 3]);
      expect((await fsopOk("lstat", `${d}/fifo`)).type).toBe(0o010000);
      // the FIFO works as a pipe between two processes
      expect(await shOk('echo through-fifo > "$1/fifo" & cat "$1/fifo"; wait', [d])).toBe("through-fifo\n");
      // mknod of a regular file
      await fsopOk("mknod", `${d}/regular`, "f");
      expect((await fsopOk("lstat", `${d}/regular`)).type).toBe(0o100000);
    });

    fuseTest("fallocate: allocate, keep-size, punch-hole", async () => {
      const d = await fresh("fallocate");
      const f = `${d}/f`;
      const r = await run(["fallocate", "-l", "1M", f]);
      expect(r.code, fmt(r)).toBe(0);
      expect((await fsopOk("stat", f)).size).toBe(1 << 20);
      expect((await fsopOk("pread_sha", f, 0, 1 << 20)).allzero).toBe(true);
      await shOk('fallocate -n -l 2M "$1"', [f]);
      expect((await fsopOk("stat", f)).size).toBe(1 << 20);
      const g = `${d}/g`;
      await fsopOk("pwrite_pattern", g, 0, 65_536, "p");
      const p = await run(["fallocate", "--punch-hole", "-o", "4096", "-l", "8192", g]);
      expect(p.code, fmt(p)).toBe(0);
      await dropCaches();
      expect((await fsopOk("stat", g)).size).toBe(65_536);
      expect((await fsopOk("pread_sha", g, 4096, 8192)).allzero).toBe(true);
      const whole = await fsopOk("pread_sha", g, 0, 4096);
      expect(whole.sha256).toBe((await fsopOk("pattern_sha", 4096, "p")).sha256);
      const after = await fsopOk("pread_sha", g, 12_288, 65_536 - 12_288);
      expect(after.allzero).toBe(false);
      expect(after.size).toBe(65_536 - 12_288);
    });

    fuseTest("SEEK_DATA / SEEK_HOLE on a sparse file (python os.lseek)", async () => {
      const d = await fresh("seek");
      const f = `${d}/sparse`;
      const MiB = 1 << 20;
      await fsopOk("pwrite_pattern", f, 0, 4096, "s0");
      await fsopOk("pwrite_pattern", f, 4 * MiB, 4096, "s1");
      const size = 4 * MiB + 4096;
      expect((await fsopOk("stat", f)).size).toBe(size);
      const seek = async (off: number, whence: "data" | "hole") => {
        const r = await fsop("seek", f, off, whence);
        return r.ok ? (r.offset as number) : (r.code as string);
      };
      expect(await seek(0, "data")).toBe(0);
      const hole = await seek(0, "hole");
      expect(typeof hole).toBe("number");
      expect(hole as number).toBeGreaterThanOrEqual(4096);
      expect(hole as number).toBeLessThanOrEqual(4 * MiB); // a real hole, not just EOF
      const data2 = await seek(hole as number, "data");
      expect(data2 as number).toBeGreaterThan(hole as number);
      expect(data2 as number).toBeLessThanOrEqual(4 * MiB);
      expect(await seek(4 * MiB, "data")).toBe(4 * MiB);
      const endHole = await seek(4 * MiB, "hole");
      expect(endHole as number).toBeGreaterThanOrEqual(size);
      expect(await seek(size, "data")).toBe("ENXIO");
      expect(await seek(size + 100, "hole")).toBe("ENXIO");
      // the hole reads as zeros, the data is intact
      expect((await fsopOk("pread_sha", f, 4096, 4 * MiB - 4096)).allzero).toBe(true);
      expect((await fsopOk("pread_sha", f, 4 * MiB, 4096)).sha256).toBe((await fsopOk("pattern_sha", 4096, "s1")).sha256);
    });

    fuseTest("copy_file_range (python os.copy_file_range) whole file and at offsets", async () => {
      const d = await fresh("cfr");
      const src = `${d}/src`;
      const w = await fsopOk("pwrite_pattern", src, 0, 300_000, "c");
      const c = await fsopOk("copy_file_range", src, `${d}/dst`, 300_000);
      expect(c.copied).toBe(300_000);
      await dropCaches();
      expect((await fsopOk("pread_sha", `${d}/dst`, 0, 300_000)).sha256).toBe(w.sha256);
      expect((await fsopOk("stat", `${d}/dst`)).size).toBe(300_000);
      // 100000 bytes from offset 50000 to offset 4096 of a new file
      const c2 = await fsopOk("copy_file_range", src, `${d}/dst2`, 100_000, 50_000, 4096);
      expect(c2.copied).toBe(100_000);
      await dropCaches();
      expect((await fsopOk("stat", `${d}/dst2`)).size).toBe(104_096);
      expect((await fsopOk("pread_sha", `${d}/dst2`, 0, 4096)).allzero).toBe(true);
      const mid = await fsopOk("pread_sha", `${d}/dst2`, 4096, 100_000);
      const ref = await fsopOk("pread_sha", src, 50_000, 100_000);
      expect(mid.sha256).toBe(ref.sha256);
      // copying past EOF copies nothing
      expect((await fsopOk("copy_file_range", src, `${d}/dst3`, 1000, 300_000, 0)).copied).toBe(0);
    });
  });
}
