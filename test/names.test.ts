// Names are bytes: the lossless bytes ↔ string scheme of lib/protocol/names.ts, checked byte by
// byte, and against Python's own os.fsdecode/os.fsencode (surrogateescape) for a corpus of random
// and adversarial byte strings.

import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { decodeName, encodeName, nameByteLength, nameToBytes, nameToCString, fsPath } from "../lib/protocol/names.ts";
import { fsdecode, fsencode, nameBytes } from "../lib/index.ts";
import { PYTHON } from "./helpers/env.ts";

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

function roundTrip(bytes: Uint8Array): string {
  const s = decodeName(bytes, 0, bytes.length);
  const out = nameToBytes(s);
  expect(hex(out)).toBe(hex(bytes));
  expect(nameByteLength(s)).toBe(bytes.length);
  const into = new Uint8Array(bytes.length + 4).fill(0xee);
  expect(encodeName(s, into, 2)).toBe(bytes.length);
  expect(hex(into.subarray(2, 2 + bytes.length))).toBe(hex(bytes));
  expect(into[0]).toBe(0xee);
  expect(into[bytes.length + 2]).toBe(0xee);
  return s;
}

describe("names: bytes ↔ string", () => {
  test("valid UTF-8 decodes to the same string as before; ASCII and BMP and astral", () => {
    for (const s of ["hello.txt", "café", "日本語", "emoji 😀 x", "\uFFFD literal", "a\u0080b"]) {
      const b = Buffer.from(s, "utf8");
      expect(roundTrip(b)).toBe(s);
      expect(decodeName(b, 0, b.length)).toBe(b.toString("utf8"));
    }
  });

  test("each single byte 0x01–0xFF round-trips; 0x80–0xFF become U+DC80–U+DCFF", () => {
    for (let c = 1; c < 256; c++) {
      const s = roundTrip(Uint8Array.of(c));
      if (c < 0x80) expect(s).toBe(String.fromCharCode(c));
      else expect(s.charCodeAt(0)).toBe(0xdc00 + c);
      expect(s.length).toBe(1);
    }
  });

  test("255 bytes of 0xFF: 255 units, 255 bytes (not 765)", () => {
    const b = new Uint8Array(255).fill(0xff);
    const s = roundTrip(b);
    expect(s.length).toBe(255);
    expect(nameByteLength(s)).toBe(255);
  });

  test("mixed valid UTF-8 and invalid bytes; names differing only in an invalid byte differ", () => {
    const a = Buffer.concat([Buffer.from("café-"), Buffer.from([0xe9, 0xff]), Buffer.from("-😀")]);
    const b = Buffer.concat([Buffer.from("café-"), Buffer.from([0xe9, 0xfe]), Buffer.from("-😀")]);
    const sa = roundTrip(a), sb = roundTrip(b);
    expect(sa).not.toBe(sb);
    expect(sa.startsWith("café-\uDCE9\uDCFF-")).toBe(true);
  });

  test("truncated, overlong, surrogate and out-of-range sequences are escaped byte by byte", () => {
    const cases = [
      [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], // truncated
      [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xf0, 0x80, 0x80, 0xaf], // overlong
      [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], // UTF-8-encoded surrogates
      [0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80], // > U+10FFFF
      [0x80], [0xbf, 0x41], [0xc3, 0x41], [0xe2, 0x82, 0x41],
      [0xef, 0xbf, 0xbd, 0xff], // a real U+FFFD next to an invalid byte
    ];
    for (const c of cases) roundTrip(Uint8Array.from(c));
    expect(decodeName(Uint8Array.of(0xed, 0xa0, 0x80))).toBe("\uDCED\uDCA0\uDC80");
    expect(decodeName(Uint8Array.of(0xef, 0xbf, 0xbd, 0xff))).toBe("\uFFFD\uDCFF");
  });

  test("decoding a slice of a larger buffer (as dispatch does)", () => {
    const buf = Buffer.from([0x41, 0xff, 0x42, 0x00, 0x43]);
    expect(decodeName(buf, 1, 3)).toBe("\uDCFFB");
    expect(decodeName(new Uint8Array(buf), 0, 1)).toBe("A");
  });

  test("encodeName refuses to write past the end instead of truncating", () => {
    expect(() => encodeName("abc", new Uint8Array(2), 0)).toThrow(RangeError);
    expect(() => encodeName("\uDCFFbc", new Uint8Array(2), 0)).toThrow(RangeError);
    expect(() => encodeName("abc", new Uint8Array(4), 2)).toThrow(RangeError);
  });

  test("encodeName's ASCII loop and its way out: lengths around its limit, non-ASCII late in a name", () => {
    for (const n of [1, 63, 64, 65, 255]) {
      const s = "x".repeat(n);
      const b = Buffer.from(s, "latin1");
      expect(roundTrip(b)).toBe(s);
    }
    // The loop has written the ASCII prefix when it meets é / an escaped byte / an astral char:
    // the general encoder writes the whole name again from the start.
    for (const s of ["abcdefé", "abc\uDCFF", "a".repeat(60) + "😀", "é" + "a".repeat(10)]) {
      const into = new Uint8Array(80).fill(0xee);
      const len = encodeName(s, into, 3);
      expect(hex(into.subarray(3, 3 + len))).toBe(hex(nameToBytes(s)));
      expect(into[3 + len]).toBe(0xee);
    }
  });

  test("other lone surrogates encode as U+FFFD (they cannot come from a decoded name)", () => {
    expect(hex(nameToBytes("a\uD800b"))).toBe("61efbfbd62");
    expect(nameByteLength("a\uD800b")).toBe(5);
    expect(hex(nameToBytes("\uDC7F"))).toBe("efbfbd");
  });

  test("C strings, fs paths and the public helpers", () => {
    expect(hex(nameToCString("\uDCFFa"))).toBe("ff6100");
    expect(fsPath("plain")).toBe("plain");
    expect(hex(fsPath("x\uDCFE") as Buffer)).toBe("78fe");
    expect(hex(nameBytes("caf\uDCE9"))).toBe("636166e9");
    expect(hex(fsencode("caf\uDCE9"))).toBe("636166e9");
    expect(fsdecode(Buffer.from([0x63, 0x61, 0x66, 0xe9]))).toBe("caf\uDCE9");
    expect(fsdecode("already a string")).toBe("already a string");
  });

  test("agrees with Python's os.fsdecode/os.fsencode on 2,000 random byte strings", () => {
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed);
    const corpus: Buffer[] = [];
    for (let i = 0; i < 2000; i++) {
      const len = 1 + (rnd() % 40);
      const b = Buffer.alloc(len);
      for (let k = 0; k < len; k++) {
        const r = rnd() % 10;
        // Bias towards bytes that form (or nearly form) multi-byte sequences.
        b[k] = r < 3 ? 0x20 + (rnd() % 0x5f) : r < 6 ? 0x80 + (rnd() % 0x40) : 0xc0 + (rnd() % 0x40);
        if (b[k] === 0 || b[k] === 0x2f) b[k] = 0x41;
      }
      corpus.push(b);
    }
    const py = String.raw`
import os, sys
for line in sys.stdin.read().split():
    s = os.fsdecode(bytes.fromhex(line))
    assert os.fsencode(s) == bytes.fromhex(line)
    print(s.encode("utf-16-le", "surrogatepass").hex())
`;
    const r = spawnSync(PYTHON, ["-c", py], { input: corpus.map((b) => b.toString("hex")).join("\n"), encoding: "utf8", env: { ...process.env, LC_ALL: "C.UTF-8", PYTHONUTF8: "1" } });
    expect(r.status).toBe(0);
    const want = r.stdout.trim().split("\n");
    expect(want.length).toBe(corpus.length);
    for (let i = 0; i < corpus.length; i++) {
      const s = roundTrip(corpus[i]!);
      expect(Buffer.from(s, "utf16le").toString("hex")).toBe(want[i]!);
    }
  });
});
