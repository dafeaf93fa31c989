// `--memfs --workers 2` runs memfs on every worker as a view of one shared state (MemFS.copies,
// lib/fs/memfs-state.ts): every request is answered on the worker of its CPU, none is
// forwarded, and whatever one CPU did the other sees — data, names, links, xattrs, readdir
// order, the space and inode limits, FORGET. Ending the mount under load leaves no hung caller.

import { describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import {
  BUN, CLI, REPO, cleanupAfterEach, dropCaches, fmt, fuseTest, isMounted, makeMountpoint, noneInDState, readStats, run, sh, shOk, sleep, spawnBg,
  scratchDirs, startDaemon, transportHooks, type Stats,
} from "../helpers/index.ts";

const scratchDir = scratchDirs("memcopies-");
const SMALL = join(REPO, "test", "fixtures", "memfs-small.ts");
const statsPath = (mnt: string) => mnt + ".stats.json";
type Thread = { thread: string; requests: number };
const onCpu = (cpu: number, script: string, args: string[]) => shOk(`taskset -c ${cpu} sh -c '${script}' sh "$@"`, args);

describe("--memfs --workers 2: copies over one shared state", () => {
  transportHooks("uring");
  cleanupAfterEach();

  fuseTest("copies mode: nothing forwarded, both workers serve, data and names agree across CPUs", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt });
    expect(d.readyLine).toContain("2 worker threads, copies");
    const dir = scratchDir();
    const src = join(dir, "src");
    writeFileSync(src, randomBytes((8 << 20) + 12345));
    // Written through CPU 0 (buffered) and CPU 1 (O_DIRECT 4 KiB blocks), each read back through the other.
    await onCpu(0, 'cp "$1" "$2/a"', [src, d.mnt]);
    await onCpu(1, 'cmp "$1" "$2/a"', [src, d.mnt]);
    await onCpu(1, 'dd if="$1" of="$2/b" bs=4k count=1000 oflag=direct status=none', [src, d.mnt]);
    await onCpu(0, 'dd if="$2/b" bs=4k iflag=direct status=none | cmp - "$1" -n 4096000', [src, d.mnt]);
    // Overwrites in the middle from one CPU, seen by the other.
    await onCpu(0, 'printf XYZ | dd of="$1/a" bs=1 seek=5000000 conv=notrunc status=none', [d.mnt]);
    expect(await onCpu(1, 'dd if="$1/a" bs=1 skip=5000000 count=3 status=none', [d.mnt])).toBe("XYZ");
    // Names, links, xattrs, symlinks, renames: made on one CPU, checked on the other.
    await onCpu(0, 'mkdir -p "$1/d/e" && echo hi > "$1/d/f" && ln "$1/d/f" "$1/d/e/g" && ln -s ../d/f "$1/d/s" && setfattr -n user.k -v v1 "$1/d/f"', [d.mnt]);
    expect(await onCpu(1, 'cat "$1/d/e/g" "$1/d/s"; stat -c %h "$1/d/f"; getfattr --only-values -n user.k "$1/d/f"; readlink "$1/d/s"', [d.mnt])).toBe("hi\nhi\n2\nv1../d/f\n");
    await onCpu(1, 'mv "$1/d/e" "$1/E" && rm "$1/d/f" && setfattr -x user.k "$1/E/g" && chmod 600 "$1/E/g"', [d.mnt]);
    expect(await onCpu(0, 'cat "$1/E/g"; stat -c "%h %a" "$1/E/g"; ls "$1/d"; getfattr -d "$1/E/g" | wc -l', [d.mnt])).toBe("hi\n1 600\ns\n0\n");
    // Readdir order: entries made alternately on the two CPUs list in creation order, on both.
    for (let i = 0; i < 40; i++) await onCpu(i % 2, 'touch "$1/o/n$2" 2>/dev/null || { mkdir "$1/o" && touch "$1/o/n$2"; }', [d.mnt, String(i)]);
    const want = Array.from({ length: 40 }, (_, i) => `n${i}`).join("\n") + "\n";
    expect(await onCpu(0, 'ls -f "$1/o" | grep -v "^\\.\\.\\?$"', [d.mnt])).toBe(want);
    expect(await onCpu(1, 'ls -f "$1/o" | grep -v "^\\.\\.\\?$"', [d.mnt])).toBe(want);
    const s = await readStats(stats, { until: (x) => (x.threads as Thread[]).filter((t) => t.thread.startsWith("worker") && t.requests > 50).length === 2 });
    expect(s.workerMode).toBe("copies");
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(Number(s.protocolErrors)).toBe(0);
    const threads = s.threads as Thread[];
    expect(threads.map((t) => t.thread)).toEqual(["main", "worker 0", "worker 1"]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("the space and inode limits hold across copies", async () => {
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { command: (m, args) => [BUN, CLI, "mount", SMALL, m, ...args, "--", String(4 << 20), "40"] });
    expect(d.readyLine).toContain("copies");
    await onCpu(0, 'head -c 3000000 /dev/zero > "$1/x"', [d.mnt]);
    const r = await sh(`taskset -c 1 sh -c 'head -c 2000000 /dev/zero > "$1/y"' sh "$@"`, [d.mnt]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("No space left");
    await onCpu(1, 'rm "$1/x" "$1/y"', [d.mnt]);
    // The space comes back when the kernel FORGETs the unlinked files: that arrives on /dev/fuse
    // (main thread) asynchronously after rm returns, as with any FUSE filesystem that keeps an
    // unlinked inode while the kernel references it. So: within 5 s, not at once.
    const back = await sh(`for i in $(seq 50); do taskset -c 0 sh -c 'head -c 3000000 /dev/zero > "$1/x"' sh "$1" 2>/dev/null && exit 0; sleep 0.1; done; exit 1`, [d.mnt]);
    expect(back.code, fmt(back)).toBe(0);
    // 40 inodes, root and x included: 38 more files, alternately from the two CPUs, then ENOSPC.
    for (let i = 0; i < 38; i++) await onCpu(i % 2, 'touch "$1/i$2"', [d.mnt, String(i)]);
    for (const cpu of [0, 1]) {
      const e = await sh(`taskset -c ${cpu} touch "$1/one-more"`, [d.mnt]);
      expect(e.code).not.toBe(0);
      expect(e.stderr).toContain("No space left");
    }
    expect((await onCpu(1, 'stat -f -c "%c %d" "$1"', [d.mnt])).trim()).toBe("40 0");
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("FORGET frees nodes in every copy (applied once, by the main thread's copy)", async () => {
    const mnt = makeMountpoint();
    const stats = statsPath(mnt);
    const d = await startDaemon(["--transport", "uring", "--workers", "2", "--stats-file", stats], { mnt });
    const freeInodes = async (cpu: number) => Number((await onCpu(cpu, 'stat -f -c %d "$1"', [d.mnt])).trim());
    const before = await freeInodes(0);
    await onCpu(0, 'mkdir "$1/f" && for i in $(seq 200); do echo $i > "$1/f/x$i"; done', [d.mnt]);
    await onCpu(1, 'for i in $(seq 200); do stat "$1/f/x$i" >/dev/null; done', [d.mnt]);
    expect(await freeInodes(1)).toBe(before - 201);
    // Unlinked, the nodes live on while the kernel holds references; FORGET releases them.
    await onCpu(1, 'rm -r "$1/f"', [d.mnt]);
    await dropCaches();
    let now = 0;
    for (let i = 0; i < 100 && now !== before; i++) {
      now = await freeInodes(i % 2);
      if (now !== before) await sleep(100);
    }
    expect(now).toBe(before);
    expect(await freeInodes(0)).toBe(before);
    const s = await readStats(stats, { until: (x) => Number(x.forgets) >= 1 });
    expect(Number(s.forwarded ?? 0)).toBe(0);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  fuseTest("--workers auto: a copy per CPU", async () => {
    const cpus = Math.min(availableParallelism(), 8);
    const d = await startDaemon(["--transport", "uring", "--workers", "auto"]);
    if (cpus > 1) expect(d.readyLine).toContain(`${cpus} worker threads, copies`);
    await onCpu(0, 'echo x > "$1/f"', [d.mnt]);
    expect(await onCpu(cpus - 1, 'cat "$1/f"', [d.mnt])).toBe("x\n");
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);

  for (const how of ["SIGTERM", "fusectl abort"] as const) {
    fuseTest(`${how} under load (data on both CPUs, a create/stat/unlink loop): callers end, nothing stays mounted`, async () => {
      const d = await startDaemon(["--transport", "uring", "--workers", "2"]);
      expect(d.readyLine).toContain("copies");
      await shOk(`head -c 33554432 /dev/urandom > "$1/data" && mkdir "$1/loop"`, [d.mnt]);
      const clients = ["0", "1"].map((cpu) =>
        spawnBg(["taskset", "-c", cpu, "fio", "--name=c", `--filename=${d.mnt}/data`, "--rw=randrw", "--bs=4k", "--direct=1",
          "--ioengine=sync", "--time_based", "--runtime=4", "--size=32M"], { timeoutMs: 60_000 }));
      clients.push(spawnBg(["sh", "-c", 'i=0; while [ $i -lt 100000 ]; do echo x > "$0/m$i" && stat "$0/m$i" >/dev/null && rm "$0/m$i" || exit 0; i=$((i+1)); done', `${d.mnt}/loop`], { timeoutMs: 60_000 }));
      await sleep(1000);
      if (how === "SIGTERM") d.proc.kill("SIGTERM");
      else await sh(`echo 1 > /sys/fs/fuse/connections/${d.connId}/abort`);
      const ended = await Promise.all(clients.map((c) => Promise.race([c.done.then(() => true), sleep(20_000).then(() => false)])));
      expect(noneInDState(clients.map((c) => c.proc.pid))).toBe(true);
      expect(ended.every(Boolean), d.stderr().slice(-3000)).toBe(true);
      const exit = await d.waitExit(15_000);
      expect(exit.exited, d.stderr().slice(-3000)).toBe(true);
      if (how === "SIGTERM") expect(exit.code, d.stderr().slice(-3000)).toBe(0);
      expect(d.stderr()).not.toContain("BUG");
      if (isMounted(d.mnt)) {
        const r = await run([BUN, CLI, "unmount", d.mnt], { timeoutMs: 10_000 });
        expect(r.code, fmt(r)).toBe(0);
      }
      expect(isMounted(d.mnt)).toBe(false);
    }, 90_000);
  }
});

void ({} as Stats);
