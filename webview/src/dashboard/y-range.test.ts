import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countOutside, fullExtent, quantile, robustExtent } from './y-range.ts';

const ramp = (n: number, from: number, to: number) => Array.from({ length: n }, (_, i) => from + ((to - from) * i) / (n - 1));

test('a spike is left out of the range; the curve keeps the rest of the axis', () => {
  const loss = ramp(40, 2, 1);
  loss[17] = 40;
  assert.deepEqual(fullExtent([loss]), { min: 1, max: 40 });
  const robust = robustExtent([loss]);
  assert.ok(robust);
  assert.equal(robust.min, 1);
  assert.ok(robust.max <= 2 && robust.max > 1.9, String(robust.max));
  assert.equal(countOutside([loss], robust), 1);
});

test('a steady trend keeps all its points, however steep (percentile clipping would cut its end)', () => {
  const rising = ramp(50, 0, 100).map((v) => v * v);
  assert.deepEqual(robustExtent([rising]), fullExtent([rising]));
});

test('a downward spike too; nulls and non-finite values are skipped; all columns share the fences', () => {
  const a: Array<number | null> = [...ramp(20, 5, 6), null, Number.NaN];
  const b = ramp(20, 5.5, 6.5);
  b[3] = -100;
  const robust = robustExtent([a, b]);
  assert.deepEqual(robust, { min: 5, max: 6.5 });
});

test('too few points, or a middle half of one value (a count that is mostly 0), clip nothing', () => {
  assert.deepEqual(robustExtent([[1, 2, 1000]]), { min: 1, max: 1000 });
  const skipped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 3];
  assert.deepEqual(robustExtent([skipped]), { min: 0, max: 3 });
  assert.equal(robustExtent([[null, null]]), null);
});

test('quantile interpolates between ranks (R-7)', () => {
  assert.equal(quantile([1, 2, 3, 4], 0.25), 1.75);
  assert.equal(quantile([1, 2, 3, 4], 0.75), 3.25);
  assert.equal(quantile([7], 0.5), 7);
});
