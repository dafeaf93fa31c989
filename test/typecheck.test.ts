// Strict TypeScript across lib/, bin/, test/, bench/ and examples/ (tsc --noEmit).
import { expect, test } from "bun:test";

test("tsc --noEmit passes", () => {
  const root = `${import.meta.dir}/..`;
  const r = Bun.spawnSync([`${root}/node_modules/.bin/tsc`, "--noEmit", "-p", root], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const out = r.stdout.toString() + r.stderr.toString();
  expect(out).toBe("");
  expect(r.exitCode).toBe(0);
}, 180_000);
