// fuse-uring: FUSE filesystems in TypeScript over FUSE-over-io_uring (classic /dev/fuse as
// fallback). This is the public face: what a filesystem author needs, stable across releases.
// docs/API.md is the page to read; README.md has the tour. The engine's internals (Session,
// PathFS, the script loader …) are in "fuse-uring/advanced"; a mount-free test harness that
// drives a filesystem through the real dispatcher is "fuse-uring/testing".

export { mount, Mount, type MountOptions, type MountStats } from "./mount.ts";
export { FuseError, Errno, errnoName, type ErrnoName } from "./fs/errors.ts";
// The inode API (InodeFS, RequestContext, Attr, Entry, …) and its builders.
export type * from "./fs/types.ts";
export { S_IFMT, S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK } from "./fs/types.ts";
export { attr, entry, negativeEntry, attrReply, type AttrInit, type EntryInit } from "./api/builders.ts";
export {
  defineInodeFs, type NamedInodeFS, type InodeReadArgs, type InodeWriteArgs, type InodeCreateArgs, type InodeMknodArgs, type InodeMkdirArgs,
  type InodeRenameArgs, type InodeFallocateArgs, type InodeLseekArgs, type InodeSetxattrArgs, type InodeReaddirArgs, type InodeCopyArgs, type FileRange,
} from "./fs/named.ts";
// Flag constants (O_*, RENAME_*, XATTR_*, FALLOC_*, SEEK_*, R_OK …) and their decoders.
export * from "./api/constants.ts";
export { MemFS, memfs } from "./fs/memfs.ts";
// Path handlers: defineFs() and the one argument order, (path, ctx) or (path, args, ctx).
export { defineFs, type DefinedFs, type PathHandlers, type LegacyPathHandlers } from "./path/args.ts";
export type {
  OpenArgs, ReadArgs, WriteArgs, WriteFileArgs, HandleArgs, FsyncArgs, CreateArgs, MknodArgs, ModeArgs, NewPathArgs, SymlinkArgs,
  TruncateArgs, ChownArgs, UtimensArgs, AccessArgs, XattrArgs, SetxattrArgs,
} from "./path/args.ts";
export { paths, opened, backed, type Backed, type BackedOptions, type BackingSource, type PathFSOptions, type StatLike, type DirEntryLike, type Content, type TimeLike, type FileType, type OpenOptions, type Opened, type StatfsLike, type Filesystem } from "./path/index.ts";
export { tree, file, dir, symlink, type TreeValue, type TreeOptions, type FileSpec, type FileOptions, type FileSource, type DirSpec, type DirEntries, type LinkSpec } from "./tree.ts";
// Running: a script's default-export function receives a ScriptContext; serve() mounts until
// a signal; mountScript() is `fuse-uring mount` (with --watch) as a function.
export { serve, type ScriptContext } from "./script.ts";
export { mountScript, type ScriptWatcher, type WatchOptions, type MountScriptOptions } from "./reload/watch.ts";
export { ReloadError, type ReloadHook, type ReloadReport } from "./reload/swap.ts";
export { detach as unmountPath, isMounted, type VfsOptions } from "./mountpoint.ts";
export { failStop, FailStopError } from "./shared/fail-stop.ts";
// Names are bytes: undecodable bytes are lone surrogates U+DC80–U+DCFF (Python's os.fsdecode).
export { nameToBytes as nameBytes, nameToBytes as fsencode, bytesToName as fsdecode } from "./protocol/names.ts";
