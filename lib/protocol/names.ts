// File names are bytes. On Linux a name is any byte sequence without "/" and NUL; it need not be
// UTF-8. The APIs hand names around as strings, so bytes ↔ string must be lossless. The scheme is
// Python's `os.fsdecode`/`os.fsencode` ("surrogateescape"):
//
// - decode: valid UTF-8 decodes as usual; every byte that is not part of a valid UTF-8 sequence
//   (0x80–0xFF only: ASCII is always valid) becomes the lone surrogate U+DC80 + (byte − 0x80),
//   i.e. U+DC80–U+DCFF;
// - encode: UTF-8, except that a lone surrogate U+DC80–U+DCFF becomes the single byte it stands
//   for. (Other lone surrogates cannot come from a decoded name; they encode as U+FFFD like
//   Buffer does.)
//
// decode → encode is the identity on every byte string, so names round-trip byte-exact. Valid
// UTF-8 names decode to exactly the string they always did.
//
// Cost for the common case: decoding scans for a byte >= 0x80; an ASCII name is then decoded by
// the native latin1 decoder (cheaper than UTF-8, same string). Otherwise the native UTF-8 decoder
// runs and one native indexOf looks for U+FFFD (present only if some byte was invalid, or the
// name really contains U+FFFD); only then does the careful byte-by-byte decoder run. Encoding checks `isWellFormed()` (no lone
// surrogates) and then uses the native UTF-8 encoder.

const REPLACEMENT = "\uFFFD";
const ESCAPE_BASE = 0xdc00; // U+DC80 + (b - 0x80) = U+DC00 + b

/** Scratch for the slow decoder: UTF-16 units (a name or target is at most 4096 bytes; grows). */
let units = new Uint16Array(4096);

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The name in `bytes[start, end)` as a string (lossless; see the module comment). */
export function decodeName(bytes: Uint8Array, start = 0, end = bytes.length): string {
  const buf = asBuffer(bytes);
  let i = start;
  while (i < end && bytes[i]! < 0x80) i++;
  if (i === end) return buf.toString("latin1", start, end); // ASCII: the cheapest exact decoder
  const s = buf.toString("utf8", start, end);
  if (s.indexOf(REPLACEMENT) < 0) return s;
  return decodeCareful(bytes, start, end);
}

/** Byte-by-byte decode (Unicode Table 3-7 well-formed sequences; anything else escaped). */
function decodeCareful(b: Uint8Array, start: number, end: number): string {
  if (units.length < end - start) units = new Uint16Array(end - start);
  let n = 0;
  let i = start;
  while (i < end) {
    const c = b[i]!;
    if (c < 0x80) {
      units[n++] = c;
      i++;
      continue;
    }
    let need = 0, lo = 0x80, hi = 0xbf, cp = 0;
    if (c >= 0xc2 && c <= 0xdf) (need = 1), (cp = c & 0x1f);
    else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      cp = c & 0x0f;
      if (c === 0xe0) lo = 0xa0;
      else if (c === 0xed) hi = 0x9f; // no UTF-8-encoded surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      cp = c & 0x07;
      if (c === 0xf0) lo = 0x90;
      else if (c === 0xf4) hi = 0x8f;
    }
    let ok = need > 0 && i + need < end;
    if (ok) {
      for (let k = 1; k <= need; k++) {
        const d = b[i + k]!;
        if (d < lo || d > hi) {
          ok = false;
          break;
        }
        cp = (cp << 6) | (d & 0x3f);
        lo = 0x80;
        hi = 0xbf;
      }
    }
    if (!ok) {
      units[n++] = ESCAPE_BASE + c;
      i++;
      continue;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      units[n++] = 0xd800 + (cp >> 10);
      units[n++] = 0xdc00 + (cp & 0x3ff);
    } else units[n++] = cp;
    i += need + 1;
  }
  // (TextDecoder("utf-16le") would replace the lone surrogates.)
  return String.fromCharCode.apply(null, units.subarray(0, n) as unknown as number[]);
}

