/**
 * Which chart each metric goes to, and how its series is labelled. Pure, so the grouping is unit
 * tested without a DOM.
 *
 * The names are the trainer's (server/rl/step-metrics.ts, server/rl/trainer.ts): `reward/*`,
 * `advantage/*`, `response/*`, `train/*`, `val/*`, `loss/policy`, `kl/*`, `entropy`, `clip_frac`,
 * `grad_norm`, `lr`, `update/*`, `throughput/*`, `time/*_ms`, `curriculum/*`. The common aliases of verl/TRL-style
 * logs (`update/kl`, `update/entropy`, `rollout/response_len`, ...) land in the same charts, so a run
 * imported from elsewhere still reads. Anything unknown gets a chart per name prefix instead of being
 * dropped: a new metric shows up without a dashboard change.
 */

export interface ChartSpec {
  /** Stable id, stored in the webview state to remember hidden charts. */
  readonly id: string;
  readonly title: string;
  /** Metric names that belong to the chart (first matching spec wins, in list order). */
  readonly match: RegExp;
  /** Rates and fractions: the y axis spans at least [0, 1]. */
  readonly unit?: 'fraction' | 'ms' | 'tokens/s';
  /**
   * Names drawn as stacked bands, bottom first (the parts of a whole, like the phases of a step);
   * the chart's other names are drawn as plain lines over them.
   */
  readonly stack?: readonly string[];
}

/** The dashboard's charts, in display order. */
export const chartSpecs: readonly ChartSpec[] = [
  { id: 'reward', title: 'Reward (kept branches)', match: /^(reward\/mean|train\/team_return|reward)$/ },
  { id: 'reward-split', title: 'Team vs local reward', match: /^reward\/(team|local)$/ },
  { id: 'success', title: 'Success (train · validation)', match: /^(train\/success|val\/(best_)?success|curriculum\/candidate_success|val\/vs_[^/]+\/(win_rate|non_loss_rate))$/, unit: 'fraction' },
  { id: 'val-reward', title: 'Validation reward', match: /^val\/(reward|team_return)$/ },
  { id: 'advantage', title: 'Advantage spread (std within groups)', match: /^(advantage\/std|reward\/std|advantage\/(mean|max|min))$/ },
  { id: 'kl', title: 'KL divergence', match: /^(kl\/.+|update\/(approx_)?kl.*|kl)$/ },
  { id: 'entropy', title: 'Entropy', match: /^(update\/)?entropy$/ },
  { id: 'clip', title: 'Clip fraction', match: /^(update\/)?clip_frac$/, unit: 'fraction' },
  { id: 'loss', title: 'Policy loss', match: /^(loss\/.+|update\/policy_loss)$/ },
  { id: 'grad-norm', title: 'Gradient norm', match: /^(update\/)?grad_norm$/ },
  { id: 'response-length', title: 'Response length (tokens)', match: /^(response\/length|rollout\/response_len)$/ },
  {
    id: 'response-health',
    title: 'Parse failures · truncation · non-zero advantages',
    match: /^(response\/(parse_fail_rate|truncated_rate)|val\/parse_fail_rate|advantage\/nonzero_frac)$/,
    unit: 'fraction',
  },
  { id: 'throughput', title: 'Throughput (tokens/s)', match: /^throughput\/.+$/, unit: 'tokens/s' },
  // rollout = inference + env + bookkeeping, and total = curriculum + rollout + update + validation: only the
  // top-level phases stack, the rest are lines over the bands.
  { id: 'time', title: 'Time per step (ms)', match: /^time\/.+$/, unit: 'ms', stack: ['time/curriculum_ms', 'time/rollout_ms', 'time/update_ms', 'time/validation_ms'] },
  { id: 'lr', title: 'Learning rate', match: /^(lr|update\/lr)$/ },
];

const AUTO_PREFIX = 'auto:';

/** The chart a metric goes to: a listed one, or `auto:<first name segment>`. */
export function chartIdOf(name: string, specs: readonly ChartSpec[] = chartSpecs): string {
  for (const s of specs) if (s.match.test(name)) return s.id;
  return AUTO_PREFIX + (name.split('/')[0] ?? name);
}

/** The spec of a chart id, making one up for an `auto:` chart. */
export function chartSpecOf(id: string, specs: readonly ChartSpec[] = chartSpecs): ChartSpec {
  const known = specs.find((s) => s.id === id);
  if (known) return known;
  const prefix = id.startsWith(AUTO_PREFIX) ? id.slice(AUTO_PREFIX.length) : id;
  return { id, title: `${prefix}/*`, match: new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(/|$)`) };
}

/** Display order of charts: listed charts in list order, then `auto:` charts by title. */
export function compareChartIds(a: string, b: string, specs: readonly ChartSpec[] = chartSpecs): number {
  const ia = specs.findIndex((s) => s.id === a);
  const ib = specs.findIndex((s) => s.id === b);
  if (ia >= 0 || ib >= 0) return (ia < 0 ? Infinity : ia) - (ib < 0 ? Infinity : ib) || 0;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Who a series is about: the agent, the policy, both, or the whole team. */
export function scopeOf(agentId: string | undefined, policyId: string | undefined): string {
  if (agentId !== undefined && policyId !== undefined) return `${agentId}@${policyId}`;
  return agentId ?? (policyId !== undefined ? `policy ${policyId}` : 'team');
}

/**
 * A series' legend label. In a chart showing one metric the scope says it all ("plan"); with several
 * metrics the name comes first, without the prefix they share ("team · plan" in the reward split,
 * "train/success · team" next to "val/success · team").
 */
export function seriesLabel(name: string, scope: string, namesInChart: readonly string[]): string {
  if (namesInChart.length <= 1) return scope;
  const firsts = new Set(namesInChart.map((n) => n.split('/')[0]));
  const short = firsts.size === 1 && name.includes('/') ? name.slice(name.indexOf('/') + 1) : name;
  return `${short.replace(/_ms$/, '')} · ${scope}`;
}

/** A value for axes and legends: percentages for fractions, whole milliseconds, three significant digits otherwise. */
export function formatValue(v: number | null | undefined, unit?: ChartSpec['unit']): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (unit === 'fraction') return `${(v * 100).toFixed(Math.abs(v) < 0.1 && v !== 0 ? 1 : 0)}%`;
  if (unit === 'ms') return Math.abs(v) >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`;
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e5 || a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(3)));
}
