/**
 * `npm run bench:learning` — AT-GRPO vs GRPO vs a single agent, same model, budget and tasks,
 * each with several run seeds.
 *
 * For each environment (configs/<env>/: plan-path, sokoban, sudoku, tic-tac-toe, math, code, hanabi) the
 * configs differ only in what is compared (a method with no config for an environment is skipped):
 *   at-grpo      configs/<env>/L2-lora.json         tool + plan, a LoRA adapter each, tree sampling
 *   grpo         configs/<env>/L2-grpo.json         same team, independent rollouts grouped per task
 *   single       configs/<env>/L0-single.json       one solo agent (the puzzle's single variant), AT-GRPO
 *   single-grpo  configs/<env>/L0-single-grpo.json  the same solo agent with GRPO: the paper's
 *                                                   single-agent baseline (SA + GRPO)
 * and, when LEARNING_VARIANTS names them, the team at the other specialization levels (at-grpo is L2):
 *   shared       configs/<env>/L1-shared.json       both agents on one policy, trained in full
 *   separate     configs/<env>/L3-separate.json     a model per agent, each trained in full
 * and for environments whose agents write code (math), the single agent that runs its own code:
 *   single-tool  configs/<env>/L0-single-tool.json  one agent writes the program; its output is the
 *                                                   answer (L0 with execution; \`single\` runs nothing)
 * and PPO with a value head (docs/ppo.md), where an environment has its config (tic-tac-toe):
 *   ppo          configs/<env>/L2-lora-ppo.json     the flagship team, independent rollouts, GAE
 *   shared-ppo   configs/<env>/L1-shared-ppo.json   the shared policy with PPO (Hanabi, whose measured level is L1)
 * Each (method, seed) runs its warm start (cached per seed: the seed initialises the model and
 * draws its demonstrations) and RL, with validation on the same held-out seeds every few steps and
 * the test (training.testEpisodes, seeds apart from validation's) before and after RL. Per method
 * it reports the mean and the spread over seeds of every validation and of the test; results in
 * bench/results/learning.json and one SVG chart per environment (bench/results/learning-<env>.svg:
 * the mean validation success per step, with a band from the lowest to the highest seed).
 * Methods are then compared pairwise on the test after RL (`COMPARISONS`): the difference of their
 * means with a 95% confidence interval and an exact permutation p-value (seed-stats.ts), paired by
 * seed where both started RL from the same warm start (the same warm-start cache keys), so that a
 * lucky warm start does not pass for a better method.
 *
 * Tic-tac-toe is scored by its games against the minimax player (non-loss rate, both sides; minimax
 * picks among optimal moves, so games vary), not by self-play success; the win rate against the
 * random player and the perfect-move rate over all 4520 reachable positions are kept beside it
 * (`score`, `vsRandom`, `optimalMoves`), summarised and compared the same way. Hanabi is scored
 * by the mean self-play score in points (`test/score`; its success only says that no game lost
 * every fuse), with the policy's score beside the convention bot (`withBot`) and the bot team's
 * score on the same test seeds (`botTeam`), the bar: each method after RL is compared with it
 * (A − "bot team", paired by seed) and the chart draws the bot team's validation score as a line.
 * Hanabi has only the specialization levels: LEARNING_VARIANTS=shared (L1) or separate (L3), and
 * shared-ppo, L1 with PPO at the same budget.
 *
 * Options (env): LEARNING_ENVS (default plan-path,sokoban; any of the seven; plan-path-7x7 runs
 * configs/plan-path/*-7x7.json, the harder task; math-mod-linear, configs/math/*-mod-linear.json, the
 * harder math tiers), LEARNING_VARIANTS (default
 * at-grpo,grpo,single,single-grpo; also shared, separate, single-tool), LEARNING_SEEDS (a count, seeds 1..N, or
 * a list "1,2,3", one seed alone as "4,"; default 3),
 * LEARNING_STEPS (override training.steps), LEARNING_KEEP_SEEDS=1 (add seeds: a method's stored
 * runs of seeds this run does not repeat are kept, and its summary is over all of them; only for
 * the same config file and step count, and refused before anything trains unless each stored run
 * trained as the config does now: stored-seeds.ts), LEARNING_CHARTS_ONLY=1 (train
 * nothing: redraw the charts of LEARNING_ENVS and recompute their comparisons from
 * bench/results/learning.json, the summary over seeds of a method whose runs import-train-runs.ts stored,
 * and how stored runs' warm starts ended where the cache here holds them: warm-start-ends.ts),
 * LEARNING_KEEP_RUNS=1 (keep the work folder, whose path it prints at the start and the end: its
 * troupe.db and each run's folder with its run.json and config.json as `troupe train` writes them,
 * for `troupe eval <folder> --test [--temperature T]`, team-turns.ts, ttt-groups.ts and the other
 * diagnostics; by default it is deleted).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRunFolder } from '../../server/runs/run-folder.ts';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadExperiment, resolveExperiment } from '../../server/rl/resolve-experiment.ts';
import type { Evaluation } from '../../server/rl/evaluate.ts';
import type { WarmStartEnd } from '../../server/rl/warm-start.ts';
import { train, warmStartKeys } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';
import { measureUnits, score, scoreMetric, unitsOf, type ScoreMetric, type Units } from './run-score.ts';
import { BOT_TEAM, compareMethods, compareWithBotTeam, mean, sampleSd, type ComparedMeasure, type ComparedRun, type MethodComparison } from './seed-stats.ts';
import { METHOD_CONFIGS, methodConfigPath } from './method-configs.ts';
import { configDigest, storedSeedProblems } from './stored-seeds.ts';
import { fillWarmStartEnds, missedTargetNotes, warmStartEnds } from './warm-start-ends.ts';
import { lineChart } from './svg-chart.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cacheRoot = join(root, '.troupe', 'cache', 'warm-start');
const ENVS = (process.env['LEARNING_ENVS'] ?? 'plan-path,sokoban').split(',');
const DEFAULT_VARIANTS = ['at-grpo', 'grpo', 'single', 'single-grpo'];
/** Every method, in the order of tables and chart legends; the specialization levels run only when named. */
const VARIANT_ORDER = [...DEFAULT_VARIANTS, 'shared', 'separate', 'single-tool', 'ppo', 'shared-ppo'];
const VARIANTS = (process.env['LEARNING_VARIANTS'] ?? DEFAULT_VARIANTS.join(',')).split(',');
const STEPS = process.env['LEARNING_STEPS'] ? Number(process.env['LEARNING_STEPS']) : undefined;
const SEEDS = parseSeeds(process.env['LEARNING_SEEDS'] ?? '3');
const KEEP_SEEDS = process.env['LEARNING_KEEP_SEEDS'] === '1';
const CHARTS_ONLY = process.env['LEARNING_CHARTS_ONLY'] === '1';
const KEEP_RUNS = process.env['LEARNING_KEEP_RUNS'] === '1';
/**
 * The pairs of methods compared on the test after RL, A − B: the issue's order (AT-GRPO > GRPO >
 * a single agent, against both single-agent baselines), each algorithm on the solo agent, and
 * the other specialization levels against the flagship level and the single agent.
 */
