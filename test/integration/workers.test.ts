// `--workers N`: the ring queues served from N threads.
// Copies: each worker runs its own copy of a replicable script (test/fixtures/replicated-fs.ts):
// every worker serves its CPUs' requests; a handler awaiting a timer does not stall others;
// every way the mount can end leaves no hung caller and no dead mount.
// Forwarding: any other filesystem (a memfs subclass, a non-replicable script, the passthrough where it
// cannot run as copies: --no-file-handles, --kernel-passthrough) stays on the main thread; the
// workers serve the native data plane and forward the rest to it.
// The passthrough as copies over shared state (lib/fs/passthrough/shared.ts): every worker
// handles its CPUs' requests, metadata included, over one node table.

import { describe, expect } from "bun:test";
import { afterAll } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  BUN, CLI, PYTHON, REPO, cleanupAfterEach, dropCaches, noneInDState, fmt, fuseTest, isMounted, makeMountpoint, mountTmpfsSource, readStats, run, sh, shOk, sleep, spawnBg,
  scratchDirs, startDaemon, transportHooks, unmountTmpfsSources, type Stats,
} from "../helpers/index.ts";

const scratchDir = scratchDirs("fuse-uring-workers-");

const FIXTURE = join(REPO, "test", "fixtures", "replicated-fs.ts");
const scriptCommand = (script: string) => (mnt: string, args: string[]) => [BUN, CLI, "mount", script, mnt, ...args];

function statsPath(mnt: string): string {
  return join(mnt + ".stats.json");
}

describe("--workers 2 over uring", () => {
  transportHooks("uring");
  cleanupAfterEach();

  fuseTest("each worker serves the requests of its CPUs' queues; the main thread only INIT", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: scriptCommand(FIXTURE) });
    expect(d.readyLine).toContain("2 worker threads, copies");
    for (const cpu of ["0", "1"]) {
      expect(await shOk(`taskset -c ${cpu} cat "$1/thread"`, [d.mnt])).toBe("worker\n");
      await shOk(`taskset -c ${cpu} dd if="$1/data" of=/dev/null bs=4k count=500 iflag=direct status=none`, [d.mnt]);
    }
    // bytes are what every copy computes
    const head = await shOk(`dd if="$1/data" bs=1 skip=300 count=4 status=none | od -An -tu1`, [d.mnt]);
    expect(head.trim().split(/\s+/).map(Number)).toEqual([44, 45, 46, 47]);
    const s = await readStats(stats, { until: (x) => (x.threads as { requests: number }[]).filter((t) => t.requests >= 500).length >= 2 });
    const threads = s.threads as { thread: string; requests: number; wakeups: number; enters: number }[];
    expect(threads.map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    expect(threads[1]!.requests).toBeGreaterThanOrEqual(500);
    expect(threads[2]!.requests).toBeGreaterThanOrEqual(500);
    expect(Number(s.ringRequests)).toBeGreaterThanOrEqual(1000);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("a handler awaiting a timer does not stall other requests on the same worker", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE) });
    const slow = spawnBg(["taskset", "-c", "0", "cat", `${d.mnt}/slow`], { timeoutMs: 10_000 });
    await sleep(50);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) expect(await shOk(`taskset -c 0 cat "$1/thread"`, [d.mnt])).toBe("worker\n");
    const fast = Date.now() - t0;
    const r = await slow.done;
    expect(r.stdout).toBe("slow\n");
    // Five reads finished while the slow one was still waiting for its 300 ms timer.
    expect(fast).toBeLessThan(300 * 5);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  for (const how of ["unmount", "SIGTERM", "kill -9", "fusectl abort"] as const) {
    fuseTest(`${how} under load: callers end, nothing stays mounted`, async () => {
      const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE) });
      const clients = ["0", "1"].map((cpu) =>
        spawnBg(["taskset", "-c", cpu, "fio", "--name=c", `--filename=${d.mnt}/data`, "--rw=randread", "--bs=4k", "--direct=1",
          "--ioengine=sync", "--time_based", "--runtime=4", "--size=64M", "--readonly"], { timeoutMs: 60_000 }));
      await endUnderLoad(how, d, clients);
    }, 90_000);
  }

});

