// Runs only in the baseline-CPU guest (scripts/test-guest.sh: `scripts/vm.sh --cpu Nehalem`,
// Bun's own baseline build as the runner): builds are for the architecture's baseline, never for
// the build machine's CPU. The shim that scripts/setup.sh built in this checkout and the
// standalone dist/fuse-uring (scripts/compile.sh) mount memfs and move data on a CPU without
// AVX/AVX2/AVX-512 — an instruction beyond it would kill the daemon with SIGILL.
// (Nehalem = x86-64-v2: Bun itself needs SSE4.2, so no Bun program runs on less; the shim's own
// x86-64-v1 baseline is checked instruction by instruction in test/baseline-build.test.ts.)
import { describe, expect } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { writeFileSync, rmSync } from "node:fs";
import {
  BUN,
  CLI,
  REPO,
  TMPFS,
  cleanupAfterEach,
  fmt,
  fuseTest,
  run,
  sha256,
  shOk,
  startDaemon,
  withEnableUring,
} from "../helpers/index.ts";

const flags = new Set((/^flags\s*:\s*(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "").split(" "));
const DIST = `${REPO}/dist/fuse-uring`;

async function roundTrip(mnt: string): Promise<void> {
  const src = `${TMPFS}/fuse-uring-baseline-${process.pid}`;
  const data = randomBytes((1 << 20) + 4097); // 1 MiB and an unaligned tail
  writeFileSync(src, data);
  try {
    const out = await shOk(`cp "$1" "$2/blob" && sha256sum < "$2/blob" | cut -d' ' -f1 && echo baseline > "$2/f" && cat "$2/f"`, [src, mnt], { timeoutMs: 60_000 });
    expect(out).toBe(`${sha256(data)}\nbaseline\n`);
  } finally {
    rmSync(src, { force: true });
  }
}

describe(`baseline CPU (${process.env.FUSE_URING_BASELINE_CPU ?? "?"}): checkout shim and standalone binary`, () => {
  cleanupAfterEach();
  withEnableUring("Y");

  fuseTest("the guest CPU really lacks AVX, AVX2 and AVX-512", () => {
    expect(process.env.FUSE_URING_BASELINE_CPU, "run by scripts/test-guest.sh in the baseline guest").toBeString();
    expect(flags.has("sse2"), [...flags].join(" ")).toBe(true);
    for (const f of ["avx", "avx2", "avx512f", "bmi2"]) expect(flags.has(f), `cpu flag ${f}`).toBe(false);
  });

  fuseTest("the shim built by scripts/setup.sh (zig-out) loads and serves memfs over io_uring", async () => {
    const doc = await run([BUN, CLI, "doctor", "--json"], { timeoutMs: 60_000 });
    expect(doc.code, fmt(doc)).toBe(0);
    expect(JSON.parse(doc.stdout).shim).toBe(`${REPO}/zig-out/lib/libfuse_uring_shim.so`);
    const d = await startDaemon(["--transport", "uring"], { readyTimeoutMs: 60_000 });
    expect(d.transport).toBe("uring");
    await roundTrip(d.mnt);
    expect(await d.stop("SIGTERM", 30_000)).toBe(0);
  }, 120_000);

  fuseTest("dist/fuse-uring (npm run compile) serves memfs", async () => {
    expect(existsSync(DIST), `${DIST} missing: scripts/test-guest.sh runs scripts/compile.sh first`).toBe(true);
    const d = await startDaemon([], { command: (mnt) => [DIST, "mount", "--memfs", mnt, "--transport", "uring"], readyTimeoutMs: 60_000 });
    expect(d.transport).toBe("uring");
    await roundTrip(d.mnt);
    expect(await d.stop("SIGTERM", 30_000)).toBe(0);
  }, 120_000);
});
