// The seam between wire transports and the session. Both transports present requests in one
// layout — the io_uring entry layout (struct fuse_uring_req_header + payload buffer) — so the
// session decodes one format. Views over native memory are created once per slot.

export type TransportKind = "classic" | "uring";

/** One request slot: header + payload, views over native memory owned by the shim. */
export interface Slot {
  readonly source: Source;
  readonly index: number;
  /** 288-byte header: in_out @0 (in_header / out_header), op_in @128, ent_in_out @256. */
  readonly header: DataView;
  readonly headerBytes: Uint8Array;
  /**
   * The payload buffer: request args after op_in, and the reply's out args. Fixed per slot,
   * except on an io_uring queue with a buffer pool (FUSE 7.46), where the transport points
   * these three at the request's pool buffer when it arrives (views made once per buffer).
   */
  payload: Uint8Array;
  payloadView: DataView;
  /** Buffer over the same bytes (string decoding/encoding). */
  payloadText: Buffer;
}

/** One set of views over a payload buffer (a slot's own, or one buffer of a pool). */
export interface PayloadViews {
  payload: Uint8Array;
  payloadView: DataView;
  payloadText: Buffer;
}

export interface SourceStats {
  requests: number;
  wakeups: number;
  cqes: number;
  submits: number;
  errors: number;
  fixedIo: number;
  fixedBuffers?: boolean;
  /** uring: /dev/fuse is registered as the ring's fixed file (no fget per entry command). */
  fixedFile?: boolean;
  /** io_uring_enter calls (ring). */
  enters?: number;
  /** Requests answered by the native data plane, without JS. */
  nativeRequests?: number;
  nativeReadBytes?: number;
  nativeWriteBytes?: number;
  nativeErrors?: number;
  nativeInflightMax?: number;
  /** Native reads/writes done synchronously on the ring's owner thread. */
  nativeSync?: number;
  /** Native reads/writes submitted as READ_FIXED/WRITE_FIXED and answered from the completion. */
  nativeAsync?: number;
  /** Native requests on O_DIRECT handles (backing page cache bypassed). */
  nativeDirect?: number;
  /** FLUSHes answered natively (close(dup()) of a backingFlush handle). */
  nativeFlushes?: number;
  /** GETATTRs the shim answered from the node table (ABI 7). */
  nativeGetattrs?: number;
  /** RELEASEs the shim answered (close of a backingRelease handle; ABI 8). */
  nativeReleases?: number;
  /** LOOKUPs of missing names the shim answered from the node table (ABI 8). */
  nativeLookups?: number;
  /** Direct reads/writes refused for alignment (EINVAL) and redone on the buffered descriptor. */
  directFallbacks?: number;
  /** Wait timers queued by the ring engine (one bounds many blocking waits). */
  waitTimers?: number;
  /** Ring commands retried / entries registered again after an unexpected error. */
  recovered?: number;
  /** Most ring entries held at once (JS + native). */
  inflightMax?: number;
  /** Times the ring's owner went idle (eventfd armed). */
  idles?: number;
  /** FUSE 7.46 buffer pools: queues with a pool, queues that fell back (kernel refused), the
   *  refusal's errno; zero-copy queues and the READ/WRITEs done at the client's pages. */
  poolQueues?: number;
  poolRefused?: number;
  poolErrno?: number;
  zeroCopyQueues?: number;
  zeroCopyErrno?: number;
  zeroCopyRequests?: number;
  zeroCopyBytes?: number;
}

/** A producer of requests: the /dev/fuse reader, or the FUSE io_uring. */
export interface Source {
  readonly kind: TransportKind;
  readonly slots: readonly Slot[];
  /** Drain arrived completions; calls the sink for each. */
  drain(): void;
  /**
   * Send the reply already written in slot (out_header at 0, `payloadLen` bytes of payload).
   * May return the native result: < 0 = -errno, the reply was refused (ENOENT/ENODEV/
   * ENOTCONN/ECONNABORTED: the request is gone, e.g. interrupted or the connection aborted;
   * anything else is a bug the session reports).
   */
  reply(slot: Slot, payloadLen: number): number | void;
  /** Give the slot back without a reply (FORGET, INTERRUPT, …). */
  release(slot: Slot): void;
  /** End of a batch: submit what reply() queued. */
  flush(): void;
  stop(): void;
  destroy(): void;
  stats(): SourceStats;
  readonly pinnedBytes: number;
  /** io_uring with buffer pools: point the slot at the pool buffer of the request that just
   *  arrived in it (called before the sink sees the request). */
  bindPayload?(slot: Slot): void;
}

export interface Sink {
  onRequest(slot: Slot): void;
  onIoDone(slot: Slot, res: number): void;
  onStopped(source: Source, errno: number): void;
  /**
   * The ring answered the RELEASE of the natively served handle in data plane slot `slot`
   * (closed its descriptor). Only a sink that has this gets native RELEASEs; called between
   * enters on the ring's owner thread, before the requests of the enter that collected it.
   */
  onNativeRelease?(slot: number): void;
  /** Ring pump (optional, for the stage histograms): about to enter the kernel (submitting the
   *  answers queued since the last enter), and back from it with records (performance.now()). */
  entering?(now: number): void;
  entered?(now: number): void;
}

export const COMPLETION_REQUEST = 0;
export const COMPLETION_IO_DONE = 1;
export const COMPLETION_STOPPED = 2;
