import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPrng, deriveSeed, fillNormal, fillUniform } from './prng.ts';

test('same seed, same stream; different seeds and labels, different streams', () => {
  const a = createPrng(7);
  const b = createPrng(7);
  const xs = Array.from({ length: 100 }, () => a.nextUint32());
  assert.deepEqual(Array.from({ length: 100 }, () => b.nextUint32()), xs);
  assert.notDeepEqual(Array.from({ length: 100 }, () => createPrng(8).nextUint32()), xs);
  // High bits of large seeds matter.
  assert.notEqual(createPrng(2 ** 40 + 7).nextUint32(), createPrng(7).nextUint32());
  assert.notEqual(deriveSeed(1, 'embed.weight'), deriveSeed(1, 'norm.weight'));
  assert.notEqual(deriveSeed(1, 'embed.weight'), deriveSeed(2, 'embed.weight'));
  assert.equal(deriveSeed(1, 'embed.weight'), deriveSeed(1, 'embed.weight'));
  assert.throws(() => createPrng(0.5), /seed must be a safe integer, got 0.5/);
});

test('stream is pinned (changing the generator changes every checkpoint made from scratch)', () => {
  const p = createPrng(42);
  const pinned = [p.nextUint32(), p.nextUint32(), p.nextUint32()];
  assert.deepEqual(pinned, PINNED_42);
});

test('uniform and normal samples have the right moments', () => {
  const p = createPrng(123);
  const n = 200_000;
  const u = fillUniform(new Float32Array(n), p, -1, 3);
  const g = fillNormal(new Float32Array(n), p, 0.5, 2);
  const mean = (x: Float32Array): number => x.reduce((s, v) => s + v, 0) / x.length;
  const std = (x: Float32Array): number => {
    const m = mean(x);
    return Math.sqrt(x.reduce((s, v) => s + (v - m) ** 2, 0) / x.length);
  };
  assert.ok(u.every((v) => v >= -1 && v < 3));
  assert.ok(Math.abs(mean(u) - 1) < 0.02, `uniform mean ${mean(u)}`);
  assert.ok(Math.abs(std(u) - 4 / Math.sqrt(12)) < 0.02, `uniform std ${std(u)}`);
  assert.ok(Math.abs(mean(g) - 0.5) < 0.02, `normal mean ${mean(g)}`);
  assert.ok(Math.abs(std(g) - 2) < 0.02, `normal std ${std(g)}`);
  assert.ok(g.every(Number.isFinite));
});

const PINNED_42 = [3708404015, 155671153, 13879864];
