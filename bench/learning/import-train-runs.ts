/**
 * `node --import tsx bench/learning/import-train-runs.ts <entry> <variant> <workspace>...` — store
 * runs made with `troupe train <config> --workspace <dir>` in bench/results/learning.json as seeds
 * of a bench:learning method, so that LEARNING_KEEP_SEEDS=1 adds further seeds to them and
 * rl-gain.ts counts them. Trains nothing.
 *
 * A workspace is refused, naming it and the reason, unless it holds one run that finished with a
 * test before and after RL; whose config is the method's config file as it is now at the run's
 * seed (every field but name, description and $schema); and whose warm-start cache holds the key that
 * config gives now (so RL started from the warm start bench:learning would train). Each run is
 * recorded as bench:learning records a seed: validation score and mean reward per validated step,
 * the test before and after RL, the tested step, and the wall time from the run's creation to its
 * last change. Stored seeds of the method that a workspace repeats are replaced; the others are
 * kept only if they trained as the config does now (stored-seeds.ts, as LEARNING_KEEP_SEEDS
 * judges them), and are refused otherwise, naming the seeds. `--replace` drops the method's stored
 * runs instead (a config that changed: its first seeds), as bench:learning without
 * LEARNING_KEEP_SEEDS does.
 *
 * The method's summary over seeds (curve, test spreads) is left empty; the next bench:learning run
 * with LEARNING_KEEP_SEEDS=1, or LEARNING_CHARTS_ONLY=1, computes it from the runs; rl-gain.ts reads
 * only the runs.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadExperiment, resolveExperiment } from '../../server/rl/resolve-experiment.ts';
import { warmStartKeys } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';
import { methodConfigPath } from './method-configs.ts';
import { configDigest, storedSeedProblems, trainedPart, type StoredSeed } from './stored-seeds.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);
const replace = args.includes('--replace');
const [entry, variant, ...workspaces] = args.filter((a) => a !== '--replace');
/** The methods whose runs are judged by success alone (what an import records). */
const IMPORTABLE = ['at-grpo', 'grpo', 'single', 'single-grpo'];
if (!entry || !variant || workspaces.length === 0) throw new Error('usage: import-train-runs.ts <entry> <variant> <workspace>... [--replace] (e.g. sokoban at-grpo /tmp/sok-S2; an entry with a suffix, plan-path-7x7, names configs/plan-path/L2-lora-7x7.json)');
if (!IMPORTABLE.includes(variant)) throw new Error(`variant: ${JSON.stringify(variant)} is not one of ${IMPORTABLE.join(', ')}`);
const configRel = methodConfigPath(entry, variant).rel;
const configPath = join(root, configRel);
if (!existsSync(configPath)) throw new Error(`entry: no config ${configRel}`);

