import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunSummary, StepSummary, TrajectorySummary } from '../../server/protocol/trajectory.ts';
import {
  canRun,
  compareChoices,
  describeFilter,
  describeRun,
  describeStep,
  describeTrajectory,
  exportFolderName,
  formatDuration,
  formatRewardRange,
  parseRewardRange,
  runEndedMessage,
  runEnding,
  runIcon,
  runLabels,
  runTooltip,
  soleRunFor,
  statusBarText,
  stepLabel,
  trajectoryLabel,
  updateFilter,
} from './run-format.ts';
import { OutcomeSeries } from '../../webview/src/run-outcome.ts';
import type { RunView } from './runs-model.ts';

const summary: RunSummary = { id: 'r1', name: 'flagship', state: 'running', createdAt: 1_000, updatedAt: 2_000, runDir: '/w/.troupe/runs/r1', lastCommittedStep: 12, targetSteps: 60 };
const view = (o: Partial<RunView> = {}, s: Partial<RunSummary> = {}): RunView => ({
  summary: { ...summary, ...s },
  step: 12,
  steps: 60,
  success: { value: 0.78, source: 'val', step: 10 },
  etaMs: 90_000,
  agents: ['tool', 'plan'],
  outcome: new OutcomeSeries().outcome(),
  ...o,
});

const pts = (name: string, points: [number, number][]) => ({ name, points: points.map(([step, value]) => ({ step, value })) });
/** The outcome of a 60-step run tested before and after RL, best validated at step 40. */
const finishedOutcome = new OutcomeSeries()
  .addSeries([pts('val/success', [[0, 0.5], [40, 0.8], [60, 0.75]]), pts('test/success', [[0, 0.484], [60, 0.609]]), pts('time/total_ms', [[59, 4000], [60, 6000]])])
  .outcome();

test('a run reads state · step N/M · success', () => {
  assert.equal(describeRun(view()), 'running · step 12/60 · val 78%');
  assert.equal(describeRun(view({ steps: null, success: { value: 0.5, source: 'train', step: 3 } })), 'running · step 12 · train 50%');
  assert.equal(describeRun(view({ step: null, success: null })), 'running · warming up');
  assert.equal(describeRun(view({ step: null, success: null }, { state: 'queued' })), 'queued');
});

test('an ended run says how it ended: finished, stopped before its last step, failed; with its result', () => {
  const finished = view({ step: 60, outcome: finishedOutcome }, { state: 'done' });
  assert.equal(runEnding(finished), 'finished');
  assert.equal(describeRun(finished), 'done · step 60/60 · test 48% → 61% (+12.5)');
  assert.equal(runEndedMessage(finished), 'Troupe: "flagship" finished at step 60: test 48.4% → 60.9% (RL gain +12.5 points) · best validation: step 40 (80.0%)');
  assert.match(runTooltip(finished), /\nResult: test 48\.4% → 60\.9% \(RL gain \+12\.5 points\) · best validation: step 40 \(80\.0%\)\nMean step time: 5\.0 s\/step over 2 steps\n/);

  // The server calls a stopped run done; the view does not.
  const stopped = view({ step: 12 }, { state: 'done' });
  assert.equal(runEnding(stopped), 'stopped');
  assert.equal(describeRun(stopped), 'stopped · step 12/60 · val 78%');
  assert.equal(runIcon(stopped), 'debug-stop');
  assert.equal(runIcon(finished), 'pass');
  assert.equal(runEndedMessage(stopped), 'Troupe: "flagship" stopped at step 12 of 60.');

  const failed = view({}, { state: 'failed', error: 'out of memory' });
  assert.equal(runEnding(failed), 'failed');
  assert.equal(runEndedMessage(failed), 'Troupe: "flagship" failed at step 12: out of memory');
  assert.equal(runEnding(view()), null);
});

test('the status bar shows the active run like the issue describes it', () => {
  assert.equal(statusBarText(view()), '$(sync~spin) Troupe: flagship step 12/60 · val 78%');
  assert.equal(statusBarText(view({}, { state: 'paused' })), '$(debug-pause) Troupe: flagship step 12/60 · val 78% (paused)');
  assert.equal(statusBarText(view({ step: null, success: null })), '$(sync~spin) Troupe: flagship warming up');
});

