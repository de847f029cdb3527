/**
 * `npx tsx bench/learning/run-variant.ts [config.json]` — one training run of a config with some
 * settings overridden, for learning experiments (the runs behind docs/experiments/).
 *
 * OVERRIDE (env, JSON) is merged one level deep into the experiment's `algorithm`, `training`,
 * `warmStart`, `optimizer`, `models` (by model id: an entry replaces that model's) and
 * `env.options` (as `envOptions`) sections, and `seed` replaces the run seed, e.g.
 *   OVERRIDE='{"algorithm":{"temperature":0.5},"training":{"steps":40,"validationEpisodes":256}}'
 *   OVERRIDE='{"models":{"base":{"preset":"medium"}}}'
 * Any other key is refused.
 * Warm starts come from and go to the workspace cache (.troupe/cache/warm-start), so runs that share
 * one start from the same policy. The run itself goes to a throwaway folder under the OS temp dir,
 * printed at the start: a run folder as `troupe train` makes one (config.json with the overrides
 * merged in, run.json, checkpoints), so `troupe eval` and team-turns.ts read it; its SQLite file
 * holds every trajectory for inspection. Prints one line per step and the validation and test
 * success before and after RL.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseExperimentConfig } from '../../server/protocol/experiment-config.ts';
import { resolveExperiment } from '../../server/rl/resolve-experiment.ts';
import { train } from '../../server/rl/trainer.ts';
import { createRunFolder } from '../../server/runs/run-folder.ts';
import { openRunStore } from '../../server/store/index.ts';

type Section = Record<string, unknown>;
const root = fileURLToPath(new URL('../..', import.meta.url));
const configPath = resolve(process.argv[2] ?? join(root, 'configs/plan-path/L2-lora.json'));
const { seed, ...over } = JSON.parse(process.env['OVERRIDE'] ?? '{}') as { seed?: number } & Record<string, Section | undefined>;
const SECTIONS = ['algorithm', 'training', 'warmStart', 'optimizer', 'models'];
const unknown = Object.keys(over).filter((k) => k !== 'envOptions' && !SECTIONS.includes(k));
if (unknown.length > 0) throw new Error(`OVERRIDE: unknown key ${unknown.map((k) => JSON.stringify(k)).join(', ')} (seed, envOptions, ${SECTIONS.join(', ')})`);
const dir = mkdtempSync(join(tmpdir(), 'troupe-variant-'));
const runDir = join(dir, 'run');
console.log(`run folder: ${runDir} (database ${join(dir, 'troupe.db')})`);

// The overrides are merged into the config's JSON, so they are validated as a config is and the
// run folder's config.json is what was trained: `troupe eval` and team-turns.ts read it.
const raw = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, unknown>;
const section = (name: string): Section => (raw[name] ?? {}) as Section;
const env = section('env');
const mergedConfig = {
  ...raw,
  ...(seed === undefined ? {} : { seed }),
  env: over['envOptions'] ? { ...env, options: { ...((env['options'] ?? {}) as Section), ...over['envOptions'] } } : env,
  // A section neither the config nor OVERRIDE has stays absent, so its defaults apply.
  ...Object.fromEntries(SECTIONS.filter((k) => raw[k] !== undefined || over[k] !== undefined).map((k) => [k, { ...section(k), ...over[k] }])),
};
const config = parseExperimentConfig(mergedConfig, configPath);
const experiment = await resolveExperiment(config, configPath);

const store = openRunStore(join(dir, 'troupe.db'));
const run = store.createRun({ name: 'variant', config, runDir });
await createRunFolder({ dir: runDir, runId: run.id, databasePath: join(dir, 'troupe.db'), configSource: configPath, steps: experiment.training.steps }, `${JSON.stringify(mergedConfig, null, 2)}\n`);
const t0 = performance.now();
const at = () => `[${((performance.now() - t0) / 1000).toFixed(0)}s]`;
try {
  const summary = await train({
    experiment,
    store,
    runId: run.id,
    runDir,
    cacheRoot: join(root, '.troupe', 'cache', 'warm-start'),
    resume: false,
    log: (line) => console.log(`${at()} ${line}`),
    onStep: (r) =>
      console.log(
        `${at()} step ${r.step} ${(r.ms / 1000).toFixed(1)}s train-success ${(r.trainSuccess * 100).toFixed(0)}% reward ${r.meanReward.toFixed(2)}` +
          (r.validation ? ` val ${(r.validation.success * 100).toFixed(1)}%` : ''),
      ),
  });
  const pct = (x: number | undefined) => (x === undefined ? 'n/a' : `${(x * 100).toFixed(1)}%`);
  console.log(`${at()} validation: before RL ${pct(summary.initial?.success)}, after RL ${pct(summary.final?.success)}`);
  if (summary.initialTest && summary.finalTest) {
    const gain = (summary.finalTest.success - summary.initialTest.success) * 100;
    console.log(`${at()} test (${summary.finalTest.episodes} seeds): warm start ${pct(summary.initialTest.success)}, after RL ${pct(summary.finalTest.success)} (policy of step ${summary.testedStep}), RL gain ${gain >= 0 ? '+' : ''}${gain.toFixed(1)} points`);
  }
} finally {
  store.close();
}