type Thread = { thread: string; requests: number };
const threadsOf = (s: Stats) => s.threads as Thread[];
/** Every serving thread (main, worker 0, worker 1) has answered at least `n` requests. */
const allServed = (n: number) => (s: Stats) => threadsOf(s).length === 3 && threadsOf(s).every((t) => t.requests >= n);

/** Ends the mount `how`; every client must end (none in D state) and nothing stays mounted. */
async function endUnderLoad(how: string, d: Awaited<ReturnType<typeof startDaemon>>, clients: ReturnType<typeof spawnBg>[]): Promise<void> {
  await sleep(1000);
  if (how === "unmount") await run(["umount", "-l", d.mnt], { timeoutMs: 10_000 });
  else if (how === "SIGTERM") d.proc.kill("SIGTERM");
  else if (how === "kill -9") d.proc.kill("SIGKILL");
  else await sh(`echo 1 > /sys/fs/fuse/connections/${d.connId}/abort`);
  const ended = await Promise.all(clients.map((c) => Promise.race([c.done.then(() => true), sleep(20_000).then(() => false)])));
  expect(noneInDState(clients.map((c) => c.proc.pid))).toBe(true);
  expect(ended.every(Boolean), d.stderr().slice(-3000)).toBe(true);
  const exit = await d.waitExit(15_000);
  expect(exit.exited, d.stderr().slice(-3000)).toBe(true);
  if (how === "SIGTERM" || how === "unmount") expect(exit.code, d.stderr().slice(-3000)).toBe(0);
  if (isMounted(d.mnt)) {
    const r = await run([BUN, CLI, "unmount", d.mnt], { timeoutMs: 10_000 });
    expect(r.code, fmt(r)).toBe(0);
  }
  expect(isMounted(d.mnt)).toBe(false);
}

