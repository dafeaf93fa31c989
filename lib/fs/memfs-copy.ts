// The module each worker loads for its copy of the built-in memfs (`--memfs --workers N`):
// MemFS.copies() names it, and its `shared` (the log and the page store, SharedArrayBuffers)
// arrives here through ScriptContext.shared. See memfs-shared.ts.
import type { ScriptContext } from "../script.ts";
import { MemFS, type MemShared } from "./memfs.ts";

export default function memfsCopy(ctx: ScriptContext): MemFS {
  return MemFS.replica(ctx.shared as MemShared);
}

/**
 * A hot reload (`--watch`) re-evaluates this module in every worker: keep the copy (its state is
 * the shared one; a second copy would replay the whole log and leave the first registered).
 */
export function reload(old: MemFS): MemFS {
  return old;
}
