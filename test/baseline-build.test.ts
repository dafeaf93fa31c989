// Builds target the architecture's baseline CPU, never the build machine's (build.zig defaults
// to -mcpu baseline; scripts/pack.sh and scripts/compile.sh name baseline triples). A shim built
// for this machine's CPU carried >1000 AVX/AVX-512/BMI2 instructions and died with SIGILL on an
// x86-64 without them. Here every instruction of the built shims is checked against x86-64-v1
// (SSE2; nothing from SSE3 on, no VEX/EVEX, no BMI, no POPCNT/LZCNT/MOVBE/CMPXCHG16B).
// The running proof on a CPU without AVX is test/vm/baseline-cpu.guest.ts (scripts/test-guest.sh).
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { arch } from "node:os";
import { REPO } from "./helpers/env.ts";

// Mnemonics beyond x86-64-v1 (SSE3, SSSE3, SSE4.1/4.2, AVX* (every VEX/EVEX form starts with
// "v"), BMI1/2, ADX, SHA, AES, CLMUL, POPCNT, LZCNT, MOVBE, CMPXCHG16B, XSAVE, RDRAND).
const BEYOND_V1 = new RegExp(
  "^(v\\w+|addsubp[sd]|h(add|sub)p[sd]|lddqu|mov[sd]dup|movs[hl]dup|fisttp\\w*|monitor|mwait|pabs[bwd]|palignr|" +
    "ph(add|sub)(w|d|sw)|pmaddubsw|pmulhrsw|pshufb|psign[bwd]|blendv?p[sd]|dpp[sd]|extractps|insertps|movntdqa|" +
    "mpsadbw|packusdw|pblend(vb|w)|pcmpeqq|pextr[bdq]|pinsr[bdq]|phminposuw|pm(ax|in)(sb|sd|ud|uw)|pmov[sz]x\\w+|" +
    "pmuldq|pmulld|ptest|round[ps][sd]|crc32\\w*|pcmp[ei]str[im]|pcmpgtq|popcnt|lzcnt|tzcnt|movbe|andn|bextr|blsi|" +
    "blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|cmpxchg16b|adcx|adox|sha\\w+|aes\\w+|pclmulqdq|rdrand|" +
    "rdseed|xsave\\w*|xrstor\\w*)$",
);
const PREFIXES = new Set(["lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd", "data16", "cs", "ds"]);

/** Instructions of `so` beyond x86-64-v1, counted by mnemonic. */
function beyondBaseline(so: string): Map<string, number> {
  const r = Bun.spawnSync(["objdump", "-d", "--no-show-raw-insn", so]);
  if (r.exitCode !== 0) throw new Error(`objdump -d ${so} failed (binutils installed? scripts/setup.sh installs it): ${r.stderr}`);
  const hits = new Map<string, number>();
  let total = 0;
  for (const line of r.stdout.toString().split("\n")) {
    const insn = line.split("\t")[1];
    if (insn === undefined) continue;
    const words = insn.trim().split(/\s+/);
    let m = words[0];
    if (!m) continue;
    total++;
    if (PREFIXES.has(m) && words[1]) m = words[1];
    if (BEYOND_V1.test(m) || /%[yz]mm|%k[0-7]\b/.test(insn)) hits.set(m, (hits.get(m) ?? 0) + 1);
  }
  if (total < 1000) throw new Error(`objdump -d ${so}: only ${total} instructions — not a real disassembly`);
  return hits;
}

const SHIMS = [
  { path: `${REPO}/zig-out/lib/libfuse_uring_shim.so`, what: "the checkout's shim (scripts/setup.sh)", required: true },
  { path: `${REPO}/prebuilt/linux-x64/libfuse_uring_shim.so`, what: "the packed x64 shim (scripts/pack.sh)", required: false },
  { path: `${REPO}/dist/shim/libfuse_uring_shim.so`, what: "the shim embedded in dist/fuse-uring", required: false },
];

if (arch() === "x64") describe("x86-64 builds use no instruction beyond the baseline", () => {
  test("the detector sees what it must: a native-CPU build's kind of instructions count", () => {
    expect(BEYOND_V1.test("vmovdqu")).toBe(true);
    expect(BEYOND_V1.test("shlx")).toBe(true);
    expect(BEYOND_V1.test("popcnt")).toBe(true);
    expect(BEYOND_V1.test("pshufb")).toBe(true);
    expect(BEYOND_V1.test("movdqu")).toBe(false);
    expect(BEYOND_V1.test("pcmpeqb")).toBe(false);
  });
  for (const s of SHIMS) {
    const present = existsSync(s.path);
    test(`${s.what}: ${s.path.slice(REPO.length + 1)}${present || s.required ? "" : " (not built in this checkout: nothing to check)"}`, () => {
      if (!present) {
        expect(s.required, `${s.path} missing: run scripts/setup.sh`).toBe(false);
        return;
      }
      const hits = beyondBaseline(s.path);
      expect(Object.fromEntries(hits), `instructions beyond x86-64-v1 in ${s.path}`).toEqual({});
    });
  }
});

else describe(`builds on ${arch()}`, () => {
  test(`${arch()}: the shim is built (the instruction check is written for x86-64; build.zig's -mcpu baseline holds for every arch)`, () => {
    expect(existsSync(`${REPO}/zig-out/lib/libfuse_uring_shim.so`)).toBe(true);
  });
});
