/**
 * `node --import tsx bench/engine/rollout-mismatch.ts` — what quantized rollout weights cost in
 * accuracy: the rollout/train mismatch of int4 with blocks of 32, 64 and 128 (and int8, and the
 * fused fp32 graph as the rounding floor) on the flagship's trained weights.
 *
 * For each variant the flagship's policies (`configs/plan-path/L2-lora.json` unless
 * MISMATCH_CONFIG names another) are created with `rollout` set to it, and play the trainer's
 * training rollouts of MISMATCH_STEPS steps (the curriculum's tasks, AT-GRPO's tree, the rollout
 * temperature, `training: true`), the same tasks and sampling seeds for every variant. Each
 * sample's sampling log-probs are then compared with the fp32 policy's log-probs of the same
 * tokens (the score graph, as PPO's old log-probs): `rollout/mismatch_kl` exactly as the trainer
 * computes it (`mismatchMetrics`: k3 estimate of KL(sampler ‖ fp32) per response token), the
 * largest and the mean |Δ log p|, and the share of tokens whose ratio p_fp32 / p_sampler already
 * lies outside PPO's clip range [1 − ε, 1 + ε] before any update. The k3 estimate is dominated by
 * a few tokens and the variants sample different responses, so it is noisy; beside it, without
 * sampling noise, each quantization's relative weight error ‖W − dequant(quant(W))‖ / ‖W‖ over
 * every quantized matrix of each policy (adapter merged), as the rollout decoder builds them.
 *
 * Weights: a flagship run folder's (MISMATCH_RUN, default the newest `.troupe/runs/*` whose config
 * has the same name): its cached warm start (the base every adapter starts from, B = 0) and, at
 * each `checkpoints/step-N`, the adapters after N RL steps. Prints a table; writes
 * `bench/results/rollout-mismatch.json` when MISMATCH_WRITE=1.
 *
 * Options (env): MISMATCH_STEPS (3), MISMATCH_VARIANTS (fp32-fused,int8-32,int4-32,int4-64,int4-128),
 * MISMATCH_RUN, MISMATCH_CONFIG, BENCH_THREADS (2).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCheckpoint } from '../../server/models/checkpoint.ts';
import { quantizedWeightNames } from '../../server/models/decode-graph.ts';
import { parameterShapes } from '../../server/models/model-config.ts';
import { dequantizeBlockwise, quantizeBlockwise, type QuantBits } from '../../server/models/quantize.ts';
import { mergeAdapter, type DecodeSettings } from '../../server/models/rollout-decoder.ts';
import { selectTasks } from '../../server/rl/curriculum.ts';
import type { ResolvedExperiment } from '../../server/rl/experiment.ts';
import { createPolicies, routingContext } from '../../server/rl/policies.ts';
import { loadExperiment } from '../../server/rl/resolve-experiment.ts';
import { rollout, type Sample } from '../../server/rl/rollout.ts';
import { restorePolicies, stepDir, warmStartDir } from '../../server/rl/run-checkpoint.ts';
import { trainingRolloutOptions } from '../../server/rl/trainer.ts';
import { mismatchMetrics } from '../../server/rl/step-metrics.ts';
import { Engine } from '../../server/runtime/engine.ts';

const STEPS = Number(process.env['MISMATCH_STEPS'] ?? 3);
const THREADS = Number(process.env['BENCH_THREADS'] ?? 2);
const CONFIG = process.env['MISMATCH_CONFIG'] ?? 'configs/plan-path/L2-lora.json';

const variants = {
  'fp32-fused': { weights: 'fp32', fusedDecode: true, blockSize: 32 },
  'int8-32': { weights: 'int8', fusedDecode: false, blockSize: 32 },
  'int4-32': { weights: 'int4', fusedDecode: false, blockSize: 32 },
  'int4-64': { weights: 'int4', fusedDecode: false, blockSize: 64 },
  'int4-128': { weights: 'int4', fusedDecode: false, blockSize: 128 },
} as const satisfies Record<string, DecodeSettings>;
type Variant = keyof typeof variants;
const VARIANTS = (process.env['MISMATCH_VARIANTS'] ?? Object.keys(variants).join(',')).split(',').map((v) => {
  if (!(v in variants)) throw new Error(`MISMATCH_VARIANTS: unknown variant '${v}' (known: ${Object.keys(variants).join(', ')})`);
  return v as Variant;
});

interface Row {
  weights: string;
  variant: Variant;
  policyId: string;
  tokens: number;
  mismatchKl: number;
  mismatchMax: number;
  meanAbsDelta: number;
  outsideClip: number;
}

/** The newest run folder of this config (same name), where a run of it was made in this workspace. */
function findRun(name: string): string {
  const fromEnv = process.env['MISMATCH_RUN'];
  if (fromEnv) return fromEnv;
  const root = '.troupe/runs';
  const runs = existsSync(root) ? readdirSync(root).sort().reverse() : [];
  for (const r of runs) {
    const cfg: unknown = JSON.parse(readFileSync(join(root, r, 'config.json'), 'utf8'));
    if (cfg && typeof cfg === 'object' && 'name' in cfg && cfg.name === name) return join(root, r);
  }
  throw new Error(`no run of '${name}' under ${root}: train it once (npx troupe train ${CONFIG}) or set MISMATCH_RUN`);
}

