// Pinning a ring's owner thread to the CPUs of the queues it serves. The kernel puts a request
// on the queue of the CPU its caller runs on and wakes the thread that submitted that queue's
// entries; when that thread sleeps on the same CPU the wake-up is local, otherwise it costs an
// inter-processor interrupt (expensive in a VM). libfuse pins each ring thread to its queue's
// CPU for the same reason. Only worker threads are pinned (a thread serving every queue gains
// nothing), and only within the CPUs the process may use (taskset is respected).

import { dlopen, FFIType } from "bun:ffi";

const MASK_BYTES = 128; // 1024 CPUs

let libc: { sched_getaffinity: (pid: number, size: number, mask: Uint8Array) => number; sched_setaffinity: (pid: number, size: number, mask: Uint8Array) => number } | null | undefined;

function load(): typeof libc {
  if (libc !== undefined) return libc;
  try {
    const sym = { args: [FFIType.i32, FFIType.u64, FFIType.ptr], returns: FFIType.i32 } as const;
    libc = dlopen("libc.so.6", { sched_getaffinity: sym, sched_setaffinity: sym }).symbols as unknown as typeof libc;
  } catch {
    libc = null; // not glibc: stay unpinned (a speed matter only)
  }
  return libc;
}

/**
 * Pin the calling thread to `cpus` ∩ its current affinity. Returns the CPUs it is pinned to, or
 * null when nothing changed (no libc, no overlap, or the call failed).
 */
export function pinCurrentThread(cpus: number[]): number[] | null {
  const c = load();
  if (!c) return null;
  const allowed = new Uint8Array(MASK_BYTES);
  if (c.sched_getaffinity(0, MASK_BYTES, allowed) < 0) return null;
  const mask = new Uint8Array(MASK_BYTES);
  const chosen: number[] = [];
  for (const cpu of cpus) {
    if (cpu < 0 || cpu >= MASK_BYTES * 8 || !(allowed[cpu >> 3]! & (1 << (cpu & 7)))) continue;
    mask[cpu >> 3]! |= 1 << (cpu & 7);
    chosen.push(cpu);
  }
  if (chosen.length === 0) return null;
  // pid 0 = the calling thread (sched_setaffinity is per thread on Linux).
  return c.sched_setaffinity(0, MASK_BYTES, mask) === 0 ? chosen : null;
}

/** CPUs the calling thread may run on (its affinity mask; the process's, for the main thread). [] if unknown. */
export function allowedCpus(): number[] {
  const c = load();
  if (!c) return [];
  const mask = new Uint8Array(MASK_BYTES);
  if (c.sched_getaffinity(0, MASK_BYTES, mask) < 0) return [];
  const out: number[] = [];
  for (let cpu = 0; cpu < MASK_BYTES * 8; cpu++) if (mask[cpu >> 3]! & (1 << (cpu & 7))) out.push(cpu);
  return out;
}
