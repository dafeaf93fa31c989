// Per-opcode latency (arrival → answer handed to the transport) in fixed-size log-linear
// histograms, HDR style: 4 linear buckets per power of two of microseconds, so a percentile
// (reported as its bucket's upper bound) is at most 25 % above the true value. One preallocated Float64Array for all opcodes: recording is a few
// arithmetic ops and an increment, no allocation on the request path.

/** Sub-buckets per power of two (2^SUB_BITS). */
const SUB_BITS = 2;
const SUB = 1 << SUB_BITS;
/** Buckets per opcode: values up to 2^32 µs (71 minutes) fit, larger ones land in the last. */
const BUCKETS = SUB + (32 - SUB_BITS) * SUB;
/** Opcodes are < 64 (the session counts per opcode the same way). */
const OPS = 64;

export interface LatencySummary {
  count: number;
  /** Microseconds (bucket upper bound, capped at max: at most 25 % above the true value). */
  p50: number;
  p99: number;
  /** Exact largest value seen, µs. */
  max: number;
  /** Mean, µs. */
  mean: number;
}

/** Bucket of a latency in whole microseconds. */
export function bucketOf(us: number): number {
  if (us < SUB) return us < 0 ? 0 : us | 0;
  if (us >= 4294967295) return BUCKETS - 1;
  const v = us >>> 0;
  const exp = 31 - Math.clz32(v); // ≥ SUB_BITS
  const sub = (v >>> (exp - SUB_BITS)) & (SUB - 1);
  return SUB + (exp - SUB_BITS) * SUB + sub;
}

/** Largest value (µs) that falls in bucket `b`. */
export function bucketUpper(b: number): number {
  if (b < SUB) return b;
  const exp = ((b - SUB) >> SUB_BITS) + SUB_BITS;
  const sub = (b - SUB) & (SUB - 1);
  return (SUB + sub + 1) * 2 ** (exp - SUB_BITS) - 1;
}

/**
 * Stages of a request on the ring, for `stats.stageLatencyUs` (rows of a LatencyHistograms):
 * batch — the owner came back from io_uring_enter with the request → its turn in that batch
 * (records before it in the batch were handled first); handler — its turn → the answer;
 * commit — the answer → the io_uring_enter that submits it to the kernel.
 */
export const STAGES = ["batch", "handler", "commit"] as const;
export const STAGE_BATCH = 0, STAGE_HANDLER = 1, STAGE_COMMIT = 2;
export const stageName = (i: number): string => STAGES[i] ?? `stage${i}`;

export class LatencyHistograms {
  private readonly counts = new Float64Array(OPS * BUCKETS);
  private readonly max = new Float64Array(OPS);
  private readonly sum = new Float64Array(OPS);
  private readonly total = new Float64Array(OPS);

  record(opcode: number, micros: number): void {
    const op = opcode & (OPS - 1);
    this.counts[op * BUCKETS + bucketOf(micros)]!++;
    this.total[op]!++;
    this.sum[op]! += micros;
    if (micros > this.max[op]!) this.max[op] = micros;
  }

  private percentile(op: number, q: number): number {
    const n = this.total[op]!;
    const rank = Math.max(1, Math.ceil(n * q));
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.counts[op * BUCKETS + b]!;
      if (seen >= rank) return Math.round(Math.min(bucketUpper(b), this.max[op]!) * 10) / 10;
    }
    return Math.round(this.max[op]! * 10) / 10;
  }

  /** Summaries of the opcodes seen so far, keyed by opcode. */
  summarize(nameOf: (op: number) => string): Record<string, LatencySummary> {
    const out: Record<string, LatencySummary> = {};
    for (let op = 0; op < OPS; op++) {
      const n = this.total[op]!;
      if (!n) continue;
      out[nameOf(op)] = {
        count: n,
        p50: this.percentile(op, 0.5),
        p99: this.percentile(op, 0.99),
        max: Math.round(this.max[op]! * 10) / 10,
        mean: Math.round((this.sum[op]! / n) * 10) / 10,
      };
    }
    return out;
  }
}
