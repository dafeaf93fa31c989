// Handler behaviour through the library API (fixture test/fixtures/throwing-fs.ts):
// exceptions become EIO (FuseError keeps its errno) and slow async handlers do not stall others.
import { describe, expect } from "bun:test";
import {
  TRANSPORTS,
  cleanupAfterEach,
  fixtureCommand,
  fmt,
  fsop,
  fsopOk,
  fuseTest,
  run,
  sharedDaemon,
  shOk,
  sleep,
  spawnBg,
  transportHooks,
} from "../helpers/index.ts";

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport], { command: fixtureCommand("throwing-fs.ts") });

    fuseTest("fixture mounted over the requested transport", () => {
      expect(s.d.transport).toBe(transport);
    });

    fuseTest("a handler that throws a plain Error gives EIO, and the next request succeeds", async () => {
      const d = `${s.mnt}/throw`;
      await shOk('mkdir -p "$1" && echo fine > "$1/ok" && echo never > "$1/boom" && echo never > "$1/boom-async"', [d]);
      for (let i = 0; i < 3; i++) {
        const r = await fsop("read", `${d}/boom`);
        expect(r.code).toBe("EIO");
        // the session survives: the next requests are answered normally
        expect((await fsopOk("read", `${d}/ok`)).data).toBe("fine\n");
        expect((await fsopOk("stat", `${d}/boom`)).size).toBe(6);
      }
      const cat = await run(["cat", `${d}/boom`]);
      expect(cat.code).not.toBe(0);
      expect(cat.stderr).toContain("Input/output error");
      // a rejected promise is the same as a throw
      expect((await fsop("read", `${d}/boom-async`)).code).toBe("EIO");
      expect(await shOk('cat "$1/ok"', [d])).toBe("fine\n");
      expect(s.d.exited).toBe(false);
    });

    fuseTest("FuseError(\"EPERM\") reaches the caller as EPERM", async () => {
      const d = `${s.mnt}/eperm`;
      await shOk('mkdir -p "$1" && echo x > "$1/eperm"', [d]);
      expect((await fsop("read", `${d}/eperm`)).code).toBe("EPERM");
      expect((await fsopOk("listdir", d)).names).toEqual(["eperm"]);
    });

    fuseTest(
      "a handler awaiting a timer does not stall other requests (same CPU, same queue)",
      async () => {
        const d = `${s.mnt}/slowdir`;
        await shOk('mkdir -p "$1" && echo slow-data > "$1/slow" && echo other > "$1/other"', [d]);
        const startsBefore = (s.d.stderr().match(/fixture: slow read start/g) ?? []).length;
        // Both clients on CPU 0 so that over io_uring they share one queue.
        const slow = spawnBg(["taskset", "-c", "0", "cat", `${d}/slow`], { timeoutMs: 30_000 });
        // Wait until the slow READ is inside the handler.
        const deadline = Date.now() + 10_000;
        while ((s.d.stderr().match(/fixture: slow read start/g) ?? []).length === startsBefore) {
          if (Date.now() > deadline || slow.exited) throw new Error(`slow read never reached the handler\n${fmt(await slow.done)}\n${s.d.stderr().slice(-3000)}`);
          await sleep(20);
        }
        // While it waits: several other requests of different kinds must complete.
        const order: string[] = [];
        const others = [
          run(["taskset", "-c", "0", "stat", "-c", "%s", `${d}/other`]).then((r) => (order.push("stat"), r)),
          run(["taskset", "-c", "0", "cat", `${d}/other`]).then((r) => (order.push("cat"), r)),
          run(["taskset", "-c", "0", "ls", d]).then((r) => (order.push("ls"), r)),
          run(["taskset", "-c", "0", "touch", `${d}/new`]).then((r) => (order.push("touch"), r)),
        ];
        slow.done.then(() => order.push("slow"));
        const results = await Promise.all(others);
        for (const r of results) expect(r.code, fmt(r)).toBe(0);
        expect(slow.exited).toBe(false); // all four finished while the slow read was still waiting
        const sr = await slow.done;
        expect(sr.code, fmt(sr)).toBe(0);
        expect(sr.stdout).toBe("slow-data\n");
        expect(order.indexOf("slow")).toBe(4);
        expect(results[0]!.stdout.trim()).toBe("6");
        expect(results[1]!.stdout).toBe("other\n");
      },
      60_000,
    );

    fuseTest(
      "several slow reads in parallel overlap instead of queueing behind each other",
      async () => {
        const d = `${s.mnt}/slowpar`;
        await shOk('mkdir -p "$1/a" "$1/b" "$1/c" && for x in a b c; do echo $x > "$1/$x/slow"; done', [d]);
        const count = (re: RegExp) => (s.d.stderr().match(re) ?? []).length;
        const starts0 = count(/fixture: slow read start/g);
        const ends0 = count(/fixture: slow read end/g);
        const readers = ["a", "b", "c"].map((x) => spawnBg(["cat", `${d}/${x}/slow`], { timeoutMs: 30_000 }));
        // All three must be inside the handler at the same moment (in flight = starts - ends).
        const deadline = Date.now() + 15_000;
        let maxInFlight = 0;
        while (Date.now() < deadline && !readers.every((r) => r.exited)) {
          const inFlight = count(/fixture: slow read start/g) - starts0 - (count(/fixture: slow read end/g) - ends0);
          maxInFlight = Math.max(maxInFlight, inFlight);
          if (maxInFlight >= 3) break;
          await sleep(20);
        }
        const rs = await Promise.all(readers.map((r) => r.done));
        rs.forEach((r, i) => {
          expect(r.code, fmt(r)).toBe(0);
          expect(r.stdout).toBe(`${"abc"[i]}\n`);
        });
        expect(maxInFlight).toBe(3);
      },
      60_000,
    );
  });
}
