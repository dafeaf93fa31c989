// Formatting helpers of the --debug trace (lib/session/trace.ts); the trace itself is tested
// through the kernel in test/integration/conventions.test.ts.
import { describe, expect, test } from "bun:test";
import { openFlagNames, quoteName } from "../lib/session/trace.ts";

describe("trace formatting", () => {
  test("open flags by name", () => {
    expect(openFlagNames(0)).toBe("O_RDONLY");
    expect(openFlagNames(0o1 | 0o100 | 0o1000)).toBe("O_WRONLY|O_CREAT|O_TRUNC");
    expect(openFlagNames(0o2 | 0o2000 | 0o4010000)).toBe("O_RDWR|O_APPEND|O_SYNC");
    expect(openFlagNames(0o10000)).toBe("O_RDONLY|O_DSYNC");
    expect(openFlagNames(0o200000 | 0x80000000)).toBe("O_RDONLY|O_DIRECTORY|0x80000000");
  });

  test("names quoted; bytes that are not UTF-8 shown as \\xNN", () => {
    expect(quoteName(Buffer.from("hello.txt"))).toBe('"hello.txt"');
    expect(quoteName(Buffer.from("grüße"))).toBe('"grüße"');
    expect(quoteName(new Uint8Array([0x61, 0xff, 0x22, 0x62]))).toBe('"a\\xff\\x22b"');
  });
});