/** The trainer's training rollouts of steps 1..STEPS with `decode` as the rollout weights. */
async function measure(engine: Engine, exp: ResolvedExperiment, base: Map<string, Map<string, Float32Array>>, adapters: string | null, v: Variant, clipEps: number): Promise<Row[]> {
  const e: ResolvedExperiment = { ...exp, rollout: variants[v] };
  const policies = await createPolicies(engine, e, base);
  try {
    if (adapters) await restorePolicies(adapters, policies);
    const ctx = routingContext(e, policies);
    const samples: Sample[] = [];
    for (let step = 1; step <= STEPS; step++) {
      const { tasks } = await selectTasks(e, ctx, step);
      const r = await rollout(tasks, ctx, trainingRolloutOptions(e, step));
      samples.push(...r.samples);
    }
    const rows: Row[] = [];
    for (const [policyId, policy] of policies) {
      const mine = samples.filter((s) => s.policyId === policyId);
      if (mine.length === 0) continue;
      const seqs = mine.map((s) => ({ tokens: Int32Array.from([...s.promptTokens, ...s.responseTokens]), promptLength: s.promptTokens.length }));
      const fp32 = await policy.score(seqs, e.algorithm.temperature);
      const sampled = mine.map((s) => s.logprobs);
      const [kl, max] = mismatchMetrics(policyId, sampled, fp32);
      let abs = 0;
      let outside = 0;
      let n = 0;
      sampled.forEach((q, i) =>
        q.forEach((lq, j) => {
          const d = fp32[i]![j]! - lq;
          abs += Math.abs(d);
          if (Math.exp(d) > 1 + clipEps || Math.exp(d) < 1 - clipEps) outside++;
          n++;
        }),
      );
      rows.push({ weights: adapters ?? 'warm start', variant: v, policyId, tokens: n, mismatchKl: kl!.value, mismatchMax: max!.value, meanAbsDelta: abs / n, outsideClip: outside / n });
    }
    return rows;
  } finally {
    for (const p of policies.values()) await p.dispose();
  }
}

interface WeightErrorRow {
  weights: string;
  policyId: string;
  quantization: string;
  relativeError: number;
}

