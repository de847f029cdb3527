/**
 * The fused decode graph (RotaryEmbedding, SkipSimplifiedLayerNormalization, MatMulNBits) in
 * ONNX Runtime against the plain one: fp32 fused decoding gives the plain decoder's tokens and
 * log-probs (ragged prompts, LoRA, untied and tied heads, attention biases); the quantized graph
 * at exact accuracy equals the plain graph run on the dequantized weights; the int8/int4 rollouts
 * stay within a bound of the fp32 policy and decode a trained model's greedy answer unchanged;
 * and an update reaches the quantized rollout weights.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import type { GenerateResult } from '../runtime/generate.ts';
import { buildDecode } from './artifacts.ts';
import { buildFusedDecode, quantizedWeightNames, type RolloutWeights } from './decode-graph.ts';
import { initParameters } from './init.ts';
import { initLoraParameters, parseLoraConfig } from './lora.ts';
import { parseModelConfig, parameterShapes, modelDims, type ModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';
import { dequantizeBlockwise, quantizeBlockwise, type QuantizedMatrix } from './quantize.ts';
import { mergeAdapter, quantizeResidents, unquantizedResidents, type DecoderSource } from './rollout-decoder.ts';
import type { TrainSequence } from './train-batch.ts';
import { loraShapes, type LoraSpec } from './transformer-graph.ts';

const untied: ModelConfig = parseModelConfig({ vocabSize: 24, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: false, attentionBias: true, maxSequenceLength: 64 });
const tied: ModelConfig = parseModelConfig({ vocabSize: 40, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 4, intermediateSize: 96, tieEmbeddings: true, maxSequenceLength: 64 });
const loraConfig = parseLoraConfig({ rank: 4, alpha: 8 });
const lora: LoraSpec = { rank: loraConfig.rank, alpha: 8, targets: loraConfig.targets };
const optimizer = optimizerSchema.parse({ lr: 1e-2, weightDecay: 0 });
const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];
const greedy = { temperature: 0, topP: 1, topK: 0 };
const sampled = { temperature: 1, topP: 1, topK: 0 };

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

let ids = 0;
async function policy(c: ModelConfig, o: { weights?: Map<string, Float32Array>; lora?: boolean; fused?: boolean; rollout?: RolloutWeights; maxBakedBytes?: number } = {}): Promise<Policy> {
  const withLora = o.lora ?? false;
  const adapter = withLora ? initLoraParameters(c, loraConfig, 3) : undefined;
  // Non-zero B, so the adapter changes the outputs the fused graph must reproduce.
  if (adapter) for (const [n, t] of adapter) if (n.endsWith('lora_B')) t.forEach((_, i) => (t[i] = Math.sin(i + n.length) * 0.1));
  return Policy.create(engine, {
    id: `p${ids++}`,
    config: c,
    weights: o.weights ?? initParameters(c, 1, { std: 0.2 }),
    lora: withLora ? lora : null,
    ...(adapter ? { adapter } : {}),
    optimizer,
    kl: false,
    entropy: false,
    decode: { weights: o.rollout ?? 'fp32', fusedDecode: o.fused ?? false, blockSize: 16, ...(o.maxBakedBytes === undefined ? {} : { maxBakedBytes: o.maxBakedBytes }) },
  });
}

const gen = (p: Policy, sampling: typeof greedy, rollout = false, seed = 5, maxNewTokens = 10): Promise<GenerateResult> =>
  p.generate(prompts, { maxNewTokens, sampling, seed, stopTokens: [], padToken: 0, rollout });

function maxDiff(a: readonly Float32Array[], b: readonly Float32Array[]): number {
  let m = 0;
  a.forEach((x, i) => x.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i]![j]!)))));
  return m;
}

async function fp32Logprobs(p: Policy, g: GenerateResult, temperature: number): Promise<Float32Array[]> {
  const seqs: TrainSequence[] = prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...g.tokens[b]!]), promptLength: pr.length }));
  return p.score(seqs, temperature);
}

describe('fused fp32 decode equals the plain decoder', () => {
  for (const [name, c, withLora] of [
    ['untied head, attention biases, GQA', untied, false],
    ['same with a LoRA adapter', untied, true],
    ['tied head, H = Hkv', tied, false],
  ] as const) {
    test(name, async () => {
      const plain = await policy(c, { lora: withLora });
      const fused = await policy(c, { lora: withLora, fused: true });
      // 40 new tokens: the fused graph's batch-major cache grows its capacity twice (generate.ts).
      for (const [sampling, seed, n] of [[greedy, 0, 10], [sampled, 11, 10], [sampled, 12, 40]] as const) {
        const a = await gen(plain, sampling, false, seed, n);
        const b = await gen(fused, sampling, false, seed, n);
        assert.deepEqual(b.tokens.map((t) => [...t]), a.tokens.map((t) => [...t]), `tokens at temperature ${sampling.temperature}`);
        assert.ok(maxDiff(a.logprobs, b.logprobs) < 1e-4, `log-probs differ by ${maxDiff(a.logprobs, b.logprobs)}`);
      }
    });
  }

  test('a prompt plus new tokens past the RoPE table is refused by name', async () => {
    const fused = await policy(untied, { fused: true });
    await assert.rejects(gen(fused, greedy, false, 0, 62), /prompt \(6\) \+ maxNewTokens \(62\) = 68 positions exceed the decoder's 64/);
  });
});

describe('quantized decode', () => {
  test('at exact accuracy the int4 graph equals the plain graph on the dequantized weights', async () => {
    for (const bits of [4, 8] as const) {
      const weights = initParameters(untied, 2, { std: 0.2 });
      const shapes = new Map(parameterShapes(untied));
      const quantized = new Map<string, QuantizedMatrix>();
      const dequantized = new Map(weights);
      for (const name of quantizedWeightNames(untied)) {
        const [rows, cols] = shapes.get(name) as [number, number];
        const q = quantizeBlockwise(weights.get(name)!, rows, cols, bits, 16);
        quantized.set(name, q);
        dequantized.set(name, dequantizeBlockwise(q));
      }
      const reference = await policy(untied, { weights: dequantized });
      const graph = buildFusedDecode(untied, { weights: bits === 4 ? 'int4' : 'int8', lora: null, quantized, accuracyLevel: 0 });
      const session = `exact-int${bits}`;
      await engine.createSession(session, graph.bytes);
      const host = await policy(untied, { weights });
      const params: Record<string, string> = {};
      for (const n of graph.tensorInputs) params[n] = `${host.id}:w:${n}`;
      const { L, Hkv, D, V } = modelDims(untied);
      const q = await engine.generate({
        session,
        params,
        prompts,
        maxNewTokens: 10,
        sampling: sampled,
        seed: 3,
        stopTokens: [],
        padToken: 0,
        contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: graph.maxPositions, cacheLayout: graph.cacheLayout },
      });
      const r = await gen(reference, sampled, false, 3);
      assert.deepEqual(q.tokens.map((t) => [...t]), r.tokens.map((t) => [...t]), `int${bits} tokens`);
      assert.ok(maxDiff(q.logprobs, r.logprobs) < 1e-4, `int${bits}: log-probs differ by ${maxDiff(q.logprobs, r.logprobs)}`);
    }
  });

  test('int8/int4 rollout log-probs stay within bounds of the fp32 policy (LoRA merged); int8 is closer', async () => {
    // Bounds measured on this model (weights N(0, 0.1²), blocks of 16): max |Δ log p| 0.05 (int8)
    // and 0.36 (int4), means 0.011 and 0.11; the asserted bounds leave about 2x of margin.
    const mean: Record<string, number> = {};
    for (const [weights, maxBound, meanBound] of [['int8', 0.1, 0.025], ['int4', 0.8, 0.25]] as const) {
      const p = await policy(untied, { lora: true, rollout: weights, weights: initParameters(untied, 1, { std: 0.1 }) });
      const g = await gen(p, sampled, true, 9, 16);
      const fp32 = await fp32Logprobs(p, g, 1);
      const d = maxDiff(g.logprobs, fp32);
      let sum = 0;
      let n = 0;
      g.logprobs.forEach((l, b) => l.forEach((v, j) => ((sum += Math.abs(v - fp32[b]![j]!)), n++)));
      mean[weights] = sum / n;
      assert.ok(d < maxBound && d > 0, `${weights}: max |Δ log p| ${d}`);
      assert.ok(mean[weights]! < meanBound, `${weights}: mean |Δ log p| ${mean[weights]}`);
      // Validation and warm-start play (rollout: false) decode the fp32 policy.
      const plain = await gen(p, sampled, false, 9, 16);
      assert.ok(maxDiff(plain.logprobs, await fp32Logprobs(p, plain, 1)) < 1e-4);
    }
    assert.ok(mean['int8']! < mean['int4']! / 4, `int8 ${mean['int8']} vs int4 ${mean['int4']}`);
  });

  test('int8 and int4 rollouts decode a trained model greedily as fp32 does', async () => {
    const p = await policy(tied, { rollout: 'int4' });
    const q8 = await policy(tied, { rollout: 'int8' });
    const batch: TrainSequence[] = prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...Array.from({ length: 8 }, (_, j) => (3 * b + 5 * j + 1) % tied.vocabSize)]), promptLength: pr.length }));
    for (let i = 0; i < 60; i++) {
      await p.update('ce', batch, null);
      await q8.update('ce', batch, null);
    }
    for (const x of [p, q8]) {
      const fp = await gen(x, greedy, false, 0, 8);
      const q = await gen(x, greedy, true, 0, 8);
      assert.deepEqual(fp.tokens.map((t) => [...t]), batch.map((s) => [...s.tokens.slice(s.promptLength)]), 'the fp32 model learned the batch');
      assert.deepEqual(q.tokens.map((t) => [...t]), fp.tokens.map((t) => [...t]));
    }
  });

  for (const [what, o] of [['int8 rollout', { lora: true, rollout: 'int8' }], ['fused fp32', { lora: true, fused: true }]] as const) {
  test(`an update reaches the baked weights (${what})`, async () => {
    const p = await policy(untied, o);
    const rollout = 'rollout' in o;
    const before = await gen(p, greedy, rollout, 0, 6);
    const seqs: TrainSequence[] = prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...before.tokens[b]!]), promptLength: pr.length }));
    await p.update('ce', seqs, null);
    const after = await gen(p, greedy, rollout, 0, 6);
    // Same tokens are forced through the score graph: the rollout must follow the trained weights.
    const fp32After = await p.score(seqs, 1);
    const teacher = prompts.map((_, b) => after.logprobs[b]!.slice(0, 1));
    const fpFirst = fp32After.map((l) => l.slice(0, 1));
    const beforeFirst = before.logprobs.map((l) => l.slice(0, 1));
    assert.ok(maxDiff(teacher, fpFirst) < maxDiff(beforeFirst, fpFirst), 'the rollout still samples from the weights before the update');
  });
  }

  test('rollouts started together after an update wait for one rebuild of the quantized session', async () => {
    const p = await policy(untied, { lora: true, rollout: 'int4' });
    const before = await gen(p, greedy, true, 0, 6);
    await p.update('ce', prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...before.tokens[b]!]), promptLength: pr.length })), null);
    const sessions = (await engine.stats()).sessions;
    const created: string[] = [];
    const create = engine.createSession;
    engine.createSession = (...args) => (created.push(args[0]), create.apply(engine, args));
    try {
      const [a, b] = await Promise.all([gen(p, greedy, true, 0, 6), gen(p, greedy, true, 0, 6)]);
      assert.deepEqual(created, [`${p.id}:decode-int4`], 'one rebuild for both rollouts');
      assert.deepEqual(a.tokens.map((t) => [...t]), b.tokens.map((t) => [...t]));
      assert.equal(maxDiff(a.logprobs, b.logprobs), 0);
    } finally {
      engine.createSession = create;
    }
    assert.equal((await engine.stats()).sessions, sessions, 'the stale session is gone and the new one in its place');
    await p.dispose();
  });
});

test('a model too large to bake decodes the same with its weights as inputs (fused fp32, int8)', async () => {
  for (const o of [{ fused: true }, { rollout: 'int8' as const }]) {
    const baked = await policy(untied, { lora: true, ...o });
    const fed = await policy(untied, { lora: true, ...o, maxBakedBytes: 0 });
    const rollout = 'rollout' in o;
    const a = await gen(baked, sampled, rollout, 2);
    const b = await gen(fed, sampled, rollout, 2);
    assert.deepEqual(b.tokens.map((t) => [...t]), a.tokens.map((t) => [...t]), JSON.stringify(o));
    assert.ok(maxDiff(a.logprobs, b.logprobs) < 1e-4, `${JSON.stringify(o)}: log-probs differ by ${maxDiff(a.logprobs, b.logprobs)}`);
  }
});

/** The plain graph (time-major cache) and the fused one (batch-major cache), weights as inputs. */
const layouts = [
  ['time-major (plain graph)', () => buildDecode(untied, null), undefined],
  ['batch-major (fused graph)', () => buildFusedDecode(untied, { weights: 'fp32', lora: null }), 'batch-major'],
] as const;