describe("--workers 2 forwarding (filesystems that stay on the main thread)", () => {
  transportHooks("uring");
  cleanupAfterEach();
  afterAll(unmountTmpfsSources);

  fuseTest("a memfs subclass: served from both CPUs, handled on the main thread, counted as forwarded", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    // (--memfs itself runs as copies over shared state: test/integration/memfs-copies.test.ts)
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: scriptCommand(join(REPO, "test", "fixtures", "memfs-main-thread.ts")) });
    expect(d.readyLine).toContain("2 worker threads, forwarding");
    for (const cpu of ["0", "1"]) {
      await shOk(`taskset -c ${cpu} sh -c 'mkdir "$0/d${cpu}" && for i in $(seq 30); do echo $i > "$0/d${cpu}/f$i"; cat "$0/d${cpu}/f$i" >/dev/null; done' "$1"`, [d.mnt]);
      expect(await shOk(`taskset -c ${cpu} cat "$1/d${cpu}/f7"`, [d.mnt])).toBe("7\n");
    }
    // One tree: what one CPU wrote, the other reads.
    expect(await shOk(`taskset -c 1 cat "$1/d0/f30"`, [d.mnt])).toBe("30\n");
    const s = await readStats(stats, { until: allServed(30) });
    expect(threadsOf(s).map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    expect(threadsOf(s).every((t) => t.requests >= 30), JSON.stringify(s.threads)).toBe(true);
    expect(s.workerMode).toBe("forwarding");
    expect(Number(s.forwarded)).toBeGreaterThan(100);
    expect(Number(s.handoffsPerRequest)).toBeGreaterThanOrEqual(1.9);
    expect(Number(s.protocolErrors)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("a script that is not replicable (examples/hello.ts) is served through the main thread from both CPUs", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: scriptCommand(join(REPO, "examples", "hello.ts")) });
    expect(d.readyLine).toContain("forwarding");
    const names = (await shOk(`ls "$1"`, [d.mnt])).trim().split("\n");
    expect(names.length).toBeGreaterThan(0);
    for (const cpu of ["0", "1"]) {
      for (let i = 0; i < 10; i++) await shOk(`taskset -c ${cpu} sh -c 'ls -l "$0" >/dev/null; for f in "$0"/*; do [ -f "$f" ] && cat "$f" >/dev/null; done; true' "$1"`, [d.mnt]);
    }
    const s = await readStats(stats, { until: allServed(5) });
    expect(threadsOf(s).every((t) => t.requests >= 5), JSON.stringify(s.threads)).toBe(true);
    expect(Number(s.forwarded)).toBeGreaterThan(10);
    expect(Number(s.protocolErrors)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("passthrough --no-file-handles: 1 MiB O_DIRECT copies from each CPU are byte-exact and native; metadata is forwarded", async () => {
    const src = await mountTmpfsSource("size=256m");
    const data = randomBytes(1 << 20);
    writeFileSync(join(src, "src.bin"), data);
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    // Re-open by path needs the nodes' last known links, which copies do not share: forwarding.
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--no-file-handles", "--stats-file", stats], {
      mnt, command: (m, args) => [BUN, CLI, "mount", "--passthrough", src, m, ...args],
    });
    expect(d.readyLine).toContain("forwarding");
    for (const cpu of ["0", "1"]) {
      for (let i = 0; i < 4; i++) {
        await shOk(`taskset -c ${cpu} dd if="$1/src.bin" of="$1/copy${cpu}-${i}" bs=1M iflag=direct oflag=direct status=none`, [d.mnt]);
        expect(await shOk(`cmp "$1/src.bin" "$1/copy${cpu}-${i}" && echo same`, [src])).toBe("same\n");
      }
      await shOk(`taskset -c ${cpu} sh -c 'mkdir "$0/dir${cpu}" && mv "$0/copy${cpu}-0" "$0/dir${cpu}/moved" && stat -c %s "$0/dir${cpu}/moved" && rm -r "$0/dir${cpu}" "$0/copy${cpu}-1"' "$1"`, [d.mnt]);
    }
    expect(await shOk(`ls "$1" | sort`, [d.mnt])).toBe("copy0-2\ncopy0-3\ncopy1-2\ncopy1-3\nsrc.bin\n");
    // 4 KiB O_DIRECT reads on both CPUs: the workers answer them in the shim.
    for (const cpu of ["0", "1"]) await shOk(`taskset -c ${cpu} dd if="$1/src.bin" of=/dev/null bs=4k iflag=direct status=none`, [d.mnt]);
    const s = await readStats(stats, { until: (x) => allServed(10)(x) && Number(x.nativeRequests) >= 2 * 256 + 16 });
    const ops = s.ops as Record<string, number>;
    expect(ops.READ ?? 0, JSON.stringify(ops)).toBe(0);
    expect(ops.WRITE ?? 0, JSON.stringify(ops)).toBe(0);
    expect(Number(s.nativeRequests)).toBeGreaterThanOrEqual(2 * 256 + 16);
    expect(threadsOf(s).every((t) => t.requests >= 10), JSON.stringify(s.threads)).toBe(true);
    expect(Number(s.forwarded)).toBeGreaterThan(10);
    expect(Number(s.protocolErrors)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("a handler awaiting a 1.5 s timer does not stall 5 other reads", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE), env: { REPLICABLE: "0", SLOW_MS: "1500" } });
    expect(d.readyLine).toContain("forwarding");
    const slow = spawnBg(["taskset", "-c", "0", "cat", `${d.mnt}/slow`], { timeoutMs: 10_000 });
    await sleep(100);
    const t0 = Date.now();
    for (let i = 0; i < 5; i++) expect(await shOk(`taskset -c ${i % 2} cat "$1/thread"`, [d.mnt])).toBe("main\n");
    const fast = Date.now() - t0;
    expect(slow.exited).toBe(false);
    const r = await slow.done;
    expect(r.stdout).toBe("slow\n");
    expect(fast).toBeLessThan(1400);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("hot reload: only the main thread swaps; both CPUs see the new version", async () => {
    const dir = scratchDir();
    const script = join(dir, "fs.ts");
    writeFileSync(script, `export default { "f.txt": "v1\\n" };\n`);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--entry-ttl", "3600", "--attr-ttl", "3600"], {
      command: (m, args) => [BUN, CLI, "mount", "--watch", script, m, ...args],
    });
    expect(d.readyLine).toContain("forwarding");
    const onCpu = (cpu: number) => shOk(`taskset -c ${cpu} cat "$1/f.txt"`, [d.mnt]);
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v1\n", "v1\n"]);
    writeFileSync(script, `export default { "f.txt": "v2 longer\\n" };\n`);
    const deadline = Date.now() + 10_000;
    while (!d.stderr().includes("(version 2)") && Date.now() < deadline) await sleep(50);
    expect(d.stderr()).toContain("(version 2)");
    expect([await onCpu(0), await onCpu(1)]).toEqual(["v2 longer\n", "v2 longer\n"]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("a handler that never settles: SIGTERM answers its caller EIO, the workers keep their rings' memory, the daemon exits", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: scriptCommand(FIXTURE), env: { REPLICABLE: "0", SLOW_MS: "3600000" } });
    const hung = spawnBg(["taskset", "-c", "1", "cat", `${d.mnt}/slow`], { timeoutMs: 30_000 });
    await sleep(300);
    expect(hung.exited).toBe(false);
    d.proc.kill("SIGTERM");
    const r = await hung.done;
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Input/output error");
    const exit = await d.waitExit(15_000);
    expect(exit.exited).toBe(true);
    expect(exit.code, d.stderr().slice(-3000)).toBe(0);
    expect(d.stderr()).toContain("never settled");
    expect(d.stderr()).toContain("leaving their buffers allocated");
    expect(noneInDState([hung.proc.pid])).toBe(true);
    expect(isMounted(d.mnt)).toBe(false);
  }, 60_000);

  for (const how of ["SIGTERM", "fusectl abort"] as const) {
    fuseTest(`passthrough --no-file-handles, ${how} under fio data load and a create/stat/unlink loop: callers end, nothing stays mounted`, async () => {
      await passthroughUnderLoad(how, ["--no-file-handles"], "forwarding");
    }, 90_000);
  }
});

