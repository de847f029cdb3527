import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, test } from 'node:test';
import Database from 'better-sqlite3';
import { groupKey } from '../protocol/trajectory.ts';
import { openRunStore, type RunStore, type StepInput } from './index.ts';
import { metricSql } from './metric-reader.ts';
import { sampleStep } from './testing/sample-step.ts';
import { tempDir } from './testing/temp-dir.ts';
import { listTrajectoriesSql, trajectoryFilterNames, trajectorySql, type TrajectoryFilterName } from './trajectory-reader.ts';

type InputTrajectory = NonNullable<StepInput['trajectories']>[number];
interface Stored { readonly id: number; readonly step: number; readonly input: InputTrajectory }

let store: RunStore;
let runId: string;
const stored: Stored[] = [];

// Three tree-sampled steps (agents tool+plan, then solo), plus validation trajectories in each.
before(() => {
  store = openRunStore(join(tempDir(), '.troupe', 'troupe.db'));
  runId = store.createRun({ name: 'queries', config: {} }).id;
  const other = store.createRun({ name: 'noise', config: {} }).id;
  for (const step of [1, 2, 3]) {
    const input = sampleStep({ step, instances: 6, validation: 2, agents: step === 3 ? ['solo'] : ['tool', 'plan'] });
    const { trajectoryIds } = store.commitStep(runId, input);
    (input.trajectories ?? []).forEach((t, i) => stored.push({ id: trajectoryIds[i] ?? -1, step, input: t }));
    store.commitStep(other, sampleStep({ step, instances: 2 }));
  }
});

function ids(list: ReadonlyArray<{ id: number }>): number[] {
  return list.map((t) => t.id);
}

/** The order the store lists in: step, phase, instance, rollout. */
function expected(filter: (s: Stored) => boolean): number[] {
  return stored
    .filter(filter)
    .sort((a, b) => a.step - b.step || a.input.phase.localeCompare(b.input.phase) || a.input.envInstance - b.input.envInstance)
    .map((s) => s.id);
}

test('a step\'s trajectories, with each filter and with several at once', () => {
  assert.deepEqual(ids(store.listTrajectories({ runId, step: 2 })), expected((s) => s.step === 2));
  assert.deepEqual(ids(store.listTrajectories({ runId, step: 2, phase: 'validation' })), expected((s) => s.step === 2 && s.input.phase === 'validation'));
  for (const success of [true, false]) {
    assert.deepEqual(ids(store.listTrajectories({ runId, step: 1, success })), expected((s) => s.step === 1 && s.input.success === success));
  }
  assert.deepEqual(ids(store.listTrajectories({ runId, step: 1, minReward: 1.5, maxReward: 3 })),
    expected((s) => s.step === 1 && s.input.teamReward >= 1.5 && s.input.teamReward <= 3));
  assert.deepEqual(ids(store.listTrajectories({ runId, agentId: 'solo' })), expected((s) => s.step === 3));
  assert.deepEqual(ids(store.listTrajectories({ runId, step: 3, agentId: 'tool' })), []);
  assert.deepEqual(ids(store.listTrajectories({ runId, step: 2, phase: 'train', success: true, agentId: 'plan', minReward: 0 })),
    expected((s) => s.step === 2 && s.input.phase === 'train' && s.input.success));
});

test('one task followed across steps by its seed, and paging', () => {
  const seed = 1003;
  const found = store.listTrajectories({ runId, envSeed: seed });
  assert.deepEqual(ids(found), expected((s) => s.input.envSeed === seed));
  assert.deepEqual(found.map((t) => t.step), [1, 2, 3]);

  const all = ids(store.listTrajectories({ runId }));
  assert.deepEqual(all, expected(() => true));
  const page = ids(store.listTrajectories({ runId, limit: 5, offset: 5 }));
  assert.deepEqual(page, all.slice(5, 10));
});

