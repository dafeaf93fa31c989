// fuse-uring: FUSE filesystems in TypeScript over FUSE-over-io_uring (classic /dev/fuse as
// fallback). See README.md for the API tour.

export { mount, Mount, type MountOptions, type MountStats } from "./mount.ts";
export { FuseError, Errno, errnoName, type ErrnoName } from "./fs/errors.ts";
export type * from "./fs/types.ts";
export { S_IFMT, S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK } from "./fs/types.ts";
export { MemFS, memfs } from "./fs/memfs.ts";
export { ReloadError, type ReloadHook, type ReloadReport } from "./reload/swap.ts";
export { mountScript, watchScript, ScriptWatcher, type WatchOptions, type MountScriptOptions } from "./reload/watch.ts";
export { Session, type SessionOptions, type SessionStats, type TransportChoice } from "./session/session.ts";
export { detach as unmountPath, isMounted, type VfsOptions } from "./mountpoint.ts";
export { tree, file, dir, symlink, type TreeValue, type TreeOptions, type FileSpec, type FileOptions, type FileSource, type DirSpec, type DirEntries, type LinkSpec } from "./tree.ts";
export { paths, PathFS, opened, backed, type Backed, type BackedOptions, type BackingSource, toInodeFS, attachMount, invalidatePath, invalidateEntryPath, type PathHandlers, type PathFSOptions, type StatLike, type DirEntryLike, type Content, type TimeLike, type FileType, type OpenOptions, type Opened, type StatfsLike, type Filesystem } from "./path/index.ts";
export { loadScript, serve, ScriptError, type ScriptContext } from "./script.ts";
export { failStop, FailStopError } from "./shared/fail-stop.ts";
// Names are bytes: undecodable bytes are lone surrogates U+DC80–U+DCFF (Python's os.fsdecode).
export { nameToBytes as nameBytes, nameToBytes as fsencode, bytesToName as fsdecode } from "./protocol/names.ts";
