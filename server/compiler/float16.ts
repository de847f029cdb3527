/**
 * IEEE 754 binary16 (ONNX `float16`) encoding, for float16 constants and baked initializers.
 *
 * Node 20 has no Float16Array or Math.f16round, so values are converted here from their float32
 * bits: round to nearest, ties to even (what a float32 → float16 Cast does in ONNX Runtime and on
 * GPUs), subnormals kept, magnitudes past the largest finite half (65504, after rounding) become
 * ±Infinity, NaN stays NaN. Converting from float32 (not from the double) makes a JS number give
 * the same half as an ONNX Cast of its float32 value.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** binary16 bits of the float32 whose bits are `x` (an unsigned 32-bit integer). */
export function float16FromFloat32Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0); // Inf, or a quiet NaN
  const e = exp - 127 + 15; // the half's biased exponent
  if (e >= 0x1f) return sign | 0x7c00; // too large: Infinity
  if (e <= 0) {
    // A half subnormal (m · 2⁻²⁴) or zero. Below 2⁻²⁵ everything rounds to zero.
    if (e < -10) return sign;
    const full = mant | 0x800000; // the implicit leading 1
    const shift = 14 - e; // 14..24 bits dropped
    let h = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && h & 1)) h++; // may carry into the smallest normal: correct
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // may carry up to the next binade or Infinity
  return sign | h;
}

/** binary16 bits of a number (rounded to float32 first). */
export function float16Bits(v: number): number {
  f32[0] = v;
  return float16FromFloat32Bits(u32[0]!);
}

/** The number a binary16 bit pattern holds. */
export function float16Value(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** v rounded to the nearest float16 value (as a float32 → float16 Cast). */
export function roundFloat16(v: number): number {
  return float16Value(float16Bits(v));
}

/** Little-endian binary16 bytes of `values` (ONNX raw_data of a float16 tensor). */
export function float16Bytes(values: ArrayLike<number>): Uint8Array {
  const out = new Uint16Array(values.length);
  if (values instanceof Float32Array) {
    // Straight from the float32 bits: no per-value round trip through a scratch array.
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < bits.length; i++) out[i] = float16FromFloat32Bits(bits[i]!);
  } else {
    for (let i = 0; i < values.length; i++) out[i] = float16Bits(values[i]!);
  }
  // Uint16Array uses the platform's byte order; ONNX wants little-endian (every Node target is).
  return new Uint8Array(out.buffer);
}
