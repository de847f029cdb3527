/**
 * The engine ladder on a real model in ONNX Runtime: KV-cache decoding equals a full forward,
 * seeded sampling is reproducible, one optimizer step moves every trainable tensor (and with
 * LoRA only the adapter), supervised training overfits a tiny batch, a policy-gradient step moves
 * probability toward positively-advantaged tokens, and a non-finite loss skips the update.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { initParameters } from './init.ts';
import { KL_CLAMP } from './artifacts.ts';
import { initLoraParameters, parseLoraConfig } from './lora.ts';
import { parseModelConfig, type ModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';
import type { TrainSequence } from './train-batch.ts';

const config: ModelConfig = parseModelConfig({ vocabSize: 24, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: false, attentionBias: true });
const loraConfig = parseLoraConfig({ rank: 4, alpha: 8 });
const lora = { rank: loraConfig.rank, alpha: 8, targets: loraConfig.targets };
const optimizer = optimizerSchema.parse({ lr: 1e-2, weightDecay: 0 });

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

function weights(seed: number): Map<string, Float32Array> {
  return initParameters(config, seed, { std: 0.2 });
}

async function fullPolicy(id: string, extra: Partial<{ kl: boolean; entropy: boolean; eps: number }> = {}): Promise<Policy> {
  const opt = extra.eps === undefined ? optimizer : { ...optimizer, eps: extra.eps };
  return Policy.create(engine, { id, config, weights: weights(1), lora: null, optimizer: opt, kl: extra.kl ?? false, entropy: extra.entropy ?? false });
}

/** Every trainable tensor of `a` within `tol` of `b`'s, elementwise. */
async function assertSameTrainables(a: Policy, b: Policy, tol: number): Promise<void> {
  const tb = await b.trainableTensors();
  for (const [name, v] of await a.trainableTensors()) {
    const u = tb.get(name)!;
    let worst = 0;
    v.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - u[i]!))));
    assert.ok(worst < tol, `${name} differs by ${worst}`);
  }
}

const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];

describe('decoding', () => {
  test('KV-cache decode equals a full forward pass (ragged, left-padded prompts)', async () => {
    const p = await fullPolicy('decode-eq');
    const gen = await p.generate(prompts, { maxNewTokens: 12, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 7, stopTokens: [], padToken: 0 });
    const seqs: TrainSequence[] = prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...gen.tokens[b]!]), promptLength: pr.length }));
    const full = await p.score(seqs, 1);
    for (let b = 0; b < prompts.length; b++) {
      assert.equal(gen.tokens[b]!.length, 12);
      for (let j = 0; j < 12; j++) {
        assert.ok(Math.abs(full[b]![j]! - gen.logprobs[b]![j]!) < 1e-4, `row ${b} token ${j}: decode ${gen.logprobs[b]![j]} vs full ${full[b]![j]}`);
      }
    }
  });

  test('seeded sampling is reproducible; its log-probs are those the trainer recomputes', async () => {
    const p = await fullPolicy('decode-seed');
    const sampling = { temperature: 0.7, topP: 1, topK: 0 };
    const a = await p.generate(prompts, { maxNewTokens: 16, sampling, seed: 42, stopTokens: [], padToken: 0 });
    const b = await p.generate(prompts, { maxNewTokens: 16, sampling, seed: 42, stopTokens: [], padToken: 0 });
    const c = await p.generate(prompts, { maxNewTokens: 16, sampling, seed: 43, stopTokens: [], padToken: 0 });
    assert.deepEqual(a.tokens, b.tokens);
    assert.notDeepEqual(a.tokens, c.tokens);
    const seqs = prompts.map((pr, i) => ({ tokens: Int32Array.from([...pr, ...a.tokens[i]!]), promptLength: pr.length }));
    const rescored = await p.score(seqs, 0.7);
    rescored.forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(v - a.logprobs[i]![j]!) < 1e-4, `row ${i} token ${j}`)));
  });

  test('a row stops at its stop token while others continue', async () => {
    const p = await fullPolicy('decode-stop');
    const greedy = await p.generate(prompts, { maxNewTokens: 8, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: 0 });
    const stopAt = greedy.tokens[0]![2]!;
    const r = await p.generate(prompts, { maxNewTokens: 8, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [stopAt], padToken: 0 });
    const first = greedy.tokens[0]!.indexOf(stopAt);
    assert.equal(r.finish[0], 'stop');
    assert.deepEqual(Array.from(r.tokens[0]!), Array.from(greedy.tokens[0]!.slice(0, first + 1)));
  });
});