for (const [layout, build, cacheLayout] of layouts) {
test(`finished rows leave the batch without changing any row's tokens or log-probs (${layout})`, async () => {
  const host = await policy(untied);
  const a = build();
  const session = `retire-${layout}`;
  await engine.createSession(session, a.bytes);
  const params: Record<string, string> = {};
  for (const n of a.tensorInputs) params[n] = `${host.id}:w:${n}`;
  const { L, Hkv, D, V } = modelDims(untied);
  const many = Array.from({ length: 12 }, (_, b) => Int32Array.from({ length: 1 + (b % 5) }, (_, t) => (b * 7 + t * 3) % 20 + 1));
  const contract = { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, ...(cacheLayout ? { cacheLayout } : {}) };
  // 30 new tokens: rows retire before and after the batch-major cache grows its capacity.
  const run = (retireFinished: boolean) =>
    engine.generate({ session, params, prompts: many, maxNewTokens: 30, sampling: sampled, seed: 4, stopTokens: [2, 5, 9, 13], padToken: 0, contract, retireFinished });
  const kept = await run(false);
  const retired = await run(true);
  const lengths = kept.tokens.map((t) => t.length);
  assert.ok(new Set(lengths).size >= 4 && Math.min(...lengths) < 8, `rows finish at different times: ${lengths}`);
  assert.deepEqual(retired.tokens.map((t) => [...t]), kept.tokens.map((t) => [...t]));
  assert.deepEqual(retired.finish, kept.finish);
  assert.ok(maxDiff(retired.logprobs, kept.logprobs) < 1e-5, `log-probs differ by ${maxDiff(retired.logprobs, kept.logprobs)}`);
});

test(`identical prompts are prefilled once: the same tokens and log-probs as prefilling each (${layout})`, async () => {
  const host = await policy(untied);
  const a = build();
  const session = `share-${layout}`;
  await engine.createSession(session, a.bytes);
  const params: Record<string, string> = {};
  for (const n of a.tensorInputs) params[n] = `${host.id}:w:${n}`;
  const { L, Hkv, D, V } = modelDims(untied);
  // Three tree nodes with K = 3 branches each, ragged, plus a lone prompt in the middle.
  const nodes = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];
  const batch = [...nodes.flatMap((p) => [p, p, p]).slice(0, 6), Int32Array.from([4, 4]), nodes[2]!, nodes[2]!, nodes[2]!];
  const contract = { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, ...(cacheLayout ? { cacheLayout } : {}) };
  const run = (sharePrompts: boolean) =>
    engine.generate({ session, params, prompts: batch, maxNewTokens: 8, sampling: sampled, seed: 6, stopTokens: [], padToken: 0, contract, sharePrompts });
  const each = await run(false);
  const shared = await run(true);
  assert.deepEqual(shared.tokens.map((t) => [...t]), each.tokens.map((t) => [...t]));
  assert.ok(maxDiff(shared.logprobs, each.logprobs) < 1e-5, `log-probs differ by ${maxDiff(shared.logprobs, each.logprobs)}`);
});

