import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fromHfName, hfConfigToModelConfig, hfProjectionModule, loadHfCheckpoint, toHfName } from './hf-names.ts';
import { initParameters } from './init.ts';
import { loraTargets, parameterShapes, parseModelConfig } from './model-config.ts';
import type { ModelConfig } from './model-config.ts';
import { writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsInput } from './safetensors.ts';
import { bitsOf, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';

const biasedUntied = parseModelConfig({
  vocabSize: 50, hiddenSize: 16, numLayers: 3, numHeads: 4, numKvHeads: 2, intermediateSize: 24,
  attentionBias: true, tieEmbeddings: false,
});

test('every parameter maps to a distinct HF name and back', () => {
  const names = parameterShapes(biasedUntied).map(([n]) => n);
  const hf = names.map(toHfName);
  assert.equal(new Set(hf).size, names.length);
  assert.deepEqual(hf.map(fromHfName), names);
  assert.deepEqual(hf.slice(0, 13), [
    'model.embed_tokens.weight',
    'model.layers.0.input_layernorm.weight',
    'model.layers.0.self_attn.q_proj.weight',
    'model.layers.0.self_attn.q_proj.bias',
    'model.layers.0.self_attn.k_proj.weight',
    'model.layers.0.self_attn.k_proj.bias',
    'model.layers.0.self_attn.v_proj.weight',
    'model.layers.0.self_attn.v_proj.bias',
    'model.layers.0.self_attn.o_proj.weight',
    'model.layers.0.post_attention_layernorm.weight',
    'model.layers.0.mlp.gate_proj.weight',
    'model.layers.0.mlp.up_proj.weight',
    'model.layers.0.mlp.down_proj.weight',
  ]);
  assert.deepEqual(hf.slice(-2), ['model.norm.weight', 'lm_head.weight']);
});

test('unknown names are refused or unmapped', () => {
  throwsMessage(() => toHfName('layers.0.attn.qq.weight'), /parameter 'layers\.0\.attn\.qq\.weight' has no Hugging Face counterpart/);
  assert.equal(fromHfName('model.layers.0.self_attn.q_norm.weight'), undefined);
  assert.equal(fromHfName('model.layers.01.input_layernorm.weight'), undefined);
  assert.equal(fromHfName('norm.weight'), undefined);
});

test('projection modules use HF names', () => {
  assert.deepEqual(loraTargets.map((t) => hfProjectionModule(2, t)), [
    'model.layers.2.self_attn.q_proj', 'model.layers.2.self_attn.k_proj', 'model.layers.2.self_attn.v_proj',
    'model.layers.2.self_attn.o_proj', 'model.layers.2.mlp.gate_proj', 'model.layers.2.mlp.up_proj', 'model.layers.2.mlp.down_proj',
  ]);
});

// Abridged from Qwen/Qwen2.5-0.5B-Instruct config.json.
const qwen25 = {
  architectures: ['Qwen2ForCausalLM'], attention_dropout: 0.0, bos_token_id: 151643, eos_token_id: 151645,
  hidden_act: 'silu', hidden_size: 896, initializer_range: 0.02, intermediate_size: 4864, max_position_embeddings: 32768,
  max_window_layers: 21, model_type: 'qwen2', num_attention_heads: 14, num_hidden_layers: 24, num_key_value_heads: 2,
  rms_norm_eps: 1e-6, rope_scaling: null, rope_theta: 1000000.0, sliding_window: 32768, tie_word_embeddings: true,
  torch_dtype: 'bfloat16', transformers_version: '4.43.1', use_cache: true, use_sliding_window: false, vocab_size: 151936,
};

test('a Qwen2.5 config converts, with biases and tied embeddings', () => {
  const c = hfConfigToModelConfig(qwen25, 'qwen', { maxSequenceLength: 1024 });
  assert.deepEqual(c, {
    vocabSize: 151936, hiddenSize: 896, numLayers: 24, numHeads: 14, numKvHeads: 2, intermediateSize: 4864,
    ropeTheta: 1000000, rmsNormEps: 1e-6, tieEmbeddings: true, attentionBias: true, maxSequenceLength: 1024,
  } satisfies ModelConfig);
  assert.equal(hfConfigToModelConfig(qwen25).maxSequenceLength, 32768);
});

test('a Llama config converts with its defaults and head_dim', () => {
  const c = hfConfigToModelConfig({
    model_type: 'llama', vocab_size: 32000, hidden_size: 2048, num_hidden_layers: 22, num_attention_heads: 32,
    num_key_value_heads: 4, intermediate_size: 5632, rms_norm_eps: 1e-5, head_dim: 64, rope_scaling: null,
  });
  assert.equal(c.attentionBias, false);
  assert.equal(c.tieEmbeddings, false);
  assert.equal(c.ropeTheta, 10000);
  assert.equal(c.headDim, 64);
  assert.equal(c.maxSequenceLength, 2048);
  assert.equal(hfConfigToModelConfig({ ...qwen25, model_type: 'llama', attention_bias: true }).attentionBias, true);
  const v5 = { ...qwen25, rope_theta: undefined, rope_parameters: { rope_type: 'default', rope_theta: 5e5 } };
  assert.equal(hfConfigToModelConfig(v5).ropeTheta, 5e5);
});

test('config errors name the HF fields', () => {
  const bad = (patch: Record<string, unknown>, re: RegExp): void =>
    throwsMessage(() => hfConfigToModelConfig({ ...qwen25, ...patch }, 'cfg.json'), re, JSON.stringify(patch));
  bad({ vocab_size: undefined }, /^invalid cfg\.json:\n {2}vocab_size: /);
  bad({ hidden_size: -3 }, /^invalid cfg\.json:\n {2}hidden_size: /);
  bad({ model_type: 'gpt2' }, /model_type: 'gpt2' is not supported \(supported: qwen2, llama\)/);
  bad({ hidden_act: 'gelu' }, /hidden_act: 'gelu' is not supported/);
  bad({ rope_scaling: { rope_type: 'llama3', factor: 32 } }, /rope_scaling: 'llama3' RoPE scaling is not supported/);
  bad({ use_sliding_window: true }, /use_sliding_window: sliding-window attention is not supported/);
  bad({ num_attention_heads: 15 }, /^invalid cfg\.json:\n {2}num_attention_heads: numHeads \(15\) must divide hiddenSize/);
  bad({ num_key_value_heads: 4 }, /num_key_value_heads: numKvHeads \(4\) must divide numHeads \(14\)/);
  throwsMessage(() => hfConfigToModelConfig([1, 2], 'arr.json'), /^invalid arr\.json:\n {2}\(root\): /);
});

const tiny = {
  model_type: 'qwen2', vocab_size: 50, hidden_size: 16, num_hidden_layers: 3, num_attention_heads: 4,
  num_key_value_heads: 2, intermediate_size: 24, tie_word_embeddings: false, max_position_embeddings: 64,
};

/** Our parameters under HF names, plus extra tensors. */
function hfTensors(params: Map<string, Float32Array>, config: ModelConfig): Map<string, SafetensorsInput> {
  const shapes = new Map(parameterShapes(config));
  return new Map([...params].map(([n, data]) => [toHfName(n), { shape: shapes.get(n)!, data }]));
}

test('loads a single-file HF checkpoint, skipping rotary buffers', async () => {
  await withTempDir(async (dir) => {
    const config = hfConfigToModelConfig(tiny);
    const params = initParameters(config, 4);
    const tensors = hfTensors(params, config);
    tensors.set('model.layers.0.self_attn.rotary_emb.inv_freq', { shape: [2], data: new Float32Array([1, 0.1]) });
    await writeFile(join(dir, 'config.json'), JSON.stringify(tiny));
    await writeSafetensorsFile(join(dir, 'model.safetensors'), tensors, { format: 'pt' });
    const loaded = await loadHfCheckpoint(dir);
    assert.deepEqual(loaded.config, config);
    assert.deepEqual([...loaded.params.keys()], [...params.keys()]);
    for (const [n, d] of params) assert.deepEqual(bitsOf(loaded.params.get(n)!), bitsOf(d), n);
  });
});

test('loads a sharded checkpoint and checks shards against the index', async () => {
  await withTempDir(async (dir) => {
    const config = hfConfigToModelConfig(tiny);
    const params = initParameters(config, 5);
    const all = [...hfTensors(params, config)];
    const shards = [new Map(all.slice(0, 10)), new Map(all.slice(10))];
    const names = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'] as const;
    const weightMap = Object.fromEntries(shards.flatMap((s, i) => [...s.keys()].map((k) => [k, names[i]!])));
    await writeFile(join(dir, 'config.json'), JSON.stringify(tiny));
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 1 }, weight_map: weightMap }));
    for (let i = 0; i < 2; i++) await writeSafetensorsFile(join(dir, names[i]!), shards[i]!);
    const loaded = await loadHfCheckpoint(dir);
    for (const [n, d] of params) assert.deepEqual(bitsOf(loaded.params.get(n)!), bitsOf(d), n);

    const firstName = all[0]![0];
    const writeIndex = (map: Record<string, string>): Promise<void> =>
      writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: map }));
    await writeIndex({ ...weightMap, [firstName]: names[1] });
    await rejectsMessage(loadHfCheckpoint(dir), /model-00001-of-00002\.safetensors: tensor 'model\.embed_tokens\.weight' is listed in model\.safetensors\.index\.json under shard 'model-00002-of-00002\.safetensors'/);
    await writeIndex({ ...weightMap, 'model.extra.weight': names[0] });
    await rejectsMessage(loadHfCheckpoint(dir), /index\.json: tensor 'model\.extra\.weight' should be in shard 'model-00001-of-00002\.safetensors' but .* does not contain it/);
    await writeIndex({ ...weightMap, [firstName]: '../evil.safetensors' });
    await rejectsMessage(loadHfCheckpoint(dir), /tensor 'model\.embed_tokens\.weight' points to shard '\.\.\/evil\.safetensors', which is not a file name in this folder/);
  });
});

