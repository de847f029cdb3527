/**
 * What a run came to, read from its metric series: the test success of the warm-started team
 * (step 0) and after RL with the RL gain between them, the best validated step, and the mean time
 * of an RL step. The dashboard header, the Runs view and the notification when a run ends all say
 * it in these words. Pure (no DOM, no vscode): the host and the dashboard webview both use it.
 *
 * The metric names are the trainer's (server/rl/trainer.ts): `test/success` at step 0 and at the
 * last step (`training.testEpisodes`, on seeds held out from validation too, so it is the number to
 * report), `test/policy_step` (the step whose policy the last test played: with `training.select`
 * `best` the best validated one), `val/success` at every validation (step 0 included), and
 * `time/total_ms` / `time/test_ms` per RL step.
 */

/**
 * How a run ended: `finished` at its last step, `stopped` before it (the server's state is `done`
 * either way), `failed`; null while it may still train.
 */
export type RunEnding = 'finished' | 'stopped' | 'failed';

export function runEnding(state: string, step: number | null, steps: number | null): RunEnding | null {
  if (state === 'failed') return 'failed';
  if (state !== 'done') return null;
  return steps !== null && (step ?? -1) < steps ? 'stopped' : 'finished';
}

/**
 * The game measures a test reports beside success, where the environment has them: a symmetric
 * game's self-play success only says nobody forfeited (tic-tac-toe), and a cooperative game is
 * judged by its score (Hanabi). `fraction`: shown as a percentage; `points`: as a number.
 */
const gameMeasures = [
  { name: 'test/vs_minimax/non_loss_rate', label: 'non-loss vs minimax', unit: 'fraction' },
  { name: 'test/vs_random/win_rate', label: 'wins vs random', unit: 'fraction' },
  { name: 'test/optimal_move_rate', label: 'perfect moves', unit: 'fraction' },
  { name: 'test/score', label: 'score', unit: 'points' },
  { name: 'test/with_bot/score', label: 'score with the bot', unit: 'points' },
] as const;

/** The series the outcome is read from; the team's only (no agent or policy). */
export const outcomeMetricNames = ['test/success', 'test/policy_step', 'val/success', 'time/total_ms', 'time/test_ms', ...gameMeasures.map((m) => m.name)] as const;
type OutcomeMetric = (typeof outcomeMetricNames)[number];

/** A game measure of the test, before RL (step 0, when tested) and after. */
export interface GameMeasure {
  readonly label: string;
  readonly unit: 'fraction' | 'points';
  readonly before: number | null;
  readonly after: number;
}

export interface RunOutcome {
  /** The test after RL (and before, when step 0 was tested); null until the last step's test. */
  readonly test: {
    /** Test success of the warm-started team (step 0), when it was tested. */
    readonly before: number | null;
    readonly after: number;
    /** The step whose commit holds the test after RL (the last step). */
    readonly step: number;
    /** The step whose policy played it: the best validated step with `training.select` `best`. */
    readonly policyStep: number;
    /** The game measures the same test reported (`gameMeasures`), in that order; empty for a task. */
    readonly games: readonly GameMeasure[];
  } | null;
  /** The best validation so far (the earliest step on a tie, as the trainer picks it); step 0 is the warm start. */
  readonly best: { readonly step: number; readonly success: number } | null;
  /** Mean wall-clock time of an RL step (steps from 1, the final test left out); null before step 1. */
  readonly meanStepMs: number | null;
  /** How many steps that mean is over. */
  readonly timedSteps: number;
}

interface PointLike {
  readonly step: number;
  readonly value: number;
}
interface SeriesLike {
  readonly name: string;
  readonly agentId?: string | undefined;
  readonly policyId?: string | undefined;
  readonly points: readonly PointLike[];
}
interface MetricLike {
  readonly name: string;
  readonly value: number;
  readonly agentId?: string | undefined;
  readonly policyId?: string | undefined;
}

const isOutcomeMetric = (name: string): name is OutcomeMetric => (outcomeMetricNames as readonly string[]).includes(name);

/** The points of the outcome's series, fed by a history and then step by step. */
export class OutcomeSeries {
  readonly #points = new Map<OutcomeMetric, Map<number, number>>();

  /** Adds whole series (a history or a gap filled in); other series and per-agent ones are ignored. */
  addSeries(series: readonly SeriesLike[]): this {
    for (const s of series) {
      if (s.agentId !== undefined || s.policyId !== undefined || !isOutcomeMetric(s.name)) continue;
      for (const p of s.points) this.#set(s.name, p.step, p.value);
    }
    return this;
  }

  /** Adds one committed step's metrics. */
  addMetrics(step: number, metrics: readonly MetricLike[]): this {
    for (const m of metrics) if (m.agentId === undefined && m.policyId === undefined && isOutcomeMetric(m.name)) this.#set(m.name, step, m.value);
    return this;
  }

