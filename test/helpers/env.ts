// Paths and suite-wide settings for the integration tests.
import { resolve } from "node:path";
import { existsSync } from "node:fs";

/** Repository root (…/test/helpers/../..). */
export const REPO = resolve(import.meta.dir, "..", "..");

/** The Bun binary: the one running the tests (normally node_modules/.bin/bun's target). */
export const BUN = process.execPath && existsSync(process.execPath) ? process.execPath : `${REPO}/node_modules/.bin/bun`;

/** CLI entry point. */
export const CLI = `${REPO}/bin/fuse-uring.ts`;

/** Python helper used for syscalls coreutils cannot express (renameat2, lseek, errno checks). */
export const FSOPS = `${REPO}/test/fixtures/fsops.py`;

/** Prefer the system python (readable by every user) over a pyenv shim. */
export const PYTHON = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

export type Transport = "classic" | "uring";
const ALL_TRANSPORTS: Transport[] = ["classic", "uring"];

/** Transports every integration file is parametrized over (env FUSE_URING_TRANSPORTS="classic,uring"). */
export const TRANSPORTS: Transport[] = (() => {
  const env = process.env.FUSE_URING_TRANSPORTS;
  if (!env) return ALL_TRANSPORTS;
  const wanted = env.split(/[ ,]+/).filter(Boolean);
  for (const w of wanted) {
    if (!ALL_TRANSPORTS.includes(w as Transport)) {
      throw new Error(`FUSE_URING_TRANSPORTS: unknown transport ${JSON.stringify(w)} (use classic, uring)`);
    }
  }
  return wanted as Transport[];
})();

/**
 * Multiplies the time LIMITS of the harness — client commands (run/sh), daemon start-up and
 * stop, stats polling, fuseTest — never an assertion's threshold. 1 on a host; the TCG guest
 * sets FUSE_URING_TIME_SCALE=4 (test/vm/guest.env: emulation runs 5–10× slower, docs/GUEST.md).
 */
export const TIME_SCALE: number = (() => {
  const v = Number(process.env.FUSE_URING_TIME_SCALE ?? "1");
  if (!(v >= 1)) throw new Error(`FUSE_URING_TIME_SCALE must be a number >= 1, got ${process.env.FUSE_URING_TIME_SCALE}`);
  return v;
})();

/** A time limit of the harness scaled by TIME_SCALE. */
export function timeLimit(ms: number): number {
  return ms * TIME_SCALE;
}

/** Where temporary mountpoints and scratch files go (mountpoints must be on a real fs, not a FUSE mount). */
export const TMP_ROOT = "/tmp";

/** A tmpfs for source data ("cp from a tmpfs file"); /dev/shm on Linux. */
export const TMPFS = existsSync("/dev/shm") ? "/dev/shm" : "/tmp";
