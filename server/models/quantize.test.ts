/**
 * Block-wise quantization: the round trip stays within half a quantization step of every weight,
 * the packing is MatMulNBits' (checked bit by bit on a hand-made block), and a merged LoRA
 * adapter equals W + scale·B·A computed directly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dequantizeBlockwise, mergeLora, quantizeBlockwise, type QuantBits } from './quantize.ts';
import { throwsMessage } from './test-util.ts';

let seed = 99;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0), seed / 4294967296 - 0.5);

for (const bits of [8, 4] as const satisfies readonly QuantBits[]) {
  test(`int${bits}: every weight comes back within half a step of its block (ragged last block)`, () => {
    const [rows, cols, bs] = [7, 80, 32]; // 80 = 2 full blocks + a half one
    const w = Float32Array.from({ length: rows * cols }, (_, i) => rand() * (1 + (i % 5)));
    const q = quantizeBlockwise(w, rows, cols, bits, bs);
    assert.equal(q.packed.length, rows * 3 * ((bs * bits) / 8));
    assert.equal(q.scales.length, rows * 3);
    const back = dequantizeBlockwise(q);
    let sq = 0;
    let sqErr = 0;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const blk = Math.floor(c / bs);
        const d = Math.abs(q.scales[r * 3 + blk]!);
        const v = w[r * cols + c]!;
        const err = Math.abs(back[r * cols + c]! - v);
        // Half a step, or a whole one for a value of the block's opposite sign beyond the largest
        // positive code (v/d > 2^(bits−1) − 1), which clamps.
        const clamped = v / q.scales[r * 3 + blk]! > (1 << (bits - 1)) - 1;
        assert.ok(err <= (clamped ? d : d / 2) + 1e-7 * Math.abs(v), `[${r},${c}] ${v} → ${back[r * cols + c]} (step ${d})`);
        sq += v * v;
        sqErr += err * err;
      }
    }
    // The relative error of the whole matrix: about one step in 2^bits of the block's range.
    const rel = Math.sqrt(sqErr / sq);
    assert.ok(rel < (bits === 8 ? 0.01 : 0.15), `relative error ${rel}`);
    assert.ok(rel > 0, 'quantization cannot be exact on random data');
  });
}

test('the largest-magnitude weight of a block is exact and takes the most negative code', () => {
  const w = new Float32Array(16);
  w[3] = -2;
  w[5] = 1;
  w[6] = 0.25;
  const q4 = quantizeBlockwise(w, 1, 16, 4, 16);
  // d = −2 / −8 = 0.25: codes −8 (w=−2), 4 (w=1), 1 (w=0.25), 0 elsewhere; stored + 8, two per
  // byte, the even element in the low nibble.
  assert.equal(q4.scales[0], 0.25);
  assert.equal(q4.packed[1], 8 | (0 << 4)); // elements 2, 3: codes 0, −8
  assert.equal(q4.packed[2], 8 | (12 << 4)); // elements 4, 5: codes 0, 4
  assert.equal(q4.packed[3], 9 | (8 << 4)); // elements 6, 7: codes 1, 0
  assert.deepEqual(Array.from(dequantizeBlockwise(q4)), Array.from(w));
  const q8 = quantizeBlockwise(w, 1, 16, 8, 16);
  assert.equal(q8.scales[0], 2 / 128);
  assert.equal(q8.packed[3], 0); // −128 + 128
  assert.equal(q8.packed[5], 64 + 128);
  assert.equal(q8.packed[6], 16 + 128);
  assert.deepEqual(Array.from(dequantizeBlockwise(q8)), Array.from(w));
});

test('an all-zero block quantizes to zero codes and a zero scale', () => {
  const q = quantizeBlockwise(new Float32Array(32), 1, 32, 4, 32);
  assert.equal(q.scales[0], 0);
  assert.ok(q.packed.every((b) => b === 0x88));
  assert.ok(dequantizeBlockwise(q).every((v) => v === 0));
});

test('bad block sizes and shapes are refused by name', () => {
  throwsMessage(() => quantizeBlockwise(new Float32Array(48), 1, 48, 4, 24), /block size must be a power of two ≥ 16, got 24/);
  throwsMessage(() => quantizeBlockwise(new Float32Array(10), 2, 8, 8, 16), /10 values do not form a \[2, 8\] matrix/);
});

test('mergeLora equals W + scale·B·A', () => {
  const [out, inDim, rank, scale] = [5, 6, 2, 1.5];
  const w = Float32Array.from({ length: out * inDim }, rand);
  const a = Float32Array.from({ length: rank * inDim }, rand);
  const b = Float32Array.from({ length: out * rank }, rand);
  const m = mergeLora(w, a, b, out, inDim, rank, scale);
  for (let o = 0; o < out; o++) {
    for (let i = 0; i < inDim; i++) {
      let ba = 0;
      for (let r = 0; r < rank; r++) ba += b[o * rank + r]! * a[r * inDim + i]!;
      assert.ok(Math.abs(m[o * inDim + i]! - (w[o * inDim + i]! + scale * ba)) < 1e-6);
    }
  }
  throwsMessage(() => mergeLora(w, a, b, out, inDim, rank + 1, scale), /do not fit \[5, 6\] with rank 3/);
});
