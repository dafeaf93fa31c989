// Growable SharedArrayBuffers: reserved up to a maximum, grown in place by any thread. Typed
// arrays made over one without a length track its length, so a grow() by one thread is seen by
// every thread's views (no re-mapping, no message).

export function growable(bytes: number, max: number): SharedArrayBuffer {
  return new SharedArrayBuffer(bytes, { maxByteLength: max } as never);
}

/** Grow `buf` to at least `need` bytes: doubling, in `step` multiples, at most its maximum. False: it cannot hold `need`. */
export function growTo(buf: SharedArrayBuffer, need: number, step = 4096): boolean {
  if (buf.byteLength >= need) return true;
  const max = buf.maxByteLength;
  if (need > max) return false;
  let size = Math.max(buf.byteLength * 2, step);
  while (size < need) size *= 2;
  size = Math.min(Math.ceil(size / step) * step, max);
  buf.grow(size);
  return true;
}
