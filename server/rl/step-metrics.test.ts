/** Hand-computed rollout metrics: the per-agent spreads are unbiased stds, 0 for a single sample. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RolloutResult, Sample } from './rollout.ts';
import { rolloutMetrics } from './step-metrics.ts';

function sample(agent: string, reward: number, advantage: number): Sample {
  return {
    envInstance: 0,
    envSeed: 0,
    rollout: 0,
    agent,
    policyId: 'p',
    turn: 0,
    branch: 0,
    kept: true,
    prompt: '',
    response: '',
    promptTokens: new Int32Array(0),
    responseTokens: new Int32Array(2),
    logprobs: new Float32Array(2),
    teamReward: reward,
    localReward: 0,
    reward,
    score: reward,
    groupId: 'g',
    advantage,
    parseError: null,
    invalid: false,
    truncated: false,
    executions: [],
  };
}

const rollout = (samples: Sample[]): RolloutResult => ({ trajectories: [], samples, inferenceMs: 0, envMs: 0, programMs: 0, programs: 0, generatedTokens: 0 });

const value = (metrics: ReturnType<typeof rolloutMetrics>, name: string, agentId: string) => {
  const m = metrics.find((x) => x.name === name && x.agentId === agentId);
  assert.ok(m, `${name} of ${agentId}`);
  return m.value;
};

test('reward/std and advantage/std per agent: the unbiased std (n − 1), the estimator GRPO scales advantages with; one sample gives 0', () => {
  // Rewards [1, 2, 3, 4]: mean 2.5, squared deviations 5, so √(5/3) (the population std would be √(5/4)).
  // Advantages [1, -1, 1, -1]: squared deviations 4, so √(4/3).
  const m = rolloutMetrics(rollout([sample('a', 1, 1), sample('a', 2, -1), sample('a', 3, 1), sample('a', 4, -1), sample('b', 7, 0.5)]));
  assert.ok(Math.abs(value(m, 'reward/std', 'a') - Math.sqrt(5 / 3)) < 1e-12);
  assert.ok(Math.abs(value(m, 'advantage/std', 'a') - Math.sqrt(4 / 3)) < 1e-12);
  assert.equal(value(m, 'reward/std', 'b'), 0);
  assert.equal(value(m, 'advantage/std', 'b'), 0);
});
