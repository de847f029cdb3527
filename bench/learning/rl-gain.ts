/**
 * `node --import tsx bench/learning/rl-gain.ts <entry>... [--variant at-grpo]` — how much RL added
 * over the warm start, per method and measure, with an interval over run seeds: the test after RL
 * minus the test of the same seed's warm start, as a paired comparison (seed-stats.ts: the mean
 * gain, its 95% Student's t interval and the exact sign-flip p). bench:learning prints each
 * method's gain as mean ± sd over seeds; an issue's "RL gain ≥ +10 points with intervals" wants
 * the interval of that mean. Reads bench/results/learning.json, trains nothing, prints a Markdown
 * table (entries are bench:learning's LEARNING_ENVS names; every method unless --variant names one),
 * and below it the seeds whose warm start ran to its step ceiling without reaching its loss target.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { measureUnits, type ScoreMetric } from './run-score.ts';
import { comparePaired, mean, measured, sampleSd as sd, type ComparedMeasure, type ComparedRun } from './seed-stats.ts';
import { missedTargetNotes, type WarmStartedRun } from './warm-start-ends.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);
const at = args.indexOf('--variant');
const only = at >= 0 ? args[at + 1] : undefined;
const entries = at >= 0 ? args.filter((_, i) => i !== at && i !== at + 1) : args;
if (entries.length === 0 || (at >= 0 && !only)) throw new Error('usage: rl-gain.ts <entry>... [--variant at-grpo] (bench:learning entries such as code or tic-tac-toe)');

interface StoredRun extends ComparedRun, WarmStartedRun {
  testBefore: number | null;
  /** What the test score is: success, a symmetric game's non-loss rate against minimax, or a scored game's self-play score. */
  metric?: ScoreMetric;
}
const stored = JSON.parse(await readFile(join(root, 'bench', 'results', 'learning.json'), 'utf8')) as { results: Record<string, Array<{ variant: string; runs?: StoredRun[] }>> };

const NAMES: Record<Exclude<ComparedMeasure, 'testAfter'>, string> = { vsRandom: 'win rate vs random', optimalMoves: 'perfect moves, all positions', withBot: 'score with the bot as partner' };
const before = (run: StoredRun, m: ComparedMeasure): number | null => (m === 'testAfter' ? run.testBefore : (run[m]?.before ?? null));

console.log('| entry | method | measure | seeds | warm start | after RL | RL gain, per seed | mean gain | 95% CI | p (exact sign flip) |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
const missed: string[] = [];
for (const entry of entries) {
  const methods = (stored.results[entry] ?? []).filter((r): r is { variant: string; runs: StoredRun[] } => Array.isArray(r.runs) && (!only || r.variant === only));
  if (methods.length === 0) throw new Error(`bench/results/learning.json has no ${only ? `${only} ` : ''}runs for ${JSON.stringify(entry)}`);
  for (const m of methods) {
    missed.push(...missedTargetNotes(m.runs).map((n) => `- ${entry} / ${m.variant}, ${n}`));
    for (const measure of ['testAfter', 'vsRandom', 'optimalMoves', 'withBot'] as const) {
      const u = measureUnits(measure, m.runs[0]?.metric);
      const level = (xs: readonly number[]) => `${u.level(mean(xs))} ± ${u.size(sd(xs))}`;
      const runs = m.runs.flatMap((r) => {
        const b = before(r, measure);
        const a = measured(r, measure);
        return a === null || b === null ? [] : [{ seed: r.seed, before: b, after: a }];
      });
      if (runs.length === 0) continue;
      const c = comparePaired(runs.map((r) => r.seed), runs.map((r) => r.after), runs.map((r) => r.before));
      const ci = c.ci95 ? `${u.diff(c.ci95[0])} to ${u.diff(c.ci95[1])}` : 'n/a';
      console.log(`| ${entry} | ${m.variant} | ${measure === 'testAfter' ? (m.runs[0]?.metric ?? 'success') : NAMES[measure]} | ${c.seedsA.join(',')} | ${level(runs.map((r) => r.before))} | ${level(runs.map((r) => r.after))} | ${c.perSeed!.map(u.diff).join(', ')} | **${u.diff(c.diff)}** ± ${u.size(sd(c.perSeed!))} | ${ci} | ${c.p.toFixed(3)} |`);
    }
  }
}
if (missed.length > 0) console.log(`\nWarm starts that ran to their step ceiling without reaching their loss target (their seeds' gains measure the warm start as much as RL):\n${missed.join('\n')}`);
