// The package version, from package.json (embedded by `bun build --compile` too).
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;

export function versionLine(): string {
  return `fuse-uring ${VERSION} (bun ${Bun.version}, ${process.platform}-${process.arch})`;
}
