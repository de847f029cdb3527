import assert from 'node:assert/strict';
import { test } from 'node:test';
import { smoothEma } from './smoothing.ts';

test('weight 0 is the raw curve; gaps stay gaps', () => {
  assert.deepEqual(smoothEma([1, null, 3, Number.NaN, 5], 0), [1, null, 3, null, 5]);
});

test('debiased: a constant curve stays constant from its first point (no pull towards 0)', () => {
  for (const v of smoothEma([2, 2, 2, 2], 0.9)) assert.ok(Math.abs((v ?? 0) - 2) < 1e-12, String(v));
});

test("TensorBoard's recurrence: last = w·last + (1−w)·v, shown as last / (1 − wⁿ)", () => {
  const w = 0.5;
  // n=1: 0.5·0 + 0.5·0 = 0 → 0/0.5 = 0; n=2: 0.5·0 + 0.5·4 = 2 → 2/0.75; n=3 after a gap: 0.5·2 + 0.5·8 = 5 → 5/0.875.
  const [a, b, gap, c] = smoothEma([0, 4, null, 8], w);
  assert.equal(a, 0);
  assert.ok(Math.abs(b! - 2 / 0.75) < 1e-12);
  assert.equal(gap, null);
  assert.ok(Math.abs(c! - 5 / 0.875) < 1e-12);
});

test('a spike is damped, and more so with a larger weight', () => {
  const raw = [0, 0, 0, 10, 0, 0];
  const light = smoothEma(raw, 0.3)[3]!;
  const heavy = smoothEma(raw, 0.9)[3]!;
  assert.ok(light < 10 && heavy < light, `${light} ${heavy}`);
});

test('a weight outside [0, 1) is refused', () => {
  assert.throws(() => smoothEma([1], 1), /smoothing weight/);
  assert.throws(() => smoothEma([1], -0.1), /smoothing weight/);
});
