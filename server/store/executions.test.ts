/**
 * The programs a turn ran (schema version 3): stored with the step, read back on the turn records,
 * absent for turns that ran none (including every turn written before version 3), bounded on the way
 * in, and checked against the protocol schema on the way out.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import type { Execution, TurnRecord } from '../protocol/trajectory.ts';
import { encodeInt32, encodeFloat32 } from './blob-codec.ts';
import { MAX_EXECUTIONS_BYTES } from './executions-column.ts';
import { openRunStore, RunStoreError, SCHEMA_VERSION, type StepInput } from './index.ts';
import { migrations, TROUPE_APPLICATION_ID } from './schema-migrations.ts';
import { sampleStep } from './testing/sample-step.ts';
import { tempDir } from './testing/temp-dir.ts';

const ok: Execution = {
  language: 'python', code: 'print(sum(range(10)))\n', stdin: '', status: 'ok', exitCode: 0, signal: null,
  stdout: '45\n', stderr: '', truncated: false, durationMs: 12.5,
};
const killed: Execution = {
  language: 'python', code: 'while True:\n    print("é" * 80)\n', stdin: '3 4\n', status: 'output-limit', exitCode: null, signal: 'SIGKILL',
  stdout: 'é'.repeat(1000), stderr: 'Traceback…\n\u0000odd bytes\n', truncated: true, durationMs: 843,
};
const refused: Execution = {
  language: 'python', code: 'import os', stdin: '', status: 'refused', exitCode: null, signal: null,
  stdout: '', stderr: 'sandbox: python3 not found', truncated: false, durationMs: 0,
};

type StepTurn = NonNullable<StepInput['trajectories']>[number]['turns'][number];

/** sampleStep with executions on some turns: two on the first row, one on the third, none elsewhere. */
function stepWithExecutions(step: number): StepInput {
  const input = sampleStep({ step, instances: 2, turns: 1, branches: 3, validation: 1 });
  const [first] = input.trajectories ?? [];
  assert.ok(first && first.turns.length >= 3);
  const withRuns = (turn: StepTurn, executions: Execution[]): StepTurn => ({ ...turn, executions });
  first.turns[0] = withRuns(first.turns[0]!, [ok, killed]);
  first.turns[2] = withRuns(first.turns[2]!, [refused]);
  return input;
}

/** Every stored row of a trajectory detail, by `turn/agent/branch`. */
function rowsByKey(turns: readonly (TurnRecord & { siblings: readonly TurnRecord[] })[]): Map<string, TurnRecord> {
  const rows = turns.flatMap((u) => [u, ...u.siblings.filter((s) => s.trajectoryId === u.trajectoryId)]);
  return new Map(rows.map((r) => [`${r.turn}/${r.agentId}/${r.branch}`, r]));
}