const COMPARISONS: ReadonlyArray<readonly [string, string]> = [
  ['at-grpo', 'grpo'],
  ['grpo', 'single-grpo'],
  ['grpo', 'single'],
  ['at-grpo', 'single-grpo'],
  ['at-grpo', 'single'],
  ['single', 'single-grpo'],
  ['shared', 'at-grpo'],
  ['separate', 'at-grpo'],
  ['shared', 'single'],
  ['separate', 'single'],
  ['at-grpo', 'single-tool'],
  ['single-tool', 'single'],
  ['at-grpo', 'ppo'],
  ['shared', 'shared-ppo'],
];
for (const v of VARIANTS) if (!METHOD_CONFIGS[v]) throw new Error(`LEARNING_VARIANTS: unknown variant ${JSON.stringify(v)} (${VARIANT_ORDER.join(', ')})`);

/** A count N (seeds 1..N) or a comma list; a list of one seed is written with a trailing comma ("4,"). */
function parseSeeds(text: string): number[] {
  // Number('') is 0, so an empty entry is made NaN to be refused.
  const list = text.includes(',') ? text.replace(/,$/, '').split(',').map((s) => (s.trim() === '' ? Number.NaN : Number(s))) : Array.from({ length: Number(text) }, (_, i) => i + 1);
  if (list.length === 0 || list.some((s) => !Number.isSafeInteger(s) || s < 0)) throw new Error(`LEARNING_SEEDS must be a count or a list of non-negative integers, got ${JSON.stringify(text)}`);
  return list;
}

