import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertTrainSeed, seedRanges, seedSplit, trainSeed, validationSeed } from './seed-ranges.ts';

test('the training and validation ranges are disjoint and fit in 32 bits', () => {
  const { train, validation } = seedRanges;
  assert.ok(train.start < train.end && validation.start < validation.end);
  assert.ok(train.end <= validation.start || validation.end <= train.start);
  assert.ok(Math.max(train.end, validation.end) <= 2 ** 32);
});

test('training indices, however large, never map to a validation seed', () => {
  const size = seedRanges.train.end - seedRanges.train.start;
  const indices = [0, 1, 2, 999, size - 1, size, size + 1, 3 * size + 17, Number.MAX_SAFE_INTEGER];
  for (let i = 0; i < 5000; i++) indices.push(i * 104729);
  for (const i of indices) {
    const seed = trainSeed(i);
    assert.equal(seedSplit(seed), 'train', `index ${i} -> seed ${seed}`);
  }
  assert.equal(trainSeed(size), trainSeed(0), 'indices wrap around the training range');
});

test('validation seeds are validation seeds and are refused by the training assertion', () => {
  const count = seedRanges.validation.end - seedRanges.validation.start;
  for (const i of [0, 1, 99, count - 1]) {
    const seed = validationSeed(i);
    assert.equal(seedSplit(seed), 'validation');
    assert.throws(() => assertTrainSeed(seed), /is not a training seed/);
  }
  assert.throws(() => validationSeed(count), /out of range/);
  assert.throws(() => validationSeed(-1), /non-negative integer/);
  assert.throws(() => trainSeed(1.5), /non-negative integer/);
  assert.throws(() => trainSeed(-3), /non-negative integer/);
});

test('seeds outside both ranges belong to neither split', () => {
  assert.equal(seedSplit(seedRanges.validation.end), null);
  assert.equal(seedSplit(-1), null);
  assert.equal(seedSplit(0.5), null);
  assert.throws(() => assertTrainSeed(seedRanges.validation.end + 5), /not a training seed/);
  assert.equal(assertTrainSeed(42), 42);
});
