// --transport auto|uring|classic against the kernel's enable_uring switch.
import { describe, expect, test } from "bun:test";
import { BUN, CLI, TRANSPORTS, cleanupAfterEach, fmt, fuseTest, isMounted, makeMountpoint, run, shOk, startDaemon, withEnableUring } from "../helpers/index.ts";

describe("enable_uring=N", () => {
  withEnableUring("N");
  cleanupAfterEach();

  fuseTest("--transport auto falls back to classic and says why (mentions enable_uring)", async () => {
    const d = await startDaemon(["--transport", "auto"]);
    expect(d.transport).toBe("classic");
    expect(d.stderr()).toContain("enable_uring");
    await shOk('echo fallback > "$1/f"', [d.mnt]);
    expect(await shOk('cat "$1/f"', [d.mnt])).toBe("fallback\n");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("default transport (no --transport) behaves like auto", async () => {
    const d = await startDaemon([]);
    expect(d.transport).toBe("classic");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("--transport uring fails with a non-zero exit and a message, leaving no mount", async () => {
    const mnt = makeMountpoint();
    const r = await run([BUN, CLI, "mount", "--memfs", mnt, "--transport", "uring"], { timeoutMs: 20_000 });
    expect(r.timedOut, fmt(r)).toBe(false);
    expect(r.code, fmt(r)).not.toBe(0);
    expect(r.code, fmt(r)).not.toBeNull();
    expect(r.stderr).not.toContain("fuse-uring: mounted");
    expect(r.stderr.toLowerCase()).toContain("uring");
    expect(r.stderr).toContain("enable_uring");
    expect(isMounted(mnt)).toBe(false);
  });

  fuseTest("--transport classic is unaffected", async () => {
    const d = await startDaemon(["--transport", "classic"]);
    expect(d.transport).toBe("classic");
    expect(await d.stop()).toBe(0);
  });
});

describe("enable_uring=Y", () => {
  if (!TRANSPORTS.includes("uring")) {
    test.skip("uring excluded by FUSE_URING_TRANSPORTS", () => {});
    return;
  }
  withEnableUring("Y");
  cleanupAfterEach();

  fuseTest("--transport auto picks uring", async () => {
    const d = await startDaemon(["--transport", "auto"]);
    expect(d.transport).toBe("uring");
    await shOk('echo ring > "$1/f"', [d.mnt]);
    expect(await shOk('cat "$1/f"', [d.mnt])).toBe("ring\n");
    expect(await d.stop()).toBe(0);
  });

  fuseTest("--transport classic stays classic even when io_uring is available", async () => {
    const d = await startDaemon(["--transport", "classic"]);
    expect(d.transport).toBe("classic");
    expect(await d.stop()).toBe(0);
  });
});
