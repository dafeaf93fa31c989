// Hot reload (`fuse-uring mount --watch ./fs.ts MNT`) through the real kernel: the script is
// rewritten on disk while separate processes use the mount; what they see must change at once
// (TTLs are set to an hour, so only invalidation can make that happen), node ids and working
// directories survive, broken edits keep the old version serving, and no request is lost.
import { describe, expect } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN,
  CLI,
  REPO,
  TRANSPORTS,
  cleanupAfterEach,
  fixtureCommand,
  fsop,
  fsopOk,
  fuseTest,
  isMounted,
  readStats,
  shOk,
  sleep,
  spawnBg,
  startDaemon,
  transportHooks,
  type Daemon,
  scratchDirs,
} from "../helpers/index.ts";

const scratchDir = scratchDirs("fuse-uring-reload-test-");

/** argv for `fuse-uring mount --watch SCRIPT MNT …` with hour-long kernel cache lifetimes. */
function watched(path: string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, CLI, "mount", "--watch", path, mnt, "--entry-ttl", "3600", "--attr-ttl", "3600", ...args];
}

async function waitFor(d: Daemon, pred: (err: string) => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred(d.stderr())) {
    if (Date.now() > deadline) throw new Error(`daemon never logged ${what}\n--- stderr ---\n${d.stderr().slice(-4000)}`);
    if (d.exited) throw new Error(`daemon exited while waiting for ${what}\n--- stderr ---\n${d.stderr().slice(-4000)}`);
    await sleep(20);
  }
}

const waitVersion = (d: Daemon, n: number) => waitFor(d, (e) => e.includes(`(version ${n})`), `"(version ${n})"`);
const count = (s: string, sub: string) => s.split(sub).length - 1;

async function cat(path: string): Promise<string> {
  return shOk('cat "$1"', [path]);
}

