// `fuse-uring doctor [--json]`: checks what a mount needs and explains every problem with its
// fix, one line each. The kernel facts come from a real throwaway mount (memfs on a temporary
// directory, transport auto): its INIT tells the protocol version and what the kernel offers,
// and whether the io_uring ring could be set up. Exit 0 when a mount works, 1 otherwise.

import { setKnobs } from "../../lib/knobs.ts";
import { poolBytes, ringSizing } from "../../lib/transport/uring.ts";
import { dlopen, FFIType, read } from "bun:ffi";
import { accessSync, constants, existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmdirSync, statSync } from "node:fs";
import { arch, platform, release, tmpdir } from "node:os";
import { join } from "node:path";
import type { DoctorCommand } from "../args.ts";
import { VERSION, versionLine } from "../version.ts";

export type Status = "OK" | "WARN" | "FAIL";

export interface Check {
  id: string;
  status: Status;
  /** What was found, one line. */
  message: string;
  /** What to do about it (WARN/FAIL). */
  fix?: string;
}

export interface DoctorReport {
  ok: boolean;
  /** fuse-uring's version (package.json). */
  version: string;
  checks: Check[];
  kernel: {
    release: string;
    fuseProtocol?: string;
    offered?: string;
    offeredNames?: string[];
    granted?: string[];
    transport?: string;
    transportReason?: string;
    /** The kernel offers FUSE 7.46 buffer pools (FUSE_HAS_IO_URING_BUFPOOL). */
    bufferPools?: boolean;
    /** What the test mount used: "active", "fallback", "offered", "none" (SessionStats.bufferPools). */
    bufferPoolState?: string;
    bufferPoolsReason?: string;
  };
  possibleCpus: number;
  pinnedBytesDefault: number;
  shim?: string;
}

const ENABLE_URING = "/sys/module/fuse/parameters/enable_uring";
const IO_URING_DISABLED = "/proc/sys/kernel/io_uring_disabled";
const IO_URING_GROUP = "/proc/sys/kernel/io_uring_group";
const CAP_DAC_READ_SEARCH = 2n;
const CAP_IPC_LOCK = 14n;
const CAP_SYS_ADMIN = 21n;
const ENTRY_HEADER = 4096;

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function statusField(name: string): string | null {
  const m = new RegExp(`^${name}:\\s*(.*)$`, "m").exec(readText("/proc/self/status") ?? "");
  return m ? m[1]!.trim() : null;
}

function hasCap(bit: bigint): boolean {
  const eff = statusField("CapEff");
  if (!eff) return process.getuid?.() === 0;
  return (BigInt(`0x${eff}`) & (1n << bit)) !== 0n;
}

