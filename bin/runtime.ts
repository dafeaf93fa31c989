// Where a CLI daemon publishes its live stats so `fuse-uring stats MNT` finds it from the
// mountpoint alone: <runtime dir>/<major>:<minor>.json, keyed by the mount's device number
// (read from /proc/self/mountinfo, so finding it never touches the FUSE mount itself).
//   root: /run/fuse-uring    others: $XDG_RUNTIME_DIR/fuse-uring, else $TMPDIR/fuse-uring-<uid>
// FUSE_URING_RUNTIME_DIR overrides both. The daemon rewrites its file every second (atomic
// rename) and removes it at exit.

import { chmodSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function runtimeDir(): string {
  if (process.env.FUSE_URING_RUNTIME_DIR) return process.env.FUSE_URING_RUNTIME_DIR;
  const uid = process.getuid?.() ?? 0;
  if (uid === 0) return "/run/fuse-uring";
  if (process.env.XDG_RUNTIME_DIR) return join(process.env.XDG_RUNTIME_DIR, "fuse-uring");
  return join(tmpdir(), `fuse-uring-${uid}`);
}

/** The live stats file of the mount with device `dev` ("major:minor"). */
export function statsPathFor(dev: string): string {
  return join(runtimeDir(), `${dev}.json`);
}

/** Publishes `snapshot()` at `path` now and every second until stop() (which removes it). */
export function publishStats(path: string, snapshot: () => object): { stop(): void } {
  const dir = join(path, "..");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    if (statSync(dir).uid === process.getuid?.()) chmodSync(dir, 0o755);
  } catch {}
  const write = () => {
    try {
      const tmp = `${path}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(snapshot()) + "\n");
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
