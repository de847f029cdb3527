/**
 * Contract of the rollout backend with vLLM and SGLang, from their published schemas: a local
 * HTTP server answers the fixture bodies in `fixtures/engines/` (written from vLLM's and SGLang's
 * source, see its README) and records what the backend sends. Every field sent must be one the
 * server declares (Troupe's `troupe_*` extensions aside, which both ignore), and the answers of
 * either vLLM generation, SGLang's batch form and both error forms must read back right. A
 * warm-started base goes to SGLang by `/update_weights_from_disk` with its declared fields.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { after, before, test } from 'node:test';
import { writeQwen3VocabModel } from '../../test/fixtures/qwen3-vocab-model.ts';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { loadCheckpoint } from '../models/checkpoint.ts';
import { readHfSource } from '../models/model-folder.ts';
import { PEFT_CONFIG_FILE, PEFT_WEIGHTS_FILE } from '../models/lora.ts';
import type { Policy } from '../models/policy.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { sourceWeights } from '../runs/checkpoint-weights.ts';
import { Engine } from '../runtime/engine.ts';
import { EngineFleetError } from './engine-fleet.ts';
import { EngineRollout } from './engine-rollout.ts';
import type { ResolvedExperiment } from './experiment.ts';
import { createPolicies, routingContext } from './policies.ts';
import { resolveExperiment } from './resolve-experiment.ts';

const fixture = (name: string): unknown => JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'engines', name), 'utf8'));
const vllmFields = fixture('vllm-fields.json') as Record<string, string[]>;
const sglangFields = fixture('sglang-fields.json') as Record<string, string[]>;
const extensions = new Set(['troupe_row_offset', 'troupe_seed']);

interface Seen {
  path: string;
  method: string;
  body: Record<string, unknown>;
  auth: string | undefined;
}

let dir = '';
let engine: Engine;
let exp: ResolvedExperiment;
let policies: Map<string, Policy>;
let server: Server;
let url = '';
const seen: Seen[] = [];
/** What the fixture server answers each path with: status and body. */
let answers: Record<string, { status: number; body: unknown }> = {};

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-contract-'));
  exp = await resolveExperiment(parseExperimentConfig({ ...tinyConfig, warmStart: { enabled: false } }, 'tiny'), 'tiny');
  engine = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
  policies = await createPolicies(engine, exp, new Map([['base', await sourceWeights(exp.models.get('base')!)]]));
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      const received = Buffer.concat(chunks).toString('utf8');
      seen.push({ path, method: req.method ?? '', body: received === '' ? {} : (JSON.parse(received) as Record<string, unknown>), auth: req.headers.authorization });
      const a = answers[path] ?? (path.endsWith('load_lora_adapter') ? { status: 200, body: 'Success' } : { status: 404, body: { detail: 'Not Found' } });
      const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
      res.writeHead(a.status, { 'content-type': typeof a.body === 'string' ? 'text/plain' : 'application/json' });
      res.end(text);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env.TROUPE_CONTRACT_KEY = 'sk-contract';
});

