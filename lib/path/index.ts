// The path-handler API (see types.ts) and the conversions mount() uses.
export { PathFS, paths, isPathFS, splitPath, type Notifier } from "./pathfs.ts";
export { opened, isOpened, backed, isBacked, type Backed, type BackedOptions, type BackingSource, type PathHandlers, type PathFSOptions, type StatLike, type DirEntryLike, type Content, type TimeLike, type FileType, type OpenOptions, type Opened, type StatfsLike } from "./types.ts";
export { toInodeFS, attachMount, invalidatePath, invalidateEntryPath, type Filesystem, type MountLike } from "./convert.ts";
