/**
 * `node --import tsx bench/learning/compare-configs.ts <entry> <entry>... [--variant at-grpo]` —
 * one method's runs under several configs (bench:learning entries such as tic-tac-toe and
 * tic-tac-toe-apart, i.e. configs/tic-tac-toe/L2-lora.json and L2-lora-apart.json), each compared
 * with the first entry's: per seed, the median over seeds, and the difference after RL with its 95%
 * interval and exact permutation p (seed-stats.ts; paired by seed where both started RL from the
 * same warm start). Reads bench/results/learning.json, trains nothing; writes
 * bench/results/learning-configs-<first entry>.json and prints Markdown tables.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compareMethods, measured, type ComparedMeasure, type ComparedRun, type MethodComparison } from './seed-stats.ts';
import { median } from '../stats.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);
const at = args.indexOf('--variant');
const variant = at >= 0 ? args[at + 1] : 'at-grpo';
const entries = at >= 0 ? args.filter((_, i) => i !== at && i !== at + 1) : args;
if (!variant || entries.length < 2) throw new Error('usage: compare-configs.ts <entry> <entry>... [--variant at-grpo] (bench:learning entries, the first is the baseline)');

interface StoredRun extends ComparedRun {
  testBefore: number | null;
  testedStep: number | null;
  wallSeconds: number;
}
const stored = JSON.parse(await readFile(join(root, 'bench', 'results', 'learning.json'), 'utf8')) as { results: Record<string, Array<{ variant: string; config: string; runs?: StoredRun[] }>> };
const methods = entries.map((entry) => {
  const r = stored.results[entry]?.find((x) => x.variant === variant && Array.isArray(x.runs));
  if (!r) throw new Error(`bench/results/learning.json has no ${variant} runs for ${entry} (run LEARNING_ENVS=${entry} LEARNING_VARIANTS=${variant} npm run bench:learning)`);
  return { variant: entry, config: r.config, runs: r.runs! };
});

const MEASURES: ComparedMeasure[] = ['testAfter', 'vsRandom', 'optimalMoves'];
const before = (run: StoredRun, m: ComparedMeasure): number | null => (m === 'testAfter' ? run.testBefore : (run[m]?.before ?? null));
const pct = (x: number) => (x * 100).toFixed(1);
const pts = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}`;

const summary = methods.map((m) => ({
  entry: m.variant,
  config: m.config,
  seeds: m.runs.map((r) => r.seed),
  wallMinutes: median(m.runs.map((r) => r.wallSeconds / 60)),
  measures: Object.fromEntries(
    MEASURES.map((measure) => {
      const runs = m.runs.flatMap((r) => {
        const b = before(r, measure);
        const a = measured(r, measure);
        return a === null || b === null ? [] : [{ seed: r.seed, before: b, after: a }];
      });
      return [measure, { runs, medianAfter: runs.length ? median(runs.map((r) => r.after)) : null, medianGain: runs.length ? median(runs.map((r) => r.after - r.before)) : null }];
    }),
  ),
}));
const comparisons: MethodComparison[] = MEASURES.flatMap((measure) => compareMethods(entries.slice(1).map((e) => [e, entries[0]!] as const), methods, measure));

const NAMES: Record<ComparedMeasure, string> = { testAfter: 'test score', vsRandom: 'win rate vs random', optimalMoves: 'perfect moves, all positions', withBot: 'score with the bot as partner' };
for (const measure of MEASURES) {
  console.log(`\n${NAMES[measure]} (${variant}), before → after RL per seed; median after, median gain`);
  console.log('| config | seeds | per seed | median after | median gain |');
  console.log('|---|---|---|---|---|');
  for (const s of summary) {
    const m = s.measures[measure]!;
    if (m.runs.length === 0) continue;
    console.log(`| ${s.config} | ${m.runs.map((r) => r.seed).join(',')} | ${m.runs.map((r) => `${pct(r.before)}→${pct(r.after)}`).join(', ')} | ${pct(m.medianAfter!)} | ${pts(m.medianGain!)} |`);
  }
}
console.log('\n| A − B, after RL | measure | paired | seeds | difference (points), per seed | 95% CI | p (exact permutation) |');
console.log('|---|---|---|---|---|---|---|');
for (const c of comparisons) {
  const seeds = c.paired ? c.seedsA.join(',') : `${c.seedsA.join(',')} / ${c.seedsB.join(',')}`;
  console.log(`| ${c.a} − ${c.b} | ${NAMES[c.metric]} | ${c.paired ? 'yes' : 'no'} | ${seeds} | ${pts(c.diff)}${c.perSeed ? ` (${c.perSeed.map(pts).join(', ')})` : ''} | ${c.ci95 ? `${pts(c.ci95[0])} to ${pts(c.ci95[1])}` : 'n/a'} | ${c.p.toFixed(3)} |`);
}
const out = join(root, 'bench', 'results', `learning-configs-${entries[0]}.json`);
await writeFile(out, `${JSON.stringify({ date: new Date().toISOString(), variant, entries, summary, comparisons }, null, 2)}\n`);
console.log(`\nwrote ${out}`);
