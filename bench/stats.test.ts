import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bracketedSpeedups, median, quantile } from './stats.ts';

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

test('bracketedSpeedups: a drift linear in time cancels, a burst of load is outvoted; one baseline timing more than the side is required', () => {
  // The machine slows by 2% a timing slot; the side is truly 1.5x faster than the baseline (base 150 ms, side 100 ms).
  // Slots: b0, t0, b1, t1, ... so the side's i-th timing sits in slot 2i+1, the baseline's i-th in slot 2i.
  const slow = (slot: number): number => 1 + 0.02 * slot;
  const n = 6;
  const side = Array.from({ length: n }, (_, i) => 100 * slow(2 * i + 1));
  const base = Array.from({ length: n + 1 }, (_, i) => 150 * slow(2 * i));
  for (const r of bracketedSpeedups(side, base)) assert.ok(Math.abs(r - 1.5) < 1e-12, String(r));
  // A burst of load (30% slower) over slots 0-6: the median of the bracketed speedups stays 1.5, the
  // ratio of the two sides' medians does not (4 of the baseline's 7 timings were slowed, 3 of the side's 6).
  const burst = (slot: number): number => (slot <= 6 ? 1.3 : 1);
  const bSide = Array.from({ length: n }, (_, i) => 100 * burst(2 * i + 1));
  const bBase = Array.from({ length: n + 1 }, (_, i) => 150 * burst(2 * i));
  assert.ok(Math.abs(median(bracketedSpeedups(bSide, bBase)) - 1.5) < 1e-12);
  assert.ok(Math.abs(median(bBase) / median(bSide) - 1.5) > 0.1);
  assert.throws(() => bracketedSpeedups([1, 2], [1, 2]), /2 timings need 3 baseline timings/);
});
