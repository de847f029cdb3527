/**
 * Hugging Face checkpoints end to end against PyTorch: tiny random Qwen2, Qwen3 (q/k norm,
 * head_dim ≠ hidden/heads), Llama 3 (llama3 RoPE scaling, tied head) and GPT-2 (Conv1D weights,
 * fused c_attn, LayerNorm, learned positions, tanh GELU) folders written by
 * `reference/make_hf_fixtures.py` in F32, BF16, F16 and sharded form are loaded by our loader,
 * and the compiled graphs reproduce the reference's logits and LoRA PPO gradients. KV-cache
 * decoding equals a full forward on each architecture, and the fused decode graph equals the plain
 * one on Qwen3 and Llama 3 shapes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from '../runtime/engine.ts';
import type { HostTensor } from '../runtime/tensor.ts';
import { buildTrainStep } from './artifacts.ts';
import { loadHfCheckpoint, type HfCheckpoint } from './hf-checkpoint.ts';
import { hfConfigToModelConfig } from './hf-names.ts';
import { initParameters } from './init.ts';
import { modelDims, parameterShapes, ropeInverseFrequencies } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';
import { bitsOf } from './test-util.ts';
import { fixtureFeeds, fixturePath, loadTorchFixture, relErr, type TorchFixture } from './torch-fixture.ts';
import type { TrainSequence } from './train-batch.ts';
import { declareModelInputs, forward } from './transformer-graph.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ log: () => {} });
});
after(async () => {
  await engine.close();
});

const expectedDtype = (folder: string): string => (folder.includes('bf16') ? 'BF16' : folder.includes('f16') ? 'F16' : 'F32');

for (const arch of ['qwen2', 'qwen3', 'llama', 'gpt2']) {
  describe(`Hugging Face ${arch} checkpoint vs PyTorch`, () => {
    let fx: TorchFixture;
    let ck: HfCheckpoint;
    /** Base weights with their shapes, as graph feeds. */
    let base: Map<string, { shape: readonly number[]; data: Float32Array }>;
    before(async () => {
      fx = await loadTorchFixture(`hf-${arch}`);
      ck = await loadHfCheckpoint(fixturePath(fx.meta.folders![0]!));
      const shapes = new Map(parameterShapes(ck.config));
      base = new Map([...ck.params].map(([n, data]) => [n, { shape: shapes.get(n)!, data }]));
    });

    test('config.json converts to the reference reading of it; every dtype and shard layout loads the same weights', async () => {
      // The reference always spells head_dim out; ours leaves it implicit when it is hidden/heads.
      assert.deepEqual({ ...ck.config, headDim: modelDims(ck.config).D }, { ...fx.config, headDim: modelDims(fx.config).D });
      const folders = fx.meta.folders!;
      assert.ok(folders.length >= 2, 'a case has at least two storage variants');
      for (const folder of folders) {
        const other = await loadHfCheckpoint(fixturePath(folder));
        assert.deepEqual(Object.keys(other.storedDtypes), [expectedDtype(folder)], folder);
        assert.equal(other.files.length, folder.endsWith('-sharded') ? 2 : 1, folder);
        assert.deepEqual([...other.params.keys()], [...ck.params.keys()], folder);
        for (const [n, d] of ck.params) assert.deepEqual(bitsOf(other.params.get(n)!), bitsOf(d), `${folder}: ${n}`);
      }
    });

    test('RoPE inverse frequencies equal the reference (llama3 scaling included)', { skip: arch === 'gpt2' && 'GPT-2 has learned positions, no RoPE' }, () => {
      const ours = ropeInverseFrequencies(ck.config);
      const ref = fx.meta.ropeInvFreq!;
      assert.equal(ours.length, ref.length);
      assert.ok(relErr(ours, ref) < 1e-12, `inv_freq ${ours.join(', ')} vs ${ref.join(', ')}`);
    });

    test('logits match at real positions', async () => {
      const b = new Graph();
      const m = declareModelInputs(b, ck.config, 'float32', fx.lora);
      const ids = b.input('input_ids', 'int64', ['B', 'T']);
      const positions = b.input('position_ids', 'int64', ['B', 'T']);
      const bias = b.input('attention_bias', 'float32', ['B', 'T', 'T']);
      const { logits } = forward(b, ck.config, m, { ids, positions, bias });
      await engine.createSession(`hf-logits-${arch}`, emitOnnx([['logits', logits]], { name: 'logits' }));
      const all = fixtureFeeds(fx, base);
      const feeds: Record<string, HostTensor> = {};
      for (const k of [...m.weights.keys(), ...(m.lora?.keys() ?? []), 'input_ids', 'position_ids', 'attention_bias']) feeds[k] = all[k]!;
      const out = await engine.run(`hf-logits-${arch}`, feeds, { logits: 'return' });
      const mask = fx.t('input.attention_mask').data;
      const V = ck.config.vocabSize;
      const err = relErr(out['logits']!.data as Float32Array, fx.t('expect.logits').data, (i) => mask[Math.floor(i / V)] === 1);
      assert.ok(err < 1e-5, `logits relative error ${err}`);
    });

    test('LoRA PPO step: loss, log-probs, diagnostics and adapter gradients match', async () => {
      const art = buildTrainStep(ck.config, { loss: 'ppo', trainable: 'lora', lora: fx.lora, kl: true, entropy: true, perSequenceMask: true });
      await engine.createSession(`hf-train-${arch}`, art.bytes);
      const out = await engine.run(`hf-train-${arch}`, fixtureFeeds(fx, base), Object.fromEntries(art.outputs.map((o) => [o, 'return' as const])));
      const scalar = (k: string) => (out[k]!.data as Float32Array)[0]!;
      const expected = (k: string) => fx.t(`expect.${k}`).data[0]!;
      for (const k of ['loss', 'clip_frac', 'approx_kl', 'entropy']) {
        assert.ok(Math.abs(scalar(k) - expected(k)) <= 1e-5 * Math.max(1, Math.abs(expected(k))), `${k} ${scalar(k)} vs ${expected(k)}`);
      }
      const mask = fx.t('input.attention_mask').data;
      const lerr = relErr(out['logp']!.data as Float32Array, fx.t('expect.logp').data, (i) => mask[i] === 1);
      assert.ok(lerr < 1e-5, `logp relative error ${lerr}`);
      const gradNames = fx.names('grad.');
      assert.deepEqual([...art.trainable].sort(), [...gradNames].sort(), 'trainable tensors');
      for (const n of gradNames) {
        const err = relErr(out[`${n}_grad`]!.data as Float32Array, fx.t(`grad.${n}`).data);
        assert.ok(err < 2e-4, `gradient of ${n}: relative error ${err}`);
      }
    });

    test('KV-cache decode equals a full forward (with the adapter on)', async () => {
      const adapter = new Map(fx.names('param.').map((n) => [n, fx.t(`param.${n}`).data]));
      const p = await Policy.create(engine, {
        id: `hf-decode-${arch}`, config: ck.config, weights: ck.params, lora: fx.lora, adapter,
        optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false,
      });
      try {
        const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];
        const gen = await p.generate(prompts, { maxNewTokens: 10, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 3, stopTokens: [], padToken: 0 });
        const seqs: TrainSequence[] = prompts.map((pr, b) => ({ tokens: Int32Array.from([...pr, ...gen.tokens[b]!]), promptLength: pr.length }));
        const full = await p.score(seqs, 1);
        for (let b = 0; b < prompts.length; b++) {
          assert.equal(gen.tokens[b]!.length, 10);
          for (let j = 0; j < 10; j++) {
            assert.ok(Math.abs(full[b]![j]! - gen.logprobs[b]![j]!) < 1e-4, `row ${b} token ${j}: decode ${gen.logprobs[b]![j]} vs full ${full[b]![j]}`);
          }
        }
      } finally {
        await p.dispose();
      }
    });
  });
}