test('HF checkpoint errors name tensors by their HF names', async () => {
  await withTempDir(async (dir) => {
    const config = hfConfigToModelConfig(tiny);
    const tensors = hfTensors(initParameters(config, 6), config);
    await writeFile(join(dir, 'config.json'), JSON.stringify(tiny));
    const path = join(dir, 'model.safetensors');
    const load = async (edit: (t: Map<string, SafetensorsInput>) => void, re: RegExp): Promise<void> => {
      const copy = new Map(tensors);
      edit(copy);
      await writeSafetensorsFile(path, copy);
      await rejectsMessage(loadHfCheckpoint(dir), re);
    };
    await load((t) => t.delete('model.layers.2.self_attn.v_proj.bias'),
      /missing tensor 'model\.layers\.2\.self_attn\.v_proj\.bias' \(ours: 'layers\.2\.attn\.v\.bias'\) \(expected shape \[8\]\)/);
    await load((t) => t.set('model.layers.0.mlp.up_proj.weight', { shape: [16, 24], data: new Float32Array(384) }),
      /tensor 'model\.layers\.0\.mlp\.up_proj\.weight' \(ours: 'layers\.0\.mlp\.up\.weight'\) has shape \[16, 24\], expected \[24, 16\]/);
    await load((t) => t.set('model.layers.0.self_attn.q_norm.weight', { shape: [4], data: new Float32Array(4) }),
      /unexpected tensor 'model\.layers\.0\.self_attn\.q_norm\.weight' \(shape \[4\]\): not part of a qwen2 model/);
    await load((t) => t.set('model.layers.3.input_layernorm.weight', { shape: [16], data: new Float32Array(16) }),
      /unexpected tensor 'model\.layers\.3\.input_layernorm\.weight' \(ours: 'layers\.3\.attn_norm\.weight'\)/);
  });
});

