import assert from 'node:assert/strict';
import { test } from 'node:test';
import { median, quantile } from './stats.ts';

test('median: the middle value, the mean of the two middle ones for an even count, NaN for none', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

test('quantile: nearest rank, clamped to the largest value', () => {
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted
  assert.deepEqual([quantile(xs, 0), quantile(xs, 0.5), quantile(xs, 0.99), quantile(xs, 1)], [1, 51, 100, 100]);
  assert.ok(Number.isNaN(quantile([], 0.5)));
});
