// `fuse-uring doctor [--json]`: one OK/WARN/FAIL line per check with the fix; the kernel facts
// come from a real throwaway mount. Checked in the normal state, with enable_uring off
// (restored afterwards), and in states where a mount cannot work (exit 1).
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUN, CLI, PYTHON, fmt, fuseTest, run, withEnableUring } from "../helpers/index.ts";

interface Check {
  id: string;
  status: "OK" | "WARN" | "FAIL";
  message: string;
  fix?: string;
}

const doctor = (args: string[] = [], opts: { env?: Record<string, string | undefined>; prefix?: string[] } = {}) =>
  run([...(opts.prefix ?? []), BUN, CLI, "doctor", ...args], { env: opts.env, timeoutMs: 30_000 });

function possibleCpus(): number {
  let n = 0;
  for (const part of readFileSync("/sys/devices/system/cpu/possible", "utf8").trim().split(",")) {
    const [a, b] = part.split("-").map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return n;
}

function byId(checks: Check[]): Record<string, Check> {
  return Object.fromEntries(checks.map((c) => [c.id, c]));
}

function noLeftovers(): void {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8");
  expect(mounts).not.toContain("fuse-uring-doctor");
  expect(readdirSync(tmpdir()).filter((f) => f.startsWith("fuse-uring-doctor-"))).toEqual([]);
}

const EXPECTED_IDS = [
  "platform", "shim", "dev_fuse", "fusermount3", "user_allow_other", "enable_uring", "io_uring_disabled",
  "io_uring_syscalls", "test_mount", "fuse_over_io_uring", "kernel_passthrough", "data_planes", "buffer_pools", "zero_copy",
  "pinned_memory",
  "open_files",
];

describe("doctor, enable_uring=Y", () => {
  withEnableUring("Y");

  fuseTest("text: one OK/WARN/FAIL line per check, exit 0, io_uring in use", async () => {
    const r = await doctor();
    expect(r.code, fmt(r)).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    // First the version (as `fuse-uring --version` prints it), then one line per check.
    expect(lines[0]).toMatch(/^fuse-uring \d+\.\d+\.\d+\S* \(bun [\d.]+, linux-\w+\)$/);
    const checkLines = lines.slice(1, -1);
    expect(checkLines.length).toBe(EXPECTED_IDS.length);
    for (const l of checkLines) expect(l).toMatch(/^(OK  |WARN|FAIL) [a-z_0-9]+: \S/);
    for (const l of checkLines.filter((l) => !l.startsWith("OK"))) expect(l).toContain(" — fix: ");
    expect(lines.at(-1)).toMatch(/^fuse-uring doctor: a mount works \(transport uring\)/);
    expect(r.stdout).toMatch(/test_mount: test mount works: kernel FUSE protocol 7\.\d+/);
    noLeftovers();
  });

  fuseTest("--json: the kernel's INIT offer, transport, passthrough, buffer pools, pinned memory", async () => {
    const r = await doctor(["--json"]);
    expect(r.code, fmt(r)).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.ok).toBe(true);
    expect(rep.version).toBe(JSON.parse(readFileSync(`${import.meta.dir}/../../package.json`, "utf8")).version);
    expect(rep.checks.map((c: Check) => c.id)).toEqual(EXPECTED_IDS);
    const c = byId(rep.checks);
    for (const id of ["platform", "shim", "dev_fuse", "fusermount3", "enable_uring", "test_mount", "fuse_over_io_uring"]) expect(c[id]!.status, id).toBe("OK");
    expect(rep.kernel.fuseProtocol).toMatch(/^7\.(\d+)$/);
    expect(Number(rep.kernel.fuseProtocol.split(".")[1])).toBeGreaterThanOrEqual(42);
    expect(rep.kernel.offeredNames).toContain("OVER_IO_URING");
    expect(rep.kernel.offeredNames).toContain("INIT_EXT");
    expect(BigInt(rep.kernel.offered) & (1n << 41n)).toBe(1n << 41n);
    expect(rep.kernel.transport).toBe("uring");
    // root + PASSTHROUGH offered → available
    if (rep.kernel.offeredNames.includes("PASSTHROUGH")) expect(c.kernel_passthrough!.status).toBe("OK");
    // which ways file data can take here: the native data plane needs no privilege
    expect(JSON.stringify(c.data_planes)).toContain("native");
    expect(c.buffer_pools!.status).toBe("OK");
    // root: zero-copy is available wherever pools are, and "nothing to do" where they are not
    expect(c.zero_copy!.status).toBe("OK");
    expect(rep.kernel.bufferPools).toBe(rep.kernel.offeredNames.includes("HAS_IO_URING_BUFPOOL"));
    expect(rep.possibleCpus).toBe(possibleCpus());
    // default ring: 1 MiB payloads, pinned for as many entries per queue as fit 64 MiB, the
    // deeper entries unpinned (a 4 KiB header page each is pinned)
    const perEntry = 1048576 + 4096;
    const pinnedDepth = Math.floor((64 << 20) / (possibleCpus() * perEntry));
    const depth = Math.min(128, pinnedDepth + Math.floor((192 << 20) / (possibleCpus() * perEntry)));
    if (!rep.kernel.bufferPools && pinnedDepth >= 2) {
      expect(rep.pinnedBytesDefault).toBe(possibleCpus() * (pinnedDepth * 1048576 + depth * 4096));
      expect(c.fuse_over_io_uring!.message).toContain(`depth ${depth}`);
      expect(c.pinned_memory!.message).toContain(`${pinnedDepth} pinned`);
    }
    expect(rep.pinnedBytesDefault).toBeLessThanOrEqual(64 << 20);
    expect(c.pinned_memory!.message).toContain(`${possibleCpus()} queue`);
    const disabled = readFileSync("/proc/sys/kernel/io_uring_disabled", "utf8").trim();
    if (disabled === "0") expect(c.io_uring_syscalls!.status).toBe("OK");
    noLeftovers();
  });
});

