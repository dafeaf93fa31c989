// Small helpers for filesystems: wall-clock time with nanoseconds, and Attr construction.

import type { Attr } from "./types.ts";
import { S_IFREG } from "./types.ts";

// Wall time = monotonic high-resolution clock (performance.now) + an offset calibrated against Date.now(). This gives
// nanosecond stamps that never go backwards between calls (so "mtime changed after a write" holds
// even within one millisecond). The offset is re-checked about once a second and reset if the
// wall clock moved (NTP step, suspend) by more than 20 ms.
let offSec = 0;
let offNsec = 0;
let checkedAt = -Infinity; // monotonic second of the last calibration check
let lastSec = 0;
let lastNsec = 0;

function calibrate(hrSec: number, hrNsec: number): void {
  const wallMs = Date.now();
  const wallSec = Math.floor(wallMs / 1000);
  const wallNsec = (wallMs - wallSec * 1000) * 1_000_000;
  let s = wallSec - hrSec;
  let ns = wallNsec - hrNsec;
  if (ns < 0) {
    ns += 1_000_000_000;
    s -= 1;
  }
  offSec = s;
  offNsec = ns;
}

/**
 * The time readClock() last read: [0] seconds, [1] nanoseconds. A filesystem's data path reads
 * these two numbers right after readClock() instead of taking nowTimespec()'s array: a WRITE
 * stamps mtime/ctime under the filesystem's lock, and an allocation there can start a garbage
 * collection that holds the lock (and every other thread's request) for milliseconds.
 */
export const clockNow = new Float64Array(2);

/** Read the wall clock into clockNow (monotonic non-decreasing within a process); allocates nothing. */
export function readClock(): void {
  // performance.now(): monotonic milliseconds with nanosecond resolution, and unlike
  // process.hrtime() no array to allocate (this runs on the request path of every write).
  const ms = performance.now();
  const hrSec = Math.floor(ms / 1000);
  const hrNsec = Math.floor((ms - hrSec * 1000) * 1e6);
  if (hrSec - checkedAt >= 1) {
    const first = checkedAt === -Infinity;
    checkedAt = hrSec;
    if (first) {
      calibrate(hrSec, hrNsec);
    } else {
      const wallMs = Date.now();
      const oursMs = (hrSec + offSec) * 1000 + (hrNsec + offNsec) / 1e6;
      if (Math.abs(oursMs - wallMs) > 20) calibrate(hrSec, hrNsec);
    }
  }
  let sec = hrSec + offSec;
  let nsec = hrNsec + offNsec;
  if (nsec >= 1_000_000_000) {
    nsec -= 1_000_000_000;
    sec += 1;
  }
  // Never go backwards (a recalibration may step the offset back).
  if (sec < lastSec || (sec === lastSec && nsec < lastNsec)) {
    sec = lastSec;
    nsec = lastNsec;
  } else {
    lastSec = sec;
    lastNsec = nsec;
  }
  clockNow[0] = sec;
  clockNow[1] = nsec;
}

/** The current wall-clock time as [seconds, nanoseconds] (monotonic non-decreasing within a process). */
export function nowTimespec(): [number, number] {
  readClock();
  return [clockNow[0]!, clockNow[1]!];
}

/** A [sec, nsec] pair from milliseconds since the epoch (e.g. fs.Stats.mtimeMs). */
export function timespecFromMs(ms: number): [number, number] {
  const sec = Math.floor(ms / 1000);
  const nsec = Math.min(999_999_999, Math.max(0, Math.round((ms - sec * 1000) * 1e6)));
  return [sec, nsec];
}

const processUid = typeof process.getuid === "function" ? process.getuid() : 0;
const processGid = typeof process.getgid === "function" ? process.getgid() : 0;

/**
 * A complete Attr from a partial one. Defaults: ino 0, mode S_IFREG|0644, nlink 1, the process's
 * uid/gid, rdev 0, size 0, blocks = ceil(size / 512), blksize 4096, all times = now.
 */
export function makeAttr(partial: Partial<Attr> = {}): Attr {
  const [sec, nsec] = nowTimespec();
  const size = partial.size ?? 0;
  return {
    ino: partial.ino ?? 0,
    mode: partial.mode ?? (S_IFREG | 0o644),
    nlink: partial.nlink ?? 1,
    uid: partial.uid ?? processUid,
    gid: partial.gid ?? processGid,
    rdev: partial.rdev ?? 0,
    size,
    blocks: partial.blocks ?? Math.ceil(size / 512),
    blksize: partial.blksize ?? 4096,
    atime: partial.atime ?? sec,
    atimeNsec: partial.atimeNsec ?? nsec,
    mtime: partial.mtime ?? sec,
    mtimeNsec: partial.mtimeNsec ?? nsec,
    ctime: partial.ctime ?? sec,
    ctimeNsec: partial.ctimeNsec ?? nsec,
  };
}
