// Messages between the host and the webviews: good ones parse in both directions, bad ones are
// refused with an error naming the message and what was wrong, and the saved states parse.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  compareStateSchema,
  compareToHostSchema,
  dashboardStateSchema,
  dashboardToHostSchema,
  hostToCompareSchema,
  hostToDashboardSchema,
  hostToInspectorSchema,
  inspectorStateSchema,
  inspectorToHostSchema,
  parseMessage,
} from './messages.ts';

const run = { id: 'r1', name: 'plan-path L2', state: 'running', createdAt: 1, updatedAt: 2, runDir: '/w/.troupe/runs/r1', lastCommittedStep: 3, targetSteps: 60 };
const turn = {
  id: 11, trajectoryId: 5, turn: 0, agentId: 'tool', policyId: 'p-tool', branch: 1, kept: true,
  promptText: 'grid', responseText: 'UR', promptTokens: [1, 2], responseTokens: [64, 61, 9], logprobs: [-0.1, -2, -0.01],
  teamReward: 0.5, localReward: 0.25, reward: 0.75, advantage: 1.1, groupId: '0/tool/0',
};
const detail = {
  trajectory: { id: 5, runId: 'r1', step: 3, phase: 'train', envName: 'plan-path', envSeed: 42, envInstance: 0, rollout: 0, success: true, teamReward: 1, localReward: 0.5, turnCount: 1 },
  turns: [{ ...turn, siblings: [{ ...turn, id: 12, branch: 0, kept: false, reward: 0.1, advantage: -1.1, parseError: 'no actions' }] }],
};

test('host → dashboard messages parse', () => {
  const good = [
    { type: 'init', runId: 'r1', run, steps: 200, series: [{ name: 'reward/mean', agentId: 'plan', points: [{ step: 1, value: 0.5 }] }] },
    { type: 'init', runId: 'r1', run: null, steps: null, series: [] },
    { type: 'series', series: [{ name: 'kl/approx', policyId: 'p', points: [] }] },
    { type: 'progress', step: 4, steps: 200, stepMs: 812, etaMs: null, metrics: [{ name: 'entropy', value: 1.2, policyId: 'p' }] },
    { type: 'warmUp', modelId: 'base', model: 1, models: 1, stage: 'training', step: 12, steps: 300, loss: 1.5, etaMs: 40_000, checkpointStep: null, points: [{ step: 12, loss: 1.5 }] },
    { type: 'init', runId: 'r1', run, steps: 2, series: [], warmUp: { modelId: 'base', model: 1, models: 1, stage: 'demonstrations', step: 0, steps: 300, loss: null, etaMs: null, checkpointStep: null, points: [] } },
    { type: 'state', run: { ...run, state: 'failed', error: 'out of memory' } },
    { type: 'connection', connected: false },
    { type: 'error', message: 'run not found' },
  ];
  for (const m of good) {
    const r = parseMessage(hostToDashboardSchema, m, 'host → dashboard');
    assert.ok(r.ok, r.ok ? '' : r.error);
  }
});

test('bad host → dashboard messages are refused with what was wrong', () => {
  const nan = parseMessage(hostToDashboardSchema, { type: 'progress', step: 4, steps: 200, stepMs: 1, etaMs: null, metrics: [{ name: 'entropy', value: NaN }] }, 'host → dashboard');
  assert.ok(!nan.ok);
  assert.match(nan.error, /message "progress"/);
  assert.match(nan.error, /metrics\[0\]\.value|metrics.*value/);
  const badStage = parseMessage(hostToDashboardSchema, { type: 'warmUp', modelId: 'base', model: 1, models: 1, stage: 'cooling', step: 1, steps: 3, loss: 1, etaMs: null, checkpointStep: null, points: [] }, 'host → dashboard');
  assert.ok(!badStage.ok && /message "warmUp"/.test(badStage.error) && /stage/.test(badStage.error));
  const unknown = parseMessage(hostToDashboardSchema, { type: 'explode' }, 'host → dashboard');
  assert.ok(!unknown.ok && /message "explode"/.test(unknown.error));
  const noType = parseMessage(hostToDashboardSchema, 'hello', 'host → dashboard');
  assert.ok(!noType.ok && /without a "type"/.test(noType.error));
  const extra = parseMessage(hostToDashboardSchema, { type: 'connection', connected: true, script: 'x' }, 'host → dashboard');
  assert.ok(!extra.ok, 'unknown keys are refused, not carried along');
  const negative = parseMessage(hostToDashboardSchema, { type: 'progress', step: -1, steps: 200, stepMs: 1, etaMs: null, metrics: [] }, 'host → dashboard');
  assert.ok(!negative.ok && /step/.test(negative.error));
});

test('dashboard → host messages parse; bad ones are refused', () => {
  for (const m of [{ type: 'ready' }, { type: 'requestSeries', fromStep: 7 }, { type: 'log', level: 'warn', message: 'x' }]) {
    assert.ok(parseMessage(dashboardToHostSchema, m, 'dashboard').ok, JSON.stringify(m));
  }
  for (const m of [{ type: 'requestSeries', fromStep: -3 }, { type: 'requestSeries' }, { type: 'log', level: 'fatal', message: 'x' }, { type: 'openTrajectory', trajectoryId: 1 }, null]) {
    const r = parseMessage(dashboardToHostSchema, m, 'dashboard → host');
    assert.ok(!r.ok, JSON.stringify(m));
    assert.match(r.error, /^dashboard → host: refused/);
  }
});

