import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareRuns } from './compare-runs.ts';

const run = (rows: Array<[string, string, number, number?]>) => ({
  date: '2026-11-28',
  loadAverage: { start: 0.1, end: 0.2 },
  matmulPeakGflops: { troupe: 200, pytorch: 180 },
  baselineFlags: [],
  results: rows.map(([name, figure, speedup, old]) => ({ model: { name }, figure, speedup, ...(old === undefined ? {} : { speedupOfMedians: old }) })),
});

test('compareRuns: figures both runs hold, each speedup within the tolerance of the first run or not, the old estimator beside it', () => {
  const a = run([['default', 'decode', 1.5, 1.2], ['default', 'trainStep', 0.8], ['medium', 'decode', 1.0, 1.0]]);
  const b = run([['default', 'decode', 1.64, 1.5], ['default', 'trainStep', 0.9], ['qwen', 'decode', 2]]);
  const rows = compareRuns(a, b, 0.1);
  assert.deepEqual(rows.map((r) => [r.model, r.figure, r.within, r.oldWithin]), [
    ['default', 'decode', true, false], // 1.64 / 1.5 = 1.093; old 1.5 / 1.2 = 1.25
    ['default', 'trainStep', false, null], // 0.9 / 0.8 = 1.125; no old estimator in either
  ]);
  // The tolerance's edge counts as within.
  assert.equal(compareRuns(run([['m', 'f', 1]]), run([['m', 'f', 1.1]]), 0.1)[0]!.within, true);
  assert.equal(compareRuns(run([['m', 'f', 1]]), run([['m', 'f', 1.11]]), 0.1)[0]!.within, false);
});
