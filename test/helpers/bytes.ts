// Expected wire bytes written out by hand (test/codec.test.ts, test/wire.test.ts): little-endian
// integers of a fixed width, two's complement for negatives.

/** Little-endian bytes of an integer of `n` bytes. */
export function le(v: number | bigint, n: number): number[] {
  let x = BigInt(v);
  if (x < 0n) x += 1n << BigInt(8 * n);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(Number(x & 0xffn));
    x >>= 8n;
  }
  return out;
}
export const u64 = (v: number | bigint) => le(v, 8);
export const u32 = (v: number | bigint) => le(v, 4);
export const u16 = (v: number | bigint) => le(v, 2);
export const i32 = (v: number) => le(v, 4);
