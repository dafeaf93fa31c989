// File data: sizes around page/request boundaries, O_DIRECT, partial rewrites, appends.
import { afterAll, describe, expect } from "bun:test";
import { randomBytes } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import {
  TMPFS,
  TRANSPORTS,
  cleanupAfterEach,
  dropCaches,
  fmt,
  fsopOk,
  fuseTest,
  run,
  sha256,
  sha256sum,
  sharedDaemon,
  shOk,
  transportHooks,
} from "../helpers/index.ts";

const MiB = 1 << 20;
const SIZES = [0, 1, 4095, 4096, 131072, 8 * MiB + 1];

const sources: string[] = [];
/** A random file on tmpfs; returns its path and sha256. */
function source(size: number, tag: string): { path: string; sha: string } {
  const path = `${TMPFS}/fuse-uring-test-${process.pid}-${tag}-${size}`;
  const data = randomBytes(size);
  writeFileSync(path, data);
  sources.push(path);
  return { path, sha: sha256(data) };
}
afterAll(() => {
  for (const p of sources) rmSync(p, { force: true });
});

for (const transport of TRANSPORTS) {
  describe(`memfs over ${transport}`, () => {
    transportHooks(transport);
    cleanupAfterEach();
    const s = sharedDaemon(["--transport", transport]);

    fuseTest("ready line names the requested transport", () => {
      expect(s.d.readyLine).toContain(`transport=${transport}`);
      expect(s.d.transport).toBe(transport);
    });

    for (const size of SIZES) {
      fuseTest(
        `${size}-byte file: cp and dd in, stat size, sha256 back (cached and after drop_caches)`,
        async () => {
          const src = source(size, "sz");
          const dir = `${s.mnt}/sizes-${size}`;
          await shOk('mkdir "$1"', [dir]);
          await shOk('cp "$1" "$2/cp"', [src.path, dir]);
          await shOk('dd if="$1" of="$2/dd" bs=65536 status=none', [src.path, dir]);
          for (const name of ["cp", "dd"]) {
            const st = await shOk('stat -c %s "$1"', [`${dir}/${name}`]);
            expect(Number(st.trim())).toBe(size);
            expect(await sha256sum(`${dir}/${name}`)).toBe(src.sha);
          }
          await dropCaches();
          for (const name of ["cp", "dd"]) {
            expect(Number((await shOk('stat -c %s "$1"', [`${dir}/${name}`])).trim())).toBe(size);
            expect(await sha256sum(`${dir}/${name}`)).toBe(src.sha);
          }
          // Read back through another path too: dd with an odd block size.
          const out = await run(["sh", "-c", 'dd if="$1" bs=7777 status=none | sha256sum', "sh", `${dir}/cp`]);
          expect(out.code, fmt(out)).toBe(0);
          expect(out.stdout.split(/\s+/)[0]).toBe(src.sha);
        },
        120_000,
      );
    }

    fuseTest(
      "O_DIRECT: 1 MiB blocks written and read with oflag/iflag=direct",
      async () => {
        const src = source(4 * MiB, "direct");
        const dir = `${s.mnt}/direct`;
        await shOk('mkdir "$1"', [dir]);
        // direct write, direct read
        await shOk('dd if="$1" of="$2/a" bs=1M oflag=direct status=none', [src.path, dir]);
        let r = await run(["sh", "-c", 'dd if="$1" bs=1M iflag=direct status=none | sha256sum', "sh", `${dir}/a`]);
        expect(r.code, fmt(r)).toBe(0);
        expect(r.stdout.split(/\s+/)[0]).toBe(src.sha);
        // direct write, buffered read after dropping caches
        await dropCaches();
        expect(await sha256sum(`${dir}/a`)).toBe(src.sha);
        // buffered write, direct read
        await shOk('cp "$1" "$2/b"', [src.path, dir]);
        r = await run(["sh", "-c", 'dd if="$1" bs=1M iflag=direct status=none | sha256sum', "sh", `${dir}/b`]);
        expect(r.code, fmt(r)).toBe(0);
        expect(r.stdout.split(/\s+/)[0]).toBe(src.sha);
        // a single 1 MiB direct write at a 1 MiB offset into an existing file
        const one = source(MiB, "direct1");
        await shOk('dd if="$1" of="$2/a" bs=1M seek=1 count=1 conv=notrunc oflag=direct status=none', [one.path, dir]);
        r = await run(["sh", "-c", 'dd if="$1" bs=1M skip=1 count=1 iflag=direct status=none | sha256sum', "sh", `${dir}/a`]);
        expect(r.code, fmt(r)).toBe(0);
        expect(r.stdout.split(/\s+/)[0]).toBe(one.sha);
        expect(Number((await shOk('stat -c %s "$1"', [`${dir}/a`])).trim())).toBe(4 * MiB);
      },
      120_000,
    );

    fuseTest(
      "partial overwrite inside a file changes exactly that range",
      async () => {
        const dir = `${s.mnt}/rewrite`;
        await shOk('mkdir "$1"', [dir]);
        const f = `${dir}/f`;
        const base = await fsopOk("pwrite_pattern", f, 0, 300_000, "base");
        const patch = await fsopOk("pwrite_pattern", f, 5000, 10_000, "patch");
        await dropCaches();
        expect((await fsopOk("pread_sha", f, 5000, 10_000)).sha256).toBe(patch.sha256);
        const head = await fsopOk("pread_sha", f, 0, 5000);
        expect(head.sha256).toBe((await fsopOk("pattern_sha", 5000, "base")).sha256);
        expect((await fsopOk("stat", f)).size).toBe(300_000);
        expect(base.sha256).not.toBe(patch.sha256);
      },
      60_000,
    );

    fuseTest("appends with >> accumulate", async () => {
      const dir = `${s.mnt}/append`;
      await shOk('mkdir "$1" && for i in 1 2 3 4 5; do echo "line $i" >> "$1/log"; done', [dir]);
      expect(await shOk('cat "$1/log"', [dir])).toBe("line 1\nline 2\nline 3\nline 4\nline 5\n");
    });

    fuseTest(
      "a write beyond EOF leaves a zero-filled gap",
      async () => {
        const dir = `${s.mnt}/gap`;
        await shOk('mkdir "$1"', [dir]);
        const f = `${dir}/f`;
        await fsopOk("pwrite_pattern", f, 0, 100, "a");
        await fsopOk("pwrite_pattern", f, 200_000, 100, "b");
        await dropCaches();
        const st = await fsopOk("stat", f);
        expect(st.size).toBe(200_100);
        const gap = await fsopOk("pread_sha", f, 100, 199_900);
        expect(gap.size).toBe(199_900);
        expect(gap.allzero).toBe(true);
      },
      60_000,
    );
  });
}
