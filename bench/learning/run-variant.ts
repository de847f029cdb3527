/**
 * `npx tsx bench/learning/run-variant.ts [config.json]` — one training run of a config with some
 * settings overridden, for learning experiments (the runs behind the README's Learning notes).
 *
 * OVERRIDE (env, JSON) is merged one level deep into the experiment's `algorithm`, `training`,
 * `warmStart`, `optimizer` and `env.options` (as `envOptions`) sections, e.g.
 *   OVERRIDE='{"algorithm":{"temperature":0.5},"training":{"steps":40,"validationEpisodes":256}}'
 * Warm starts come from and go to the workspace cache (.troupe/cache/warm-start), so runs that share
 * one start from the same policy. The run itself goes to a throwaway folder under the OS temp dir,
 * printed at the start (its SQLite file holds every trajectory for inspection). Prints one line per
 * step and the validation success before and after RL.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createEnvironment, type EnvironmentName } from '../../server/envs/environments.ts';
import { loadExperiment } from '../../server/rl/resolve-experiment.ts';
import { train } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const configPath = process.argv[2] ?? join(root, 'configs/plan-path/L2-lora.json');
const over = JSON.parse(process.env['OVERRIDE'] ?? '{}') as Record<string, Record<string, unknown> | undefined>;
const dir = mkdtempSync(join(tmpdir(), 'troupe-variant-'));
console.log(`run folder and database: ${dir}`);

const store = openRunStore(join(dir, 'troupe.db'));
const { config, experiment } = await loadExperiment(configPath);
const envOptions = over['envOptions'];
const env = envOptions ? { ...experiment.env, options: { ...(experiment.env.options as object), ...envOptions } } : experiment.env;
const merged = {
  ...experiment,
  env: envOptions ? { ...env, make: (seed: number) => createEnvironment(experiment.env.name as EnvironmentName, seed, env.options) } : env,
  algorithm: { ...experiment.algorithm, ...over['algorithm'] },
  training: { ...experiment.training, ...over['training'] },
  warmStart: { ...experiment.warmStart, ...over['warmStart'] },
  optimizer: { ...experiment.optimizer, ...over['optimizer'] },
};
const run = store.createRun({ name: 'variant', config, runDir: join(dir, 'run') });
const t0 = performance.now();
const at = () => `[${((performance.now() - t0) / 1000).toFixed(0)}s]`;
try {
  const summary = await train({
    experiment: merged,
    store,
    runId: run.id,
    runDir: join(dir, 'run'),
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
    console.log(`${at()} test (${summary.finalTest.episodes} seeds): warm start ${pct(summary.initialTest.success)}, after RL ${pct(summary.finalTest.success)}, RL gain ${gain >= 0 ? '+' : ''}${gain.toFixed(1)} points`);
  }
} finally {
  store.close();
}
