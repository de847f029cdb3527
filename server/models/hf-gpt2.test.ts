/**
 * GPT-2 (model_type gpt2): config.json conversion with transformers' defaults, the Conv1D/c_attn
 * tensor mapping both ways against the PyTorch-written folder in fixtures/hf/gpt2-f32, named
 * errors, and what is refused (fused decode, PEFT, a gate target). The forward itself is checked
 * against PyTorch in hf-models.ort.test.ts.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { buildFusedDecode } from './decode-graph.ts';
import { parameterCount as memoryParameterCount } from './default-model.ts';
import { loadHfCheckpoint, saveHfCheckpoint } from './hf-checkpoint.ts';
import { hfConfigToModelConfig, modelConfigToHf } from './hf-names.ts';
import { initParameters } from './init.ts';
import { exportPeftAdapter, initLoraParameters, loraParameterShapes, parseLoraConfig } from './lora.ts';
import { parameterCount, parameterShapes, parseModelConfig } from './model-config.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import { bitsOf, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';
import { fixturePath } from './torch-fixture.ts';

/** microsoft/DialoGPT-medium's config.json (the fields that matter; the hub file has more). */
const dialoGptMedium = {
  activation_function: 'gelu_new', architectures: ['GPT2LMHeadModel'], attn_pdrop: 0.1, bos_token_id: 50256, embd_pdrop: 0.1,
  eos_token_id: 50256, initializer_range: 0.02, layer_norm_epsilon: 1e-5, model_type: 'gpt2', n_ctx: 1024, n_embd: 1024,
  n_head: 16, n_layer: 24, n_positions: 1024, resid_pdrop: 0.1, vocab_size: 50257,
};

test('DialoGPT-medium converts with GPT2Config defaults and has GPT-2 medium\'s 354.8M parameters', () => {
  const c = hfConfigToModelConfig(dialoGptMedium);
  assert.equal(c.architecture, 'gpt2');
  assert.deepEqual(
    [c.hiddenSize, c.numLayers, c.numHeads, c.intermediateSize, c.positionEmbeddings, c.maxSequenceLength, c.rmsNormEps, c.tieEmbeddings, c.attentionBias],
    [1024, 24, 16, 4096, 1024, 1024, 1e-5, true, true],
  );
  // wte + wpe + 24 × (2 LayerNorms, c_attn, c_proj, c_fc, mlp.c_proj, all with biases) + ln_f.
  assert.equal(parameterCount(c), 354_823_168);
  assert.equal(memoryParameterCount(c), 354_823_168, 'the memory estimate counts the same parameters');
  assert.equal(parameterShapes(c).some(([n]) => n.includes('gate')), false);
  assert.deepEqual(hfConfigToModelConfig(modelConfigToHf(c, 'gpt2')), c);
});

test('GPT-2 config errors name the GPT-2 fields', () => {
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, activation_function: 'relu' }), /activation_function: 'relu' is not supported/);
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, scale_attn_by_inverse_layer_idx: true }), /scale_attn_by_inverse_layer_idx/);
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, n_head: 24 }), /n_head: numHeads \(24\) must divide hiddenSize/);
  throwsMessage(() => hfConfigToModelConfig(dialoGptMedium, 'cfg', { maxSequenceLength: 2048 }), /n_positions: \(2048\) must be at most positionEmbeddings \(1024\)/);
});

test('the model schema: gpt2 needs its learned positions and biases; RoPE models refuse them', () => {
  const base = { vocabSize: 10, hiddenSize: 8, numLayers: 1, numHeads: 2, intermediateSize: 16, maxSequenceLength: 32 };
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true }), /positionEmbeddings: is required/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 16 }), /maxSequenceLength: \(32\) must be at most positionEmbeddings \(16\)/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', positionEmbeddings: 32 }), /attentionBias: must be true/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 32, numKvHeads: 1 }), /numKvHeads/);
  throwsMessage(() => parseModelConfig({ ...base, positionEmbeddings: 32 }), /positionEmbeddings: learned position embeddings belong to architecture gpt2/);
  // An odd head dimension is fine without RoPE.
  assert.equal(parseModelConfig({ ...base, hiddenSize: 6, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 32 }).hiddenSize, 6);
});

