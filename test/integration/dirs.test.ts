// Directories: large listings, readdir after unlinks, rename variants, errno cases.
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

const names1000 = Array.from({ length: 1000 }, (_, i) => `entry-${String(i).padStart(4, "0")}-${"x".repeat(i % 40)}`);

/** `ls -f` (unsorted, includes . and ..) in a child; returns the names. */
async function lsF(dir: string): Promise<string[]> {
  const r = await run(["ls", "-f", dir]);
  if (r.code !== 0) throw new Error(fmt(r));
  return r.stdout.split("\n").filter((l) => l !== "");
}

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport]);

    fuseTest(
      "a 1000-entry directory is listed completely, then again after unlinks",
      async () => {
        const dir = `${s.mnt}/big`;
        await shOk('mkdir "$1"', [dir]);
        // One xargs/touch batch creates all names (names via stdin, not the command line).
        const r = await run(["sh", "-c", 'cd "$1" && xargs touch', "sh", dir], { stdin: names1000.join("\n") + "\n", timeoutMs: 60_000 });
        expect(r.code, fmt(r)).toBe(0);

        let listed = await lsF(dir);
        expect(listed.length).toBe(1002);
        expect(new Set(listed).size).toBe(1002); // no duplicates across READDIR continuations
        expect([...listed].sort()).toEqual([".", "..", ...names1000].sort());
        const wc = await shOk('ls -f "$1" | wc -l', [dir]);
        expect(Number(wc.trim())).toBe(1002);

        // Same through READDIRPLUS-heavy `ls -l` and python's os.listdir, after dropping caches.
        await dropCaches();
        const ll = await shOk('ls -la "$1" | tail -n +2 | wc -l', [dir]);
        expect(Number(ll.trim())).toBe(1002);
        expect((await fsopOk("listdir", dir)).names).toEqual([...names1000].sort());

        // Unlink every third entry and list again.
        const gone = names1000.filter((_, i) => i % 3 === 0);
        const kept = names1000.filter((_, i) => i % 3 !== 0);
        const u = await run(["sh", "-c", 'cd "$1" && xargs rm --', "sh", dir], { stdin: gone.join("\n") + "\n", timeoutMs: 60_000 });
        expect(u.code, fmt(u)).toBe(0);
        listed = await lsF(dir);
        expect([...listed].sort()).toEqual([".", "..", ...kept].sort());
        await dropCaches();
        listed = await lsF(dir);
        expect([...listed].sort()).toEqual([".", "..", ...kept].sort());
        for (const g of gone.slice(0, 5)) expect((await fsop("stat", `${dir}/${g}`)).code).toBe("ENOENT");

        // Remove the rest; the directory is empty and removable.
        const u2 = await run(["sh", "-c", 'cd "$1" && xargs rm --', "sh", dir], { stdin: kept.join("\n") + "\n", timeoutMs: 60_000 });
        expect(u2.code, fmt(u2)).toBe(0);
        expect(await lsF(dir)).toEqual(expect.arrayContaining([".", ".."]));
        expect((await lsF(dir)).length).toBe(2);
        await shOk('rmdir "$1"', [dir]);
      },
      180_000,
    );

    fuseTest("directory link counts and nested mkdir -p / rm -r", async () => {
      const dir = `${s.mnt}/tree`;
      await shOk('mkdir -p "$1/a/b/c" "$1/a/d" && touch "$1/a/b/c/f" "$1/a/file"', [dir]);
      expect((await shOk('find "$1" | sort', [dir])).trim().split("\n")).toEqual(
        [dir, `${dir}/a`, `${dir}/a/b`, `${dir}/a/b/c`, `${dir}/a/b/c/f`, `${dir}/a/d`, `${dir}/a/file`].sort(),
      );
      // A directory's nlink = 2 + subdirectories.
      expect(Number((await shOk('stat -c %h "$1/a"', [dir])).trim())).toBe(4);
      await shOk('rm -r "$1/a"', [dir]);
      expect((await fsop("stat", `${dir}/a`)).code).toBe("ENOENT");
      expect((await fsopOk("listdir", dir)).names).toEqual([]);
    });

    describe("rename", () => {
      const fresh = async (name: string) => {
        const d = `${s.mnt}/rename-${name}`;
        await shOk('rm -rf "$1" && mkdir "$1"', [d]);
        return d;
      };

      fuseTest("plain rename within a directory", async () => {
        const d = await fresh("plain");
        await shOk('echo hello > "$1/a" && mv "$1/a" "$1/b"', [d]);
        expect((await fsopOk("listdir", d)).names).toEqual(["b"]);
        expect(await shOk('cat "$1/b"', [d])).toBe("hello\n");
        await dropCaches();
        expect((await fsopOk("listdir", d)).names).toEqual(["b"]);
        expect((await fsop("stat", `${d}/a`)).code).toBe("ENOENT");
      });

      fuseTest("rename over an existing file replaces it", async () => {
        const d = await fresh("overfile");
        await shOk('echo new > "$1/a" && echo old > "$1/b"', [d]);
        const inoA = (await fsopOk("stat", `${d}/a`)).ino;
        await fsopOk("rename", `${d}/a`, `${d}/b`);
        expect((await fsopOk("listdir", d)).names).toEqual(["b"]);
        expect((await fsopOk("stat", `${d}/b`)).ino).toBe(inoA);
        expect(await shOk('cat "$1/b"', [d])).toBe("new\n");
      });

      fuseTest("directory renamed over an empty directory", async () => {
        const d = await fresh("overemptydir");
        await shOk('mkdir "$1/src" "$1/dst" && touch "$1/src/inside"', [d]);
        await fsopOk("rename", `${d}/src`, `${d}/dst`);
        expect((await fsopOk("listdir", d)).names).toEqual(["dst"]);
        expect((await fsopOk("listdir", `${d}/dst`)).names).toEqual(["inside"]);
      });

      fuseTest("directory renamed over a non-empty directory fails with ENOTEMPTY", async () => {
        const d = await fresh("overfulldir");
        await shOk('mkdir "$1/src" "$1/dst" && touch "$1/dst/keep"', [d]);
        const r = await fsop("rename", `${d}/src`, `${d}/dst`);
        expect(r.ok).toBe(false);
        expect(r.code).toBe("ENOTEMPTY");
        expect((await fsopOk("listdir", d)).names).toEqual(["dst", "src"]);
        expect((await fsopOk("listdir", `${d}/dst`)).names).toEqual(["keep"]);
      });

      fuseTest("file over directory is EISDIR, directory over file is ENOTDIR", async () => {
        const d = await fresh("types");
        await shOk('mkdir "$1/dir" && touch "$1/file"', [d]);
        expect((await fsop("rename", `${d}/file`, `${d}/dir`)).code).toBe("EISDIR");
        expect((await fsop("rename", `${d}/dir`, `${d}/file`)).code).toBe("ENOTDIR");
        expect((await fsop("rename", `${d}/missing`, `${d}/x`)).code).toBe("ENOENT");
      });

      fuseTest("RENAME_NOREPLACE: EEXIST when the target exists, works when it does not", async () => {
        const d = await fresh("noreplace");
        await shOk('echo a > "$1/a" && echo b > "$1/b"', [d]);
        const r = await fsop("renameat2", `${d}/a`, `${d}/b`, "noreplace");
        expect(r.code).toBe("EEXIST");
        expect(await shOk('cat "$1/a" "$1/b"', [d])).toBe("a\nb\n");
        await fsopOk("renameat2", `${d}/a`, `${d}/c`, "noreplace");
        expect((await fsopOk("listdir", d)).names).toEqual(["b", "c"]);
        expect(await shOk('cat "$1/c"', [d])).toBe("a\n");
      });

      fuseTest("RENAME_EXCHANGE swaps a file and a directory; ENOENT if one side is missing", async () => {
        const d = await fresh("exchange");
        await shOk('echo A > "$1/a" && mkdir "$1/b" && touch "$1/b/inside"', [d]);
        const inoA = (await fsopOk("stat", `${d}/a`)).ino;
        const inoB = (await fsopOk("stat", `${d}/b`)).ino;
        await fsopOk("renameat2", `${d}/a`, `${d}/b`, "exchange");
        expect((await fsopOk("stat", `${d}/a`)).ino).toBe(inoB);
        expect((await fsopOk("stat", `${d}/b`)).ino).toBe(inoA);
        expect((await fsopOk("listdir", `${d}/a`)).names).toEqual(["inside"]);
        expect(await shOk('cat "$1/b"', [d])).toBe("A\n");
        await dropCaches();
        expect((await fsopOk("listdir", `${d}/a`)).names).toEqual(["inside"]);
        expect(await shOk('cat "$1/b"', [d])).toBe("A\n");
        expect((await fsop("renameat2", `${d}/a`, `${d}/nope`, "exchange")).code).toBe("ENOENT");
      });

      fuseTest("cross-directory rename of a file and of a directory", async () => {
        const d = await fresh("cross");
        await shOk('mkdir -p "$1/x/sub" "$1/y" && echo data > "$1/x/f" && touch "$1/x/sub/g"', [d]);
        await fsopOk("rename", `${d}/x/f`, `${d}/y/f2`);
        await fsopOk("rename", `${d}/x/sub`, `${d}/y/sub2`);
        expect((await fsopOk("listdir", `${d}/x`)).names).toEqual([]);
        expect((await fsopOk("listdir", `${d}/y`)).names).toEqual(["f2", "sub2"]);
        expect(await shOk('cat "$1/y/f2"', [d])).toBe("data\n");
        // ".." of the moved directory now points at y: nlink of x drops, y's rises.
        expect(Number((await shOk('stat -c %h "$1/x"', [d])).trim())).toBe(2);
        expect(Number((await shOk('stat -c %h "$1/y"', [d])).trim())).toBe(3);
        await dropCaches();
        expect((await fsopOk("listdir", `${d}/y/sub2`)).names).toEqual(["g"]);
      });

      fuseTest("moving a directory into its own subdirectory is EINVAL", async () => {
        const d = await fresh("loop");
        await shOk('mkdir -p "$1/a/b"', [d]);
        expect((await fsop("rename", `${d}/a`, `${d}/a/b/c`)).code).toBe("EINVAL");
      });
    });

    describe("errno", () => {
      // Idempotent fixture tree: errno/{dir/sub/, file}.
      const tree = async () => {
        const b = `${s.mnt}/errno`;
        await shOk('mkdir -p "$1/dir/sub" && { [ -f "$1/file" ] || echo x > "$1/file"; }', [b]);
        return b;
      };

      fuseTest("ENOENT: stat, open, unlink, rmdir of missing names", async () => {
        const b = await tree();
        expect((await fsop("stat", `${b}/missing`)).code).toBe("ENOENT");
        expect((await fsop("open", `${b}/missing`, "O_RDONLY")).code).toBe("ENOENT");
        expect((await fsop("unlink", `${b}/missing`)).code).toBe("ENOENT");
        expect((await fsop("rmdir", `${b}/missing`)).code).toBe("ENOENT");
        expect((await fsop("stat", `${b}/missing/deeper`)).code).toBe("ENOENT");
        const r = await run(["cat", `${b}/missing`]);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("No such file or directory");
      });

      fuseTest("EEXIST: mkdir twice, O_EXCL create of an existing file, link onto an existing name", async () => {
        const b = await tree();
        await fsopOk("mkdir", `${b}/twice`);
        expect((await fsop("mkdir", `${b}/twice`)).code).toBe("EEXIST");
        expect((await fsop("mkdir", `${b}/file`)).code).toBe("EEXIST");
        expect((await fsop("open", `${b}/file`, "O_WRONLY|O_CREAT|O_EXCL")).code).toBe("EEXIST");
        expect((await fsop("link", `${b}/file`, `${b}/file`)).code).toBe("EEXIST");
        expect((await fsop("symlink", "t", `${b}/file`)).code).toBe("EEXIST");
        const r = await run(["mkdir", `${b}/twice`]);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("File exists");
      });

      fuseTest("ENOTEMPTY: rmdir of a non-empty directory", async () => {
        const b = await tree();
        expect((await fsop("rmdir", `${b}/dir`)).code).toBe("ENOTEMPTY");
        expect((await fsopOk("listdir", `${b}/dir`)).names).toEqual(["sub"]);
      });

      fuseTest("EISDIR: open a directory for writing, unlink a directory", async () => {
        const b = await tree();
        expect((await fsop("write_dir", `${b}/dir`)).code).toBe("EISDIR");
        const u = await fsop("unlink", `${b}/dir/sub`);
        expect(u.code).toBe("EISDIR"); // unlink(2) of a directory on Linux
        const r = await run(["sh", "-c", 'echo x > "$1"', "sh", `${b}/dir`]);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("Is a directory");
      });

      fuseTest("ENOTDIR: a file used as a directory, rmdir of a file", async () => {
        const b = await tree();
        expect((await fsop("stat", `${b}/file/x`)).code).toBe("ENOTDIR");
        expect((await fsop("mkdir", `${b}/file/x`)).code).toBe("ENOTDIR");
        expect((await fsop("rmdir", `${b}/file`)).code).toBe("ENOTDIR");
        expect((await fsop("listdir", `${b}/file`)).code).toBe("ENOTDIR");
      });

      fuseTest("ENAMETOOLONG: 256-byte names are refused, 255-byte names work", async () => {
        const b = await tree();
        const long = "n".repeat(256);
        const max = "m".repeat(255);
        expect((await fsop("open", `${b}/${long}`, "O_WRONLY|O_CREAT")).code).toBe("ENAMETOOLONG");
        expect((await fsop("mkdir", `${b}/${long}`)).code).toBe("ENAMETOOLONG");
        expect((await fsop("stat", `${b}/${long}`)).code).toBe("ENAMETOOLONG");
        expect((await fsop("symlink", "t", `${b}/${long}`)).code).toBe("ENAMETOOLONG");
        expect((await fsop("rename", `${b}/file`, `${b}/${long}`)).code).toBe("ENAMETOOLONG");
        await fsopOk("write", `${b}/${max}`, "ok");
        expect((await fsopOk("read", `${b}/${max}`)).data).toBe("ok");
        expect((await fsopOk("listdir", b)).names).toContain(max);
        await fsopOk("unlink", `${b}/${max}`);
      });
    });
  });
}
