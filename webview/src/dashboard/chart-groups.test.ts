// Metric names → charts and legend labels: the trainer's real names land in the intended charts,
// verl/TRL-style aliases join them, unknown names get a chart per prefix instead of vanishing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartIdOf, chartSpecOf, chartSpecs, colorSlots, compareChartIds, formatValue, lineDash, lineDashes, PALETTE_SIZE, scopeOf, seriesLabel } from './chart-groups.ts';
import { metricLabel, metricLabels } from './metric-labels.ts';

test('the trainer metric names go to their charts', () => {
  const expected: Record<string, string> = {
    'reward/mean': 'reward',
    'train/team_return': 'reward',
    'reward/team': 'reward-split',
    'reward/local': 'reward-split',
    'train/success': 'success',
    'val/success': 'success',
    'val/best_success': 'success',
    'val/vs_minimax/win_rate': 'success',
    'train/score': 'score',
    'val/with_bot/score': 'score',
    'val/bot_team/score': 'score',
    'val/reward': 'val-reward',
    'advantage/std': 'advantage',
    'reward/std': 'advantage',
    'advantage/nonzero_frac': 'response-health',
    'response/parse_fail_rate': 'response-health',
    'val/parse_fail_rate': 'response-health',
    'response/length': 'response-length',
    'loss/policy': 'loss',
    'kl/approx': 'kl',
    'kl/ref': 'kl',
    entropy: 'entropy',
    clip_frac: 'clip',
    grad_norm: 'grad-norm',
    'value/loss': 'value-loss',
    'value/explained_variance': 'value-ev',
    'value/mean': 'value-mean',
    'value/return_mean': 'value-mean',
    'value/clip_frac': 'value-clip',
    lr: 'lr',
    'throughput/generate_tok_s': 'throughput',
    'throughput/train_tok_s': 'throughput',
    'time/rollout_ms': 'time',
    'time/total_ms': 'time',
    'engine/server0/tokens_per_s': 'engine-throughput',
    'engine/server12/tokens_per_s': 'engine-throughput',
    'engine/server1/failures': 'engine-failures',
    'engine/server0/requests': 'engine-requests',
    'engine/publish_ms': 'engine-publish',
  };
  for (const [name, chart] of Object.entries(expected)) assert.equal(chartIdOf(name), chart, name);
});

test('verl/TRL-style aliases join the same charts', () => {
  assert.equal(chartIdOf('update/kl'), 'kl');
  assert.equal(chartIdOf('update/entropy'), 'entropy');
  assert.equal(chartIdOf('update/clip_frac'), 'clip');
  assert.equal(chartIdOf('update/policy_loss'), 'loss');
  assert.equal(chartIdOf('update/grad_norm'), 'grad-norm');
  assert.equal(chartIdOf('rollout/response_len'), 'response-length');
});

test('unknown names get one chart per prefix, titled in words', () => {
  assert.equal(chartIdOf('extra/thing_count'), 'auto:extra');
  assert.equal(chartIdOf('weird'), 'auto:weird');
  const spec = chartSpecOf('auto:some_prefix');
  assert.equal(spec.title, 'Some prefix');
  assert.equal(spec.axis, 'some prefix');
  assert.ok(spec.match.test('some_prefix/x'));
  assert.equal(chartSpecOf('kl'), chartSpecs.find((s) => s.id === 'kl'));
});

test("every metric the trainer writes has a chart of its own kind (no prefix catch-all mixing scales), or none for the test", () => {
  // The bookkeeping and precision metrics each get their own axis; before, update/* and rollout/*
  // shared one card per prefix.
  assert.equal(chartIdOf('update/samples'), 'update-samples');
  assert.equal(chartIdOf('update/optimizer_steps'), 'optimizer-steps');
  assert.equal(chartIdOf('update/non_finite_skips'), 'skipped-updates');
  assert.equal(chartIdOf('update/skipped'), 'skipped-updates');
  assert.equal(chartIdOf('rollout/mismatch_kl'), 'rollout-mismatch');
  assert.equal(chartIdOf('rollout/mismatch_max'), 'rollout-mismatch-max');
  assert.equal(chartIdOf('clip_frac_last'), 'clip');
  assert.equal(chartIdOf('curriculum/failed_fraction'), 'curriculum');
  for (const name of Object.keys(metricLabels)) assert.ok(!chartIdOf(name).startsWith('auto:'), `${name} has no chart of its own`);
  assert.equal(chartSpecOf(chartIdOf('test/success')).charted, false);
  // Every chart names its y axis.
  for (const spec of chartSpecs) if (spec.charted !== false) assert.ok(spec.axis.length > 0, spec.id);
});

