// Entry point of the standalone binary: `npm run compile` (scripts/compile.sh) puts this
// machine's prebuilt shim at dist/shim/ and builds dist/fuse-uring from here. The shim is
// embedded in the executable; on the first native call it is copied to a directory it can be
// loaded from (lib/shim-location.ts). Filesystem scripts that import "fuse-uring" get the
// embedded library (bin/self-module.ts, registered by the mount command).

// @ts-ignore: a file import (Bun embeds the file and gives its $bunfs path)
import embeddedShim from "../dist/shim/libfuse_uring_shim.so" with { type: "file" };
import { setShimResolver } from "../lib/native.ts";
import { extractShim } from "../lib/shim-location.ts";

setShimResolver(() => extractShim(embeddedShim as unknown as string));
await import("./fuse-uring.ts");
