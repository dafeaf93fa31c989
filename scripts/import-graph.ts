// The import graph of lib/ and bin/: circles (strongly connected groups of files) and arrows
// that run back up the layers (docs/ARCHITECTURE.md). Type-only imports count too (they tie
// the files together just the same), and are marked.
//   bun scripts/import-graph.ts [--list]
// test/conventions.test.ts holds the numbers (importGraph() below) so they cannot grow back.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..");

/** Layer of a file: an arrow to a higher layer runs back up. */
export function layer(f: string): number {
  if (f === "lib/native.ts" || f === "lib/shim-location.ts" || f === "lib/knobs.ts") return 0;
  if (f.startsWith("lib/protocol/") || f.startsWith("lib/shared/")) return 1;
  if (f.startsWith("lib/transport/") || f === "lib/mountpoint.ts") return 2;
  if (f.startsWith("lib/session/") || f.startsWith("lib/threads/")) return 3;
  if (f.startsWith("lib/fs/") || f.startsWith("lib/path/") || f === "lib/tree.ts") return 4;
  if (f.startsWith("lib/")) return 5; // app: mount.ts, script.ts, reload/, index.ts
  return 6; // bin/
}

export type Edge = { from: string; to: string; typeOnly: boolean };
export interface ImportGraph {
  files: string[];
  edges: Edge[];
  /** Strongly connected groups of more than one file, each sorted. */
  circles: string[][];
  /** Imports from a file to one in a higher layer. */
  up: Edge[];
}

/** The import graph of lib/ and bin/ under `root` (the checkout). */
export function importGraph(root = ROOT): ImportGraph {
  const files: string[] = [];
  function walk(d: string): void {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith(".ts")) files.push(relative(root, p));
    }
  }
  walk(join(root, "lib"));
  walk(join(root, "bin"));

  const edges: Edge[] = [];
  const re = /^\s*(import|export)\s+(type\s+)?[^"';]*?from\s+["'](\.[^"']+)["']|import\(\s*["'](\.[^"']+)["']\s*\)/gm;
  for (const f of files) {
    const text = readFileSync(join(root, f), "utf8");
    for (const m of text.matchAll(re)) {
      const spec = m[3] ?? m[4]!;
      const to = relative(root, resolve(root, dirname(f), spec));
      if (!existsSync(join(root, to)) || !to.endsWith(".ts")) continue;
      edges.push({ from: f, to, typeOnly: Boolean(m[2]) });
    }
  }

  // Tarjan's strongly connected components.
  const adj = new Map<string, string[]>();
  for (const e of edges) (adj.get(e.from) ?? adj.set(e.from, []).get(e.from)!).push(e.to);
  let index = 0;
  const idx = new Map<string, number>(), low = new Map<string, number>(), on = new Set<string>(), stack: string[] = [];
  const circles: string[][] = [];
  function strong(v: string): void {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of adj.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        c.push(w);
      } while (w !== v);
      if (c.length > 1) circles.push(c.sort());
    }
  }
  for (const f of files) if (!idx.has(f)) strong(f);

  const up = edges.filter((e) => layer(e.to) > layer(e.from));
  return { files, edges, circles, up };
}

if (import.meta.main) {
  const { files, edges, circles, up } = importGraph();
  console.log(`${files.length} files, ${edges.length} imports`);
  console.log(`circles: ${circles.length}`);
  for (const c of circles) console.log(`  ${c.join(" ↔ ")}`);
  console.log(`arrows back up the layers: ${up.length}`);
  if (process.argv.includes("--list")) for (const e of up) console.log(`  ${e.from} → ${e.to}${e.typeOnly ? " (type)" : ""}`);
}
