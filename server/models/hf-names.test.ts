import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromHfName, hfConfigToModelConfig, hfProjectionModule, modelConfigToHf, toHfName } from './hf-names.ts';
import { loraTargets, modelDims, parameterCount, parameterShapes, parseModelConfig, ropeInverseFrequencies } from './model-config.ts';
import type { ModelConfig } from './model-config.ts';
import { throwsMessage } from './test-util.ts';

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
  assert.equal(fromHfName('model.layers.0.self_attn.rotary_emb.inv_freq'), undefined);
  assert.equal(fromHfName('model.layers.0.self_attn.v_norm.weight'), undefined);
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
  bad({ model_type: 'gemma2' }, /model_type: 'gemma2' is not supported \(supported: qwen2, qwen3, llama, gpt2\)/);
  bad({ hidden_act: 'gelu' }, /hidden_act: 'gelu' is not supported/);
  bad({ rope_scaling: { rope_type: 'llama3', factor: 32 } }, /rope_scaling: llama3 RoPE scaling needs low_freq_factor, high_freq_factor, original_max_position_embeddings/);
  bad({ rope_scaling: { type: 'yarn', factor: 4 } }, /rope_scaling: 'yarn' RoPE scaling is not supported \(supported: llama3\)/);
  bad({ rope_parameters: { rope_type: 'dynamic', factor: 2 } }, /rope_parameters\.rope_type: 'dynamic' RoPE scaling is not supported/);
  bad({ architectures: ['Qwen2ForSequenceClassification'] }, /architectures: Qwen2ForSequenceClassification is not a causal language model/);
  bad({ layer_types: ['full_attention', 'sliding_attention'] }, /layer_types: only 'full_attention' layers are supported, got 'sliding_attention'/);
  bad({ attention_bias: false }, /attention_bias: qwen2 models always have q\/k\/v biases/);
  bad({ use_sliding_window: true }, /use_sliding_window: sliding-window attention is not supported/);
  bad({ num_attention_heads: 15 }, /^invalid cfg\.json:\n {2}num_attention_heads: numHeads \(15\) must divide hiddenSize/);
  bad({ num_key_value_heads: 4 }, /num_key_value_heads: numKvHeads \(4\) must divide numHeads \(14\)/);
  throwsMessage(() => hfConfigToModelConfig([1, 2], 'arr.json'), /^invalid arr\.json:\n {2}\(root\): /);
});


// config.json of released checkpoints (abridged to the fields that matter), with their published
// parameter counts: the conversion must give exactly those shapes.
const qwen3_17b = {
  architectures: ['Qwen3ForCausalLM'], attention_bias: false, head_dim: 128, hidden_act: 'silu', hidden_size: 2048,
  intermediate_size: 6144, max_position_embeddings: 40960, max_window_layers: 28, model_type: 'qwen3', num_attention_heads: 16,
  num_hidden_layers: 28, num_key_value_heads: 8, rms_norm_eps: 1e-6, rope_scaling: null, rope_theta: 1000000, sliding_window: null,
  tie_word_embeddings: true, torch_dtype: 'bfloat16', use_sliding_window: false, vocab_size: 151936,
};
const llama32_1b = {
  architectures: ['LlamaForCausalLM'], attention_bias: false, head_dim: 64, hidden_act: 'silu', hidden_size: 2048,
  intermediate_size: 8192, max_position_embeddings: 131072, mlp_bias: false, model_type: 'llama', num_attention_heads: 32,
  num_hidden_layers: 16, num_key_value_heads: 8, pretraining_tp: 1, rms_norm_eps: 1e-5,
  rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' },
  rope_theta: 500000.0, tie_word_embeddings: true, torch_dtype: 'bfloat16', vocab_size: 128256,
};
const smollm2_135m = {
  architectures: ['LlamaForCausalLM'], attention_bias: false, hidden_act: 'silu', hidden_size: 576, intermediate_size: 1536,
  max_position_embeddings: 8192, model_type: 'llama', num_attention_heads: 9, num_hidden_layers: 30, num_key_value_heads: 3,
  rms_norm_eps: 1e-5, rope_scaling: null, rope_theta: 100000, tie_word_embeddings: true, vocab_size: 49152,
};

test('released configs convert to the published parameter counts', () => {
  assert.equal(parameterCount(hfConfigToModelConfig(qwen25)), 494_032_768);
  const q3 = hfConfigToModelConfig(qwen3_17b);
  assert.equal(q3.qkNorm, true);
  assert.equal(q3.attentionBias, false);
  // The Qwen3 model cards give rounded figures: 0.6B (0.44B non-embedding) and 1.7B (1.4B).
  const billions = (c: ModelConfig, embedding: boolean) => Math.round((parameterCount(c) - (embedding ? 0 : c.vocabSize * c.hiddenSize)) / 1e7) / 100;
  const q06 = hfConfigToModelConfig({ ...qwen3_17b, hidden_size: 1024, intermediate_size: 3072 }); // head_dim 128 ≠ 1024/16
  assert.deepEqual([billions(q06, true), billions(q06, false)], [0.6, 0.44]);
  assert.deepEqual([Math.round(billions(q3, true) * 10) / 10, Math.round(billions(q3, false) * 10) / 10], [1.7, 1.4]);
  const l = hfConfigToModelConfig(llama32_1b);
  assert.deepEqual(l.ropeScaling, { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
  assert.equal(parameterCount(l), 1_235_814_400);
  assert.equal(parameterCount(hfConfigToModelConfig(smollm2_135m)), 134_515_008);
  assert.equal(modelDims(hfConfigToModelConfig(smollm2_135m)).D, 64);
});

test('transformers v5 rope_parameters carry llama3 scaling too', () => {
  const { rope_scaling: scaling, rope_theta: theta, ...rest } = llama32_1b;
  const c = hfConfigToModelConfig({ ...rest, rope_parameters: { ...scaling, rope_theta: theta } });
  assert.deepEqual(c, hfConfigToModelConfig(llama32_1b));
});

test('llama3 RoPE scaling keeps high frequencies, divides low ones and interpolates between', () => {
  const c = hfConfigToModelConfig(llama32_1b);
  const plain = ropeInverseFrequencies({ ...c, ropeScaling: undefined });
  const scaled = ropeInverseFrequencies(c);
  const wavelen = (f: number) => (2 * Math.PI) / f;
  let kept = 0, divided = 0, between = 0;
  plain.forEach((f, j) => {
    if (wavelen(f) < 8192 / 4) { assert.equal(scaled[j], f); kept++; }
    else if (wavelen(f) > 8192 / 1) { assert.equal(scaled[j], f / 32); divided++; }
    else { assert.ok(scaled[j]! > f / 32 && scaled[j]! < f, `band ${j}`); between++; }
  });
  assert.ok(kept > 0 && divided > 0 && between > 0, `${kept} kept, ${divided} divided, ${between} interpolated`);
});

test('modelConfigToHf writes what hfConfigToModelConfig reads back', () => {
  for (const [hf, type] of [[qwen25, 'qwen2'], [qwen3_17b, 'qwen3'], [llama32_1b, 'llama']] as const) {
    const c = hfConfigToModelConfig(hf);
    assert.deepEqual(hfConfigToModelConfig(modelConfigToHf(c, type)), { ...c, headDim: modelDims(c).D }, type);
  }
  throwsMessage(() => modelConfigToHf(hfConfigToModelConfig(qwen3_17b), 'llama'), /cannot be written as model_type 'llama'/);
});
