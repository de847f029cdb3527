/**
 * `troupe models inspect` end to end: the real CLI in a child process on the PyTorch-made Hugging
 * Face fixture folders and on a Troupe checkpoint with its character tokenizer. The greedy tokens it
 * prints are checked against an independent full forward pass of the same weights (each generated
 * token is the argmax after the tokens before it).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { Graph } from '../../server/compiler/ir.ts';
import { emitOnnx } from '../../server/compiler/onnx-emit.ts';
import { causalBias } from '../../server/models/attention-bias.ts';
import { saveCheckpoint } from '../../server/models/checkpoint.ts';
import { defaultModelConfig } from '../../server/models/default-model.ts';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../server/models/hf-checkpoint.ts';
import { hfConfigToModelConfig } from '../../server/models/hf-names.ts';
import { HfTokenizer } from '../../server/models/hf-tokenizer.ts';
import { packagedTokenizerPath } from '../../server/models/packaged-tokenizers.ts';
import { initParameters } from '../../server/models/init.ts';
import { parameterShapes, type ModelConfig } from '../../server/models/model-config.ts';
import { defaultTokenizer, saveTokenizer } from '../../server/models/tokenizer.ts';
import { fixturePath } from '../../server/models/torch-fixture.ts';
import { declareModelInputs, forward } from '../../server/models/transformer-graph.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { f32, i64 } from '../../server/runtime/tensor.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));
const troupe = (args: readonly string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

const reportSchema = z.looseObject({
  format: z.enum(['troupe', 'hugging-face']),
  modelType: z.string().nullable(),
  parameters: z.int(),
  storedDtypes: z.record(z.string(), z.int()),
  tokenizerFiles: z.array(z.string()),
  chatTemplate: z.boolean(),
  generation: z.object({ promptIds: z.array(z.int()), tokens: z.array(z.int()), text: z.string().nullable(), finish: z.string() }).nullable(),
});

let engine: Engine;
let ws = '';
before(async () => {
  engine = await Engine.start({ log: () => {} });
  ws = mkdtempSync(join(tmpdir(), 'troupe-inspect-'));
});
after(async () => {
  await engine.close();
  rmSync(ws, { recursive: true, force: true });
});

/** Asserts that every generated token is the argmax of a full forward over the tokens before it. */
async function assertGreedy(config: ModelConfig, weights: Map<string, Float32Array>, promptIds: number[], tokens: number[], id: string): Promise<void> {
  const seq = [...promptIds, ...tokens];
  const T = seq.length;
  const b = new Graph();
  const m = declareModelInputs(b, config, 'float32', null);
  const ids = b.input('input_ids', 'int64', [1, T]);
  const positions = b.input('position_ids', 'int64', [1, T]);
  const bias = b.input('attention_bias', 'float32', [1, T, T]);
  const { logits } = forward(b, config, m, { ids, positions, bias });
  await engine.createSession(id, emitOnnx([['logits', logits]], { name: id }));
  const shapes = new Map(parameterShapes(config));
  const feeds = Object.fromEntries([...weights].map(([n, d]) => [n, f32(shapes.get(n)!, d.slice())]));
  const out = await engine.run(id, {
    ...feeds, input_ids: i64([1, T], seq), position_ids: i64([1, T], seq.map((_, i) => i)), attention_bias: f32([1, T, T], causalBias(new Float32Array(T).fill(1), 1, T)),
  }, { logits: 'return' });
  const V = config.vocabSize;
  const data = out['logits']!.data as Float32Array;
  tokens.forEach((tok, j) => {
    const row = data.subarray((promptIds.length - 1 + j) * V, (promptIds.length + j) * V);
    let argmax = 0;
    for (let v = 1; v < V; v++) if (row[v]! > row[argmax]!) argmax = v;
    assert.equal(tok, argmax, `generated token ${j}`);
  });
}

