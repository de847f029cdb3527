/**
 * L2 in one engine: every agent's LoRA policy over one base feeds the same resident base weights
 * (one copy, counted in resident bytes) and the same sessions, while each trains its own
 * adapter; the base goes when the last policy does. Also: token-budget micro-batches give the
 * same scores and the same update as one pass.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { initParameters } from './init.ts';
import { initLoraParameters, parseLoraConfig } from './lora.ts';
import { parameterShapes, parseModelConfig, type ModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy, type PolicyOptions } from './policy.ts';
import { rejectsMessage } from './test-util.ts';
import type { TrainSequence } from './train-batch.ts';
import { loraShapes } from './transformer-graph.ts';

const config: ModelConfig = parseModelConfig({ vocabSize: 64, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 128, tieEmbeddings: true, attentionBias: true });
const loraConfig = parseLoraConfig({ rank: 4, alpha: 8 });
const lora = { rank: loraConfig.rank, alpha: 8, targets: loraConfig.targets };
const optimizer = optimizerSchema.parse({ lr: 1e-2, weightDecay: 0 });
const bytesOf = (shapes: ReadonlyArray<readonly [string, readonly number[]]>) => shapes.reduce((n, [, s]) => n + 4 * s.reduce((a, b) => a * b, 1), 0);
const baseBytes = bytesOf(parameterShapes(config));
const adapterBytes = bytesOf(loraShapes(config, lora));

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 2, log: () => {} });
});
after(async () => {
  await engine.close();
});

const base = initParameters(config, 3, { std: 0.2 });

/** A policy's options; its adapter depends on `seed` (nonzero B, so it changes outputs from the start). */
function options(id: string, baseKey: string | undefined, extra: Partial<PolicyOptions> = {}, seed = 1): PolicyOptions {
  const adapter = initLoraParameters(config, loraConfig, seed);
  for (const [n, v] of adapter) if (n.endsWith('lora_B')) v.forEach((_, i) => (v[i] = 0.05 * Math.sin(i * seed + 1)));
  return { id, config, weights: base, lora, adapter, optimizer, kl: true, entropy: true, ...(baseKey ? { baseKey } : {}), ...extra };
}

const seqs: TrainSequence[] = [
  { tokens: Int32Array.from([1, 5, 7, 9, 2, 4]), promptLength: 3 },
  { tokens: Int32Array.from([3, 3, 8, 1, 1, 6, 12, 30, 31]), promptLength: 5 },
  { tokens: Int32Array.from([8, 2]), promptLength: 1 },
];

async function ppoBatch(p: Policy): Promise<TrainSequence[]> {
  const old = await p.score(seqs, 1);
  const ref = await p.score(seqs, 1, true);
  return seqs.map((s, i) => ({ ...s, advantages: Float32Array.from(old[i]!, (_, j) => (j % 2 ? 1 : -0.5)), oldLogp: old[i]!, refLogp: ref[i]! }));
}
const hp = { temperature: 1, clipEps: 0.2, klCoef: 0.1, entCoef: 0.01 };