after(async () => {
  delete process.env.TROUPE_CONTRACT_KEY;
  await new Promise<void>((ok) => server.close(() => ok()));
  for (const p of policies.values()) await p.dispose();
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

const assertDeclared = (body: Record<string, unknown>, declared: readonly string[], what: string) => {
  for (const k of Object.keys(body)) assert.ok(declared.includes(k) || extensions.has(k), `${what} has no field '${k}'`);
};

/** Two prompts, two rows each, as a tree node lays them out; the fixtures answer 2 × 2 choices. */
const p1 = Int32Array.from([1, 2, 3]);
const p2 = Int32Array.from([1, 4]);
const options = { maxNewTokens: 3, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 5, stopTokens: [7], padToken: 0 };
const want = {
  tokens: [[64, 65, 7], [66, 67, 68], [69, 7], [70, 71, 72]],
  logprobs: [[-0.25, -1.5, -0.125], [-2.0, -0.5, -0.75], [-0.0625, -3.0], [-1.0, -1.25, -1.75]],
  finish: ['stop', 'length', 'stop', 'length'],
};

async function generateWith(kind: 'vllm' | 'sglang', name: string) {
  const backend = new EngineRollout(exp, { kind, urls: [url], apiKeyEnv: 'TROUPE_CONTRACT_KEY', timeoutMs: 10_000, retries: 1 }, join(dir, name), () => {}, 'run/1');
  await backend.publish(1, policies);
  const policy = backend.context(routingContext(exp, policies)).route('tool').policy;
  return { backend, generate: () => policy.generate([p1, p1, p2, p2], options) };
}

function assertRead(got: Awaited<ReturnType<Policy['generate']>>): void {
  assert.deepEqual(got.tokens.map((t) => [...t]), want.tokens);
  assert.deepEqual(got.logprobs.map((l) => [...l]), want.logprobs);
  assert.deepEqual(got.finish, want.finish);
}

test('vLLM: load_lora_adapter and /v1/completions send only vLLM fields; token_ids and token_id:<id> answers read back', async () => {
  seen.length = 0;
  answers = { '/v1/completions': { status: 200, body: fixture('vllm-completion.json') } };
  const { backend, generate } = await generateWith('vllm', 'vllm');
  const loads = seen.filter((s) => s.path === '/v1/load_lora_adapter');
  assert.deepEqual(loads.map((s) => s.body.lora_name).sort(), ['plan-lora@run_1.v1', 'tool-lora@run_1.v1'], 'versioned names carrying the run id');
  for (const l of loads) {
    assertDeclared(l.body, vllmFields.LoadLoRAAdapterRequest!, 'LoadLoRAAdapterRequest');
    assert.equal(l.auth, 'Bearer sk-contract');
    assert.ok(existsSync(join(String(l.body.lora_path), PEFT_CONFIG_FILE)) && existsSync(join(String(l.body.lora_path), PEFT_WEIGHTS_FILE)));
  }
  assertRead(await generate());
  const c = seen.find((s) => s.path === '/v1/completions')!;
  assertDeclared(c.body, vllmFields.CompletionRequest!, 'CompletionRequest');
  assert.deepEqual(c.body.prompt, [[1, 2, 3], [1, 4]]);
  assert.equal(c.body.n, 2);
  assert.equal(c.body.model, 'tool-lora@run_1.v1');
  assert.equal(c.body.logprobs, 0);
  assert.equal(c.body.return_token_ids, true);
  assert.equal(c.body.return_tokens_as_token_ids, true);
  assert.equal(c.body.top_k, -1, 'vLLM turns top-k off with -1');
  assert.deepEqual(c.body.stop_token_ids, [7]);
  assert.equal(c.body.seed, 5);

  answers['/v1/completions'] = { status: 200, body: fixture('vllm-completion-old.json') };
  assertRead(await generate());

  // The next version loads, then the old one unloads with vLLM's fields.
  seen.length = 0;
  await backend.publish(2, policies);
  const unloads = seen.filter((s) => s.path === '/v1/unload_lora_adapter');
  // v2 is unloaded first in case a server still holds it (a resumed run), then v1 after v2 loaded.
  assert.deepEqual(unloads.map((s) => s.body.lora_name).sort(), ['plan-lora@run_1.v1', 'plan-lora@run_1.v2', 'tool-lora@run_1.v1', 'tool-lora@run_1.v2']);
  const order = seen.map((s) => `${s.path} ${String(s.body.lora_name)}`);
  assert.ok(order.indexOf('/v1/load_lora_adapter tool-lora@run_1.v2') < order.indexOf('/v1/unload_lora_adapter tool-lora@run_1.v1'), 'the new version loads before the old one unloads');
  for (const u of unloads) assertDeclared(u.body, vllmFields.UnloadLoRAAdapterRequest!, 'UnloadLoRAAdapterRequest');
  assert.ok(!existsSync(join(dir, 'vllm', 'tool-lora@v1')), 'the old version folder is removed');
});

test('vLLM errors: a 400 is thrown at once with its message; a null log-prob is refused; a 404 (old flat form) is retried, then named', async () => {
  answers = { '/v1/completions': { status: 400, body: fixture('vllm-error.json') } };
  const { generate } = await generateWith('vllm', 'vllm-errors');
  seen.length = 0;
  await assert.rejects(generate(), (e: unknown) => e instanceof EngineFleetError && /max_tokens must be at least 1/.test(e.message));
  assert.equal(seen.filter((s) => s.path === '/v1/completions').length, 1, 'a request the server refused is not retried');
  const nullLogprob = structuredClone(fixture('vllm-completion.json')) as { choices: Array<{ logprobs: { token_logprobs: Array<number | null> } }> };
  nullLogprob.choices[1]!.logprobs.token_logprobs[2] = null;
  answers['/v1/completions'] = { status: 200, body: nullLogprob };
  await assert.rejects(generate(), (e: unknown) => e instanceof EngineFleetError && /null or infinite log-prob/.test(e.message));
  answers['/v1/completions'] = { status: 404, body: fixture('vllm-error-old.json') };
  await assert.rejects(generate(), (e: unknown) => e instanceof EngineFleetError && /does not exist/.test(e.message));
});

test('SGLang: /load_lora_adapter and /generate send only SGLang fields, one sampling seed per row; the batch answer reads back', async () => {
  seen.length = 0;
  answers = { '/generate': { status: 200, body: fixture('sglang-generate.json') } };
  const { generate } = await generateWith('sglang', 'sglang');
  for (const l of seen.filter((s) => s.path === '/load_lora_adapter')) assertDeclared(l.body, sglangFields.LoadLoRAAdapterReqInput!, 'LoadLoRAAdapterReqInput');
  assertRead(await generate());
  const g = seen.find((s) => s.path === '/generate')!;
  assertDeclared(g.body, sglangFields.GenerateReqInput!, 'GenerateReqInput');
  assert.deepEqual(g.body.input_ids, [[1, 2, 3], [1, 2, 3], [1, 4], [1, 4]]);
  assert.deepEqual(g.body.lora_path, Array(4).fill('tool-lora@run_1.v1'));
  assert.equal(g.body.return_logprob, true);
  const params = g.body.sampling_params as Array<Record<string, unknown>>;
  assert.equal(params.length, 4);
  for (const p of params) {
    assertDeclared(p, sglangFields.SamplingParams!, 'SamplingParams');
    assert.equal(p.max_new_tokens, 3);
  }
  assert.equal(new Set(params.map((p) => p.sampling_seed)).size, 4, 'the K branches of a prompt sample from different seeds');
});

test('SGLang: a warm-started base goes by /update_weights_from_disk with SGLang\'s fields, after the version is read (/model_info, else /get_weight_version); a failure names the server\'s message; vLLM refuses', async () => {
  seen.length = 0;
  answers = {
    '/model_info': { status: 404, body: { detail: 'Not Found' } },
    '/get_weight_version': { status: 200, body: { weight_version: 'default' } },
    '/update_weights_from_disk': { status: 200, body: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } },
    '/generate': { status: 200, body: fixture('sglang-generate.json') },
  };
  const runDir = join(dir, 'warm-run');
  const backend = new EngineRollout(exp, { kind: 'sglang', urls: [url], apiKeyEnv: 'TROUPE_CONTRACT_KEY', timeoutMs: 10_000, retries: 1 }, join(runDir, 'engine-adapters'), () => {}, 'run/1');
  await backend.setBases(runDir, new Map([['base', await sourceWeights(exp.models.get('base')!)]]));
  await backend.publish(1, policies);
  assert.deepEqual(seen.slice(0, 3).map((s) => `${s.method} ${s.path}`), ['GET /model_info', 'GET /get_weight_version', 'POST /update_weights_from_disk'], 'the version is read, then the base sent, before the adapters');
  const u = seen[2]!;
  assertDeclared(u.body, sglangFields.UpdateWeightFromDiskReqInput!, 'UpdateWeightFromDiskReqInput');
  assert.equal(u.body.model_path, join(runDir, 'checkpoints', 'warmstart', 'base'), "the embedded model's base: the run's warm-start checkpoint");
  assert.match(String(u.body.weight_version), /^run_1\.base\.[0-9a-f]{16}$/);
  assert.equal(u.auth, 'Bearer sk-contract');
  assert.ok(seen.slice(3).some((s) => s.path === '/load_lora_adapter'));

  // A server that reports the version is sent nothing; one that refuses the folder fails the step with its message.
  seen.length = 0;
  answers['/model_info'] = { status: 200, body: { model_path: 'x', weight_version: u.body.weight_version } };
  await backend.publish(2, policies);
  assert.ok(!seen.some((s) => s.path === '/update_weights_from_disk'));
  // A /model_info without weight_version (SGLang before it had one there): /get_weight_version is asked.
  seen.length = 0;
  answers['/model_info'] = { status: 200, body: { model_path: 'x' } };
  answers['/get_weight_version'] = { status: 200, body: { weight_version: u.body.weight_version } };
  await backend.publish(3, policies);
  assert.deepEqual(seen.filter((s) => s.method === 'GET').map((s) => s.path), ['/model_info', '/get_weight_version']);
  assert.ok(!seen.some((s) => s.path === '/update_weights_from_disk'));
  answers['/model_info'] = { status: 200, body: { model_path: 'x', weight_version: 'default' } };
  answers['/update_weights_from_disk'] = { status: 400, body: { success: false, message: 'Failed to get weights iterator: no safetensors', num_paused_requests: 0 } };
  await assert.rejects(backend.publish(4, policies), (e: unknown) => e instanceof EngineFleetError && /update_weights_from_disk refused the request \(400\): Failed to get weights iterator/.test(e.message));

  const vllm = new EngineRollout(exp, { kind: 'vllm', urls: [url], timeoutMs: 10_000, retries: 1 }, join(dir, 'vllm-warm'), () => {}, 'run/1');
  await assert.rejects(vllm.setBases(runDir, new Map()), (e: unknown) => e instanceof EngineFleetError && /update_weights_from_disk/.test(e.message));
});

test('SGLang: a base that came from a Hugging Face folder goes as a Hugging Face folder of the warm-started weights with the source\'s tokenizer, written once', async () => {
  const source = join(dir, 'models', 'qwen3-toy');
  await writeQwen3VocabModel(source);
  const hfExp = await resolveExperiment(
    parseExperimentConfig({ ...tinyConfig, models: { base: { checkpoint: source, maxSequenceLength: 1024 } }, env: { ...tinyConfig.env, promptStyle: 'chat' } }, 'hf'),
    join(dir, 'hf.json'),
  );
  // The warm start's weights: the source's, moved, so the folder sent must hold these and not the download's.
  const warm = await sourceWeights(hfExp.models.get('base')!);
  const [moved, tensor] = [...warm].find(([, t]) => t.length > 1)!;
  const expected = Float32Array.from(tensor, (v) => v + 0.25);
  warm.set(moved, expected);
  seen.length = 0;
  answers = {
    '/model_info': { status: 200, body: { model_path: source, weight_version: 'default' } },
    '/update_weights_from_disk': { status: 200, body: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } },
  };
  const runDir = join(dir, 'hf-run');
  const backend = new EngineRollout(hfExp, { kind: 'sglang', urls: [url], apiKeyEnv: 'TROUPE_CONTRACT_KEY', timeoutMs: 10_000, retries: 1 }, join(runDir, 'engine-adapters'), () => {}, 'run/2');
  await backend.setBases(runDir, new Map([['base', warm]]));
  await backend.publish(1, new Map());
  const u = seen.find((s) => s.path === '/update_weights_from_disk')!;
  assertDeclared(u.body, sglangFields.UpdateWeightFromDiskReqInput!, 'UpdateWeightFromDiskReqInput');
  const sent = join(runDir, 'engine-bases', 'base');
  assert.equal(u.body.model_path, sent, 'a Hugging Face base goes as the folder written beside the adapters, which SGLang can read');
  // The folder is a Hugging Face model SGLang loads: the source's model type and tokenizer, the warm-started weights.
  assert.equal((await readHfSource(sent))?.modelType, 'qwen3');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) assert.deepEqual(await readFile(join(sent, f)), await readFile(join(source, f)), f);
  assert.deepEqual((await loadCheckpoint(sent)).params.get(moved), expected);
  assert.ok(!(await readdir(join(runDir))).some((n) => n.includes('.tmp-')), 'no temporary folder is left');
  // A second call (a resumed run's) keeps the folder whole, not half-written again.
  const before = (await stat(join(sent, 'model.safetensors'))).mtimeMs;
  await backend.setBases(runDir, new Map([['base', warm]]));
  assert.equal((await stat(join(sent, 'model.safetensors'))).mtimeMs, before);
});
