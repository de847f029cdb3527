/**
 * Loading Hugging Face folders written here (our own writer, HF names): single and sharded files,
 * index checks, named errors. The PyTorch-made folders in fixtures/hf/ are tested in
 * hf-checkpoint.ort.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadCheckpoint } from './checkpoint.ts';
import { loadHfCheckpoint, saveHfCheckpoint } from './hf-checkpoint.ts';
import { hfConfigToModelConfig, modelConfigToHf, toHfName } from './hf-names.ts';
import { initParameters } from './init.ts';
import { parameterShapes } from './model-config.ts';
import type { ModelConfig } from './model-config.ts';
import { writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsInput } from './safetensors.ts';
import { bitsOf, escapeRe, rejectsMessage, withTempDir } from './test-util.ts';
import { fixturePath } from './torch-fixture.ts';

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
      /unexpected tensor 'model\.layers\.0\.self_attn\.q_norm\.weight' \(ours: 'layers\.0\.attn\.q_norm\.weight'\) \(shape \[4\]\)/);
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

test('loadCheckpoint reads a Hugging Face folder as well as our own', async () => {
  const dir = fixturePath('hf/qwen2-bf16');
  const hf = await loadHfCheckpoint(dir);
  const ck = await loadCheckpoint(dir);
  assert.deepEqual(ck.config, hf.config);
  for (const [n, d] of hf.params) assert.deepEqual(bitsOf(ck.params.get(n)!), bitsOf(d), n);
});

/** Copies a fixture folder to a temp folder so a test can damage it. */
async function damaged(fixture: string, dir: string): Promise<void> {
  await cp(fixturePath(fixture), dir, { recursive: true });
}

test('damaged folders: truncated and missing shards, unsupported dtypes, unknown architectures are named', async () => {
  await withTempDir(async (dir) => {
    await damaged('hf/qwen3-bf16-sharded', dir);
    const shard2 = join(dir, 'model-00002-of-00002.safetensors');
    const bytes = await readFile(shard2);
    await writeFile(shard2, bytes.subarray(0, bytes.byteLength - 10));
    await rejectsMessage(loadHfCheckpoint(dir), new RegExp(`^${escapeRe(shard2)}: tensor '[^']+': data_offsets \\[\\d+, \\d+\\] run past the \\d+-byte data region \\(truncated file or bad offsets\\)`));
    await rm(shard2);
    await rejectsMessage(loadHfCheckpoint(dir), /model\.safetensors\.index\.json: shard 'model-00002-of-00002\.safetensors' \(\d+ tensors, e\.g\. 'model\.[^']+'\) is missing from /);
  });
  await withTempDir(async (dir) => {
    await damaged('hf/llama-f32', dir);
    // A quantised checkpoint stores int8 weights: refused with the tensor and dtype named.
    const path = join(dir, 'model.safetensors');
    const header = JSON.stringify({ 'model.embed_tokens.weight': { dtype: 'I8', shape: [2, 2], data_offsets: [0, 4] } });
    const n = Buffer.alloc(8);
    n.writeUInt32LE(header.length, 0);
    await writeFile(path, Buffer.concat([n, Buffer.from(header), Buffer.alloc(4)]));
    await rejectsMessage(loadHfCheckpoint(dir), /model\.safetensors: tensor 'model\.embed_tokens\.weight': unknown or unsupported dtype 'I8' \(readable: F32, F16, BF16, F64\)/);
  });
  await withTempDir(async (dir) => {
    await damaged('hf/llama-f32', dir);
    const configPath = join(dir, 'config.json');
    const config = JSON.parse(await readFile(configPath, 'utf8')) as Record<string, unknown>;
    await writeFile(configPath, JSON.stringify({ ...config, model_type: 'mistral', architectures: ['MistralForCausalLM'] }));
    await rejectsMessage(loadHfCheckpoint(dir), new RegExp(`^invalid ${escapeRe(configPath)}:\\n  model_type: 'mistral' is not supported \\(supported: qwen2, qwen3, llama, gpt2\\)`));
    await writeFile(configPath, JSON.stringify({ ...config, num_key_value_heads: 2 }));
    await rejectsMessage(loadHfCheckpoint(dir), /tensor 'model\.layers\.0\.self_attn\.k_proj\.weight' \(ours: 'layers\.0\.attn\.k\.weight'\) has shape \[8, 16\], expected \[16, 16\]/);
  });
});

test('saveHfCheckpoint writes a folder that loads back to the same weights, keeping the source config fields', async () => {
  await withTempDir(async (dir) => {
    const src = fixturePath('hf/llama-bf16');
    const loaded = await loadHfCheckpoint(src, { maxSequenceLength: 64 });
    const sourceConfig = { ...(JSON.parse(await readFile(join(src, 'config.json'), 'utf8')) as Record<string, unknown>), _name_or_path: 'meta-llama/Llama-3.2-1B-Instruct', eos_token_id: [128001, 128009] };
    await saveHfCheckpoint(dir, loaded.config, loaded.params, { modelType: 'llama', sourceConfig, metadata: { run: 'r1' } });
    const back = await loadHfCheckpoint(dir);
    assert.deepEqual(back.storedDtypes, { F32: 5456 });
    for (const [n, d] of loaded.params) assert.deepEqual(bitsOf(back.params.get(n)!), bitsOf(d), n);
    const written = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(written['max_position_embeddings'], 512, 'the source context, not the capped one');
    assert.deepEqual(written, { ...modelConfigToHf(loaded.config, 'llama'), ...sourceConfig, torch_dtype: 'float32' });
    assert.deepEqual(back.config, { ...loaded.config, maxSequenceLength: 512 });

    await rejectsMessage(saveHfCheckpoint(join(dir, 'x'), loaded.config, loaded.params, { modelType: 'llama', sourceConfig: { ...sourceConfig, hidden_size: 32 } }),
      /the source config\.json describes a different model than the weights to save/);
    const missing = new Map(loaded.params);
    missing.delete('norm.weight');
    await rejectsMessage(saveHfCheckpoint(join(dir, 'y'), loaded.config, missing, { modelType: 'llama' }), /missing parameter 'norm\.weight'/);
  });
});