test('host → inspector messages parse, the trajectory detail checked in depth', () => {
  for (const m of [
    { type: 'loading', trajectoryId: 5 },
    { type: 'trajectory', detail },
    { type: 'taskHistory', envSeed: 42, phase: 'validation', trajectories: [detail.trajectory] },
    { type: 'connection', connected: true },
  ]) {
    const r = parseMessage(hostToInspectorSchema, m, 'host → inspector');
    assert.ok(r.ok, r.ok ? '' : r.error);
  }
  const badLogprob = structuredClone(detail);
  badLogprob.turns[0]!.siblings[0]!.logprobs = [-0.1, 3, -1];
  const r = parseMessage(hostToInspectorSchema, { type: 'trajectory', detail: badLogprob }, 'host → inspector');
  assert.ok(!r.ok);
  assert.match(r.error, /log-probability must be finite and <= 0, got 3/);
  assert.match(r.error, /siblings/);
});

test('a trajectory whose turns ran programs parses, and a bad execution is refused with its path', () => {
  const program = { language: 'python', code: 'print(1)', stdin: '', status: 'ok', exitCode: 0, signal: null, stdout: '1\n', stderr: '', truncated: false, durationMs: 12 };
  const withPrograms = structuredClone(detail);
  Object.assign(withPrograms.turns[0]!, { executions: [program] });
  const ok = parseMessage(hostToInspectorSchema, { type: 'trajectory', detail: withPrograms }, 'host → inspector');
  assert.ok(ok.ok, ok.ok ? '' : ok.error);
  assert.ok(ok.ok && ok.message.type === 'trajectory' && ok.message.detail.turns[0]?.executions?.[0]?.stdout === '1\n');
  Object.assign(withPrograms.turns[0]!, { executions: [{ ...program, status: 'crashed' }] });
  const bad = parseMessage(hostToInspectorSchema, { type: 'trajectory', detail: withPrograms }, 'host → inspector');
  assert.ok(!bad.ok);
  assert.match(bad.error, /executions/);
});

test('inspector → host messages parse; bad ones are refused', () => {
  for (const m of [{ type: 'ready' }, { type: 'openTrajectory', trajectoryId: 9 }, { type: 'compareWith', trajectoryId: 5 }, { type: 'compareWith', trajectoryId: 5, otherId: 6 }]) {
    assert.ok(parseMessage(inspectorToHostSchema, m, 'inspector').ok, JSON.stringify(m));
  }
  for (const m of [{ type: 'openTrajectory', trajectoryId: 0 }, { type: 'openTrajectory', trajectoryId: '9' }, { type: 'compareWith' }, { type: 'requestSeries', fromStep: 1 }]) {
    assert.ok(!parseMessage(inspectorToHostSchema, m, 'inspector').ok, JSON.stringify(m));
  }
});

test('saved webview states parse with defaults; junk does not', () => {
  assert.deepEqual(dashboardStateSchema.parse({ runId: 'r1' }), { runId: 'r1', hiddenCharts: [], fitAllCharts: [] });
  assert.deepEqual(inspectorStateSchema.parse({ trajectoryId: 3 }), { trajectoryId: 3, shading: 'logprob' });
  assert.ok(!dashboardStateSchema.safeParse(undefined).success);
  assert.ok(!dashboardStateSchema.safeParse({ runId: '' }).success);
  assert.ok(!inspectorStateSchema.safeParse({ trajectoryId: 3, shading: 'rainbow' }).success);
});

test('run comparison messages and state parse; a bad one is refused naming the field', () => {
  const good = [
    { type: 'init', runs: [{ runId: 'r1', label: 'tiny · 15:40', run, series: [{ name: 'entropy', agentId: 'plan', points: [{ step: 0, value: 2 }] }] }, { runId: 'r2', label: 'tiny · 15:52', run: null, series: [], error: 'run not found' }] },
    { type: 'progress', runId: 'r1', step: 4, metrics: [{ name: 'entropy', value: 1.2, agentId: 'plan' }] },
    { type: 'state', run, label: 'tiny · 15:40' },
    { type: 'connection', connected: true },
  ];
  for (const m of good) {
    const r = parseMessage(hostToCompareSchema, m, 'host → compare');
    assert.ok(r.ok, r.ok ? '' : r.error);
  }
  const bad = parseMessage(hostToCompareSchema, { type: 'init', runs: [] }, 'host → compare');
  assert.ok(!bad.ok && /runs/.test(bad.error), bad.ok ? '' : bad.error);
  assert.ok(parseMessage(compareToHostSchema, { type: 'ready' }, 'compare → host').ok);
  assert.deepEqual(compareStateSchema.parse({ runIds: ['r1', 'r2'] }), { runIds: ['r1', 'r2'], smoothing: 0.6 });
  assert.ok(!compareStateSchema.safeParse({ runIds: ['r1'], smoothing: 1 }).success, 'a weight of 1 would flatten every line');
});