test(`distinctFirst: each group of identical prompts starts with distinct tokens whose log-probs stay the policy's (${layout})`, async () => {
  const host = await policy(untied);
  const a = build();
  const session = `distinct-${layout}`;
  await engine.createSession(session, a.bytes);
  const params: Record<string, string> = {};
  for (const n of a.tensorInputs) params[n] = `${host.id}:w:${n}`;
  const { L, Hkv, D, V } = modelDims(untied);
  const K = 4;
  const batch = prompts.flatMap((p) => Array.from({ length: K }, () => p));
  const contract = { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, ...(cacheLayout ? { cacheLayout } : {}) };
  // A low temperature makes i.i.d. branches repeat their first token; distinct ones cannot.
  const cold = { temperature: 0.3, topP: 1, topK: 0 };
  const run = (distinctFirst?: number) =>
    engine.generate({ session, params, prompts: batch, maxNewTokens: 6, sampling: cold, seed: 12, stopTokens: [], padToken: 0, contract, ...(distinctFirst ? { distinctFirst } : {}) });
  const iid = await run();
  const distinct = await run(K);
  const firsts = (r: GenerateResult, g: number) => r.tokens.slice(g * K, g * K + K).map((t) => t[0]!);
  assert.ok(prompts.some((_, g) => new Set(firsts(iid, g)).size < K), 'i.i.d. branches repeat a first token somewhere (else the test shows nothing)');
  prompts.forEach((_, g) => assert.equal(new Set(firsts(distinct, g)).size, K, `group ${g}: ${firsts(distinct, g)}`));
  prompts.forEach((_, g) => {
    // The first row of a group draws as it would alone.
    assert.deepEqual([...distinct.tokens[g * K]!], [...iid.tokens[g * K]!]);
    assert.ok(Math.abs(distinct.logprobs[g * K]![0]! - iid.logprobs[g * K]![0]!) < 1e-5);
    // The K first tokens are distinct ids of one distribution, so their probabilities, if they are
    // the policy's (not renormalised after each exclusion), sum to at most 1.
    const mass = distinct.logprobs.slice(g * K, g * K + K).reduce((s, l) => s + Math.exp(l[0]!), 0);
    assert.ok(mass <= 1 + 1e-5, `group ${g}: first-token probabilities sum to ${mass}`);
  });
  await assert.rejects(run(5), /distinctFirst must be a positive integer dividing the batch of 12, got 5/);
  await assert.rejects(
    engine.generate({ session, params, prompts: [...batch.slice(0, 3), prompts[1]!, ...batch.slice(4)], maxNewTokens: 2, sampling: cold, seed: 1, stopTokens: [], padToken: 0, contract, distinctFirst: K }),
    /rows 0\.\.3, but row 3's prompt differs from row 0's/,
  );
  await engine.releaseSession(session);
});
}

