/**
 * The learning results name the seeds whose warm start ran to its ceiling without reaching its
 * loss target, reading how each ended from a real warm-start cache folder.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fillWarmStartEnds, missedTargetNotes, warmStartEnds, type WarmStartedRun } from './warm-start-ends.ts';

test('seeds whose warm start missed its loss target are named; the others, and runs with no target or no cache entry, are not', async () => {
  const cache = await mkdtemp(join(tmpdir(), 'troupe-ws-ends-'));
  try {
    const budget = { demonstrations: 1500, steps: 600, batchSize: 32, lr: 3e-3, stopAtLoss: 0.15 };
    const entry = async (key: string, done: object) => {
      await mkdir(join(cache, key, 'base'), { recursive: true });
      await writeFile(join(cache, key, 'base', 'done.json'), JSON.stringify({ key, budget, ...done }));
    };
    await entry('k2', { stepsTrained: 600, smoothedLoss: 0.228 });
    await entry('k5', { stepsTrained: 257, smoothedLoss: 0.148 });
    await entry('plain', { budget: { ...budget, stopAtLoss: undefined }, stepsTrained: 600, smoothedLoss: 0.3 });
    assert.deepEqual(await warmStartEnds({ base: 'k2' }, cache), { base: { stepsTrained: 600, steps: 600, stopAtLoss: 0.15, smoothedLoss: 0.228 } });
    assert.equal(await warmStartEnds({ base: 'plain' }, cache), null, 'no loss target: nothing to record');
    assert.equal(await warmStartEnds(null, cache), null, 'no warm start');
    assert.equal(await warmStartEnds({ base: 'elsewhere' }, cache), undefined, 'not in this cache: unknown');

    const runs: WarmStartedRun[] = [
      { seed: 2, warmStart: { base: 'k2' } },
      { seed: 5, warmStart: { base: 'k5' } },
      { seed: 1, warmStart: { base: 'elsewhere' } },
      { seed: 3, warmStart: { base: 'k2' }, warmStartEnd: null },
    ];
    await fillWarmStartEnds(runs, cache);
    assert.equal(runs[2]!.warmStartEnd, undefined, 'a run trained elsewhere stays unknown');
    assert.equal(runs[3]!.warmStartEnd, null, 'what a run recorded is kept');
    assert.deepEqual(missedTargetNotes(runs), ["seed 2: 'base' ran all 600 steps without reaching its loss target 0.15 (smoothed loss 0.2280)"]);
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
});
