// The scripting layers through real mounts: the examples mounted with the CLI
// (`fuse-uring mount ./examples/X.ts MNT`), a path-handler fixture daemon (errors, interrupts,
// invalidation), `await using` and broken scripts. Every client runs in its own process.
import { describe, expect } from "bun:test";
import { Database } from "bun:sqlite";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BUN,
  CLI,
  REPO,
  TRANSPORTS,
  cleanupAfterEach,
  fixtureCommand,
  fmt,
  fsop,
  fsopOk,
  fuseTest,
  isMounted,
  makeMountpoint,
  run,
  sh,
  shOk,
  sleep,
  spawnBg,
  startDaemon,
  transportHooks,
  type Daemon,
  scratchDirs,
} from "../helpers/index.ts";

const scratchDir = scratchDirs("fuse-uring-script-test-");

/** argv for `fuse-uring mount SCRIPT MNT …` */
function script(path: string): (mnt: string, args: string[]) => string[] {
  return (mnt, args) => [BUN, CLI, "mount", path, mnt, ...args];
}

async function waitFor(d: Daemon, text: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!d.stderr().includes(text)) {
    if (Date.now() > deadline) throw new Error(`daemon never logged ${JSON.stringify(text)}\n--- stderr ---\n${d.stderr().slice(-4000)}`);
    if (d.exited) throw new Error(`daemon exited while waiting for ${JSON.stringify(text)}\n--- stderr ---\n${d.stderr().slice(-4000)}`);
    await sleep(25);
  }
}

async function cat(path: string): Promise<string> {
  return shOk('cat "$1"', [path]);
}

/** Stop with SIGTERM and expect a clean exit and no mount left. */
async function stopClean(d: Daemon): Promise<void> {
  const code = await d.stop("SIGTERM", 10_000);
  expect(code, d.stderr()).toBe(0);
  expect(isMounted(d.mnt)).toBe(false);
}