export function possibleCpuCount(): number {
  const text = (readText("/sys/devices/system/cpu/possible") ?? "0").trim();
  let n = 0;
  for (const part of text.split(",")) {
    const [a, b] = part.split("-").map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return Math.max(1, n);
}

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(bytes % 1048576 ? 1 : 0)} MiB`;
}

function errCode(e: unknown): string {
  return (e as { code?: string }).code ?? (e instanceof Error ? e.message : String(e));
}

// ---- io_uring_setup probe (libc syscall(2); the shim is not involved) ----------------------------

const SYS_io_uring_setup = 425; // same number on x86_64 and aarch64 (unified syscall table)
const ERRNO_NAMES: Record<number, string> = { 1: "EPERM", 12: "ENOMEM", 13: "EACCES", 22: "EINVAL", 38: "ENOSYS", 24: "EMFILE" };

/** 0 when io_uring_setup(2) works, else the errno. */
export function probeIoUringSetup(): number {
  let lib;
  for (const name of ["libc.so.6", "libc.so"]) {
    try {
      lib = dlopen(name, {
        syscall: { args: [FFIType.i64, FFIType.i64, FFIType.ptr], returns: FFIType.i64_fast },
        close: { args: [FFIType.i32], returns: FFIType.i32 },
        __errno_location: { args: [], returns: FFIType.ptr },
      });
      break;
    } catch {}
  }
  if (!lib) return -1;
  try {
    const params = new Uint8Array(120); // struct io_uring_params
    const fd = Number(lib.symbols.syscall(SYS_io_uring_setup, 1, params));
    if (fd >= 0) {
      lib.symbols.close(fd);
      return 0;
    }
    return read.i32(lib.symbols.__errno_location()!, 0);
  } finally {
    lib.close();
  }
}

// ---- the throwaway mount ---------------------------------------------------------------------

interface ProbeResult {
  ok: boolean;
  error?: string;
  kernelMinor?: number;
  offered?: bigint;
  granted?: string[];
  transport?: "uring" | "classic";
  reason?: string;
  bufferPools?: boolean;
  bufferPoolState?: string;
  bufferPoolsReason?: string;
  via?: string;
}

function probeDirs(): string[] {
  const home = process.env.HOME;
  return [...new Set([tmpdir(), "/tmp", "/dev/shm", process.env.XDG_RUNTIME_DIR, home && join(home, ".cache")].filter((d): d is string => !!d))];
}

async function probeMount(): Promise<ProbeResult> {
  let dir: string | undefined;
  const tried: string[] = [];
  for (const base of probeDirs()) {
    try {
      dir = mkdtempSync(join(base, "fuse-uring-doctor-"));
      break;
    } catch (e) {
      tried.push(`${base}: ${errCode(e)}`);
    }
  }
  if (!dir) return { ok: false, error: `no writable directory for a test mountpoint (${tried.join("; ")}); set TMPDIR` };
  const { mount } = await import("../../lib/mount.ts");
  const { memfs } = await import("../../lib/fs/memfs.ts");
  try {
    const m = await mount(dir, memfs(), { transport: "auto", fsname: "fuse-uring-doctor", subtype: "doctor", initTimeoutMs: 5000, log: () => {} });
    try {
      const info = m.session.initInfo!;
      return {
        ok: true,
        kernelMinor: info.kernelMinor,
        offered: info.offered,
        granted: info.grantedNames,
        transport: m.transport,
        reason: m.transportReason,
        bufferPools: m.stats().bufferPools !== "none",
        bufferPoolState: m.stats().bufferPools,
        bufferPoolsReason: m.stats().bufferPoolsReason,
      };
    } finally {
      await m.unmount().catch(() => {});
    }
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  } finally {
    try {
      rmdirSync(dir);
    } catch {}
  }
}

// ---- the checks ------------------------------------------------------------------------------

export async function runChecks(): Promise<DoctorReport> {
  const checks: Check[] = [];
  const add = (id: string, status: Status, message: string, fix?: string) => checks.push({ id, status, message, ...(fix ? { fix } : {}) });
  const root = process.getuid?.() === 0;
  const sysAdmin = hasCap(CAP_SYS_ADMIN);
  const cpus = possibleCpuCount();
  // The session sizes rings to a budget (lib/transport/uring.ts ringSizing).
  const { depth: DEFAULT_DEPTH, maxWrite: DEFAULT_MAX_WRITE, pinnedDepth: PINNED_DEPTH } = ringSizing(cpus);
  let pinned = cpus * (PINNED_DEPTH * DEFAULT_MAX_WRITE + DEFAULT_DEPTH * ENTRY_HEADER);
  const report: DoctorReport = { ok: false, version: VERSION, checks, kernel: { release: release() }, possibleCpus: cpus, pinnedBytesDefault: pinned };

  // platform + shim
  if (platform() !== "linux") {
    add("platform", "FAIL", `${platform()}-${arch()}: FUSE-over-io_uring and this shim are Linux-only`, "run on Linux");
    report.ok = false;
    return report;
  }
  add("platform", "OK", `linux-${arch()}, kernel ${release()}, ${cpus} possible CPU${cpus === 1 ? "" : "s"}`);
  // Environment knobs that change what a mount started from here does (lib/knobs.ts).
  for (const { spec, value } of setKnobs()) {
    const also = spec.flag ? `; flag ${spec.flag}` : "";
    if (spec.kind === "test") add("env", "WARN", `${spec.env}=${value} is set: a test option (${spec.what}${also})`, `unset ${spec.env}: it is for the test suite`);
    else add("env", "OK", `${spec.env}=${value} is set (${spec.kind} knob: ${spec.what}${also})`);
  }
  let shimOk = false;
  try {
    const { native, loadedShimPath } = await import("../../lib/native.ts");
    native();
    report.shim = loadedShimPath() ?? undefined;
    add("shim", "OK", `native shim loaded from ${report.shim}`);
    shimOk = true;
  } catch (e) {
    add("shim", "FAIL", (e instanceof Error ? e.message : String(e)).replace(/^fuse-uring: /, ""), "see the message: set FUSE_URING_SHIM to a built libfuse_uring_shim.so, or TMPDIR / FUSE_URING_SHIM_DIR to a writable exec-allowed directory");
  }

  // /dev/fuse
  let devOk = false;
  if (!existsSync("/dev/fuse")) {
    add("dev_fuse", "FAIL", "/dev/fuse is missing", "load the module: modprobe fuse (as root); in a container: docker run --device /dev/fuse …");
  } else {
    const st = statSync("/dev/fuse");
    if (!st.isCharacterDevice()) {
      add("dev_fuse", "FAIL", "/dev/fuse is not a character device", "recreate it as root: rm /dev/fuse && mknod -m 0666 /dev/fuse c 10 229");
    } else {
      try {
        closeSync(openSync("/dev/fuse", "r+"));
        add("dev_fuse", "OK", "/dev/fuse present and read/write for this user");
        devOk = true;
      } catch (e) {
        const code = errCode(e);
        add(
          "dev_fuse",
          "FAIL",
          `/dev/fuse cannot be opened read/write: ${code}` + (code === "EPERM" ? " (a device cgroup or LSM forbids it)" : ""),
          code === "EACCES"
            ? `as root: chmod 0666 /dev/fuse (its usual mode, normally set by udev; persistent: echo 'KERNEL=="fuse", MODE="0666"' > /etc/udev/rules.d/60-fuse.rules)`
            : "in a container: docker run --device /dev/fuse --cap-add SYS_ADMIN …",
        );
      }
    }
  }

  // how the mount is attached: mount(2) as root, fusermount3 otherwise
  let attachOk = true;
  const fusermount = ["/usr/bin/fusermount3", "/bin/fusermount3", "/usr/local/bin/fusermount3"].find((p) => existsSync(p));
  if (root && !sysAdmin) {
    attachOk = false;
    add("fusermount3", "FAIL", "uid 0 without CAP_SYS_ADMIN (a restricted container?): mounts use mount(2), which will fail with EPERM", "give the container CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN --device /dev/fuse …), or run as a non-root user with fusermount3");
  } else if (root) {
    add("fusermount3", "OK", `running as root: mounts use mount(2) directly${fusermount ? "" : " (fusermount3 not installed, not needed)"}`);
  } else if (!fusermount) {
    attachOk = false;
    add("fusermount3", "FAIL", "not root and fusermount3 is not installed: unprivileged mounts need it", "install it: apt-get install fuse3 (or dnf install fuse3), or run as root");
  } else {
    const st = statSync(fusermount);
    if (st.uid !== 0 || !(st.mode & 0o4000)) {
      attachOk = false;
      add("fusermount3", "FAIL", `${fusermount} is not setuid root (mode ${(st.mode & 0o7777).toString(8)}, owner uid ${st.uid})`, `as root: chown root ${fusermount} && chmod u+s ${fusermount}`);
    } else {
      let noSuid = false;
      try {
        accessSync(fusermount, constants.X_OK);
      } catch {
        noSuid = true;
      }
      if (noSuid) {
        attachOk = false;
        add("fusermount3", "FAIL", `${fusermount} is not executable for this user`, `as root: chmod a+x ${fusermount}`);
      } else add("fusermount3", "OK", `${fusermount} present and setuid root (used for mounts as a non-root user)`);
    }
  }

  // user_allow_other
  const conf = readText("/etc/fuse.conf");
  const allowOther = conf !== null && /^\s*user_allow_other\s*$/m.test(conf);
  if (root) add("user_allow_other", "OK", "root may use --allow-other without /etc/fuse.conf");
  else if (allowOther) add("user_allow_other", "OK", "user_allow_other is set in /etc/fuse.conf (--allow-other works)");
  else add("user_allow_other", "WARN", `user_allow_other is not set in /etc/fuse.conf: only --allow-other is affected`, "as root: echo user_allow_other >> /etc/fuse.conf");

  // enable_uring
  const eu = readText(ENABLE_URING)?.trim();
  if (eu === undefined) add("enable_uring", "WARN", "kernel has no FUSE-over-io_uring (needs Linux ≥ 6.14 with CONFIG_FUSE_IO_URING): mounts use classic /dev/fuse", "use a newer kernel for io_uring; classic works");
  else if (eu === "Y" || eu === "1") add("enable_uring", "OK", "enable_uring=Y: the kernel offers FUSE-over-io_uring");
  else add("enable_uring", "WARN", `enable_uring=${eu}: the kernel does not offer FUSE-over-io_uring, mounts use classic /dev/fuse`, `as root: echo Y > ${ENABLE_URING} (persistent: options fuse enable_uring=1 in /etc/modprobe.d/fuse.conf, or fuse.enable_uring=1 on the kernel command line)`);

  // kernel.io_uring_disabled
  const dis = readText(IO_URING_DISABLED)?.trim();
  if (dis === undefined) add("io_uring_disabled", "OK", "no kernel.io_uring_disabled sysctl (io_uring not restricted)");
  else if (dis === "0") add("io_uring_disabled", "OK", "kernel.io_uring_disabled=0");
  else if (dis === "1") {
    const group = Number(readText(IO_URING_GROUP)?.trim() ?? -1);
    const inGroup = group >= 0 && (process.getgroups?.() ?? []).includes(group);
    if (sysAdmin || inGroup) add("io_uring_disabled", "OK", `kernel.io_uring_disabled=1, allowed for this process (${sysAdmin ? "CAP_SYS_ADMIN" : `member of io_uring_group ${group}`})`);
    else add("io_uring_disabled", "WARN", "kernel.io_uring_disabled=1: io_uring only for CAP_SYS_ADMIN or kernel.io_uring_group members", `as root: sysctl -w kernel.io_uring_disabled=0, or add this user to the group set in kernel.io_uring_group (now ${group})`);
  } else add("io_uring_disabled", "WARN", `kernel.io_uring_disabled=${dis}: io_uring is off for everyone`, "as root: sysctl -w kernel.io_uring_disabled=0");

  // io_uring syscalls (seccomp)
  const errno = probeIoUringSetup();
  const seccomp = statusField("Seccomp");
  if (errno === 0) add("io_uring_syscalls", "OK", "io_uring_setup(2) works (no seccomp filter blocks it)");
  else if (errno === -1) add("io_uring_syscalls", "WARN", "could not probe io_uring_setup(2): libc not loadable through bun:ffi");
  else {
    const name = ERRNO_NAMES[errno] ?? `errno ${errno}`;
    let why: string;
    let fix: string;
    if (errno === 1 && dis && dis !== "0") {
      why = `blocked by kernel.io_uring_disabled=${dis}`;
      fix = "see io_uring_disabled above";
    } else if ((errno === 1 || errno === 38) && seccomp === "2") {
      why = "blocked by a seccomp filter (Seccomp: 2 in /proc/self/status; e.g. Docker's default profile)";
      fix = "allow io_uring_setup, io_uring_enter and io_uring_register in the seccomp profile (docker run --security-opt seccomp=PROFILE.json, or seccomp=unconfined)";
    } else if (errno === 38) {
      why = "the kernel has no io_uring (CONFIG_IO_URING off)";
      fix = "use a kernel with io_uring; classic /dev/fuse works without it";
    } else {
      why = "io_uring cannot be set up";
      fix = errno === 12 ? "raise RLIMIT_MEMLOCK (ulimit -l) or free memory" : "check dmesg";
    }
    add("io_uring_syscalls", "WARN", `io_uring_setup(2) fails with ${name}: ${why}; mounts fall back to classic /dev/fuse`, fix);
  }

  // the throwaway mount
  let probe: ProbeResult = { ok: false, error: "skipped" };
  if (shimOk && devOk && attachOk) probe = await probeMount();
  else probe.error = "skipped because of the FAIL above";
  if (!probe.ok) {
    add("test_mount", "FAIL", `a test mount (memfs on a temporary directory) failed: ${probe.error}`, probe.error?.startsWith("skipped") ? "fix the FAIL above" : "see the message");
  } else {
    const offered = probe.offered!;
    const { initFlagNames, initBit } = await import("../../lib/protocol/constants.ts");
    const names = initFlagNames(offered);
    report.kernel = {
      ...report.kernel,
      fuseProtocol: `7.${probe.kernelMinor}`,
      offered: `0x${offered.toString(16)}`,
      offeredNames: names,
      granted: probe.granted,
      transport: probe.transport,
      transportReason: probe.reason,
      bufferPools: probe.bufferPools,
      bufferPoolState: probe.bufferPoolState,
      bufferPoolsReason: probe.bufferPoolsReason,
    };
    add("test_mount", "OK", `test mount works: kernel FUSE protocol 7.${probe.kernelMinor}, offers ${names.length} capabilities (${names.join(" ")})`);

    // io_uring transport, as a default mount would get it
    if (probe.transport === "uring") {
      add("fuse_over_io_uring", "OK", `a default mount uses FUSE-over-io_uring (${cpus} queue${cpus === 1 ? "" : "s"} × depth ${DEFAULT_DEPTH})`);
    } else {
      const fix =
        !(offered & initBit("OVER_IO_URING")) ? (eu !== undefined ? "see enable_uring above" : "needs Linux ≥ 6.14 with CONFIG_FUSE_IO_URING") : "see io_uring_syscalls / io_uring_disabled above";
      add("fuse_over_io_uring", "WARN", `a default mount falls back to classic /dev/fuse: ${probe.reason}`, fix);
    }

    // kernel passthrough
    const pt = (offered & initBit("PASSTHROUGH")) !== 0n;
    if (pt && sysAdmin) add("kernel_passthrough", "OK", "kernel passthrough available (FUSE_PASSTHROUGH offered, CAP_SYS_ADMIN held): mount --passthrough SRC MNT --kernel-passthrough");
    else if (pt) add("kernel_passthrough", "WARN", "the kernel offers FUSE_PASSTHROUGH but registering backing files needs CAP_SYS_ADMIN; --kernel-passthrough serves data through the daemon instead", "run the mount as root for kernel passthrough");
    else add("kernel_passthrough", "WARN", "the kernel does not offer FUSE_PASSTHROUGH (needs CONFIG_FUSE_PASSTHROUGH, Linux ≥ 6.9)", "none needed: --passthrough works without it, through the daemon");

    // data planes: which ways file data can take on this machine
    const planes = [
      "native (the shim answers READ/WRITE of backing-fd handles, no privilege needed)",
      "js (handlers)",
      ...(pt && sysAdmin ? ["kernel passthrough (--kernel-passthrough)"] : []),
    ];
    add("data_planes", "OK", `data planes available: ${planes.join("; ")}`);

    // buffer pools (FUSE 7.46)
    if (probe.bufferPoolState === "active") add("buffer_pools", "OK", `the kernel offers io_uring buffer pools (FUSE 7.46, HAS_IO_URING_BUFPOOL) and the test mount used them: ${probe.bufferPoolsReason}`);
    else if (probe.bufferPoolState === "fallback") add("buffer_pools", "WARN", `the kernel offers io_uring buffer pools but refused the test mount's: ${probe.bufferPoolsReason}`, "mount with --pool-size 0 to use per-entry buffers directly; check dmesg for 'ADD_BUFPOOL failed'");
    else if (probe.bufferPools) add("buffer_pools", "OK", `the kernel offers io_uring buffer pools (FUSE 7.46): ${probe.bufferPoolsReason}`);
    else add("buffer_pools", "OK", "no io_uring buffer pools in this kernel (FUSE 7.46 / Linux ≥ 7.3): per-entry payload buffers are used, nothing to do");
    // zero-copy (FUSE_URING_ZERO_COPY): pools + CAP_SYS_ADMIN, for natively served files
    if (probe.bufferPoolState === "active" && sysAdmin) add("zero_copy", "OK", "io_uring zero-copy available: --passthrough and backed() files are read and written at the caller's pages (FUSE_URING_ZERO_COPY, CAP_SYS_ADMIN held)");
    else if (probe.bufferPoolState === "active") add("zero_copy", "WARN", "io_uring zero-copy needs CAP_SYS_ADMIN (the kernel answers EPERM): natively served files go through the buffer pool", "run the mount as root for zero-copy");
    else add("zero_copy", "OK", "no io_uring zero-copy without buffer pools (Linux ≥ 7.3): nothing to do");
  }

  // pinned memory of a default io_uring mount
  const memAvail = Number(/^MemAvailable:\s+(\d+) kB/m.exec(readText("/proc/meminfo") ?? "")?.[1] ?? 0) * 1024;
  const memlock = /^Max locked memory\s+(\S+)/m.exec(readText("/proc/self/limits") ?? "")?.[1];
  const lockLimit = memlock === undefined || memlock === "unlimited" ? Infinity : Number(memlock);
  let formula = `${cpus} queue${cpus === 1 ? "" : "s"} × (${PINNED_DEPTH} pinned × ${mib(DEFAULT_MAX_WRITE)} + ${DEFAULT_DEPTH} × 4 KiB headers), budget 64 MiB; the other ${DEFAULT_DEPTH - PINNED_DEPTH} entries per queue take memory only when used`;
  if (probe.bufferPoolState === "active") {
    // Buffer pools (Linux 7.3): a pool per queue plus a header page per entry (lib/transport/uring.ts).
    const pool = poolBytes(-1, DEFAULT_MAX_WRITE);
    pinned = cpus * (pool + DEFAULT_DEPTH * ENTRY_HEADER);
    formula = `${cpus} queue${cpus === 1 ? "" : "s"} × (${mib(pool)} buffer pool + ${DEFAULT_DEPTH} × 4 KiB headers); --pool-size sets the pool, --queue-depth costs headers only`;
    report.pinnedBytesDefault = pinned;
  }
  const memlockNote =
    !hasCap(CAP_IPC_LOCK) && pinned > lockLimit ? `; above RLIMIT_MEMLOCK (${mib(lockLimit)}), so the payloads are not registered as fixed buffers (works, slightly slower I/O)` : "";
  if (memAvail && pinned > memAvail / 2) {
    add("pinned_memory", "WARN", `a default io_uring mount pins ${mib(pinned)} (${formula}), more than half of MemAvailable (${mib(memAvail)})${memlockNote}`, "mount with a smaller --queue-depth or --max-write, or --transport classic");
  } else {
    add("pinned_memory", "OK", `a default io_uring mount pins ${mib(pinned)} (${formula})${probe.bufferPoolState === "active" ? "" : "; lower it with --queue-depth / --max-write"}${memlockNote}`);
  }

  // descriptors: the passthrough raises the soft limit to the hard one and keeps a budget
  const nofile = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readText("/proc/self/limits") ?? "");
  const num = (v: string | undefined) => (v === undefined || v === "unlimited" ? Infinity : Number(v));
  const soft = num(nofile?.[1]), hard = num(nofile?.[2]);
  const budget = Math.max(16, Math.min(65536, Math.floor(Math.min(hard, 1 << 30) / 2)));
  const reopen = hasCap(CAP_DAC_READ_SEARCH)
    ? "re-opened by kernel file handle (CAP_DAC_READ_SEARCH held)"
    : "re-opened by path (without CAP_DAC_READ_SEARCH no kernel file handles; renames outside the mount can make them ESTALE)";
  const ptLine = `--passthrough raises the soft limit to ${hard} at start and holds at most ${budget} inode descriptors (--fd-budget N), least recently used ones closed and ${reopen}`;
  if (!nofile) add("open_files", "WARN", "cannot read RLIMIT_NOFILE from /proc/self/limits");
  else if (hard < 4096) add("open_files", "WARN", `RLIMIT_NOFILE soft ${soft}, hard ${hard}: ${ptLine}; open files through a passthrough mount are limited to about ${hard - budget}`, "raise the hard limit (ulimit -Hn as root, LimitNOFILE= in a systemd unit)");
  else add("open_files", "OK", `RLIMIT_NOFILE soft ${soft}, hard ${hard}: ${ptLine}`);

  report.ok = !checks.some((c) => c.status === "FAIL");
  return report;
}