test('metrics read as words: the table, the time and versus patterns, else the name without separators', () => {
  assert.equal(metricLabel('val/success'), 'validation success');
  assert.equal(metricLabel('time/rollout_ms'), 'rollout time');
  assert.equal(metricLabel('val/vs_minimax/win_rate'), 'wins vs minimax');
  assert.equal(metricLabel('some/new_metric'), 'some new metric');
  for (const [name, label] of Object.entries(metricLabels)) assert.doesNotMatch(label, /[/_]/, `${name}'s label`);
});

test('colours: a scope keeps its slot across runs; two scopes of one run never share one', () => {
  const a = colorSlots(['tool', 'plan', 'team']);
  const b = colorSlots(['reasoner', 'plan', 'critic', 'tester']);
  assert.equal(a.get('plan'), b.get('plan'), 'plan has one colour in both runs');
  // Only a collision within a run moves a scope: coder and plan hash alike, and coder comes first.
  const c = colorSlots(['plan', 'coder']);
  assert.equal(c.get('coder'), a.get('plan'));
  assert.notEqual(c.get('plan'), c.get('coder'));
  assert.equal(a.has('team'), false, 'the team is drawn in the foreground colour');
  for (const slots of [a, b]) assert.equal(new Set(slots.values()).size, slots.size);
  // Order of arrival does not matter.
  assert.deepEqual([...colorSlots(['tester', 'critic', 'plan', 'reasoner'])].sort(), [...b].sort());
  // More scopes than colours: every slot used, then repeats.
  const many = colorSlots(Array.from({ length: PALETTE_SIZE + 2 }, (_, i) => `agent${i}`));
  assert.equal(new Set(many.values()).size, PALETTE_SIZE);
});

test('line styles: solid, dashed, dotted, dash-dot, one per metric of a chart', () => {
  assert.deepEqual(lineDash(0), []);
  assert.equal(new Set(lineDashes.map((d) => d.join(' '))).size, lineDashes.length);
  assert.deepEqual(lineDash(lineDashes.length + 1), lineDash(1));
});

test('charts sort in list order, auto charts last by name', () => {
  const ids = ['auto:zeta', 'time', 'auto:alpha', 'reward', 'kl'];
  assert.deepEqual(ids.sort((a, b) => compareChartIds(a, b)), ['reward', 'kl', 'time', 'auto:alpha', 'auto:zeta']);
});

test('labels: scope alone for one metric, short name and scope for several', () => {
  assert.equal(scopeOf('plan', undefined), 'plan');
  assert.equal(scopeOf(undefined, 'lora_plan'), 'policy lora_plan');
  assert.equal(scopeOf('plan', 'base'), 'plan@base');
  assert.equal(scopeOf(undefined, undefined), 'team');
  assert.equal(seriesLabel('kl/approx', 'policy p', ['kl/approx']), 'policy p');
  assert.equal(seriesLabel('reward/team', 'plan', ['reward/team', 'reward/local']), 'team reward · plan');
  assert.equal(seriesLabel('val/success', 'team', ['train/success', 'val/success']), 'validation success · team');
  assert.equal(seriesLabel('time/rollout_ms', 'team', ['time/rollout_ms', 'time/update_ms']), 'rollout time · team');
});

test('values are formatted for their unit', () => {
  assert.equal(formatValue(0.5, 'fraction'), '50%');
  assert.equal(formatValue(0.05, 'fraction'), '5.0%');
  assert.equal(formatValue(812.4, 'ms'), '812 ms');
  assert.equal(formatValue(12_500, 'ms'), '12.5 s');
  assert.equal(formatValue(0.012345), '0.0123');
  assert.equal(formatValue(1234.5), '1230');
  assert.equal(formatValue(3e-5), '3.00e-5');
  assert.equal(formatValue(0), '0');
  assert.equal(formatValue(null), '–');
  assert.equal(formatValue(NaN), '–');
});
