/**
 * Model folders in experiment configs: a missing folder, a folder without config.json and a bad
 * Hugging Face config are config errors at `models.<id>.checkpoint` that say what is wrong; a
 * Troupe checkpoint resolves to its config; a Hugging Face folder brings its own tokenizer (and
 * one without a tokenizer, or with a vocabulary its embedding cannot hold, is refused).
 */
import assert from 'node:assert/strict';
import { copyFile, cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { saveCheckpoint } from '../models/checkpoint.ts';
import { defaultModelConfig } from '../models/default-model.ts';
import { HfTokenizer } from '../models/hf-tokenizer.ts';
import { initParameters } from '../models/init.ts';
import { packagedTokenizerPath } from '../models/packaged-tokenizers.ts';
import { fixturePath } from '../models/torch-fixture.ts';
import { ConfigError } from '../protocol/config-errors.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { QWEN3_IM_END, writeQwen3VocabModel } from '../../test/fixtures/qwen3-vocab-model.ts';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { loadExperiment, resolveExperiment } from './resolve-experiment.ts';

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-resolve-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('a config file that is not JSON is a ConfigError naming the file, the line and the column, never quoting the text', async () => {
  const path = join(dir, 'broken.json');
  await writeFile(path, '{\n  "name": "x",\n  "seed": 1\n  "token": "s3cr3t"\n}\n');
  await assert.rejects(loadExperiment(path), (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.source, path);
    assert.ok(e.message.includes(`${path}: (root): not valid JSON: expected ',' or '}' after property value at line 4, column 3`), e.message);
    assert.doesNotMatch(e.message, /s3cr3t|token/);
    return true;
  });
});

/** The tiny experiment with its one model replaced by `source`. */
function withModel(source: Record<string, unknown>, env: Record<string, unknown> = tinyConfig.env) {
  const policies = Object.fromEntries(Object.entries(tinyConfig.policies).map(([id, p]) => [id, { ...p, model: 'base' }]));
  return parseExperimentConfig({ ...tinyConfig, env, models: { base: source }, policies }, 'test config');
}

async function configIssue(source: Record<string, unknown>, env?: Record<string, unknown>): Promise<{ path: string; message: string }> {
  try {
    await resolveExperiment(withModel(source, env), join(dir, 'experiment.json'));
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.issues.length, 1);
    return { path: e.issues[0]!.path.join('.'), message: e.issues[0]!.message };
  }
  assert.fail('expected a config error');
}

test('a missing model folder is named, relative paths resolved against the config file', async () => {
  const r = await configIssue({ checkpoint: 'models/Qwen2.5-0.5B-Instruct' });
  assert.equal(r.path, 'models.base.checkpoint');
  assert.equal(r.message, `model folder ${join(dir, 'models/Qwen2.5-0.5B-Instruct')} does not exist (download the model there, or point the config at the folder that holds its config.json and model.safetensors)`);
});

test('a folder without config.json, and a Hugging Face config.json with a bad field, are named', async () => {
  assert.match((await configIssue({ checkpoint: dir })).message, /^no checkpoint at .* \(config\.json missing\)$/);
  const r = await configIssue({ checkpoint: fixturePath('hf/qwen3-f32') });
  // The tiny fixture is a valid qwen3 model: what stops it is the missing tokenizer, named as such.
  assert.equal(r.message, `${fixturePath('hf/qwen3-f32')}: no tokenizer.json (a Hugging Face tokenizer needs one)`);
  const bad = join(dir, 'bad-hf');
  await cp(fixturePath('hf/llama-f32'), bad, { recursive: true });
  const config = JSON.parse(await readFile(join(bad, 'config.json'), 'utf8')) as Record<string, unknown>;
  await writeFile(join(bad, 'config.json'), JSON.stringify({ ...config, model_type: 'gemma2' }));
  assert.equal((await configIssue({ checkpoint: bad })).message, `invalid ${join(bad, 'config.json')}:\n  model_type: 'gemma2' is not supported (supported: qwen2, qwen3, llama, gpt2)`);
});

