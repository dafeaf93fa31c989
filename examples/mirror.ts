// A directory mirrored through path handlers, with file data served natively: open and create
// return backed(path), so the shim answers READ, WRITE and FSYNC from the real file (no
// JavaScript per request) while every name operation stays a readable handler below. The
// handlers could decide per file — hide some, log opens, refuse writes, map paths elsewhere.
//
//   MIRROR_DIR=/srv/data fuse-uring mount examples/mirror.ts /mnt/mirror
//   bun examples/mirror.ts /srv/data /mnt/mirror
//
// Every handler keeps its state in the mirrored directory, none in this module, so it declares
// `threads: "stateless"`: mounted with `fuse-uring mount`, every CPU gets a thread that loads
// this script and serves its own callers (node ids come from one shared table).
//
// (lib/fs/passthrough.ts is the full-featured version of this: inode-based, hard links, xattrs.)

import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmdirSync, statfsSync, symlinkSync, truncateSync, unlinkSync, utimesSync, closeSync, openSync } from "node:fs";
import { backed, defineFs, fsdecode, fsencode, paths, serve, type DefinedFs } from "fuse-uring";

export function mirror(dir: string): DefinedFs {
  const root = fsencode(dir.replace(/\/+$/, ""));
  // Names are bytes: paths arrive as strings (undecodable bytes as U+DC80–U+DCFF) and go back
  // to the filesystem as those exact bytes.
  const real = (path: string): Buffer => (path === "/" ? root : Buffer.concat([root, fsencode(path)]));
  const realString = (path: string): string => fsdecode(real(path));
  return defineFs({
    getattr: (path) => lstatSync(real(path), { throwIfNoEntry: false }) ?? null, // null: ENOENT
    readdir: (path) => readdirSync(real(path), { encoding: "buffer" }).map((n) => fsdecode(n)),
    open: (path) => backed(realString(path)), // opened with the caller's flags; closed after release
    create: (path) => backed(realString(path)), // O_CREAT with the mode the caller asked for
    truncate(path, { size }) {
      truncateSync(real(path), size); // by path only: an open backed file is ftruncated by the layer
    },
    mknod(path, { mode }) {
      closeSync(openSync(real(path), "wx", mode)); // regular files (mkfifo etc. are refused by node:fs)
    },
    mkdir: (path, { mode }) => mkdirSync(real(path), { mode }),
    unlink: (path) => unlinkSync(real(path)),
    rmdir: (path) => rmdirSync(real(path)),
    rename: (path, { newPath }) => renameSync(real(path), real(newPath)),
    link: (path, { newPath }) => linkSync(real(path), real(newPath)),
    symlink: (path, { target }) => symlinkSync(fsencode(target), real(path)),
    readlink: (path) => readlinkSync(real(path), { encoding: "buffer" }),
    chmod: (path, { mode }) => chmodSync(real(path), mode),
    chown: (path, { uid, gid }) => chownSync(real(path), uid, gid),
    utimens(path, { atime, mtime }) {
      const st = lstatSync(real(path));
      utimesSync(real(path), atime ?? st.atime, mtime ?? st.mtime);
    },
    statfs(path) {
      const s = statfsSync(real(path));
      return { blocks: s.blocks, bfree: s.bfree, bavail: s.bavail, files: s.files, ffree: s.ffree, bsize: s.bsize, frsize: s.bsize };
    },
  });
}

/** `fuse-uring mount examples/mirror.ts MNT` (MIRROR_DIR=…, or the first extra argument) */
export default function ({ args }: { args: string[] }) {
  const dir = args[0] ?? process.env.MIRROR_DIR;
  if (!dir) throw new Error("which directory? Set MIRROR_DIR=/path/to/dir");
  lstatSync(dir); // fail at mount time, not at the first request
  return paths(mirror(dir), { threads: "stateless" });
}

if (import.meta.main) {
  const [dir, mnt] = process.argv.slice(2);
  if (!dir || !mnt) {
    console.error("usage: bun examples/mirror.ts DIRECTORY MOUNTPOINT");
    process.exit(2);
  }
  await serve(paths(mirror(dir)), mnt);
}
