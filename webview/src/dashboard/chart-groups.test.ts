// Metric names → charts and legend labels: the trainer's real names land in the intended charts,
// verl/TRL-style aliases join them, unknown names get a chart per prefix instead of vanishing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartIdOf, chartSpecOf, chartSpecs, compareChartIds, formatValue, scopeOf, seriesLabel } from './chart-groups.ts';

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
    lr: 'lr',
    'throughput/generate_tok_s': 'throughput',
    'throughput/train_tok_s': 'throughput',
    'time/rollout_ms': 'time',
    'time/total_ms': 'time',
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

test('unknown names get one chart per prefix', () => {
  assert.equal(chartIdOf('update/samples'), 'auto:update');
  assert.equal(chartIdOf('update/non_finite_skips'), 'auto:update');
  assert.equal(chartIdOf('weird'), 'auto:weird');
  const spec = chartSpecOf('auto:update');
  assert.equal(spec.title, 'update/*');
  assert.ok(spec.match.test('update/samples'));
  assert.equal(chartSpecOf('kl'), chartSpecs.find((s) => s.id === 'kl'));
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
  assert.equal(seriesLabel('reward/team', 'plan', ['reward/team', 'reward/local']), 'team · plan');
  assert.equal(seriesLabel('val/success', 'team', ['train/success', 'val/success']), 'val/success · team');
  assert.equal(seriesLabel('time/rollout_ms', 'team', ['time/rollout_ms', 'time/update_ms']), 'rollout · team');
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
