import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeFloat32, decodeInt32, encodeFloat32, encodeInt32 } from './blob-codec.ts';

test('int32 round trip keeps extremes and is little-endian', () => {
  const ids = [0, 1, 255, 256, 65535, 2 ** 31 - 1, -1, -(2 ** 31)];
  const bytes = encodeInt32(ids);
  assert.equal(bytes.byteLength, ids.length * 4);
  assert.deepEqual([...bytes.subarray(12, 16)], [0, 1, 0, 0]); // 256 little-endian
  assert.deepEqual(decodeInt32(bytes, 'ids'), ids);
  assert.deepEqual(decodeInt32(encodeInt32(Int32Array.from(ids)), 'ids'), ids);
});

test('float32 round trip is exact for float32 values and rounds other doubles once', () => {
  const values = Float32Array.from([-0, -1e-8, -0.5, -3.4028234663852886e38, -12.375]);
  assert.deepEqual(decodeFloat32(encodeFloat32(values), 'lp'), Array.from(values));
  assert.deepEqual(decodeFloat32(encodeFloat32([-0.1]), 'lp'), [Math.fround(-0.1)]);
});

test('decodes a buffer that starts at an unaligned offset (SQLite pool slices)', () => {
  const raw = Buffer.alloc(13);
  encodeInt32([7, -9, 123456]).copy(raw, 1);
  assert.deepEqual(decodeInt32(raw.subarray(1), 'ids'), [7, -9, 123456]);
});

test('a truncated blob fails naming the column', () => {
  assert.throws(() => decodeFloat32(Buffer.alloc(6), 'turn row 3 logprobs'), /turn row 3 logprobs: blob of 6 bytes/);
});

test('empty arrays encode to empty blobs', () => {
  assert.equal(encodeInt32([]).byteLength, 0);
  assert.deepEqual(decodeInt32(encodeInt32([]), 'ids'), []);
});
