/**
 * Quantized rollout weights in a real (short) training run: the trainer reports how far the
 * int4 sampler is from the fp32 policy PPO trains (`rollout/mismatch_kl`, 0 to rounding with
 * fp32 rollouts), and validation keeps decoding the fp32 policy.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { openRunStore } from '../store/index.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { mismatchMetrics } from './step-metrics.ts';
import { train } from './trainer.ts';

const config = {
  name: 'rollout weights test',
  seed: 3,
  env: { name: 'plan-path', options: { size: 4, maxTurns: 2, wallRatio: 0.1 } },
  specialization: 'L2',
  models: { base: { config: { vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 4, intermediateSize: 128, maxSequenceLength: 160 } } },
  policies: { tool: { model: 'base', lora: { rank: 8 } }, plan: { model: 'base', lora: { rank: 8 } } },
  router: { tool: 'tool', plan: 'plan' },
  algorithm: { name: 'at-grpo', branches: 2, envsPerStep: 3, maxNewTokens: 8 },
  optimizer: { lr: 0.003 },
  warmStart: { enabled: false },
  training: { steps: 2, validateEvery: 2, validationEpisodes: 4, checkpointEvery: 2 },
};

async function run(weights: 'fp32' | 'int4'): Promise<{ kl: number[]; max: number[]; val0: number }> {
  const dir = await mkdtemp(join(tmpdir(), `troupe-rollout-${weights}-`));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const c = { ...config, rollout: { weights, blockSize: 16 } };
    const experiment = await resolveExperiment(parseExperimentConfig(c, 'rollout weights test'), join(dir, 'config.json'));
    const r = store.createRun({ name: c.name, config: c, runDir: join(dir, 'run') });
    await train({ experiment, store, runId: r.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), resume: false, log: () => {} });
    const series = (name: string) => ['tool', 'plan'].flatMap((policyId) => store.metricSeries({ runId: r.id, name, policyId }).map((p) => p.value));
    const val = store.metricSeries({ runId: r.id, name: 'val/success' }).find((p) => p.step === 0);
    return { kl: series('rollout/mismatch_kl'), max: series('rollout/mismatch_max'), val0: val?.value ?? Number.NaN };
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('int4 rollouts report their mismatch with the fp32 policy; fp32 rollouts report none; validation decodes fp32', { timeout: 240_000 }, async () => {
  const fp32 = await run('fp32');
  const int4 = await run('int4');
  assert.ok(fp32.kl.length >= 2 && int4.kl.length >= 2, `mismatch reported per policy and step: ${fp32.kl.length}, ${int4.kl.length}`);
  assert.ok(fp32.kl.every((v) => v < 1e-8) && fp32.max.every((v) => v < 1e-4), `fp32 rollouts: kl ${fp32.kl}, max ${fp32.max}`);
  assert.ok(int4.kl.every((v) => v > 1e-7) && int4.max.every((v) => v > 1e-3), `int4 rollouts: kl ${int4.kl}, max ${int4.max}`);
  // Step 0 validates the starting policy before any rollout: the same fp32 weights either way.
  assert.equal(int4.val0, fp32.val0);
});

test('mismatchMetrics: k3 estimate of KL(sampler ‖ fp32) and the largest gap, hand-computed', () => {
  const sampled = [Float32Array.of(-1, -2), Float32Array.of(-0.5)];
  const fp32 = [Float32Array.of(-1.5, -2), Float32Array.of(-0.25)];
  const k3 = (d: number) => Math.exp(d) - 1 - d; // d = log p_fp32 − log p_sampler
  const [kl, max] = mismatchMetrics('p', sampled, fp32);
  assert.ok(Math.abs(kl!.value - (k3(-0.5) + 0 + k3(0.25)) / 3) < 1e-7);
  assert.equal(max!.value, 0.5);
  assert.equal(kl!.policyId, 'p');
  assert.throws(() => mismatchMetrics('p', sampled, [fp32[0]!, Float32Array.of()]), /sample 1 has 1 sampling log-probs and 0 fp32 ones/);
});