/** A passthrough mount with --workers 2 under fio reads and a create/stat/unlink loop on each CPU, then ended `how`. */
async function passthroughUnderLoad(how: string, extra: string[], mode: "copies" | "forwarding"): Promise<void> {
  const src = await mountTmpfsSource("size=256m");
  writeFileSync(join(src, "data"), randomBytes(32 << 20));
  const d = await startDaemon(["--transport", "uring", "--workers", "2", ...extra], { command: (m, args) => [BUN, CLI, "mount", "--passthrough", src, m, ...args] });
  expect(d.readyLine).toContain(`2 worker threads, ${mode}`);
  const clients = ["0", "1"].map((cpu) =>
    spawnBg(["taskset", "-c", cpu, "fio", "--name=c", `--filename=${d.mnt}/data`, "--rw=randread", "--bs=4k", "--direct=1",
      "--ioengine=sync", "--time_based", "--runtime=4", "--size=32M", "--readonly"], { timeoutMs: 60_000 }));
  // In a directory only the mount has: once it is detached the loop's next create fails and
  // it ends (the mountpoint itself would turn into the empty directory below it).
  await shOk(`mkdir "$1/loop"`, [d.mnt]);
  for (const cpu of ["0", "1"]) {
    clients.push(spawnBg(["taskset", "-c", cpu, "sh", "-c", 'i=0; while [ $i -lt 100000 ]; do echo x > "$0/m$1-$i" && stat "$0/m$1-$i" >/dev/null && rm "$0/m$1-$i" || exit 0; i=$((i+1)); done', `${d.mnt}/loop`, cpu], { timeoutMs: 60_000 }));
  }
  await endUnderLoad(how, d, clients);
}

