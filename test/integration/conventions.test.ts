// FUSE-world conventions of the CLI, through the real kernel: -o mount options, the one
// "unmounted MNT (reason)" line and the exit code per way of stopping.
// Every mount is served by a separate daemon process and driven from other processes.
import { describe, expect } from "bun:test";
import { abortConnection, BUN, CLI, cleanupAfterEach, fmt, forceUnmount, fsop, fuseMountAt, fuseTest, isMounted, run, shOk, startDaemon, TRANSPORTS, transportHooks, type Daemon } from "../helpers/index.ts";
import { stopReason } from "../../bin/commands/mount.ts";
import { existsSync } from "node:fs";
import { possibleCpus, ringSizing } from "../../lib/transport/uring.ts";
import { sleep, spawnBg } from "../helpers/index.ts";

describe("-o mount options", () => {
  cleanupAfterEach();

  fuseTest("-o ro,fsname=,subtype=,noexec,noatime,max_read= reach the kernel mount", async () => {
    const d = await startDaemon(["-o", "ro,fsname=eco-src,subtype=ecotest,noexec,noatime,nosuid,nodev,max_read=65536,default_permissions"]);
    const m = fuseMountAt(d.mnt)!;
    expect(m.fstype).toBe("fuse.ecotest");
    expect(m.source).toBe("eco-src");
    const opts = m.options.split(",");
    for (const o of ["ro", "noexec", "noatime", "nosuid", "nodev"]) expect(opts, m.options).toContain(o);
    const sopts = m.superOptions.split(",");
    expect(sopts, m.superOptions).toContain("max_read=65536");
    expect(sopts, m.superOptions).toContain("default_permissions");
    // read-only for real: a client's write fails with EROFS
    const w = await fsop("write", `${d.mnt}/f`, "x");
    expect(w.code, JSON.stringify(w)).toBe("EROFS");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("an unknown -o option is rejected by name before anything is mounted", async () => {
    const d = await startDaemon([]);
    await d.stop();
    const r = await run([BUN, CLI, "mount", "--memfs", d.mnt, "-o", "rw,frobnicate=1"]);
    expect(r.code, fmt(r)).toBe(2);
    expect(r.stderr).toContain('unknown mount option "frobnicate"');
    expect(isMounted(d.mnt)).toBe(false);
  });
});

/** The daemon's stop lines (exactly one is expected). */
function stopLines(d: Daemon): string[] {
  return d.stderr().split("\n").filter((l) => l.startsWith("fuse-uring: unmounted "));
}

for (const transport of TRANSPORTS) {
  describe(`one stop line and an exit code per reason (${transport})`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const args = ["--transport", transport];

    fuseTest("umount MNT → (unmount), exit 0", async () => {
      const d = await startDaemon(args);
      await shOk('echo x > "$1/f"', [d.mnt]);
      const u = await run(["umount", d.mnt]);
      expect(u.code, fmt(u)).toBe(0);
      const r = await d.waitExit(10_000);
      expect(r.exited, d.stderr()).toBe(true);
      expect(r.code, d.stderr()).toBe(0);
      expect(stopLines(d)).toEqual([`fuse-uring: unmounted ${d.mnt} (unmount)`]);
    });

    for (const sig of ["SIGTERM", "SIGINT"] as const) {
      fuseTest(`${sig} → (signal ${sig}), exit 0`, async () => {
        const d = await startDaemon(args);
        await shOk('ls "$1"', [d.mnt]);
        expect(await d.stop(sig)).toBe(0);
        expect(stopLines(d)).toEqual([`fuse-uring: unmounted ${d.mnt} (signal ${sig})`]);
        expect(isMounted(d.mnt)).toBe(false);
      });
    }

    fuseTest("fusectl abort of this mount → (connection aborted), exit 3", async () => {
      const d = await startDaemon(args);
      await shOk('echo x > "$1/f"', [d.mnt]);
      expect(abortConnection(d.connId)).toBe(true);
      const r = await d.waitExit(15_000);
      if (!r.exited) await d.kill();
      expect(r.exited, d.stderr()).toBe(true);
      expect(r.code, d.stderr()).toBe(3);
      const lines = stopLines(d);
      expect(lines.length, d.stderr()).toBe(1);
      // (the session may add what it did about the dead mount after the reason)
      expect(lines[0]).toStartWith(`fuse-uring: unmounted ${d.mnt} (connection aborted`);
      forceUnmount(d.mnt);
    });
  });
}

describe("stop reasons (unit)", () => {
  fuseTest("other session ends are errors (exit 1); signals win over the session's reason", () => {
    expect(stopReason("transport stopped: EIO", null, null)).toEqual({ text: "error: transport stopped: EIO", code: 1 });
    expect(stopReason("unmounted", "SIGINT", null)).toEqual({ text: "signal SIGINT", code: 0 });
    expect(stopReason("connection aborted", null, null)).toEqual({ text: "connection aborted", code: 3 });
    expect(stopReason("unmounted", null, "0:999999")).toEqual({ text: "unmount", code: 0 });
    expect(stopReason("transport stopped: ENOTCONN", null, "0:999999")).toEqual({ text: "unmount", code: 0 });
  });
});

for (const transport of TRANSPORTS) {
  describe(`--debug trace, rx/tx lines (${transport})`, () => {
    transportHooks(transport);
    cleanupAfterEach();

    fuseTest("LOOKUP with its name, READ/WRITE with offsets, sizes and flags, errors by name, latency", async () => {
      const d = await startDaemon(["--transport", transport, "--debug"]);
      await shOk('printf "hello, world\\n" > "$1/hello.txt" && dd if="$1/hello.txt" bs=4096 count=1 status=none >/dev/null && ! stat "$1/missing" 2>/dev/null', [d.mnt]);
      expect(await d.stop()).toBe(0);
      // A worker thread's lines (--workers auto: memfs runs a copy per CPU) carry its name first.
      const lines = d.stderr().split("\n").map((l) => l.replace(/^\[worker \d+\] /, ""));
      const rx = (re: RegExp) => lines.filter((l) => re.test(l));
      /** The tx line answering rx line `l`. */
      const txOf = (l: string) => lines.find((t) => t.startsWith(`tx ${l.split(" ")[1]} `));

      const lookup = rx(/^rx \d+ LOOKUP n1 "missing"$/);
      expect(lookup.length, d.stderr()).toBeGreaterThan(0);
      expect(txOf(lookup[0]!), d.stderr()).toMatch(/^tx \d+ ENOENT  \d+\.\d{3} ms \[(uring|classic)\]$/);

      const create = rx(/^rx \d+ CREATE n1 "hello.txt" flags=O_WRONLY\|O_CREAT\|O_TRUNC.* mode=0100644$/);
      expect(create.length, d.stderr()).toBe(1);
      const ctx = txOf(create[0]!)!;
      expect(ctx, d.stderr()).toMatch(/^tx \d+ OK n(\d+) mode=0100644 size=0 nlink=1 fh=\d+ open=\S+  \d+\.\d{3} ms \[(uring|classic)\]$/);
      const node = /OK n(\d+)/.exec(ctx)![1];

      const write = rx(new RegExp(`^rx \\d+ WRITE n${node} fh=\\d+ off=0 size=13 wflags=\\S+ flags=O_WRONLY`));
      expect(write.length, d.stderr()).toBe(1);
      expect(txOf(write[0]!)).toMatch(/^tx \d+ OK 13 bytes written  /);

      const read = rx(new RegExp(`^rx \\d+ READ n${node} fh=\\d+ off=0 size=\\d+ flags=O_RDONLY`));
      expect(read.length, d.stderr()).toBeGreaterThan(0);
      expect(txOf(read[0]!)).toMatch(/^tx \d+ OK 13 bytes  /);

      // every rx that expects an answer got exactly one tx
      const noReply = new Set(["FORGET", "BATCH_FORGET", "INTERRUPT"]);
      for (const l of rx(/^rx /)) {
        if (noReply.has(l.split(" ")[2]!)) continue;
        expect(lines.filter((t) => t.startsWith(`tx ${l.split(" ")[1]} `)).length, l).toBe(1);
      }
    });

    fuseTest("without --debug: no trace lines", async () => {
      const d = await startDaemon(["--transport", transport]);
      await shOk('echo x > "$1/f" && cat "$1/f" >/dev/null', [d.mnt]);
      expect(await d.stop()).toBe(0);
      expect(d.stderr()).not.toMatch(/^(rx|tx) /m);
    });
  });
}

describe("fuse-uring stats MNT", () => {
  cleanupAfterEach();
  const stats = (...args: string[]) => run([BUN, CLI, "stats", ...args], { timeoutMs: 20_000 });

  fuseTest("--once finds the daemon from the mountpoint: per-opcode counts and latency, transport, in flight, pinned", async () => {
    const d = await startDaemon([]);
    await shOk('for i in 1 2 3 4 5; do echo "n$i" > "$1/f$i"; cat "$1/f$i" >/dev/null; done; ls -l "$1" >/dev/null', [d.mnt]);
    const m = fuseMountAt(d.mnt)!;
    const published = `/run/fuse-uring/${m.major}:${m.minor}.json`;
    expect(existsSync(published)).toBe(true);
    // The daemon publishes once a second: wait for a snapshot with our requests.
    let snap: any = null;
    for (let i = 0; i < 40; i++) {
      const r = await stats(d.mnt, "--once", "--json");
      expect(r.code, fmt(r)).toBe(0);
      snap = JSON.parse(r.stdout);
      if ((snap.ops.WRITE ?? 0) >= 5 && (snap.ops.READ ?? 0) >= 5) break;
      await sleep(100);
    }
    expect(snap.pid).toBe(d.proc.pid);
    expect(snap.mountpoint).toBe(d.mnt);
    expect(snap.transport).toBe(d.transport);
    expect(snap.ops.WRITE).toBe(5);
    for (const op of ["WRITE", "READ", "LOOKUP"]) {
      const l = snap.latencyUs[op];
      expect(l.count, op).toBe(snap.ops[op]);
      expect(l.p50, op).toBeGreaterThan(0);
      expect(l.p99, op).toBeGreaterThanOrEqual(l.p50);
      expect(l.max, op).toBeGreaterThanOrEqual(l.p99);
    }
    expect(snap.slots).toBeGreaterThan(0);
    if (d.transport === "uring") expect(snap.pinnedBytes).toBeGreaterThan(0);
    // The default ring size is reported whichever threads own the rings (copies: the workers);
    // with a buffer pool on every queue (FUSE 7.46) no entry has a payload of its own.
    const ring = ringSizing(possibleCpus());
    const pools = snap.bufferPools === "active";
    if (d.transport === "uring") expect({ q: snap.ringQueues, d: snap.ringDepth, p: snap.ringPinnedDepth }).toEqual({ q: possibleCpus(), d: ring.depth, p: pools ? 0 : ring.pinnedDepth });

    const t = await stats(d.mnt, "--once");
    expect(t.code, fmt(t)).toBe(0);
    expect(t.stdout).toContain(`transport ${d.transport}`);
    if (d.transport === "uring") expect(t.stdout).toContain(`(${possibleCpus()} queues × ${ring.depth} entries, ${pools ? "payloads in buffer pools" : `${ring.pinnedDepth} pinned`})`);
    expect(t.stdout).toMatch(/in flight \d+ of \d+ slots/);
    expect(t.stdout).toMatch(/pinned [\d.]+ MiB/);
    expect(t.stdout).toMatch(/^WRITE +[\d.]+ +5 +[\d.]+(µs|ms) +[\d.]+(µs|ms) +[\d.]+(µs|ms)$/m);

    expect(await d.stop()).toBe(0);
    expect(existsSync(published)).toBe(false); // cleaned up at exit
    const gone = await stats(d.mnt, "--once");
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("not a FUSE mount");
  });

  fuseTest("in flight and queue use: a request held by a slow handler shows up", async () => {
    const d = await startDaemon([], { command: (mnt) => [BUN, CLI, "mount", "./test/fixtures/tree-lazy.ts", mnt] });
    const reader = spawnBg(["cat", `${d.mnt}/stall.txt`], { timeoutMs: 20_000 });
    let snap: any = null;
    for (let i = 0; i < 30; i++) {
      snap = JSON.parse((await stats(d.mnt, "--once", "--json")).stdout);
      if (snap.inflight >= 1) break;
      await sleep(100);
    }
    expect(snap.inflight, JSON.stringify(snap)).toBeGreaterThanOrEqual(1);
    if (snap.transport === "uring") {
      expect(snap.queueInflight.length).toBe(snap.ringQueues);
      expect(snap.queueInflight.reduce((a: number, b: number) => a + b, 0)).toBeGreaterThanOrEqual(1);
      expect((await stats(d.mnt, "--once")).stdout).toMatch(/queues \[(\d+\/\d+ ?)+\]/);
    } else expect(snap.queueInflight).toEqual([]);
    const r = await reader.done;
    expect(r.stdout, fmt(r)).toBe("stalled\n");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("live view refreshes every second until interrupted", async () => {
    const d = await startDaemon([]);
    const r = await run(["timeout", "--preserve-status", "-s", "INT", "2.6", BUN, CLI, "stats", d.mnt], { timeoutMs: 20_000 });
    expect(r.code, fmt(r)).toBe(0);
    expect(r.stdout.match(/^OPCODE/gm)?.length ?? 0, r.stdout).toBeGreaterThanOrEqual(2);
    expect(await d.stop()).toBe(0);
  });

  fuseTest("bad arguments → usage, exit 2", async () => {
    for (const args of [[], ["--once"], ["/a", "/b"], ["/a", "--frob"]]) {
      const r = await stats(...args);
      expect(r.code, fmt(r)).toBe(2);
      expect(r.stderr).toContain("Usage:");
    }
  });
});

describe("scripting: tree() produces content at open, paths() creates through writeFile", () => {
  cleanupAfterEach();
  const script = (path: string) => (mnt: string, args: string[]) => [BUN, CLI, "mount", path, mnt, ...args];
  const calls = async (mnt: string) => JSON.parse(await shOk('cat "$1/calls.txt"', [mnt]));

  fuseTest("ls -l, stat and lookups never run producers; open does; its error is the open's", async () => {
    const d = await startDaemon([], { command: script("./test/fixtures/tree-lazy.ts") });
    // Listing and stat: every entry visible with normal attributes, no producer ran.
    const ls = await shOk('ls -l "$1"; stat -c "%n %s %F" "$1/slow.txt" "$1/bad.txt" "$1/denied.txt"; ls -l "$1/bad.txt"', [d.mnt]);
    expect(ls).not.toContain("?");
    expect(ls).toMatch(/^-r--r--r-- .* bad\.txt$/m);
    expect(ls).toContain("slow.txt 0 regular");
    expect(await calls(d.mnt)).toEqual({ slow: 0, bad: 0, denied: 0 });

    // Reading produces once and serves every byte; stat then knows the size.
    const slow = await shOk('cat "$1/slow.txt"', [d.mnt]);
    expect(slow).toBe("slow content\n".repeat(100));
    expect((await calls(d.mnt)).slow).toBe(1);
    expect((await shOk('stat -c %s "$1/slow.txt"', [d.mnt])).trim()).toBe("1300");
    expect((await calls(d.mnt)).slow).toBe(1);

    // A producer's error is the reader's error: EIO for a plain Error, the FuseError's errno.
    const bad = await fsop("read", `${d.mnt}/bad.txt`);
    expect(bad.code, JSON.stringify(bad)).toBe("EIO");
    const denied = await fsop("read", `${d.mnt}/denied.txt`);
    expect(denied.code, JSON.stringify(denied)).toBe("EACCES");
    expect(await calls(d.mnt)).toMatchObject({ bad: 1, denied: 1 });
    // … and the entries stay listed.
    expect((await shOk('ls "$1"', [d.mnt])).split("\n")).toContain("bad.txt");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("the README's paths() example creates files: echo x > MNT/new", async () => {
    const d = await startDaemon([], { command: script("./test/fixtures/paths-readme.ts") });
    await shOk('echo x > "$1/new"', [d.mnt]);
    expect(await shOk('cat "$1/new"', [d.mnt])).toBe("x\n");
    expect((await shOk('ls "$1"', [d.mnt])).trim().split("\n").sort()).toEqual(["greeting", "new"]);
    await shOk('echo again >> "$1/greeting"', [d.mnt]);
    expect(await shOk('cat "$1/greeting"', [d.mnt])).toBe("hello\nagain\n");
    expect(await d.stop()).toBe(0);
  });
});
