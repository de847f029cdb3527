/**
 * PPO update time with shared prompt rows against one row per sequence, in one process, on the
 * flagship's shapes: `configs/plan-path/L2-lora-7x7.json`'s model and LoRA adapter, its prompts
 * (solver episodes' observations of both agents, ~130 tokens) and K = 4 answers per prompt of
 * the lengths the trained agents give (the solver's answer, one move longer, one shorter, one
 * changed), as a tree node's branches are. Both policies start from the same weights and take the
 * same `ppoUpdate` (old log-probs, then `miniBatches` AdamW steps) on the same batch; rounds
 * alternate shared, alone, shared, alone, and the medians and their ratio are printed and written
 * to bench/results/shared-rows.json. The weights are random: an update's time does not depend on
 * them, only on the shapes.
 *
 *   node --import tsx bench/engine/shared-rows.ts
 *
 * Options (env): SHARED_ROWS_PROMPTS (prompts per batch; 48), SHARED_ROWS_ROUNDS (5).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { initParameters } from '../../server/models/init.ts';
import { initLoraParameters, parseLoraConfig } from '../../server/models/lora.ts';
import { Policy } from '../../server/models/policy.ts';
import { createPrng } from '../../server/models/prng.ts';
import type { TrainSequence } from '../../server/models/train-batch.ts';
import { ppoUpdate } from '../../server/rl/ppo-update.ts';
import { loadExperiment } from '../../server/rl/resolve-experiment.ts';
import { solverDemonstrations } from '../../server/rl/warm-start.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { median } from '../stats.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PROMPTS = Number(process.env['SHARED_ROWS_PROMPTS'] ?? 48);
const ROUNDS = Number(process.env['SHARED_ROWS_ROUNDS'] ?? 5);
const K = 4;

const config = join(root, 'configs/plan-path/L2-lora-7x7.json');
const { experiment: exp } = await loadExperiment(config);
const tok = exp.tokenizer;
const [policyId, spec] = [...exp.policies][0]!;
const model = exp.models.get(spec.model)!;
const lora = spec.lora!;

// K answers per prompt around the solver's, moves only (the stop token stays last).
const rng = createPrng(7);
const moves = tok.encodeResponse('UDLR').slice(0, 4);
const demos = (await solverDemonstrations(exp.env.make, PROMPTS, ['tool', 'plan'], tok)).slice(0, PROMPTS);
const seqs: TrainSequence[] = demos.flatMap((d) => {
  const prompt = d.tokens.slice(0, d.promptLength);
  const answer = d.tokens.slice(d.promptLength, -1);
  const stop = d.tokens.at(-1)!;
  const pick = () => moves[Math.floor(rng.nextFloat() * moves.length)]!;
  const variants = [[...answer], [...answer, pick()], answer.length > 1 ? [...answer.slice(1)] : [pick()], [pick(), ...answer.slice(1)]];
  return variants.slice(0, K).map((r) => {
    const response = [...r, stop];
    return { tokens: Int32Array.from([...prompt, ...response]), promptLength: prompt.length, advantages: new Float32Array(response.length).fill(rng.nextFloat() < 0.5 ? 1 : -1) };
  });
});
const promptTokens = demos.reduce((n, d) => n + d.promptLength, 0) / demos.length;
const responseTokens = seqs.reduce((n, s) => n + s.tokens.length - s.promptLength, 0) / seqs.length;
console.log(`${seqs.length} sequences: ${demos.length} prompts of ${promptTokens.toFixed(0)} tokens on average, ${K} responses each of ${responseTokens.toFixed(1)}`);

const engine = await Engine.start({ executionProvider: 'cpu', log: () => {} });
const weights = initParameters(model.config, 1);
const adapter = initLoraParameters(model.config, parseLoraConfig({ rank: lora.rank, alpha: lora.alpha, targets: [...lora.targets] }), 3);
const make = (sharePrompts: boolean) =>
  Policy.create(engine, {
    id: `${policyId}-${sharePrompts ? 'shared' : 'alone'}`,
    config: model.config,
    weights,
    lora,
    adapter,
    optimizer: exp.optimizer,
    microBatch: { sequences: exp.algorithm.microBatch },
    kl: false,
    entropy: false,
    sharePrompts,
  });
const policies = { shared: await make(true), alone: await make(false) };
const a = exp.algorithm;
const options = { temperature: a.temperature, clipEps: a.clipEps, klCoef: 0, entropyCoef: 0, ppoEpochs: a.ppoEpochs, miniBatches: a.miniBatches, microBatch: a.microBatch, seed: 1 };
const ms: Record<keyof typeof policies, number[]> = { shared: [], alone: [] };
for (let round = 0; round <= ROUNDS; round++) {
  for (const kind of ['shared', 'alone'] as const) {
    const t0 = performance.now();
    await ppoUpdate(policies[kind], seqs, options);
    // Round 0 builds the sessions: not timed.
    if (round > 0) ms[kind].push(performance.now() - t0);
  }
}
await engine.close();
const shared = median(ms.shared);
const alone = median(ms.alone);
const result = {
  date: new Date().toISOString(),
  config: 'configs/plan-path/L2-lora-7x7.json',
  sequences: seqs.length,
  prompts: demos.length,
  branches: K,
  meanPromptTokens: promptTokens,
  meanResponseTokens: responseTokens,
  miniBatches: a.miniBatches,
  rounds: ROUNDS,
  sharedMs: ms.shared,
  aloneMs: ms.alone,
  medianSharedMs: shared,
  medianAloneMs: alone,
  speedup: alone / shared,
};
console.log(`ppoUpdate median: shared rows ${shared.toFixed(0)} ms, one row per sequence ${alone.toFixed(0)} ms: ${(alone / shared).toFixed(2)}x`);
writeFileSync(join(root, 'bench/results/shared-rows.json'), `${JSON.stringify(result, null, 2)}\n`);