describe("--workers 2: the passthrough as copies over shared state", () => {
  transportHooks("uring");
  cleanupAfterEach();
  afterAll(unmountTmpfsSources);
  const pt = (src: string) => (m: string, args: string[]) => [BUN, CLI, "mount", "--passthrough", src, m, ...args];
  const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

  fuseTest("metadata runs on the caller's CPU: a file made through one CPU is seen, renamed, hard-linked, unlinked through the other; nothing forwarded", async () => {
    const src = await mountTmpfsSource("size=64m");
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: pt(src) });
    expect(d.readyLine).toContain("2 worker threads, copies");
    const on = (cpu: number, script: string) => shOk(`taskset -c ${cpu} sh -c '${script}' "$1"`, [d.mnt]);
    await on(0, 'mkdir "$0/d" && echo made-on-0 > "$0/d/a"');
    expect(await on(1, 'cat "$0/d/a"')).toBe("made-on-0\n");
    await on(1, 'mv "$0/d/a" "$0/d/b"');
    expect(await on(0, 'ls "$0/d"; cat "$0/d/b"')).toBe("b\nmade-on-0\n");
    await on(0, 'ln "$0/d/b" "$0/d/c"');
    expect(await on(1, 'stat -c "%h %s" "$0/d/c"')).toBe("2 10\n");
    await on(1, 'echo more >> "$0/d/c" && rm "$0/d/b"');
    expect(await on(0, 'stat -c %h "$0/d/c"; cat "$0/d/c"')).toBe("1\nmade-on-0\nmore\n");
    expect(readFileSync(join(src, "d", "c"), "utf8")).toBe("made-on-0\nmore\n");
    await on(0, 'rm "$0/d/c"');
    expect(await on(1, 'ls -A "$0/d"; rmdir "$0/d" && echo gone')).toBe("gone\n");
    expect(readdirSync(src)).toEqual([]);
    // A create/stat/unlink loop from each CPU (separate processes), then the counters.
    await Promise.all([0, 1].map((cpu) => on(cpu, `for i in $(seq 100); do echo $i > "$0/f${cpu}-$i" && stat "$0/f${cpu}-$i" >/dev/null && rm "$0/f${cpu}-$i"; done`)));
    expect(readdirSync(src)).toEqual([]);
    const s = await readStats(stats, { until: (x) => threadsOf(x).filter((t) => t.thread.startsWith("worker") && t.requests >= 300).length === 2 });
    expect(s.workerMode).toBe("copies");
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(threadsOf(s).map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    // Each worker handled its CPU's 300 requests of the loop (CREATE, GETATTR/LOOKUP, UNLINK…).
    expect(threadsOf(s).filter((t) => t.thread.startsWith("worker")).every((t) => t.requests >= 300), JSON.stringify(s.threads)).toBe(true);
    expect(Number(s.protocolErrors)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("1 MiB O_DIRECT copies from each CPU are byte-exact and native; READDIR continues on the other CPU while the directory changes", async () => {
    const src = await mountTmpfsSource("size=256m");
    const data = randomBytes(1 << 20);
    writeFileSync(join(src, "src.bin"), data);
    mkdirSync(join(src, "many"));
    for (let i = 0; i < 2000; i++) writeFileSync(join(src, "many", `file-with-a-longer-name-${i}`), "");
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: pt(src) });
    expect(d.readyLine).toContain("copies");
    for (const cpu of ["0", "1"]) {
      for (let i = 0; i < 3; i++) {
        await shOk(`taskset -c ${cpu} dd if="$1/src.bin" of="$1/copy${cpu}-${i}" bs=1M iflag=direct oflag=direct status=none`, [d.mnt]);
        expect(await shOk(`cmp "$1/src.bin" "$1/copy${cpu}-${i}" && echo same`, [src])).toBe("same\n");
      }
    }
    // One directory stream, its READDIRs alternating between the CPUs (the process moves every
    // 50 entries), entries already listed removed and new ones made meanwhile: every original
    // entry is listed exactly once (the snapshot is shared, not taken again by the other copy).
    const lister = [
      "import os, sys",
      "d = sys.argv[1]; seen = []; cpu = 0",
      "for i, e in enumerate(os.scandir(d)):",
      "    seen.append(e.name)",
      "    if i % 50 == 49:",
      "        cpu ^= 1; os.sched_setaffinity(0, {cpu})",
      "        os.unlink(os.path.join(d, seen[-1])); open(os.path.join(d, 'new-%d' % i), 'w').close()",
      "print('\\n'.join(seen))",
    ].join("\n");
    const r = await run([PYTHON, "-c", lister, `${d.mnt}/many`], { timeoutMs: 60_000 });
    expect(r.code, fmt(r)).toBe(0);
    const listed = r.stdout.split("\n").filter(Boolean);
    const originals = listed.filter((n) => n.startsWith("file-"));
    expect(originals.length).toBe(2000);
    expect(new Set(originals).size).toBe(2000);
    const s = await readStats(stats, { until: (x) => threadsOf(x).filter((t) => t.thread.startsWith("worker") && t.requests >= 20).length === 2 && Number(x.nativeRequests) >= 6 * 16 });
    const ops = s.ops as Record<string, number>;
    expect(ops.READ ?? 0, JSON.stringify(ops)).toBe(0);
    expect(ops.WRITE ?? 0, JSON.stringify(ops)).toBe(0);
    expect(ops.READDIRPLUS ?? ops.READDIR ?? 0, JSON.stringify(ops)).toBeGreaterThan(10);
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(Number(s.protocolErrors)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("FORGETs drop nodes: after 1500 files are made on one CPU and stat'ed on the other, a cache drop brings the descriptors back near the start", async () => {
    const src = await mountTmpfsSource("size=64m");
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--entry-ttl", "60", "--stats-file", stats], { mnt, command: pt(src) });
    expect(d.readyLine).toContain("copies");
    const pid = d.proc.pid;
    await shOk(`ls "$1" >/dev/null`, [d.mnt]);
    const before = fdCount(pid);
    await shOk(`taskset -c 0 python3 -c 'import sys; [open("%s/f%d" % (sys.argv[1], i), "w").close() for i in range(1500)]' "$1"`, [d.mnt]);
    await shOk(`taskset -c 1 python3 -c 'import os, sys; [os.stat("%s/f%d" % (sys.argv[1], i)) for i in range(1500)]' "$1"`, [d.mnt]);
    const during = fdCount(pid);
    // One O_PATH descriptor per node (give or take the directory handle of the first `ls`,
    // which its RELEASEDIR closes asynchronously).
    expect(during).toBeGreaterThanOrEqual(before + 1490);
    let after = during;
    for (let i = 0; i < 50 && after > before + 100; i++) {
      await dropCaches();
      await sleep(100);
      after = fdCount(pid);
    }
    expect(after).toBeLessThan(before + 100);
    const s = await readStats(stats, { until: (x) => Number(x.forgets) >= 1500 && Number((x.descriptors as { held: number }).held) < 100 });
    expect(Number(s.forgets)).toBeGreaterThanOrEqual(1500);
    expect((s.descriptors as { held: number }).held).toBeLessThan(100);
    expect(s.workerMode).toBe("copies");
    // Everything still works on the forgotten names.
    expect(await shOk(`taskset -c 1 stat -c %s "$1/f1499"`, [d.mnt])).toBe("0\n");
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("a small descriptor budget: both copies evict and re-open by kernel file handle", async () => {
    const src = await mountTmpfsSource("size=64m");
    for (let i = 0; i < 300; i++) writeFileSync(join(src, `f${i}`), String(i));
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--fd-budget", "20", "--entry-ttl", "60", "--stats-file", stats], { mnt, command: pt(src) });
    expect(d.readyLine).toContain("copies");
    for (const cpu of [0, 1, 0]) {
      expect(await shOk(`taskset -c ${cpu} sh -c 'for i in $(seq 0 299); do cat "$0/f$i"; echo; done' "$1"`, [d.mnt])).toBe(Array.from({ length: 300 }, (_, i) => `${i}\n`).join(""));
    }
    const s = await readStats(stats, { until: (x) => Number((x.descriptors as { reopenedByHandle: number }).reopenedByHandle) > 0 });
    const fds = s.descriptors as { held: number; maxHeld: number; evictions: number; reopenedByHandle: number; budget: number };
    expect(fds.budget).toBe(20);
    expect(fds.evictions).toBeGreaterThan(200);
    expect(fds.reopenedByHandle).toBeGreaterThan(0);
    expect(fds.maxHeld).toBeLessThanOrEqual(24);
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  for (const how of ["unmount", "SIGTERM", "kill -9", "fusectl abort"] as const) {
    fuseTest(`${how} under fio data load and a create/stat/unlink loop on each CPU: callers end, nothing stays mounted`, async () => {
      await passthroughUnderLoad(how, [], "copies");
    }, 90_000);
  }
});

describe("--workers 2 copies over one shared state (InodeFS.copies)", () => {
  transportHooks("uring");
  cleanupAfterEach();
  const SHARED = join(REPO, "test", "fixtures", "shared-copies-fs.ts");

  fuseTest("every copy sees the state the others changed; FORGET is applied once, by the main thread", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt, command: scriptCommand(SHARED) });
    expect(d.readyLine).toContain("2 worker threads, copies");
    // READs of /count alternate between the CPUs: one counter across both copies.
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) {
      const cpu = String(i % 2);
      expect(await shOk(`taskset -c ${cpu} cat "$1/thread"`, [d.mnt])).toBe("worker\n");
      seen.push(Number(await shOk(`taskset -c ${cpu} cat "$1/count"`, [d.mnt])));
    }
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
    // 200 fresh nodes looked up, then the clients' caches dropped: the kernel FORGETs them.
    await shOk(`for i in $(seq 1 200); do stat "$1/n$i" >/dev/null; done`, [d.mnt]);
    await dropCaches();
    const s = await readStats(stats, { until: (x) => Number(x.forgets) >= 100 });
    const applied = Number(await shOk(`cat "$1/forgets"`, [d.mnt]));
    // References given back, applied once each: at most the 200 fresh nodes' plus the ~20 lookups
    // of /thread and /count. Broadcast to the main thread and both copies it would be ≥ 3 × 100.
    expect(applied).toBeGreaterThanOrEqual(100);
    expect(applied).toBeLessThanOrEqual(230);
    const threads = s.threads as { thread: string; requests: number }[];
    expect(threads.filter((t) => t.thread.startsWith("worker") && t.requests > 0).length).toBe(2);
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);
});

describe("--workers auto", () => {
  transportHooks("uring");
  cleanupAfterEach();
  const cpus = Math.min(availableParallelism(), 8);

  fuseTest("a thread per CPU for a filesystem that runs as copies; one thread for one that would forward", async () => {
    const copies = await startDaemon(["--transport", "uring", "--workers", "auto"], { command: scriptCommand(FIXTURE) });
    if (cpus > 1) expect(copies.readyLine).toContain(`${cpus} worker threads, copies`);
    else expect(copies.readyLine).not.toContain("worker threads");
    expect(await shOk(`cat "$1/thread"`, [copies.mnt])).toBe(cpus > 1 ? "worker\n" : "main\n");
    expect(await copies.stop("SIGTERM")).toBe(0);
    const single = await startDaemon(["--transport", "uring", "--workers", "auto"], { command: scriptCommand(join(REPO, "examples", "hello.ts")) });
    expect(single.readyLine).toContain("transport=uring");
    expect(single.readyLine).not.toContain("worker threads");
    expect(await single.stop("SIGTERM")).toBe(0);
  }, 60_000);
});
