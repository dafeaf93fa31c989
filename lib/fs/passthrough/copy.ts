// The worker module of the passthrough's copies mode (`--passthrough SRC --workers N`, see
// PassthroughFS.copies and passthrough/shared.ts): each worker thread loads it and gets its own
// PassthroughFS over the node table, descriptor cache and directory handles that the main
// thread's instance shares through SharedArrayBuffers. Descriptors are process-wide, so the
// copy uses the root and node descriptors the other threads opened.

import type { ScriptContext } from "../../session/filesystem.ts";
import type { InodeFS } from "../types.ts";
import { PassthroughFS } from "../passthrough.ts";
import type { PassthroughShare } from "./shared.ts";

export default function passthroughCopy(ctx: ScriptContext): InodeFS {
  const share = ctx.shared as PassthroughShare | undefined;
  if (!share || !(share.meta instanceof SharedArrayBuffer)) throw new Error("passthrough copy: no shared state (this module is loaded by --workers N)");
  const fs = PassthroughFS.fromShare(share) as PassthroughFS & { replicable: boolean };
  // Every copy answers alike: node ids and file handles come from the shared table.
  fs.replicable = true;
  return fs;
}