test('a run in its warm-up says how far it is, in the view, the status bar, the tooltip and when it ends there', () => {
  const warmUp = { modelId: 'base', model: 1, models: 1, stage: 'training' as const, step: 45, steps: 300, loss: 1.23456, etaMs: 90_000, checkpointStep: 30 };
  const warming = view({ step: null, success: null, warmUp }, { lastCommittedStep: null });
  assert.equal(describeRun(warming), 'running · warm-up 45/300');
  assert.equal(statusBarText(warming), '$(sync~spin) Troupe: flagship warm-up 45/300');
  assert.match(runTooltip(warming), /\nWarm-up: step 45 of 300 · loss 1\.2346 · about 1 min 30 s left · checkpointed at step 30\n/);
  assert.equal(describeRun(view({ step: null, success: null, warmUp: { ...warmUp, modelId: 'tool', model: 2, models: 2 } })), "running · warm-up of 'tool' (2/2) 45/300");
  // Paused in the warm-up: where it stands, no time left.
  const paused = view({ step: null, success: null, warmUp }, { state: 'paused', lastCommittedStep: null });
  assert.equal(describeRun(paused), 'paused · warm-up 45/300');
  assert.doesNotMatch(runTooltip(paused), /left/);
  assert.equal(runEndedMessage(view({ step: null, success: null, warmUp }, { state: 'done', lastCommittedStep: null })), 'Troupe: "flagship" stopped in the warm-up (step 45 of 300).');
  // Once step 0 is committed the steps speak.
  assert.equal(describeRun(view({ step: 0, success: null, warmUp })), 'running · step 0/60');
});

test('the tooltip has the facts, one per line, with the start as a clock time', () => {
  const start = new Date(2026, 10, 27, 15, 52, 7).getTime();
  const t = runTooltip(view({}, { error: 'boom', createdAt: start }), start + 61_000);
  assert.match(t, /^flagship \(r1\)\nState: running\nProgress: step 12\/60\nSuccess: val 78% at step 10\nRemaining: about 1 min 30 s\nStarted: 15:52:07\nRunning for: 1 min 01 s\nFolder: \/w\/\.troupe\/runs\/r1\nError: boom$/);
  // An ended run says how long it took, which stays true however late the tooltip is read.
  const ended = runTooltip(view({ step: 60 }, { state: 'done', createdAt: start, updatedAt: start + 245_000 }), start + 86_400_000);
  assert.match(ended, /\nStarted: 2026-11-27 15:52:07\nTook: 4 min 05 s\n/);
});

test('runs of one config are told apart by their start, down to the second, then by id', () => {
  const at = (h: number, m: number, sec = 0) => new Date(2026, 10, 27, h, m, sec).getTime();
  const labels = runLabels([
    { id: 'run-a-1111', name: 'tiny', createdAt: at(15, 52, 7) },
    { id: 'run-b-2222', name: 'tiny', createdAt: at(16, 5, 30) },
    { id: 'run-c-3333', name: 'other', createdAt: at(16, 6) },
  ]);
  assert.deepEqual([...labels.values()], ['tiny · 15:52', 'tiny · 16:05', 'other']);
  const sameMinute = runLabels([
    { id: 'run-a-1111', name: 'tiny', createdAt: at(15, 52, 7) },
    { id: 'run-b-2222', name: 'tiny', createdAt: at(15, 52, 40) },
    { id: 'run-c-3333', name: 'tiny', createdAt: at(15, 52, 40) },
  ]);
  assert.deepEqual([...sameMinute.values()], ['tiny · 15:52:07', 'tiny · 15:52:40 #2222', 'tiny · 15:52:40 #3333']);
  const days = runLabels([
    { id: 'a', name: 'tiny', createdAt: new Date(2026, 10, 26, 9, 0).getTime() },
    { id: 'b', name: 'tiny', createdAt: at(9, 0) },
  ]);
  assert.deepEqual([...days.values()], ['tiny · 2026-11-26 09:00', 'tiny · 2026-11-27 09:00']);
});

test('Pause and Resume from the palette act on the only run they apply to, and ask otherwise', () => {
  const v = (id: string, state: RunSummary['state']) => view({}, { id, state });
  assert.equal(soleRunFor('pause', [v('a', 'running'), v('b', 'done'), v('c', 'paused')]), 'a');
  assert.equal(soleRunFor('pause', [v('a', 'running'), v('b', 'queued')]), undefined);
  assert.equal(soleRunFor('resume', [v('a', 'running')]), undefined);
  assert.equal(soleRunFor('resume', [v('a', 'running'), v('c', 'paused')]), 'c');
});

test('durations', () => {
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(12_340), '12.3 s');
  assert.equal(formatDuration(245_000), '4 min 05 s');
  assert.equal(formatDuration(7_620_000), '2 h 07 min');
});

