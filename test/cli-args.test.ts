// Bad command lines print usage and exit 2 before anything touches the kernel.
import { describe, expect, test } from "bun:test";
import { parseArgs, UsageError } from "../bin/args.ts";

const bun = process.execPath;
function cli(args: string[]) {
  const r = Bun.spawnSync([bun, "bin/fuse-uring.ts", ...args], { cwd: `${import.meta.dir}/..`, stderr: "pipe", stdout: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

describe("CLI arguments", () => {
  test.each([
    [[]],
    [["frobnicate"]],
    [["mount"]],
    [["mount", "--memfs"]],
    [["mount", "--memfs", "/tmp/x", "--transport", "carrier-pigeon"]],
    [["mount", "--memfs", "/tmp/x", "--queue-depth", "0"]],
    [["mount", "--memfs", "/tmp/x", "--max-write", "123"]],
    [["mount", "--memfs", "/tmp/x", "--no-such-flag"]],
    [["mount", "--memfs", "/tmp/x", "extra"]],
    [["unmount"]],
    [["mount", "--memfs", "/tmp/x", "--kernel-passthrough"]],
    [["mount", "--memfs", "/tmp/x", "--watch"]],
    [["mount", "--memfs", "/tmp/x", "--fd-budget", "100"]],
    [["mount", "--passthrough", "/tmp", "/tmp/x", "--fd-budget", "0"]],
    [["mount", "--passthrough", "/tmp", "/tmp/x", "--fd-budget", "many"]],
    [["mount", "--memfs", "/tmp/x", "--test", "explode"]],
    [["mount", "--memfs", "/tmp/x", "--ring-wait-us", "0"]],
  ])("%j → usage, exit 2", (args) => {
    const r = cli(args as string[]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("Usage:");
  });

  test("--help documents every option and exits 0", () => {
    const r = cli(["--help"]);
    expect(r.code).toBe(0);
    for (const opt of ["--transport", "--queue-depth", "--max-write", "--stats-file", "--debug", "--allow-other", "--ro", "--fsname", "--subtype", "-o OPT", "--version", "fuse-uring stats MOUNTPOINT", "3  connection aborted", "4  fail-stop", "--fd-budget", "--no-file-handles",
      "--slow-request-ms", "--ring-wait-us", "--ring-flags", "--native-sync-max", "--no-pin", "--no-native-getattr", "--lock-spin-us", "--test NAME"]) {
      expect(r.out).toContain(opt);
    }
  });

  test("parses a full mount command", () => {
    const c = parseArgs(["mount", "--memfs", "/mnt/a", "--transport=uring", "--queue-depth", "16", "--max-write", "131072", "--stats-file", "/tmp/s.json", "--debug", "--ro"]);
    expect(c).toMatchObject({ kind: "mount", fs: { type: "memfs" }, mountpoint: "/mnt/a", transport: "uring", queueDepth: 16, maxWrite: 131072, statsFile: "/tmp/s.json", debug: true, readOnly: true });
    expect(parseArgs(["mount", "./fs.ts", "/mnt/b", "--", "x", "--y"])).toMatchObject({ fs: { type: "script", path: "./fs.ts", args: ["x", "--y"] }, mountpoint: "/mnt/b" });
    expect(() => parseArgs(["mount", "--passthrough"])).toThrow(UsageError);
    expect(parseArgs(["mount", "--passthrough", "/src", "/mnt/c", "--fd-budget", "1000", "--no-file-handles"])).toMatchObject({ fdBudget: 1000, fileHandles: false });
    const d = parseArgs(["mount", "--passthrough", "/src", "/mnt/c"]) as { fdBudget?: number; fileHandles: boolean };
    expect(d.fdBudget).toBeUndefined();
    expect(d.fileHandles).toBe(true);
    expect(parseArgs(["mount", "--watch", "./fs.ts", "/mnt/c"])).toMatchObject({ fs: { type: "script", path: "./fs.ts" }, mountpoint: "/mnt/c", watch: true });
    expect((parseArgs(["mount", "./fs.ts", "/mnt/c"]) as { watch?: boolean }).watch).toBeFalsy();
    expect(parseArgs(["mount", "--memfs", "/mnt/c", "--workers", "auto"])).toMatchObject({ workers: "auto" });
    expect(parseArgs(["mount", "--memfs", "/mnt/c", "--workers", "3"])).toMatchObject({ workers: 3 });
    expect(() => parseArgs(["mount", "--memfs", "/mnt/c", "--workers", "many"])).toThrow(UsageError);
    expect(() => parseArgs(["mount", "--memfs", "/mnt/c", "--workers", "0"])).toThrow(UsageError);
  });

  test("tuning knobs are flags; test knobs are --test options (lib/knobs.ts)", () => {
    const c = parseArgs(["mount", "--memfs", "/mnt/c", "--slow-request-ms", "500", "--ring-wait-us=2000", "--ring-flags", "4096", "--native-sync-max", "65536", "--no-pin",
      "--no-native-getattr", "--lock-spin-us", "0", "--test", "poison", "--test", "fault=worker-exit:1:5"]);
    expect(c).toMatchObject({ slowRequestMs: 500, ringWaitMicros: 2000, ringFlags: 4096, nativeSyncMax: 65536, pin: false, nativeGetattr: false, lockSpinMicros: 0, test: { poison: true, fault: "worker-exit:1:5" } });
    const d = parseArgs(["mount", "--memfs", "/mnt/c"]) as { pin?: boolean; test?: unknown; ringWaitMicros?: number };
    expect([d.pin, d.test, d.ringWaitMicros]).toEqual([undefined, undefined, undefined]);
  });

  test("buffer pools: --pool-size, --no-zero-copy, -o pool_size/no_zero_copy, --test pool-fault=refuse", () => {
    expect(parseArgs(["mount", "--memfs", "/mnt/c"])).toMatchObject({ poolSize: -1, zeroCopy: true });
    expect(parseArgs(["mount", "--memfs", "/mnt/c", "--pool-size", "8388608", "--no-zero-copy", "--test", "pool-fault=refuse"]))
      .toMatchObject({ poolSize: 8388608, zeroCopy: false, test: { poolFault: "refuse" } });
    expect(parseArgs(["mount", "--memfs", "/mnt/c", "-o", "pool_size=0,no_zero_copy"])).toMatchObject({ poolSize: 0, zeroCopy: false });
    expect(() => parseArgs(["mount", "--memfs", "/mnt/c", "--test", "pool-fault=maybe"])).toThrow(UsageError);
  });
});

describe("--version and -o mount options", () => {
  test("--version prints the package version and exits 0", () => {
    const r = cli(["--version"]);
    expect(r.code).toBe(0);
    const pkg = require("../package.json");
    expect(r.out).toStartWith(`fuse-uring ${pkg.version} `);
  });

  test("-o maps the standard FUSE/mount(8) options onto the flags", () => {
    const c = parseArgs(["mount", "--memfs", "/m", "-o", "ro,allow_other,fsname=src,subtype=demo,max_read=65536,noexec,noatime,nosuid,nodev", "-oentry_timeout=5,attr_timeout=2.5,debug,defaults,_netdev"]);
    expect(c).toMatchObject({ readOnly: true, allowOther: true, fsname: "src", subtype: "demo", entryTtl: 5, attrTtl: 2.5, debug: true, vfs: { maxRead: 65536, noexec: true, noatime: true, suid: false, dev: false } });
    expect(parseArgs(["mount", "--memfs", "/m", "-o", "ro", "-o", "rw"])).toMatchObject({ readOnly: false });
    expect(parseArgs(["mount", "--memfs", "/m", "-o", "transport=classic,queue_depth=4,max_write=65536,writeback_cache,no_default_permissions"])).toMatchObject({
      transport: "classic", queueDepth: 4, maxWrite: 65536, writebackCache: true, defaultPermissions: false,
    });
    // mount(8) escapes commas inside values with a backslash
    expect(parseArgs(["mount", "--memfs", "/m", "-o", "stats_file=/tmp/a\\,b.json"])).toMatchObject({ statsFile: "/tmp/a,b.json" });
  });

  test.each([
    ["ro,frobnicate", "frobnicate"],
    ["max_read=abc", "max_read"],
    ["max_read", "max_read"],
    ["ro=1", "ro"],
    ["transport=pigeon", "transport"],
    ["allow_root", "allow_root"],
  ])("-o %s → names %s, usage, exit 2", (opts, name) => {
    const r = cli(["mount", "--memfs", "/tmp/x", "-o", opts]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(name);
    expect(r.err).toContain("Usage:");
  });

  test("-o without a list → usage, exit 2", () => {
    const r = cli(["mount", "--memfs", "/tmp/x", "-o"]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("-o needs");
  });
});
