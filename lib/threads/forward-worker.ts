// A forwarding worker's engine (`--workers N` with a filesystem that stays on the main thread,
// lib/threads/pool.ts). This thread owns the io_uring of its queues (SINGLE_ISSUER: only it
// submits) and runs the same pump as single-thread mode (lib/transport/uring.ts), so READ/WRITE/
// FSYNC of backing-fd handles are answered in the shim inside fu_ring_enter, on this core.
// Every other request is posted to the main thread as its entry index, one message per reaped
// batch; the answer comes back as a commit message and goes out with the next enter.
//
// Waiting: while the main thread holds entries of this ring the pump does not block in the
// kernel (a commit message could not wake it there); it arms the ring's eventfd and returns to
// the event loop, which wakes for either a commit message or ring work. With nothing held it
// blocks in the ring like the single-thread engine.

import { JSCallback, type Pointer } from "bun:ffi";
import type { Sink, Slot, Source, SourceStats } from "../transport/types.ts";
import { UringSource } from "../transport/uring.ts";
import type { SessionStats } from "../session/stats.ts";
import type { RingEntries } from "../transport/forwarded.ts";
import type { FromWorker, RingPlan } from "./pool.ts";

export class ForwardEngine implements Sink {
  private ring: UringSource | null = null;
  private readonly doorbell: JSCallback;
  private batch: number[] = [];
  private scheduled = false;
  private readonly flushBound = () => this.flush();
  private wakeups = 0;
  private forwarded = 0;
  private final: SourceStats | null = null;
  private pinned = 0;
  /** Set when the ring stopped: the main thread has been told (and posted "ended"). */
  stoppedErrno: number | null = null;
  private stoppedResolve!: () => void;
  readonly stopped = new Promise<void>((r) => (this.stoppedResolve = r));

  constructor(private readonly fd: number, private readonly dataPlane: number | null, private readonly post: (m: FromWorker) => void) {
    this.doorbell = new JSCallback(() => {
      this.wakeups++;
      this.ring?.drain();
    }, { args: ["u32"], returns: "void", threadsafe: true });
  }

  /** Create the ring on this thread (throws UringError); returns where its entries live. */
  createRing(plan: RingPlan): RingEntries {
    const ring = new UringSource(this, {
      fd: this.fd, qids: plan.qids, totalQueues: plan.totalQueues, depth: plan.depth, pinnedDepth: plan.pinnedDepth, payloadSize: plan.payloadSize,
      setupFlags: plan.setupFlags, doorbell: this.doorbell.ptr!, dataPlane: (this.dataPlane as Pointer | null) ?? null,
      waitMicros: plan.waitMicros, nativeSyncMax: plan.nativeSyncMax, answeredElsewhere: true, pinToQueues: plan.pin, pinCpus: plan.cpus,
    });
    this.ring = ring;
    this.pinned = ring.pinnedBytes;
    const headers: number[] = [];
    const payloads: number[] = [];
    for (let i = 0; i < ring.slots.length; i++) {
      const a = ring.entryAddresses(i);
      headers.push(a.header);
      payloads.push(a.payload);
    }
    return { headers, payloads, payloadSize: plan.payloadSize };
  }

  start(): void {
    this.ring!.start();
  }

  // ---- Sink: what fu_ring_enter reaped that the data plane did not answer -------------------
  onRequest(slot: Slot): void {
    this.ring!.noteRequest();
    this.forwarded++;
    this.batch.push(slot.index);
    if (!this.scheduled) {
      // The pump dispatches a whole reaped batch, then lets microtasks run: one message per batch.
      this.scheduled = true;
      queueMicrotask(this.flushBound);
    }
  }

  /** Only handlers start ring I/O; they run on the main thread, whose backing I/O uses the thread pool. */
  onIoDone(_slot: Slot, _res: number): void {}

  onStopped(_source: Source, errno: number): void {
    this.ring!.markStopped();
    this.flush();
    this.stoppedErrno = errno;
    this.post({ type: "stopped", errno });
    this.stoppedResolve();
  }

  private flush(): void {
    this.scheduled = false;
    if (this.batch.length === 0) return;
    const idx = this.batch;
    this.batch = [];
    this.post({ type: "requests", idx });
  }

  /** Answers the main thread wrote in place: queue their COMMIT_AND_FETCH (next enter submits). */
  commit(pairs: number[]): void {
    const ring = this.ring;
    if (!ring) return;
    for (let i = 0; i + 1 < pairs.length; i += 2) {
      const rc = ring.reply(ring.slots[pairs[i]!]!, pairs[i + 1]!);
      // After STOPPED every entry is dead and a refusal only means the request is gone.
      if (rc < 0 && rc !== -107 && this.stoppedErrno === null) this.post({ type: "log", line: `fuse-uring: BUG: the ring refused the main thread's commit of entry ${pairs[i]} (errno ${-rc})` });
    }
  }

  /**
   * Free the ring (joins its watcher, cancels and reaps its I/O). keepMemory: a main-thread
   * handler never settled and may still write into an entry: leave the ring mapped (leak) and
   * only wait, bounded, for it to stop so the fd number is not reused under it.
   */
  async close(keepMemory: boolean): Promise<void> {
    if (!this.ring) return;
    if (keepMemory) {
      await Promise.race([this.stopped, Bun.sleep(2000)]);
      this.final = this.ring.stats();
      return;
    }
    this.ring.destroy();
    this.final = this.ring.stats();
    this.ring = null;
    this.doorbell.close();
  }

  /** This thread's row and counters; merged into the main session's stats (mergeStats). */
  stats(): Partial<SessionStats> {
    const u = this.ring?.stats() ?? this.final;
    const native = u?.nativeRequests ?? 0;
    return {
      wakeups: this.wakeups, cqes: u?.cqes ?? 0, submits: u?.submits ?? 0, enters: u?.enters ?? 0, fixedIo: u?.fixedIo ?? 0,
      pinnedBytes: this.pinned, nativeRequests: native, nativeSync: u?.nativeSync ?? 0, nativeAsync: u?.nativeAsync ?? 0, nativeDirect: u?.nativeDirect ?? 0, nativeFlushes: u?.nativeFlushes ?? 0, nativeGetattrs: u?.nativeGetattrs ?? 0, nativeReleases: u?.nativeReleases ?? 0, nativeLookups: u?.nativeLookups ?? 0, directFallbacks: u?.directFallbacks ?? 0, waitTimers: u?.waitTimers ?? 0, nativeReadBytes: u?.nativeReadBytes ?? 0,
      nativeWriteBytes: u?.nativeWriteBytes ?? 0, nativeErrors: u?.nativeErrors ?? 0, nativeInflightMax: u?.nativeInflightMax ?? 0,
      ringRecovered: u?.recovered ?? 0, errors: u?.errors ?? 0, inflightMax: u?.inflightMax ?? 0, fixedBuffers: u?.fixedBuffers ?? false, fixedFile: u?.fixedFile ?? false,
      threads: [{
        thread: "worker", requests: native + this.forwarded, wakeups: this.wakeups, enters: u?.enters ?? 0, cqes: u?.cqes ?? 0,
        ...(this.ring?.pinnedCpus ? { cpus: this.ring.pinnedCpus } : {}),
      }],
    };
  }
}