test('steps and trajectories', () => {
  const s: StepSummary = { step: 4, createdAt: 0, timingsMs: { rollout: 800, update: 300 }, trajectoryCount: 16, successCount: 12, turnCount: 90, promptTokenCount: 1, responseTokenCount: 1 };
  assert.equal(describeStep(s), '12/16 succeeded · 1.1 s');
  assert.equal(describeStep({ ...s, timingsMs: { rollout: 800, total: 3_400 } }), '12/16 succeeded · 3.4 s');
  assert.equal(stepLabel(0), 'Step 0 · before RL');
  assert.equal(stepLabel(7), 'Step 7');
  const t: TrajectorySummary = { id: 9, runId: 'r1', step: 4, phase: 'validation', envName: 'plan-path', envSeed: 1_000_042, envInstance: 3, rollout: 0, success: true, teamReward: 1, localReward: 0.345, turnCount: 6 };
  assert.equal(trajectoryLabel(t), 'val #3 · seed 1000042');
  assert.equal(trajectoryLabel({ ...t, phase: 'train', rollout: 2 }), 'train #3 rollout 2 · seed 1000042');
  assert.equal(describeTrajectory(t), 'solved · team 1.00 · local 0.34 · 6 turns');
});

test('run actions follow the run manager: pause live runs, resume paused or failed, stop anything not done', () => {
  assert.ok(canRun('pause', 'running') && canRun('pause', 'queued') && !canRun('pause', 'paused'));
  assert.ok(canRun('resume', 'paused') && canRun('resume', 'failed') && !canRun('resume', 'running'));
  assert.ok(canRun('stop', 'failed') && !canRun('stop', 'done') && !canRun('stop', 'stopping'));
});

test('reward ranges parse as typed and print back the same way', () => {
  assert.deepEqual(parseRewardRange('0.5..'), { ok: true, minReward: 0.5 });
  assert.deepEqual(parseRewardRange('..0'), { ok: true, maxReward: 0 });
  assert.deepEqual(parseRewardRange(' -1..1 '), { ok: true, minReward: -1, maxReward: 1 });
  assert.deepEqual(parseRewardRange('0.25'), { ok: true, minReward: 0.25 });
  assert.deepEqual(parseRewardRange(''), { ok: true });
  for (const bad of ['a..b', '1..0', '1..2..3']) assert.equal(parseRewardRange(bad).ok, false, bad);
  for (const f of [{ minReward: 0.5 }, { maxReward: 0 }, { minReward: -1, maxReward: 1 }]) {
    const back = parseRewardRange(formatRewardRange(f));
    assert.ok(back.ok);
    const { ok: _ok, ...bounds } = back;
    assert.deepEqual(bounds, f);
  }
});

test('filters update field by field and describe themselves', () => {
  let f = updateFilter({}, { agentId: 'tool' });
  f = updateFilter(f, { success: false });
  f = updateFilter(f, { reward: { minReward: 0.5 } });
  assert.deepEqual(f, { agentId: 'tool', success: false, minReward: 0.5 });
  assert.equal(describeFilter(f), 'agent tool · failed · reward ≥ 0.5');
  assert.deepEqual(updateFilter(f, { agentId: null }), { success: false, minReward: 0.5 });
  assert.deepEqual(updateFilter(f, { agentId: null, success: null, reward: {} }), {});
  assert.equal(describeFilter({ minReward: 0, maxReward: 1 }), 'reward 0..1');
  assert.equal(describeFilter({}), '');
});

test('export folders are named after the run and checkpoint', () => {
  assert.equal(exportFolderName('plan-path L2 LoRA (AT-GRPO)', 40), 'plan-path-l2-lora-at-grpo-step40');
  assert.equal(exportFolderName('???', 'latest'), 'run-latest');
  assert.equal(exportFolderName('x', 'initial'), 'x-initial');
  assert.equal(exportFolderName('x', 'best'), 'x-best');
});

test('the same task at another step is offered for validation trajectories only', () => {
  const val = compareChoices({ step: 10, envSeed: 1_000_042, phase: 'validation' });
  assert.deepEqual(val.map((c) => c.value), ['step', 'task']);
  assert.equal(val[1]?.label, 'The same task (seed 1000042) at another step');
  const train = compareChoices({ step: 0, envSeed: 7, phase: 'train' });
  assert.deepEqual(train.map((c) => c.value), ['step']);
  assert.equal(train[0]?.label, 'Another trajectory of step 0 · before rl');
  assert.match(train[0]?.detail ?? '', /only for validation trajectories/);
});
