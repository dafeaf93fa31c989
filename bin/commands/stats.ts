// `fuse-uring stats MNT [--once] [--json]`: a running daemon's live counters, found from the
// mountpoint alone (mount device → the file the daemon publishes, see bin/runtime.ts), shown
// as a table that refreshes every second like top. Never touches the FUSE mount itself, so it
// also works when the filesystem is wedged.

import { readFileSync } from "node:fs";
import { fuseDeviceAt } from "../../lib/mountpoint.ts";
import type { MountStats } from "../../lib/mount.ts";
import { statsPathFor } from "../runtime.ts";

export interface StatsCommand {
  kind: "stats";
  mountpoint: string;
  once: boolean;
  json: boolean;
}

export type Snapshot = MountStats & { pid: number; version: string; label: string; device: string };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === "EPERM";
  }
}

/** The daemon's current snapshot, or an explanation of why there is none. */
export function readSnapshot(mountpoint: string): Snapshot | string {
  const dev = fuseDeviceAt(mountpoint);
  if (!dev) return `${mountpoint} is not a FUSE mount`;
  const path = statsPathFor(dev);
  let snap: Snapshot;
  try {
    snap = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    const code = (e as { code?: string }).code;
    return code === "ENOENT"
      ? `no fuse-uring daemon publishes stats for ${mountpoint} (device ${dev}; looked for ${path}): is it served by \`fuse-uring mount\`?`
      : `cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`;
  }
  if (!alive(snap.pid)) return `the daemon of ${mountpoint} (pid ${snap.pid}) is gone; ${path} is stale`;
  return snap;
}

function mib(n: number): string {
  return `${(n / 1048576).toFixed(1)} MiB`;
}

function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(Math.floor(s / 3600))}:${pad(Math.floor(s / 60) % 60)}:${pad(s % 60)}`;
}

function micros(us: number): string {
  return us >= 10000 ? `${(us / 1000).toFixed(0)}ms` : us >= 1000 ? `${(us / 1000).toFixed(1)}ms` : `${Math.round(us)}µs`;
}

/**
 * The table. Rates come from the previous snapshot when there is one (live view), else they are
 * the average since the mount started (--once).
 */
export function formatSnapshot(s: Snapshot, prev: Snapshot | null): string {
  const dt = prev && s.uptimeMs > prev.uptimeMs ? (s.uptimeMs - prev.uptimeMs) / 1000 : s.uptimeMs / 1000;
  const base = prev && s.uptimeMs > prev.uptimeMs ? prev : null;
  const requests = s.ringRequests + s.devRequests;
  const transport = s.transport === "uring" ? `uring (${s.ringQueues} queues × ${s.ringDepth} entries, ${s.bufferPools === "active" ? "payloads in buffer pools" : `${s.ringPinnedDepth ?? s.ringDepth} pinned`})` : s.transport;
  const lines = [
    `fuse-uring ${s.version}  ${s.mountpoint}  (${s.label})  pid ${s.pid}  up ${duration(s.uptimeMs)}`,
    `transport ${transport}: ${s.transportReason}`,
    `requests ${requests} (ring ${s.ringRequests}, /dev/fuse ${s.devRequests})  errors ${s.errors}  interrupts ${s.interrupts}  forgets ${s.forgets}`,
    `in flight ${s.inflight} of ${s.slots} slots (max ${s.inflightMax})${s.queueInflight?.length ? `  queues [${s.queueInflight.map((n) => `${n}/${s.ringDepth}`).join(" ")}]` : ""}  pinned ${mib(s.pinnedBytes)}  fixed buffers ${s.fixedBuffers ? "yes" : "no"} (${s.fixedIo} fixed I/O)  wakeups ${s.wakeups}`,
    "",
    `${"OPCODE".padEnd(16)}${(base ? "REQ/S" : "REQ/S avg").padStart(10)}${"TOTAL".padStart(10)}${"P50".padStart(9)}${"P99".padStart(9)}${"MAX".padStart(9)}`,
  ];
  const ops = Object.entries(s.ops).sort((a, b) => b[1] - a[1]);
  for (const [op, total] of ops) {
    const rate = dt > 0 ? (total - (base?.ops[op] ?? 0)) / dt : 0;
    const l = s.latencyUs[op];
    lines.push(
      `${op.padEnd(16)}${rate.toFixed(1).padStart(10)}${String(total).padStart(10)}` +
        (l ? `${micros(l.p50).padStart(9)}${micros(l.p99).padStart(9)}${micros(l.max).padStart(9)}` : ""),
    );
  }
  if (!ops.length) lines.push("(no requests yet)");
  const stages = Object.entries(s.stageLatencyUs ?? {});
  if (stages.length) {
    lines.push("", `${"RING STAGE".padEnd(16)}${"".padStart(10)}${"COUNT".padStart(10)}${"P50".padStart(9)}${"P99".padStart(9)}${"MAX".padStart(9)}`);
    for (const [st, l] of stages) lines.push(`${st.padEnd(16)}${"".padStart(10)}${String(l.count).padStart(10)}${micros(l.p50).padStart(9)}${micros(l.p99).padStart(9)}${micros(l.max).padStart(9)}`);
  }
  if (s.nativeRequests) lines.push("", `native data plane: ${s.nativeRequests} requests (direct ${s.nativeDirect ?? 0}, async ${s.nativeAsync ?? 0}, sync ${s.nativeSync ?? 0}, fallbacks ${s.directFallbacks ?? 0}, FLUSH ${s.nativeFlushes ?? 0}, GETATTR ${s.nativeGetattrs ?? 0})`);
  return lines.join("\n") + "\n";
}

export async function stats(cmd: StatsCommand): Promise<number> {
  const first = readSnapshot(cmd.mountpoint);
  if (typeof first === "string") {
    process.stderr.write(`fuse-uring: ${first}\n`);
    return 1;
  }
  if (cmd.once) {
    process.stdout.write(cmd.json ? JSON.stringify(first, null, 2) + "\n" : formatSnapshot(first, null));
    return 0;
  }
  const tty = process.stdout.isTTY === true;
  let prev: Snapshot | null = null;
  let snap: Snapshot | string = first;
  let stop = false;
  process.on("SIGINT", () => void (stop = true));
  while (!stop) {
    if (typeof snap === "string") {
      process.stderr.write(`fuse-uring: ${snap}\n`);
      return 0; // the daemon stopped while we watched
    }
    if (cmd.json) process.stdout.write(JSON.stringify(snap) + "\n");
    else process.stdout.write((tty ? "\x1b[H\x1b[2J" : prev ? "\n" : "") + formatSnapshot(snap, prev));
    // Keep the older snapshot until the daemon wrote a newer one (both tick once a second).
    if (!prev || snap.uptimeMs > prev.uptimeMs) prev = snap;
    await Bun.sleep(1000);
    snap = readSnapshot(cmd.mountpoint);
  }
  return 0;
}
