// FUSE-over-io_uring specifics: requests really travel on the ring, per-CPU queues under
// concurrent pinned clients, and every teardown path ends the daemon without hanging.
import { describe, expect, test, afterAll } from "bun:test";
import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import {
  BUN,
  CLI,
  TMPFS,
  TRANSPORTS,
  abortConnection,
  cleanupAfterEach,
  fmt,
  fsop,
  fuseTest,
  fusectlConnections,
  isMounted,
  readStats,
  run,
  sha256,
  shOk,
  sleep,
  spawnBg,
  startDaemon,
  withEnableUring,
  type Background,
  type Daemon,
} from "../helpers/index.ts";

const MiB = 1 << 20;
const cli = (...args: string[]) => run([BUN, CLI, ...args], { timeoutMs: 30_000 });

const sources: { path: string; sha: string }[] = [];
function sourceFile(i: number, size: number): { path: string; sha: string } {
  const path = `${TMPFS}/fuse-uring-test-${process.pid}-uring-${i}-${size}`;
  const data = randomBytes(size);
  writeFileSync(path, data);
  const s = { path, sha: sha256(data) };
  sources.push(s);
  return s;
}
afterAll(() => {
  for (const s of sources) rmSync(s.path, { force: true });
});

/** The 4-client pinned O_DIRECT workload; returns the client results. */
async function pinnedClients(mnt: string, rounds = 2): Promise<void> {
  const clients = [0, 1, 2, 3].map((i) => {
    const src = sourceFile(i, 8 * MiB);
    const cpu = String(i % 2);
    const script = `
      set -e
      for r in $(seq ${rounds}); do
        dd if="$1" of="$2" bs=1M oflag=direct status=none
        got=$(dd if="$2" bs=1M iflag=direct status=none | sha256sum | cut -d' ' -f1)
        [ "$got" = "$3" ] || { echo "round $r: sha mismatch: $got != $3" >&2; exit 3; }
      done
      echo done`;
    return spawnBg(["taskset", "-c", cpu, "sh", "-c", script, "sh", src.path, `${mnt}/client-${i}`, src.sha], { timeoutMs: 120_000 });
  });
  const results = await Promise.all(clients.map((c) => c.done));
  for (const r of results) {
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout.trim()).toBe("done");
  }
}

/** Clients looping on the mount until `${mnt}/.alive` disappears (i.e. the mount is gone). */
function loadClients(mnt: string, n = 4): Background[] {
  return Array.from({ length: n }, (_, i) => {
    const script = `
      i=0
      while [ -e "$1/.alive" ] && [ $i -lt 100000 ]; do
        i=$((i+1))
        dd if=/dev/zero of="$1/load-$2" bs=256k count=4 oflag=direct status=none 2>/dev/null
        cat "$1/load-$2" >/dev/null 2>&1
        stat "$1/.alive" >/dev/null 2>&1
        ls "$1" >/dev/null 2>&1
      done
      echo "iterations=$i"`;
    return spawnBg(["taskset", "-c", String(i % 2), "sh", "-c", script, "sh", mnt, String(i)], { timeoutMs: 60_000 });
  });
}

/** Wait until the fusectl directory of a connection is gone (the kernel freed it). */
async function connectionGone(connId: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!fusectlConnections().includes(connId)) return true;
    await sleep(100);
  }
  return false;
}

async function expectExit(d: Daemon, what: string, timeoutMs = 15_000): Promise<number | null> {
  const r = await d.waitExit(timeoutMs);
  if (!r.exited) {
    const err = d.stderr().slice(-5000);
    await d.kill();
    throw new Error(`daemon did not exit within ${timeoutMs} ms after ${what} (the watchdog killed it)\n--- stderr ---\n${err}`);
  }
  return r.code;
}

