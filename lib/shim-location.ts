// The standalone binary (bun build --compile) carries the shim inside its embedded file
// system ($bunfs), from where it cannot be dlopen()ed. Bun's own answer is to write it to
// $TMPDIR and fail when that is not writable (or mounted noexec); this module instead tries a
// list of places and keeps the first copy that actually loads:
//
//   $FUSE_URING_SHIM_DIR, $TMPDIR (or /tmp), /dev/shm, $XDG_RUNTIME_DIR, ~/.cache/fuse-uring,
//   the binary's own directory.
//
// Shared directories (/tmp, /dev/shm) get a private subdirectory `fuse-uring-<uid>` (mode 0700,
// owned by us, not a symlink) so another user cannot plant a library under our name. Files are
// named after a hash of their content, written to a temporary name and renamed, so concurrent
// starts and different versions never see a half-written or foreign copy; an existing copy is
// reused.

import { dlopen, FFIType } from "bun:ffi";
import { chmodSync, closeSync, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

export interface ShimAttempt {
  dir: string;
  error: string;
}

export class ShimLocationError extends Error {
  constructor(readonly attempts: ShimAttempt[]) {
    super(
      "fuse-uring: cannot find a directory to load the embedded native shim from " +
        `(each needs to be writable and not mounted noexec): ${attempts.map((a) => `${a.dir}: ${a.error}`).join("; ")}. ` +
        "Set FUSE_URING_SHIM_DIR (or TMPDIR) to such a directory, e.g. FUSE_URING_SHIM_DIR=$HOME/.cache/fuse-uring",
    );
    this.name = "ShimLocationError";
  }
}

interface Candidate {
  dir: string;
  /** Shared with other users: use a private subdirectory. */
  shared: boolean;
  /** Somebody else's directory (the binary's): use a dot-file name. */
  hidden?: boolean;
}

function uid(): number {
  return process.getuid?.() ?? 0;
}

export function candidateDirs(): Candidate[] {
  const env = process.env;
  const out: Candidate[] = [];
  const add = (dir: string | undefined, shared: boolean, hidden = false) => {
    if (dir && dir.startsWith("/") && !out.some((c) => c.dir === dir)) out.push({ dir, shared, hidden });
  };
  add(env.FUSE_URING_SHIM_DIR, false);
  add(env.TMPDIR || "/tmp", true);
  add("/tmp", true);
  add("/dev/shm", true);
  add(env.XDG_RUNTIME_DIR, false);
  let home = env.HOME;
  try {
    home ||= homedir();
  } catch {}
  // Only below a home directory that exists (never create $HOME itself).
  if (home && isDir(home)) add(join(env.XDG_CACHE_HOME || join(home, ".cache"), "fuse-uring"), false);
  add(dirname(process.execPath), false, true);
  return out;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** A directory only we can write to, created if needed; throws an explanation otherwise. */
function privateDir(c: Candidate): string {
  const dir = c.shared ? join(c.dir, `fuse-uring-${uid()}`) : c.dir;
  try {
    mkdirSync(dir, { recursive: !c.shared, mode: 0o700 });
  } catch (e) {
    if ((e as { code?: string }).code !== "EEXIST") throw e;
  }
  if (c.shared) {
    const st = lstatSync(dir);
    if (!st.isDirectory()) throw new Error(`${dir} exists and is not a directory`);
    if (st.uid !== uid()) throw new Error(`${dir} is owned by uid ${st.uid}, not us`);
    if (st.mode & 0o022) chmodSync(dir, 0o700);
  }
  return dir;
}

/** Write `bytes` to `file` unless an identical-size copy owned by us is already there. */
function placeCopy(file: string, bytes: Uint8Array): void {
  try {
    const st = lstatSync(file);
    if (st.isFile() && st.size === bytes.length && st.uid === uid()) return;
    rmSync(file, { force: true });
  } catch {}
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "wx", 0o700);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    if (fstatSync(fd).size !== bytes.length) throw new Error("short write");
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

/** dlopen() it for real (catches noexec mounts) and close it again. */
function tryLoad(file: string): void {
  const lib = dlopen(file, { fu_last_error: { args: [], returns: FFIType.i32 } });
  lib.close();
}

function shortError(e: unknown): string {
  const code = (e as { code?: string }).code;
  const msg = e instanceof Error ? e.message : String(e);
  if (/failed to map segment|operation not permitted/i.test(msg)) return "mounted noexec (dlopen refused it)";
  return code ? `${code}` : msg.split("\n")[0]!.slice(0, 160);
}

/**
 * Copy the shim embedded at `embedded` (a $bunfs path) to the first candidate directory where
 * it loads, and return that path. Throws ShimLocationError listing every attempt.
 */
export function extractShim(embedded: string, name = "libfuse_uring_shim"): string {
  const bytes = readFileSync(embedded);
  const hash = Bun.hash.wyhash(bytes).toString(16).padStart(16, "0");
  const attempts: ShimAttempt[] = [];
  for (const c of candidateDirs()) {
    try {
      const dir = privateDir(c);
      const file = join(dir, `${c.hidden ? "." : ""}${name}-${hash}.so`);
      placeCopy(file, bytes);
      tryLoad(file);
      return file;
    } catch (e) {
      attempts.push({ dir: c.dir, error: shortError(e) });
    }
  }
  throw new ShimLocationError(attempts);
}