/** One seed's run; a scored game's `withBot` and `botTeam` (points) are ComparedRun's. */
interface SeedRun extends ComparedRun {
  seed: number;
  /** What testBefore, testAfter and the curve measure (`score`). */
  metric?: ScoreMetric;
  /** A symmetric game's win rate against the random player, test before and after RL. */
  vsRandom?: { before: number; after: number } | null;
  /** Tic-tac-toe: the fraction of all 4520 reachable positions where the greedy move is perfect play's, test before and after RL. */
  optimalMoves?: { before: number; after: number } | null;
  /** Per validated step `score` (named success for the stored runs), and for a scored game the scripted team's validation score. */
  curve: Array<{ step: number; success: number; meanReward: number; botTeam?: number }>;
  /** Test success (held-out seeds apart from validation's) of the warm start and after RL; null without testEpisodes. */
  testBefore: number | null;
  testAfter: number | null;
  /** The step whose policy the test after RL played: the last, or with training.select 'best' the best validated one. */
  testedStep: number | null;
  wallSeconds: number;
  /**
   * The warm-start cache key of every base model, by model id (null: no warm start). Runs of two
   * methods with the same keys at a seed started RL from the same weights. Runs stored before the
   * keys were recorded get them from their config as it is now.
   */
  warmStart?: Record<string, string> | null;
  /**
   * How each base model's warm start ended, where its config has a loss target (null: none has);
   * absent where not known. A seed whose warm start ran to its ceiling is named beside the tables.
   */
  warmStartEnd?: Record<string, WarmStartEnd> | null;
  /** `configDigest` of the config the run trained (stored-seeds.ts); absent in runs stored before it was recorded. */
  configDigest?: string;
}

/** A validated step of a run's curve: its score, and for a scored game the scripted team's on the same seeds. */
function curvePoint(step: number, v: Evaluation): SeedRun['curve'][number] {
  return { step, success: score(v), meanReward: v.meanReward, ...(v.partners ? { botTeam: v.partners.botTeam } : {}) };
}

interface Spread {
  mean: number;
  /** Unbiased standard deviation over seeds (0 for one seed). */
  std: number;
  min: number;
  max: number;
}

interface VariantResult {
  variant: string;
  config: string;
  seeds: number[];
  runs: SeedRun[];
  /** Validation success per validated step, over seeds. */
  curve: Array<{ step: number } & Spread>;
  testBefore: Spread | null;
  testAfter: Spread | null;
  /** Test after − before, per seed, over seeds. */
  testGain: Spread | null;
  wallSeconds: number;
}

