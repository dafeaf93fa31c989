// bench/fs/burn.ts as a paths() script: `fuse-uring mount bench/fs/burn-paths.ts MNT --
// [--threads stateless|single] [--size BYTES] [--files N] [--burn-us US]`. Read-only files f.0 …
// f.(N-1) of BYTES zeros; every READ first does ~US µs of CPU work (default 50), so throughput
// is bound by handler CPU. The handlers keep no state, so with `--threads stateless` (the
// default) every CPU runs its own copy of this script over one shared node table; `--threads
// single` serves everything from one thread, for comparison.

import { paths } from "../../lib/index.ts";
import { calibrate, option as optionOf, spin } from "./burn.ts"; // the same busy loop

const option = (args: string[], name: string, fallback: number) => optionOf(args, name, fallback, "burn-paths.ts");

export default function burnPaths({ args = [] }: { args?: string[] }) {
  const t = args.indexOf("--threads");
  const threads = t >= 0 ? args[t + 1] : "stateless";
  if (threads !== "stateless" && threads !== "single") throw new Error(`burn-paths.ts: --threads stateless|single, got ${JSON.stringify(threads)}`);
  const size = option(args, "--size", 64 << 20);
  const files = option(args, "--files", 4);
  const rounds = Math.round(calibrate() * option(args, "--burn-us", 50));
  const zeros = new Uint8Array(1 << 20);
  const fileIndex = (path: string) => {
    const m = /^\/f\.(\d+)$/.exec(path);
    return m && Number(m[1]) < files ? Number(m[1]) : -1;
  };
  return paths(
    {
      getattr: (path) => (path === "/" ? { type: "dir" } : fileIndex(path) >= 0 ? { type: "file", size, mtime: 0 } : null),
      readdir: () => Array.from({ length: files }, (_, i) => `f.${i}`),
      read(_path, offset, length) {
        spin(rounds);
        return zeros.subarray(0, Math.max(0, Math.min(length, size - offset, zeros.length)));
      },
    },
    { threads },
  );
}