test('tied checkpoints: a stored lm_head must equal the embedding', async () => {
  await withTempDir(async (dir) => {
    const tied = { ...tiny, tie_word_embeddings: true };
    const config = hfConfigToModelConfig(tied);
    const tensors = hfTensors(initParameters(config, 7), config);
    const embed = tensors.get('model.embed_tokens.weight')!;
    await writeFile(join(dir, 'config.json'), JSON.stringify(tied));
    const path = join(dir, 'model.safetensors');
    await writeSafetensorsFile(path, new Map([...tensors, ['lm_head.weight', { shape: embed.shape, data: embed.data.slice() }]]));
    assert.equal((await loadHfCheckpoint(dir)).params.has('lm_head.weight'), false);
    const other = embed.data.slice();
    other[3] = 1;
    await writeSafetensorsFile(path, new Map([...tensors, ['lm_head.weight', { shape: embed.shape, data: other }]]));
    await rejectsMessage(loadHfCheckpoint(dir), /tensor 'lm_head\.weight' differs from 'model\.embed_tokens\.weight' although tie_word_embeddings is true/);
  });
});

test('a folder without safetensors weights says so', async () => {
  await withTempDir(async (dir) => {
    await writeFile(join(dir, 'config.json'), JSON.stringify(tiny));
    await rejectsMessage(loadHfCheckpoint(dir), /no model\.safetensors or model\.safetensors\.index\.json \(PyTorch \.bin checkpoints are not supported/);
  });
});