describe("memfs over uring (ring-specific)", () => {
  if (!TRANSPORTS.includes("uring")) {
    test.skip("uring excluded by FUSE_URING_TRANSPORTS", () => {});
    return;
  }
  withEnableUring("Y");
  cleanupAfterEach();

  fuseTest(
    "stats: requests travel on the ring (ringRequests > devRequests after 200 stats/reads)",
    async () => {
      const stats = `/tmp/fuse-uring-test-stats-${process.pid}-ring.json`;
      rmSync(stats, { force: true });
      const d = await startDaemon(["--transport", "uring", "--stats-file", stats]);
      expect(d.transport).toBe("uring");
      await shOk('for i in $(seq 20); do echo "file $i" > "$1/f$i"; done', [d.mnt]);
      await shOk('for i in $(seq 200); do n=$(( i % 20 + 1 )); stat -c %s "$1/f$n" >/dev/null; cat "$1/f$n" >/dev/null; done', [d.mnt], {
        timeoutMs: 60_000,
      });
      const st = await readStats(stats, { timeoutMs: 3000, until: (s) => s.ringRequests >= 400 });
      const msg = JSON.stringify(st);
      expect(st.transport, msg).toBe("uring");
      expect(st.ringRequests, msg).toBeGreaterThanOrEqual(400); // ≥ 200 opens + 200 reads
      expect(st.ringRequests, msg).toBeGreaterThan(st.devRequests);
      expect(st.cqes, msg).toBeGreaterThan(0);
      expect(st.submits, msg).toBeGreaterThan(0);
      expect(st.wakeups, msg).toBeGreaterThan(0);
      expect(st.inflightMax, msg).toBeGreaterThanOrEqual(1);
      expect(st.pinnedBytes, msg).toBeGreaterThan(0);
      expect(await d.stop()).toBe(0);
      const final = await readStats(stats);
      expect(final.ringRequests).toBeGreaterThanOrEqual(st.ringRequests);
      rmSync(stats, { force: true });
    },
    90_000,
  );

  fuseTest(
    "4 concurrent clients pinned to CPU 0/1: 1 MiB O_DIRECT writes and reads verify by sha256",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await pinnedClients(d.mnt);
      expect(await d.stop()).toBe(0);
    },
    180_000,
  );

  fuseTest(
    "same workload with the daemon pinned to one CPU and --queue-depth 1",
    async () => {
      const d = await startDaemon(["--transport", "uring", "--queue-depth", "1"], { prefix: ["taskset", "-c", "0"] });
      expect(d.transport).toBe("uring");
      await pinnedClients(d.mnt, 1);
      expect(await d.stop()).toBe(0);
    },
    180_000,
  );

  fuseTest(
    "teardown: unmount while idle → daemon exits 0, connection freed",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('echo x > "$1/f" && cat "$1/f" >/dev/null', [d.mnt]);
      await sleep(500); // idle: every entry is waiting in the kernel
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      expect(await expectExit(d, "unmount (idle)"), d.stderr()).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      expect(await connectionGone(d.connId)).toBe(true);
    },
    60_000,
  );

  fuseTest(
    "teardown: unmount under load from several clients → daemon exits 0, clients end",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('touch "$1/.alive"', [d.mnt]);
      const clients = loadClients(d.mnt);
      await sleep(1500);
      expect(clients.every((c) => !c.exited)).toBe(true);
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      const results = await Promise.all(clients.map((c) => c.done));
      for (const r of results) {
        expect(r.timedOut, fmt(r)).toBe(false); // no client hung
        expect(r.stdout, fmt(r)).toMatch(/iterations=[1-9]/);
      }
      expect(await expectExit(d, "unmount under load"), d.stderr()).toBe(0);
      expect(await connectionGone(d.connId)).toBe(true);
    },
    90_000,
  );

  fuseTest(
    "teardown: SIGTERM under load → daemon exits 0, clients end",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('touch "$1/.alive"', [d.mnt]);
      const clients = loadClients(d.mnt);
      await sleep(1500);
      d.proc.kill("SIGTERM");
      expect(await expectExit(d, "SIGTERM under load"), d.stderr()).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      const results = await Promise.all(clients.map((c) => c.done));
      for (const r of results) expect(r.timedOut, fmt(r)).toBe(false);
      expect(await connectionGone(d.connId)).toBe(true);
    },
    90_000,
  );

  fuseTest(
    "teardown: fusectl abort (echo 1 > /sys/fs/fuse/connections/N/abort) → daemon exits 3 and detaches the dead mount",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('echo x > "$1/f" && touch "$1/.alive"', [d.mnt]);
      const clients = loadClients(d.mnt, 2);
      await sleep(1000);
      expect(abortConnection(d.connId)).toBe(true);
      expect(await expectExit(d, "fusectl abort"), d.stderr()).toBe(3);
      // clients see ENOTCONN/ECONNABORTED and stop (their .alive check fails)
      const results = await Promise.all(clients.map((c) => c.done));
      for (const r of results) expect(r.timedOut, fmt(r)).toBe(false);
      // no dead "Transport endpoint is not connected" mount is left behind
      expect(isMounted(d.mnt)).toBe(false);
      expect((await fsop("stat", `${d.mnt}/f`)).code).toBe("ENOENT");
      const u = await cli("unmount", d.mnt);
      expect(u.timedOut).toBe(false);
      expect(isMounted(d.mnt)).toBe(false);
      expect(await connectionGone(d.connId)).toBe(true);
    },
    90_000,
  );

  fuseTest(
    "teardown: kill -9 under load → clients end, `fuse-uring unmount` leaves nothing",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('touch "$1/.alive"', [d.mnt]);
      const clients = loadClients(d.mnt);
      await sleep(1500);
      d.proc.kill("SIGKILL");
      await expectExit(d, "SIGKILL");
      const results = await Promise.all(clients.map((c) => c.done));
      for (const r of results) expect(r.timedOut, fmt(r)).toBe(false);
      expect((await fsop("stat", `${d.mnt}/.alive`)).code).toBe("ENOTCONN");
      const u = await cli("unmount", d.mnt);
      expect(u.code, fmt(u)).toBe(0);
      expect(isMounted(d.mnt)).toBe(false);
      expect(await connectionGone(d.connId)).toBe(true);
    },
    90_000,
  );

  fuseTest(
    "a new uring mount works after all of the above (nothing leaked in the kernel)",
    async () => {
      const d = await startDaemon(["--transport", "uring"]);
      await shOk('echo again > "$1/f"', [d.mnt]);
      expect(await shOk('cat "$1/f"', [d.mnt])).toBe("again\n");
      expect(await d.stop()).toBe(0);
    },
    60_000,
  );
});
