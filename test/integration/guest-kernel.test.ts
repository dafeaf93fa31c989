// The running kernel's FUSE INIT offer (the `--debug` INIT line of a memfs mount).
// Everywhere: a root mount with enable_uring=Y is offered FUSE_OVER_IO_URING and runs on the
// ring, and the offer is consistent with the protocol minor it comes with.
// In the Linux 7.3 guest (scripts/test-guest.sh, FUSE_URING_GUEST=1): the harness chose that
// kernel for what it offers and names the bits in FUSE_URING_GUEST_EXPECT_OFFER
// (test/vm/guest.env); each must be offered, so a guest that lost them fails here instead of
// the feature tests quietly taking their fallbacks (they gate on the same bits, never on a
// version string).
import { describe, expect } from "bun:test";
import {
  cleanupAfterEach,
  fuseTest,
  guestExpectedOffer,
  kernelInitOffer,
  shOk,
  startDaemon,
  withEnableUring,
} from "../helpers/index.ts";
import { InitFlag } from "../../lib/protocol/constants.ts";

const inGuest = process.env.FUSE_URING_GUEST === "1";

describe("the running kernel's INIT offer", () => {
  cleanupAfterEach();
  withEnableUring("Y");

  fuseTest("--debug prints the offer; FUSE_OVER_IO_URING is offered with enable_uring=Y and the mount runs on the ring", async () => {
    const offer = await kernelInitOffer();
    expect(offer.major, offer.line).toBe(7);
    expect(offer.offered.size, offer.line).toBeGreaterThan(10);
    for (const name of offer.offered) expect(InitFlag[name], `${name} in ${offer.line}`).toBeNumber();
    expect([...offer.offered], offer.line).toContain("OVER_IO_URING");
    const d = await startDaemon(["--transport", "uring", "--debug"]);
    expect(d.transport).toBe("uring");
    await shOk(`echo guest > "$1/f" && cat "$1/f"`, [d.mnt]);
    expect(await d.stop("SIGTERM")).toBe(0);
  }, 90_000);

  fuseTest("the offer matches its protocol minor and the daemon's buffer-pool line", async () => {
    const offer = await kernelInitOffer();
    // FUSE_HAS_IO_URING_BUFPOOL is protocol 7.46: a kernel offering it speaks 7.46 or later.
    if (offer.offered.has("HAS_IO_URING_BUFPOOL")) expect(offer.minor, offer.line).toBeGreaterThanOrEqual(46);
    const d = await startDaemon(["--transport", "uring", "--debug"]);
    const err = d.stderr();
    expect(await d.stop("SIGTERM")).toBe(0);
    // The daemon says whether the kernel offers pools; its words must agree with the bit.
    if (offer.offered.has("HAS_IO_URING_BUFPOOL")) expect(err).not.toMatch(/no io_uring buffer pools in this kernel/);
    else expect(err).toMatch(/no io_uring buffer pools in this kernel/);
  }, 90_000);

  if (inGuest) {
    fuseTest(`guest kernel offers what the harness expects: ${guestExpectedOffer().join(" ") || "(FUSE_URING_GUEST_EXPECT_OFFER unset)"}`, async () => {
      const want = guestExpectedOffer();
      expect(want.length, "FUSE_URING_GUEST_EXPECT_OFFER must name the bits the guest kernel offers (test/vm/guest.env)").toBeGreaterThan(0);
      const offer = await kernelInitOffer();
      for (const bit of want) expect([...offer.offered], `${bit} missing from ${offer.line}`).toContain(bit);
    }, 90_000);
  }
});
