// Installing like any package, through a real npm registry: a local Verdaccio (installed by
// scripts/local-registry.sh, configured without uplinks so nothing comes from the internet)
// gets the `npm pack` tarball published to it; then, in empty directories with a fresh HOME and
// only Bun on PATH (no Zig, no repository): `bunx fuse-uring@<version> mount --memfs MNT`
// mounts, and `bun add fuse-uring` + `import { mount, memfs } from "fuse-uring"` works with the
// prebuilt shim. Also the README's tarball command (bunx needs an absolute tarball path).
// Mounts are served by separate processes and driven from other processes.
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, REPO, cleanupAfterEach, fmt, fuseTest, run, shOk, sleep, startDaemon } from "../helpers/index.ts";

const VERSION: string = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")).version;

describe("npm registry install (local Verdaccio, no uplinks)", () => {
  cleanupAfterEach();
  let work = "";
  let tgz = "";
  let url = "";
  let bunbin = "";
  let registry: Bun.Subprocess | null = null;
  let registryLog = "";

  /** Only Bun and the base system on PATH, a fresh HOME whose .npmrc points at the registry. */
  const userEnv = (home: string) => ["env", "-i", `PATH=${bunbin}:/usr/bin:/bin`, `HOME=${home}`];
  const freshHome = (name: string) => {
    const home = join(work, name);
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, ".npmrc"), `registry=${url}\n`);
    return home;
  };

  beforeAll(async () => {
    work = mkdtempSync("/tmp/fuse-uring-registry-");
    chmodSync(work, 0o755);
    const inst = await run(["bash", `${REPO}/scripts/local-registry.sh`], { timeoutMs: 280_000 });
    if (inst.code !== 0) throw new Error(`installing Verdaccio failed:\n${fmt(inst)}`);
    const verdaccio = inst.stdout.trim().split("\n").pop()!;

    const pack = await run(["npm", "pack", "--json", "--pack-destination", work], { cwd: REPO, timeoutMs: 280_000, env: { FUSE_URING_PACK_ARCHES: "x64" } });
    if (pack.code !== 0) throw new Error(`npm pack failed:\n${fmt(pack)}`);
    tgz = join(work, JSON.parse(pack.stdout.slice(pack.stdout.search(/^\[\s*\{/m)))[0].filename);

    // A free port, then the registry on it: storage and users in the scratch dir, no uplinks.
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = probe.port;
    probe.stop(true);
    url = `http://127.0.0.1:${port}/`;
    const config = join(work, "verdaccio.yaml");
    writeFileSync(
      config,
      `storage: ${join(work, "storage")}
auth:
  htpasswd:
    file: ${join(work, "htpasswd")}
    max_users: 10
uplinks: {}
packages:
  '**':
    access: $all
    publish: $authenticated
    unpublish: $authenticated
log: { type: stdout, format: pretty, level: warn }
`,
    );
    registry = Bun.spawn(["node", verdaccio, "--config", config, "--listen", `127.0.0.1:${port}`], { cwd: work, stdout: "pipe", stderr: "pipe" });
    (async () => {
      for await (const c of registry!.stdout as ReadableStream<Uint8Array>) registryLog += new TextDecoder().decode(c);
    })().catch(() => {});
    for (let i = 0; ; i++) {
      const ok = await fetch(`${url}-/ping`).then((r) => r.ok, () => false);
      if (ok) break;
      if (i > 150 || registry.exitCode !== null) throw new Error(`Verdaccio did not come up on ${url}:\n${registryLog}`);
      await sleep(100);
    }

    // A user (what `npm adduser` does), then `npm publish` of the packed tarball.
    const res = await fetch(`${url}-/user/org.couchdb.user:ci`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "ci", password: "fuse-uring-ci" }),
    });
    const { token } = (await res.json()) as { token?: string };
    if (!token) throw new Error(`creating the registry user failed: HTTP ${res.status}`);
    const npmrc = join(work, "publish.npmrc");
    writeFileSync(npmrc, `//127.0.0.1:${port}/:_authToken=${token}\n`);
    const pub = await run(["npm", "publish", tgz, "--registry", url, "--userconfig", npmrc], { cwd: work, timeoutMs: 60_000 });
    if (pub.code !== 0) throw new Error(`npm publish failed:\n${fmt(pub)}`);

    bunbin = join(work, "bunbin");
    mkdirSync(bunbin);
    symlinkSync(realpathSync(BUN), join(bunbin, "bun"));
    symlinkSync(realpathSync(BUN), join(bunbin, "bunx"));
  }, 600_000);

  afterAll(async () => {
    if (registry && registry.exitCode === null) {
      registry.kill("SIGTERM");
      await Promise.race([registry.exited, sleep(5000)]);
      if (registry.exitCode === null) registry.kill("SIGKILL");
    }
    if (work) rmSync(work, { recursive: true, force: true });
  }, 30_000);

  fuseTest("the registry serves the published package and nothing else (no uplinks)", async () => {
    const meta = (await (await fetch(`${url}fuse-uring`)).json()) as { versions: Record<string, { bin?: Record<string, string> }> };
    expect(Object.keys(meta.versions)).toEqual([VERSION]);
    expect(meta.versions[VERSION]!.bin).toEqual({ "fuse-uring": "bin/fuse-uring.ts" });
    // A package that exists on the public registry is unknown here: no proxying.
    expect((await fetch(`${url}left-pad`)).status).toBe(404);
  });

  fuseTest(`bunx fuse-uring@${VERSION} mount --memfs MNT, in an empty directory with only Bun`, async () => {
    const home = freshHome("home-bunx");
    const empty = join(work, "empty");
    mkdirSync(empty, { recursive: true });
    const v = await run([...userEnv(home), "bunx", `fuse-uring@${VERSION}`, "--version"], { cwd: empty, timeoutMs: 60_000 });
    expect(v.code, fmt(v)).toBe(0);
    expect(v.stdout).toStartWith(`fuse-uring ${VERSION} `);
    const d = await startDaemon([], { command: (mnt) => [...userEnv(home), "bunx", `fuse-uring@${VERSION}`, "mount", "--memfs", mnt], cwd: empty, readyTimeoutMs: 60_000 });
    await shOk('echo "from the registry" > "$1/f" && mkdir "$1/d"', [d.mnt]);
    expect(await shOk('cat "$1/f"; ls "$1"', [d.mnt])).toBe("from the registry\nd\nf\n");
    expect(await d.stop()).toBe(0);
    expect(d.stderr()).toContain(`fuse-uring: unmounted ${d.mnt} (signal SIGTERM)`);
  }, 120_000);

  fuseTest('bun add fuse-uring; import { mount, memfs } from "fuse-uring" (prebuilt shim, no compiler)', async () => {
    const home = freshHome("home-proj");
    const proj = join(work, "proj");
    mkdirSync(proj, { recursive: true });
    writeFileSync(join(proj, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const add = await run([...userEnv(home), "bun", "add", "fuse-uring"], { cwd: proj, timeoutMs: 60_000 });
    expect(add.code, fmt(add)).toBe(0);
    expect(JSON.parse(readFileSync(join(proj, "package.json"), "utf8")).dependencies["fuse-uring"]).toBe(`^${VERSION}`);
    expect(existsSync(join(proj, "node_modules/fuse-uring/prebuilt/linux-x64/libfuse_uring_shim.so"))).toBe(true);
    writeFileSync(
      join(proj, "app.ts"),
      `import { mount, memfs } from "fuse-uring";
const mnt = process.argv[2]!;
const m = await mount(mnt, memfs());
console.error(\`fuse-uring: mounted app at \${mnt} (transport=\${m.transport}: \${m.transportReason})\`);
process.on("SIGTERM", () => void m.unmount());
console.error("app: session ended:", await m.closed);
`,
    );
    const d = await startDaemon([], { command: (mnt) => [...userEnv(home), "bun", "app.ts", mnt], cwd: proj, readyTimeoutMs: 30_000 });
    await shOk('printf "imported\\n" > "$1/x"', [d.mnt]);
    expect(await shOk('cat "$1/x"', [d.mnt])).toBe("imported\n");
    expect(await d.stop()).toBe(0);
    expect(d.stderr()).toContain("app: session ended: unmounted");
    // The shim it used is the package's prebuilt one.
    const doc = await run([...userEnv(home), join(proj, "node_modules/.bin/fuse-uring"), "doctor", "--json"], { cwd: proj, timeoutMs: 30_000 });
    expect(doc.code, fmt(doc)).toBe(0);
    expect(JSON.parse(doc.stdout).shim).toEndWith("/node_modules/fuse-uring/prebuilt/linux-x64/libfuse_uring_shim.so");
  }, 120_000);

  fuseTest('the README\'s tarball command: bunx --package "$PWD/fuse-uring-<v>.tgz" fuse-uring', async () => {
    const home = freshHome("home-tgz");
    const r = await run([...userEnv(home), "sh", "-c", `bunx --package "$PWD/fuse-uring-${VERSION}.tgz" fuse-uring --version`], { cwd: work, timeoutMs: 60_000 });
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout).toStartWith(`fuse-uring ${VERSION} `);
    // (A relative ./fuse-uring-<v>.tgz fails: bunx installs from its own temporary directory.)
  }, 60_000);
});
