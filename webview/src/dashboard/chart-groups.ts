/**
 * Which chart each metric goes to, and how its series is labelled. Pure, so the grouping is unit
 * tested without a DOM.
 *
 * The names are the trainer's (server/rl/step-metrics.ts, server/rl/trainer.ts): `reward/*`,
 * `advantage/*`, `response/*`, `train/*`, `val/*`, `loss/policy`, `kl/*`, `entropy`, `clip_frac`,
 * `grad_norm`, `lr`, `update/*`, `value/*` (PPO's critic), `throughput/*`, `time/*_ms`, `curriculum/*`, `engine/*` (a fleet's servers). The common aliases of verl/TRL-style
 * logs (`update/kl`, `update/entropy`, `rollout/response_len`, ...) land in the same charts, so a run
 * imported from elsewhere still reads. Anything unknown gets a chart per name prefix instead of being
 * dropped: a new metric shows up without a dashboard change.
 */

import { humanize, metricLabel } from './metric-labels.ts';

export interface ChartSpec {
  /** Stable id, stored in the webview state to remember hidden charts. */
  readonly id: string;
  readonly title: string;
  /** The y axis' title (the x axis is the step). */
  readonly axis: string;
  /** False for metrics the dashboard states elsewhere (the test results, in the header): no card. */
  readonly charted?: false;
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
  { id: 'reward', title: 'Reward (kept branches)', axis: 'reward', match: /^(reward\/mean|train\/team_return|reward)$/ },
  { id: 'reward-split', title: 'Team vs local reward', axis: 'reward', match: /^reward\/(team|local)$/ },
  { id: 'success', title: 'Success (train · validation)', axis: 'success (%)', match: /^(train\/success|val\/(best_)?success|curriculum\/candidate_success|val\/vs_[^/]+\/(win_rate|non_loss_rate))$/, unit: 'fraction' },
  { id: 'val-reward', title: 'Validation reward', axis: 'reward', match: /^val\/(reward|team_return)$/ },
  // Scored games (Hanabi): self-play, with the scripted partner, and the scripted team's own score.
  { id: 'score', title: 'Game score (train · validation)', axis: 'points', match: /^(train\/score|val\/(score|with_bot\/score|bot_team\/score))$/ },
  { id: 'advantage', title: 'Advantage spread (std within groups)', axis: 'std', match: /^(advantage\/std|reward\/std|advantage\/(mean|max|min))$/ },
  { id: 'kl', title: 'KL divergence', axis: 'KL (nats)', match: /^(kl\/.+|update\/(approx_)?kl.*|kl)$/ },
  { id: 'entropy', title: 'Entropy', axis: 'nats per token', match: /^(update\/)?entropy$/ },
  { id: 'clip', title: 'Clip fraction', axis: 'tokens clipped (%)', match: /^(update\/)?clip_frac(_last)?$/, unit: 'fraction' },
  { id: 'loss', title: 'Policy loss', axis: 'loss', match: /^(loss\/.+|update\/policy_loss)$/ },
  // PPO's critic (server/rl/value-head.ts): a line per policy's value head.
  { id: 'value-loss', title: 'Value loss (critic)', axis: 'loss', match: /^(value\/loss|critic\/vf_loss)$/ },
  { id: 'value-ev', title: 'Explained variance (critic)', axis: '1 - Var(R - V) / Var(R)', match: /^(value\/explained_variance|critic\/vf_explained_var)$/ },
  { id: 'value-mean', title: 'Values and returns', axis: 'reward', match: /^value\/(mean|return_mean)$/ },
  { id: 'value-clip', title: 'Value clip fraction', axis: 'states clipped (%)', match: /^value\/clip_frac$/, unit: 'fraction' },
  { id: 'grad-norm', title: 'Gradient norm', axis: 'L2 norm', match: /^(update\/)?grad_norm$/ },
  { id: 'response-length', title: 'Response length', axis: 'tokens', match: /^(response\/length|rollout\/response_len)$/ },
  {
    id: 'response-health',
    title: 'Parse failures · truncation · non-zero advantages',
    axis: 'share (%)',
    match: /^(response\/(parse_fail_rate|truncated_rate)|val\/parse_fail_rate|advantage\/nonzero_frac)$/,
    unit: 'fraction',
  },
  { id: 'curriculum', title: 'Curriculum: failed tasks in the step', axis: 'share (%)', match: /^curriculum\/failed_fraction$/, unit: 'fraction' },
  { id: 'throughput', title: 'Throughput', axis: 'tokens/s', match: /^throughput\/.+$/, unit: 'tokens/s' },
  // rollout = inference + env + bookkeeping, and total = curriculum + rollout + update + validation: only the
  // top-level phases stack, the rest are lines over the bands.
  { id: 'time', title: 'Time per step', axis: 'time', match: /^time\/.+$/, unit: 'ms', stack: ['time/curriculum_ms', 'time/rollout_ms', 'time/update_ms', 'time/validation_ms'] },
  { id: 'lr', title: 'Learning rate', axis: 'learning rate', match: /^(lr|update\/lr)$/ },
  // Each on its own axis: a KL and a largest gap, or sample and step counts, do not share a scale.
  { id: 'rollout-mismatch', title: 'Rollout vs fp32 policy: KL', axis: 'KL (nats)', match: /^rollout\/mismatch_kl$/ },
  { id: 'rollout-mismatch-max', title: 'Rollout vs fp32 policy: largest log-prob gap', axis: 'nats', match: /^rollout\/mismatch_max$/ },
  // rollout.backend fleets (server/rl/engine-rollout.ts): a line per server.
  { id: 'engine-throughput', title: 'Inference servers: generated tokens/s', axis: 'tokens/s', match: /^engine\/server\d+\/tokens_per_s$/, unit: 'tokens/s' },
  { id: 'engine-failures', title: 'Inference servers: failed requests', axis: 'failures', match: /^engine\/server\d+\/failures$/ },
  { id: 'engine-requests', title: 'Inference servers: requests', axis: 'requests', match: /^engine\/server\d+\/requests$/ },
  { id: 'engine-publish', title: 'Inference servers: adapter publish time', axis: 'time', match: /^engine\/publish_ms$/, unit: 'ms' },
  { id: 'update-samples', title: 'Samples per update', axis: 'samples', match: /^update\/samples$/ },
  { id: 'optimizer-steps', title: 'Optimizer steps per update', axis: 'steps', match: /^update\/optimizer_steps$/ },
  { id: 'skipped-updates', title: 'Skipped updates (non-finite)', axis: 'count', match: /^update\/(skipped|non_finite_skips)$/ },
  // The test plays at step 0 and after the last step only: the header states it (test before → after).
  { id: 'test', title: 'Test', axis: '', match: /^test\//, charted: false },
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
  const words = humanize(prefix);
  return { id, title: words.charAt(0).toUpperCase() + words.slice(1), axis: words, match: new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(/|$)`) };
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
 * metrics the metric's words come first ("team reward · plan" in the reward split, "training
 * success · team" next to "validation success · team").
 */
export function seriesLabel(name: string, scope: string, namesInChart: readonly string[]): string {
  if (namesInChart.length <= 1) return scope;
  return `${metricLabel(name)} · ${scope}`;
}

/** Colours in the palette (theme.ts resolves that many from VS Code's chart colours). */
export const PALETTE_SIZE = 6;

/** FNV-1a, 32 bits: a name's colour slot must not depend on anything but the name. */
function hashName(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * A palette slot per scope (agent, policy): the slot its name hashes to, so `planner` has the same
 * colour in every run; two scopes of one run that hash alike are told apart by giving the later one
 * (in name order) the next free slot. The team is drawn in the foreground colour and takes none.
 */
export function colorSlots(scopes: Iterable<string>, size = PALETTE_SIZE): Map<string, number> {
  const slots = new Map<string, number>();
  const taken = new Set<number>();
  for (const scope of [...new Set(scopes)].filter((s) => s !== 'team').sort()) {
    let slot = hashName(scope) % size;
    // With more scopes than colours, colours repeat (dashes still tell metrics apart).
    for (let tries = 0; taken.has(slot) && tries < size; tries++) slot = (slot + 1) % size;
    if (taken.size < size) taken.add(slot);
    slots.set(scope, slot);
  }
  return slots;
}

/**
 * Line styles per metric name within a chart: colour says who, the style says which metric. The
 * canvas dash (uPlot) and the legend swatch (an SVG line's dasharray) are read from this one list,
 * so the legend shows the line as drawn.
 */
export const lineDashes: ReadonlyArray<readonly number[]> = [[], [6, 4], [1.5, 3], [8, 3, 2, 3]];

export function lineDash(nameIndex: number): readonly number[] {
  return lineDashes[nameIndex % lineDashes.length]!;
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