test('saving writes the Conv1D layout PyTorch wrote: the fixture folder round-trips bit for bit', async () => {
  const src = fixturePath('hf/gpt2-f32');
  const ck = await loadHfCheckpoint(src);
  const { tensors: theirs } = await readSafetensorsFile(join(src, 'model.safetensors'));
  await withTempDir(async (dir) => {
    await saveHfCheckpoint(dir, ck.config, ck.params, { modelType: 'gpt2', sourceConfig: JSON.parse(await readFile(join(src, 'config.json'), 'utf8')) as Record<string, unknown> });
    const { tensors: ours } = await readSafetensorsFile(join(dir, 'model.safetensors'));
    const weights = [...theirs.keys()].filter((n) => !/\.attn\.(bias|masked_bias)$/.test(n)).sort();
    assert.deepEqual([...ours.keys()].sort(), weights);
    for (const n of weights) {
      assert.deepEqual(ours.get(n)!.shape, theirs.get(n)!.shape, n);
      assert.deepEqual(bitsOf(ours.get(n)!.data), bitsOf(theirs.get(n)!.data), n);
    }
    const back = await loadHfCheckpoint(dir);
    assert.deepEqual(back.config, ck.config);
  });
});

test('a GPT2Model checkpoint (no transformer. prefix) loads the same; a mis-shaped c_attn is named', async () => {
  const src = fixturePath('hf/gpt2-f32');
  const ck = await loadHfCheckpoint(src);
  const { tensors } = await readSafetensorsFile(join(src, 'model.safetensors'));
  await withTempDir(async (dir) => {
    await writeFile(join(dir, 'config.json'), await readFile(join(src, 'config.json')));
    const bare = new Map([...tensors].map(([n, t]) => [n.replace(/^transformer\./, ''), t]));
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    const loaded = await loadHfCheckpoint(dir);
    for (const [n, d] of ck.params) assert.deepEqual(bitsOf(loaded.params.get(n)!), bitsOf(d), n);

    const C = ck.config.hiddenSize;
    bare.set('h.1.attn.c_attn.weight', { ...bare.get('h.1.attn.c_attn.weight')!, shape: [3 * C, C] });
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    await rejectsMessage(loadHfCheckpoint(dir), /tensor 'h\.1\.attn\.c_attn\.weight' has shape \[48, 16\], expected \[16, 48\]/);
    bare.delete('h.1.attn.c_attn.weight');
    bare.delete('h.0.mlp.c_fc.weight');
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    await rejectsMessage(loadHfCheckpoint(dir), /missing tensor 'transformer\.h\.0\.mlp\.c_fc\.weight' \(ours: 'layers\.0\.mlp\.up\.weight', transposed\)/);
    await rejectsMessage(loadHfCheckpoint(dir), /missing tensor 'transformer\.h\.1\.attn\.c_attn\.weight' \(its q part/);
  });
});

test('LoRA on gpt2: the default targets leave out the missing gate; fused decode and PEFT are refused by name', async () => {
  const config = hfConfigToModelConfig({ ...dialoGptMedium, n_embd: 16, n_head: 2, n_layer: 1, vocab_size: 20, n_positions: 32 });
  const lora = parseLoraConfig({ rank: 2 });
  assert.deepEqual(loraParameterShapes(config, lora).map(([n]) => n.split('.').slice(2, 4).join('.')).filter((_, i) => i % 2 === 0), ['attn.q', 'attn.k', 'attn.v', 'attn.o', 'mlp.up', 'mlp.down']);
  throwsMessage(() => loraParameterShapes(config, parseLoraConfig({ rank: 2, targets: ['gate'] })), /lora\.targets: none of gate is a projection of this gpt2 model/);
  throwsMessage(() => buildFusedDecode(config, { weights: 'fp32', lora: null }), /fused decode graph supports the llama architecture only, not gpt2/);
  await withTempDir(async (dir) => {
    await rejectsMessage(exportPeftAdapter(dir, config, lora, initLoraParameters(config, lora, 1)), /PEFT adapters are not supported for architecture gpt2/);
  });
  assert.equal(initParameters(config, 1).size, parameterShapes(config).length);
});
