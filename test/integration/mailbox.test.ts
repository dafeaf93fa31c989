// examples/mailbox.ts (a paths() filesystem with ioctl and poll handlers) through a real mount,
// both transports, driven from separate python3 processes (test/fixtures/mailbox_client.py):
// _IOR/_IOW/_IO ioctls with data both ways and ENOTTY for an unknown command; poll(2) that is
// not ready, waits, and is woken by a post from another process (FUSE_NOTIFY_POLL, counted in
// stats `notifications`); IOCTL and POLL reach the daemon (stats ops).

import { describe, expect } from "bun:test";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, TRANSPORTS,
  cleanupAfterEach, fmt, fuseTest, readStats, run, scratchDirs, startDaemon, transportHooks,
} from "../helpers/index.ts";

const scratch = scratchDirs("fuse-uring-mailbox-");

for (const transport of TRANSPORTS) {
  describe(`examples/mailbox.ts over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("ioctl (_IOR, _IOW, _IO, unknown → ENOTTY) and poll woken by another process's write", async () => {
      const stats = join(scratch(), "stats.json");
      const d = await startDaemon(["--transport", transport, "--stats-file", stats], {
        command: (mnt, args) => [BUN, CLI, "mount", `${REPO}/examples/mailbox.ts`, mnt, ...args],
      });
      const r = await run([PYTHON, `${REPO}/test/fixtures/mailbox_client.py`, d.mnt], { timeoutMs: 30_000 });
      expect(r.code, fmt(r)).toBe(0);
      const out = JSON.parse(r.stdout.trim());
      expect(out).toMatchObject({
        count0: 0, poll_now: [], count1: 1, post_result: 2, count2: 2, read: "hello\nsecond\n", count3: 0,
        post_again: 1, clear: 0, count4: 0, unknown: "ENOTTY",
      });
      // Woken by the post (400 ms later), not by the 10 s timeout.
      expect(out.poll_events[0] & 1).toBe(1); // POLLIN
      expect(out.poll_wait_s).toBeGreaterThanOrEqual(0.3);
      expect(out.poll_wait_s).toBeLessThan(5);
      expect(out.poll_ready[0] & 1).toBe(1);
      const st = await readStats(stats, { until: (s) => Number(s.notifications) >= 1 && ((s.ops as Record<string, number>).IOCTL ?? 0) >= 9 && ((s.ops as Record<string, number>).POLL ?? 0) >= 3, timeoutMs: 4000 });
      const ops = st.ops as Record<string, number>;
      expect(ops.IOCTL ?? 0).toBeGreaterThanOrEqual(9);
      expect(ops.POLL ?? 0).toBeGreaterThanOrEqual(3);
      expect(Number(st.notifications)).toBeGreaterThanOrEqual(1);
      expect(Number(st.notificationErrors)).toBe(0);
      expect(await d.stop("SIGTERM")).toBe(0);
    }, 60_000);
  });
}
