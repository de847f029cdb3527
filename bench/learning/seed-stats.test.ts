import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BOT_TEAM, compareMethods, comparePaired, compareUnpaired, compareWithBotTeam, sameWarmStart, t975 } from './seed-stats.ts';

const close = (x: number, y: number, tol = 1e-3) => assert.ok(Math.abs(x - y) < tol, `${x} is not ${y}`);

describe('seed statistics', () => {
  it('pairs by seed: every sign flip, and a t interval on the differences', () => {
    const c = comparePaired([1, 2, 3, 4], [0.6, 0.7, 0.8, 0.9], [0.5, 0.5, 0.5, 0.5]);
    assert.equal(c.paired, true);
    close(c.diff, 0.25);
    assert.deepEqual(c.perSeed!.map((x) => Math.round(x * 10) / 10), [0.1, 0.2, 0.3, 0.4]);
    // All four ahead: only the observed signs and their mirror are as extreme, 2 of 16.
    assert.equal(c.p, 2 / 16);
    // sd 0.1291, se 0.06455, t(3) 3.182.
    close(c.ci95![0], 0.25 - 3.182 * 0.064550);
    close(c.ci95![1], 0.25 + 3.182 * 0.064550);
  });

  it('a paired difference that changes sign is no evidence', () => {
    const c = comparePaired([1, 2], [0.6, 0.4], [0.5, 0.5]);
    close(c.diff, 0);
    assert.equal(c.p, 1);
    assert.ok(c.ci95![0] < 0 && c.ci95![1] > 0);
  });

  it('one seed: a difference but no interval', () => {
    const c = comparePaired([7], [0.8], [0.6]);
    close(c.diff, 0.2);
    assert.equal(c.ci95, null);
    assert.equal(c.p, 1);
  });

  it('unpaired: every split of the pooled results, and Welch\'s interval', () => {
    const c = compareUnpaired([1, 2, 3], [1, 2, 3], [1, 2, 3], [4, 5, 6]);
    assert.equal(c.paired, false);
    close(c.diff, -3);
    // Of the 20 ways to choose three of six, only {1,2,3} and {4,5,6} are as far apart.
    assert.equal(c.p, 2 / 20);
    // Variances 1 and 1: se sqrt(2/3), Welch df exactly 4, t(4) 2.776.
    close(c.ci95![0], -3 - 2.776 * Math.sqrt(2 / 3));
    close(c.ci95![1], -3 + 2.776 * Math.sqrt(2 / 3));
  });

  it('unpaired with unequal spread takes Welch degrees of freedom, rounded down', () => {
    const a = [0.80, 0.81, 0.79, 0.80];
    const b = [0.70, 0.76, 0.74, 0.72];
    const c = compareUnpaired([1, 2, 3, 4], a, [1, 2, 3, 4], b);
    const va = 0.0000666667 / 4;
    const vb = 0.000666667 / 4;
    const df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 3);
    assert.ok(df > 3 && df < 4, `df ${df}`);
    close(c.ci95![1] - c.diff, t975(3) * Math.sqrt(va + vb), 1e-6);
    // Every A above every B: 2 of C(8,4) = 70.
    assert.equal(c.p, 2 / 70);
  });

  it('names what is wrong with its input', () => {
    assert.throws(() => comparePaired([1, 2], [0.5], [0.5, 0.6]), /2 seeds but 1 and 2 results/);
    assert.throws(() => comparePaired([], [], []), /no seeds/);
    assert.throws(() => compareUnpaired([], [], [1], [0.5]), /a side has no seeds/);
    assert.throws(() => t975(0), /at least 1, got 0/);
    close(t975(2.9), 4.303);
    close(t975(100), 2.042);
  });
});