// Runs a command under a seccomp filter that fails io_uring_setup/enter/register (425-427 on
// x86_64 and aarch64) with EPERM, like Docker's default profile.
const NO_IO_URING = `import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
prog = ins(0x20,0,0,0) + ins(0x35,0,2,425) + ins(0x25,1,0,427) + ins(0x06,0,0,0x00050001) + ins(0x06,0,0,0x7fff0000)
buf = ctypes.create_string_buffer(prog)
fbuf = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", 5, ctypes.addressof(buf)))
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, fbuf, 0, 0) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
`;

describe("doctor, io_uring blocked by seccomp", () => {
  withEnableUring("Y");
  fuseTest("WARNs io_uring_syscalls (seccomp) and the classic fallback, exit 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fuse-uring-seccomp-"));
    try {
      writeFileSync(join(dir, "noiouring.py"), NO_IO_URING);
      const r = await doctor([], { prefix: [PYTHON, join(dir, "noiouring.py")] });
      expect(r.code, fmt(r)).toBe(0);
      expect(r.stdout).toMatch(/^WARN io_uring_syscalls: io_uring_setup\(2\) fails with EPERM: blocked by a seccomp filter.* — fix: allow io_uring_setup/m);
      expect(r.stdout).toMatch(/^WARN fuse_over_io_uring: a default mount falls back to classic \/dev\/fuse: io_uring blocked with EPERM/m);
      expect(r.stdout).toMatch(/^fuse-uring doctor: a mount works \(transport classic\)/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("doctor, enable_uring=N", () => {
  withEnableUring("N");

  fuseTest("WARNs with the fix, still exit 0 (classic works)", async () => {
    const r = await doctor();
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout).toMatch(/^WARN enable_uring: enable_uring=N.* — fix: as root: echo Y > \/sys\/module\/fuse\/parameters\/enable_uring/m);
    expect(r.stdout).toMatch(/^WARN fuse_over_io_uring: a default mount falls back to classic \/dev\/fuse: enable_uring is N/m);
    expect(r.stdout).toMatch(/^fuse-uring doctor: a mount works \(transport classic\)/m);
    const j = JSON.parse((await doctor(["--json"])).stdout);
    expect(j.kernel.transport).toBe("classic");
    expect(j.kernel.offeredNames).not.toContain("OVER_IO_URING");
    noLeftovers();
  });
});

describe("doctor verdicts (exit 1 only when a mount cannot work)", () => {
  fuseTest("lists the FUSE_URING_* knobs that are set (lib/knobs.ts): tuning OK, test options WARN; none set, none listed", async () => {
    const r = await doctor([], { env: { FUSE_URING_WAIT_US: "5000", FUSE_URING_FAULT: "worker-exit:0:1" } });
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout).toMatch(/^OK {3}env: FUSE_URING_WAIT_US=5000 is set \(tuning knob: .*flag --ring-wait-us US\)$/m);
    expect(r.stdout).toMatch(/^WARN env: FUSE_URING_FAULT=worker-exit:0:1 is set: a test option .* — fix: unset FUSE_URING_FAULT/m);
    const clean = await doctor([], { env: Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith("FUSE_URING_")).map((k) => [k, undefined])) });
    expect(clean.stdout).not.toMatch(/^\S+ +env: /m);
  });

  fuseTest("no loadable shim: FAIL with the fix, exit 1", async () => {
    const r = await doctor([], { env: { FUSE_URING_SHIM: "/nonexistent/libfuse_uring_shim.so" } });
    expect(r.code, fmt(r)).toBe(1);
    expect(r.stdout).toMatch(/^FAIL shim: .*FUSE_URING_SHIM=\/nonexistent.* — fix: /m);
    expect(r.stdout).toMatch(/^FAIL test_mount: .*skipped/m);
    expect(r.stdout.trimEnd().split("\n").at(-1)).toContain("mounting will fail");
  });

  fuseTest("root without CAP_SYS_ADMIN (a restricted container): FAIL with the fix, exit 1", async () => {
    const r = await doctor([], { prefix: ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--"] });
    expect(r.code, fmt(r)).toBe(1);
    expect(r.stdout).toMatch(/^FAIL fusermount3: uid 0 without CAP_SYS_ADMIN.* — fix: .*--cap-add SYS_ADMIN/m);
  });

  describe("as a non-root user", () => {
    const USER = "fuseuringdoc";
    let created = false;
    let devMode = -1;
    let uid = -1;
    let gid = -1;
    beforeAll(async () => {
      if ((await run(["id", "-u", USER])).code !== 0) {
        const r = await run(["useradd", "-M", "-s", "/usr/sbin/nologin", USER]);
        if (r.code !== 0) throw new Error(`useradd failed:\n${fmt(r)}`);
        created = true;
      }
      uid = Number((await run(["id", "-u", USER])).stdout.trim());
      gid = Number((await run(["id", "-g", USER])).stdout.trim());
      devMode = statSync("/dev/fuse").mode & 0o777;
    }, 30_000);
    afterAll(async () => {
      if (devMode >= 0) chmodSync("/dev/fuse", devMode);
      if (created) await run(["userdel", USER]);
    }, 30_000);
    const prefix = () => ["setpriv", `--reuid=${uid}`, `--regid=${gid}`, "--init-groups", "--", "env", "-i", "PATH=/usr/bin:/bin", "HOME=/nonexistent"];

    fuseTest("/dev/fuse not accessible (mode 0600): FAIL dev_fuse with the chmod fix, exit 1", async () => {
      chmodSync("/dev/fuse", 0o600);
      const r = await doctor([], { prefix: prefix() });
      expect(r.code, fmt(r)).toBe(1);
      expect(r.stdout).toMatch(/^FAIL dev_fuse: \/dev\/fuse cannot be opened read\/write: EACCES — fix: as root: chmod 0666 \/dev\/fuse/m);
    });

    fuseTest("/dev/fuse 0666: fusermount3 checked, user_allow_other explained, a mount works (exit 0)", async () => {
      chmodSync("/dev/fuse", 0o666);
      const r = await doctor(["--json"], { prefix: prefix() });
      expect(r.code, fmt(r)).toBe(0);
      const c = byId(JSON.parse(r.stdout).checks);
      expect(c.fusermount3!.status).toBe("OK");
      expect(c.fusermount3!.message).toContain("setuid root");
      const conf = (() => {
        try {
          return readFileSync("/etc/fuse.conf", "utf8");
        } catch {
          return "";
        }
      })();
      expect(c.user_allow_other!.status).toBe(/^\s*user_allow_other\s*$/m.test(conf) ? "OK" : "WARN");
      if (c.user_allow_other!.status === "WARN") expect(c.user_allow_other!.fix).toContain("/etc/fuse.conf");
      expect(c.test_mount!.status).toBe("OK");
      // No CAP_SYS_ADMIN: kernel passthrough is not available to this user.
      expect(c.kernel_passthrough!.status).toBe("WARN");
    });
  });
});