// The fused decode graph (GroupQueryAttention with its own RoPE tables) must carry Qwen3's q/k norm
// and Llama 3's rescaled frequencies too; it needs a head dimension that is a multiple of 16, so
// these shapes are converted from HF configs rather than taken from the D = 4/8 fixtures.
describe('fused decode on Hugging Face shapes equals the plain decoder', () => {
  const common = { vocab_size: 40, hidden_size: 32, num_hidden_layers: 2, intermediate_size: 48, max_position_embeddings: 64 };
  const shapes = {
    'qwen3 (q/k norm, head_dim 16 ≠ 32/4)': hfConfigToModelConfig({ ...common, model_type: 'qwen3', num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, tie_word_embeddings: true }),
    // orig 64 / high 4 = 16 and orig / low = 64: of the 8 frequencies one is kept, two interpolated, five divided.
    'llama 3 (llama3 RoPE scaling)': hfConfigToModelConfig({
      ...common, model_type: 'llama', num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, rope_theta: 10000,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 },
    }),
  };
  const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];
  for (const [name, config] of Object.entries(shapes)) {
    test(name, async () => {
      const weights = initParameters(config, 2, { std: 0.3 });
      // Norm gains away from 1, so a missing q/k norm weight would show.
      for (const [n, d] of weights) if (n.endsWith('norm.weight')) d.forEach((_, i) => (d[i] = 1 + 0.3 * Math.sin(i + n.length)));
      const make = (fused: boolean, id: string) => Policy.create(engine, {
        id, config, weights: new Map([...weights].map(([n, d]) => [n, d.slice()])), lora: null,
        optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false, decode: { weights: 'fp32', fusedDecode: fused, blockSize: 16 },
      });
      const plain = await make(false, `plain-${name}`);
      const fused = await make(true, `fused-${name}`);
      try {
        for (const [temperature, seed] of [[0, 0], [1, 9]] as const) {
          const o = { maxNewTokens: 20, sampling: { temperature, topP: 1, topK: 0 }, seed, stopTokens: [], padToken: 0 };
          const a = await plain.generate(prompts, o);
          const b = await fused.generate(prompts, o);
          assert.deepEqual(b.tokens.map((t) => [...t]), a.tokens.map((t) => [...t]), `tokens at temperature ${temperature}`);
          let diff = 0;
          a.logprobs.forEach((row, i) => row.forEach((v, j) => (diff = Math.max(diff, Math.abs(v - b.logprobs[i]![j]!)))));
          assert.ok(diff < 1e-4, `log-probs differ by ${diff}`);
        }
      } finally {
        await plain.dispose();
        await fused.dispose();
      }
    });
  }
});
