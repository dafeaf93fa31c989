// Command-line parsing. Every mistake raises UsageError (printed with the usage, exit 2).

import { applyMountOptions } from "./mount-options.ts";
import { UsageError, type DoctorCommand, type MountCommand, type Command } from "./command.ts";
import type { StatsCommand } from "./commands/stats.ts";

export const USAGE = `Usage:
  fuse-uring mount --memfs MOUNTPOINT [options]           in-memory filesystem
  fuse-uring mount --passthrough SRC MOUNTPOINT [options] mirror directory SRC
  fuse-uring mount ./myfs.ts MOUNTPOINT [options] [-- ARGS…]  filesystem from a script
                                                          (ARGS go to its default export)
  fuse-uring mount --watch ./myfs.ts MOUNTPOINT [options]  the same, reloaded in place whenever
                                                          the script or a file it imports changes
  fuse-uring unmount MOUNTPOINT                           unmount (also after a crash)
  fuse-uring doctor [--json]                              check /dev/fuse, fusermount3, io_uring,
                                                          the kernel's FUSE features; exit 0 when
                                                          a mount would work
  fuse-uring stats MOUNTPOINT [--once] [--json]           live counters of the daemon serving
                                                          MOUNTPOINT, refreshed every second:
                                                          requests/s and latency per opcode,
                                                          transport, in flight, pinned memory
  fuse-uring --help | --version

The mount runs in the foreground until unmounted; SIGINT/SIGTERM unmount. When it stops it
prints one line, "fuse-uring: unmounted MOUNTPOINT (REASON)", and exits with:
  0  unmount (umount, fuse-uring unmount) or signal SIGTERM/SIGINT
  1  error (the mount failed, or the connection ended for another reason)
  2  bad command line (usage)
  3  connection aborted (echo 1 > /sys/fs/fuse/connections/N/abort)
  4  fail-stop: the daemon stopped itself because it could no longer serve every request
     correctly (a worker thread died, failStop() was called); the line says why

Options:
  --transport auto|uring|classic  wire transport (default auto: io_uring when the kernel
                                  offers it and the ring can be set up, else classic,
                                  with the reason printed)
  --queue-depth N                 io_uring entries per queue (queues = possible CPUs). The
                                  ones used first get pinned payloads (queues × n ×
                                  max_write ≤ 64 MiB), the rest take memory only when used
                                  (at most 192 MiB more). Default 126 on 2 CPUs (31 pinned),
                                  62 on 4 (15), 30 on 8 (7), at most 128
  --max-write BYTES               largest READ/WRITE request, 4096..1048576 (default 1 MiB,
                                  less on hosts with very many CPUs: pinned memory ≤ 64 MiB)
  --workers N|auto                serve the io_uring queues from N threads: memfs, the
                                  passthrough (state shared by every thread) and scripts that
                                  declare threads: "stateless" run on every thread; any other
                                  filesystem stays on the main thread and the threads serve the
                                  native data plane and forward the other requests to it.
                                  auto (default): one per CPU (at most 8) for filesystems that
                                  run on every thread, else 1
  --data-plane native|js          native (default): READ/WRITE/FSYNC of handles opened with a
                                  backing fd (the passthrough's) are served by the shim, no
                                  JavaScript per request; js: every request goes to handlers
  --stats-file PATH               write counters as JSON every second and at exit
  --debug                         log INIT negotiation and trace requests (rx/tx lines:
                                  names, offsets, sizes, flags, result, latency)
  --allow-other                   let other users access the mount
  --no-default-permissions        do not let the kernel check mode bits
  --ro                            mount read-only
  --watch                         (script) hot reload: swap in the edited script without
                                  unmounting; SIGHUP reloads at once
  --fsname NAME, --subtype NAME   names shown in /proc/mounts (fuse.SUBTYPE)
  --writeback-cache               let the kernel cache writes (FUSE_WRITEBACK_CACHE)
  --kernel-passthrough            (--passthrough) serve file data in the kernel
  --fd-budget N                   (--passthrough) most inode descriptors held (LRU; default:
                                  half of RLIMIT_NOFILE, at most 65536)
  --no-file-handles               (--passthrough) re-open evicted inodes by path only
  --backing-cache                 native data plane: keep backing files buffered even for
                                  O_DIRECT opens (host page cache; default: the caller's
                                  O_DIRECT reaches the backing file, docs/DATAPLANE.md)
  --no-fixed-buffers              (io_uring) backing I/O with plain READ/WRITE instead of
                                  READ_FIXED/WRITE_FIXED on registered buffers (comparison)
  --pool-size BYTES               (io_uring, Linux ≥ 7.3) payload buffer pool per queue,
                                  whole max-write buffers (default 4 MiB); 0 = one payload
                                  buffer per entry, as on kernels without buffer pools
  --no-zero-copy                  (io_uring, Linux ≥ 7.3, root) natively served files go
                                  through the buffer pool instead of the caller's pages
  --entry-ttl S, --attr-ttl S     kernel cache lifetimes in seconds (default 1)
  --negative-ttl S                cache "no such file" answers for S seconds (default 0)
  --request-timeout S             answer a request whose handler has not answered after S
                                  seconds with ETIMEDOUT (default: wait, like the kernel)
  --slow-request-ms MS            log a request still pending after MS ms (default 10000;
                                  0: never)
Tuning (measured defaults; for experiments and benchmarks, each also an environment knob):
  --ring-wait-us US               µs a ring's owner blocks in the kernel before its event
                                  loop runs (default 10000; FUSE_URING_WAIT_US)
  --ring-flags N                  io_uring setup flags (default SINGLE_ISSUER|DEFER_TASKRUN;
                                  FUSE_URING_RING_FLAGS)
  --native-sync-max BYTES         native transfers up to BYTES run synchronously on the ring's
                                  thread (default: by queues per ring; FUSE_URING_NATIVE_SYNC_MAX)
  --no-pin                        do not pin worker threads to their queues' CPUs
                                  (FUSE_URING_NO_PIN=1)
  --no-native-getattr             GETATTR (and LOOKUP of a missing name) always go to the
                                  filesystem's handlers; by default the shim answers the
                                  passthrough's from its node table (FUSE_URING_NATIVE_GETATTR=0)
  --lock-spin-us US               µs a thread spins on a shared filesystem lock before it
                                  sleeps (default 20; FUSE_URING_SPIN_US)
  --test NAME[=VALUE]             test options (the suite's fault injection): poison, fault=SPEC,
                                  pool-fault=refuse (FUSE_URING_POISON=1, FUSE_URING_FAULT=SPEC,
                                  FUSE_URING_POOL_FAULT=refuse; lib/knobs.ts)
  -o OPT[,OPT…]                   mount options as in mount(8)/fstab/libfuse (repeatable):
      ro, rw, allow_other, default_permissions, no_default_permissions, fsname=NAME,
      subtype=NAME, max_read=N, max_write=N, entry_timeout=S, attr_timeout=S,
      negative_timeout=S, writeback_cache, debug, nosuid, suid, nodev, dev, noexec, exec,
      noatime, atime, relatime, nodiratime, diratime, sync, async, dirsync,
      transport=auto|uring|classic, queue_depth=N, stats_file=PATH, kernel_passthrough,
      no_fixed_buffers, backing_cache, request_timeout=S; ignored: defaults, auto, noauto, user, users,
      nouser, _netdev, nofail, x-*, comment=…; anything else is an error
`;

