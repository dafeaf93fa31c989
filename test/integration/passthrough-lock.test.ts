// The passthrough's node-table mutex (copies mode, --workers 2) covers table operations only,
// never a backing syscall (issue 29 item 3; lib/fs/passthrough.ts "threads"). A backing open
// that blocks: a process holds a read lease on a source file, so an open of it for writing waits
// in the source until the holder gives the lease up (break_lease). An append to that file from
// CPU 0 keeps worker 0 inside its OPEN's backing open for HOLD_MS. Meanwhile a
// create/stat/rename/unlink loop and lookups and reads from CPU 1 (worker 1) must complete
// promptly; when the mutex was held across a handler's syscalls they all waited for the open.
import { afterAll, describe, expect } from "bun:test";
import { readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import {
  BUN, CLI, PYTHON, cleanupAfterEach, fmt, fuseTest, makeMountpoint, mountTmpfsSource, shOk, sleep, spawnBg, startDaemon, transportHooks, unmountTmpfsSources,
} from "../helpers/index.ts";

const HOLD_MS = 6000;
/** CPU 1's loop (120 short processes) must end within this: half the hold, so a loaded machine does not fail it, while a loop that waited for the blocked OPEN cannot pass. */
const PROMPT_MS = HOLD_MS / 2;

/** Take a read lease on argv[1]; at the lease break (SIGIO) say "break" (in file argv[3]), keep it argv[2] s more, then give it up. */
const LEASE_HOLDER = `
import fcntl, os, signal, sys, time
F_SETLEASE = 1024
broken = []
signal.signal(signal.SIGIO, lambda s, f: broken.append(1))
log = open(sys.argv[3], "a")
def say(w): log.write(w + chr(10)); log.flush()
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, F_SETLEASE, fcntl.F_RDLCK)
say("leased")
deadline = time.time() + 30
while not broken and time.time() < deadline: time.sleep(0.005)
say("break" if broken else "no break")
time.sleep(float(sys.argv[2]))
fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
say("released")
`;

describe("passthrough --workers 2: a blocked backing syscall on one thread does not hold the others", () => {
  transportHooks("uring");
  cleanupAfterEach();
  afterAll(unmountTmpfsSources);

  fuseTest("an OPEN blocked 6 s on a leased source file on CPU 0; 30 create/stat/rename/unlink cycles and reads on CPU 1 finish within 3 s, before it", async () => {
    const src = await mountTmpfsSource("size=64m");
    mkdirSync(`${src}/other`);
    for (const i of [1, 2, 3, 4, 5]) writeFileSync(`${src}/a${i}`, `${i}\n`);
    writeFileSync(`${src}/leased`, "base\n");
    const mnt = makeMountpoint();
    const d = await startDaemon(["--transport", "uring", "--workers", "2"], { mnt, command: (m, args) => [BUN, CLI, "mount", "--passthrough", src, m, ...args] });
    expect(d.readyLine).toContain("2 worker threads, copies");
    // Warm both workers, and LOOKUP the leased file (no open: no lease break yet).
    await shOk('taskset -c 1 sh -c \'stat "$0"/a1 "$0"/other >/dev/null; touch "$0/other/w"; rm "$0/other/w"\' "$1"', [d.mnt]);
    await shOk('taskset -c 0 stat "$1"/a2 "$1"/leased >/dev/null', [d.mnt]);
    const said = `${mnt}.lease-log`;
    writeFileSync(said, "");
    const holder = spawnBg([PYTHON, "-c", LEASE_HOLDER, `${src}/leased`, String(HOLD_MS / 1000), said], { timeoutMs: 60_000 });
    const saw = async (word: string) => {
      const deadline = Date.now() + 10_000;
      while (!readFileSync(said, "utf8").includes(word)) {
        if (Date.now() > deadline || holder.exited) throw new Error(`lease holder never said ${word}\n${fmt(await holder.done)}`);
        await sleep(5);
      }
    };
    await saw("leased");
    const t0 = performance.now();
    const blocked = spawnBg(["taskset", "-c", "0", "sh", "-c", 'echo appended >> "$0"', `${d.mnt}/leased`], { timeoutMs: 30_000 });
    await saw("break");
    // Worker 0 is now inside its OPEN's backing open of the leased file, for HOLD_MS.
    const t1 = performance.now();
    const out = await shOk(
      'taskset -c 1 sh -c \'for i in $(seq 30); do echo $i > "$0/other/f$i" && stat -c %s "$0/other/f$i" >/dev/null && mv "$0/other/f$i" "$0/other/g$i" && rm "$0/other/g$i"; done; cat "$0"/a3 "$0"/a4 "$0"/a5; ls "$0/other" | wc -l\' "$1"',
      [d.mnt],
      { timeoutMs: 30_000 },
    );
    const fastMs = performance.now() - t1;
    console.log(`passthrough-lock: CPU 1's loop took ${Math.round(fastMs)} ms while CPU 0's OPEN was blocked (hold ${HOLD_MS} ms)`);
    expect(out).toBe("3\n4\n5\n0\n");
    expect(blocked.exited, `the blocked append ended after ${Math.round(performance.now() - t0)} ms, before CPU 1's loop (${Math.round(fastMs)} ms) could be judged`).toBe(false);
    expect(fastMs, `CPU 1's 30 create/stat/rename/unlink cycles took ${Math.round(fastMs)} ms while CPU 0's OPEN waited in the source`).toBeLessThan(PROMPT_MS);
    // The blocked one completes once the lease is given up.
    const r = await blocked.done;
    expect(r.code, fmt(r)).toBe(0);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(HOLD_MS * 0.9);
    expect((await holder.done).code).toBe(0);
    expect(readFileSync(said, "utf8")).toBe("leased\nbreak\nreleased\n");
    rmSync(said);
    expect(readFileSync(`${src}/leased`, "utf8")).toBe("base\nappended\n");
    expect(readdirSync(`${src}/other`)).toEqual([]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 60_000);
});