/** Relative Frobenius error of block-wise quantization over every quantized matrix of each policy. */
async function weightErrors(engine: Engine, exp: ResolvedExperiment, base: Map<string, Map<string, Float32Array>>, adapters: string | null): Promise<WeightErrorRow[]> {
  const policies = await createPolicies(engine, exp, base);
  const rows: WeightErrorRow[] = [];
  try {
    if (adapters) await restorePolicies(adapters, policies);
    for (const [policyId, policy] of policies) {
      const c = policy.config;
      const merged = mergeAdapter(c, policy.options.lora, await policy.weights(), policy.options.lora ? await policy.trainableTensors() : null);
      const shapes = new Map(parameterShapes(c));
      for (const [bits, block] of [[8, 32], [4, 32], [4, 64], [4, 128]] as Array<[QuantBits, number]>) {
        let err = 0;
        let norm = 0;
        for (const name of quantizedWeightNames(c)) {
          const [rows_, cols] = shapes.get(name) as [number, number];
          const w = merged.get(name)!;
          const back = dequantizeBlockwise(quantizeBlockwise(w, rows_, cols, bits, block));
          for (let i = 0; i < w.length; i++) {
            err += (w[i]! - back[i]!) ** 2;
            norm += w[i]! ** 2;
          }
        }
        rows.push({ weights: adapters ?? 'warm start', policyId, quantization: `int${bits}-${block}`, relativeError: Math.sqrt(err / norm) });
      }
    }
    return rows;
  } finally {
    for (const p of policies.values()) await p.dispose();
  }
}

async function main(): Promise<void> {
  const { config, experiment: exp } = await loadExperiment(CONFIG);
  const run = findRun(config.name);
  const base = new Map<string, Map<string, Float32Array>>();
  for (const modelId of exp.models.keys()) base.set(modelId, (await loadCheckpoint(warmStartDir(run, modelId))).params);
  const steps = readdirSync(join(run, 'checkpoints'))
    .map((d) => /^step-(\d+)$/.exec(d)?.[1])
    .filter((s): s is string => s !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
  const weightSets = [null, ...steps.map((s) => stepDir(run, s))];
  process.stderr.write(`${CONFIG}, run ${run}: warm start and adapters after steps ${steps.join(', ') || '(none)'}; ${STEPS} rollout steps each, ${VARIANTS.join(', ')}\n`);
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  const rows: Row[] = [];
  const errors: WeightErrorRow[] = [];
  try {
    for (const w of weightSets) {
      errors.push(...(await weightErrors(engine, exp, base, w)));
      for (const v of VARIANTS) {
        const t0 = performance.now();
        const r = await measure(engine, exp, base, w, v, exp.algorithm.clipEps);
        rows.push(...r);
        process.stderr.write(`${w ?? 'warm start'} ${v}: ${r.map((x) => `${x.policyId} kl ${x.mismatchKl.toExponential(2)}`).join(', ')} (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
      }
    }
  } finally {
    await engine.close();
  }
  console.log(`\nrollout/train mismatch, ${CONFIG} (temperature ${exp.algorithm.temperature}, clip ε ${exp.algorithm.clipEps}), ${STEPS} training-rollout steps per row`);
  console.log('| weights | rollout | policy | tokens | mismatch_kl | mean abs Δlogp | max abs Δlogp | ratio outside clip |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.weights.replace(/^.*checkpoints\//, '')} | ${r.variant} | ${r.policyId} | ${r.tokens} | ${r.mismatchKl.toExponential(2)} | ${r.meanAbsDelta.toFixed(4)} | ${r.mismatchMax.toFixed(3)} | ${(r.outsideClip * 100).toFixed(2)}% |`);
  }
  console.log('\n| weights | policy | quantization | relative weight error |');
  console.log('|---|---|---|---|');
  for (const e of errors) console.log(`| ${e.weights.replace(/^.*checkpoints\//, '')} | ${e.policyId} | ${e.quantization} | ${e.relativeError.toExponential(3)} |`);
  if (process.env['MISMATCH_WRITE'] === '1') {
    const path = fileURLToPath(new URL('../results/rollout-mismatch.json', import.meta.url));
    await writeFile(path, `${JSON.stringify({ date: new Date().toISOString(), config: CONFIG, run, rolloutSteps: STEPS, temperature: exp.algorithm.temperature, clipEps: exp.algorithm.clipEps, variants: Object.fromEntries(VARIANTS.map((v) => [v, variants[v]])), rows, weightErrors: errors }, null, 2)}\n`);
    console.log(`wrote ${path}`);
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
