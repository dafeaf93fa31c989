// Names are bytes (issue 11): file names, symlink targets and xattr names that are not UTF-8
// must round-trip byte-exact through memfs and passthrough on both transports, and land in the
// passthrough source with exactly the same bytes. test/fixtures/names.py (a separate python3
// process using bytes paths) does the syscalls and reports every mismatch.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import {
  BUN, CLI, PYTHON, REPO, TRANSPORTS, cleanupAfterEach, fmt, fuseTest, mountTmpfsSource, run, sharedDaemon, transportHooks, unmountTmpfsSources,
} from "../helpers/index.ts";

const NAMES_PY = `${REPO}/test/fixtures/names.py`;
const mountTmpfs = () => mountTmpfsSource("size=256m", "fuse-uring-names-src-");

afterAll(unmountTmpfsSources, 30_000);

async function namesCheck(mnt: string, src?: string): Promise<void> {
  const r = await run([PYTHON, NAMES_PY, mnt, ...(src ? [src] : [])], { timeoutMs: 90_000 });
  if (r.code !== 0) throw new Error(`names.py failed:\n${fmt(r)}`);
  const res = JSON.parse(r.stdout.trim().split("\n").pop()!) as { checked: number; failures: string[]; nfailures: number };
  expect(res.failures).toEqual([]);
  expect(res.checked).toBeGreaterThan(2000);
}

/** The path API and tree(): test/fixtures/names-paths.ts, checked by names_paths.py. */
const PATHS_PY = `${REPO}/test/fixtures/names_paths.py`;

for (const transport of TRANSPORTS) {
  describe(`names are bytes: paths() and tree() over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport], { command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/test/fixtures/names-paths.ts`, mnt, ...args] });
    fuseTest("tree names and targets, a readlink handler's raw bytes, a writable store: byte-exact", async () => {
      const r = await run([PYTHON, PATHS_PY, s.mnt], { timeoutMs: 60_000 });
      if (r.code !== 0) throw new Error(`python failed:\n${fmt(r)}\n${s.d.stderr().slice(-3000)}`);
      expect(JSON.parse(r.stdout.trim().split("\n").pop()!)).toEqual([]);
    }, 60_000);
  });

  describe(`names are bytes: memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport]);
    fuseTest("single bytes, 255-byte names, mixed, invalid symlink targets and xattr names round-trip", async () => {
      await namesCheck(s.mnt);
    }, 120_000);
  });

  describe(`names are bytes: passthrough over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    let SRC = "";
    // Hooks run in registration order: the source exists before the shared daemon starts.
    beforeAll(async () => {
      SRC = await mountTmpfs();
    }, 30_000);
    const s = sharedDaemon(() => ["--transport", transport], {
      command: (mnt, args) => [BUN, CLI, "mount", "--passthrough", SRC, mnt, ...args],
    });
    fuseTest("… and the source directory holds exactly the same bytes", async () => {
      await namesCheck(s.mnt, SRC);
    }, 120_000);
  });
}