describe('comparing methods', () => {
  const runs = (after: number[], keys: Array<string | null | undefined>) =>
    after.map((testAfter, i) => ({ seed: i + 1, testAfter, ...(keys[i] === undefined ? {} : { warmStart: keys[i] === null ? null : { base: keys[i]! } }) }));

  it('pairs two methods by seed when every seed started RL from the same warm start', () => {
    const [c] = compareMethods([['team', 'grpo']], [
      { variant: 'team', runs: runs([0.8, 0.7, 0.9], ['k1', 'k2', 'k3']) },
      { variant: 'grpo', runs: runs([0.7, 0.6, 0.85], ['k1', 'k2', 'k3']) },
    ]);
    assert.equal(c!.paired, true);
    assert.deepEqual(c!.perSeed!.map((x) => Math.round(x * 100)), [10, 10, 5]);
    assert.equal(c!.p, 2 / 8);
  });

  it('one seed with another warm start, an unknown key or no warm start makes the comparison unpaired', () => {
    for (const keys of [['k1', 'k2', 'other'], ['k1', 'k2', undefined], ['k1', 'k2', null]]) {
      const [c] = compareMethods([['team', 'single']], [
        { variant: 'team', runs: runs([0.8, 0.7, 0.9], ['k1', 'k2', 'k3']) },
        { variant: 'single', runs: runs([0.7, 0.6, 0.85], keys) },
      ]);
      assert.equal(c!.paired, false, JSON.stringify(keys));
      assert.equal(c!.perSeed, null);
      // Unpaired: 3 + 3 results, 20 splits.
      assert.equal(Math.round(c!.p * 20) / 20, c!.p);
    }
  });

  it('keys compare by model, whatever the order they were recorded in', () => {
    assert.ok(sameWarmStart({ seed: 1, testAfter: 0.5, warmStart: { a: 'x', b: 'y' } }, { seed: 1, testAfter: 0.6, warmStart: { b: 'y', a: 'x' } }));
    assert.ok(!sameWarmStart({ seed: 1, testAfter: 0.5, warmStart: { a: 'x', b: 'y' } }, { seed: 1, testAfter: 0.6, warmStart: { a: 'x' } }));
  });

  it('unpaired uses every tested seed of each method; an untested run or a missing method is left out', () => {
    const cs = compareMethods([['team', 'single'], ['team', 'absent']], [
      { variant: 'team', runs: [...runs([0.8, 0.7], ['k1', 'k2']), { seed: 3, testAfter: null }] },
      { variant: 'single', runs: runs([0.7, 0.6, 0.65, 0.6], ['s1', 's2', 's3', 's4']) },
    ]);
    assert.equal(cs.length, 1);
    assert.deepEqual(cs[0]!.seedsA, [1, 2]);
    assert.deepEqual(cs[0]!.seedsB, [1, 2, 3, 4]);
    assert.ok(Math.abs(cs[0]!.diff - (0.75 - 0.6375)) < 1e-12);
  });

  it('compares another measure after RL where the runs carry it, and leaves out runs without it', () => {
    const withRandom = (after: number[], vs: Array<number | null>) => runs(after, ['k1', 'k2', 'k3']).map((r, i) => ({ ...r, vsRandom: vs[i] === null ? null : { before: 0.5, after: vs[i]! } }));
    const methods = [
      { variant: 'team', runs: withRandom([0.1, 0.1, 0.1], [0.9, 0.8, 0.7]) },
      { variant: 'grpo', runs: withRandom([0.5, 0.5, 0.5], [0.6, 0.6, null]) },
    ];
    const [onTest] = compareMethods([['team', 'grpo']], methods);
    const [onRandom] = compareMethods([['team', 'grpo']], methods, 'vsRandom');
    assert.equal(onTest!.metric, 'testAfter');
    assert.ok(Math.abs(onTest!.diff + 0.4) < 1e-12);
    assert.equal(onRandom!.metric, 'vsRandom');
    assert.deepEqual(onRandom!.seedsA, [1, 2]);
    assert.deepEqual(onRandom!.perSeed!.map((x) => Math.round(x * 100)), [30, 20]);
    assert.deepEqual(compareMethods([['team', 'grpo']], methods, 'optimalMoves'), []);
  });
});

describe('a method against the bot team', () => {
  it('is the per-seed difference from the bar on the same test seeds, with a t interval', () => {
    const [c] = compareWithBotTeam({ variant: 'shared', runs: [
      { seed: 1, testAfter: 12, botTeam: 11 },
      { seed: 2, testAfter: 10, botTeam: 11 },
      { seed: 3, testAfter: 14, botTeam: 11 },
      // No test after RL: left out.
      { seed: 4, testAfter: null, botTeam: 11 },
    ] });
    assert.ok(c);
    assert.equal(c.a, 'shared');
    assert.equal(c.b, BOT_TEAM);
    assert.deepEqual(c.seedsA, [1, 2, 3]);
    assert.deepEqual(c.perSeed, [1, -1, 3]);
    close(c.diff, 1);
    // sd 2, se 2/sqrt(3), t(2) 4.303.
    close(c.ci95![0], 1 - 4.303 * 2 / Math.sqrt(3));
  });

  it('runs without a bar (other environments) give no comparison', () => {
    assert.deepEqual(compareWithBotTeam({ variant: 'at-grpo', runs: [{ seed: 1, testAfter: 0.5 }] }), []);
  });
});
