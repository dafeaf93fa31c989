// FUSE notifications by node id (InitInfo.notify / Mount.notify), through real mounts on both
// transports, driven by separate processes (coreutils, python3): STORE puts bytes into the page
// cache (a reader sees them although the filesystem's content never changed), RETRIEVE gets them
// back (the kernel's NOTIFY_REPLY), DELETE removes a cached name (an hour-long entry TTL would
// otherwise keep it), and INVAL_ENTRY with FUSE_EXPIRE_ONLY makes the next use look it up again.
// Fixture: test/fixtures/notify-fs.ts.

import { describe, expect } from "bun:test";
import { join } from "node:path";
import {
  BUN, CLI, REPO, TRANSPORTS,
  cleanupAfterEach, fmt, fsop, fuseTest, readStats, run, scratchDirs, shOk, sleep, startDaemon, transportHooks,
  type Daemon,
} from "../helpers/index.ts";

const scratch = scratchDirs("fuse-uring-notify-");

async function logged(d: Daemon, text: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!d.stderr().includes(text)) {
    if (Date.now() > deadline) throw new Error(`daemon never logged ${JSON.stringify(text)}\n--- stderr ---\n${d.stderr().slice(-3000)}`);
    await sleep(20);
  }
}

async function cat(path: string): Promise<string> {
  const r = await run(["cat", path]);
  expect(r.code, fmt(r)).toBe(0);
  return r.stdout;
}

for (const transport of TRANSPORTS) {
  describe(`notifications over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("store, retrieve, delete, expire-only", async () => {
      const stats = join(scratch(), "stats.json");
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
        command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/test/fixtures/notify-fs.ts`, mnt, ...args],
      });
      const m = d.mnt;
      expect(await cat(`${m}/data`)).toBe("0123456789");

      // STORE: the cached pages now hold ABCDE…, the filesystem still says 0123….
      await shOk('printf "store ABCDE" > "$1"', [`${m}/ctl`]);
      await logged(d, "fixture: store 0");
      expect(await cat(`${m}/data`)).toBe("ABCDE56789");

      // RETRIEVE: what the kernel has cached comes back in a NOTIFY_REPLY.
      await shOk('printf retrieve > "$1"', [`${m}/ctl`]);
      await logged(d, "fixture: retrieve ABCDE56789");

      // DELETE: a name cached for an hour disappears at once.
      expect((await fsop("stat", `${m}/gone`)).ok).toBe(true);
      await shOk('printf "delete gone" > "$1"', [`${m}/ctl`]);
      await logged(d, "fixture: delete 0");
      expect((await fsop("stat", `${m}/gone`)).code).toBe("ENOENT");

      // EXPIRE_ONLY (HAS_EXPIRE_ONLY, Linux 6.2+): the name stays but is looked up again.
      if (d.stderr().includes("fixture: expire-only offered")) {
        expect((await fsop("stat", `${m}/expiring`)).ok).toBe(true);
        const before = (await readStats(stats)).ops as Record<string, number>;
        await shOk('printf "expire expiring" > "$1"', [`${m}/ctl`]);
        await logged(d, "fixture: expire 0");
        await sleep(1100); // the stats file is written once a second
        const mid = (await readStats(stats)).ops as Record<string, number>;
        expect((await fsop("stat", `${m}/expiring`)).ok).toBe(true);
        await sleep(1100);
        const after = (await readStats(stats)).ops as Record<string, number>;
        expect(after.LOOKUP ?? 0).toBeGreaterThan(mid.LOOKUP ?? 0);
        expect(mid.LOOKUP ?? 0).toBe(before.LOOKUP ?? 0);
      } else {
        throw new Error("kernel did not offer FUSE_HAS_EXPIRE_ONLY (needs Linux 6.2+): expire-only not tested");
      }
      const st = await readStats(stats);
      expect(Number(st.notifications)).toBeGreaterThanOrEqual(4);
      expect(Number(st.retrieved)).toBe(1);
      expect(await d.stop("SIGTERM")).toBe(0);
    }, 60_000);
  });
}
