// Where the worker modules of the built-in filesystems' copies are (CopiesPlan.module of memfs and
// the passthrough, `--workers N`/auto). Only their paths: this module imports neither of them, so
// memfs.ts and passthrough.ts can name their own worker module without an import circle. How a
// worker of the standalone binary imports them instead of loading them from disk is the app's
// business (lib/embedded-copies.ts).
//
// From a checkout or a package, a worker loads them from disk like any script (lib/script.ts).

import { existsSync } from "node:fs";

export type BuiltinCopy = "memfs" | "passthrough";

/** True inside the standalone binary: this module was bundled into its embedded file system. */
export const EMBEDDED = import.meta.url.includes("/$bunfs/");

/** Relative to this file; in the binary, the name it would have there (what error messages show). */
const RELATIVE: Record<BuiltinCopy, string> = { memfs: "./memfs-copy.ts", passthrough: "./passthrough/copy.ts" };

/** The path that names the worker module of `name` (whether or not a file is there). */
export function builtinCopyPath(name: BuiltinCopy): string {
  return EMBEDDED ? `/$bunfs/root/lib/fs/${RELATIVE[name].slice(2)}` : new URL(RELATIVE[name], import.meta.url).pathname;
}

/**
 * The module a worker loads for a copy of `name`, or null where none can be loaded: the library
 * bundled into some other program (`bun build` without --compile) has no file next to it.
 */
export function builtinCopyModule(name: BuiltinCopy): string | null {
  const path = builtinCopyPath(name);
  return EMBEDDED || existsSync(path) ? path : null;
}