for (const folder of ['qwen2-bf16', 'qwen3-bf16-sharded', 'llama-f32', 'gpt2-f32']) {
  test(`inspects and generates from the Hugging Face folder ${folder}`, async () => {
    const dir = fixturePath(`hf/${folder}`);
    const r = troupe(['models', 'inspect', dir, '--prompt-ids', '5,9,2', '--max-new-tokens', '6', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const report = reportSchema.parse(JSON.parse(r.stdout));
    const ck = await loadHfCheckpoint(dir);
    assert.equal(report.format, 'hugging-face');
    assert.equal(report.modelType, folder.split('-')[0]);
    assert.equal(report.parameters, [...ck.params.values()].reduce((n, d) => n + d.length, 0));
    assert.deepEqual(report.storedDtypes, ck.storedDtypes);
    assert.deepEqual(report.tokenizerFiles, []);
    assert.equal(report.generation!.tokens.length, 6);
    await assertGreedy(ck.config, ck.params, report.generation!.promptIds, report.generation!.tokens, `greedy-${folder}`);

    const text = troupe(['models', 'inspect', dir, '--no-generate']);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^format +Hugging Face, model_type ${folder.split('-')[0]}`, 'm'));
    assert.match(text.stdout, /^chat template +no$/m);
    if (folder.startsWith('gpt2')) assert.match(text.stdout, /MLP 64 \(GELU tanh\), vocab 48, tied embeddings, LayerNorm, learned positions 64, context 64/);
  });
}

test('a Troupe checkpoint generates text through its character tokenizer', async () => {
  const dir = join(ws, 'ck');
  const weights = initParameters(defaultModelConfig, 3, { std: 0.2 });
  await saveCheckpoint(dir, defaultModelConfig, weights);
  await saveTokenizer(dir, defaultTokenizer);
  const r = troupe(['models', 'inspect', dir, '--prompt', 'ab', '--max-new-tokens', '5', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const report = reportSchema.parse(JSON.parse(r.stdout));
  assert.equal(report.format, 'troupe');
  assert.deepEqual(report.generation!.promptIds, [...defaultTokenizer.encodePrompt([{ role: 'user', text: 'ab' }])]);
  const gen = report.generation!;
  const stopped = gen.finish === 'stop';
  assert.equal(gen.text, defaultTokenizer.decode(gen.tokens, { specials: 'skip' }));
  await assertGreedy(defaultModelConfig, weights, gen.promptIds, gen.tokens, 'greedy-troupe');
  assert.ok(stopped ? gen.tokens.at(-1) === defaultTokenizer.stopTokenId : gen.tokens.length === 5);
});

test('a Qwen3-vocabulary folder with the real Qwen3 tokenizer: the prompt goes through its chat template', async () => {
  // Real vocabulary (151936 rows), toy width, so the packaged tokenizer's ids all have rows.
  const dir = join(ws, 'qwen3-real-vocab');
  const config = hfConfigToModelConfig({
    model_type: 'qwen3', vocab_size: 151936, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1,
    head_dim: 8, intermediate_size: 32, tie_word_embeddings: true, max_position_embeddings: 40960, rope_theta: 1000000,
  });
  const weights = initParameters(config, 5, { std: 0.5 });
  await saveHfCheckpoint(dir, config, weights, { modelType: 'qwen3', sourceConfig: { eos_token_id: 151645 } });
  await copyFile(packagedTokenizerPath('qwen3', 'tokenizer.json'), join(dir, 'tokenizer.json'));
  await copyFile(packagedTokenizerPath('qwen3', 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  const r = troupe(['models', 'inspect', dir, '--prompt', 'Hi there', '--max-new-tokens', '4', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const report = reportSchema.parse(JSON.parse(r.stdout));
  assert.equal(report.chatTemplate, true);
  assert.deepEqual(report.tokenizerFiles, ['tokenizer.json', 'tokenizer_config.json']);
  const tok = await HfTokenizer.load(dir);
  const gen = report.generation!;
  assert.deepEqual(gen.promptIds, [...tok.encodePrompt([{ role: 'user', text: 'Hi there' }])]);
  assert.match(tok.decode(gen.promptIds), /<\|im_start\|>user\nHi there<\|im_end\|>\n<\|im_start\|>assistant\n/);
  assert.equal(gen.text, tok.decode(gen.tokens, { specials: 'skip' }));
  await assertGreedy(config, weights, gen.promptIds, gen.tokens, 'greedy-qwen3-vocab');
});

test('bad folders and arguments are named', () => {
  const missing = troupe(['models', 'inspect', join(ws, 'nope')]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /nope: no such model folder/);
  const bad = troupe(['models', 'inspect', fixturePath('hf/llama-f32'), '--prompt-ids', '1,999']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--prompt-ids: '999' is not a token id below the vocabulary size 48/);
  const text = troupe(['models', 'inspect', fixturePath('hf/llama-f32'), '--prompt', 'hi']);
  assert.equal(text.status, 1);
  assert.match(text.stderr, /no tokenizer in this folder \(files: none\); give the prompt as --prompt-ids/);
  const sub = troupe(['models', 'list']);
  assert.equal(sub.status, 2);
  assert.match(sub.stderr, /unknown subcommand 'list' \(inspect\)/);
});
