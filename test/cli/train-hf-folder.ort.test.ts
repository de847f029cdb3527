/**
 * Training on a Hugging Face model folder, end to end through the real CLI in child processes: a
 * toy-width model with Qwen3's real vocabulary and tokenizer (`writeQwen3VocabModel`), the
 * flagship Plan-Path team with chat prompts and a LoRA adapter per agent, one AT-GRPO step through
 * the real trainer into the real SQLite store; the untrained `troupe eval` of the same config; and
 * the PEFT export, whose adapters name the source folder as their base.
 *
 * Random weights do not answer in the `#### [...]` format, so every act is a parse error and every
 * group has zero variance; the entropy bonus still gives the adapters a gradient, which is how the
 * test sees that the PPO update ran over 151936-wide logit rows.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { HfTokenizer } from '../../server/models/hf-tokenizer.ts';
import { importPeftAdapter } from '../../server/models/lora.ts';
import type { ModelConfig } from '../../server/models/model-config.ts';
import { openRunStore } from '../../server/store/index.ts';
import { QWEN3_VOCAB_ROWS, writeQwen3VocabModel } from '../fixtures/qwen3-vocab-model.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));
/** `<|im_start|>`: every Qwen chat prompt opens with it. */
const IM_START = 151644;

let ws = '';
let modelDir = '';
let modelConfig: ModelConfig;
let tok: HfTokenizer;

const experiment = {
  name: 'plan-path L2 on a Qwen3-vocabulary toy model',
  seed: 1,
  env: { name: 'plan-path', promptStyle: 'chat', options: { size: 3, maxTurns: 1, variant: 'team' } },
  specialization: 'L2',
  // Relative to the config file, as a user's config points at models/ in the workspace.
  models: { base: { checkpoint: '../models/qwen3-toy', maxSequenceLength: 1024 } },
  policies: { 'tool-lora': { model: 'base', lora: { rank: 4 } }, 'plan-lora': { model: 'base', lora: { rank: 4 } } },
  router: { tool: 'tool-lora', plan: 'plan-lora' },
  algorithm: { name: 'at-grpo', branches: 2, envsPerStep: 2, maxNewTokens: 6, temperature: 1, entropyCoef: 0.05, microBatch: 4 },
  warmStart: { enabled: false },
  training: { steps: 1, validateEvery: 1, validationEpisodes: 2, checkpointEvery: 1 },
  engine: { executionProvider: 'cpu', threads: 2 },
};

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-hf-train-'));
  modelDir = join(ws, 'models', 'qwen3-toy');
  modelConfig = await writeQwen3VocabModel(modelDir);
  tok = await HfTokenizer.load(modelDir);
  mkdirSync(join(ws, 'configs'));
  writeFileSync(join(ws, 'configs', 'toy.json'), JSON.stringify(experiment));
});
after(() => rmSync(ws, { recursive: true, force: true }));

