// A SQLite database as files: one directory per table, one JSON file per row (named by rowid).
//
//   SQLITE_DB=notes.db fuse-uring mount examples/sqlite.ts /mnt/db
//   bun examples/sqlite.ts notes.db /mnt/db
//
//   ls /mnt/db/notes                          → 1.json 2.json …
//   cat /mnt/db/notes/1.json                  → {"id":1,"title":"…","body":"…"} (pretty)
//   echo '{"title":"new"}' > /mnt/db/notes/1.json   UPDATE notes SET title='new' WHERE rowid=1
//   echo '{"title":"t","body":"b"}' > /mnt/db/notes/9.json   INSERT … (rowid 9)
//   rm /mnt/db/notes/9.json                  DELETE
//   mv /mnt/db/notes/2.json /mnt/db/notes/20.json   changes the rowid
//   cat /mnt/db/schema.sql                    the CREATE statements
//
// A missing database file is created with a demo `notes` table. Writing a row updates the
// columns present in the JSON object; unknown columns or invalid JSON fail the write (close)
// with EINVAL and the error is logged.

import { Database } from "bun:sqlite";
import { defineFs, FuseError, paths, serve } from "fuse-uring";

const ROW = /^(\d+)\.json$/;

function quote(ident: string): string {
  return `"${ident.replaceAll('"', '""')}"`;
}

