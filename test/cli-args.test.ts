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
    [["mount", "--memfs", "/tmp/x", "--fd-budget", "100"]],
    [["mount", "--passthrough", "/tmp", "/tmp/x", "--fd-budget", "0"]],
    [["mount", "--passthrough", "/tmp", "/tmp/x", "--fd-budget", "many"]],
  ])("%j → usage, exit 2", (args) => {
    const r = cli(args as string[]);
    expect(r.code).toBe(2);
    expect(r.err).toContain("Usage:");
  });

  test("--help documents every option and exits 0", () => {
    const r = cli(["--help"]);
    expect(r.code).toBe(0);
    for (const opt of ["--transport", "--queue-depth", "--max-write", "--stats-file", "--debug", "--allow-other", "--ro", "--fsname", "--subtype", "--fd-budget", "--no-file-handles"]) {
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
  });
});