function troupe(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [cli, ...args], { cwd: ws, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

test('one AT-GRPO step on a Hugging Face folder: chat prompts through its template, rows in the store', { timeout: 300_000 }, async () => {
  const r = await troupe(['train', 'configs/toy.json', '--out', 'run-a']);
  assert.equal(r.code, 0, `train failed:\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /^step 1\/1 /m);
  const runId = z.object({ runId: z.string() }).parse(JSON.parse(readFileSync(join(ws, 'run-a', 'run.json'), 'utf8'))).runId;

  const store = openRunStore(join(ws, '.troupe', 'troupe.db'));
  try {
    assert.equal(store.getRun(runId)!.state, 'done');
    assert.deepEqual(store.listSteps(runId).map((s) => s.step), [0, 1]);
    const trajectories = store.listTrajectories({ runId, step: 1, phase: 'train' });
    assert.equal(trajectories.length, experiment.algorithm.envsPerStep);
    const unused = new Set(tok.unusedIds(modelConfig.vocabSize));
    let turns = 0;
    for (const summary of trajectories) {
      for (const turn of store.getTrajectory(summary.id)!.turns) {
        for (const t of [turn, ...turn.siblings]) {
          turns++;
          // The prompt is the folder's chat template around the chat prompt, thinking off.
          assert.equal(t.promptTokens[0], IM_START);
          const prompt = tok.decode(t.promptTokens);
          assert.match(prompt, new RegExp(`^<\\|im_start\\|>user\\nYou are the ${t.agentId} agent[^]*<\\|im_start\\|>assistant\\n<think>\\n\\n</think>\\n\\n$`));
          assert.ok(t.responseTokens.length >= 1 && t.responseTokens.length <= experiment.algorithm.maxNewTokens);
          for (const id of t.responseTokens) assert.ok(id >= 0 && id < QWEN3_VOCAB_ROWS && !unused.has(id), `sampled id ${id}`);
          assert.equal(t.responseText, tok.decode(t.responseTokens, { specials: 'skip' }));
          assert.equal(t.logprobs.length, t.responseTokens.length);
        }
      }
    }
    // Two agents act once each (maxTurns 1), with K = 2 branches, in each task.
    assert.equal(turns, experiment.algorithm.envsPerStep * 2 * experiment.algorithm.branches);
  } finally {
    store.close();
  }

  // The entropy bonus moved every adapter off B = 0: the PPO step ran on the real vocabulary.
  const e = await troupe(['export', 'run-a', '--out', 'exported']);
  assert.equal(e.code, 0, `export failed:\n${e.stdout}\n${e.stderr}`);
  for (const policy of ['tool-lora', 'plan-lora']) {
    const dir = join(ws, 'exported', policy);
    const adapterConfig = z.looseObject({ base_model_name_or_path: z.string(), peft_type: z.string(), target_modules: z.array(z.string()) }).parse(JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8')));
    // No warm start: the adapter was trained on the source folder itself, which it names.
    assert.equal(adapterConfig.base_model_name_or_path, modelDir);
    assert.equal(adapterConfig.peft_type, 'LORA');
    assert.ok(adapterConfig.target_modules.includes('q_proj'), JSON.stringify(adapterConfig.target_modules));
    const adapter = await importPeftAdapter(dir, modelConfig);
    const moved = [...adapter.params].filter(([name, d]) => name.endsWith('lora_B') && d.some((x) => x !== 0));
    assert.ok(moved.length > 0, `${policy}: every lora_B is still zero`);
  }
  // The base is exported as a Hugging Face folder with the source's tokenizer.
  assert.ok(existsSync(join(ws, 'exported', 'base.model', 'tokenizer.json')));
  assert.ok(existsSync(join(ws, 'exported', 'base.model', 'model.safetensors')));
});

test('a warm start on the folder fine-tunes it on chat-format solver answers; adapters then name the exported base', { timeout: 300_000 }, async () => {
  // The chat environment's solver answers are chat-format texts (the planner's `#### [...]` line, the tool's program), so demonstrations suit a chat model.
  const warm = { ...experiment, warmStart: { enabled: true, demonstrations: 4, steps: 2, batchSize: 2, lr: 1e-3 }, training: { ...experiment.training, validationEpisodes: 1 } };
  writeFileSync(join(ws, 'configs', 'warm.json'), JSON.stringify(warm));
  const r = await troupe(['train', 'configs/warm.json', '--out', 'run-w']);
  assert.equal(r.code, 0, `train failed:\n${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout + r.stderr, /warm start of 'base': \d+ demonstrations from 4 solver episodes, 2 steps of 2/);
  assert.match(r.stdout + r.stderr, /warm start 2\/2 {2}loss \d+\.\d{4}/);
  const e = await troupe(['export', 'run-w', '--out', 'exported-w']);
  assert.equal(e.code, 0, `export failed:\n${e.stdout}\n${e.stderr}`);
  const base = join(ws, 'exported-w', 'base.model');
  const adapterConfig = z.looseObject({ base_model_name_or_path: z.string() }).parse(JSON.parse(readFileSync(join(ws, 'exported-w', 'plan-lora', 'adapter_config.json'), 'utf8')));
  assert.equal(adapterConfig.base_model_name_or_path, base);
  assert.ok(existsSync(join(base, 'tokenizer.json')) && existsSync(join(base, 'tokenizer_config.json')));
});

test('troupe eval on the config plays the pretrained folder untrained', { timeout: 120_000 }, async () => {
  const r = await troupe(['eval', 'configs/toy.json', '--episodes', '2', '--json']);
  assert.equal(r.code, 0, `eval failed:\n${r.stdout}\n${r.stderr}`);
  const report = z
    .object({ checkpoint: z.literal('untrained'), episodes: z.literal(2), success: z.number(), perAgent: z.record(z.string(), z.object({ acts: z.int().positive(), parseFailureRate: z.number() }).loose()) })
    .loose()
    .parse(JSON.parse(r.stdout));
  assert.deepEqual(Object.keys(report.perAgent).sort(), ['plan', 'tool']);
  // Random weights do not write a `#### [...]` line: every act is a parse failure, none a crash.
  assert.equal(report.success, 0);
  for (const a of Object.values(report.perAgent)) assert.equal(a.parseFailureRate, 1);
});