test('query arguments are validated with the field named', () => {
  assert.throws(() => store.listTrajectories({ runId, step: -2 }), /listTrajectories: invalid input\n {2}step: /);
  assert.throws(() => store.listTrajectories({ runId, minReward: Number.NaN }), /minReward/);
  assert.throws(() => store.metricSeries({ runId, name: '' }), /metricSeries: invalid input\n {2}name: must be a non-empty string/);
});

test('a tree-sampled trajectory comes back with its kept path and the other K-1 branches of each turn', () => {
  const target = stored.find((s) => s.step === 1 && s.input.phase === 'train' && s.input.envInstance === 2);
  assert.ok(target);
  const detail = store.getTrajectory(target.id);
  assert.ok(detail);
  const keptInput = target.input.turns.filter((u) => u.kept);
  assert.deepEqual(detail.turns.map((u) => [u.turn, u.agentId, u.branch]), keptInput.map((u) => [u.turn, u.agentId, u.branch]));
  for (const turn of detail.turns) {
    assert.equal(turn.groupId, groupKey(2, turn.agentId, turn.turn));
    assert.deepEqual(
      turn.siblings.map((s) => s.branch),
      target.input.turns.filter((u) => u.turn === turn.turn && u.agentId === turn.agentId && !u.kept).map((u) => u.branch),
    );
    assert.ok(turn.siblings.every((s) => !s.kept && s.trajectoryId === target.id && s.groupId === turn.groupId));
  }
  assert.equal(store.getTrajectory(987_654), undefined);
});

test('independent rollouts (GRPO baseline): siblings are the same turn in the other rollouts of the task', () => {
  const local = openRunStore(join(tempDir(), 'troupe.db'));
  const run = local.createRun({ name: 'grpo', config: {} }).id;
  const base = sampleStep({ step: 1, instances: 1, turns: 2, agents: ['solo'], branches: 1, validation: 0 });
  const template = (base.trajectories ?? [])[0];
  assert.ok(template);
  const rollouts = 3;
  const trajectories = Array.from({ length: rollouts }, (_, rollout) => ({
    ...template,
    rollout,
    turns: template.turns.map((u) => ({ ...u, reward: rollout, advantage: rollout - 1 })),
  }));
  const groups = [0, 1].map((turn) => ({ groupId: groupKey(0, 'solo', turn), envInstance: 0, agentId: 'solo', turn, size: rollouts, rewardMean: 1, rewardStd: 1 }));
  const { trajectoryIds } = local.commitStep(run, { ...base, groups, trajectories });
  const detail = local.getTrajectory(trajectoryIds[1] ?? -1);
  assert.ok(detail);
  assert.equal(detail.turns.length, 2);
  for (const turn of detail.turns) {
    assert.deepEqual(turn.siblings.map((s) => s.trajectoryId), [trajectoryIds[0], trajectoryIds[2]]);
    assert.deepEqual(turn.siblings.map((s) => s.reward), [0, 2]);
  }
  local.close();
});

test('ungrouped branches (e.g. validation) are siblings within their own trajectory', () => {
  const local = openRunStore(join(tempDir(), 'troupe.db'));
  const run = local.createRun({ name: 'val', config: {} }).id;
  const base = sampleStep({ step: 1, instances: 0, validation: 1 });
  const v = (base.trajectories ?? [])[0];
  assert.ok(v);
  const extra = v.turns.map((u) => ({ ...u, branch: 1, kept: false }));
  const { trajectoryIds } = local.commitStep(run, { ...base, trajectories: [{ ...v, turns: [...v.turns, ...extra] }] });
  const detail = local.getTrajectory(trajectoryIds[0] ?? -1);
  assert.ok(detail);
  assert.deepEqual(detail.turns.map((u) => [u.agentId, u.branch, u.siblings.map((s) => s.branch)]), [['tool', 0, [1]], ['plan', 0, [1]]]);
  assert.ok(detail.turns.every((u) => u.groupId === undefined && u.advantage === undefined));
  local.close();
});

