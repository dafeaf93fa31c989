// A small read-write filesystem (files and directories, like memfs) whose state is a SQLite
// database, served by every CPU: the handlers keep nothing in this module, so the script
// declares `threads: "stateless"` and each worker thread loads it and opens its own connection
// to the same database (SQLite's locking serialises the writers). Node ids and open files are
// the path layer's business and come from one table all threads share.
//
//   fuse-uring mount examples/shared-notes.ts /mnt/notes -- /var/lib/notes.sqlite
//
// (Without an argument the database is NOTES_DB, else a file in /tmp named after the
// mountpoint, so every thread of one mount finds the same one.)

import { Database } from "bun:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineFs, FuseError, paths, S_IFDIR, S_IFREG, type DefinedFs } from "../lib/index.ts";

interface Row {
  mode: number;
  size: number;
  mtime: number;
  ctime: number;
}

const parentOf = (path: string) => path.slice(0, Math.max(1, path.lastIndexOf("/")));
const baseOf = (path: string) => path.slice(path.lastIndexOf("/") + 1);
const isDir = (mode: number) => (mode & 0o170000) === S_IFDIR;

export function notes(file: string): DefinedFs {
  const db = new Database(file, { create: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL");
  db.exec(`CREATE TABLE IF NOT EXISTS nodes (
    path TEXT PRIMARY KEY, parent TEXT NOT NULL, mode INTEGER NOT NULL, data BLOB NOT NULL DEFAULT x'',
    mtime REAL NOT NULL, ctime REAL NOT NULL)`);
  db.exec("CREATE INDEX IF NOT EXISTS by_parent ON nodes(parent)");
  db.query("INSERT OR IGNORE INTO nodes (path, parent, mode, mtime, ctime) VALUES ('/', '', ?, ?, ?)").run(S_IFDIR | 0o755, Date.now(), Date.now());

  const stat = db.query<Row, [string]>("SELECT mode, length(data) AS size, mtime, ctime FROM nodes WHERE path = ?");
  const children = db.query<{ path: string }, [string]>("SELECT path FROM nodes WHERE parent = ?");
  const hasChildren = db.query<{ n: number }, [string]>("SELECT count(*) AS n FROM nodes WHERE parent = ? LIMIT 1");
  const insert = db.query("INSERT INTO nodes (path, parent, mode, mtime, ctime) VALUES (?, ?, ?, ?, ?)");
  const dataOf = db.query<{ data: Uint8Array }, [string]>("SELECT data FROM nodes WHERE path = ?");
  const slice = db.query<{ d: Uint8Array }, [number, number, string]>("SELECT substr(data, ?, ?) AS d FROM nodes WHERE path = ?");
  const setData = db.query("UPDATE nodes SET data = ?, mtime = ?, ctime = ? WHERE path = ?");
  const remove = db.query("DELETE FROM nodes WHERE path = ?");
  const move = db.query("UPDATE nodes SET path = ?, parent = ?, ctime = ? WHERE path = ?");
  // ?1 = new prefix, ?2 = length of the old one, ?3 = the old one
  const moveSubtree = db.query("UPDATE nodes SET path = ?1 || substr(path, ?2 + 1), parent = ?1 || substr(parent, ?2 + 1) WHERE substr(path, 1, ?2 + 1) = ?3 || '/'");

  const must = (path: string): Row => {
    const r = stat.get(path);
    if (!r) throw new FuseError("ENOENT");
    return r;
  };

  // Every check-then-change runs as one IMMEDIATE transaction (`.immediate` below): it takes the
  // write lock first (waiting up to busy_timeout for another thread's), so no other thread's
  // change slips in between, and no read lock has to be upgraded (which SQLite refuses with
  // "database is locked").
  const add = db.transaction((path: string, mode: number) => {
    if (!isDir(must(parentOf(path)).mode)) throw new FuseError("ENOTDIR");
    if (stat.get(path)) throw new FuseError("EEXIST");
    const now = Date.now();
    insert.run(path, parentOf(path), mode, now, now);
  });
  /** Read-modify-write of a file's bytes (no lost update between threads). */
  const modify = db.transaction((path: string, f: (old: Uint8Array) => Uint8Array) => {
    const row = dataOf.get(path);
    if (!row) throw new FuseError("ENOENT");
    const now = Date.now();
    setData.run(f(row.data), now, now, path);
  });
  const unlink = db.transaction((path: string) => {
    if (isDir(must(path).mode)) throw new FuseError("EISDIR");
    remove.run(path);
  });
  const rmdir = db.transaction((path: string) => {
    if (!isDir(must(path).mode)) throw new FuseError("ENOTDIR");
    if (hasChildren.get(path)!.n > 0) throw new FuseError("ENOTEMPTY");
    remove.run(path);
  });
  const rename = db.transaction((from: string, to: string) => {
    const src = must(from);
    const dst = stat.get(to);
    if (dst) {
      if (isDir(dst.mode) !== isDir(src.mode)) throw new FuseError(isDir(dst.mode) ? "EISDIR" : "ENOTDIR");
      if (isDir(dst.mode) && hasChildren.get(to)!.n > 0) throw new FuseError("ENOTEMPTY");
      remove.run(to);
    }
    if (!isDir(must(parentOf(to)).mode)) throw new FuseError("ENOTDIR");
    if (to.startsWith(from + "/")) throw new FuseError("EINVAL");
    move.run(to, parentOf(to), Date.now(), from);
    moveSubtree.run(to, from.length, from); // a directory's subtree moves with it
  });

  return defineFs({
    getattr(path) {
      const r = stat.get(path);
      return r ? { mode: r.mode, size: r.size, mtime: r.mtime, ctime: r.ctime, nlink: isDir(r.mode) ? 2 : 1 } : null;
    },
    readdir: (path) => children.all(path).map((r) => baseOf(r.path)),
    create(path, { mode }) {
      add.immediate(path, S_IFREG | mode);
    },
    mkdir(path, { mode }) {
      add.immediate(path, S_IFDIR | mode);
    },
    read: (path, { offset, size }) => slice.get(offset + 1, size, path)?.d ?? null,
    write(path, { data, offset }) {
      modify.immediate(path, (old) => {
        const out = new Uint8Array(Math.max(old.length, offset + data.length));
        out.set(old);
        out.set(data, offset);
        return out;
      });
      return data.length;
    },
    truncate(path, { size }) {
      modify.immediate(path, (old) => {
        const out = new Uint8Array(size);
        out.set(old.subarray(0, size));
        return out;
      });
    },
    unlink: (path) => unlink.immediate(path),
    rmdir: (path) => rmdir.immediate(path),
    rename: (from, { newPath }) => rename.immediate(from, newPath),
    chmod(path, { mode }) {
      db.query("UPDATE nodes SET mode = (mode & ~4095) | ?, ctime = ? WHERE path = ?").run(mode & 0o7777, Date.now(), path);
    },
    utimens(path, { mtime }) {
      if (mtime) db.query("UPDATE nodes SET mtime = ? WHERE path = ?").run(mtime.getTime(), path);
    },
  });
}

/** `fuse-uring mount examples/shared-notes.ts MNT [-- DATABASE]` */
export default function ({ args, mountpoint }: { args: string[]; mountpoint?: string }) {
  const file = args[0] ?? process.env.NOTES_DB ?? join(tmpdir(), `fuse-uring-notes-${Bun.hash(mountpoint ?? "").toString(16)}.sqlite`);
  return paths(notes(file), { threads: "stateless" });
}