/** Whether `s` holds a lone surrogate (i.e. stands for bytes that are not UTF-8). */
export function hasEscapes(s: string): boolean {
  return !s.isWellFormed();
}

/** Length in bytes of the name `s` encodes to. */
export function nameByteLength(s: string): number {
  if (s.isWellFormed()) return Buffer.byteLength(s, "utf8");
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) {
      n += 4;
      i++;
    } else if (c >= 0xdc80 && c <= 0xdcff) n += 1;
    else n += 3;
  }
  return n;
}

/** Names up to this many UTF-16 units try the ASCII loop of encodeName first. */
const ASCII_FAST = 64;

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/**
 * Write the bytes of name `s` into `out` at `offset`; returns the byte count. `out` must have
 * room for nameByteLength(s) bytes (check first: nothing is truncated silently here).
 */
export function encodeName(s: string, out: Uint8Array, offset: number): number {
  // Short ASCII names (nearly all) byte by byte: the JIT inlines this loop, while isWellFormed
  // and Buffer.write are calls into the runtime (~1 µs per create, measured with perf).
  const n = s.length;
  if (n <= ASCII_FAST && offset + n <= out.length) {
    let i = 0;
    for (; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      out[offset + i] = c;
    }
    if (i === n) return n;
  }
  if (s.isWellFormed()) {
    // Buffer.write truncates silently: check the room (cheaply when it is obviously there).
    if (offset + s.length * 3 > out.length) {
      const len = Buffer.byteLength(s, "utf8");
      if (offset + len > out.length) throw new RangeError(`encodeName: ${len} bytes do not fit at ${offset} of ${out.length}`);
    }
    return asBuffer(out).write(s, offset, "utf8");
  }
  const len = nameByteLength(s);
  if (offset + len > out.length) throw new RangeError(`encodeName: ${len} bytes do not fit at ${offset} of ${out.length}`);
  let o = offset;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) out[o++] = c;
    else if (c < 0x800) {
      out[o++] = 0xc0 | (c >> 6);
      out[o++] = 0x80 | (c & 0x3f);
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) {
      c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
      out[o++] = 0xf0 | (c >> 18);
      out[o++] = 0x80 | ((c >> 12) & 0x3f);
      out[o++] = 0x80 | ((c >> 6) & 0x3f);
      out[o++] = 0x80 | (c & 0x3f);
    } else if (c >= 0xdc80 && c <= 0xdcff) out[o++] = c - ESCAPE_BASE;
    else {
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd; // a lone surrogate that is no escape
      out[o++] = 0xe0 | (c >> 12);
      out[o++] = 0x80 | ((c >> 6) & 0x3f);
      out[o++] = 0x80 | (c & 0x3f);
    }
  }
  return o - offset;
}

/** The bytes of name (or path) `s`, as a new Buffer. Also exported as `nameBytes`/`fsencode`. */
export function nameToBytes(s: string): Buffer {
  if (s.isWellFormed()) return Buffer.from(s, "utf8");
  const b = Buffer.allocUnsafe(nameByteLength(s));
  encodeName(s, b, 0);
  return b;
}

/** NUL-terminated bytes of `s` (for C calls). */
export function nameToCString(s: string): Buffer {
  const len = nameByteLength(s);
  const b = Buffer.allocUnsafe(len + 1);
  encodeName(s, b, 0);
  b[len] = 0;
  return b;
}

/**
 * What to hand node:fs for a path: the string itself when it is plain Unicode (node:fs encodes
 * it as UTF-8, exactly), else its bytes (node:fs takes Buffer paths as-is).
 */
export function fsPath(s: string): string | Buffer {
  return s.isWellFormed() ? s : nameToBytes(s);
}

/** Bytes (or a string that came from bytes) → the name string. Also exported as `fsdecode`. */
export function bytesToName(b: Uint8Array | string): string {
  return typeof b === "string" ? b : decodeName(b, 0, b.length);
}
