/**
 * Describing model folders from their small files and safetensors headers, and reading the
 * Hugging Face identity export needs.
 */
import assert from 'node:assert/strict';
import { copyFile, cp, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { saveCheckpoint } from './checkpoint.ts';
import { defaultModelConfig } from './default-model.ts';
import { loadHfCheckpoint } from './hf-checkpoint.ts';
import { initParameters } from './init.ts';
import { copyHfTokenizerFiles, describeModelFolder, readHfSource, readModelFolderConfig } from './model-folder.ts';
import { packagedTokenizerPath } from './packaged-tokenizers.ts';
import { rejectsMessage, withTempDir } from './test-util.ts';
import { fixturePath } from './torch-fixture.ts';

test('a Hugging Face folder is described from headers: dtypes, files, sizes, tokenizer and template', async () => {
  for (const folder of ['qwen2-f16', 'qwen3-bf16-sharded', 'llama-f32', 'gpt2-f32', 'gpt2-bf16']) {
    const dir = fixturePath(`hf/${folder}`);
    const info = await describeModelFolder(dir);
    const loaded = await loadHfCheckpoint(dir);
    assert.equal(info.format, 'hugging-face');
    assert.deepEqual(info.config, loaded.config);
    assert.deepEqual(info.storedDtypes, loaded.storedDtypes, folder);
    assert.deepEqual(info.weightFiles.map((w) => join(dir, w.file)), loaded.files);
    assert.deepEqual(info.tokenizerFiles, []);
    assert.equal(info.chatTemplate, false);
  }
  await withTempDir(async (dir) => {
    await cp(fixturePath('hf/qwen2-bf16'), dir, { recursive: true });
    await copyFile(packagedTokenizerPath('qwen3', 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ bos_token_id: 151643, eos_token_id: [151645, 151643] }));
    const info = await describeModelFolder(dir);
    assert.equal(info.chatTemplate, true);
    assert.deepEqual(info.eosTokenIds, [151645, 151643]);
    assert.equal(info.bosTokenId, 151643);
    assert.deepEqual(info.tokenizerFiles, ['tokenizer_config.json', 'generation_config.json']);

    const out = join(dir, 'copy');
    await cp(fixturePath('hf/llama-f32'), out, { recursive: true });
    assert.deepEqual(await copyHfTokenizerFiles(dir, out), ['tokenizer_config.json', 'generation_config.json']);
    assert.deepEqual((await readdir(out)).sort(), ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer_config.json']);
  });
});

test('readHfSource: the model type and config of a Hugging Face folder, null for a Troupe checkpoint', async () => {
  const src = await readHfSource(fixturePath('hf/qwen3-f32'));
  assert.equal(src?.modelType, 'qwen3');
  assert.equal(src?.config['head_dim'], 8);
  assert.equal(src?.nameOrPath, null);
  await withTempDir(async (dir) => {
    await saveCheckpoint(dir, defaultModelConfig, initParameters(defaultModelConfig, 1));
    assert.equal(await readHfSource(dir), null);
    assert.equal((await describeModelFolder(dir)).format, 'troupe');
    assert.deepEqual(await readModelFolderConfig(dir), { format: 'troupe', config: defaultModelConfig, modelType: null });
  });
});

test('readModelFolderConfig caps a Hugging Face context at 4096 unless told otherwise', async () => {
  await withTempDir(async (dir) => {
    await cp(fixturePath('hf/llama-f32'), dir, { recursive: true });
    const config = JSON.parse(JSON.stringify({ ...(await readHfSource(dir))!.config, max_position_embeddings: 131072 })) as Record<string, unknown>;
    await writeFile(join(dir, 'config.json'), JSON.stringify(config));
    assert.equal((await readModelFolderConfig(dir)).config.maxSequenceLength, 4096);
    assert.equal((await readModelFolderConfig(dir, { maxSequenceLength: 300 })).config.maxSequenceLength, 300);
    await writeFile(join(dir, 'config.json'), JSON.stringify({ ...config, max_position_embeddings: 1024 }));
    assert.equal((await readModelFolderConfig(dir)).config.maxSequenceLength, 1024);
    await rejectsMessage(readModelFolderConfig(join(dir, 'model.safetensors')), /model\.safetensors is a file, not a model folder/);
  });
});
