/**
 * Seed spaces. Every environment is a pure function of its seed, so keeping validation honest
 * means keeping the seeds apart: training draws only from `train`, validation only from
 * `validation`, and the two half-open ranges do not overlap.
 *
 * (The reference derived Sudoku puzzles as `seed % 400`, so training seeds 0..639 produced the very
 * puzzles validated at seeds 100000..100099. Here a seed is the whole puzzle and no seed is in both
 * ranges, which a test and the assertions below enforce.)
 */

/** A half-open range of seeds [start, end). */
export interface SeedRange {
  readonly start: number;
  readonly end: number;
}

export type SeedSplit = 'train' | 'validation';

export const seedRanges = {
  train: { start: 0, end: 1_000_000_000 },
  validation: { start: 1_000_000_000, end: 1_001_000_000 },
} as const satisfies Record<SeedSplit, SeedRange>;

/**
 * Validation index where the test seeds start. Validation uses indices 0.. (its seeds may guide
 * choices during a run: when to stop, which run to keep); a run's reported result is measured on
 * the test seeds, validationSeed(TEST_SEED_OFFSET + i), which nothing else plays.
 */
export const TEST_SEED_OFFSET = 500_000;

/**
 * Where a seed falls when tasks come from a fixed list (a dataset's train, validation and test
 * problems): the part and the index into it. Training seeds (and seeds in neither range, such as
 * a probe's 0) index the training part; validation seeds below `TEST_SEED_OFFSET` the validation
 * part, the rest the test part.
 */
export function seedPart(seed: number): { part: 'train' | 'validation' | 'test'; index: number } {
  if (seedSplit(seed) !== 'validation') return { part: 'train', index: Math.abs(Math.trunc(seed)) };
  const index = seed - seedRanges.validation.start;
  return index < TEST_SEED_OFFSET ? { part: 'validation', index } : { part: 'test', index: index - TEST_SEED_OFFSET };
}

/** Which split a seed belongs to, or null when it is in neither range (e.g. a test's own seed). */
export function seedSplit(seed: number): SeedSplit | null {
  if (!Number.isSafeInteger(seed)) return null;
  for (const split of ['train', 'validation'] as const) {
    const r = seedRanges[split];
    if (seed >= r.start && seed < r.end) return split;
  }
  return null;
}

/** Throws unless `seed` is a training seed. Call it wherever training picks a seed. */
export function assertTrainSeed(seed: number): number {
  if (seedSplit(seed) !== 'train') {
    const r = seedRanges.train;
    throw new RangeError(`seed ${String(seed)} is not a training seed: training draws only from [${r.start}, ${r.end})`);
  }
  return seed;
}

function checkIndex(index: number, what: string): void {
  if (!Number.isSafeInteger(index) || index < 0) {
    throw new RangeError(`${what} must be a non-negative integer, got ${String(index)}`);
  }
}

/**
 * The training seed for the `index`-th training task (e.g. step * batch + i). Indices wrap around
 * the training range, so any index is accepted and the result is always a training seed.
 */
export function trainSeed(index: number): number {
  checkIndex(index, 'training index');
  const r = seedRanges.train;
  return assertTrainSeed(r.start + (index % (r.end - r.start)));
}

/** The validation seed for the `index`-th held-out task; indices must fit inside the range. */
export function validationSeed(index: number): number {
  checkIndex(index, 'validation index');
  const r = seedRanges.validation;
  if (index >= r.end - r.start) {
    throw new RangeError(`validation index ${index} is out of range: there are ${r.end - r.start} validation seeds`);
  }
  return r.start + index;
}
