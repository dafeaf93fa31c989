// Code conventions that nothing else checks (issue 29 item 6, "Layers point one way"): the
// import graph of lib/ and bin/ has no circles and no import runs back up the layers
// (scripts/import-graph.ts; docs/ARCHITECTURE.md has the layers). No mount, no root.
import { expect, test } from "bun:test";
import { importGraph, layer } from "../scripts/import-graph.ts";
import * as facadeErrors from "../lib/fs/errors.ts";
import * as facadeTypes from "../lib/fs/types.ts";
import * as protocolErrors from "../lib/protocol/errors.ts";
import * as structs from "../lib/protocol/structs.ts";
import * as api from "../lib/index.ts";

const graph = importGraph();

test("the scan sees the code: every layer has files and the engine's imports are found", () => {
  expect(graph.files).toContain("lib/session/dispatch.ts");
  expect(graph.edges.length).toBeGreaterThan(300);
  for (const l of [0, 1, 2, 3, 4, 5, 6]) expect(graph.files.some((f) => layer(f) === l)).toBe(true);
  // A known downward arrow (engine → protocol) is seen, type-only imports included.
  expect(graph.edges).toContainEqual({ from: "lib/session/dispatch.ts", to: "lib/session/filesystem.ts", typeOnly: true });
  expect(graph.edges.some((e) => e.from === "lib/session/dispatch.ts" && e.to === "lib/protocol/errors.ts")).toBe(true);
});

test("no import circles in lib/ and bin/", () => {
  expect(graph.circles.map((c) => c.join(" <-> "))).toEqual([]);
});

test("no import runs back up the layers (at most 0; issue 29 allows 4)", () => {
  // A new one fails here with its name: move what the lower layer needs down, or invert it.
  expect(graph.up.map((e) => `${e.from} -> ${e.to}${e.typeOnly ? " (type)" : ""}`)).toEqual([]);
});

test("lib/fs/errors.ts and lib/fs/types.ts still give users the same objects (re-exports of the moved files)", () => {
  expect(facadeErrors.FuseError).toBe(protocolErrors.FuseError);
  expect(api.FuseError).toBe(protocolErrors.FuseError);
  expect(facadeErrors.Errno).toBe(protocolErrors.Errno);
  expect(facadeErrors.errnoOf(new api.FuseError("ENOENT"))).toBe(2);
  expect(facadeTypes.S_IFDIR).toBe(structs.S_IFDIR);
  expect(api.S_IFREG).toBe(0o100000);
});
