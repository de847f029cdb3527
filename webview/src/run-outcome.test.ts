import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeBest, describeOutcome, OutcomeSeries, secondsPerStep, shortOutcome } from './run-outcome.ts';

const series = (name: string, points: [number, number][], scope: { agentId?: string } = {}) => ({ name, ...scope, points: points.map(([step, value]) => ({ step, value })) });

/** A 3-step run: validation 50% → 75% → 100% → 75%, tested at step 0 and after the last step. */
const history = [
  series('val/success', [[0, 0.5], [1, 0.75], [2, 1], [3, 0.75]]),
  series('test/success', [[0, 0.484], [3, 0.609]]),
  series('test/policy_step', [[3, 3]]),
  // Step 3 includes its 9 s test; the RL steps themselves took 3, 5 and 4 s.
  series('time/total_ms', [[1, 3000], [2, 5000], [3, 13000]]),
  series('time/test_ms', [[3, 9000]]),
  // Another agent's success is not the team's.
  series('val/success', [[2, 1], [3, 1]], { agentId: 'tool' }),
];

test('the outcome of a finished run: test before and after with the RL gain, the best step, the mean step time', () => {
  const o = new OutcomeSeries().addSeries(history).outcome();
  assert.deepEqual(o.test, { before: 0.484, after: 0.609, step: 3, policyStep: 3, games: [] });
  assert.deepEqual(o.best, { step: 2, success: 1 });
  // (3 + 5 + (13 − 9)) / 3 = 4 s: the final test is not a step's training time.
  assert.equal(o.meanStepMs, 4000);
  assert.equal(o.timedSteps, 3);
  assert.equal(describeOutcome(o), 'test 48.4% → 60.9% (RL gain +12.5 points) · best validation: step 2 (100.0%)');
  assert.equal(shortOutcome(o), 'test 48% → 61% (+12.5)');
  assert.equal(secondsPerStep(o.meanStepMs!), '4.0 s/step');
});

test('a tie keeps the earlier step, and a warm start no RL step beat is named as such', () => {
  const o = new OutcomeSeries().addSeries([series('val/success', [[0, 0.8], [1, 0.6], [2, 0.8]])]).outcome();
  assert.deepEqual(o.best, { step: 0, success: 0.8 });
  assert.equal(describeBest(o.best!), 'best validation: step 0, the warm start (80.0%; no RL step validated better)');
  assert.equal(o.test, null, 'no test until the last step has one');
  assert.equal(shortOutcome(o), null);
});

test('a test of the best validated policy says whose policy played, and progress adds step by step', () => {
  const s = new OutcomeSeries().addSeries([series('val/success', [[0, 0.5]]), series('test/success', [[0, 0.5]])]);
  assert.equal(s.outcome().meanStepMs, null);
  s.addMetrics(1, [{ name: 'val/success', value: 0.9 }, { name: 'time/total_ms', value: 2000 }, { name: 'val/success', value: 0, agentId: 'plan' }]);
  s.addMetrics(2, [{ name: 'val/success', value: 0.7 }, { name: 'time/total_ms', value: 7000 }, { name: 'time/test_ms', value: 1000 }, { name: 'test/success', value: 0.45 }, { name: 'test/policy_step', value: 1 }]);
  const o = s.outcome();
  assert.deepEqual(o.test, { before: 0.5, after: 0.45, step: 2, policyStep: 1, games: [] });
  assert.equal(describeOutcome(o), "test 50.0% → 45.0% with step 1's policy (RL gain -5.0 points) · best validation: step 1 (90.0%)");
  assert.equal(o.meanStepMs, 4000);
});

test("a game's test measures follow its self-play success: percentages for rates, numbers for scores, in a fixed order", () => {
  const o = new OutcomeSeries()
    .addSeries([
      series('test/success', [[0, 0.875], [30, 0.984]]),
      series('test/optimal_move_rate', [[0, 0.609], [30, 0.641]]),
      series('test/vs_minimax/non_loss_rate', [[0, 0.578], [30, 0.055]]),
      // Only after RL (no step-0 test of it), and another agent's is not the team's.
      series('test/score', [[30, 3.5]]),
      series('test/vs_random/win_rate', [[0, 0.1], [30, 0.2]], { agentId: 'x' }),
    ])
    .outcome();
  assert.deepEqual(o.test!.games.map((g) => g.label), ['non-loss vs minimax', 'perfect moves', 'score']);
  assert.equal(
    describeOutcome(o),
    'test 87.5% → 98.4% (RL gain +10.9 points); non-loss vs minimax 57.8% → 5.5%, perfect moves 60.9% → 64.1%, score 3.50',
  );
});
