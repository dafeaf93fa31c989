// JIT tiers of the daemon process (Bun's JavaScriptCore): the built-in passthrough runs without
// the top tier (FTL).
//
// The passthrough's JS is thin glue between the ring and its backing syscalls (a GETATTR is one
// statx; file data never reaches JS), so the top tier buys little at run time, but compiling it
// is expensive: every thread's VM compiles its own copy of each hot handler, the large inlined
// ones take 40–100 ms of CPU each on this machine, and code is recompiled as a workload's phases
// change (create, stat, unlink). Measured on create+stat+unlink of 3,000 files, six passes on
// one daemon: the JIT thread used 227 ticks (a quarter of the daemon's CPU), still 29–56 per
// pass after 18,000 files; with the DFG tier as the top one, 49 ticks in all, while the ring
// threads' own time per pass stayed the same (docs/ARCHITECTURE.md, "JIT tiers").
//
// JavaScriptCore reads its options once, at process start, from BUN_JSC_* variables, so the
// mount command re-executes itself (same pid, same descriptors) with BUN_JSC_useFTLJIT=0 before
// it does anything else. A variable the user set (any value) is left alone: BUN_JSC_useFTLJIT=1
// keeps FTL. Scripts keep every tier (their handlers may be CPU-heavy JS).

/** Re-execute this process with the DFG tier as the top JIT tier; returns only if it did not. */
export function reexecWithoutFtl(): void {
  if (process.env.BUN_JSC_useFTLJIT !== undefined) return;
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string | undefined>) => never }).execve;
  if (typeof execve !== "function") return;
  // A standalone binary (bun build --compile) runs its embedded entry: argv[1] is that entry's
  // virtual path, not an argument to pass again.
  const standalone = Bun.main.startsWith("/$bunfs/");
  const args = standalone ? process.argv.slice(2) : [...process.execArgv, ...process.argv.slice(1)];
  try {
    execve.call(process, process.execPath, [process.execPath, ...args], { ...process.env, BUN_JSC_useFTLJIT: "0" });
  } catch {
    // execve refused (e.g. the binary is gone): run on with every tier.
  }
}