for (const transport of TRANSPORTS) {
  describe(`script examples over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const args = ["--transport", transport];

    fuseTest("hello.ts: the smallest tree", async () => {
      const d = await startDaemon(args, { command: script("./examples/hello.ts") });
      expect(d.transport).toBe(transport);
      expect((await fsopOk("listdir", d.mnt)).names).toEqual(["hello.txt"]);
      expect(await cat(`${d.mnt}/hello.txt`)).toBe("Hello, world!\n");
      const st = await fsopOk("stat", `${d.mnt}/hello.txt`);
      expect(st.size).toBe(14);
      expect(st.perm).toBe(0o444);
      expect(st.type).toBe(0o100000);
      // Read-only, also for root (the daemon refuses write opens).
      expect((await fsop("write", `${d.mnt}/hello.txt`, "x", "O_WRONLY")).code).toBe("EACCES");
      expect((await fsop("write", `${d.mnt}/new.txt`, "x")).code).toBe("EACCES");
      expect(await cat(`${d.mnt}/hello.txt`)).toBe("Hello, world!\n");
      await stopClean(d);
    });

    fuseTest("clock.ts: computed files have the right size and fresh content", async () => {
      const d = await startDaemon(args, { command: script("./examples/clock.ts") });
      const now = await cat(`${d.mnt}/now.txt`);
      expect(Math.abs(Date.parse(now.trim()) - Date.now())).toBeLessThan(10_000);
      const size = (await fsopOk("stat", `${d.mnt}/now.txt`)).size;
      expect(size).toBe(now.length);
      // A larger computed file: stat size = bytes cat sees, every day of the year.
      const year = await cat(`${d.mnt}/year.txt`);
      const lines = year.trimEnd().split("\n");
      expect([365, 366]).toContain(lines.length);
      expect(lines[0]).toMatch(/^\d{4}-01-01 \w+day$/);
      expect((await fsopOk("stat", `${d.mnt}/year.txt`)).size).toBe(Buffer.byteLength(year));
      const dd = await run(["sh", "-c", 'dd if="$1" bs=1000 status=none | wc -c', "sh", `${d.mnt}/year.txt`]);
      expect(Number(dd.stdout.trim()), fmt(dd)).toBe(Buffer.byteLength(year));
      // Content changes between opens.
      const u1 = await cat(`${d.mnt}/uptime.txt`);
      await sleep(1100);
      const u2 = await cat(`${d.mnt}/uptime.txt`);
      expect(parseFloat(u2)).toBeGreaterThan(parseFloat(u1) + 1);
      expect((await fsopOk("listdir", `${d.mnt}/zones`)).names).toEqual(["local.txt", "utc.txt"]);
      expect(await cat(`${d.mnt}/zones/utc.txt`)).toContain("GMT");
      const ticks = (await fsopOk("listdir", `${d.mnt}/ticks`)).names as string[];
      expect(ticks.length).toBeGreaterThan(0);
      expect(await cat(`${d.mnt}/ticks/tick-0`)).toBe("0\n");
      expect((await fsopOk("stat", `${d.mnt}/zones`)).type).toBe(0o040000);
      await stopClean(d);
    });

    fuseTest("json.ts: a JSON file as a writable tree", async () => {
      const dir = scratchDir();
      const json = join(dir, "data.json");
      writeFileSync(json, JSON.stringify({ name: "demo", version: 1, tags: ["a", "b"], nested: { deep: { flag: true } } }));
      const onDisk = () => JSON.parse(readFileSync(json, "utf8"));
      const d = await startDaemon(args, { command: script("./examples/json.ts"), env: { JSON_FILE: json } });
      const m = d.mnt;
      expect((await fsopOk("listdir", m)).names).toEqual(["name", "nested", "tags", "version"]);
      expect(await cat(`${m}/name`)).toBe("demo\n");
      expect(await cat(`${m}/version`)).toBe("1\n");
      expect(await cat(`${m}/nested/deep/flag`)).toBe("true\n");
      expect((await fsopOk("listdir", `${m}/tags`)).names).toEqual(["0", "1"]);
      expect(await cat(`${m}/tags/1`)).toBe("b\n");
      expect((await fsopOk("stat", `${m}/nested`)).type).toBe(0o040000);
      expect((await fsopOk("stat", `${m}/name`)).size).toBe(5);

      await shOk('echo 42 > "$1/version"', [m]);
      expect(onDisk().version).toBe(42);
      expect(await cat(`${m}/version`)).toBe("42\n");
      await shOk('echo renamed > "$1/name"', [m]);
      expect(onDisk().name).toBe("renamed");
      await shOk('printf "hello world\\n" > "$1/nested/deep/greeting"', [m]);
      expect(onDisk().nested.deep.greeting).toBe("hello world");
      await shOk('mkdir "$1/extra" && echo x > "$1/extra/y"', [m]);
      expect(onDisk().extra).toEqual({ y: "x" });
      await shOk('mv "$1/extra/y" "$1/moved" && rmdir "$1/extra" && rm "$1/name"', [m]);
      const after = onDisk();
      expect(after.moved).toBe("x");
      expect("extra" in after || "name" in after).toBe(false);
      expect((await fsop("rmdir", `${m}/nested`)).code).toBe("ENOTEMPTY");
      // Changes made to the file by someone else show up (after the 1 s attribute TTL).
      writeFileSync(json, JSON.stringify({ fresh: "from outside" }));
      await sleep(1200);
      expect((await fsopOk("listdir", m)).names).toEqual(["fresh"]);
      expect(await cat(`${m}/fresh`)).toBe("from outside\n");
      await stopClean(d);
    });

    fuseTest("sqlite.ts: rows as JSON files, writable", async () => {
      const dir = scratchDir();
      const dbPath = join(dir, "notes.db");
      const d = await startDaemon(args, { command: script("./examples/sqlite.ts"), env: { SQLITE_DB: dbPath } });
      const m = d.mnt;
      const q = <T,>(sql: string, ...params: (string | number)[]): T[] => {
        const db = new Database(dbPath, { readonly: true });
        try {
          return db.query(sql).all(...params) as T[];
        } finally {
          db.close();
        }
      };
      expect((await fsopOk("listdir", m)).names).toEqual(["notes", "schema.sql"]);
      expect(await cat(`${m}/schema.sql`)).toContain("CREATE TABLE notes");
      expect((await fsopOk("listdir", `${m}/notes`)).names).toEqual(["1.json", "2.json"]);
      const row1 = JSON.parse(await cat(`${m}/notes/1.json`));
      expect(row1).toEqual({ id: 1, title: "hello", body: "Hello from SQLite." });

      await shOk(`echo '{"title":"changed"}' > "$1/notes/1.json"`, [m]);
      expect(q<{ title: string }>("SELECT title FROM notes WHERE rowid = 1")[0]!.title).toBe("changed");
      expect(JSON.parse(await cat(`${m}/notes/1.json`)).title).toBe("changed");

      await shOk(`echo '{"title":"nine","body":"new row"}' > "$1/notes/9.json"`, [m]);
      expect(q<{ title: string; body: string }>("SELECT title, body FROM notes WHERE rowid = 9")).toEqual([{ title: "nine", body: "new row" }]);
      expect((await fsopOk("listdir", `${m}/notes`)).names).toEqual(["1.json", "2.json", "9.json"]);

      await shOk('rm "$1/notes/2.json"', [m]);
      expect(q("SELECT * FROM notes WHERE rowid = 2")).toEqual([]);
      await shOk('mv "$1/notes/9.json" "$1/notes/5.json"', [m]);
      expect(q<{ id: number }>("SELECT id FROM notes ORDER BY id").map((r) => r.id)).toEqual([1, 5]);

      // Bad input fails the close with EINVAL; the daemon logs nothing fatal and keeps serving.
      expect((await fsop("write", `${m}/notes/1.json`, "not json")).code).toBe("EINVAL");
      expect((await fsop("write", `${m}/notes/1.json`, '{"nope":1}')).code).toBe("EINVAL");
      expect((await fsop("write", `${m}/notes/abc.txt`, "{}")).code).toBe("EINVAL");
      expect(q<{ title: string }>("SELECT title FROM notes WHERE rowid = 1")[0]!.title).toBe("changed");
      expect((await fsopOk("listdir", `${m}/notes`)).names).toEqual(["1.json", "5.json"]);
      await stopClean(d);
    });
  });

  describe(`path handlers over ${transport}: errors, interrupts, invalidation`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const start = () => startDaemon(["--transport", transport], { command: fixtureCommand("script-fs.ts") });

    fuseTest("FuseError → that errno; plain Error → EIO with the script's file:line logged; daemon keeps serving", async () => {
      const d = await start();
      expect(d.transport).toBe(transport);
      expect(await cat(`${d.mnt}/hello`)).toBe("hello\n");
      expect((await fsop("read", `${d.mnt}/eperm`)).code).toBe("EPERM");
      expect((await fsop("read", `${d.mnt}/enodata`)).code).toBe("ENODATA");
      expect((await fsop("read", `${d.mnt}/boom`)).code).toBe("EIO");
      expect((await fsop("read", `${d.mnt}/boom-async`)).code).toBe("EIO");
      expect((await fsop("read", `${d.mnt}/boom`)).code).toBe("EIO");
      const src = readFileSync(`${REPO}/test/fixtures/script-fs.ts`, "utf8").split("\n");
      const line = src.findIndex((l) => l.includes("BOOM-LINE")) + 1;
      const err = d.stderr();
      expect(err).toContain("boom from the fixture");
      expect(err).toContain(`test/fixtures/script-fs.ts:${line}:`);
      expect(err).toContain("async boom from the fixture");
      // Logged once per distinct error, not per request.
      expect(err.split("Error: boom from the fixture\n").length - 1).toBe(1);
      expect(await cat(`${d.mnt}/hello`)).toBe("hello\n");
      expect(d.exited).toBe(false);
      await stopClean(d);
    });

    fuseTest("a slow read is interrupted when its reader is killed; the daemon stays healthy", async () => {
      const d = await start();
      const t0 = Date.now();
      const reader = spawnBg(["cat", `${d.mnt}/slow`], { timeoutMs: 20_000 });
      await waitFor(d, "fixture: slow read start");
      reader.kill("SIGINT");
      const r = await reader.done;
      expect(r.timedOut).toBe(false);
      expect(r.code === 0).toBe(false);
      expect(Date.now() - t0).toBeLessThan(4000); // did not wait for the 5 s timer
      await waitFor(d, "fixture: slow read aborted");
      expect(d.stderr()).not.toContain("slow read finished");
      expect((await fsopOk("stat", `${d.mnt}/hello`)).size).toBe(6);
      expect(await cat(`${d.mnt}/hello`)).toBe("hello\n");
      await stopClean(d);
    });

    fuseTest("invalidate(path): changed content of a cached file becomes visible", async () => {
      const d = await start();
      const f = `${d.mnt}/cached`;
      expect(await cat(f)).toBe("v1\n");
      d.proc.kill("SIGUSR1"); // change the content, tell nobody
      await waitFor(d, "fixture: changed");
      // TTLs are an hour, the pages are kept and size/mtime did not change: the kernel still
      // serves the old content.
      expect(await cat(f)).toBe("v1\n");
      expect(await cat(f)).toBe("v1\n");
      d.proc.kill("SIGUSR2"); // fs.invalidate("/cached")
      await waitFor(d, "fixture: invalidated true");
      expect(await cat(f)).toBe("v2\n");
      await stopClean(d);
    });

    fuseTest("await using: the mount is gone when the scope ends", async () => {
      const mnt = makeMountpoint();
      const r = await run([BUN, `${REPO}/test/fixtures/script-using.ts`, mnt, transport], { timeoutMs: 30_000 });
      expect(r.code, fmt(r)).toBe(0);
      expect(r.stdout).toContain(`inside: mounted=true transport=${transport}`);
      expect(r.stdout).toContain("read: inside");
      expect(r.stdout).toContain("after: mounted=false");
      expect(isMounted(mnt)).toBe(false);
    });

    fuseTest("a script whose handler throws: EIO, its file:line in the log, other files still served", async () => {
      const dir = scratchDir();
      const p = join(dir, "throwing.ts");
      writeFileSync(p, `export default {\n  "ok.txt": "fine\\n",\n  "bad.txt": () => {\n    throw new Error("kaboom in a script");\n  },\n};\n`);
      const d = await startDaemon(["--transport", transport], { command: script(p) });
      expect((await fsop("read", `${d.mnt}/bad.txt`)).code).toBe("EIO");
      expect(d.stderr()).toContain("kaboom in a script");
      expect(d.stderr()).toContain(`${p}:4:`);
      expect(await cat(`${d.mnt}/ok.txt`)).toBe("fine\n");
      await stopClean(d);
    });

    fuseTest("--negative-ttl: a LOOKUP that throws ENOENT synchronously or asynchronously is cached as a negative entry", async () => {
      const dir = scratchDir();
      const p = join(dir, "negative.ts");
      // An InodeFS with only a root: every LOOKUP logs its name and answers ENOENT, thrown by a
      // plain function ("sync-*") or rejected by an async one ("async-*").
      writeFileSync(p, `import { FuseError } from ${JSON.stringify(`${REPO}/lib/index.ts`)};
const root = { ino: 1, mode: 0o40755, nlink: 2, uid: 0, gid: 0, rdev: 0, size: 0, blocks: 0, atime: 0, atimeNsec: 0, mtime: 0, mtimeNsec: 0, ctime: 0, ctimeNsec: 0 };
export default {
  lookup(_ctx, _parent, name) {
    process.stderr.write("fixture: lookup " + name + "\\n");
    if (name.startsWith("async-")) return Promise.reject(new FuseError("ENOENT"));
    throw new FuseError("ENOENT");
  },
  getattr() { return root; },
};
`);
      const d = await startDaemon(["--transport", transport, "--negative-ttl", "60"], { command: script(p) });
      for (let i = 0; i < 3; i++) {
        for (const name of ["sync-missing", "async-missing"]) expect((await fsop("stat", `${d.mnt}/${name}`)).code).toBe("ENOENT");
      }
      const count = (name: string) => d.stderr().split("\n").filter((l) => l === `fixture: lookup ${name}`).length;
      // One LOOKUP each: the other two stats were answered from the kernel's negative entry.
      expect(count("async-missing"), d.stderr()).toBe(1);
      expect(count("sync-missing"), d.stderr()).toBe(1);
      await stopClean(d);
    });
  });
}

describe("broken scripts", () => {
  cleanupAfterEach();

  async function mountFails(name: string, text: string): Promise<{ err: string; path: string }> {
    const dir = scratchDir();
    const p = join(dir, name);
    writeFileSync(p, text);
    const mnt = makeMountpoint();
    const r = await run([BUN, CLI, "mount", p, mnt], { timeoutMs: 20_000 });
    expect(r.code, fmt(r)).toBe(1);
    expect(isMounted(mnt)).toBe(false);
    const lines = r.stderr.trim().split("\n");
    expect(lines[0]).toStartWith("fuse-uring: ");
    return { err: r.stderr, path: p };
  }

  fuseTest("syntax error: one message with file:line:column and the offending line", async () => {
    const { err, path } = await mountFails("broken.ts", `const a = 1;\nexport default {\n  "x.txt": "y",,\n};\n`);
    expect(err).toContain(`fuse-uring: ${path}:3:`);
    expect(err).toContain(`"x.txt": "y",,`);
    expect(err).not.toContain("    at "); // no JS stack trace
  });

  fuseTest("no default export", async () => {
    const { err, path } = await mountFails("nodefault.ts", `export const fs = { "a": "b" };\n`);
    expect(err).toContain(`fuse-uring: ${path}:1: no default export`);
  });

  fuseTest("exception while loading, default export of the wrong kind, missing file", async () => {
    const a = await mountFails("throws.ts", `// line 1\nconst cfg = process.env.NOPE;\nif (!cfg) throw new Error("NOPE is not set");\nexport default {};\n`);
    expect(a.err).toContain(`${a.path}:3:`);
    expect(a.err).toContain("NOPE is not set");
    const b = await mountFails("wrong.ts", `export default 42;\n`);
    expect(b.err).toContain(`${b.path}:1: default export is not a filesystem`);
    const mnt = makeMountpoint();
    const r = await sh('"$1" "$2" mount /nonexistent/fs.ts "$3"', [BUN, CLI, mnt]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("fuse-uring: /nonexistent/fs.ts: no such file");
  });
});
