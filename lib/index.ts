// fuse-uring: FUSE filesystems in TypeScript over FUSE-over-io_uring (classic /dev/fuse as
// fallback). See README.md for the API tour.

export { mount, Mount, type MountOptions, type MountStats } from "./mount.ts";
export { FuseError, Errno, errnoName, type ErrnoName } from "./fs/errors.ts";
export type * from "./fs/types.ts";
export { S_IFMT, S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK } from "./fs/types.ts";
export { MemFS, memfs } from "./fs/memfs.ts";
export { Session, type SessionOptions, type SessionStats, type TransportChoice } from "./session/session.ts";
export { detach as unmountPath, isMounted } from "./mountpoint.ts";
