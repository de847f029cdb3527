/**
 * `troupe models inspect` end to end: the real CLI in a child process on the PyTorch-made Hugging
 * Face fixture folders and on a Troupe checkpoint with its character tokenizer. The greedy tokens it
 * prints are checked against an independent full forward pass of the same weights (each generated
 * token is the argmax after the tokens before it).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
import { loadHfCheckpoint } from '../../server/models/hf-checkpoint.ts';
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
    const argmax = row.indexOf(Math.max(...row));
    assert.equal(tok, argmax, `generated token ${j}`);
  });
}

for (const folder of ['qwen2-bf16', 'qwen3-bf16-sharded', 'llama-f32']) {
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

test('bad folders and arguments are named', () => {
  const missing = troupe(['models', 'inspect', join(ws, 'nope')]);
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /nope: no such model folder/);
  const bad = troupe(['models', 'inspect', fixturePath('hf/llama-f32'), '--prompt-ids', '1,999']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--prompt-ids: '999' is not a token id below the vocabulary size 48/);
  const text = troupe(['models', 'inspect', fixturePath('hf/llama-f32'), '--prompt', 'hi']);
  assert.equal(text.status, 1);
  assert.match(text.stderr, /no tokenizer Troupe can read here yet \(files: none\); give the prompt as --prompt-ids/);
  const sub = troupe(['models', 'list']);
  assert.equal(sub.status, 2);
  assert.match(sub.stderr, /unknown subcommand 'list' \(inspect\)/);
});