function assertStoreError(fn: () => unknown, code: RunStoreError['code'], ...patterns: RegExp[]): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof RunStoreError, `expected RunStoreError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    for (const p of patterns) assert.match(error.message, p);
    return true;
  });
}

test('executions round-trip through a real file, and turns that ran none have no executions field', () => {
  const path = join(tempDir(), '.troupe', 'troupe.db');
  const input = stepWithExecutions(1);
  let store = openRunStore(path);
  const run = store.createRun({ name: 'programs', config: {} });
  const { trajectoryIds } = store.commitStep(run.id, input);
  store.close();

  store = openRunStore(path); // read from the file, not from anything the writer kept
  const trajectories = input.trajectories ?? [];
  trajectories.forEach((t, i) => {
    const detail = store.getTrajectory(trajectoryIds[i] ?? -1);
    assert.ok(detail);
    const byKey = rowsByKey(detail.turns);
    assert.equal(byKey.size, t.turns.length);
    for (const turn of t.turns) {
      const stored = byKey.get(`${turn.turn}/${turn.agentId}/${turn.branch}`);
      assert.ok(stored);
      if (turn.executions === undefined) assert.ok(!('executions' in stored), `${turn.agentId}/${turn.branch} has no executions field`);
      else assert.deepEqual(stored.executions, turn.executions);
    }
  });
  // Siblings fetched through the group carry theirs too.
  const first = store.getTrajectory(trajectoryIds[0] ?? -1);
  const all = first?.turns.flatMap((u) => [u, ...u.siblings]) ?? [];
  assert.equal(all.filter((r) => r.executions !== undefined).length, 2);
  store.close();
});

test('an empty list is stored as none', () => {
  const store = openRunStore(join(tempDir(), 'troupe.db'));
  const run = store.createRun({ name: 'empty', config: {} });
  const input = sampleStep({ step: 0, instances: 1, turns: 1, agents: ['solo'], branches: 1, validation: 0 });
  const [t] = input.trajectories ?? [];
  assert.ok(t?.turns[0]);
  t.turns[0] = { ...t.turns[0], executions: [] };
  const { trajectoryIds } = store.commitStep(run.id, input);
  const [turn] = store.getTrajectory(trajectoryIds[0] ?? -1)?.turns ?? [];
  assert.ok(turn && !('executions' in turn));
  store.close();
});

test('a version-2 database with turns migrates, and its turns read back exactly as before, without executions', () => {
  const path = join(tempDir(), 'troupe.db');
  const raw = new Database(path);
  raw.pragma(`application_id = ${TROUPE_APPLICATION_ID}`);
  for (const m of migrations.filter((m) => m.version <= 2)) {
    raw.exec(m.sql);
    raw.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)').run(m.version, m.name);
  }
  raw.pragma('user_version = 2');
  raw.prepare("INSERT INTO runs (id, name, state, config, run_dir, last_committed_step, created_at, updated_at, target_steps) VALUES ('old', 'old run', 'done', '{}', 'runs/old', 0, 1, 1, 10)").run();
  raw.prepare(`INSERT INTO steps (run_id, step, timings, trajectory_count, success_count, turn_count, prompt_token_count, response_token_count, created_at)
    VALUES ('old', 0, '{}', 1, 1, 1, 2, 1, 1)`).run();
  const trajectoryId = Number(raw.prepare(`INSERT INTO trajectories (run_id, step, phase, env_name, env_seed, env_instance, rollout, success, team_reward, local_reward, turn_count)
    VALUES ('old', 0, 'train', 'plan-path', 7, 0, 0, 1, 1, 0, 1)`).run().lastInsertRowid);
  // The version-2 turns table, written as a version-2 build wrote it.
  raw.prepare(`INSERT INTO turns (trajectory_id, ordinal, turn, agent_id, policy_id, branch, kept, prompt_text, response_text,
      prompt_tokens, response_tokens, logprobs, team_reward, local_reward, reward, advantage, group_id, parse_error)
    VALUES (?, 0, 0, 'solo', 'solo', 0, 1, 'prompt', 'response', ?, ?, ?, 1, 0, 1, NULL, NULL, NULL)`)
    .run(trajectoryId, encodeInt32([5, 6]), encodeInt32([7]), encodeFloat32([-0.5]));
  raw.close();

  const store = openRunStore(path);
  const detail = store.getTrajectory(trajectoryId);
  assert.ok(detail);
  const [turn] = detail.turns;
  assert.deepEqual(turn, {
    id: turn?.id, trajectoryId, turn: 0, agentId: 'solo', policyId: 'solo', branch: 0, kept: true, promptText: 'prompt', responseText: 'response',
    promptTokens: [5, 6], responseTokens: [7], logprobs: [-0.5], teamReward: 1, localReward: 0, reward: 1, siblings: [],
  });
  // The migrated database takes new steps with executions.
  const next = stepWithExecutions(1);
  const { trajectoryIds } = store.commitStep('old', next);
  const again = store.getTrajectory(trajectoryIds[0] ?? -1);
  assert.deepEqual(again?.turns.flatMap((u) => [u, ...u.siblings]).find((r) => r.executions !== undefined)?.executions?.[0], ok);
  store.close();
  const check = new Database(path, { readonly: true });
  assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  assert.equal(SCHEMA_VERSION, 3);
  check.close();
});

/** A store with one committed turn that ran `ok`, and the id of that turn's row. */
function storeWithOneExecution() {
  const path = join(tempDir(), 'troupe.db');
  const store = openRunStore(path);
  const run = store.createRun({ name: 'damaged', config: {} });
  const input = sampleStep({ step: 0, instances: 1, turns: 1, agents: ['solo'], branches: 1, validation: 0 });
  const [t] = input.trajectories ?? [];
  assert.ok(t?.turns[0]);
  t.turns[0] = { ...t.turns[0], executions: [ok] };
  const trajectoryId = store.commitStep(run.id, input).trajectoryIds[0] ?? -1;
  const turnId = store.getTrajectory(trajectoryId)?.turns[0]?.id ?? -1;
  return { store, path, trajectoryId, turnId };
}

for (const [what, cell] of [
  ['a field of the wrong type', JSON.stringify([{ ...ok, exitCode: 'zero' }])],
  ['a status the protocol does not know', JSON.stringify([{ ...ok, status: 'crashed' }])],
  ['an object instead of a list', JSON.stringify(ok)],
  ['a missing field', JSON.stringify([{ ...ok, stdout: undefined }])],
  ['an unknown field', JSON.stringify([{ ...ok, extra: 1 }])],
] as const) {
  test(`a corrupted executions cell (${what}) fails with a RunStoreError naming the turn`, () => {
    const { store, path, trajectoryId, turnId } = storeWithOneExecution();
    const raw = new Database(path);
    raw.prepare('UPDATE turns SET executions = ? WHERE id = ?').run(cell, turnId);
    raw.close();
    assertStoreError(() => store.getTrajectory(trajectoryId), 'corrupt', new RegExp(`turn row ${turnId} executions`), /not a list of executions/);
    store.close();
  });
}

test('text that is not JSON never gets into the column, and reads as corrupt if it does', () => {
  const { store, path, trajectoryId, turnId } = storeWithOneExecution();
  const raw = new Database(path);
  assert.throws(() => raw.prepare('UPDATE turns SET executions = ? WHERE id = ?').run('[{"language":', turnId), /CHECK constraint failed/);
  // With the constraint off (a hand-edited file), the reader still names the row instead of crashing.
  raw.pragma('ignore_check_constraints = ON');
  raw.prepare('UPDATE turns SET executions = ? WHERE id = ?').run('[{"language":', turnId);
  raw.close();
  assertStoreError(() => store.getTrajectory(trajectoryId), 'corrupt', new RegExp(`turn row ${turnId} executions: the stored value is not JSON`));
  store.close();
});

test('a turn whose executions exceed the per-turn bound is refused with its path, and nothing is written', () => {
  const store = openRunStore(join(tempDir(), 'troupe.db'));
  const run = store.createRun({ name: 'huge', config: {} });
  const input = sampleStep({ step: 0, instances: 1, turns: 1, agents: ['solo'], branches: 2, validation: 0 });
  const [t] = input.trajectories ?? [];
  assert.ok(t?.turns[1]);
  const big: Execution = { ...ok, stdout: 'x'.repeat(MAX_EXECUTIONS_BYTES / 2) };
  t.turns[1] = { ...t.turns[1], executions: [big, big] };
  assertStoreError(() => store.commitStep(run.id, input), 'invalid-input', /trajectories\[0\]\.turns\[1\]\.executions: take \d+ bytes as JSON, over the 4194304/);
  assert.equal(store.lastCommittedStep(run.id), null);
  // Just under the bound is fine.
  t.turns[1] = { ...t.turns[1], executions: [{ ...ok, stdout: 'x'.repeat(MAX_EXECUTIONS_BYTES - 1000) }] };
  store.commitStep(run.id, input);
  assert.equal(store.lastCommittedStep(run.id), 0);
  store.close();
});

test('executions in a step input are strict: a misspelt field fails with its path', () => {
  const store = openRunStore(join(tempDir(), 'troupe.db'));
  const run = store.createRun({ name: 'strict', config: {} });
  const input = sampleStep({ step: 0, instances: 1, turns: 1, agents: ['solo'], branches: 1, validation: 0 });
  const [t] = input.trajectories ?? [];
  assert.ok(t?.turns[0]);
  t.turns[0] = { ...t.turns[0], executions: [{ ...ok, stdOut: '' } as Execution] };
  assertStoreError(() => store.commitStep(run.id, input), 'invalid-input', /trajectories\[0\]\.turns\[0\]\.executions\[0\]/);
  store.close();
});
