// Makes `import … from "fuse-uring"` inside a filesystem script (fuse-uring mount ./myfs.ts MNT)
// resolve to the library this CLI runs on: in the standalone binary (where no node_modules
// exist), under bunx (the package is not in the script's project), and in a checkout. One copy
// of the library means `instanceof FuseError` and friends work across the script boundary.
// Registered as a virtual module; loaded lazily, the first time a script imports it.

let registered = false;

export function registerSelfModule(): void {
  if (registered) return;
  registered = true;
  Bun.plugin({
    name: "fuse-uring self module",
    setup(build) {
      build.module("fuse-uring", () => ({ exports: { ...require("./index.ts") }, loader: "object" }));
      build.module("fuse-uring/advanced", () => ({ exports: { ...require("./advanced.ts") }, loader: "object" }));
      build.module("fuse-uring/testing", () => ({ exports: { ...require("./testing/index.ts") }, loader: "object" }));
    },
  });
}
