/**
 * What a bench:learning run is judged by, and in which unit it is printed. Most environments by
 * success on held-out seeds (a fraction); a symmetric game (tic-tac-toe) by its non-loss rate
 * against minimax (a fraction: self-play success only says that nobody forfeited); a scored
 * cooperative game (Hanabi) by its mean self-play score, in points (success only says that the
 * game ended without losing every fuse), beside its scripted team's score on the same seeds.
 */
import type { Evaluation } from '../../server/rl/evaluate.ts';
import type { ComparedMeasure } from './seed-stats.ts';

export const SCORE_NAMES = {
  success: 'success on held-out seeds',
  'non-loss vs minimax': 'non-loss rate against minimax, both sides',
  'self-play score': 'mean self-play score on held-out seeds, in points',
} as const;
export type ScoreMetric = keyof typeof SCORE_NAMES;

type Scored = Pick<Evaluation, 'success' | 'opponents' | 'score'>;

/** The measure an evaluation is judged by (see the file comment). */
export function scoreMetric(ev: Scored): ScoreMetric {
  return ev.score !== undefined ? 'self-play score' : ev.opponents ? 'non-loss vs minimax' : 'success';
}

/** The evaluation's value of `scoreMetric(ev)`. */
export function score(ev: Scored): number {
  if (ev.score !== undefined) return ev.score;
  return ev.opponents ? ev.opponents.minimax.nonLossRate : ev.success;
}

/** How values of one measure print: a level, a size (a spread, no sign) and a difference (signed). */
export interface Units {
  readonly level: (x: number) => string;
  readonly size: (x: number) => string;
  readonly diff: (x: number) => string;
}

const sign = (x: number) => (x >= 0 ? '+' : '');
/** Fractions print as percentages and their differences as percentage points, to 0.1. */
const FRACTION: Units = { level: (x) => `${(x * 100).toFixed(1)}%`, size: (x) => (x * 100).toFixed(1), diff: (x) => `${sign(x)}${(x * 100).toFixed(1)}` };
/** Game scores print as points, to 0.01 (a game's score is a whole number; means over 64 games are not). */
const POINTS: Units = { level: (x) => x.toFixed(2), size: (x) => x.toFixed(2), diff: (x) => `${sign(x)}${x.toFixed(2)}` };

/** The units of `metric` (absent: success, as runs stored before metrics were recorded). */
export function unitsOf(metric: ScoreMetric | undefined): Units {
  return metric === 'self-play score' ? POINTS : FRACTION;
}

/**
 * The units of a measure compared across methods or seeds: the test score's own (`metric`), points
 * for a scored game's score with the scripted partner, fractions for tic-tac-toe's rates.
 */
export function measureUnits(measure: ComparedMeasure, metric: ScoreMetric | undefined): Units {
  return measure === 'testAfter' ? unitsOf(metric) : measure === 'withBot' ? POINTS : FRACTION;
}
