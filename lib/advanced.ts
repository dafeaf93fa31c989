// "fuse-uring/advanced": the engine's parts, for tools built on fuse-uring (the CLI, test
// harnesses, embedders that run their own Session). Less stable than the main entry: names and
// signatures here may change in a minor release. Filesystem authors need only "fuse-uring".

export { Session, type SessionOptions, type SessionStats, type TransportChoice } from "./session/session.ts";
export { Dispatcher, type DispatchOptions } from "./session/dispatch.ts";
export { PathFS, isPathFS, toInodeFS, attachMount, invalidatePath, invalidateEntryPath, type Notifier, type MountLike } from "./path/index.ts";
export { toPositional, isNamedArgs, deprecation, REORDERED } from "./path/args.ts";
export { loadScript, ScriptError, type LoadScriptOptions } from "./script.ts";
export { watchScript, ScriptWatcher } from "./reload/watch.ts";
export { makeAttr, nowTimespec, timespecFromMs } from "./fs/attr.ts";
export { Op, opName, InitFlag, FATTR, FOPEN } from "./protocol/constants.ts";
