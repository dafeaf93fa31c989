// Integration-test harness. Typical use in test/integration/*.test.ts:
//
//   for (const transport of TRANSPORTS) {
//     describe(`memfs over ${transport}`, () => {
//       transportHooks(transport);          // uring: enable_uring=Y in beforeAll, restored in afterAll
//       cleanupAfterEach();                 // kill per-test daemons, abort + lazily unmount their mounts
//       const s = sharedDaemon(["--transport", transport]);   // one CLI daemon for the block
//       fuseTest("name", async () => { await shOk('echo x > "$1/f"', [s.mnt]); }, 60_000);
//     });
//   }
//
// Rules: the mount is driven only from child processes (run/sh/fsop); fuseTest aborts the FUSE
// connections shortly before its timeout so a wedged daemon fails the test instead of leaving
// D-state processes; run() kills the child's whole process group on timeout and aborts our
// connections if it still does not die.
export * from "./env.ts";
export * from "./run.ts";
export * from "./mounts.ts";
export * from "./daemon.ts";
export * from "./fixtures.ts";
export * from "./kernel.ts";