test('joined q/k/v and gate/up projections decode as the separate ones (fp32 baked, int8, int4)', async () => {
  const weights = initParameters(untied, 6, { std: 0.2 });
  const shapes = new Map(parameterShapes(untied));
  const { L, Hkv, D, V } = modelDims(untied);
  for (const kind of ['fp32', 'int8', 'int4'] as const) {
    const quantized = new Map<string, QuantizedMatrix>();
    if (kind !== 'fp32') {
      for (const name of quantizedWeightNames(untied)) {
        const [rows, cols] = shapes.get(name) as [number, number];
        quantized.set(name, quantizeBlockwise(weights.get(name)!, rows, cols, kind === 'int8' ? 8 : 4, 16));
      }
    }
    const results: GenerateResult[] = [];
    for (const joinProjections of [false, true]) {
      const graph = buildFusedDecode(untied, { weights: kind, lora: null, baked: weights, ...(kind === 'fp32' ? {} : { quantized }), joinProjections });
      assert.deepEqual(graph.tensorInputs, [], 'every weight is baked');
      const names = new TextDecoder('latin1').decode(graph.bytes);
      assert.equal(names.includes('layers.1.attn.qkv') && names.includes('layers.1.mlp.gate_up'), joinProjections, `${kind}: joined initializers present iff joining`);
      const session = `join-${kind}-${joinProjections}`;
      await engine.createSession(session, graph.bytes);
      results.push(await engine.generate({ session, params: {}, prompts, maxNewTokens: 12, sampling: sampled, seed: 8, stopTokens: [], padToken: 0, contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: graph.maxPositions, cacheLayout: graph.cacheLayout } }));
      await engine.releaseSession(session);
    }
    const [separate, joined] = results as [GenerateResult, GenerateResult];
    assert.deepEqual(joined.tokens.map((t) => [...t]), separate.tokens.map((t) => [...t]), kind);
    assert.ok(maxDiff(joined.logprobs, separate.logprobs) < 1e-5, `${kind}: log-probs differ by ${maxDiff(joined.logprobs, separate.logprobs)}`);
  }
});