  outcome(): RunOutcome {
    const sorted = (name: OutcomeMetric): PointLike[] => [...(this.#points.get(name) ?? [])].map(([step, value]) => ({ step, value })).sort((a, b) => a.step - b.step);
    const tests = sorted('test/success');
    const before = tests.find((p) => p.step === 0)?.value ?? null;
    const after = tests.filter((p) => p.step > 0).at(-1);
    const policyStep = after === undefined ? undefined : this.#points.get('test/policy_step')?.get(after.step);
    let best: RunOutcome['best'] = null;
    for (const p of sorted('val/success')) if (best === null || p.value > best.success) best = { step: p.step, success: p.value };
    const testMs = this.#points.get('time/test_ms');
    const steps = sorted('time/total_ms').filter((p) => p.step > 0);
    const totalMs = steps.reduce((sum, p) => sum + p.value - (testMs?.get(p.step) ?? 0), 0);
    const games: GameMeasure[] = [];
    if (after !== undefined) {
      for (const m of gameMeasures) {
        const points = this.#points.get(m.name);
        const value = points?.get(after.step);
        if (value !== undefined) games.push({ label: m.label, unit: m.unit, before: points!.get(0) ?? null, after: value });
      }
    }
    return {
      test: after === undefined ? null : { before, after: after.value, step: after.step, policyStep: policyStep ?? after.step, games },
      best,
      meanStepMs: steps.length === 0 ? null : totalMs / steps.length,
      timedSteps: steps.length,
    };
  }

  #set(name: OutcomeMetric, step: number, value: number): void {
    let points = this.#points.get(name);
    if (!points) this.#points.set(name, (points = new Map()));
    points.set(step, value);
  }
}

/** `48.4%`: one decimal, as the CLI reports test results. */
export function percent1(fraction: number): string {
  return `${(fraction * 100).toFixed(1)}%`;
}

/** `+12.5 points`, `-3.0 points`. */
export function gainPoints(before: number, after: number): string {
  const d = (after - before) * 100;
  return `${d >= 0 ? '+' : ''}${d.toFixed(1)} points`;
}

/**
 * `test 48.4% → 60.9% (RL gain +12.5 points)`; names the policy tested when it is not the last
 * step's; a game's measures follow (`; non-loss vs minimax 57.8% → 34.4%, …`).
 */
export function describeTest(test: NonNullable<RunOutcome['test']>): string {
  const policy = test.policyStep === test.step ? '' : ` with step ${test.policyStep}'s policy`;
  const main = test.before === null ? `test ${percent1(test.after)}${policy}` : `test ${percent1(test.before)} → ${percent1(test.after)}${policy} (RL gain ${gainPoints(test.before, test.after)})`;
  if (test.games.length === 0) return main;
  const show = (m: GameMeasure, v: number) => (m.unit === 'fraction' ? percent1(v) : v.toFixed(2));
  return `${main}; ${test.games.map((m) => `${m.label} ${m.before === null ? '' : `${show(m, m.before)} → `}${show(m, m.after)}`).join(', ')}`;
}

/**
 * `best validation: step 12 (81.2%)`, or, when no RL step validated better than the warm start,
 * says so; `soFar` for a run still training.
 */
export function describeBest(best: NonNullable<RunOutcome['best']>, soFar = false): string {
  return `${soFar ? 'best validation so far' : 'best validation'}: ${bestStep(best)}`;
}

/** `step 12 (81.2%)`; `step 0, the warm start (…; no RL step validated better)`. */
export function bestStep(best: NonNullable<RunOutcome['best']>): string {
  return best.step === 0 ? `step 0, the warm start (${percent1(best.success)}; no RL step validated better)` : `step ${best.step} (${percent1(best.success)})`;
}

/** The outcome in one line (`test … · best validation …`); empty when there is nothing to say yet. */
export function describeOutcome(o: RunOutcome): string {
  return [o.test ? describeTest(o.test) : null, o.best ? describeBest(o.best) : null].filter((s) => s !== null).join(' · ');
}

/** The short form for a tree row: `test 48% → 61% (+12.5)`, else null. */
export function shortOutcome(o: RunOutcome): string | null {
  if (!o.test) return null;
  const pct = (v: number) => `${Math.round(v * 100)}%`;
  if (o.test.before === null) return `test ${pct(o.test.after)}`;
  const d = (o.test.after - o.test.before) * 100;
  return `test ${pct(o.test.before)} → ${pct(o.test.after)} (${d >= 0 ? '+' : ''}${d.toFixed(1)})`;
}

/** `8.1 s/step` (seconds to one decimal). */
export function secondsPerStep(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s/step`;
}
