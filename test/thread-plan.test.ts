// lib/threads/plan.ts: the one module that decides how many threads serve a mount, what they
// run, and which queues and CPUs each owns.
import { describe, expect, test } from "bun:test";
import type { CopiesPlan, InodeFS } from "../lib/session/filesystem.ts";
import { declaredThreads, planThreads, queueBlocks, servesAsCopy } from "../lib/threads/plan.ts";

const source = { path: "/x/script.ts", args: [] };
const quiet = () => {};
const plan = (fs: InodeFS, requested: number | "auto", allowed: number[], possibleCpus = 4, src: typeof source | null = source) =>
  planThreads({ fs, requested, possibleCpus, allowed, source: src, log: quiet });
const shared: CopiesPlan = { module: "/x/copy.ts", shared: { k: 1 }, sharedState: true };

describe("queue blocks", () => {
  test("contiguous CPU blocks; every queue has an owner", () => {
    expect(queueBlocks(2, 4, [0, 1, 2, 3])).toEqual({ queues: [[0, 1], [2, 3]], cpus: [[0, 1], [2, 3]] });
    expect(queueBlocks(3, 4, [0, 1, 2, 3])).toEqual({ queues: [[0, 1], [2], [3]], cpus: [[0, 1], [2], [3]] });
  });
  test("taskset: workers only on allowed CPUs; a disallowed CPU's queue goes to the block before it (worker 0 below the first)", () => {
    expect(queueBlocks(2, 8, [2, 3, 6, 7])).toEqual({ queues: [[0, 1, 2, 3, 4, 5], [6, 7]], cpus: [[2, 3], [6, 7]] });
    expect(queueBlocks(2, 4, [1, 3])).toEqual({ queues: [[0, 1, 2], [3]], cpus: [[1], [3]] });
  });
  test("more workers than allowed CPUs: queues split evenly, a worker with no allowed CPU of its own may use any allowed one", () => {
    expect(queueBlocks(2, 2, [0])).toEqual({ queues: [[0], [1]], cpus: [[0], [0]] });
  });
});

describe("the plan", () => {
  test("declarations: threads wins; copies() is shared state; replicable is stateless; nothing is single", () => {
    expect(declaredThreads({})).toBe("single");
    expect(declaredThreads({ replicable: true })).toBe("stateless");
    expect(typeof declaredThreads({ copies: () => shared })).toBe("object");
    expect(declaredThreads({ threads: "single", replicable: true })).toBe("single");
    expect(servesAsCopy({ threads: "stateless" })).toBe(true);
    expect(servesAsCopy({ replicable: true })).toBe(true);
    expect(servesAsCopy({ copies: () => shared })).toBe(false);
  });
  test("auto: a worker per allowed CPU (at most 8) for copies, one thread otherwise", () => {
    expect(plan({ threads: "stateless" }, "auto", [0, 1, 2, 3])).toMatchObject({ mode: "copies", workers: 4, module: source, sharedState: false });
    expect(plan({ threads: "stateless" }, "auto", [0])).toMatchObject({ mode: "single", workers: 0 });
    expect(plan({ threads: "stateless" }, "auto", [1, 2], 4)).toMatchObject({ mode: "copies", workers: 2, queues: [[0, 1], [2, 3]], cpus: [[1], [2]] });
    expect(plan({}, "auto", [0, 1, 2, 3])).toMatchObject({ mode: "single" });
    expect(plan({ threads: "stateless" }, "auto", [0, 1, 2, 3], 4, null)).toMatchObject({ mode: "single" });
    expect(plan({ replicable: true }, "auto", Array.from({ length: 16 }, (_, i) => i), 16).workers).toBe(8);
  });
  test("shared state: the module shared() names, FORGET once; null or a throw: forwarding when asked for, single on auto", () => {
    let calls = 0;
    const fs: InodeFS = { threads: { shared: () => (calls++, shared) } };
    expect(plan(fs, "auto", [0, 1])).toMatchObject({ mode: "copies", workers: 2, module: { path: "/x/copy.ts", args: [], shared: { k: 1 } }, sharedState: true });
    expect(calls).toBe(1);
    expect(plan({ copies: () => null }, 2, [0, 1])).toMatchObject({ mode: "forwarding", workers: 2, module: null });
    expect(plan({ copies: () => null }, "auto", [0, 1])).toMatchObject({ mode: "single" });
    const logged: string[] = [];
    const p = planThreads({ fs: { copies: () => { throw new Error("no"); } }, requested: 2, possibleCpus: 2, allowed: [0, 1], source: null, log: (l) => logged.push(l) });
    expect(p.mode).toBe("forwarding");
    expect(logged[0]).toContain("cannot run as copies (no)");
  });
  test("explicit counts: 1 is single; never more workers than queues", () => {
    expect(plan({ threads: "stateless" }, 1, [0, 1])).toMatchObject({ mode: "single" });
    expect(plan({}, 2, [0, 1], 2)).toMatchObject({ mode: "forwarding", workers: 2 });
    expect(plan({ threads: "stateless" }, 6, [0, 1], 2).workers).toBe(2);
  });
});
