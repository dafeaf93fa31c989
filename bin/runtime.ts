// Where a CLI daemon publishes its live stats so `fuse-uring stats MNT` finds it from the
// mountpoint alone: <runtime dir>/<major>:<minor>.json, keyed by the mount's device number
// (read from /proc/self/mountinfo, so finding it never touches the FUSE mount itself).
//   root: /run/fuse-uring    others: $XDG_RUNTIME_DIR/fuse-uring, else $TMPDIR/fuse-uring-run-<uid>
// FUSE_URING_RUNTIME_DIR overrides both. The daemon rewrites its file every second (atomic
// rename) and removes it at exit.

import { lstatSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { knobs } from "../lib/knobs.ts";

export function runtimeDir(): string {
  const dir = knobs.runtimeDir();
  if (dir) return dir;
  const uid = process.getuid?.() ?? 0;
  if (uid === 0) return "/run/fuse-uring";
  if (process.env.XDG_RUNTIME_DIR) return join(process.env.XDG_RUNTIME_DIR, "fuse-uring");
  return join(tmpdir(), `fuse-uring-run-${uid}`);
}

/** The live stats file of the mount with device `dev` ("major:minor"). */
export function statsPathFor(dev: string): string {
  return join(runtimeDir(), `${dev}.json`);
}

/**
 * Creates the runtime directory if needed; true if it is ours to write in: a real directory
 * (not a symlink) owned by us and writable by nobody else. In a shared /tmp somebody else could
 * have created it first.
 */
export function ensureRuntimeDir(dir = runtimeDir()): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode: process.getuid?.() === 0 ? 0o755 : 0o700 });
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === process.getuid?.() && (st.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/** Publishes `snapshot()` at `path` now and every second until stop() (which removes it). */
export function publishStats(path: string, snapshot: () => object): { stop(): void } {
  if (!ensureRuntimeDir(join(path, ".."))) return { stop() {} };
  const write = () => {
    try {
      const tmp = `${path}.${process.pid}.tmp`;
      rmSync(tmp, { force: true });
      writeFileSync(tmp, JSON.stringify(snapshot()) + "\n", { flag: "wx", mode: 0o644 }); // never through a planted symlink
      renameSync(tmp, path);
    } catch {
      // Live stats are a convenience: failing to write them must not disturb the mount.
    }
  };
  write();
  const timer = setInterval(write, 1000);
  return {
    stop() {
      clearInterval(timer);
      rmSync(path, { force: true });
    },
  };
}
