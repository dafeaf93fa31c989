// A JSON file as a directory tree: objects and arrays are directories, every other value is a
// file holding the value (strings as text, the rest as JSON) and a newline. Writable: writing a
// leaf, creating/removing files and directories, and renaming update the JSON file on disk
// (atomically, pretty-printed). Changes made to the JSON file by others are picked up.
//
//   JSON_FILE=data.json fuse-uring mount examples/json.ts /mnt/json
//   bun examples/json.ts data.json /mnt/json
//
//   cat /mnt/json/name; echo 42 > /mnt/json/version; mkdir /mnt/json/extra; ls /mnt/json/list
//
// Keys containing "/" or "%" appear with those characters escaped as %2F and %25.

import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { defineFs, FuseError, paths, serve, type DefinedFs } from "fuse-uring";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Container = Json[] | { [k: string]: Json };

const encodeName = (k: string) => k.replaceAll("%", "%25").replaceAll("/", "%2F");
const decodeName = (n: string) => n.replaceAll("%2F", "/").replaceAll("%25", "%");

function isContainer(v: Json | undefined): v is Container {
  return typeof v === "object" && v !== null;
}

/** What a leaf file contains. */
function render(v: Json): string {
  return (typeof v === "string" ? v : JSON.stringify(v)) + "\n";
}

/** The value written to a leaf: text stays text where the old value was text, else JSON if it parses. */
function parseLeaf(text: string, old: Json | undefined): Json {
  const s = text.endsWith("\n") ? text.slice(0, -1) : text;
  if (old === undefined || typeof old === "string") return s;
  try {
    return JSON.parse(s) as Json;
  } catch {
    return s;
  }
}

export function jsonfs(file: string): DefinedFs {
  let data: Json = {};
  let loadedMtime = -1;
  let loadedSize = -1;

  /** (Re)read the file if it changed on disk since we last looked. */
  function load(): void {
    if (!existsSync(file)) {
      if (loadedMtime === -1) {
        data = {};
        save();
      }
      return;
    }
    const st = statSync(file);
    if (st.mtimeMs === loadedMtime && st.size === loadedSize) return;
    const text = readFileSync(file, "utf8");
    data = text.trim() === "" ? {} : (JSON.parse(text) as Json); // a parse error answers EIO and is logged
    loadedMtime = st.mtimeMs;
    loadedSize = st.size;
  }

  function save(): void {
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(data, null, 2) + "\n");
    renameSync(tmp, file);
    const st = statSync(file);
    loadedMtime = st.mtimeMs;
    loadedSize = st.size;
  }

  function parts(path: string): string[] {
    return path.split("/").filter(Boolean).map(decodeName);
  }

  function get(path: string): Json | undefined {
    load();
    let v: Json | undefined = data;
    for (const k of parts(path)) {
      if (!isContainer(v)) return undefined;
      v = Array.isArray(v) ? (/^\d+$/.test(k) ? v[Number(k)] : undefined) : Object.hasOwn(v, k) ? v[k] : undefined;
    }
    return v;
  }

  /** The container holding `path` and the key within it. */
  function parentOf(path: string): { parent: Container; key: string } {
    const ps = parts(path);
    const key = ps.pop();
    if (key === undefined) throw new FuseError("EBUSY"); // the root
    const parent = get("/" + ps.map(encodeName).join("/"));
    if (!isContainer(parent)) throw new FuseError("ENOENT");
    if (Array.isArray(parent) && !/^\d+$/.test(key)) throw new FuseError("EINVAL", "array entries are named 0, 1, 2, …");
    return { parent, key };
  }

  function set(path: string, value: Json): void {
    const { parent, key } = parentOf(path);
    if (Array.isArray(parent)) parent[Number(key)] = value;
    else parent[key] = value;
    save();
  }

  function remove(path: string): void {
    const { parent, key } = parentOf(path);
    if (Array.isArray(parent)) parent.splice(Number(key), 1);
    else delete parent[key];
  }

  const mtime = () => (loadedMtime > 0 ? loadedMtime : Date.now());

  return defineFs({
    getattr(path) {
      const v = get(path);
      if (v === undefined) return null;
      if (isContainer(v)) return { type: "dir", mode: 0o755, mtime: mtime() };
      return { type: "file", mode: 0o644, size: Buffer.byteLength(render(v)), mtime: mtime() };
    },
    readdir(path) {
      const v = get(path);
      if (!isContainer(v)) throw new FuseError(v === undefined ? "ENOENT" : "ENOTDIR");
      const keys = Array.isArray(v) ? v.map((_, i) => String(i)) : Object.keys(v);
      return keys.filter((k) => k !== "" && k !== "." && k !== "..").map(encodeName);
    },
    readFile(path) {
      const v = get(path);
      if (v === undefined) throw new FuseError("ENOENT");
      if (isContainer(v)) throw new FuseError("EISDIR");
      return render(v);
    },
    writeFile(path, { data }) {
      const old = get(path);
      if (isContainer(old)) throw new FuseError("EISDIR");
      set(path, parseLeaf(data.toString("utf8"), old));
    },
    create(path) {
      if (get(path) === undefined) set(path, "");
    },
    mkdir(path) {
      if (get(path) !== undefined) throw new FuseError("EEXIST");
      set(path, {});
    },
    unlink(path) {
      if (get(path) === undefined) throw new FuseError("ENOENT");
      remove(path);
      save();
    },
    rmdir(path) {
      const v = get(path);
      if (!isContainer(v)) throw new FuseError(v === undefined ? "ENOENT" : "ENOTDIR");
      if (Object.keys(v).length > 0) throw new FuseError("ENOTEMPTY");
      remove(path);
      save();
    },
    rename(from, { newPath: to }) {
      const v = get(from);
      if (v === undefined) throw new FuseError("ENOENT");
      const target = get(to);
      if (isContainer(target) && Object.keys(target).length > 0) throw new FuseError("ENOTEMPTY");
      parentOf(to); // validates the destination before anything changes
      remove(from);
      set(to, v);
    },
  });
}

/** `fuse-uring mount examples/json.ts MNT` (JSON_FILE=…) */
export default function ({ args }: { args: string[] }) {
  const file = args[0] ?? process.env.JSON_FILE;
  if (!file) throw new Error("which JSON file? Set JSON_FILE=path/to/file.json");
  return paths(jsonfs(file));
}

if (import.meta.main) {
  const [file, mnt] = process.argv.slice(2);
  if (!file || !mnt) {
    console.error("usage: bun examples/json.ts FILE.json MOUNTPOINT");
    process.exit(2);
  }
  await serve(paths(jsonfs(file)), mnt);
}
