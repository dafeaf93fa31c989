// What the running kernel offers in FUSE INIT, as a daemon sees it (`--debug` prints the line
// `fuse: INIT kernel 7.N offered [NAMES…]`). Feature tests gate on these bits — never on a
// kernel version string:  if ((await kernelInitOffer()).offered.has("HAS_IO_URING_BUFPOOL")) …
import { getEnableUring, setEnableUring } from "./fixtures.ts";
import { startDaemon } from "./daemon.ts";
import type { InitFlagName } from "../../lib/protocol/constants.ts";

export interface InitOffer {
  major: number;
  minor: number;
  offered: Set<InitFlagName>;
  /** The daemon's INIT line, for messages. */
  line: string;
}

/** The bits the FUSE_URING_GUEST harness says its kernel must offer (test/vm/guest.env). */
export function guestExpectedOffer(): InitFlagName[] {
  return (process.env.FUSE_URING_GUEST_EXPECT_OFFER ?? "").split(/[ ,]+/).filter(Boolean) as InitFlagName[];
}

const INIT_LINE = /^fuse: INIT kernel (\d+)\.(\d+) offered \[([^\]]*)\]$/m;

/** Parse the `--debug` INIT line out of a daemon's stderr. */
export function parseInitOffer(stderr: string): InitOffer {
  const m = INIT_LINE.exec(stderr);
  if (!m) throw new Error(`no "fuse: INIT kernel … offered […]" line in the daemon's --debug output:\n${stderr.slice(-3000)}`);
  return { major: Number(m[1]), minor: Number(m[2]), offered: new Set((m[3] ?? "").split(" ").filter(Boolean) as InitFlagName[]), line: m[0] };
}

let cached: Promise<InitOffer> | undefined;

/**
 * Mount memfs once (per test process) with `--debug`, enable_uring=Y as root (the kernel offers
 * FUSE_OVER_IO_URING only then), and return its INIT offer. The value is restored afterwards.
 */
export function kernelInitOffer(): Promise<InitOffer> {
  cached ??= (async () => {
    const old = process.getuid?.() === 0 ? getEnableUring() : undefined;
    if (old === "N") setEnableUring("Y");
    try {
      const d = await startDaemon(["--debug"], { readyTimeoutMs: 60_000 });
      try {
        return parseInitOffer(d.stderr());
      } finally {
        await d.stop("SIGTERM", 30_000);
      }
    } finally {
      if (old === "N") setEnableUring("N");
    }
  })();
  return cached;
}
