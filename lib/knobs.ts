// Every FUSE_URING_* environment knob, read in one place (nothing else reads process.env for
// them). Three kinds:
//   install  where things are (the shim, the stats directory): environment only;
//   tuning   measured defaults that experiments and benchmarks change: each has a CLI flag of
//            `fuse-uring mount` (the flag wins; the environment keeps working);
//   test     fault injection and checks for the test suite: `--test NAME[=VALUE]` or the
//            environment; never needed in normal use (`fuse-uring doctor` warns when one is set).
// Scripts and the test harness have a few of their own (FUSE_URING_PACK_ARCHES in
// scripts/pack.sh, FUSE_URING_TRANSPORTS and FUSE_TEST_WORKERS in test/helpers): not the daemon's.
// This module imports nothing, so every layer may use it.

export type KnobKind = "install" | "tuning" | "test";

export interface KnobSpec {
  env: string;
  kind: KnobKind;
  /** The CLI equivalent (tuning: a `mount` flag; test: `--test NAME[=VALUE]`). */
  flag?: string;
  what: string;
}

export const KNOBS: readonly KnobSpec[] = [
  { env: "FUSE_URING_SHIM", kind: "install", what: "path of the native shim to load instead of the one found next to the library" },
  { env: "FUSE_URING_SHIM_DIR", kind: "install", what: "directory (exec allowed) where the standalone binary extracts its shim" },
  { env: "FUSE_URING_RUNTIME_DIR", kind: "install", what: "where a daemon publishes its live stats for `fuse-uring stats`" },
  { env: "FUSE_URING_SLOW_MS", kind: "tuning", flag: "--slow-request-ms MS", what: "log a request still pending after MS ms (default 10000; 0: never)" },
  { env: "FUSE_URING_FIXED_BUFFERS", kind: "tuning", flag: "--no-fixed-buffers", what: "0: backing I/O with plain READ/WRITE instead of registered buffers" },
  { env: "FUSE_URING_ZERO_COPY", kind: "tuning", flag: "--no-zero-copy", what: "0: natively served files go through the buffer pool instead of the caller's pages (Linux >= 7.3)" },
  { env: "FUSE_URING_WAIT_US", kind: "tuning", flag: "--ring-wait-us US", what: "µs a ring's owner blocks in the kernel before its event loop runs (default 10000)" },
  { env: "FUSE_URING_RING_FLAGS", kind: "tuning", flag: "--ring-flags N", what: "io_uring setup flags (default SINGLE_ISSUER | DEFER_TASKRUN)" },
  { env: "FUSE_URING_NATIVE_SYNC_MAX", kind: "tuning", flag: "--native-sync-max BYTES", what: "native transfers up to BYTES run synchronously on the ring's thread (default: by queues per ring)" },
  { env: "FUSE_URING_NATIVE_GETATTR", kind: "tuning", flag: "--no-native-getattr", what: "0: GETATTR and LOOKUP of missing names always go to the filesystem's handlers (no native node table)" },
  { env: "FUSE_URING_NO_PIN", kind: "tuning", flag: "--no-pin", what: "1: worker threads are not pinned to their queues' CPUs" },
  { env: "FUSE_URING_SPIN_US", kind: "tuning", flag: "--lock-spin-us US", what: "µs a thread spins on a shared filesystem lock before sleeping (default 20)" },
  { env: "FUSE_URING_POISON", kind: "test", flag: "--test poison", what: "1: fill unused payload bytes with a pattern and check it on reuse" },
  { env: "FUSE_URING_POOL_FAULT", kind: "test", flag: "--test pool-fault=refuse", what: "refuse: ask ADD_BUFPOOL for a pool the kernel refuses (the per-entry fallback)" },
  { env: "FUSE_URING_FAULT", kind: "test", flag: "--test fault=SPEC", what: "inject faults (comma-separated): bad-commit (the ring), worker-exit:W:K or worker-throw:W:K (worker W fails in its K+1-th handler), no-fusectl (a fail-stop acts as without fusectl)" },
];

function raw(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
}

function num(name: string): number | undefined {
  const v = raw(name);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** The knobs set in this environment, with their values (for `fuse-uring doctor`). */
export function setKnobs(): { spec: KnobSpec; value: string }[] {
  return KNOBS.flatMap((spec) => {
    const value = raw(spec.env);
    return value === undefined ? [] : [{ spec, value }];
  });
}

/**
 * A CLI flag whose consumer runs on other threads or reads its knob at load time (the lock spin
 * of the memfs copies): set for this process, so threads started from now on see it too.
 */
export function setKnob(env: string, value: string): void {
  process.env[env] = value;
}

export const knobs = {
  shimPath: () => raw("FUSE_URING_SHIM"),
  runtimeDir: () => raw("FUSE_URING_RUNTIME_DIR"),
  slowRequestMs: () => num("FUSE_URING_SLOW_MS"),
  fixedBuffers: () => raw("FUSE_URING_FIXED_BUFFERS") !== "0",
  zeroCopy: () => raw("FUSE_URING_ZERO_COPY") !== "0",
  ringWaitMicros: () => num("FUSE_URING_WAIT_US"),
  ringSetupFlags: () => num("FUSE_URING_RING_FLAGS"),
  nativeSyncMax: () => num("FUSE_URING_NATIVE_SYNC_MAX") ?? null,
  nativeGetattr: () => raw("FUSE_URING_NATIVE_GETATTR") !== "0",
  pinWorkers: () => raw("FUSE_URING_NO_PIN") !== "1",
  /** The shared locks' spin before sleeping, µs (memfs copies; default 20). */
  lockSpinMicros: () => num("FUSE_URING_SPIN_US") ?? 20,
  poison: () => raw("FUSE_URING_POISON") === "1",
  fault: () => raw("FUSE_URING_FAULT") ?? "",
  poolFault: () => raw("FUSE_URING_POOL_FAULT") ?? "",
};
