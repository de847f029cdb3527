// The inspector's view model: each kept turn with its branches (kept marked, ranks, group stats),
// siblings from other rollouts flagged so they can be opened.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TrajectoryDetail, TurnRecord } from '../../../server/protocol/trajectory.ts';
import { buildTurnViews, formatProbability, formatSigned } from './inspector-model.ts';

const row = (over: Partial<TurnRecord>): TurnRecord => ({
  id: 1, trajectoryId: 5, turn: 0, agentId: 'tool', policyId: 'p', branch: 0, kept: false,
  promptText: 'p', responseText: 'r', promptTokens: [], responseTokens: [], logprobs: [],
  teamReward: 0, localReward: 0, reward: 0, ...over,
});
const summary = { id: 5, runId: 'r', step: 2, phase: 'train' as const, envName: 'plan-path', envSeed: 1, envInstance: 0, rollout: 0, success: false, teamReward: 0, localReward: 0, turnCount: 2 };

test('tree sampling: the kept branch among its siblings, in branch order, ranked', () => {
  const kept = row({ id: 12, branch: 2, kept: true, reward: 0.9 });
  const detail: TrajectoryDetail = {
    trajectory: summary,
    turns: [{ ...kept, siblings: [row({ id: 11, branch: 1, reward: 0.2 }), row({ id: 10, branch: 0, reward: 0.9 }), row({ id: 13, branch: 3, reward: -1 })] }],
  };
  const [v] = buildTurnViews(detail);
  assert.ok(v);
  assert.deepEqual(v.branches.map((b) => b.row.branch), [0, 1, 2, 3]);
  assert.equal(v.keptIndex, 2);
  assert.deepEqual(v.branches.map((b) => b.rank), [1, 3, 1, 4], 'ties share a rank');
  assert.ok(v.branches.every((b) => b.otherTrajectoryId === undefined));
  assert.equal(v.key, '0/tool');
  const rewards = [0.9, 0.2, 0.9, -1];
  const mean = rewards.reduce((a, b) => a + b) / 4;
  assert.ok(Math.abs(v.rewardMean - mean) < 1e-12);
  assert.ok(Math.abs(v.rewardStd - Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / 3)) < 1e-12);
});

test('GRPO baseline: siblings from other rollouts come after, marked with their trajectory', () => {
  const kept = row({ id: 20, kept: true, reward: 1 });
  const detail: TrajectoryDetail = { trajectory: summary, turns: [{ ...kept, siblings: [row({ id: 30, trajectoryId: 7, kept: true, reward: 0 }), row({ id: 25, trajectoryId: 6, kept: true, reward: 2 })] }] };
  const [v] = buildTurnViews(detail);
  assert.deepEqual(v!.branches.map((b) => b.otherTrajectoryId), [undefined, 6, 7]);
  assert.equal(v!.keptIndex, 0);
});

test('a single sample has zero spread', () => {
  const [v] = buildTurnViews({ trajectory: summary, turns: [{ ...row({ kept: true, reward: 3 }), siblings: [] }] });
  assert.equal(v!.rewardStd, 0);
  assert.equal(v!.rewardMean, 3);
});

test('number formats', () => {
  assert.equal(formatSigned(0.5), '+0.500');
  assert.equal(formatSigned(-0.25), '-0.250');
  assert.equal(formatSigned(0), '0.000');
  assert.equal(formatSigned(undefined), '–');
  assert.equal(formatProbability(0), '100.0%');
  assert.equal(formatProbability(Math.log(0.5)), '50.0%');
  assert.equal(formatProbability(-20), '2.1e-7%');
});