export function sqlitefs(dbPath: string) {
  const db = new Database(dbPath, { create: true });
  db.exec("PRAGMA journal_mode = WAL");
  const hasTables = db.query("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
  if (hasTables.n === 0) {
    db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', body TEXT NOT NULL DEFAULT '')");
    const ins = db.prepare("INSERT INTO notes (title, body) VALUES (?, ?)");
    ins.run("hello", "Hello from SQLite.");
    ins.run("shopping", "milk, eggs");
  }
  const started = Date.now();
  /** Rows created with O_CREAT but not written yet: visible as empty files until release. */
  const pending = new Set<string>();

  function tables(): string[] {
    return (db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[])
      .map((r) => r.name)
      .filter((n) => !n.includes("/"));
  }

  function columns(table: string): string[] {
    return (db.query(`PRAGMA table_info(${quote(table)})`).all() as { name: string }[]).map((c) => c.name);
  }

  function split(path: string): { table?: string; rowid?: number; file?: string } {
    const [table, file, ...rest] = path.split("/").filter(Boolean);
    if (rest.length) throw new FuseError("ENOENT");
    if (table === undefined) return {};
    if (table === "schema.sql" && file === undefined) return { file: table };
    if (!tables().includes(table)) throw new FuseError("ENOENT");
    if (file === undefined) return { table };
    const m = ROW.exec(file);
    if (!m) throw new FuseError("ENOENT");
    return { table, rowid: Number(m[1]), file };
  }

  function row(table: string, rowid: number): Record<string, unknown> | null {
    return db.query(`SELECT * FROM ${quote(table)} WHERE rowid = ?`).get(rowid) as Record<string, unknown> | null;
  }

  function render(r: Record<string, unknown>): string {
    return JSON.stringify(r, (_k, v) => (typeof v === "bigint" ? Number(v) : v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v), 2) + "\n";
  }

  function schema(): string {
    const rows = db.query("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { sql: string }[];
    return rows.map((r) => r.sql + ";\n").join("");
  }

  return defineFs({
    db,
    getattr(path) {
      const p = split(path);
      if (p.file === "schema.sql") return { type: "file", mode: 0o444, size: Buffer.byteLength(schema()), mtime: started };
      if (p.table === undefined) return { type: "dir", mode: 0o755, mtime: started };
      if (p.rowid === undefined) return { type: "dir", mode: 0o755, mtime: started };
      const r = row(p.table, p.rowid);
      if (!r) return pending.has(path) ? { type: "file", mode: 0o644, size: 0, mtime: Date.now() } : null;
      return { type: "file", mode: 0o644, size: Buffer.byteLength(render(r)), mtime: started };
    },
    readdir(path) {
      const p = split(path);
      if (p.file) throw new FuseError("ENOTDIR");
      if (p.table === undefined) return [...tables(), "schema.sql"];
      const ids = (db.query(`SELECT rowid AS r FROM ${quote(p.table)} ORDER BY rowid`).all() as { r: number }[]).map((x) => `${x.r}.json`);
      for (const pend of pending) if (pend.startsWith(`/${p.table}/`)) ids.push(pend.slice(p.table.length + 2));
      return ids;
    },
    readFile(path) {
      const p = split(path);
      if (p.file === "schema.sql") return schema();
      if (p.rowid === undefined || p.table === undefined) throw new FuseError("EISDIR");
      const r = row(p.table, p.rowid);
      if (!r) {
        if (pending.has(path)) return "";
        throw new FuseError("ENOENT");
      }
      return render(r);
    },
    writeFile(path, { data }) {
      const p = split(path);
      if (p.rowid === undefined || p.table === undefined) throw new FuseError("EACCES");
      let obj: unknown;
      try {
        obj = JSON.parse(data.toString("utf8"));
      } catch (e) {
        throw new FuseError("EINVAL", `${path}: not JSON: ${(e as Error).message}`);
      }
      if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new FuseError("EINVAL", `${path}: expected a JSON object`);
      const cols = columns(p.table);
      const entries = Object.entries(obj as Record<string, unknown>).filter(([k]) => k !== "rowid");
      for (const [k] of entries) if (!cols.includes(k)) throw new FuseError("EINVAL", `${path}: no column ${k} in ${p.table}`);
      const values = entries.map(([, v]) => (v !== null && typeof v === "object" ? JSON.stringify(v) : (v as string | number | boolean | null)));
      const t = quote(p.table);
      if (row(p.table, p.rowid)) {
        if (entries.length) db.query(`UPDATE ${t} SET ${entries.map(([k]) => `${quote(k)} = ?`).join(", ")} WHERE rowid = ?`).run(...values, p.rowid);
      } else {
        const names = ["rowid", ...entries.map(([k]) => quote(k))];
        db.query(`INSERT INTO ${t} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`).run(p.rowid, ...values);
        pending.delete(path);
      }
    },
    create(path) {
      const p = split(path.slice(0, path.lastIndexOf("/")) || "/");
      const name = path.slice(path.lastIndexOf("/") + 1);
      if (p.table === undefined || p.file) throw new FuseError("EACCES", "rows live in table directories");
      if (!ROW.test(name)) throw new FuseError("EINVAL", `row files are named ROWID.json, not ${name}`);
      pending.add(path);
    },
    release(path) {
      pending.delete(path); // created but never written: no row
    },
    unlink(path) {
      const p = split(path);
      if (p.rowid === undefined || p.table === undefined) throw new FuseError("EACCES");
      if (pending.delete(path)) return;
      const r = db.query(`DELETE FROM ${quote(p.table)} WHERE rowid = ?`).run(p.rowid);
      if (r.changes === 0) throw new FuseError("ENOENT");
    },
    rename(from, { newPath: to }) {
      const a = split(from);
      const slash = to.lastIndexOf("/");
      const b = split(to.slice(0, slash) || "/");
      const m = ROW.exec(to.slice(slash + 1));
      if (a.rowid === undefined || a.table === undefined || !m || b.table !== a.table || b.file) throw new FuseError("EXDEV", "rows can only be renumbered within their table");
      const t = quote(a.table);
      db.transaction(() => {
        db.query(`DELETE FROM ${t} WHERE rowid = ?`).run(Number(m[1]));
        db.query(`UPDATE ${t} SET rowid = ? WHERE rowid = ?`).run(Number(m[1]), a.rowid!);
      })();
    },
    destroy() {
      db.close();
    },
  });
}

/** `fuse-uring mount examples/sqlite.ts MNT` (SQLITE_DB=…, default ./fuse-uring-demo.db) */
export default function ({ args }: { args: string[] }) {
  return paths(sqlitefs(args[0] ?? process.env.SQLITE_DB ?? "fuse-uring-demo.db"));
}

if (import.meta.main) {
  const [dbPath, mnt] = process.argv.slice(2);
  if (!dbPath || !mnt) {
    console.error("usage: bun examples/sqlite.ts DATABASE MOUNTPOINT");
    process.exit(2);
  }
  await serve(paths(sqlitefs(dbPath)), mnt);
}
