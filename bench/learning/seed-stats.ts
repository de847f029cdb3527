/**
 * Is one method ahead of another over run seeds? The difference of their means, a 95% confidence
 * interval from Student's t, and an exact two-sided permutation p-value, which assumes nothing
 * about the distribution of results over seeds (only that, were the methods the same, the labels
 * could be swapped).
 *
 * Paired: both methods started RL from one warm start at each seed (same warm-start cache key),
 * so the warm start's luck cancels, and the test is on the per-seed differences (sign flips).
 * Unpaired: each method has its own warm starts; Welch's interval, and the permutation test over
 * every split of the pooled results into groups of the methods' sizes.
 */

export interface SeedComparison {
  paired: boolean;
  /** Seeds of each side (paired: the seeds both ran, in order). */
  seedsA: number[];
  seedsB: number[];
  /** Mean of A − mean of B. */
  diff: number;
  /** Paired: the per-seed differences A − B. */
  perSeed: number[] | null;
  /** 95% confidence interval of the difference; null with too few seeds (paired: < 2; unpaired: < 2 on either side). */
  ci95: [number, number] | null;
  /** Exact two-sided permutation p-value. */
  p: number;
}

/** Student's t 0.975 quantile for 1..30 degrees of freedom (tables); past 30, 30's (slightly wide). */
const T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042];

/** The t quantile for `df` degrees of freedom, rounded down to a whole number (so the interval errs wide). */
export function t975(df: number): number {
  if (!(df >= 1)) throw new Error(`t975: degrees of freedom must be at least 1, got ${df}`);
  return T975[Math.min(Math.floor(df), T975.length) - 1]!;
}

/** The mean over seeds. */
export const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const variance = (xs: readonly number[]) => {
  const m = mean(xs);
  return xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1);
};
/** The spread over seeds: the sample (unbiased) standard deviation, 0 for a single seed. */
export const sampleSd = (xs: readonly number[]): number => (xs.length > 1 ? Math.sqrt(variance(xs)) : 0);

/** Whole enumerations only: past this many labellings the exact test is too slow for a report. */
const MAX_PERMUTATIONS = 1 << 20;
/** Ties: a relabelling at least as extreme as the observed one within rounding counts as extreme. */
const EPS = 1e-12;

/** Paired: A − B per seed over `seeds`. */
export function comparePaired(seeds: readonly number[], a: readonly number[], b: readonly number[]): SeedComparison {
  if (a.length !== seeds.length || b.length !== seeds.length) throw new Error(`comparePaired: ${seeds.length} seeds but ${a.length} and ${b.length} results`);
  if (seeds.length === 0) throw new Error('comparePaired: no seeds');
  if (seeds.length > 20) throw new Error(`comparePaired: ${seeds.length} seeds is past the exact test's 20`);
  const d = a.map((x, i) => x - b[i]!);
  const m = mean(d);
  const half = d.length > 1 ? t975(d.length - 1) * Math.sqrt(variance(d) / d.length) : null;
  // Every sign flip of the differences.
  let extreme = 0;
  const total = 2 ** d.length;
  for (let mask = 0; mask < total; mask++) {
    let s = 0;
    for (let i = 0; i < d.length; i++) s += mask & (1 << i) ? -d[i]! : d[i]!;
    if (Math.abs(s / d.length) >= Math.abs(m) - EPS) extreme++;
  }
  return { paired: true, seedsA: [...seeds], seedsB: [...seeds], diff: m, perSeed: d, ci95: half === null ? null : [m - half, m + half], p: extreme / total };
}

/** Unpaired: mean of `a` − mean of `b`, each over its own seeds. */
export function compareUnpaired(seedsA: readonly number[], a: readonly number[], seedsB: readonly number[], b: readonly number[]): SeedComparison {
  if (a.length !== seedsA.length || b.length !== seedsB.length) throw new Error('compareUnpaired: seeds and results differ in length');
  if (a.length === 0 || b.length === 0) throw new Error('compareUnpaired: a side has no seeds');
  const m = mean(a) - mean(b);
  let ci95: [number, number] | null = null;
  if (a.length > 1 && b.length > 1) {
    const va = variance(a) / a.length;
    const vb = variance(b) / b.length;
    const se = Math.sqrt(va + vb);
    // Welch–Satterthwaite degrees of freedom; with no spread on either side the interval is the point.
    const df = se === 0 ? Infinity : (va + vb) ** 2 / (va ** 2 / (a.length - 1) + vb ** 2 / (b.length - 1));
    const half = se === 0 ? 0 : t975(df) * se;
    ci95 = [m - half, m + half];
  }
  const pooled = [...a, ...b];
  const n = pooled.length;
  if (binomial(n, a.length) > MAX_PERMUTATIONS) throw new Error(`compareUnpaired: ${a.length} + ${b.length} seeds is past the exact test's size`);
  const sum = pooled.reduce((x, y) => x + y, 0);
  let extreme = 0;
  let total = 0;
  // Every choice of a.length results as side A.
  const pick = (start: number, left: number, s: number): void => {
    if (left === 0) {
      total++;
      if (Math.abs(s / a.length - (sum - s) / b.length) >= Math.abs(m) - EPS) extreme++;
      return;
    }
    for (let i = start; i <= n - left; i++) pick(i + 1, left - 1, s + pooled[i]!);
  };
  pick(0, a.length, 0);
  return { paired: false, seedsA: [...seedsA], seedsB: [...seedsB], diff: m, perSeed: null, ci95, p: extreme / total };
}

