// How a worker of the standalone binary gets the built-in filesystems' copy modules
// (lib/fs/builtin-copies.ts names them; memfs-copy.ts and passthrough/copy.ts).
//
// In the standalone binary (scripts/compile.sh, `bun build --compile`) there is no file to load:
// the script loader reads modules from disk. They are not extra entry points of the binary
// either: every entry point of `bun build --compile` is a bundle of its own with its own copy of
// each module it imports (a second FuseError class the session's `instanceof` would not know, a
// native.ts without the shim path the worker set), so a worker imports them from its own bundle
// instead, through the static import() specifiers below (bundled into lib/worker-main.ts).
//
// App layer: it imports the copy modules, which import the filesystems, which import
// builtin-copies.ts; so this part cannot live in lib/fs/ without an import circle.

import { builtinCopyPath, EMBEDDED } from "./fs/builtin-copies.ts";

/** In the standalone binary: the import of a built-in copy module named by builtinCopyModule(). */
export function embeddedCopyModule(path: string): (() => Promise<Record<string, unknown>>) | null {
  if (!EMBEDDED) return null;
  // Static specifiers, so that the bundler puts both modules into the importing bundle.
  if (path === builtinCopyPath("memfs")) return () => import("./fs/memfs-copy.ts");
  if (path === builtinCopyPath("passthrough")) return () => import("./fs/passthrough/copy.ts");
  return null;
}
