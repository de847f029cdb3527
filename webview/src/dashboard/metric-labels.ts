/**
 * What each metric is called on the dashboard: one table from the trainer's metric names
 * (server/rl/step-metrics.ts, trainer.ts, curriculum.ts) to the words a legend shows. Names that
 * follow a pattern (`time/<phase>_ms`, `val/vs_<opponent>/…`) are read by rule; anything else is
 * shown with its separators turned into spaces, never as a raw path. Pure: unit tested.
 */

/** Legend words per metric name. */
export const metricLabels: Readonly<Record<string, string>> = {
  'reward/mean': 'reward',
  'reward/std': 'reward spread',
  'reward/team': 'team reward',
  'reward/local': 'local reward',
  'train/team_return': 'team return',
  'train/success': 'training success',
  'val/success': 'validation success',
  'val/best_success': 'best validation so far',
  'val/reward': 'validation reward',
  'val/team_return': 'validation team return',
  'val/parse_fail_rate': 'validation parse failures',
  'train/score': 'training score (self-play)',
  'val/score': 'validation score (self-play)',
  'val/with_bot/score': 'validation score with the bot',
  'val/bot_team/score': 'bot team score',
  'test/success': 'test success',
  'test/reward': 'test reward',
  'test/policy_step': 'step of the tested policy',
  'curriculum/candidate_success': 'curriculum candidates solved',
  'curriculum/failed_fraction': 'failed tasks in the step',
  'advantage/std': 'advantage spread',
  'advantage/nonzero_frac': 'non-zero advantages',
  'response/length': 'response length',
  'response/parse_fail_rate': 'parse failures',
  'response/truncated_rate': 'truncated responses',
  'loss/policy': 'policy loss',
  'kl/approx': 'KL to the sampling policy',
  'kl/ref': 'KL to the reference',
  entropy: 'entropy',
  clip_frac: 'clip fraction (mean)',
  clip_frac_last: 'clip fraction (last mini-batch)',
  grad_norm: 'gradient norm',
  'value/loss': 'value loss',
  'value/explained_variance': 'explained variance',
  'value/mean': 'value V(s)',
  'value/return_mean': 'return (GAE target)',
  'value/clip_frac': 'value clip fraction',
  lr: 'learning rate',
  'update/skipped': 'update skipped',
  'update/samples': 'samples',
  'update/optimizer_steps': 'optimizer steps',
  'update/non_finite_skips': 'non-finite skips (total)',
  'throughput/generate_tok_s': 'generation',
  'throughput/train_tok_s': 'training',
  'rollout/mismatch_kl': 'rollout vs fp32 KL',
  'rollout/mismatch_max': 'largest log-prob gap',
};

/** The words for a metric name: the table's, a pattern's, or the name with its separators as spaces. */
export function metricLabel(name: string): string {
  const listed = metricLabels[name];
  if (listed !== undefined) return listed;
  const time = /^time\/(.+)_ms$/.exec(name);
  if (time) return `${humanize(time[1]!)} time`;
  const versus = /^val\/vs_([^/]+)\/(win_rate|non_loss_rate)$/.exec(name);
  if (versus) return `${versus[2] === 'win_rate' ? 'wins' : 'wins or draws'} vs ${humanize(versus[1]!)}`;
  return humanize(name);
}

/** `update/grad_norm` → `update grad norm`. */
export function humanize(name: string): string {
  return name.replace(/[/_]+/g, ' ').trim();
}