function binomial(n: number, k: number): number {
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return Math.round(r);
}

/** One seed's run of a method, as far as a comparison reads it. */
export interface ComparedRun {
  seed: number;
  testAfter: number | null;
  /** Tic-tac-toe's other measures, test before and after RL (see bench-learning's SeedRun). */
  vsRandom?: { before: number; after: number } | null;
  optimalMoves?: { before: number; after: number } | null;
  /** A scored game's (Hanabi's) self-play score with the scripted partner in the other seats, test before and after RL. */
  withBot?: { before: number; after: number } | null;
  /** A scored game: the scripted team's mean score on the same test seeds (points), the bar. */
  botTeam?: number;
  /** Warm-start cache key per base model (null: no warm start; absent: not known). */
  warmStart?: Record<string, string> | null;
}

export interface MethodComparison extends SeedComparison {
  a: string;
  b: string;
  /**
   * What is compared, after RL: the run's score on the test (`testAfter`: a fraction, or a scored
   * game's points), or for tic-tac-toe its win rate against random (`vsRandom`) or its
   * perfect-move rate over all positions (`optimalMoves`), or for a scored game its score with the
   * scripted partner (`withBot`, points).
   */
  metric: ComparedMeasure;
}

export type ComparedMeasure = 'testAfter' | 'vsRandom' | 'optimalMoves' | 'withBot';

/** A run's value of `measure` after RL, or null where the run has none. */
export function measured(run: ComparedRun, measure: ComparedMeasure): number | null {
  return measure === 'testAfter' ? run.testAfter : (run[measure]?.after ?? null);
}

/** Whether two runs started RL from the same weights: both have warm starts, with the same key for every model. */
export function sameWarmStart(x: ComparedRun, y: ComparedRun): boolean {
  if (!x.warmStart || !y.warmStart) return false;
  const a = Object.entries(x.warmStart).sort(([p], [q]) => p.localeCompare(q));
  const b = Object.entries(y.warmStart).sort(([p], [q]) => p.localeCompare(q));
  return a.length === b.length && a.every(([m, k], i) => b[i]![0] === m && b[i]![1] === k);
}

/**
 * Each pair (A, B) of `pairs` whose methods both have a tested run: paired over the seeds both ran
 * when every one of those seeds started RL from the same warm start on both sides; otherwise
 * unpaired, each method over all its tested seeds.
 */
export function compareMethods(pairs: ReadonlyArray<readonly [string, string]>, methods: ReadonlyArray<{ variant: string; runs: readonly ComparedRun[] }>, measure: ComparedMeasure = 'testAfter'): MethodComparison[] {
  const tested = (v: string) =>
    methods
      .find((m) => m.variant === v)
      ?.runs.flatMap((r) => {
        const value = measured(r, measure);
        return value === null ? [] : [{ ...r, testAfter: value }];
      }) ?? [];
  const out: MethodComparison[] = [];
  for (const [a, b] of pairs) {
    const ra = tested(a);
    const rb = tested(b);
    if (ra.length === 0 || rb.length === 0) continue;
    const partner = (x: ComparedRun) => rb.find((y) => y.seed === x.seed);
    const common = ra.filter((x) => partner(x) !== undefined);
    const c =
      common.length > 0 && common.every((x) => sameWarmStart(x, partner(x)!))
        ? comparePaired(common.map((x) => x.seed), common.map((x) => x.testAfter), common.map((x) => partner(x)!.testAfter))
        : compareUnpaired(ra.map((x) => x.seed), ra.map((x) => x.testAfter), rb.map((x) => x.seed), rb.map((x) => x.testAfter));
    out.push({ a, b, metric: measure, ...c });
  }
  return out;
}

/** The scripted team (Hanabi's convention bot in every seat) as side B of a comparison: the bar. */
export const BOT_TEAM = 'bot team';

/**
 * A method's test score after RL − the scripted team's on the same test seeds (`botTeam`), paired
 * by run seed. Every run tests on the same seeds, so the bar is one number and the interval is
 * the method's spread over seeds; runs without a bar (other environments) give no comparison.
 */
export function compareWithBotTeam(method: { variant: string; runs: readonly ComparedRun[] }): MethodComparison[] {
  const runs = method.runs.flatMap((r) => (r.testAfter === null || r.botTeam === undefined ? [] : [{ seed: r.seed, after: r.testAfter, bar: r.botTeam }]));
  if (runs.length === 0) return [];
  const c = comparePaired(runs.map((x) => x.seed), runs.map((x) => x.after), runs.map((x) => x.bar));
  return [{ a: method.variant, b: BOT_TEAM, metric: 'testAfter', ...c }];
}
