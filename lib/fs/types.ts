// The filesystem API's types, as users import them (lib/index.ts re-exports this file; scripts
// and examples import it directly). Defined where the layer that owns them is: the FUSE structs
// and mode bits in the protocol (lib/protocol/structs.ts), the inode API the engine dispatches
// to in the engine (lib/session/filesystem.ts). A re-export, so nothing below imports upward.
export type * from "../protocol/structs.ts";
export type * from "../session/filesystem.ts";
export { S_IFMT, S_IFSOCK, S_IFLNK, S_IFREG, S_IFBLK, S_IFDIR, S_IFCHR, S_IFIFO } from "../protocol/structs.ts";