describe('one frozen base under every agent adapter (L2)', () => {
  test('two LoRA policies on one base key hold one copy of the base and one set of sessions', async () => {
    const empty = await engine.stats();
    const a = await Policy.create(engine, options('agent-a', 'shared-model'));
    const afterA = await engine.stats();
    const b = await Policy.create(engine, options('agent-b', 'shared-model'));
    const afterB = await engine.stats();
    // Each policy holds its adapter and the adapter's two AdamW moments; only the first the base.
    assert.equal(afterA.residentBytes - empty.residentBytes, baseBytes + 3 * adapterBytes, 'the first policy uploads the base');
    assert.equal(afterB.residentBytes - afterA.residentBytes, 3 * adapterBytes, 'the second policy adds only its adapter state');
    assert.equal(engine.sharedUsers('base:shared-model'), 2);
    // Nor does a policy keep the host copy it uploaded (2 GB at Qwen2.5-0.5B's size).
    assert.equal('weights' in a.options, false);

    await ppoBatch(a);
    const sessionsA = (await engine.stats()).sessions;
    await ppoBatch(b);
    assert.equal((await engine.stats()).sessions, sessionsA, 'b scored with the sessions a created');

    // Separate keys (no sharing) cost a second base.
    const c = await Policy.create(engine, options('agent-c', undefined));
    assert.equal((await engine.stats()).residentBytes - afterB.residentBytes, baseBytes + 3 * adapterBytes, 'an unshared policy uploads its own base');
    await c.dispose();
    await a.dispose();
    await b.dispose();
    assert.equal(engine.sharedUsers('base:shared-model'), 0);
    const end = await engine.stats();
    assert.equal(end.residentTensors, empty.residentTensors, 'the last policy dropped the shared base');
    assert.equal(end.sessions, empty.sessions, 'and the shared sessions');
  });

  test('each adapter trains on its own; the shared base never moves', async () => {
    const a = await Policy.create(engine, options('train-a', 'train-model'));
    const b = await Policy.create(engine, options('train-b', 'train-model', {}, 2));
    const a0 = await a.trainableTensors();
    const b0 = await b.trainableTensors();
    const s = await a.update('ppo', await ppoBatch(a), hp);
    assert.equal(s.skipped, null);
    const a1 = await a.trainableTensors();
    const b1 = await b.trainableTensors();
    for (const [n, v] of a1) assert.ok(v.some((x, i) => x !== a0.get(n)![i]), `a's ${n} moved`);
    for (const [n, v] of b1) assert.deepEqual(v, b0.get(n), `b's ${n} did not move when a trained`);
    await b.update('ppo', await ppoBatch(b), hp);
    const b2 = await b.trainableTensors();
    for (const [n, v] of b2) assert.ok(v.some((x, i) => x !== b1.get(n)![i]), `b's ${n} moved`);
    assert.deepEqual(await a.trainableTensors(), a1, "b's update left a's adapter alone");
    for (const [n, v] of await b.weights()) assert.deepEqual(v, base.get(n), `base ${n} unchanged`);
    // The two adapters now differ, and so do the policies' log-probs on the same tokens.
    const [la, lb] = [await a.score(seqs, 1), await b.score(seqs, 1)];
    assert.ok(la.some((r, i) => r.some((x, j) => x !== lb[i]![j])), 'the policies score differently');
    await a.dispose();
    await b.dispose();
  });

  test('a different base under the same key is refused, naming the key', async () => {
    const a = await Policy.create(engine, options('fp-a', 'fp-model'));
    const other = initParameters(config, 4, { std: 0.2 });
    await rejectsMessage(Policy.create(engine, { ...options('fp-b', 'fp-model'), weights: other }), /shared 'base:fp-model' already holds different contents/);
    assert.equal(engine.sharedUsers('base:fp-model'), 1);
    await a.dispose();
  });
});

describe('micro-batches by token budget', () => {
  test('scores and a PPO update split by tokens equal one pass', async () => {
    const one = await Policy.create(engine, options('mb-one', undefined, { microBatch: {} }));
    const split = await Policy.create(engine, options('mb-split', undefined, { microBatch: { tokens: 8 }, optimizer: { ...optimizer, eps: 1e-2 } }));
    const whole = await Policy.create(engine, options('mb-whole', undefined, { microBatch: {}, optimizer: { ...optimizer, eps: 1e-2 } }));
    const batch = await ppoBatch(one);
    const s1 = await split.score(seqs, 1);
    batch.forEach((q, i) => q.oldLogp!.forEach((x, j) => assert.ok(Math.abs(x - s1[i]![j]!) < 1e-5, `score ${i}.${j}`)));
    const u1 = await split.update('ppo', batch, hp);
    const u2 = await whole.update('ppo', batch, hp);
    assert.ok(Math.abs(u1.loss - u2.loss) < 1e-6, `loss ${u1.loss} vs ${u2.loss}`);
    assert.ok(Math.abs(u1.gradNorm - u2.gradNorm) < 1e-4 * u2.gradNorm, `grad norm ${u1.gradNorm} vs ${u2.gradNorm}`);
    const t1 = await split.trainableTensors();
    for (const [n, v] of await whole.trainableTensors()) v.forEach((x, i) => assert.ok(Math.abs(x - t1.get(n)![i]!) < 1e-5, `${n}[${i}]`));
    for (const p of [one, split, whole]) await p.dispose();
  });
});