test('metric series ordered by step, per agent and per policy; latest values; one step\'s values', () => {
  assert.deepEqual(store.metricSeries({ runId, name: 'reward/mean', agentId: 'tool' }), [{ step: 1, value: 5 }, { step: 2, value: 6 }]);
  assert.deepEqual(store.metricSeries({ runId, name: 'reward/mean', agentId: 'solo' }), [{ step: 3, value: 7 }]);
  assert.deepEqual(store.metricSeries({ runId, name: 'train/kl', policyId: 'policy-plan', fromStep: 2 }), [{ step: 2, value: 0.02 }]);
  assert.equal(store.metricSeries({ runId, name: 'reward/mean' }).length, 3, 'the team-wide series is its own series');
  assert.deepEqual(store.metricSeries({ runId, name: 'no/such' }), []);

  assert.deepEqual(store.listMetricSeries(runId), [
    { name: 'reward/mean' },
    { name: 'reward/mean', agentId: 'plan' },
    { name: 'reward/mean', agentId: 'solo' },
    { name: 'reward/mean', agentId: 'tool' },
    { name: 'train/kl', policyId: 'policy-plan' },
    { name: 'train/kl', policyId: 'policy-solo' },
    { name: 'train/kl', policyId: 'policy-tool' },
  ]);
  const latest = store.latestMetrics(runId);
  assert.deepEqual(latest.find((m) => m.agentId === 'tool'), { name: 'reward/mean', agentId: 'tool', value: 6, step: 2 });
  assert.deepEqual(latest.find((m) => m.agentId === 'solo'), { name: 'reward/mean', agentId: 'solo', value: 7, step: 3 });
  assert.equal(latest.length, 7);
  assert.deepEqual(store.stepMetrics(runId, 3).map((m) => [m.name, m.agentId ?? m.policyId ?? '']), [
    ['reward/mean', ''], ['reward/mean', 'solo'], ['train/kl', 'policy-solo'],
  ]);
});

test('the editor\'s queries are answered from indexes (EXPLAIN QUERY PLAN)', () => {
  const raw = new Database(store.path, { readonly: true });
  const plan = (sql: string): string[] => {
    const named = { runId: 'r', step: 1, phase: 'train', success: 1, envSeed: 1, minReward: 0, maxReward: 1, agentId: 'a', limit: 1, offset: 0 };
    const args = sql.includes('@') ? [named] : Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 1);
    return raw.prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`).all(...args).map((r) => r.detail);
  };
  const assertIndexed = (name: string, sql: string, allowSort = false) => {
    const details = plan(sql);
    const fullScans = details.filter((d) => /^SCAN /.test(d));
    assert.deepEqual(fullScans, [], `${name} scans a table:\n${details.join('\n')}`);
    if (!allowSort) assert.ok(!details.some((d) => d.includes('TEMP B-TREE')), `${name} sorts:\n${details.join('\n')}`);
  };

  for (const [name, sql] of Object.entries({ ...trajectorySql, ...metricSql })) assertIndexed(name, sql);
  // A step's listing with any combination of the other filters walks the (run, step, …) index in order.
  const others = trajectoryFilterNames.filter((f) => f !== 'step' && f !== 'envSeed');
  for (let mask = 0; mask < 1 << others.length; mask++) {
    const present: TrajectoryFilterName[] = ['step', ...others.filter((_, i) => mask & (1 << i))];
    assertIndexed(`listTrajectories(${present.join(', ')})`, listTrajectoriesSql(present));
  }
  assert.match(plan(listTrajectoriesSql(['envSeed'])).join('\n'), /USING INDEX trajectories_by_seed \(run_id=\? AND env_seed=\?\)/);
  assert.match(plan(trajectorySql.turnsOfGroup).join('\n'), /USING INDEX turns_by_group \(group_id=\?\)/);
  raw.close();
});
