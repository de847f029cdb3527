/**
 * Masked ids (a model's padded vocabulary rows, `PolicyOptions.maskedTokens`) are never generated,
 * even where they have the highest logit: greedy, sampled, and through the fused decode graph of
 * training rollouts. The ids masked are the ones the unmasked policy chose greedily, so each was
 * the argmax at some step; the test fails if the mask is not applied on any path.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { initParameters } from './init.ts';
import { parseModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy, type PolicyOptions } from './policy.ts';

const config = parseModelConfig({ vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: true });
const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];
const greedy = { temperature: 0, topP: 1, topK: 0 };

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

let ids = 0;
function policy(o: Partial<Pick<PolicyOptions, 'maskedTokens' | 'decode'>> = {}): Promise<Policy> {
  return Policy.create(engine, { id: `mask-${ids++}`, config, weights: initParameters(config, 3, { std: 0.3 }), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false, ...o });
}

const produced = (tokens: readonly Int32Array[]): Set<number> => new Set(tokens.flatMap((t) => [...t]));

test('a masked id is never generated, though it has the highest logit', async () => {
  const free = await policy();
  const a = await free.generate(prompts, { maxNewTokens: 12, sampling: greedy, seed: 0, stopTokens: [], padToken: 0 });
  const argmaxes = [...produced(a.tokens)];
  assert.ok(argmaxes.length >= 2, `greedy decoding chose ${argmaxes.length} distinct ids`);

  const masked = await policy({ maskedTokens: argmaxes });
  const b = await masked.generate(prompts, { maxNewTokens: 12, sampling: greedy, seed: 0, stopTokens: [], padToken: 0 });
  for (const id of produced(b.tokens)) assert.ok(!argmaxes.includes(id), `greedy produced masked id ${id}`);
  // Sampling renormalises over the unmasked ids: the log-probs are finite and every draw allowed.
  const c = await masked.generate(prompts, { maxNewTokens: 24, sampling: { temperature: 1.5, topP: 1, topK: 0 }, seed: 9, stopTokens: [], padToken: 0 });
  for (const id of produced(c.tokens)) assert.ok(!argmaxes.includes(id), `sampling produced masked id ${id}`);
  assert.ok(c.logprobs.every((l) => l.every(Number.isFinite)));
});

test('training rollouts through the fused decode graph mask the same ids', async () => {
  const free = await policy({ decode: { weights: 'fp32', fusedDecode: true, blockSize: 16 } });
  const a = await free.generate(prompts, { maxNewTokens: 12, sampling: greedy, seed: 0, stopTokens: [], padToken: 0, rollout: true });
  const argmaxes = [...produced(a.tokens)];
  const masked = await policy({ decode: { weights: 'fp32', fusedDecode: true, blockSize: 16 }, maskedTokens: argmaxes });
  const b = await masked.generate(prompts, { maxNewTokens: 12, sampling: greedy, seed: 0, stopTokens: [], padToken: 0, rollout: true });
  for (const id of produced(b.tokens)) assert.ok(!argmaxes.includes(id), `fused decode produced masked id ${id}`);
});

test('a masked id outside the vocabulary is refused, naming it', async () => {
  const bad = await policy({ maskedTokens: [3, config.vocabSize] });
  await assert.rejects(bad.generate(prompts, { maxNewTokens: 2, sampling: greedy, seed: 0, stopTokens: [], padToken: 0 }), /masked token id 40 \(entry 1\) is outside the vocabulary of 40/);
});
