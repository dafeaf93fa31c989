// The module each worker loads for its view of the built-in memfs (`--memfs --workers N`):
// MemFS.copies() names it, and its `shared` (every SharedArrayBuffer of the state, memfs-state.ts)
// arrives here through ScriptContext.shared.
import type { ScriptContext } from "../session/filesystem.ts";
import { MemFS, type MemShared } from "./memfs.ts";

export default function memfsCopy(ctx: ScriptContext): MemFS {
  return MemFS.view(ctx.shared as MemShared);
}

/**
 * A hot reload (`--watch`) re-evaluates this module in every worker: keep the view (the state is
 * the shared one either way).
 */
export function reload(old: MemFS): MemFS {
  return old;
}
