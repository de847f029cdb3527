/**
 * PPO with mini-batches on a real policy: old log-probs are fixed before the first optimizer step,
 * so the first mini-batch sees ratio 1 (clip fraction 0) and every later one sees the moved policy
 * against the sampling one, where the clip engages. With one optimizer step per batch (the old
 * trainer) the clip fraction was 0 in every update.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import type { TrainSequence } from '../models/train-batch.ts';
import { Engine } from '../runtime/engine.ts';
import { mergeUpdateStats, miniBatchGroups, miniBatchIndices, ppoUpdate } from './ppo-update.ts';

const config = parseModelConfig({ vocabSize: defaultTokenizer.vocabSize, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64, maxSequenceLength: 64 });
let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

/** 16 prompt/response pairs with advantages of both signs. */
function batch(): TrainSequence[] {
  return Array.from({ length: 16 }, (_, i) => {
    const prompt = defaultTokenizer.encodePrompt([{ role: 'user', text: `plan-path ${i % 5}x${i % 7}\nplan: moves` }]);
    const response = defaultTokenizer.encodeResponse(['RRDD', 'DLU', 'UURL', 'LD'][i % 4]!);
    return { tokens: Int32Array.from([...prompt, ...response]), promptLength: prompt.length, advantages: new Float32Array(response.length).fill(i % 2 === 0 ? 1.2 : -0.9) };
  });
}

test('mini-batches: ppoEpochs x miniBatches optimizer steps; ratio 1 on the first, the clip engages after it', async () => {
  const policy = await Policy.create(engine, { id: 'p', config, weights: initParameters(config, 5, { std: 0.3 }), lora: null, optimizer: optimizerSchema.parse({ lr: 0.02, weightDecay: 0 }), kl: false, entropy: false });
  const seqs = batch();
  const before = await policy.score(seqs, 1);
  const r = await ppoUpdate(policy, seqs, { temperature: 1, clipEps: 0.2, klCoef: 0, entropyCoef: 0, ppoEpochs: 2, miniBatches: 4, microBatch: 64, seed: 9 });
  assert.equal(r.updates.length, 8, '2 epochs x 4 mini-batches');
  assert.equal(policy.step, 8, 'one AdamW step per mini-batch');
  assert.ok(r.updates.every((u) => u.skipped === null));
  // The ratio is taken against the policy before the first step.
  r.oldLogp.forEach((lp, i) => assert.deepEqual(lp, before[i]));
  assert.equal(r.updates[0]!.clipFrac, 0, 'first mini-batch: the policy is the sampling one, ratio 1');
  assert.ok(Math.abs(r.updates[0]!.approxKl) < 1e-6);
  assert.ok(r.updates[1]!.clipFrac > 0, `clip fraction after the first mini-batch: ${r.updates[1]!.clipFrac}`);
  assert.ok(r.updates.at(-1)!.approxKl > 0, 'the policy moved away from the sampling one');
  const merged = mergeUpdateStats(r.updates);
  assert.equal(merged.tokens, r.updates.reduce((n, u) => n + u.tokens, 0));
  assert.ok(merged.clipFrac > 0);
  await policy.dispose();
});

test('mini-batch split: a shuffled partition into near-equal parts, reproducible from its seed', () => {
  const parts = miniBatchIndices(10, 4, 3);
  assert.deepEqual(parts.map((p) => p.length), [3, 3, 2, 2]);
  assert.deepEqual(parts.flat().sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.deepEqual(miniBatchIndices(10, 4, 3), parts);
  assert.notDeepEqual(miniBatchIndices(10, 4, 4), parts);
  assert.equal(miniBatchIndices(3, 8, 1).length, 3, 'never an empty mini-batch');
  assert.throws(() => miniBatchIndices(4, 0, 1), /miniBatches must be a positive integer, got 0/);
});

test('mini-batches keep a prompt group whole, near-equal in size, and never empty', () => {
  const groups = [[0, 1, 2, 3], [4, 5, 6, 7], [8], [9, 10, 11, 12], [13, 14], [15, 16, 17, 18]];
  for (const seed of [1, 2, 3, 4, 5]) {
    const parts = miniBatchGroups(groups, 4, seed);
    assert.equal(parts.length, 4);
    assert.deepEqual(parts.flat().sort((a, b) => a - b), Array.from({ length: 19 }, (_, i) => i));
    for (const g of groups) assert.equal(new Set(g.map((i) => parts.findIndex((p) => p.includes(i)))).size, 1, `group ${g} split (seed ${seed})`);
    for (const p of parts) assert.ok(p.length >= 1 && p.length <= 8, `part of ${p.length} (seed ${seed})`);
  }
  assert.equal(miniBatchGroups([[0, 1], [2, 3]], 4, 1).length, 2, 'fewer groups than parts: one part per group');
  // Single sequences split exactly as before groups existed (recorded from the sample-wise split).
  assert.deepEqual(miniBatchGroups(Array.from({ length: 10 }, (_, i) => [i]), 4, 3), [[4, 5, 3], [6, 2, 8], [0, 9], [7, 1]]);
});
