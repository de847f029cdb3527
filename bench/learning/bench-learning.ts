/**
 * `npm run bench:learning` — AT-GRPO vs GRPO vs a single agent, same model, budget and seeds.
 *
 * For each environment (Plan-Path 5×5, Sokoban 6×6) three configs differ only in what is compared:
 *   at-grpo  configs/<env>/L2-lora.json   tool + plan, a LoRA adapter each, tree sampling
 *   grpo     configs/<env>/L2-grpo.json   same team, independent rollouts grouped per task
 *   single   configs/<env>/L0-single.json one solo agent (the puzzle's single variant)
 * Each runs its warm start (cached) and RL with validation on the same held-out seeds every few
 * steps. Writes bench/results/learning.json and one SVG chart per environment
 * (bench/results/learning-<env>.svg) of validation success against step.
 *
 * Options (env): LEARNING_ENVS (plan-path,sokoban; sudoku has configs too), LEARNING_STEPS (override training.steps),
 * LEARNING_VARIANTS (at-grpo,grpo,single).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadExperiment } from '../../server/rl/resolve-experiment.ts';
import { train } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';
import { lineChart } from './svg-chart.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const ENVS = (process.env['LEARNING_ENVS'] ?? 'plan-path,sokoban').split(',');
const VARIANTS = (process.env['LEARNING_VARIANTS'] ?? 'at-grpo,grpo,single').split(',');
const STEPS = process.env['LEARNING_STEPS'] ? Number(process.env['LEARNING_STEPS']) : undefined;
const files: Record<string, string> = { 'at-grpo': 'L2-lora.json', grpo: 'L2-grpo.json', single: 'L0-single.json' };
const VARIANT_ORDER = ['at-grpo', 'grpo', 'single'];

interface VariantResult {
  variant: string;
  config: string;
  curve: Array<{ step: number; success: number; meanReward: number }>;
  initial: number;
  final: number;
  delta: number;
  wallSeconds: number;
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'troupe-learning-'));
  const cacheRoot = join(root, '.troupe', 'cache', 'warm-start');
  const store = openRunStore(join(work, 'troupe.db'));
  const results: Record<string, VariantResult[]> = {};
  try {
    for (const env of ENVS) {
      results[env] = [];
      for (const variant of VARIANTS) {
        const path = join(root, 'configs', env, files[variant]!);
        const { config, experiment } = await loadExperiment(path);
        const run = store.createRun({ name: `${env}/${variant}`, config, runDir: join(work, `${env}-${variant}`) });
        const curve: VariantResult['curve'] = [];
        const t0 = performance.now();
        process.stderr.write(`\n== ${env} / ${variant} (${files[variant]})\n`);
        const s = await train({
          experiment,
          store,
          runId: run.id,
          runDir: join(work, `${env}-${variant}`),
          cacheRoot,
          resume: false,
          ...(STEPS ? { steps: STEPS } : {}),
          log: (l) => process.stderr.write(`${l}\n`),
          onStep: (r) => {
            if (r.validation) curve.push({ step: r.step, success: r.validation.success, meanReward: r.validation.meanReward });
            process.stderr.write(`  step ${r.step}/${r.steps} ${(r.ms / 1000).toFixed(1)}s train-success ${(r.trainSuccess * 100).toFixed(0)}%${r.validation ? ` val ${(r.validation.success * 100).toFixed(1)}%` : ''}\n`);
          },
        });
        const initial = s.initial?.success ?? Number.NaN;
        curve.unshift({ step: 0, success: initial, meanReward: s.initial?.meanReward ?? Number.NaN });
        const final = s.final?.success ?? Number.NaN;
        results[env].push({ variant, config: `configs/${env}/${files[variant]}`, curve, initial, final, delta: final - initial, wallSeconds: (performance.now() - t0) / 1000 });
        store.setRunState(run.id, 'done');
      }
    }
  } finally {
    store.close();
    await rm(work, { recursive: true, force: true });
  }
  const outDir = join(root, 'bench', 'results');
  await mkdir(outDir, { recursive: true });
  // Merge into earlier results, so one environment or variant can be re-run on its own.
  const file = join(outDir, 'learning.json');
  if (existsSync(file)) {
    const old = JSON.parse(await readFile(file, 'utf8')) as { results?: Record<string, VariantResult[]> };
    for (const [env, rs] of Object.entries(old.results ?? {})) {
      const fresh = results[env] ?? [];
      results[env] = [...rs.filter((r) => !fresh.some((f) => f.variant === r.variant)), ...fresh].sort((a, b) => VARIANT_ORDER.indexOf(a.variant) - VARIANT_ORDER.indexOf(b.variant));
    }
  }
  await writeFile(file, `${JSON.stringify({ date: new Date().toISOString(), results }, null, 2)}\n`);
  for (const [env, rs] of Object.entries(results)) {
    const svg = lineChart(`${env}: validation success on held-out seeds`, rs.map((r) => ({ name: r.variant, points: r.curve.map((p) => [p.step, p.success] as const) })));
    await writeFile(join(outDir, `learning-${env}.svg`), svg);
  }
  console.log('| environment | method | before RL | after RL | Δ (points) | wall time |');
  console.log('|---|---|---|---|---|---|');
  for (const [env, rs] of Object.entries(results)) {
    for (const r of rs) console.log(`| ${env} | ${r.variant} | ${(r.initial * 100).toFixed(1)}% | ${(r.final * 100).toFixed(1)}% | ${(r.delta * 100).toFixed(1)} | ${(r.wallSeconds / 60).toFixed(1)} min |`);
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