function spread(xs: readonly number[]): Spread {
  return { mean: mean(xs), std: sampleSd(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

function summarise(variant: string, config: string, runs: SeedRun[]): VariantResult {
  const steps = [...new Set(runs.flatMap((r) => r.curve.map((p) => p.step)))].sort((a, b) => a - b);
  const curve = steps.flatMap((step) => {
    const xs = runs.flatMap((r) => r.curve.filter((p) => p.step === step).map((p) => p.success));
    return xs.length === runs.length ? [{ step, ...spread(xs) }] : [];
  });
  const tested = runs.filter((r): r is SeedRun & { testBefore: number; testAfter: number } => r.testBefore !== null && r.testAfter !== null);
  const all = tested.length === runs.length && runs.length > 0;
  return {
    variant,
    config,
    seeds: runs.map((r) => r.seed),
    runs,
    curve,
    testBefore: all ? spread(tested.map((r) => r.testBefore)) : null,
    testAfter: all ? spread(tested.map((r) => r.testAfter)) : null,
    testGain: all ? spread(tested.map((r) => r.testAfter - r.testBefore)) : null,
    wallSeconds: runs.reduce((a, r) => a + r.wallSeconds, 0),
  };
}

/**
 * LEARNING_KEEP_SEEDS: refuses, before anything trains, to add seeds to stored runs of a method that
 * did not train as its config does now (another digest; without one, another warm start).
 */
async function checkStoredSeeds(plan: ReadonlyArray<{ env: string; variants: ReadonlyArray<{ variant: string; path: string }> }>): Promise<void> {
  const file = join(root, 'bench', 'results', 'learning.json');
  if (!existsSync(file)) return;
  const stored = JSON.parse(await readFile(file, 'utf8')) as StoredResults;
  for (const { env, variants } of plan) {
    for (const { variant, path } of variants) {
      const row = stored.results?.[env]?.find((r) => r.variant === variant && Array.isArray(r.runs));
      if (!row) continue;
      const { config: base } = await loadExperiment(path);
      const kept = row.runs!.filter((r) => !SEEDS.includes(r.seed));
      const problems = await storedSeedProblems(kept, configDigest(base, path), async (seed) => warmStartKeys(await resolveExperiment({ ...base, seed }, path)));
      if (problems.length > 0) throw new Error(`LEARNING_KEEP_SEEDS: stored ${env} ${variant} seeds did not train as ${relative(root, path)} does now: ${problems.join('; ')}; run all seeds instead`);
    }
  }
}

/**
 * `fresh` plus the stored runs of its method whose seeds it did not run (LEARNING_KEEP_SEEDS).
 * Stored runs of another config or step count are refused rather than mixed in.
 */
function withStoredSeeds(fresh: VariantResult, stored: ReadonlyArray<Partial<VariantResult>>): VariantResult {
  const old = stored.find((r) => r.variant === fresh.variant && Array.isArray(r.runs));
  if (!old) return fresh;
  const lastStep = (r: SeedRun) => r.curve.at(-1)?.step;
  if (old.config !== fresh.config || old.runs!.some((r) => lastStep(r) !== lastStep(fresh.runs[0]!))) {
    throw new Error(`LEARNING_KEEP_SEEDS: the stored ${fresh.variant} runs are of ${old.config} to step ${lastStep(old.runs![0]!)}, this run's of ${fresh.config} to step ${lastStep(fresh.runs[0]!)}; run all seeds instead`);
  }
  const runs = [...old.runs!.filter((r) => !fresh.seeds.includes(r.seed)), ...fresh.runs].sort((a, b) => a.seed - b.seed);
  return summarise(fresh.variant, fresh.config, runs);
}

/**
 * The chart of one environment: mean validation success per step, banded from the lowest to the
 * highest seed; for a scored game the self-play score in points, with the scripted team's
 * validation score (the same seeds at every step and run seed) as a dashed line.
 */
async function writeChart(outDir: string, env: string, rs: readonly VariantResult[]): Promise<void> {
  const series = rs.map((r) => ({ name: `${r.variant} (${r.seeds.length} seeds)`, points: r.curve.map((p) => [p.step, p.mean] as const), band: r.curve.map((p) => [p.step, p.min, p.max] as const) }));
  const bar = rs.flatMap((r) => r.runs.flatMap((run) => (run.curve[0]?.botTeam === undefined ? [] : [run.curve[0].botTeam])))[0];
  const svg =
    rs[0]?.runs[0]?.metric === 'self-play score'
      ? lineChart(`${env}: validation self-play score, mean over seeds (band: lowest to highest)`, series, {
          yLabel: 'validation score (points)',
          points: true,
          // Whole multiples of 5 (a colour's 5 cards), above every band and the bar.
          yMax: 5 * Math.ceil(Math.max(1, bar ?? 0, ...rs.flatMap((r) => r.curve.map((p) => p.max))) / 5),
          ...(bar === undefined ? {} : { reference: { value: bar, name: `bot team (${bar.toFixed(2)})` } }),
        })
      : lineChart(`${env}: validation success, mean over seeds (band: lowest to highest)`, series);
  await writeFile(join(outDir, `learning-${env}.svg`), svg);
}

async function redrawCharts(): Promise<void> {
  const outDir = join(root, 'bench', 'results');
  const file = join(outDir, 'learning.json');
  const stored = JSON.parse(await readFile(file, 'utf8')) as StoredResults;
  for (const env of ENVS) {
    const rs = stored.results?.[env];
    if (!rs) throw new Error(`LEARNING_CHARTS_ONLY: bench/results/learning.json has no results for ${JSON.stringify(env)}`);
    // Rows imported by import-train-runs.ts carry runs but no summary: it is computed here from the runs.
    const summarised = rs.map((r) => (Array.isArray(r.runs) && r.curve?.length === 0 ? summarise(r.variant!, r.config!, r.runs) : r));
    stored.results![env] = summarised;
    const withSeeds = summarised.filter((r): r is VariantResult => Array.isArray(r.runs));
    if (withSeeds.length === 0) throw new Error(`LEARNING_CHARTS_ONLY: the stored ${env} results predate per-seed runs; rerun them to chart them`);
    await writeChart(outDir, env, withSeeds);
    console.log(`redrew bench/results/learning-${env}.svg (${withSeeds.map((r) => r.variant).join(', ')})`);
    await fillWarmStartKeys(withSeeds);
    // Stored runs from before warmStartEnd was recorded: how their warm starts ended, where this cache has them.
    for (const r of withSeeds) await fillWarmStartEnds(r.runs, cacheRoot);
    (stored.comparisons ??= {})[env] = compareAll(withSeeds);
  }
  await writeFile(file, `${JSON.stringify(stored, null, 2)}\n`);
  printMissedTargets(Object.fromEntries(ENVS.map((env) => [env, stored.results![env]!])));
  printComparisons(Object.fromEntries(ENVS.map((env) => [env, stored.comparisons![env]!])), Object.fromEntries(ENVS.map((env) => [env, envMetric(stored.results![env]!)])));
}

interface StoredResults {
  date?: string;
  results?: Record<string, Array<Partial<VariantResult>>>;
  comparisons?: Record<string, MethodComparison[]>;
}

/** Runs stored before warm-start keys were recorded: the keys of their config (as it is now) at their seed. */
async function fillWarmStartKeys(rs: readonly VariantResult[]): Promise<void> {
  for (const r of rs) {
    const path = join(root, r.config);
    if (r.runs.every((run) => run.warmStart !== undefined) || !existsSync(path)) continue;
    const { config: base } = await loadExperiment(path);
    for (const run of r.runs) {
      if (run.warmStart === undefined) run.warmStart = await warmStartKeys(await resolveExperiment({ ...base, seed: run.seed }, path));
    }
  }
}

/**
 * Every comparison of an environment's methods: on the test score after RL, and where the runs
 * carry them (tic-tac-toe), on the win rate against random and the perfect-move rate too; for a
 * scored game (Hanabi) on the score with the bot as partner, and each method against the bot team.
 */
function compareAll(rs: readonly VariantResult[]): MethodComparison[] {
  const measures: ComparedMeasure[] = ['testAfter', 'vsRandom', 'optimalMoves', 'withBot'];
  return [...measures.flatMap((m) => compareMethods(COMPARISONS, rs, m)), ...rs.flatMap(compareWithBotTeam)];
}

const MEASURE_NAMES: Record<ComparedMeasure, string> = { testAfter: 'test after RL', vsRandom: 'win rate vs random', optimalMoves: 'perfect moves, all positions', withBot: 'with the bot as partner' };

/** The measure every run of an environment is judged by (its first stored run's). */
function envMetric(rs: ReadonlyArray<Partial<VariantResult>>): ScoreMetric | undefined {
  return rs.find((r) => Array.isArray(r.runs) && r.runs.length > 0)?.runs?.[0]?.metric;
}

/** The seeds whose warm start ran to its ceiling without reaching its loss target, by method: they are in the tables, and measure their warm start more than RL. */
function printMissedTargets(byEnv: Record<string, ReadonlyArray<Partial<VariantResult>>>): void {
  const lines = Object.entries(byEnv).flatMap(([env, rs]) => rs.flatMap((r) => (Array.isArray(r.runs) ? missedTargetNotes(r.runs).map((n) => `- ${env} / ${r.variant}, ${n}`) : [])));
  if (lines.length > 0) console.log(`\nWarm starts that ran to their step ceiling without reaching their loss target (stopAtLoss); these seeds start RL short of the config's target:\n${lines.join('\n')}`);
}

function printComparisons(byEnv: Record<string, MethodComparison[]>, metrics: Record<string, ScoreMetric | undefined>): void {
  console.log('\n| environment | A − B | measure, after RL | paired | seeds | difference (points) | 95% CI | p (exact permutation) |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [env, cs] of Object.entries(byEnv)) {
    for (const c of cs) {
      const pts = measureUnits(c.metric ?? 'testAfter', metrics[env]).diff;
      const seeds = c.paired ? c.seedsA.join(',') : `${c.seedsA.join(',')} / ${c.seedsB.join(',')}`;
      const ci = c.ci95 ? `${pts(c.ci95[0])} to ${pts(c.ci95[1])}` : 'n/a';
      console.log(`| ${env} | ${c.a} − ${c.b} | ${MEASURE_NAMES[c.metric ?? 'testAfter']} | ${c.paired ? 'yes' : 'no'} | ${seeds} | ${pts(c.diff)}${c.perSeed ? ` (${c.perSeed.map(pts).join(', ')})` : ''} | ${ci} | ${c.p.toFixed(3)} |`);
    }
  }
}

async function main(): Promise<void> {
  if (CHARTS_ONLY) return redrawCharts();
  // Every config is checked before anything trains, so a missing one fails now, not hours in.
  const plan = ENVS.map((env) => {
    const folder = methodConfigPath(env, VARIANTS[0]!).folder;
    return {
      env,
      folder,
      variants: VARIANTS.map((variant) => {
        const { file, rel } = methodConfigPath(env, variant);
        return { variant, file, path: join(root, rel) };
      }),
    };
  });
  // A method an environment has no config for is skipped, said aloud (tic-tac-toe has no single
  // agent; code has no SA + GRPO config); an environment left with none is an error.
  for (const entry of plan) {
    const missing = entry.variants.filter((v) => !existsSync(v.path));
    for (const v of missing) process.stderr.write(`${entry.env} / ${v.variant}: no config configs/${entry.folder}/${v.file}; skipped\n`);
    entry.variants = entry.variants.filter((v) => existsSync(v.path));
    if (entry.variants.length === 0) throw new Error(`${entry.env}: none of ${VARIANTS.join(', ')} has a config in configs/${entry.folder}`);
  }
  if (KEEP_SEEDS) await checkStoredSeeds(plan);
  const work = await mkdtemp(join(tmpdir(), 'troupe-learning-'));
  if (KEEP_RUNS) process.stderr.write(`LEARNING_KEEP_RUNS: the runs are kept in ${work} (troupe.db, one folder per run)\n`);
  const store = openRunStore(join(work, 'troupe.db'));
  const results: Record<string, VariantResult[]> = {};
  try {
    for (const { env, folder, variants } of plan) {
      results[env] = [];
      for (const { variant, file, path } of variants) {
        const { config: base } = await loadExperiment(path);
        const runs: SeedRun[] = [];
        for (const seed of SEEDS) {
          const config = { ...base, seed };
          const experiment = await resolveExperiment(config, path);
          const runDir = join(work, `${env}-${variant}-${seed}`);
          const run = store.createRun({ name: `${env}/${variant}/seed ${seed}`, config, runDir });
          // A run folder as `troupe train` makes it, so a kept run (LEARNING_KEEP_RUNS) opens with `troupe eval` and the act scripts.
          await createRunFolder({ dir: runDir, runId: run.id, databasePath: join(work, 'troupe.db'), configSource: path, steps: experiment.training.steps }, `${JSON.stringify(config, null, 2)}\n`);
          const curve: SeedRun['curve'] = [];
          const t0 = performance.now();
          process.stderr.write(`\n== ${env} / ${variant} (${folder}/${file}) seed ${seed}\n`);
          const s = await train({
            experiment,
            store,
            runId: run.id,
            runDir,
            cacheRoot,
            resume: false,
            ...(STEPS ? { steps: STEPS } : {}),
            log: (l) => process.stderr.write(`${l}\n`),
            onStep: (r) => {
              if (r.validation) curve.push(curvePoint(r.step, r.validation));
              process.stderr.write(`  step ${r.step}/${r.steps} ${(r.ms / 1000).toFixed(1)}s train-success ${(r.trainSuccess * 100).toFixed(0)}%${r.validation ? ` val ${(r.validation.success * 100).toFixed(1)}%` : ''}\n`);
            },
          });
          curve.unshift(s.initial ? curvePoint(0, s.initial) : { step: 0, success: Number.NaN, meanReward: Number.NaN });
          const vsRandom = s.initialTest?.opponents && s.finalTest?.opponents ? { before: s.initialTest.opponents.random.winRate, after: s.finalTest.opponents.random.winRate } : null;
          const optimalMoves = s.initialTest?.positions && s.finalTest?.positions ? { before: s.initialTest.positions.all.rate, after: s.finalTest.positions.all.rate } : null;
          // Only scored games carry these, so the other environments' rows are written as before.
          const scored = s.initialTest?.partners && s.finalTest?.partners ? { withBot: { before: s.initialTest.partners.withBot, after: s.finalTest.partners.withBot }, botTeam: s.finalTest.partners.botTeam } : {};
          const keys = await warmStartKeys(experiment);
          const ends = await warmStartEnds(keys, cacheRoot);
          runs.push({
            seed,
            metric: s.initial ? scoreMetric(s.initial) : 'success',
            vsRandom,
            optimalMoves,
            ...scored,
            curve,
            testBefore: s.initialTest ? score(s.initialTest) : null,
            testAfter: s.finalTest ? score(s.finalTest) : null,
            testedStep: s.testedStep,
            wallSeconds: (performance.now() - t0) / 1000,
            warmStart: keys,
            ...(ends === undefined ? {} : { warmStartEnd: ends }),
            configDigest: configDigest(config, path),
          });
          for (const note of missedTargetNotes([runs.at(-1)!])) process.stderr.write(`warm start: ${env} / ${variant} ${note}; this seed's RL starts from a policy short of the config's target\n`);
          store.setRunState(run.id, 'done');
        }
        results[env].push(summarise(variant, `configs/${folder}/${file}`, runs));
      }
    }
  } finally {
    store.close();
    if (KEEP_RUNS) process.stderr.write(`LEARNING_KEEP_RUNS: the runs are in ${work}\n`);
    else await rm(work, { recursive: true, force: true });
  }
  const outDir = join(root, 'bench', 'results');
  await mkdir(outDir, { recursive: true });
  // Merge into earlier results of this format, so one environment or variant can be re-run on its own.
  const file = join(outDir, 'learning.json');
  // Environments this run did not touch are written back as they were, whatever their format
  // (older entries without per-seed runs used to be dropped, and their charts redrawn empty).
  const untouched: Record<string, Array<Partial<VariantResult>>> = {};
  const stored = existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as StoredResults) : null;
  if (stored) {
    for (const [env, rs] of Object.entries(stored.results ?? {})) {
      if (!ENVS.includes(env)) {
        untouched[env] = rs;
        continue;
      }
      let fresh = results[env] ?? [];
      if (KEEP_SEEDS) fresh = fresh.map((f) => withStoredSeeds(f, rs));
      const kept = rs.filter((r): r is VariantResult => Array.isArray(r.runs) && !fresh.some((f) => f.variant === r.variant));
      results[env] = [...kept, ...fresh].sort((a, b) => VARIANT_ORDER.indexOf(a.variant) - VARIANT_ORDER.indexOf(b.variant));
    }
  }
  const comparisons: Record<string, MethodComparison[]> = { ...(stored?.comparisons ?? {}) };
  for (const [env, rs] of Object.entries(results)) {
    await fillWarmStartKeys(rs);
    comparisons[env] = compareAll(rs);
  }
  await writeFile(file, `${JSON.stringify({ date: new Date().toISOString(), results: { ...untouched, ...results }, comparisons } satisfies StoredResults, null, 2)}\n`);
  for (const [env, rs] of Object.entries(results)) await writeChart(outDir, env, rs);
  const level = (u: Units, s: Spread | null) => (s ? `${u.level(s.mean)} ± ${u.size(s.std)}` : 'n/a');
  const gain = (u: Units, s: Spread | null) => (s ? `${u.diff(s.mean)} ± ${u.size(s.std)} (${u.size(s.min)} to ${u.size(s.max)})` : 'n/a');
  console.log('| environment | method | seeds | test: warm start | test: after RL | RL gain (points) | validation: step 0 → last | wall time |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [env, rs] of Object.entries(results)) {
    for (const r of rs) {
      const first = r.curve[0] ?? null;
      const last = r.curve.at(-1) ?? null;
      const metric = r.runs[0]?.metric ?? 'success';
      const u = unitsOf(metric);
      console.log(`| ${env}${metric === 'success' ? '' : ` (${metric})`} | ${r.variant} | ${r.seeds.join(',')} | ${level(u, r.testBefore)} | ${level(u, r.testAfter)} | ${gain(u, r.testGain)} | ${level(u, first)} → ${level(u, last)} | ${(r.wallSeconds / 60).toFixed(1)} min |`);
      // Tic-tac-toe's and Hanabi's other test measures, over the same seeds (no validation curve of their own).
      for (const measure of ['vsRandom', 'optimalMoves', 'withBot'] as const) {
        const xs = r.runs.flatMap((run) => (run[measure] ? [run[measure]] : []));
        if (xs.length !== r.runs.length || xs.length === 0) continue;
        const mu = measureUnits(measure, metric);
        console.log(`| ${env} (${MEASURE_NAMES[measure]}) | ${r.variant} | ${r.seeds.join(',')} | ${level(mu, spread(xs.map((x) => x.before)))} | ${level(mu, spread(xs.map((x) => x.after)))} | ${gain(mu, spread(xs.map((x) => x.after - x.before)))} | | |`);
      }
      // The bar: the scripted team on the same test seeds, before and after alike.
      const bars = r.runs.flatMap((run) => (run.botTeam === undefined ? [] : [run.botTeam]));
      if (bars.length === r.runs.length && bars.length > 0) console.log(`| ${env} (${BOT_TEAM}, the bar) | ${r.variant} | ${r.seeds.join(',')} | ${level(u, spread(bars))} | ${level(u, spread(bars))} | | | |`);
    }
  }
  printMissedTargets(results);
  printComparisons(Object.fromEntries(Object.keys(results).map((env) => [env, comparisons[env]!])), Object.fromEntries(Object.keys(results).map((env) => [env, envMetric(results[env]!)])));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
