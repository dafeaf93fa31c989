// `fuse-uring unmount MNT`: works whether the daemon is alive, dead (ENOTCONN) or gone.

import { detach, isMounted } from "../../lib/mountpoint.ts";

export function unmount(mountpoint: string): number {
  if (!isMounted(mountpoint)) {
    process.stderr.write(`fuse-uring: ${mountpoint} is not mounted\n`);
    return 1;
  }
  const err = detach(mountpoint);
  if (err && isMounted(mountpoint)) {
    process.stderr.write(`fuse-uring: ${err}\n`);
    return 1;
  }
  return 0;
}