test('mergeAdapter needs the adapter of a LoRA policy', () => {
  assert.throws(() => mergeAdapter(untied, lora, initParameters(untied, 1), null), /LoRA layout but no adapter tensors/);
});

test('a rebuild quantizes the residents a slice of rows at a time into the same codes and graph as the whole merged weights (int8, int4; LoRA, tied and untied)', async () => {
  for (const c of [untied, tied]) {
    for (const withLora of [false, true]) {
      const weights = initParameters(c, 4, { std: 0.2 });
      const adapter = withLora ? initLoraParameters(c, loraConfig, 5) : null;
      if (adapter) for (const [n, t] of adapter) if (n.endsWith('lora_B')) t.forEach((_, i) => (t[i] = Math.cos(i + n.length) * 0.1));
      const resident = (name: string) => `rebuild:${c.vocabSize}:${withLora}:${name}`;
      for (const [name, shape] of [...parameterShapes(c), ...(adapter ? loraShapes(c, lora) : [])]) {
        await engine.upload(resident(name), { dtype: 'float32', dims: shape, data: (weights.get(name) ?? adapter!.get(name)!).slice() });
      }
      const src: DecoderSource = { engine, id: 'rebuild', config: c, lora: withLora ? lora : null, resident, snapshot: () => Promise.reject(new Error('a quantized rebuild takes no snapshot')) };
      // The whole-matrix path the decoder took before: every weight copied, merged, quantized.
      const merged = mergeAdapter(c, src.lora, weights, adapter);
      const shapes = new Map(parameterShapes(c));
      for (const bits of [8, 4] as const) {
        const whole = new Map<string, QuantizedMatrix>();
        for (const name of quantizedWeightNames(c)) {
          const [rows, cols] = shapes.get(name) as [number, number];
          whole.set(name, quantizeBlockwise(merged.get(name)!, rows, cols, bits, 16));
        }
        // Three rows per slice: every matrix is read in several slices, the last one short.
        const sliced = await quantizeResidents(src, bits, 16, 3 * c.hiddenSize * 4);
        assert.deepEqual([...sliced.keys()], [...whole.keys()]);
        for (const [name, q] of whole) {
          const s = sliced.get(name)!;
          assert.ok(s.rows === q.rows && s.cols === q.cols && s.bits === bits && s.blockSize === 16, name);
          assert.ok(Buffer.from(s.packed).equals(Buffer.from(q.packed)), `${name}: int${bits} codes differ`);
          assert.ok(Buffer.from(s.scales.buffer).equals(Buffer.from(q.scales.buffer)), `${name}: int${bits} scales differ`);
        }
        const weightsKind = bits === 8 ? 'int8' : 'int4';
        const before = buildFusedDecode(c, { weights: weightsKind, lora: null, baked: merged, quantized: whole });
        const after = buildFusedDecode(c, { weights: weightsKind, lora: null, baked: await unquantizedResidents(src), quantized: sliced });
        assert.ok(Buffer.from(after.bytes).equals(Buffer.from(before.bytes)), `${c.tieEmbeddings ? 'tied' : 'untied'}${withLora ? ' LoRA' : ''} int${bits}: the baked graph differs`);
        assert.deepEqual(after.tensorInputs, before.tensorInputs);
      }
      await engine.drop([...parameterShapes(c), ...(adapter ? loraShapes(c, lora) : [])].map(([n]) => resident(n)));
    }
  }
});

test('download reads a range of rows of a resident tensor, and refuses rows it does not have', async () => {
  await engine.upload('rows', { dtype: 'float32', dims: [4, 2, 3], data: Float32Array.from({ length: 24 }, (_, i) => i) });
  const part = await engine.download('rows', { start: 1, count: 2 });
  assert.deepEqual(part.dims, [2, 2, 3]);
  assert.deepEqual([...part.data], Array.from({ length: 12 }, (_, i) => i + 6));
  assert.deepEqual((await engine.download('rows', { start: 4, count: 0 })).dims, [0, 2, 3]);
  await assert.rejects(engine.download('rows', { start: 3, count: 2 }), /download rows 3\.\.4 of 'rows': .*outside its dims \[4, 2, 3\]/);
  await engine.drop(['rows']);
});