const { config: current } = await loadExperiment(configPath);
const digest = configDigest(current, configPath);
const imported = [];
for (const ws of workspaces.map((w) => resolve(w))) {
  const fail = (why: string): never => {
    throw new Error(`${ws}: ${why}`);
  };
  const runsDir = join(ws, '.troupe', 'runs');
  const folders = existsSync(runsDir) ? readdirSync(runsDir) : [];
  if (folders.length !== 1) fail(`expected one run folder in .troupe/runs, found ${folders.length}`);
  const runConfig = JSON.parse(readFileSync(join(runsDir, folders[0]!, 'config.json'), 'utf8')) as { seed?: number };
  const seed = runConfig.seed ?? fail('config.json has no seed');
  if (trainedPart(runConfig, configPath) !== trainedPart({ ...current, seed }, configPath)) fail(`its config differs from ${configRel} at seed ${seed} in more than name, description and $schema`);
  const keys = await warmStartKeys(await resolveExperiment({ ...current, seed }, configPath));
  for (const [model, key] of Object.entries(keys ?? {})) {
    if (!existsSync(join(ws, '.troupe', 'cache', 'warm-start', key))) fail(`its warm-start cache has no ${key}, the key of model ${model} under ${configRel} now: it trained from another warm start`);
  }
  const store = openRunStore(join(ws, '.troupe', 'troupe.db'));
  try {
    const runs = store.listRuns();
    if (runs.length !== 1 || runs[0]!.state !== 'done') fail(`expected one finished run in its store, found ${runs.map((r) => r.state).join(', ') || 'none'}`);
    const run = runs[0]!;
    const series = (name: string) => store.metricSeries({ runId: run.id, name });
    const success = series('val/success');
    const reward = new Map(series('val/reward').map((p) => [p.step, p.value]));
    const test = series('test/success');
    const lastStep = success.at(-1)?.step;
    if (test.length !== 2 || test[0]!.step !== 0 || test[1]!.step !== lastStep) fail(`its test is not at step 0 and at the last validated step (${test.map((p) => p.step).join(', ')})`);
    imported.push({
      seed,
      metric: 'success',
      vsRandom: null,
      optimalMoves: null,
      curve: success.map((p) => ({ step: p.step, success: p.value, meanReward: reward.get(p.step) ?? fail(`no val/reward at step ${p.step}`) })),
      testBefore: test[0]!.value,
      testAfter: test[1]!.value,
      testedStep: series('test/policy_step')[0]?.value ?? fail('no test/policy_step'),
      wallSeconds: (run.updatedAt - run.createdAt) / 1000,
      warmStart: keys,
      configDigest: digest,
    });
  } finally {
    store.close();
  }
}

const file = join(root, 'bench', 'results', 'learning.json');
const stored = JSON.parse(readFileSync(file, 'utf8')) as {
  results: Record<string, Array<{ variant: string; config?: string; runs?: Array<StoredSeed & { wallSeconds: number; curve: Array<{ step: number }> }> }>>;
};
const rows = (stored.results[entry] ??= []);
const old = replace ? undefined : rows.find((r) => r.variant === variant && Array.isArray(r.runs));
const last = imported[0]!.curve.at(-1)!.step;
if (old && (old.config !== configRel || old.runs!.some((r) => r.curve.at(-1)?.step !== last))) {
  throw new Error(`learning.json: the stored ${entry} ${variant} runs are of ${old.config} to step ${old.runs![0]?.curve.at(-1)?.step}, these of ${configRel} to step ${last}`);
}
if (imported.some((r) => r.curve.at(-1)!.step !== last)) throw new Error('the workspaces ran to different steps');
const seeds = new Set(imported.map((r) => r.seed));
const kept = (old?.runs ?? []).filter((r) => !seeds.has(r.seed));
// A seed trained under another config (say, a warm start since shortened) must not be summarised
// with these as one method.
const problems = await storedSeedProblems(kept, digest, async (seed) => warmStartKeys(await resolveExperiment({ ...current, seed }, configPath)));
if (problems.length > 0) throw new Error(`learning.json: stored ${entry} ${variant} seeds did not train as ${configRel} does now: ${problems.join('; ')}; import with --replace to drop them`);
const runs = [...kept, ...imported].sort((a, b) => a.seed - b.seed);
const row = { variant, config: configRel, seeds: runs.map((r) => r.seed), runs, curve: [], testBefore: null, testAfter: null, testGain: null, wallSeconds: runs.reduce((a, r) => a + r.wallSeconds, 0) };
// A row of the format before per-seed runs is replaced, as bench:learning replaces it.
stored.results[entry] = [...rows.filter((r) => r.variant !== variant), row];
await writeFile(file, `${JSON.stringify(stored, null, 2)}\n`);
for (const r of imported) console.log(`${entry} ${variant} seed ${r.seed}: test ${(r.testBefore * 100).toFixed(1)}% -> ${(r.testAfter * 100).toFixed(1)}%, validation ${r.curve.map((p) => (p.success * 100).toFixed(1)).join(' ')}, ${(r.wallSeconds / 60).toFixed(1)} min, warm start ${JSON.stringify(r.warmStart)}`);
console.log(`stored ${entry} ${variant} seeds ${row.seeds.join(',')} in bench/results/learning.json (summary left to the next bench:learning run with LEARNING_KEEP_SEEDS=1)`);
