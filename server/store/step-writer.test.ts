import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { openRunStore, RunStoreError, type RunStore, type StepInput } from './index.ts';
import type { TurnRecord } from '../protocol/trajectory.ts';
import { sampleStep } from './testing/sample-step.ts';
import { tempDir } from './testing/temp-dir.ts';

function freshStore(): RunStore {
  return openRunStore(join(tempDir(), '.troupe', 'troupe.db'), { now: () => 1_700_000_000_000 });
}

type StepTurn = NonNullable<StepInput['trajectories']>[number]['turns'][number];

/** The input turn as the store returns it: plain arrays, optional fields only when present. */
function expectedTurn(turn: StepTurn): Record<string, unknown> {
  const { promptTokens, responseTokens, logprobs, ...rest } = turn;
  return { ...rest, promptTokens: Array.from(promptTokens), responseTokens: Array.from(responseTokens), logprobs: Array.from(logprobs) };
}

/** A stored turn without the fields the store adds (ids, and siblings on the kept path). */
function storedFields(turn: TurnRecord & { siblings?: unknown }): Record<string, unknown> {
  const { id: _id, trajectoryId: _trajectoryId, siblings: _siblings, ...rest } = turn;
  return rest;
}

function assertStoreError(fn: () => unknown, code: RunStoreError['code'], ...patterns: RegExp[]): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof RunStoreError, `expected RunStoreError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    for (const p of patterns) assert.match(error.message, p);
    return true;
  });
}

for (const typed of [false, true]) {
  test(`a committed step reads back exactly (${typed ? 'typed arrays' : 'number arrays'} in)`, () => {
    const store = freshStore();
    const run = store.createRun({ name: 'round trip', config: { env: 'plan-path', k: 3 } });
    const input = sampleStep({ step: 1, instances: 3, turns: 2, branches: 3, promptTokens: 40, responseTokens: 17, typed });
    const result = store.commitStep(run.id, input);
    assert.equal(result.replaced, false);
    assert.equal(result.trajectoryCount, 4);
    assert.equal(store.lastCommittedStep(run.id), 1);

    const trajectories = input.trajectories ?? [];
    assert.equal(result.trajectoryIds.length, trajectories.length);
    trajectories.forEach((t, i) => {
      const detail = store.getTrajectory(result.trajectoryIds[i] ?? -1);
      assert.ok(detail);
      const { turns, ...summary } = t;
      assert.deepEqual(detail.trajectory, {
        ...summary, id: result.trajectoryIds[i], runId: run.id, step: 1, turnCount: turns.filter((u) => u.kept).length,
      });
      // Every stored row of this trajectory appears once: on the kept path or among its siblings.
      const rows = detail.turns.flatMap((u) => [u, ...u.siblings.filter((s) => s.trajectoryId === u.trajectoryId)]);
      const byKey = new Map(rows.map((r) => [`${r.turn}/${r.agentId}/${r.branch}`, r]));
      assert.equal(byKey.size, turns.length);
      for (const turn of turns) {
        const stored = byKey.get(`${turn.turn}/${turn.agentId}/${turn.branch}`);
        assert.ok(stored);
        assert.deepEqual(storedFields(stored), expectedTurn(turn));
      }
    });
    store.close();
  });
}

test('the step summary counts what was stored and keeps the timings', () => {
  const store = freshStore();
  const run = store.createRun({ name: 'counts', config: {} });
  const input = sampleStep({ step: 4, instances: 2, turns: 3, agents: ['solo'], branches: 2, promptTokens: 5, responseTokens: 3, validation: 2 });
  store.commitStep(run.id, input);
  const [summary] = store.listSteps(run.id);
  const turns = (input.trajectories ?? []).flatMap((t) => t.turns);
  assert.deepEqual(summary, {
    step: 4,
    createdAt: 1_700_000_000_000,
    timingsMs: input.timingsMs,
    trajectoryCount: 4,
    successCount: (input.trajectories ?? []).filter((t) => t.success).length,
    turnCount: turns.length,
    promptTokenCount: turns.reduce((n, u) => n + u.promptTokens.length, 0),
    responseTokenCount: turns.reduce((n, u) => n + u.responseTokens.length, 0),
  });
  store.close();
});

test('committing the last step again replaces it; an earlier step is refused until the run is rewound', () => {
  const store = freshStore();
  const run = store.createRun({ name: 'replace', config: {} });
  for (let step = 1; step <= 3; step++) store.commitStep(run.id, sampleStep({ step }));
  const before = store.listTrajectories({ runId: run.id, step: 3 });

  const retry = store.commitStep(run.id, sampleStep({ step: 3, instances: 2, seed: 42 }));
  assert.equal(retry.replaced, true);
  const after = store.listTrajectories({ runId: run.id, step: 3 });
  assert.equal(after.length, 3, 'the retried step has only its own rows');
  assert.ok(after.every((t) => !before.some((b) => b.id === t.id)));
  assert.equal(store.metricSeries({ runId: run.id, name: 'reward/mean' }).filter((p) => p.step === 3).length, 1);
  assert.deepEqual(store.checkIntegrity(), []);

  assertStoreError(() => store.commitStep(run.id, sampleStep({ step: 2 })), 'step-order', /last committed step is 3/, /rewindRun\(.*, 1\)/);
  assert.equal(store.lastCommittedStep(run.id), 3);

  const rewound = store.rewindRun(run.id, 1);
  assert.deepEqual({ removedSteps: rewound.removedSteps, lastCommittedStep: rewound.lastCommittedStep }, { removedSteps: 2, lastCommittedStep: 1 });
  assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [1]);
  assert.deepEqual(store.metricSeries({ runId: run.id, name: 'reward/mean' }).map((p) => p.step), [1]);
  store.commitStep(run.id, sampleStep({ step: 2 }));
  assert.equal(store.lastCommittedStep(run.id), 2);
  store.close();
});

test('rewinding returns the checkpoint rows it removed, so their files can be deleted', () => {
  const store = freshStore();
  const run = store.createRun({ name: 'ckpt', config: {} });
  store.addCheckpoint(run.id, { step: 0, kind: 'warmstart', path: join(run.runDir, 'warmstart.safetensors') });
  store.commitStep(run.id, { ...sampleStep({ step: 1 }), checkpoints: [{ step: 1, kind: 'rl', path: join(run.runDir, 'step-1'), policyId: 'policy-plan', meta: { bytes: 1024 } }] });
  store.commitStep(run.id, { ...sampleStep({ step: 2 }), checkpoints: [{ step: 2, kind: 'rl', path: join(run.runDir, 'step-2') }] });
  assert.equal(store.latestCheckpoint(run.id)?.path, join(run.runDir, 'step-2'));
  assert.equal(store.latestCheckpoint(run.id, 'warmstart')?.step, 0);
  const first = store.listCheckpoints(run.id)[1];
  assert.deepEqual({ ...first, id: 0, createdAt: 0 }, {
    id: 0, runId: run.id, step: 1, kind: 'rl', path: join(run.runDir, 'step-1'), policyId: 'policy-plan', meta: { bytes: 1024 }, createdAt: 0,
  });

  const rewound = store.rewindRun(run.id, 1);
  assert.deepEqual(rewound.removedCheckpoints.map((c) => c.path), [join(run.runDir, 'step-2')]);
  assert.equal(store.latestCheckpoint(run.id)?.step, 1);
  // Rewinding to step 0 discards every training step but keeps the warm-start checkpoint to restart from.
  assert.equal(store.rewindRun(run.id, 0).lastCommittedStep, null);
  assert.deepEqual(store.listCheckpoints(run.id).map((c) => c.kind), ['warmstart']);
  assert.equal(store.rewindRun(run.id, null).removedCheckpoints.length, 1);
  store.close();
});

test('a commit that throws half-way leaves nothing behind', () => {
  const store = freshStore();
  const run = store.createRun({ name: 'atomic', config: {} });
  store.commitStep(run.id, sampleStep({ step: 1 }));
  const failing = { ...sampleStep({ step: 2 }), checkpoints: [{ step: 2, kind: 'rl' as const, path: 'x.safetensors' }] };
  assert.throws(
    () => store.commitStep(run.id, failing, { beforeCommit: () => { throw new Error('power cut'); } }),
    /power cut/,
  );
  assert.equal(store.lastCommittedStep(run.id), 1);
  assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [1]);
  assert.equal(store.listTrajectories({ runId: run.id, step: 2 }).length, 0);
  assert.equal(store.stepMetrics(run.id, 2).length, 0);
  assert.equal(store.listCheckpoints(run.id).length, 0);
  // The same step commits cleanly afterwards.
  assert.equal(store.commitStep(run.id, failing).replaced, false);
  assert.equal(store.lastCommittedStep(run.id), 2);

  // A failed replacement keeps the previous version of the step.
  const kept = store.listTrajectories({ runId: run.id, step: 2 }).map((t) => t.id);
  assert.throws(() => store.commitStep(run.id, sampleStep({ step: 2, seed: 9 }), { beforeCommit: () => { throw new Error('again'); } }), /again/);
  assert.deepEqual(store.listTrajectories({ runId: run.id, step: 2 }).map((t) => t.id), kept);
  store.close();
});

test('bad inputs are rejected with the path of the offending field, before anything is written', () => {
  const store = freshStore();
  const run = store.createRun({ name: 'validation', config: {} });
  const base = sampleStep({ step: 1, instances: 2, turns: 1, agents: ['solo'], branches: 2, promptTokens: 4, responseTokens: 4 });
  const traj = (base.trajectories ?? [])[0];
  assert.ok(traj);
  const withTurn = (patch: Partial<StepTurn>, index = 0): StepInput => ({
    ...base,
    trajectories: [{ ...traj, turns: traj.turns.map((u, i) => (i === index ? { ...u, ...patch } : u)) }],
  });

  assertStoreError(() => store.commitStep(run.id, withTurn({ reward: Number.NaN })), 'invalid-input', /step 1\)/, /trajectories\[0\]\.turns\[0\]\.reward: .*NaN/);
  assertStoreError(() => store.commitStep(run.id, withTurn({ logprobs: [-1, -2] })), 'invalid-input',
    /trajectories\[0\]\.turns\[0\]\.logprobs: has 2 entries but responseTokens has 4/);
  assertStoreError(() => store.commitStep(run.id, withTurn({ logprobs: [-1, 0.5, -1, -1] })), 'invalid-input',
    /trajectories\[0\]\.turns\[0\]\.logprobs\[1\]: log-probability must be finite and <= 0, got 0.5/);
  assertStoreError(() => store.commitStep(run.id, withTurn({ responseTokens: Int32Array.from([1, -5, 2, 3]) })), 'invalid-input',
    /turns\[0\]\.responseTokens\[1\]: token id must be an integer/);
  assertStoreError(() => store.commitStep(run.id, withTurn({ groupId: 'nowhere' })), 'invalid-input',
    /turns\[0\]\.groupId: group "nowhere" is not declared/);
  for (const kept of [true, false]) {
    const allSame: StepInput = { ...base, trajectories: [{ ...traj, turns: traj.turns.map((u) => ({ ...u, kept })) }] };
    assertStoreError(() => store.commitStep(run.id, allSame), 'invalid-input',
      new RegExp(`agent "solo" at turn 0 has ${kept ? 2 : 0} kept branches; exactly one must be kept`));
  }
  assertStoreError(() => store.commitStep(run.id, { ...base, metrics: [{ name: 'loss', value: Number.POSITIVE_INFINITY }] }), 'invalid-input',
    /metrics\[0\]\.value/);
  assertStoreError(() => store.commitStep(run.id, { ...base, trajectory: [] } as StepInput), 'invalid-input', /\(root\): Unrecognized key: "trajectory"/);
  assertStoreError(() => store.commitStep(run.id, { ...base, step: -1 }), 'invalid-input', /step -1\)/, /^ {2}step: /m);
  assertStoreError(() => store.commitStep('no-such-run', base), 'unknown-run', /no run with id "no-such-run"/);

  assert.equal(store.lastCommittedStep(run.id), null);
  assert.equal(store.listSteps(run.id).length, 0);
  store.close();
});

test('run records: create, list newest first, state changes, errors kept only when failed', () => {
  let clock = 1000;
  const store = openRunStore(join(tempDir(), 'troupe.db'), { now: () => clock++ });
  const a = store.createRun({ id: 'run-a', name: 'A', config: { seed: 1 } });
  const b = store.createRun({ name: 'B', config: null, runDir: '/elsewhere/run-b' });
  assert.equal(a.runDir, store.defaultRunDir('run-a'));
  assert.equal(b.runDir, '/elsewhere/run-b');
  assert.match(b.id, /^run-\d{8}-\d{6}-[0-9a-f]{4}$/);
  assert.deepEqual(store.listRuns().map((r) => r.id), [b.id, 'run-a']);

  assert.equal(store.setRunState('run-a', 'failed', 'out of memory').error, 'out of memory');
  const resumed = store.setRunState('run-a', 'running', 'ignored');
  assert.equal(resumed.state, 'running');
  assert.equal('error' in resumed, false);
  assert.ok(resumed.updatedAt > a.updatedAt);

  assertStoreError(() => store.createRun({ id: 'run-a', name: 'dup', config: {} }), 'invalid-input', /already exists/);
  assertStoreError(() => store.createRun({ id: '../escape', name: 'bad', config: {} }), 'invalid-input', /id: must be/);
  assertStoreError(() => store.setRunState('run-a', 'exploded' as 'done'), 'invalid-input', /state/);
  assertStoreError(() => store.setRunState('ghost', 'done'), 'unknown-run', /ghost/);
  assert.equal(store.getRun('ghost'), undefined);
  store.close();
});
