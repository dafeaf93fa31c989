// The mount(8) helper behind bin/mount.fuse.fuse-uring:
//   mount -t fuse.fuse-uring SOURCE MNT [-o OPTS]   →   mount.fuse.fuse-uring SOURCE MNT [-sfnv] [-o OPTS]
// and the same from an /etc/fstab line (`SOURCE MNT fuse.fuse-uring OPTS 0 0`).
// SOURCE is `memfs`, a directory (served with --passthrough) or a filesystem script. The daemon
// (`fuse-uring mount …`) is started in its own session with its output in a log file
// (<runtime dir>/mount-<mountpoint>.log, /run/fuse-uring/ for root); this returns once the
// daemon says the mount is up, or exits non-zero with the daemon's reason. `umount MNT` ends
// the daemon cleanly (its stop line goes to the log).
// Exit codes as mount(8) helpers use them: 0 mounted, 1 bad invocation, 32 mount failure.

import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs, UsageError } from "./args.ts";
import { isKnownMountOption } from "./mount-options.ts";
import { ensureRuntimeDir, runtimeDir } from "./runtime.ts";

const ME = "mount.fuse.fuse-uring";
const CLI = join(import.meta.dir, "fuse-uring.ts");
const READY = "fuse-uring: mounted ";
const READY_TIMEOUT_MS = 30_000;

class HelperError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
  }
}

interface HelperArgs {
  source: string;
  mountpoint: string;
  options: string[];
  sloppy: boolean;
  fake: boolean;
  verbose: boolean;
}

function parseHelperArgs(argv: string[]): HelperArgs {
  const a: HelperArgs = { source: "", mountpoint: "", options: [], sloppy: false, fake: false, verbose: false };
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "-o") {
      const v = argv[++i];
      if (v === undefined) throw new HelperError("-o needs a list of options", 1);
      a.options.push(v);
    } else if (arg.startsWith("-o")) a.options.push(arg.slice(2));
    else if (arg === "-t" || arg === "-N") i++; // type (we are it) / namespace (mount(8) handled it)
    else if (/^-[sfnvi]+$/.test(arg)) {
      if (arg.includes("s")) a.sloppy = true;
      if (arg.includes("f")) a.fake = true;
      if (arg.includes("v")) a.verbose = true;
    } else if (arg.startsWith("-")) throw new HelperError(`unknown argument ${arg}`, 1);
    else positional.push(arg);
  }
  if (positional.length !== 2) throw new HelperError(`usage: ${ME} SOURCE MOUNTPOINT [-o OPTIONS]   (SOURCE: memfs, a directory, or a filesystem script)`, 1);
  [a.source, a.mountpoint] = positional as [string, string];
  return a;
}

/** `fuse-uring mount` arguments that select the filesystem for SOURCE. */
function filesystemArgs(source: string): string[] {
  if (source === "memfs") return ["--memfs"];
  const abs = resolve(source);
  let st;
  try {
    st = statSync(abs);
  } catch {
    throw new HelperError(`source ${source} is neither "memfs" nor an existing directory or filesystem script`, 1);
  }
  if (st.isDirectory()) return ["--passthrough", abs];
  if (st.isFile()) return [abs];
  throw new HelperError(`source ${source} is neither "memfs", a directory nor a filesystem script`, 1);
}

/** The -o list for the daemon: fsname=SOURCE unless given; with -s, unknown options dropped. */
function daemonOptions(a: HelperArgs): string {
  const out: string[] = [];
  for (const list of a.options) {
    for (const opt of list.split(/(?<!\\),/)) {
      if (opt === "") continue;
      const name = opt.split("=")[0]!;
      if (a.sloppy && !isKnownMountOption(name)) {
        process.stderr.write(`${ME}: ignoring unknown option ${JSON.stringify(name)} (-s)\n`);
        continue;
      }
      out.push(opt);
    }
  }
  if (!out.some((o) => o.startsWith("fsname=")) && /^[^,\s\\]+$/.test(a.source)) out.unshift(`fsname=${a.source}`);
  return out.join(",");
}

/** A log file name for a mountpoint: /mnt/my data → mount-mnt-my_data.log. */
function logPathFor(mountpoint: string): string {
  const slug = resolve(mountpoint).replace(/^\/+/, "").replace(/[^A-Za-z0-9._-]/g, (c) => (c === "/" ? "-" : "_")) || "root";
  return join(runtimeDir(), `mount-${slug}.log`);
}

async function main(argv: string[]): Promise<number> {
  const a = parseHelperArgs(argv);
  const fsArgs = filesystemArgs(a.source);
  const opts = daemonOptions(a);
  const args = ["mount", ...fsArgs, a.mountpoint, ...(opts ? ["-o", opts] : [])];
  try {
    parseArgs(args); // bad options fail here, with the CLI's message, before anything starts
  } catch (e) {
    if (e instanceof UsageError) throw new HelperError(e.message, 1);
    throw e;
  }
  if (a.fake) return 0;

  const log = logPathFor(a.mountpoint);
  if (!ensureRuntimeDir()) throw new HelperError(`${runtimeDir()} is not a directory only this user can write (set FUSE_URING_RUNTIME_DIR)`, 32);
  rmSync(log, { force: true });
  const fd = openSync(log, "wx", 0o644);
  const cmd = [process.execPath, CLI, ...args];
  if (a.verbose) process.stderr.write(`${ME}: ${cmd.join(" ")} (log: ${log})\n`);
  // Own session (detached), no stdin, output only to the log: the daemon outlives this helper
  // and never holds mount(8)'s terminal or pipes.
  const child = Bun.spawn(cmd, { stdin: "ignore", stdout: fd, stderr: fd, detached: true, cwd: "/" });
  closeSync(fd);
  child.unref();

  let exited = false;
  child.exited.then(() => (exited = true));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const text = existsSync(log) ? readFileSync(log, "utf8") : "";
    const ready = text.split("\n").find((l) => l.startsWith(READY));
    if (ready) {
      if (a.verbose) process.stderr.write(`${ME}: ${ready} (daemon pid ${child.pid})\n`);
      return 0;
    }
    if (exited || Date.now() > deadline) {
      if (!exited) child.kill("SIGKILL");
      const reason = text.split("\n").filter((l) => l.startsWith("fuse-uring:")).join("\n") || text.trim() || `daemon exited with ${child.exitCode}`;
      throw new HelperError(`mounting ${a.source} at ${a.mountpoint} failed${exited ? "" : ` (not up within ${READY_TIMEOUT_MS / 1000} s)`}:\n${reason}\n(log: ${log})`, 32);
    }
    await Bun.sleep(30);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`${ME}: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(e instanceof HelperError ? e.code : 32);
  },
);
