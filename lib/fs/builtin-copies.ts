// The worker modules of the built-in filesystems' copies (CopiesPlan.module of memfs and the
// passthrough, `--workers N`/auto), and how a worker gets them in the standalone binary.
//
// From a checkout or a package, a worker loads them from disk like any script (lib/script.ts).
// In the standalone binary (scripts/compile.sh, `bun build --compile`) there is no file to load:
// the script loader reads modules from disk. They are not extra entry points of the binary
// either: every entry point of `bun build --compile` is a bundle of its own with its own copy of
// each module it imports (a second FuseError class the session's `instanceof` would not know, a
// native.ts without the shim path the worker set), so a worker imports them from its own bundle
// instead, through the static import() specifiers below (bundled into lib/worker-main.ts).

import { existsSync } from "node:fs";

export type BuiltinCopy = "memfs" | "passthrough";

/** True inside the standalone binary: this module was bundled into its embedded file system. */
const EMBEDDED = import.meta.url.includes("/$bunfs/");

/** Relative to this file; in the binary, the name it would have there (what error messages show). */
const RELATIVE: Record<BuiltinCopy, string> = { memfs: "./memfs-copy.ts", passthrough: "./passthrough/copy.ts" };

function pathOf(name: BuiltinCopy): string {
  return EMBEDDED ? `/$bunfs/root/lib/fs/${RELATIVE[name].slice(2)}` : new URL(RELATIVE[name], import.meta.url).pathname;
}

/**
 * The module a worker loads for a copy of `name`, or null where none can be loaded: the library
 * bundled into some other program (`bun build` without --compile) has no file next to it.
 */
export function builtinCopyModule(name: BuiltinCopy): string | null {
  const path = pathOf(name);
  return EMBEDDED || existsSync(path) ? path : null;
}

/** In the standalone binary: the import of a built-in copy module named by builtinCopyModule(). */
export function embeddedCopyModule(path: string): (() => Promise<Record<string, unknown>>) | null {
  if (!EMBEDDED) return null;
  // Static specifiers, so that the bundler puts both modules into the importing bundle.
  if (path === pathOf("memfs")) return () => import("./memfs-copy.ts");
  if (path === pathOf("passthrough")) return () => import("./passthrough/copy.ts");
  return null;
}
