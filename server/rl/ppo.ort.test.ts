/**
 * PPO with a value head on real ONNX Runtime: the features the head reads are the state the LM
 * head reads at the prompt's last token (its logits there are the score graph's first response
 * log-prob), with prompts shared in one row or not; and a short tic-tac-toe run trains every
 * policy's head, whose value loss falls, and resumes it from the run checkpoint.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { openRunStore } from '../store/index.ts';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { Engine } from '../runtime/engine.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { resumeDir } from './run-checkpoint.ts';
import { train } from './trainer.ts';
import { Critic } from './value-head.ts';

const modelConfig = { vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 4, intermediateSize: 128, maxSequenceLength: 160 };

test("features are the hidden state the LM head reads at the prompt's last token, shared rows or not", { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  try {
    const model = parseModelConfig({ ...modelConfig, tieEmbeddings: true });
    const weights = initParameters(model, 5, { std: 0.3 });
    const make = (id: string, sharePrompts: boolean) =>
      Policy.create(engine, { id, config: model, weights, lora: null, optimizer: optimizerSchema.parse({}), kl: false, entropy: false, sharePrompts });
    const shared = await make('shared', true);
    const apart = await make('apart', false);
    const prompts = [Int32Array.from([5, 9, 13, 2]), Int32Array.from([7, 7]), Int32Array.from([5, 9, 13, 2]), Int32Array.from([30, 31, 32, 33, 34, 35])];
    const f = await shared.features(prompts);
    const g = await apart.features(prompts);
    const C = model.hiddenSize;
    const V = model.vocabSize;
    const E = weights.get('embed.weight')!;
    for (let i = 0; i < prompts.length; i++) {
      assert.equal(f[i]!.length, C);
      for (let c = 0; c < C; c++) assert.ok(Math.abs(f[i]![c]! - g[i]![c]!) < 1e-4, `prompt ${i} dim ${c}: shared ${f[i]![c]} vs apart ${g[i]![c]}`);
      // log softmax(h · Eᵀ)[t] at the last prompt position = the score graph's log-prob of response token t.
      const t = 11;
      const logits = Array.from({ length: V }, (_, v) => f[i]!.reduce((a, h, c) => a + h * E[v * C + c]!, 0));
      const max = Math.max(...logits);
      const lse = max + Math.log(logits.reduce((a, l) => a + Math.exp(l - max), 0));
      const [scored] = await apart.score([{ tokens: Int32Array.from([...prompts[i]!, t]), promptLength: prompts[i]!.length }], 1);
      assert.ok(Math.abs(logits[t]! - lse - scored![0]!) < 1e-3, `prompt ${i}: ${logits[t]! - lse} vs score ${scored![0]}`);
    }
  } finally {
    await engine.close();
  }
});

const config = {
  name: 'ppo test',
  seed: 2,
  env: { name: 'tic-tac-toe', options: { openingMoves: [0, 3], reward: 'minimax' } },
  specialization: 'L2',
  models: { base: { config: modelConfig } },
  policies: { 'x-lora': { model: 'base', lora: { rank: 8 } }, 'o-lora': { model: 'base', lora: { rank: 8 } } },
  router: { x: 'x-lora', o: 'o-lora' },
  algorithm: { name: 'ppo', branches: 4, envsPerStep: 8, maxNewTokens: 4, valueLr: 0.003 },
  optimizer: { lr: 0.001 },
  warmStart: { demonstrations: 200, steps: 40, batchSize: 16, lr: 0.003 },
  training: { steps: 8, validateEvery: 8, validationEpisodes: 8, checkpointEvery: 8 },
};

test('a short PPO run trains a value head per policy: its value loss falls, and a resume restores it', { timeout: 300_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ppo-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const experiment = await resolveExperiment(parseExperimentConfig(config, 'ppo test'), join(dir, 'config.json'));
    const run = store.createRun({ name: config.name, config, runDir: join(dir, 'run') });
    const o = { experiment, store, runId: run.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), log: () => {} };
    const summary = await train({ ...o, resume: false, steps: 7 });
    assert.equal(summary.lastStep, 7);
    const losses: Record<string, number[]> = {};
    for (const policyId of ['x-lora', 'o-lora']) {
      const series = store.metricSeries({ runId: run.id, name: 'value/loss', policyId });
      assert.deepEqual(series.map((p) => p.step), [1, 2, 3, 4, 5, 6, 7], policyId);
      losses[policyId] = series.map((p) => p.value);
      assert.equal(store.metricSeries({ runId: run.id, name: 'value/mean', policyId })[0]!.value, 0, `${policyId}: the head starts at zero`);
      assert.ok(store.metricSeries({ runId: run.id, name: 'value/clip_frac', policyId }).length === 7);
    }
    // From a head at zero, the loss is first ½·E[R²]; it falls as the head learns the returns.
    const first = losses['x-lora']![0]! + losses['o-lora']![0]!;
    const last = (losses['x-lora']!.slice(-3).reduce((a, b) => a + b) + losses['o-lora']!.slice(-3).reduce((a, b) => a + b)) / 3;
    assert.ok(last < 0.8 * first, `value loss (both heads) ${first.toFixed(3)} at step 1, ${last.toFixed(3)} over steps 5-7: ${JSON.stringify(losses)}`);

    // The heads are in the resume checkpoint and come back: step 8's values start where step 7 left them.
    const saved = JSON.parse(await readFile(join(resumeDir(o.runDir), Critic.file), 'utf8')) as Record<string, { w: number[]; step: number }>;
    assert.ok(saved['x-lora']!.step > 0 && saved['x-lora']!.w.some((x) => x !== 0));
    const resumed = await train({ ...o, resume: true });
    assert.equal(resumed.lastStep, 8);
    for (const policyId of ['x-lora', 'o-lora']) {
      const mean8 = store.metricSeries({ runId: run.id, name: 'value/mean', policyId }).at(-1)!;
      assert.equal(mean8.step, 8);
      assert.notEqual(mean8.value, 0, `${policyId}: resumed with a trained head`);
    }
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