export function formatReport(r: DoctorReport, color = false): string {
  const paint = (s: Status) => {
    const text = s === "OK" ? "OK  " : s;
    if (!color) return text;
    return `${s === "OK" ? "\x1b[32m" : s === "WARN" ? "\x1b[33m" : "\x1b[31m"}${text}\x1b[0m`;
  };
  const lines = [versionLine()];
  lines.push(...r.checks.map((c) => `${paint(c.status)} ${c.id}: ${c.message}${c.fix && c.status !== "OK" ? ` — fix: ${c.fix}` : ""}`));
  const warns = r.checks.filter((c) => c.status === "WARN").length;
  lines.push(
    r.ok
      ? `fuse-uring doctor: a mount works${r.kernel.transport ? ` (transport ${r.kernel.transport})` : ""}${warns ? `; ${warns} warning${warns === 1 ? "" : "s"}` : ""}`
      : "fuse-uring doctor: mounting will fail until the FAIL lines are fixed",
  );
  return lines.join("\n") + "\n";
}

export async function doctor(cmd: DoctorCommand): Promise<number> {
  const report = await runChecks();
  if (cmd.json) process.stdout.write(JSON.stringify(report, null, 2) + "\n");
  else process.stdout.write(formatReport(report, process.stdout.isTTY === true && !process.env.NO_COLOR));
  return report.ok ? 0 : 1;
}