describe('training', () => {
  const batch: TrainSequence[] = [
    { tokens: Int32Array.from([1, 2, 3, 4, 5, 6]), promptLength: 2 },
    { tokens: Int32Array.from([7, 8, 9, 10]), promptLength: 1 },
    { tokens: Int32Array.from([11, 12, 13, 14, 15, 16, 17]), promptLength: 3 },
  ];

  test('one optimizer step changes every trainable tensor (full fine-tuning)', async () => {
    const p = await fullPolicy('step-full');
    const before = await p.trainableTensors();
    const s = await p.update('ce', batch, null);
    assert.equal(s.skipped, null);
    const after = await p.trainableTensors();
    for (const [name, v] of before) assert.notDeepEqual(after.get(name), v, `${name} did not change`);
    assert.equal(p.step, 1);
  });

  test('with LoRA one step changes every adapter tensor and no base weight', async () => {
    const adapter = initLoraParameters(config, loraConfig, 3);
    // PEFT initialises B to zero, which makes A's first gradient zero; start from a random B so
    // the test sees every adapter tensor's own gradient.
    for (const [name, v] of adapter) if (name.endsWith('lora_B')) v.forEach((_, i) => (v[i] = Math.sin(i + name.length) * 0.1));
    const p = await Policy.create(engine, { id: 'step-lora', config, weights: weights(1), lora, adapter, optimizer, kl: false, entropy: false });
    const base0 = await p.weights();
    const a0 = await p.trainableTensors();
    await p.update('ce', batch, null);
    const base1 = await p.weights();
    const a1 = await p.trainableTensors();
    for (const [name, v] of base0) assert.deepEqual(base1.get(name), v, `base weight ${name} changed`);
    for (const [name, v] of a0) assert.notDeepEqual(a1.get(name), v, `adapter ${name} did not change`);
  });

  test('supervised training overfits a tiny batch', async () => {
    const p = await fullPolicy('sft');
    let first = 0;
    let last = 0;
    for (let i = 0; i < 60; i++) {
      const s = await p.update('ce', batch, null);
      if (i === 0) first = s.loss;
      last = s.loss;
    }
    assert.ok(last < 0.05 * first && last < 0.1, `loss ${first} → ${last}`);
    const gen = await p.generate([Int32Array.from([1, 2])], { maxNewTokens: 4, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: 0 });
    assert.deepEqual(Array.from(gen.tokens[0]!), [3, 4, 5, 6]);
  });

  test('a policy-gradient step raises positively-advantaged tokens and lowers negative ones', async () => {
    const p = await fullPolicy('pg', { kl: true, entropy: true });
    const seqs: TrainSequence[] = batch.map((s, i) => ({ ...s, advantages: new Float32Array(s.tokens.length - s.promptLength).fill(i === 1 ? -1 : 1) }));
    const old = await p.score(seqs, 1);
    const ref = await p.score(seqs, 1, true);
    const s = await p.update(
      'ppo',
      seqs.map((q, i) => ({ ...q, oldLogp: old[i]!, refLogp: ref[i]! })),
      { temperature: 1, clipEps: 0.2, klCoef: 0.01, entCoef: 0.001 },
    );
    assert.equal(s.skipped, null);
    assert.equal(s.clipFrac, 0, 'first PPO epoch is on-policy: nothing clipped');
    const now = await p.score(seqs, 1);
    now.forEach((row, i) =>
      row.forEach((v, j) => {
        if (i === 1) assert.ok(v < old[i]![j]!, `negative-advantage token ${i}/${j} rose: ${old[i]![j]} → ${v}`);
        else assert.ok(v > old[i]![j]!, `positive-advantage token ${i}/${j} fell: ${old[i]![j]} → ${v}`);
      }),
    );
  });

  test('the KL term is clamped at KL_CLAMP per token: a reference far above the policy does not explode the loss', async () => {
    const p = await fullPolicy('kl-clamp', { kl: true });
    const seqs: TrainSequence[] = batch.map((s) => ({ ...s, advantages: new Float32Array(s.tokens.length - s.promptLength) }));
    const old = await p.score(seqs, 1);
    // The reference finds every sampled token e^30 times likelier than the policy does: unclamped,
    // k3 = exp(30) − 30 − 1 ≈ 1e13 per token.
    const s = await p.update('ppo', seqs.map((q, i) => ({ ...q, oldLogp: old[i]!, refLogp: old[i]!.map((v) => v + 30) })), { temperature: 1, clipEps: 0.2, klCoef: 1, entCoef: 0 });
    assert.equal(s.skipped, null);
    assert.ok(Math.abs(s.klRef - KL_CLAMP) < 1e-4, `kl_ref ${s.klRef}, clamp ${KL_CLAMP}`);
    assert.ok(Math.abs(s.loss - KL_CLAMP) < 1e-3, `loss ${s.loss}: zero advantages, so the clamped KL alone`);
  });

  test('a non-finite loss skips the update, is counted, and leaves the weights alone', async () => {
    const w = weights(1);
    w.get('norm.weight')!.fill(Number.POSITIVE_INFINITY);
    const p = await Policy.create(engine, { id: 'nonfinite', config, weights: w, lora: null, optimizer, kl: false, entropy: false });
    const before = await p.trainableTensors();
    const s = await p.update('ce', batch, null);
    assert.equal(s.skipped, 'non-finite loss');
    assert.equal(p.nonFiniteSkips, 1);
    assert.equal(p.step, 0);
    const after = await p.trainableTensors();
    for (const [name, v] of before) assert.deepEqual(after.get(name), v, name);
  });

  test('gradient accumulation over micro-batches equals one big batch', async () => {
    // Adam's first step is ±lr wherever |g| ≫ ε, so float noise on a gradient that is zero in
    // exact arithmetic (a key bias shifts every score of a query equally) would decide the sign;
    // a large ε makes the update proportional to the gradient and the comparison meaningful.
    const a = await fullPolicy('accum-a', { eps: 1e-2 });
    const b = await fullPolicy('accum-b', { eps: 1e-2 });
    const sa = await a.update('ce', batch, null, 64);
    const sb = await b.update('ce', batch, null, 1);
    assert.ok(Math.abs(sa.loss - sb.loss) < 1e-5, `loss ${sa.loss} vs ${sb.loss}`);
    assert.ok(Math.abs(sa.gradNorm - sb.gradNorm) < 1e-4 * sa.gradNorm, `grad norm ${sa.gradNorm} vs ${sb.gradNorm}`);
    await assertSameTrainables(a, b, 1e-5);
  });
});

