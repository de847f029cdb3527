/**
 * float16 encoding (float16.ts) against values whose binary16 form is known, including the edges
 * a hand-written converter gets wrong: ties to even, carries into the exponent, subnormals, the
 * overflow threshold, signed zeros and NaN; and a float16 constant's bytes in an emitted model.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { float16Bits, float16Bytes, float16Value, roundFloat16 } from './float16.ts';
import { Graph } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

const hex = (h: number) => `0x${h.toString(16).padStart(4, '0')}`;

test('float16 bits of exact values, edges and specials', () => {
  const cases: Array<[number, number]> = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [0.5, 0x3800],
    [65504, 0x7bff], // largest finite half
    [65519.99, 0x7bff], // below the midpoint to 65536: rounds down
    [65520, 0x7c00], // the midpoint ties to even, which is Infinity
    [1e9, 0x7c00],
    [-1e9, 0xfc00], // a large negative attention mask becomes −Infinity
    [Infinity, 0x7c00],
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // half of it: ties to even, zero
    [2 ** -25 * 1.0001, 0x0001],
    [3 * 2 ** -25, 0x0002], // 1.5 ulps of subnormal: ties to even, 2
    [2 ** -14 - 2 ** -25, 0x0400], // the largest subnormal's upper midpoint carries into the smallest normal
    [1 + 2 ** -11, 0x3c00], // midpoint between 1 and the next half: ties to even (down)
    [1 + 3 * 2 ** -11, 0x3c02], // midpoint between 0x3c01 and 0x3c02: ties to even (up)
    [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the midpoint: up
    [2 - 2 ** -12, 0x4000], // rounds up across the binade
    [1 / 3, 0x3555],
  ];
  for (const [v, want] of cases) assert.equal(hex(float16Bits(v)), hex(want), `float16Bits(${v})`);
  assert.equal(float16Bits(NaN) & 0x7c00, 0x7c00);
  assert.notEqual(float16Bits(NaN) & 0x3ff, 0);
  assert.ok(Number.isNaN(float16Value(float16Bits(NaN))));
});

test('every finite half survives value → bits → value, and rounding is idempotent', () => {
  for (let h = 0; h < 0x10000; h++) {
    if ((h & 0x7c00) === 0x7c00) continue; // Infinity and NaN
    const v = float16Value(h);
    assert.equal(float16Bits(v), h, `half ${hex(h)} = ${v}`);
    assert.equal(roundFloat16(v), v);
  }
});

test('rounding picks the nearest half (exhaustively between neighbours)', () => {
  for (let h = 0x0000; h < 0x7bff; h += 37) {
    const lo = float16Value(h);
    const hi = float16Value(h + 1);
    for (const t of [0.1, 0.4999, 0.5001, 0.9]) {
      const v = Math.fround(lo + (hi - lo) * t);
      assert.equal(roundFloat16(v), t < 0.5 ? lo : hi, `${v} between ${lo} and ${hi}`);
    }
  }
});

test('float16Bytes is little-endian binary16, from a Float32Array or numbers alike', () => {
  const values = Float32Array.from([1, -2, 65504, 2 ** -24, 1 / 3]);
  const bytes = float16Bytes(values);
  assert.deepEqual(Array.from(bytes), [0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x55, 0x35]);
  assert.deepEqual(float16Bytes(Array.from(values)), bytes);
  // A view into a larger buffer at an offset reads only its own values.
  const big = Float32Array.from([7, 1, -2, 7]);
  assert.deepEqual(Array.from(float16Bytes(big.subarray(1, 3))), [0x00, 0x3c, 0x00, 0xc0]);
});

test('float16 constants are interned by their half value and emitted as binary16 raw data', () => {
  const b = new Graph();
  // 1 and 1 + 2⁻¹² are one half: one constant.
  assert.equal(b.scalar(1, 'float16'), b.scalar(1 + 2 ** -12, 'float16'));
  const x = b.input('x', 'float16', [3]);
  const y = b.mul(x, b.constant([1 / 3, -2, 65504], [3], 'float16'));
  const bytes = emitOnnx([['y', y]], { name: 'half' });
  const find = (needle: number[]) => bytes.findIndex((_, i) => needle.every((v, j) => bytes[i + j] === v));
  assert.ok(find([0x55, 0x35, 0x00, 0xc0, 0xff, 0x7b]) >= 0, 'the constant as binary16 bytes');
  assert.deepEqual(emitOnnx([['y', y]], { name: 'half' }), bytes, 'deterministic');
});