export { UsageError, type Command, type DoctorCommand, type MountCommand } from "./command.ts";

function intArg(name: string, v: string | undefined, min: number, max: number): number {
  if (v === undefined) throw new UsageError(`${name} needs a value`);
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new UsageError(`${name} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
  return n;
}

function numArg(name: string, v: string | undefined): number {
  if (v === undefined) throw new UsageError(`${name} needs a value`);
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${name} must be a number ≥ 0, got ${JSON.stringify(v)}`);
  return n;
}

function strArg(name: string, v: string | undefined): string {
  if (v === undefined || v === "") throw new UsageError(`${name} needs a value`);
  return v;
}

export function parseArgs(argv: string[]): Command {
  if (argv.length === 0) throw new UsageError("missing command");
  const [sub, ...rest] = argv;
  if (sub === "--help" || sub === "-h" || sub === "help") return { kind: "help" };
  if (sub === "--version" || sub === "-V" || sub === "version") return { kind: "version" };
  if (sub === "unmount" || sub === "umount") {
    if (rest.length !== 1 || rest[0]!.startsWith("-")) throw new UsageError("unmount takes exactly one MOUNTPOINT");
    return { kind: "unmount", mountpoint: rest[0]! };
  }
  if (sub === "stats") {
    const cmd: StatsCommand = { kind: "stats", mountpoint: "", once: false, json: false };
    for (const a of rest) {
      if (a === "--once") cmd.once = true;
      else if (a === "--json") cmd.json = true;
      else if (a === "--help" || a === "-h") return { kind: "help" };
      else if (a.startsWith("-")) throw new UsageError(`stats: unknown option ${a} (--once, --json)`);
      else if (cmd.mountpoint) throw new UsageError("stats takes exactly one MOUNTPOINT");
      else cmd.mountpoint = a;
    }
    if (!cmd.mountpoint) throw new UsageError("stats needs a MOUNTPOINT");
    return cmd;
  }
  if (sub === "doctor") {
    const cmd: DoctorCommand = { kind: "doctor", json: false };
    for (const a of rest) {
      if (a === "--json") cmd.json = true;
      else if (a === "--help" || a === "-h") return { kind: "help" };
      else throw new UsageError(`doctor: unknown argument ${JSON.stringify(a)} (only --json)`);
    }
    return cmd;
  }
  if (sub !== "mount") throw new UsageError(`unknown command ${JSON.stringify(sub)}`);

  const positional: string[] = [];
  const cmd: Omit<MountCommand, "fs" | "mountpoint"> & { fs?: MountCommand["fs"] } = {
    kind: "mount", transport: "auto", queueDepth: 0, maxWrite: 0, dataPlane: "native", workers: "auto", debug: false, allowOther: false,
    defaultPermissions: true, readOnly: false, writebackCache: false, kernelPassthrough: false, fixedBuffers: true, backingCache: false, poolSize: -1, zeroCopy: true, fileHandles: true,
    entryTtl: 1, attrTtl: 1, negativeTtl: 0, requestTimeout: 0,
  };
  const dashdash = rest.indexOf("--");
  const scriptArgs = dashdash >= 0 ? rest.splice(dashdash).slice(1) : [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    const [flag, inline] = a.startsWith("--") && a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const value = () => (inline !== undefined ? inline : rest[++i]);
    switch (flag) {
      case "--help": case "-h": return { kind: "help" };
      case "-o": {
        const list = rest[++i];
        if (list === undefined) throw new UsageError("-o needs a comma-separated list of mount options");
        applyMountOptions(cmd, list);
        break;
      }
      case "--memfs":
        if (cmd.fs && cmd.fs.type !== "memfs") throw new UsageError("--memfs and --passthrough exclude each other: choose one filesystem");
        cmd.fs = { type: "memfs" };
        break;
      case "--passthrough":
        if (cmd.fs) throw new UsageError(cmd.fs.type === "memfs" ? "--memfs and --passthrough exclude each other: choose one filesystem" : "--passthrough given twice");
        cmd.fs = { type: "passthrough", source: strArg(flag, value()) };
        break;
      case "--transport": {
        const t = value();
        if (t === undefined || t === "") throw new UsageError("--transport needs a value: auto, uring or classic");
        if (t !== "auto" && t !== "uring" && t !== "classic") throw new UsageError(`--transport must be auto, uring or classic, got ${JSON.stringify(t)}`);
        cmd.transport = t;
        break;
      }
      case "--queue-depth": cmd.queueDepth = intArg(flag, value(), 1, 1024); break;
      case "--max-write": cmd.maxWrite = intArg(flag, value(), 4096, 1 << 20); break;
      case "--stats-file": cmd.statsFile = strArg(flag, value()); break;
      case "--debug": cmd.debug = true; break;
      case "--watch": cmd.watch = true; break;
      case "--allow-other": cmd.allowOther = true; break;
      case "--no-default-permissions": cmd.defaultPermissions = false; break;
      case "--ro": cmd.readOnly = true; break;
      case "--fsname": cmd.fsname = strArg(flag, value()); break;
      case "--subtype": cmd.subtype = strArg(flag, value()); break;
      case "--writeback-cache": cmd.writebackCache = true; break;
      case "--kernel-passthrough": cmd.kernelPassthrough = true; break;
      case "--fd-budget": cmd.fdBudget = intArg(flag, value(), 1, 1 << 30); break;
      case "--no-file-handles": cmd.fileHandles = false; break;
      case "--no-fixed-buffers": cmd.fixedBuffers = false; break;
      case "--backing-cache": cmd.backingCache = true; break;
      case "--pool-size": cmd.poolSize = intArg(flag, value(), 0, 1 << 30); break;
      case "--no-zero-copy": cmd.zeroCopy = false; break;
      case "--workers": {
        const v = value();
        cmd.workers = v === "auto" ? "auto" : intArg(flag, v, 1, 64);
        break;
      }
      case "--data-plane": {
        const d = value();
        if (d !== "native" && d !== "js") throw new UsageError(`--data-plane must be native or js, got ${JSON.stringify(d)}`);
        cmd.dataPlane = d;
        break;
      }
      case "--entry-ttl": cmd.entryTtl = numArg(flag, value()); break;
      case "--attr-ttl": cmd.attrTtl = numArg(flag, value()); break;
      case "--negative-ttl": cmd.negativeTtl = numArg(flag, value()); break;
      case "--slow-request-ms": cmd.slowRequestMs = intArg(flag, value(), 0, 2 ** 31); break;
      case "--ring-wait-us": cmd.ringWaitMicros = intArg(flag, value(), 1, 10_000_000); break;
      case "--ring-flags": cmd.ringFlags = intArg(flag, value(), 0, 2 ** 32 - 1); break;
      case "--native-sync-max": cmd.nativeSyncMax = intArg(flag, value(), 0, 1 << 30); break;
      case "--no-pin": cmd.pin = false; break;
      case "--no-native-getattr": cmd.nativeGetattr = false; break;
      case "--lock-spin-us": cmd.lockSpinMicros = intArg(flag, value(), 0, 1_000_000); break;
      case "--test": {
        const t = strArg(flag, value());
        const [name, val] = t.includes("=") ? [t.slice(0, t.indexOf("=")), t.slice(t.indexOf("=") + 1)] : [t, undefined];
        cmd.test ??= {};
        if (name === "poison" && val === undefined) cmd.test.poison = true;
        else if (name === "fault" && val) cmd.test.fault = val;
        else if (name === "pool-fault" && val === "refuse") cmd.test.poolFault = val;
        else throw new UsageError(`--test: unknown test option ${JSON.stringify(t)} (poison, fault=SPEC, pool-fault=refuse)`);
        break;
      }
      case "--request-timeout": {
        cmd.requestTimeout = numArg(flag, value());
        if (cmd.requestTimeout <= 0) throw new UsageError("--request-timeout must be > 0 seconds (leave it out to wait forever)");
        break;
      }
      default:
        if (a.startsWith("-o") && a.length > 2) {
          applyMountOptions(cmd, a.slice(2)); // -oro,fsname=x
          break;
        }
        if (a.startsWith("-")) throw new UsageError(`unknown option ${a}`);
        positional.push(a);
    }
  }
  if (!cmd.fs) {
    if (positional.length !== 2) throw new UsageError("mount needs --memfs, --passthrough SRC or a script, and a MOUNTPOINT");
    cmd.fs = { type: "script", path: positional.shift()!, args: scriptArgs };
  } else if (scriptArgs.length) throw new UsageError("arguments after -- are for a script filesystem");
  if (positional.length !== 1) throw new UsageError(positional.length === 0 ? "missing MOUNTPOINT" : `unexpected arguments: ${positional.slice(1).join(" ")}`);
  if (cmd.watch && cmd.fs.type !== "script") throw new UsageError("--watch needs a script filesystem (fuse-uring mount --watch ./myfs.ts MOUNTPOINT)");
  if (cmd.kernelPassthrough && cmd.fs.type !== "passthrough") throw new UsageError("--kernel-passthrough needs --passthrough SRC");
  if (cmd.fdBudget !== undefined && cmd.fs.type !== "passthrough") throw new UsageError("--fd-budget needs --passthrough SRC");
  return { ...cmd, fs: cmd.fs, mountpoint: positional[0]! } as MountCommand;
}
