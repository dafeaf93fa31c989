// Entry point of the standalone binary (`npm run compile` → dist/fuse-uring, see
// scripts/compile.sh). The shim is embedded in the executable; on the first native call it is
// copied to a directory it can be loaded from (lib/shim-location.ts). Filesystem scripts that
// import "fuse-uring" get the embedded library (bin/self-module.ts).

// @ts-ignore: a file import (Bun embeds the file and gives its $bunfs path)
import embeddedShim from "../zig-out/lib/libfuse_uring_shim.so" with { type: "file" };
import { setShimResolver } from "../lib/native.ts";
import { extractShim } from "../lib/shim-location.ts";

setShimResolver(() => extractShim(embeddedShim as unknown as string));
process.env.FUSE_URING_STANDALONE = "1";
await import("./fuse-uring.ts");