test('a gpt2 model trains LoRA without the gate it lacks; fused or quantized decoding and engine servers are config errors', async () => {
  const gpt2 = { config: { ...defaultModelConfig, numKvHeads: 4, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 512 } };
  const policies = Object.fromEntries(Object.entries(tinyConfig.policies).map(([id, p]) => [id, { ...p, model: 'base', lora: { rank: 4 } }]));
  const resolve = (extra: Record<string, unknown>) =>
    resolveExperiment(parseExperimentConfig({ ...tinyConfig, models: { base: gpt2 }, policies, ...extra }, 'test config'), join(dir, 'experiment.json'));
  const exp = await resolve({});
  for (const p of exp.policies.values()) assert.deepEqual(p.lora?.targets, ['q', 'k', 'v', 'o', 'up', 'down']);
  const issue = async (extra: Record<string, unknown>): Promise<string> => {
    try {
      await resolve(extra);
    } catch (e) {
      assert.ok(e instanceof ConfigError, String(e));
      return `${e.issues[0]!.path.join('.')}: ${e.issues[0]!.message}`;
    }
    return assert.fail('expected a config error');
  };
  assert.match(await issue({ rollout: { fusedDecode: true } }), /^rollout\.fusedDecode: model "base" is a gpt2 model, which decodes only with the plain fp32 graph/);
  assert.match(await issue({ rollout: { weights: 'int8' } }), /^rollout\.weights: model "base" is a gpt2 model/);
  assert.match(await issue({ rollout: { backend: { kind: 'vllm', urls: ['http://127.0.0.1:8000'] } }, warmStart: { ...tinyConfig.warmStart, enabled: false } }), /^rollout\.backend\.kind: model "base" is a gpt2 model: vLLM's GPT-2 model takes no LoRA adapters, and vllm fleet rollouts are supported for Llama-shaped models/);
  const gateOnly = Object.fromEntries(Object.keys(tinyConfig.policies).map((id) => [id, { model: 'base', lora: { rank: 4, targets: ['gate'] } }]));
  assert.match(await issue({ policies: gateOnly }), /^policies\.[a-z-]+\.lora\.targets: none of gate is a projection of this gpt2 model \(it has q, k, v, o, up, down\)$/);
});

test('a Troupe checkpoint resolves to its config, with maxSequenceLength applied', async () => {
  const ck = join(dir, 'ck');
  await saveCheckpoint(ck, defaultModelConfig, initParameters(defaultModelConfig, 1));
  const exp = await resolveExperiment(withModel({ checkpoint: ck, maxSequenceLength: 256 }), join(dir, 'experiment.json'));
  assert.deepEqual(exp.models.get('base'), { config: { ...defaultModelConfig, maxSequenceLength: 256 }, source: { kind: 'checkpoint', path: ck } });
});

test("env.promptStyle: terse (default) makes the environment itself; chat wraps it in its chat prompts", async () => {
  const terse = await resolveExperiment(parseExperimentConfig(tinyConfig, 'test config'), join(dir, 'experiment.json'));
  const plain = terse.env.make(0);
  assert.match(plain.observe(plain.currentAgent()), /^plan-path /);
  // A model with room for the chat prompts (the embedded model's 512 positions are not: below).
  const roomy = { config: { ...defaultModelConfig, maxSequenceLength: 4096 } };
  const chat = await resolveExperiment(withModel(roomy, { ...tinyConfig.env, promptStyle: 'chat' }), join(dir, 'experiment.json'));
  const env = chat.env.make(0);
  assert.match(env.observe(env.currentAgent()), /^You are the tool agent of a two-agent team[^]*"\*\*Actions List\*\*: <list>"\.$/);
  assert.ok(env.solution('tool').startsWith('**Code:**\n```python\n'));
  // With chat prompts the puzzle's tool writes a program, so the run needs the sandbox; terse does not.
  assert.equal(chat.env.runsCode, true);
  assert.equal(terse.env.runsCode, false);
  assert.throws(() => parseExperimentConfig({ ...tinyConfig, env: { ...tinyConfig.env, promptStyle: 'verbose' } }, 'test config'), /env\.promptStyle/);
});

test('chat prompts that do not fit the model\'s context are a config error on env.promptStyle', async () => {
  const r = await configIssue({ preset: 'default' }, { ...tinyConfig.env, promptStyle: 'chat' });
  assert.equal(r.path, 'env.promptStyle');
  assert.match(r.message, /^agent "tool"'s chat prompts run to \d{4} tokens with the character tokenizer; with algorithm.maxNewTokens 12 that is past model "base"'s context of 512 tokens\. Chat prompts are for pretrained instruction-tuned models/);
});

test('a Hugging Face folder resolves with its own tokenizer: chat template, stop and padding ids, padded rows', async () => {
  const q = join(dir, 'qwen3-vocab');
  await writeQwen3VocabModel(q);
  const exp = await resolveExperiment(withModel({ checkpoint: q }, { ...tinyConfig.env, promptStyle: 'chat' }), join(dir, 'experiment.json'));
  assert.ok(exp.tokenizer instanceof HfTokenizer);
  assert.deepEqual(exp.tokenizer.stopTokenIds, [QWEN3_IM_END]);
  assert.equal(exp.tokenizer.unusedIds(exp.models.get('base')!.config.vocabSize).length, 151936 - 151669);
  // Thinking off by default: Qwen3's template then closes an empty think block itself.
  const env = exp.env.make(0);
  const prompt = exp.tokenizer.decode(exp.tokenizer.encodePrompt([{ role: 'user', text: env.observe(env.currentAgent()) }]));
  assert.match(prompt, /^<\|im_start\|>user\nYou are the tool agent[^]*<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/);

  // models.<id>.enableThinking: true leaves the think block to the model.
  const thinking = await resolveExperiment(withModel({ checkpoint: q, enableThinking: true }, { ...tinyConfig.env, promptStyle: 'chat' }), join(dir, 'experiment.json'));
  const open = thinking.tokenizer.decode(thinking.tokenizer.encodePrompt([{ role: 'user', text: env.observe(env.currentAgent()) }]));
  assert.match(open, /<\|im_start\|>assistant\n$/);
  assert.throws(() => withModel({ preset: 'default', enableThinking: true }), /models\.base\.enableThinking: enableThinking applies to a Hugging Face checkpoint's chat template/);

  // The prompt-fit check measures with the folder's tokenizer: a few hundred tokens, not thousands.
  const tight = await configIssue({ checkpoint: q, maxSequenceLength: 200 }, { ...tinyConfig.env, promptStyle: 'chat' });
  assert.equal(tight.path, 'env.promptStyle');
  assert.match(tight.message, /^agent "(tool|plan)"'s chat prompts run to [1-9]\d{2} tokens with the model's tokenizer and chat template; with algorithm.maxNewTokens 12 that is past model "base"'s context of 200 tokens\. Raise models.base.maxSequenceLength or lower algorithm.maxNewTokens$/);
});

test('models with different tokenizers, and a vocabulary larger than the embedding, are config errors', async () => {
  const q = join(dir, 'qwen3-vocab-2');
  await writeQwen3VocabModel(q);
  const policies = { 'tool-lora': { model: 'pretrained' }, 'plan-lora': { model: 'embedded' } };
  try {
    await resolveExperiment(parseExperimentConfig({ ...tinyConfig, specialization: 'L3', models: { pretrained: { checkpoint: q }, embedded: { preset: 'default' } }, policies }, 'test config'), join(dir, 'experiment.json'));
    assert.fail('expected a config error');
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    assert.deepEqual(e.issues.map((i) => i.path.join('.')), ['models.embedded']);
    assert.equal(e.issues[0]!.message, `model "embedded" uses the character tokenizer and model "pretrained" the tokenizer of ${q}; an experiment's models must share one tokenizer`);
  }
  // The tiny qwen3 fixture has 64 embedding rows; Qwen3's tokenizer has 151669 ids.
  const small = join(dir, 'small-vocab');
  await cp(fixturePath('hf/qwen3-f32'), small, { recursive: true });
  await copyFile(packagedTokenizerPath('qwen3', 'tokenizer.json'), join(small, 'tokenizer.json'));
  await copyFile(packagedTokenizerPath('qwen3', 'tokenizer_config.json'), join(small, 'tokenizer_config.json'));
  const r = await configIssue({ checkpoint: small });
  assert.equal(r.path, 'models.base.checkpoint');
  assert.match(r.message, /the model's vocabulary \(\d+\) is smaller than the tokenizer's \(151669 ids\): token ids \d+\.\. have no embedding row$/);
});