for (const transport of TRANSPORTS) {
  describe(`hot reload over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const args = ["--transport", transport];

    fuseTest("edits show at once: changed content, new and removed files, a cwd inside survives, broken edits keep serving", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const data = join(dir, "data.ts");
      const stats = join(dir, "stats.json"); // beside the script: written every second, reloads nothing
      const stop = join(dir, "stop");
      writeFileSync(data, `export const greeting = "v1\\n";\n`);
      const script = (inner: string, extra: string) =>
        `import { greeting } from "./data.ts";\n` +
        `export default {\n  "hello.txt": greeting,\n  "keep.txt": "keep\\n",\n  sub: { "inner.txt": ${JSON.stringify(inner)} },\n${extra}};\n`;
      writeFileSync(main, script("inner v1\n", `  "old.txt": "old\\n",\n`));
      const d = await startDaemon([...args, "--stats-file", stats], { command: watched(main) });
      expect(d.transport).toBe(transport);
      await waitFor(d, (e) => e.includes("watching 2 files"), "the watch line (script + its import)");
      const m = d.mnt;
      expect(await cat(`${m}/hello.txt`)).toBe("v1\n");
      expect(await cat(`${m}/old.txt`)).toBe("old\n");
      expect(await cat(`${m}/sub/inner.txt`)).toBe("inner v1\n");
      // Held open for the whole test, so the kernel keeps these inodes (and cannot FORGET them
      // when someone drops the caches): their node ids must survive every reload.
      const holder = spawnBg(["sh", "-c", 'exec 3<"$1/hello.txt" 4<"$1/keep.txt" 5<"$1/sub/inner.txt"; : > "$2.held"; while [ ! -e "$2" ]; do sleep 0.05; done', "sh", m, stop], { timeoutMs: 40_000 });
      for (let i = 0; i < 250 && !existsSync(`${stop}.held`); i++) await sleep(20);
      expect(existsSync(`${stop}.held`)).toBe(true);
      const keepBefore = await fsopOk("stat", `${m}/keep.txt`);
      const inoBefore = (await fsopOk("stat", `${m}/hello.txt`)).ino;

      // A shell working inside the mount for the whole test.
      const resident = spawnBg(
        ["sh", "-c", 'cd "$1/sub" || exit 9; while [ ! -e "$2" ]; do cat inner.txt > /dev/null || exit 1; sleep 0.05; done; pwd; cat inner.txt; ls', "sh", m, stop],
        { timeoutMs: 40_000 },
      );

      // 1. The imported file changes (same size: only a data invalidation can show it).
      writeFileSync(data, `export const greeting = "v2\\n";\n`);
      await waitVersion(d, 2);
      expect(d.stderr()).toMatch(/reloaded .*fs\.ts \(version 2\): 1 changed \(\/hello\.txt\); load [\d.]+ ms, swap [\d.]+ ms, \d+ requests? in flight/);
      expect(await cat(`${m}/hello.txt`)).toBe("v2\n");
      expect((await fsopOk("stat", `${m}/hello.txt`)).ino).toBe(inoBefore);

      // 2. The script changes: a file added, one removed, one in the cwd of the resident changed.
      writeFileSync(main, script("inner v2, longer\n", `  "new.txt": "new\\n",\n`));
      await waitVersion(d, 3);
      expect(d.stderr()).toMatch(/\(version 3\): 1 changed \(\/sub\/inner\.txt\), 1 added \(\/new\.txt\), 1 removed \(\/old\.txt\)/);
      expect((await fsopOk("listdir", m)).names).toEqual(["hello.txt", "keep.txt", "new.txt", "sub"]);
      expect(await cat(`${m}/new.txt`)).toBe("new\n");
      expect((await fsop("stat", `${m}/old.txt`)).code).toBe("ENOENT"); // its cached name was dropped
      expect(await cat(`${m}/sub/inner.txt`)).toBe("inner v2, longer\n");
      const keepAfter = await fsopOk("stat", `${m}/keep.txt`);
      expect(keepAfter.ino).toBe(keepBefore.ino);
      expect(keepAfter.mtime).toBe(keepBefore.mtime); // unchanged files keep their times

      // 3. A broken edit: the error with file:line, the old version keeps serving.
      writeFileSync(main, `import { greeting } from "./data.ts";\nexport default {\n  "hello.txt": greeting,,\n};\n`);
      await waitFor(d, (e) => e.includes("failed, still serving version 3"), "the reload failure");
      expect(d.stderr()).toContain(`${main}:3:`);
      expect(d.stderr()).toContain(`"hello.txt": greeting,,`);
      expect(await cat(`${m}/new.txt`)).toBe("new\n");
      expect(await cat(`${m}/hello.txt`)).toBe("v2\n");

      // 4. A factory that throws: same, with its line.
      writeFileSync(main, `export default () => {\n  throw new Error("factory says no");\n};\n`);
      await waitFor(d, (e) => e.includes("factory says no"), "the factory error");
      expect(d.stderr()).toContain(`${main}:2:`);
      expect(await cat(`${m}/new.txt`)).toBe("new\n");
      await sleep(1200); // the stats file beside the script is rewritten meanwhile: no retry, no new error

      // 5. Fixed again.
      writeFileSync(main, script("inner v3\n", ""));
      await waitVersion(d, 4);
      expect(await cat(`${m}/sub/inner.txt`)).toBe("inner v3\n");
      expect((await fsop("stat", `${m}/new.txt`)).code).toBe("ENOENT");

      writeFileSync(stop, "");
      expect((await holder.done).code).toBe(0);
      const r = await resident.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${m}/sub\ninner v3\ninner.txt\n`);

      const s = await readStats(stats, { until: (x) => (x as { reloads?: number }).reloads === 3 });
      expect((s as { reloads?: number }).reloads).toBe(3);
      expect((s as { reloadErrors?: number }).reloadErrors).toBe(2);
      expect(count(d.stderr(), "fuse-uring: reloaded")).toBe(3);
      const code = await d.stop("SIGTERM", 10_000);
      expect(code, d.stderr()).toBe(0);
      expect(isMounted(m)).toBe(false);
    });

    fuseTest("a request in flight finishes on the old version; the next one sees the new", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const version = (text: string, slow: boolean) =>
        `import { opened, paths } from "fuse-uring";\n` +
        `export default paths({\n` +
        `  getattr: (p) => (p === "/" ? { type: "dir" } : p === "/f" ? { size: 64 } : null),\n` +
        `  readdir: () => ["f"],\n` +
        `  open: () => opened(undefined, { directIo: true }),\n` +
        `  async read(p, off) {\n` +
        (slow ? `    console.error("script: slow read start");\n    await Bun.sleep(1500);\n` : "") +
        `    return off === 0 ? ${JSON.stringify(text)} : null;\n  },\n});\n`;
      writeFileSync(main, version("old version\n", true));
      const d = await startDaemon(args, { command: watched(main) });
      const reader = spawnBg(["cat", `${d.mnt}/f`], { timeoutMs: 20_000 });
      await waitFor(d, (e) => e.includes("script: slow read start"), "the slow read");
      writeFileSync(main, version("new version\n", false));
      await waitVersion(d, 2);
      expect(d.stderr()).toMatch(/\(version 2\): .*[1-9]\d* requests? in flight/);
      const r = await reader.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("old version\n");
      expect(await cat(`${d.mnt}/f`)).toBe("new version\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("100 reloads under concurrent readers: every request answered, no caller stuck", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const stats = join(dir, "stats.json");
      const stop = join(dir, "stop");
      const version = (n: number) =>
        `export default {\n  "n.txt": "${n}\\n",\n  "static.txt": "static\\n",\n  d: { "f.txt": "x", ["g" + ${n % 3}]: "y" },\n};\n`;
      writeFileSync(main, version(0));
      const d = await startDaemon([...args, "--stats-file", stats], { command: watched(main) });
      const m = d.mnt;
      const loop =
        'i=0; while [ ! -e "$2" ]; do cat "$1/static.txt" "$1/n.txt" > /dev/null || { echo "read failed at $i" >&2; exit 1; }; ' +
        'ls "$1/d" > /dev/null || { echo "ls failed at $i" >&2; exit 1; }; i=$((i+1)); done; echo $i';
      const readers = [0, 1].map(() => spawnBg(["sh", "-c", loop, "sh", m, stop], { timeoutMs: 55_000 }));
      const cwdReader = spawnBg(["sh", "-c", 'cd "$1/d" && while [ ! -e "$2" ]; do cat f.txt > /dev/null || exit 1; done; pwd', "sh", m, stop], { timeoutMs: 55_000 });
      for (let n = 1; n <= 100; n++) {
        writeFileSync(main, version(n));
        await waitVersion(d, n + 1);
      }
      expect(await cat(`${m}/n.txt`)).toBe("100\n");
      expect((await fsopOk("listdir", `${m}/d`)).names).toEqual(["f.txt", "g1"]);
      writeFileSync(stop, "");
      for (const r of [...(await Promise.all(readers.map((x) => x.done))), await cwdReader.done]) {
        expect(r.timedOut, r.stderr).toBe(false); // a caller stuck in the kernel would time out
        expect(r.code, r.stderr).toBe(0);
      }
      const loops = (await Promise.all(readers.map((x) => x.done))).map((r) => Number(r.stdout.trim()));
      for (const l of loops) expect(l).toBeGreaterThan(0);
      expect((await cwdReader.done).stdout).toBe(`${m}/d\n`);
      const s = (await readStats(stats, { until: (x) => x.reloads === 100 && x.inflight === 0 })) as unknown as {
        reloads?: number;
        reloadErrors?: number;
        inflight: number;
      };
      expect(s.reloads).toBe(100);
      expect(s.inflight).toBe(0);
      expect(d.stderr()).not.toContain("threw (answered EIO)");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
      expect(isMounted(m)).toBe(false);
    }, 90_000);

    fuseTest("a directory removed under a process's cwd answers ENOENT there; restored, it serves again", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const flags = scratchDir();
      const version = (sub: string | null) => `export default {\n  "top.txt": "top\\n",\n${sub === null ? "" : `  sub: { "inner.txt": ${JSON.stringify(sub)} },\n`}};\n`;
      writeFileSync(main, version("A\n"));
      const d = await startDaemon(args, { command: watched(main) });
      const waitFlag = async (f: string) => {
        for (let i = 0; i < 500 && !existsSync(join(flags, f)); i++) await sleep(20);
        expect(existsSync(join(flags, f))).toBe(true);
      };
      const resident = spawnBg(
        [
          "sh", "-c",
          'cd "$1/sub" || exit 9; cat inner.txt; touch "$2/ready"; ' +
            'while [ ! -e "$2/go1" ]; do sleep 0.02; done; cat inner.txt; echo "rc=$?"; touch "$2/done1"; ' +
            'while [ ! -e "$2/go2" ]; do sleep 0.02; done; cat inner.txt; echo "rc=$?"',
          "sh", d.mnt, flags,
        ],
        { timeoutMs: 30_000 },
      );
      await waitFlag("ready");
      writeFileSync(main, version(null));
      await waitVersion(d, 2);
      // inner.txt is listed too if the kernel still held it (someone may have dropped the caches).
      expect(d.stderr()).toMatch(/\(version 2\): (1 removed \(\/sub\)|2 removed \(\/sub, \/sub\/inner\.txt\));/);
      expect((await fsopOk("listdir", d.mnt)).names).toEqual(["top.txt"]);
      writeFileSync(join(flags, "go1"), "");
      await waitFlag("done1");
      writeFileSync(main, version("B\n"));
      await waitVersion(d, 3);
      writeFileSync(join(flags, "go2"), "");
      const r = await resident.done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("A\nrc=1\nB\nrc=0\n");
      expect(r.stderr).toContain("No such file or directory");
      expect(await cat(`${d.mnt}/sub/inner.txt`)).toBe("B\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("a save without changes reloads nothing; SIGHUP forces a reload; the replaced version's ctx.signal aborts", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const text = `export default (ctx) => {\n  ctx.signal.addEventListener("abort", () => console.error("script: version aborted"));\n  return { "a.txt": "a\\n" };\n};\n`;
      writeFileSync(main, text);
      const d = await startDaemon(args, { command: watched(main) });
      writeFileSync(main, text);
      writeFileSync(join(dir, "unrelated.json"), "{}");
      await sleep(600);
      expect(d.stderr()).not.toContain("reloaded");
      d.proc.kill("SIGHUP");
      await waitVersion(d, 2);
      expect(d.stderr()).toMatch(/\(version 2\): nothing the kernel has cached changed;/);
      await waitFor(d, (e) => e.includes("script: version aborted"), "the abort of version 1");
      expect(count(d.stderr(), "script: version aborted")).toBe(1);
      expect(await cat(`${d.mnt}/a.txt`)).toBe("a\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("an import first loaded by a failed reload is reloaded when it changes later", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      const dep = join(dir, "dep.ts");
      writeFileSync(main, `export default { "a.txt": "v1\\n" };\n`);
      const d = await startDaemon(args, { command: watched(main) });
      expect(await cat(`${d.mnt}/a.txt`)).toBe("v1\n");
      writeFileSync(dep, `export const n = "dep1\\n";\n`);
      writeFileSync(main, `import { n } from "./dep.ts";\nthrow new Error("not yet");\nexport default { "a.txt": n };\n`);
      await waitFor(d, (e) => e.includes("not yet"), "the failed load");
      expect(d.stderr()).toContain(`${main}:2:`);
      writeFileSync(main, `import { n } from "./dep.ts";\nexport default { "a.txt": n };\n`);
      await waitVersion(d, 2);
      expect(await cat(`${d.mnt}/a.txt`)).toBe("dep1\n");
      writeFileSync(dep, `export const n = "dep2\\n";\n`);
      await waitVersion(d, 3);
      expect(await cat(`${d.mnt}/a.txt`)).toBe("dep2\n");
      // An import of a file that does not exist yet fails; creating the file reloads.
      writeFileSync(main, `import { m } from "./later.ts";\nexport default { "a.txt": m };\n`);
      await waitFor(d, (e) => e.includes("cannot find module ./later.ts"), "the missing import");
      expect(d.stderr()).toContain(`${main}:1: cannot find module ./later.ts`);
      writeFileSync(join(dir, "later.ts"), `export const m = "later\\n";\n`);
      await waitVersion(d, 4);
      expect(await cat(`${d.mnt}/a.txt`)).toBe("later\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("API: m.reload(tree), m.reload((old) => …), and a refused m.reload(inodeFS)", async () => {
      const d = await startDaemon(args, { command: fixtureCommand("reload-api.ts") });
      const m = d.mnt;
      expect(await cat(`${m}/a.txt`)).toBe("one\n");
      expect(await cat(`${m}/gone.txt`)).toBe("x\n");
      d.proc.kill("SIGUSR1");
      await waitFor(d, (e) => e.includes("fixture: report"), "the report");
      const report = JSON.parse(/fixture: report (.*)/.exec(d.stderr())![1]!);
      expect(report).toEqual({ changed: ["/a.txt"], added: ["/b.txt"], removed: ["/gone.txt"], kind: "paths", reloads: 1 });
      expect(await cat(`${m}/a.txt`)).toBe("two\n");
      expect((await fsopOk("listdir", m)).names).toEqual(["a.txt", "b.txt"]);
      expect((await fsop("stat", `${m}/gone.txt`)).code).toBe("ENOENT");
      d.proc.kill("SIGUSR2");
      await waitFor(d, (e) => e.includes("fixture: refused"), "the refusal");
      expect(d.stderr()).toContain("fixture: refused reload refused: the new version is an inode-API filesystem (MemFS)");
      expect(d.stderr()).toContain("errors=1");
      expect(await cat(`${m}/a.txt`)).toBe("two\n");
      d.proc.kill("SIGHUP");
      await waitFor(d, (e) => e.includes("fixture: hook report"), "the hook report");
      expect(d.stderr()).toContain("fixture: hook got PathFS");
      expect(JSON.parse(/fixture: hook report (.*)/.exec(d.stderr())![1]!)).toEqual({ changed: ["/a.txt"], removed: ["/b.txt"], kind: "paths" });
      expect(await cat(`${m}/a.txt`)).toBe("three\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("inode API: a reload without a hook is refused, a reload(old) hook carries the state over", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      writeFileSync(main, `import { memfs } from "fuse-uring";\nexport default memfs();\n`);
      const d = await startDaemon(args, { command: watched(main) });
      await shOk('echo kept > "$1/file"', [d.mnt]);
      writeFileSync(main, `import { memfs } from "fuse-uring";\nexport default memfs(); // edited\n`);
      await waitFor(d, (e) => e.includes("reload refused"), "the refusal");
      expect(d.stderr()).toContain("still serving version 1");
      expect(d.stderr()).toContain("export function reload(old)");
      expect(await cat(`${d.mnt}/file`)).toBe("kept\n");
      writeFileSync(
        main,
        `import { memfs } from "fuse-uring";\nexport default memfs();\n` +
          `export function reload(old) {\n  console.error("script: reload hook got " + old.constructor.name);\n  return old;\n}\n`,
      );
      await waitVersion(d, 2);
      expect(d.stderr()).toContain("script: reload hook got MemFS");
      expect(d.stderr()).toContain("new version from the reload hook");
      expect(await cat(`${d.mnt}/file`)).toBe("kept\n");
      await shOk('echo more > "$1/file2"', [d.mnt]);
      expect(await cat(`${d.mnt}/file2`)).toBe("more\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });

    fuseTest("switching a tree script to the inode API without a hook is refused; the tree keeps serving", async () => {
      const dir = scratchDir();
      const main = join(dir, "fs.ts");
      writeFileSync(main, `export default { "t.txt": "tree\\n" };\n`);
      const d = await startDaemon(args, { command: watched(main) });
      writeFileSync(main, `import { memfs } from "fuse-uring";\nexport default memfs();\n`);
      await waitFor(d, (e) => e.includes("reload refused"), "the refusal");
      expect(d.stderr()).toContain("the new version is an inode-API filesystem (MemFS)");
      expect(await cat(`${d.mnt}/t.txt`)).toBe("tree\n");
      expect(await d.stop("SIGTERM", 10_000)).toBe(0);
    });
  });
}

describe("hot reload with --workers 2 over uring", () => {
  transportHooks("uring");
  cleanupAfterEach();

  /** A replicable filesystem (node ids fixed): /f reads "TEXT main|worker\n", direct I/O. */
  const replicable = (text: string) =>
    `import { FuseError, S_IFDIR, S_IFREG } from ${JSON.stringify(`${REPO}/lib/index.ts`)};\n` +
    `import { isMainThread } from "node:worker_threads";\n` +
    `const body = () => Buffer.from(${JSON.stringify(text)} + (isMainThread ? " main" : " worker") + "\\n");\n` +
    `const attr = (ino) => ({ ino, mode: ino === 1 ? S_IFDIR | 0o755 : S_IFREG | 0o444, nlink: 1, uid: 0, gid: 0, rdev: 0, size: ino === 1 ? 0 : 4096, blocks: 0, atime: 0, atimeNsec: 0, mtime: 0, mtimeNsec: 0, ctime: 0, ctimeNsec: 0 });\n` +
    `export default {\n  replicable: true,\n` +
    `  lookup(_c, parent, name) { if (parent === 1 && name === "f") return { ino: 2, attr: attr(2) }; throw new FuseError("ENOENT"); },\n` +
    `  getattr(_c, ino) { return attr(ino); },\n` +
    `  open() { return { fh: 0, directIo: true }; },\n` +
    `  read(_c, _i, _fh, off) { const b = body(); return off >= b.length ? new Uint8Array(0) : b.subarray(off); },\n};\n`;

  fuseTest("every worker swaps to the new version; a broken edit keeps all of them on the old one", async () => {
    const dir = scratchDir();
    const main = join(dir, "fs.ts");
    writeFileSync(main, replicable("v1"));
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: watched(main) });
    expect(d.readyLine).toContain("2 worker threads");
    const onCpu = (cpu: number) => shOk(`taskset -c ${cpu} cat "$1/f"`, [d.mnt]);
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v1 worker\n", "v1 worker\n"]);
    writeFileSync(main, replicable("v2"));
    await waitVersion(d, 2);
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v2 worker\n", "v2 worker\n"]);
    writeFileSync(main, replicable("v3").replace("replicable: true,", "replicable: true,,"));
    await waitFor(d, (e) => e.includes("failed, still serving version 2"), "the failure");
    expect(d.stderr()).toContain(`${main}:`);
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v2 worker\n", "v2 worker\n"]);
    writeFileSync(main, replicable("v4"));
    await waitVersion(d, 3);
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v4 worker\n", "v4 worker\n"]);
    expect(await d.stop("SIGTERM", 10_000)).toBe(0);
  });
});