describe('rows shared by prompts', () => {
  // Tree branches: several responses to one prompt, a prompt seen again later, a one-token prompt.
  const seqs: TrainSequence[] = [
    [[1, 5, 7, 2], [3, 4, 9]],
    [[1, 5, 7, 2], [6]],
    [[2, 3], [4, 5]],
    [[1, 5, 7, 2], [8, 8, 10, 11]],
    [[8], [9, 10]],
    [[1, 5, 7, 2], [12, 13]],
    [[8], [11]],
  ].map(([p, r], i) => ({
    tokens: Int32Array.from([...p!, ...r!]),
    promptLength: p!.length,
    advantages: Float32Array.from(r!, (_, j) => Math.sin(i * 3 + j)),
  }));

  async function loraPolicy(id: string, sharePrompts: boolean): Promise<Policy> {
    const adapter = initLoraParameters(config, loraConfig, 5);
    for (const [name, v] of adapter) if (name.endsWith('lora_B')) v.forEach((_, i) => (v[i] = Math.cos(i + name.length) * 0.1));
    // ε large for the reason given in the accumulation test: the update is then proportional to the gradient.
    return Policy.create(engine, { id, config, weights: weights(2), lora, adapter, optimizer: { ...optimizer, eps: 1e-2 }, kl: false, entropy: true, sharePrompts });
  }

  test('shared rows score and train exactly as one row per sequence', async () => {
    const shared = await loraPolicy('share-on', true);
    const alone = await loraPolicy('share-off', false);
    const a = await shared.score(seqs, 0.8);
    const b = await alone.score(seqs, 0.8);
    a.forEach((row, i) => {
      assert.equal(row.length, seqs[i]!.tokens.length - seqs[i]!.promptLength);
      row.forEach((v, j) => assert.ok(Math.abs(v - b[i]![j]!) < 1e-5, `sequence ${i} token ${j}: shared ${v} vs alone ${b[i]![j]}`));
    });
    // Old log-probs a little off the current ones, so the ratio and the clip take part.
    const batch = seqs.map((q, i) => ({ ...q, oldLogp: b[i]!.map((v, j) => v + 0.3 * Math.cos(i + j)) }));
    const hp = { temperature: 0.8, clipEps: 0.2, klCoef: 0, entCoef: 0.01 };
    const sa = await shared.update('ppo', batch, hp);
    const sb = await alone.update('ppo', batch, hp);
    assert.ok(sb.clipFrac > 0, 'the test exercises the clip');
    for (const k of ['loss', 'clipFrac', 'entropy', 'approxKl'] as const) assert.ok(Math.abs(sa[k] - sb[k]) < 1e-5, `${k}: shared ${sa[k]} vs alone ${sb[k]}`);
    assert.ok(Math.abs(sa.gradNorm - sb.gradNorm) < 1e-4 * sb.gradNorm, `grad norm ${sa.gradNorm} vs ${sb.gradNorm}`);
    await assertSameTrainables(shared, alone, 1e-5);
  });
});

describe('execution providers', () => {
  for (const ep of ['cuda', 'webgpu'] as const) {
    test(`an unavailable ${ep} provider falls back to cpu and says why`, async (t) => {
      const lines: string[] = [];
      const e = await Engine.start({ executionProvider: ep, log: (l) => lines.push(l) });
      try {
        if (e.provider === ep) {
          t.skip(`${ep} is available on this machine`);
          return;
        }
        assert.equal(e.provider, 'cpu');
        assert.match(lines.join('\n'), new RegExp(`${ep} unavailable, fell back to cpu: .+`));
      } finally {
        await e.close();
      }
    });
  }
});
