/**
 * The OpenAI-compatible endpoint over a real socket, driven by the official `openai` npm client:
 * models, completions with token-id prompts, chat, streaming, logprobs, LoRA load/unload, and
 * the refusals (key, origin, body size, bad and unsupported fields). Numbers are checked against
 * the engine itself: the same seed gives the tokens and log-probs `Policy.generate` gives in
 * process, and those log-probs equal the score graph's within 1e-5.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import type { z } from 'zod';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { saveCheckpoint } from '../models/checkpoint.ts';
import { initParameters } from '../models/init.ts';
import { exportPeftAdapter } from '../models/lora.ts';
import { initLoraParameters, parseLoraConfig } from '../models/lora.ts';
import type { Policy } from '../models/policy.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { completionResponseSchema, modelListSchema } from '../protocol/openai-api.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { resolveExperiment } from '../rl/resolve-experiment.ts';
import { sourceWeights } from '../runs/checkpoint-weights.ts';
import { Engine } from '../runtime/engine.ts';
import { OpenAiServer } from './openai-server.ts';
import type { ServedModels } from './served-models.ts';
import { servedTeam } from './served-team.ts';

const KEY = 'test-key-0123456789';
let dir = '';
let engine: Engine;
let exp: ResolvedExperiment;
let models: ServedModels;
let server: OpenAiServer;
let client: OpenAI;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'troupe-openai-'));
  exp = await resolveExperiment(parseExperimentConfig({ ...tinyConfig, warmStart: { enabled: false } }, 'tiny'), 'tiny');
  engine = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
  const bases = new Map([['base', await sourceWeights(exp.models.get('base')!)]]);
  models = await servedTeam(engine, exp, bases, null);
  server = await OpenAiServer.start({ models, token: KEY, maxBodyBytes: 64 * 1024 });
  client = new OpenAI({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
});

after(async () => {
  await server.close();
  await models.close();
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const policyOf = (name: string): Promise<Policy> => models.use(name, async (p) => p);
const tok = () => exp.tokenizer;

/** POST with the client's own transport (for vLLM's fields the typed methods do not declare). */
async function post(path: string, body: Record<string, unknown>): Promise<unknown> {
  return client.post(path, { body });
}

test('/v1/models lists the bases and the team adapters with their parent', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, ['base', 'tool-lora', 'plan-lora']);
  const raw = modelListSchema.parse(await client.get('/models'));
  assert.equal(raw.data.find((m) => m.id === 'tool-lora')!.parent, 'base');
  assert.equal(raw.data.find((m) => m.id === 'base')!.parent, null);
});

test('token-id completions: the tokens and log-probs of Policy.generate with the same seed and rows; log-probs equal the score graph within 1e-5', async () => {
  const prompts = [tok().encodePrompt([{ role: 'user', text: 'go right' }]), tok().encodePrompt([{ role: 'user', text: 'up' }])];
  const r = completionResponseSchema.parse(
    await post('/completions', { model: 'tool-lora', prompt: prompts.map((p) => Array.from(p)), n: 2, max_tokens: 8, temperature: 1, seed: 1234, logprobs: 0, return_token_ids: true, stop_token_ids: [...tok().stopTokenIds] }),
  );
  assert.equal(r.choices.length, 4);
  const policy = await policyOf('tool-lora');
  const rows = [prompts[0]!, prompts[0]!, prompts[1]!, prompts[1]!];
  const own = await policy.generate(rows, { maxNewTokens: 8, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 1234, stopTokens: tok().stopTokenIds, padToken: tok().padTokenId, rollout: true });
  r.choices.forEach((c, j) => {
    assert.equal(c.index, j);
    assert.deepEqual(c.token_ids, Array.from(own.tokens[j]!));
    assert.deepEqual(c.prompt_token_ids, Array.from(rows[j]!));
    assert.deepEqual(c.logprobs!.token_logprobs, Array.from(own.logprobs[j]!));
    assert.equal(c.finish_reason, own.finish[j]);
    assert.equal(c.text, tok().decode(own.tokens[j]!, { specials: 'skip' }));
  });
  const scored = await policy.score(
    rows.map((p, j) => ({ tokens: Int32Array.from([...p, ...own.tokens[j]!]), promptLength: p.length })),
    1,
  );
  r.choices.forEach((c, j) => c.logprobs!.token_logprobs.forEach((lp, t) => assert.ok(Math.abs(lp! - scored[j]![t]!) < 1e-5, `choice ${j} token ${t}: ${lp} vs ${scored[j]![t]}`)));
});

test('a batch split with troupe_row_offset samples what it samples whole; the same seed repeats, another differs', async () => {
  const prompts = ['a', 'bb', 'ccc'].map((t) => Array.from(tok().encodePrompt([{ role: 'user', text: t }])));
  const ask = (prompt: number[][], offset: number, seed = 77) =>
    post('/completions', { model: 'plan-lora', prompt, n: 2, max_tokens: 6, seed, logprobs: 0, return_token_ids: true, troupe_row_offset: offset }).then((b) => completionResponseSchema.parse(b).choices);
  const whole = await ask(prompts, 0);
  const parts = [...(await ask(prompts.slice(0, 1), 0)), ...(await ask(prompts.slice(1), 2))];
  assert.deepEqual(
    parts.map((c) => c.token_ids),
    whole.map((c) => c.token_ids),
  );
  parts.forEach((c, j) => c.logprobs!.token_logprobs.forEach((lp, t) => assert.ok(Math.abs(lp! - whole[j]!.logprobs!.token_logprobs[t]!) < 1e-5)));
  assert.deepEqual(
    (await ask(prompts, 0)).map((c) => c.token_ids),
    whole.map((c) => c.token_ids),
  );
  assert.notDeepEqual(
    (await ask(prompts, 0, 78)).map((c) => c.token_ids),
    whole.map((c) => c.token_ids),
  );
});

test('text completions and prompt_logprobs through the typed client', async () => {
  const c = await client.completions.create({ model: 'base', prompt: 'abc', max_tokens: 5, seed: 3, logprobs: 0 });
  assert.equal(c.object, 'text_completion');
  assert.equal(c.choices.length, 1);
  assert.equal(c.choices[0]!.logprobs!.tokens!.length, c.usage!.completion_tokens);
  const prompt = tok().encode('abcd');
  const withPrompt = completionResponseSchema.parse(await post('/completions', { model: 'base', prompt: Array.from(prompt), max_tokens: 1, prompt_logprobs: 0, temperature: 1 }));
  const plp = withPrompt.choices[0]!.prompt_logprobs!;
  assert.equal(plp.length, prompt.length);
  assert.equal(plp[0], null);
  const scored = await (await policyOf('base')).score([{ tokens: prompt, promptLength: 1 }], 1);
  for (let i = 1; i < prompt.length; i++) assert.ok(Math.abs(plp[i]![String(prompt[i])]!.logprob - scored[0]![i - 1]!) < 1e-6);
});

test('prompt_logprobs > 0: per prompt token, the token itself (its rank among all ids) and the k best with ranks 1..k, the score graph\'s log-probs; streamed in the first chunk', async () => {
  const k = 3;
  const T = 0.7;
  const prompt = tok().encodePrompt([{ role: 'user', text: 'go left' }]);
  const body = { model: 'plan-lora', prompt: Array.from(prompt), max_tokens: 2, seed: 6, temperature: T, prompt_logprobs: k };
  const plp = completionResponseSchema.parse(await post('/completions', body)).choices[0]!.prompt_logprobs!;
  assert.equal(plp.length, prompt.length);
  assert.equal(plp[0], null);
  const policy = await policyOf('plan-lora');
  const V = policy.config.vocabSize;
  let outside = 0;
  for (let t = 1; t < prompt.length; t++) {
    // JSON objects with integer keys come back in key order: the prompt token is found by its id.
    const entries = Object.entries(plp[t]!).map(([id, e]) => ({ id: Number(id), ...e }));
    entries.sort((a, b) => Number(b.id === prompt[t]) - Number(a.id === prompt[t]));
    assert.equal(entries[0]!.id, prompt[t], `position ${t}: the prompt token has an entry`);
    const prefix = prompt.subarray(0, t);
    const all = (await policy.score(
      Array.from({ length: V }, (_, id) => ({ tokens: Int32Array.from([...prefix, id]), promptLength: t })),
      T,
    )).map((x) => x[0]!);
    for (const e of entries) assert.ok(Math.abs(e.logprob - all[e.id]!) < 1e-5, `position ${t} id ${e.id}: ${e.logprob} vs ${all[e.id]}`);
    const own = all[prompt[t]!]!;
    const rank = entries[0]!.rank!;
    assert.ok(rank >= 1 + all.filter((x) => x > own + 1e-5).length && rank <= all.filter((x) => x >= own - 1e-5).length, `position ${t}: rank ${rank}`);
    const best = all.map((lp, id) => ({ id, lp })).sort((a, b) => b.lp - a.lp || a.id - b.id).slice(0, k);
    const alternatives = entries.filter((e) => e.id !== prompt[t] || e.rank! <= k).sort((a, b) => a.rank! - b.rank!);
    assert.deepEqual(new Set(alternatives.map((e) => e.id)), new Set(best.map((b) => b.id)), `position ${t}: the ${k} best`);
    assert.deepEqual(
      alternatives.map((e) => e.rank),
      [1, 2, 3],
    );
    assert.equal(entries.length, rank <= k ? k : k + 1);
    if (rank > k) outside++;
    for (const e of entries) assert.equal(e.decoded_token, tok().decode([e.id]));
  }
  assert.ok(outside > 0, 'some prompt token lies outside the k best (the k + 1 case is exercised)');
  // Streamed: the first chunk of the choice carries the same list.
  let streamed: unknown = undefined;
  for await (const chunk of await client.completions.create({ ...body, stream: true } as unknown as OpenAI.CompletionCreateParamsStreaming)) {
    const c = chunk.choices[0] as { prompt_logprobs?: unknown } | undefined;
    if (c?.prompt_logprobs !== undefined && streamed === undefined) streamed = c.prompt_logprobs;
  }
  assert.deepEqual(streamed, plp);
  await assert.rejects(post('/completions', { ...body, prompt_logprobs: 21 }), (e: unknown) => e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'prompt_logprobs');
});

test('chat completions render the chat template and report log-probs', async () => {
  const messages = [
    { role: 'system' as const, content: 'You plan paths.' },
    { role: 'user' as const, content: 'Where next?' },
  ];
  const c = await client.chat.completions.create({ model: 'plan-lora', messages, max_tokens: 6, seed: 9, logprobs: true, n: 2 });
  assert.equal(c.object, 'chat.completion');
  assert.equal(c.choices.length, 2);
  const prompt = tok().encodePrompt(messages.map((m) => ({ role: m.role, text: m.content })));
  assert.equal(c.usage!.prompt_tokens, prompt.length);
  const own = await (await policyOf('plan-lora')).generate([prompt, prompt], { maxNewTokens: 6, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 9, stopTokens: tok().stopTokenIds, padToken: tok().padTokenId, rollout: true });
  c.choices.forEach((ch, j) => {
    assert.equal(ch.message.content, tok().decode(own.tokens[j]!, { specials: 'skip' }));
    assert.deepEqual(
      ch.logprobs!.content!.map((t) => t.logprob),
      Array.from(own.logprobs[j]!),
    );
  });
});

test('streaming completions and chat: the chunks add up to the unstreamed answer, then [DONE]', async () => {
  const whole = await client.completions.create({ model: 'tool-lora', prompt: 'xyz', max_tokens: 7, seed: 5, logprobs: 0 });
  const stream = await client.completions.create({ model: 'tool-lora', prompt: 'xyz', max_tokens: 7, seed: 5, logprobs: 0, stream: true, stream_options: { include_usage: true } });
  let text = '';
  const lps: number[] = [];
  let finish: string | null = null;
  let usage = 0;
  for await (const chunk of stream) {
    for (const ch of chunk.choices) {
      text += ch.text;
      lps.push(...(ch.logprobs?.token_logprobs ?? []));
      finish = ch.finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage.completion_tokens;
  }
  assert.equal(text, whole.choices[0]!.text);
  assert.deepEqual(lps, whole.choices[0]!.logprobs!.token_logprobs);
  assert.equal(finish, whole.choices[0]!.finish_reason);
  assert.equal(usage, whole.usage!.completion_tokens);

  const messages = [{ role: 'user' as const, content: 'hello' }];
  const chat = await client.chat.completions.create({ model: 'base', messages, max_tokens: 5, seed: 6 });
  const chatStream = await client.chat.completions.create({ model: 'base', messages, max_tokens: 5, seed: 6, stream: true, logprobs: true });
  let content = '';
  let tokens = 0;
  for await (const chunk of chatStream) {
    content += chunk.choices[0]?.delta.content ?? '';
    tokens += chunk.choices[0]?.logprobs?.content?.length ?? 0;
  }
  assert.equal(content, chat.choices[0]!.message.content);
  assert.equal(tokens, chat.usage!.completion_tokens);
});

test('load_lora_adapter serves a PEFT folder under a new name with the base as parent; unload removes it', async () => {
  const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q', 'v'] });
  const params = initLoraParameters(exp.models.get('base')!.config, lora, 42);
  // B = 0 would make it the base itself: give B values so the adapter changes the model.
  for (const [name, t] of params) if (name.endsWith('lora_B')) t.forEach((_, i) => (t[i] = Math.sin(i) * 0.5));
  const folder = join(dir, 'tool@v1');
  await exportPeftAdapter(folder, exp.models.get('base')!.config, lora, params, { baseModelNameOrPath: 'base' });
  const text = await client.post('/load_lora_adapter', { body: { lora_name: 'tool@v1', lora_path: folder }, __binaryResponse: false });
  assert.match(String(text), /added successfully/);
  const raw = modelListSchema.parse(await client.get('/models'));
  assert.equal(raw.data.find((m) => m.id === 'tool@v1')?.parent, 'base');
  const prompt = Array.from(tok().encode('hello'));
  const ask = (model: string) => post('/completions', { model, prompt, max_tokens: 4, seed: 1, logprobs: 0, return_token_ids: true }).then((b) => completionResponseSchema.parse(b).choices[0]!);
  const [adapted, base] = [await ask('tool@v1'), await ask('base')];
  assert.notDeepEqual(adapted.logprobs!.token_logprobs, base.logprobs!.token_logprobs);
  await assert.rejects(client.post('/load_lora_adapter', { body: { lora_name: 'tool@v1', lora_path: folder } }), (e: unknown) => e instanceof OpenAI.BadRequestError && /already served/.test(e.message));
  await client.post('/unload_lora_adapter', { body: { lora_name: 'tool@v1' } });
  assert.ok(!(await client.models.list()).data.some((m) => m.id === 'tool@v1'));
  await assert.rejects(ask('tool@v1'), (e: unknown) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.post('/load_lora_adapter', { body: { lora_name: 'bad', lora_path: join(dir, 'missing') } }), (e: unknown) => e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'lora_path');
});

test('refusals: wrong key, browser origin, oversized body, bad JSON, bad and unsupported fields name the field', async () => {
  const wrong = new OpenAI({ baseURL: server.url, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e: unknown) => e instanceof OpenAI.AuthenticationError);
  const origin = await fetch(`${server.url}/models`, { headers: { authorization: `Bearer ${KEY}`, origin: 'https://example.com' } });
  assert.equal(origin.status, 403);
  const big = await fetch(`${server.url}/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'base', prompt: 'x'.repeat(70 * 1024) }) });
  assert.equal(big.status, 413);
  const bad = await fetch(`${server.url}/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: '{"model": ' });
  assert.equal(bad.status, 400);
  const deep = await fetch(`${server.url}/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: `${'['.repeat(30_000)}${']'.repeat(30_000)}` });
  assert.equal(deep.status, 400, 'deeply nested JSON is a bad body, not a crash');
  assert.equal((await client.models.list()).data.length > 0, true, 'and the server still answers');
  await assert.rejects(client.completions.create({ model: 'base', prompt: 'a', temperature: -1 }), (e: unknown) => e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'temperature');
  await assert.rejects(client.completions.create({ model: 'base', prompt: 'a', stop: ['\n'] }), (e: unknown) => e instanceof OpenAI.BadRequestError && /stop_token_ids/.test(e.message));
  await assert.rejects(client.completions.create({ model: 'base', prompt: [[999999]] as unknown as number[] }), (e: unknown) => e instanceof OpenAI.BadRequestError && /vocabulary/.test(e.message) && !/999999/.test(e.message));
  await assert.rejects(client.completions.create({ model: 'base', prompt: 'a', max_tokens: 100000 }), (e: unknown) => e instanceof OpenAI.BadRequestError);
});

test("SGLang's /generate: a batch answers one output per row, parallel samples ordered as SGLang expands them (input_ids * n)", async () => {
  const prompts = [Array.from(tok().encode('ab')), Array.from(tok().encode('cde'))];
  const res = await fetch(`${server.url.replace(/\/v1$/, '')}/generate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ input_ids: prompts, sampling_params: { n: 2, max_new_tokens: 4, sampling_seed: 11 }, return_logprob: true, top_logprobs_num: 2, lora_path: 'tool-lora' }),
  });
  assert.equal(res.status, 200);
  const outs = (await res.json()) as Array<{ output_ids: number[]; meta_info: { prompt_tokens: number; output_token_logprobs: Array<[number, number, null]>; output_top_logprobs: Array<Array<[number, number, null]>> } }>;
  assert.deepEqual(
    outs.map((o) => o.meta_info.prompt_tokens),
    [prompts[0]!.length, prompts[1]!.length, prompts[0]!.length, prompts[1]!.length],
  );
  const policy = await policyOf('tool-lora');
  const rows = [prompts[0]!, prompts[0]!, prompts[1]!, prompts[1]!].map((p) => Int32Array.from(p));
  const own = await policy.generate(rows, { maxNewTokens: 4, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 11, stopTokens: tok().stopTokenIds, padToken: tok().padTokenId, rollout: true, topLogprobs: 2 });
  // Output j is prompt j mod 2's sample floor(j / 2): row (j mod 2)·2 + floor(j / 2).
  outs.forEach((o, j) => {
    const row = (j % 2) * 2 + Math.floor(j / 2);
    assert.deepEqual(o.output_ids, Array.from(own.tokens[row]!));
    assert.deepEqual(o.meta_info.output_token_logprobs.map((e) => e[1]), o.output_ids);
    // top_logprobs_num: SGLang's [logprob, id, text] triples of the 2 best per token.
    assert.deepEqual(
      o.meta_info.output_top_logprobs,
      o.output_ids.map((_, t) => [0, 1].map((j) => [own.top![row]!.logprobs[t * 2 + j]!, own.top![row]!.ids[t * 2 + j]!, null])),
    );
  });
});

test('concurrent requests are joined into fewer engine calls and sample what each samples alone', async () => {
  const prompts = ['a', 'bb', 'ccc', 'dddd', 'e', 'ff', 'ggg', 'hhhh'].map((t) => Array.from(tok().encode(t)));
  const body = (i: number) => ({ model: 'plan-lora', prompt: [prompts[i]!], n: 2, max_tokens: 3 + (i % 4), seed: 100 + i, logprobs: 0, return_token_ids: true, ignore_eos: true });
  const alone: Array<z.output<typeof completionResponseSchema>> = [];
  for (let i = 0; i < prompts.length; i++) alone.push(completionResponseSchema.parse(await post('/completions', body(i))));
  const calls = models.batching.calls;
  const together = (await Promise.all(prompts.map((_, i) => post('/completions', body(i))))).map((b) => completionResponseSchema.parse(b));
  const made = models.batching.calls - calls;
  assert.ok(made < prompts.length, `${prompts.length} concurrent requests took ${made} engine calls`);
  together.forEach((r, i) =>
    r.choices.forEach((c, k) => {
      const want = alone[i]!.choices[k]!;
      assert.deepEqual(c.token_ids, want.token_ids, `request ${i} choice ${k}`);
      assert.equal(c.token_ids!.length, 3 + (i % 4));
      assert.equal(c.finish_reason, 'length');
      c.logprobs!.token_logprobs.forEach((lp, t) => assert.ok(Math.abs(lp! - want.logprobs!.token_logprobs[t]!) < 1e-5));
    }),
  );
});

test('streams send each token as it is generated: chunks reach the openai client before the engine call ends', async () => {
  const prompts = [Array.from(tok().encode('live')), Array.from(tok().encode('stream'))];
  const body = { model: 'tool-lora', prompt: prompts, n: 2, max_tokens: 120, seed: 21, logprobs: 0, ignore_eos: true };
  const whole = completionResponseSchema.parse(await post('/completions', body));
  const calls = models.batching.calls;
  const start = performance.now();
  let first = 0;
  let duringGeneration = 0;
  let chunks = 0;
  const texts = ['', '', '', ''];
  const stream = await client.completions.create({ ...body, stream: true } as OpenAI.CompletionCreateParamsStreaming);
  for await (const chunk of stream) {
    if (chunks++ === 0) first = performance.now() - start;
    // The batching generator counts an engine call when it has returned.
    if (models.batching.calls === calls) duringGeneration++;
    for (const c of chunk.choices) texts[c.index] += c.text;
  }
  const total = performance.now() - start;
  assert.equal(chunks, 4 * 120);
  assert.deepEqual(
    texts,
    whole.choices.map((c) => c.text),
  );
  assert.ok(duringGeneration > 0, `all ${chunks} chunks arrived after the engine call ended`);
  // Ratios only: the machine may be loaded. Seen: first chunk at a few % of the total.
  assert.ok(first < total / 2, `first chunk after ${first.toFixed(0)} ms of ${total.toFixed(0)} ms`);
  console.log(`# stream of 4 x 120 tokens: first chunk ${first.toFixed(0)} ms, last ${total.toFixed(0)} ms, ${duringGeneration} of ${chunks} chunks while the engine call ran`);

  const chatCalls = models.batching.calls;
  let chatDuring = 0;
  let content = '';
  const chat = await client.chat.completions.create({ model: 'base', messages: [{ role: 'user', content: 'hi' }], max_tokens: 80, seed: 2, stream: true, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsStreaming);
  for await (const chunk of chat) {
    if (models.batching.calls === chatCalls && chunk.choices[0]?.delta.content !== undefined) chatDuring++;
    content += chunk.choices[0]?.delta.content ?? '';
  }
  assert.ok(chatDuring > 0, 'chat chunks arrive while the engine call runs');
  const unstreamed = await client.chat.completions.create({ model: 'base', messages: [{ role: 'user', content: 'hi' }], max_tokens: 80, seed: 2, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  assert.equal(content, unstreamed.choices[0]!.message.content);
});

test('logprobs > 0: completions top_logprobs (the sampled token, then the k best) and chat top_logprobs (the k best) equal the score graph', async () => {
  const k = 3;
  const prompt = tok().encodePrompt([{ role: 'user', text: 'go left' }]);
  const body = { model: 'plan-lora', prompt: Array.from(prompt), max_tokens: 6, seed: 8, temperature: 0.7, logprobs: k, return_token_ids: true, return_tokens_as_token_ids: true };
  const r = completionResponseSchema.parse(await post('/completions', body));
  const c = r.choices[0]!;
  const policy = await policyOf('plan-lora');
  const tops = c.logprobs!.top_logprobs!;
  assert.equal(tops.length, c.token_ids!.length);
  for (const [t, top] of tops.entries()) {
    const entries = Object.entries(top!).map(([key, lp]) => ({ id: Number(/^token_id:(\d+)$/.exec(key)![1]), lp }));
    assert.equal(entries[0]!.id, c.token_ids![t], 'the sampled token comes first');
    assert.equal(entries[0]!.lp, c.logprobs!.token_logprobs[t]);
    assert.ok(entries.length === k || entries.length === k + 1, `${entries.length} entries`);
    const prefix = [...prompt, ...c.token_ids!.slice(0, t)];
    const scored = await policy.score(
      entries.map((e) => ({ tokens: Int32Array.from([...prefix, e.id]), promptLength: prefix.length })),
      0.7,
    );
    entries.forEach((e, j) => assert.ok(Math.abs(e.lp - scored[j]![0]!) < 1e-5, `token ${t} alternative ${e.id}: ${e.lp} vs ${scored[j]![0]}`));
    // The k best: no other id scores above the least of them.
    const all = await policy.score(
      Array.from({ length: policy.config.vocabSize }, (_, id) => ({ tokens: Int32Array.from([...prefix, id]), promptLength: prefix.length })),
      0.7,
    );
    const best = all.map((s, id) => ({ id, lp: s[0]! })).sort((a, b) => b.lp - a.lp || a.id - b.id).slice(0, k);
    for (const b of best) assert.ok(entries.some((e) => e.id === b.id), `token ${t}: id ${b.id} is among the ${k} best`);
  }
  // Streamed, each chunk carries its token's entry.
  const streamed: Array<Record<string, number> | null> = [];
  for await (const chunk of await client.completions.create({ ...body, stream: true } as OpenAI.CompletionCreateParamsStreaming)) {
    for (const ch of chunk.choices) streamed.push(...((ch.logprobs?.top_logprobs ?? []) as Array<Record<string, number> | null>));
  }
  assert.deepEqual(streamed, tops);

  const messages = [{ role: 'user' as const, content: 'Where next?' }];
  const chat = await client.chat.completions.create({ model: 'plan-lora', messages, max_tokens: 5, seed: 4, temperature: 0.7, logprobs: true, top_logprobs: k });
  const own = await policy.generate([tok().encodePrompt([{ role: 'user', text: 'Where next?' }])], { maxNewTokens: 5, sampling: { temperature: 0.7, topP: 1, topK: 0 }, seed: 4, stopTokens: tok().stopTokenIds, padToken: tok().padTokenId, rollout: true, topLogprobs: k });
  chat.choices[0]!.logprobs!.content!.forEach((entry, t) => {
    assert.equal(entry.top_logprobs.length, k);
    entry.top_logprobs.forEach((alt, j) => {
      assert.equal(alt.token, tok().decode([own.top![0]!.ids[t * k + j]!]));
      assert.equal(alt.logprob, own.top![0]!.logprobs[t * k + j]);
    });
    for (let j = 1; j < k; j++) assert.ok(entry.top_logprobs[j - 1]!.logprob >= entry.top_logprobs[j]!.logprob);
  });
  await assert.rejects(client.chat.completions.create({ model: 'base', messages, top_logprobs: 2 }), (e: unknown) => e instanceof OpenAI.BadRequestError && (e.error as { param?: string }).param === 'top_logprobs');
});

/** Resolves once `ok()` holds, polling; fails after `ms`. */
async function until(ok: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

test('a client that leaves mid-stream cancels its rows: the engine stops decoding them within a few steps, and the next request is answered', async () => {
  const b = models.batching;
  const before = { calls: b.calls, tokens: b.tokens, cancelled: b.cancelled };
  const max = 400;
  const stream = await client.completions.create({ model: 'base', prompt: 'bye', n: 2, max_tokens: max, seed: 1, stream: true, ignore_eos: true } as OpenAI.CompletionCreateParamsStreaming);
  let got = 0;
  // Leaving the loop aborts the client's request: the socket closes while the server still writes.
  for await (const _ of stream) if (++got === 3) break;
  assert.equal(b.calls, before.calls, 'the client left while its engine call ran');
  const left = performance.now();
  await until(() => b.calls > before.calls, 'the abandoned engine call to end');
  const generated = b.tokens - before.tokens;
  console.log(`# stream left after ${got} chunks: the engine call ended ${(performance.now() - left).toFixed(0)} ms later, having generated ${generated} of ${2 * max} tokens`);
  assert.equal(b.cancelled, before.cancelled + 1);
  // Without cancellation both rows run to max_tokens (800 tokens, seconds on the tiny model).
  assert.ok(generated < (2 * max) / 4, `the engine generated ${generated} of ${2 * max} tokens for a client that had left`);
  const after = await client.completions.create({ model: 'base', prompt: 'hello', max_tokens: 3, seed: 1 });
  assert.equal(after.choices.length, 1);
});

test('a non-streaming request whose client aborts is cancelled too; requests joined with it keep their rows', async () => {
  const b = models.batching;
  const max = 400;
  const body = { model: 'base', prompt: 'wait', n: 2, max_tokens: max, seed: 5, ignore_eos: true };
  const ask = (signal?: AbortSignal) =>
    fetch(`${server.url}/completions`, { method: 'POST', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
  // Alone: the aborted request's call stops early.
  const before = { calls: b.calls, tokens: b.tokens, cancelled: b.cancelled };
  const abort = new AbortController();
  const gone = ask(abort.signal).catch((e: unknown) => e);
  await until(() => b.active > 0, 'the request to reach the engine');
  abort.abort();
  assert.ok((await gone) instanceof Error, 'the client saw its own abort');
  await until(() => b.calls > before.calls, 'the aborted engine call to end');
  assert.equal(b.cancelled, before.cancelled + 1);
  assert.ok(b.tokens - before.tokens < (2 * max) / 4, `the engine generated ${b.tokens - before.tokens} of ${2 * max} tokens for an aborted request`);

  // Joined: a second request waits behind a running one, both go as one call; aborting the first
  // leaves the second's rows running to the end with the tokens they would have alone.
  const alone = completionResponseSchema.parse(await (await ask()).json());
  const blocker = client.completions.create({ model: 'base', prompt: 'x', max_tokens: 200, seed: 2, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
  await until(() => b.active > 0, 'the blocking request to reach the engine');
  const joined = { calls: b.calls };
  const quit = new AbortController();
  const leaving = ask(quit.signal).catch((e: unknown) => e);
  const staying = ask();
  await blocker;
  await until(() => b.active === 2, 'the two requests to run joined');
  quit.abort();
  await leaving;
  const kept = completionResponseSchema.parse(await (await staying).json());
  assert.equal(b.calls, joined.calls + 2, 'the blocker, then one call for the two joined requests');
  assert.deepEqual(
    kept.choices.map((c) => c.text),
    alone.choices.map((c) => c.text),
  );
  assert.deepEqual(
    kept.choices.map((c) => c.finish_reason),
    ['length', 'length'],
  );
});

test("SGLang's /update_weights_from_disk: the base, the team's adapters and a loaded adapter all sample from the new weights; the version is reported; other folders are refused naming model_path", { timeout: 120_000 }, async () => {
  const root = server.url.replace(/\/v1$/, '');
  const call = async (path: string, body?: unknown) => {
    const res = await fetch(`${root}${path}`, { method: body === undefined ? 'GET' : 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const config = exp.models.get('base')!.config;
  const newDir = join(dir, 'new-base');
  await saveCheckpoint(newDir, config, initParameters(config, 99));
  const originalDir = join(dir, 'original-base');
  await saveCheckpoint(originalDir, config, await sourceWeights(exp.models.get('base')!));
  // An adapter loaded before the update, with B values so that it changes the model.
  const lora = parseLoraConfig({ rank: 4, alpha: 8, targets: ['q', 'v'] });
  const params = initLoraParameters(config, lora, 7);
  for (const [name, t] of params) if (name.endsWith('lora_B')) t.forEach((_, i) => (t[i] = Math.cos(i) * 0.5));
  const adapterDir = join(dir, 'loaded@v1');
  await exportPeftAdapter(adapterDir, config, lora, params, { baseModelNameOrPath: 'base' });
  await client.post('/load_lora_adapter', { body: { lora_name: 'loaded@v1', lora_path: adapterDir }, __binaryResponse: false });
  // The reference: the same team and adapter served on the new weights from the start (on an
  // engine of its own: one engine holds one content per resident base name).
  const refEngine = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
  const reference = await servedTeam(refEngine, exp, new Map([['base', initParameters(config, 99)]]), null);
  await reference.loadAdapter('loaded@v1', adapterDir);
  const prompt = tok().encodePrompt([{ role: 'user', text: 'go' }]);
  const sampleVia = (name: string) => post('/completions', { model: name, prompt: [Array.from(prompt)], n: 2, max_tokens: 6, seed: 3, logprobs: 0, return_token_ids: true }).then((b) => completionResponseSchema.parse(b).choices.map((c) => ({ tokens: c.token_ids, logprobs: c.logprobs!.token_logprobs })));
  const sampleRef = (name: string) =>
    reference.use(name, (p) => p.generate([prompt, prompt], { maxNewTokens: 6, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 3, stopTokens: tok().stopTokenIds, padToken: tok().padTokenId, rollout: true })).then((g) => g.tokens.map((t, j) => ({ tokens: Array.from(t), logprobs: Array.from(g.logprobs[j]!) })));
  const names = ['base', 'tool-lora', 'plan-lora', 'loaded@v1'];
  try {
    const before = await Promise.all(names.map(sampleVia));
    assert.notDeepEqual(before, await Promise.all(names.map(sampleRef)), 'the new weights sample otherwise (else this test could not fail)');
    assert.deepEqual((await call('/get_weight_version')).body, { weight_version: 'default' });

    const resident = (await engine.stats()).residentBytes;
    const ok = await call('/update_weights_from_disk', { model_path: newDir, weight_version: 'run.base.1', abort_all_requests: false, flush_cache: true });
    assert.equal((await engine.stats()).residentBytes, resident, 'the old base and policies are freed: one copy of the base stays resident');
    assert.deepEqual(ok, { status: 200, body: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } });
    assert.deepEqual(await Promise.all(names.map(sampleVia)), await Promise.all(names.map(sampleRef)));
    assert.deepEqual((await call('/get_weight_version')).body, { weight_version: 'run.base.1' });
    assert.equal((await call('/model_info')).body.weight_version, 'run.base.1');
    assert.deepEqual((await client.models.list()).data.map((m) => m.id).sort(), [...names].sort(), 'every model is still served');

    const missing = await call('/update_weights_from_disk', { model_path: join(dir, 'nowhere') });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.success, false);
    assert.match(String(missing.body.message), /^model_path: /);
    const otherDir = join(dir, 'other-architecture');
    await saveCheckpoint(otherDir, { ...config, numLayers: config.numLayers + 1 }, initParameters({ ...config, numLayers: config.numLayers + 1 }, 1));
    const other = await call('/update_weights_from_disk', { model_path: otherDir });
    assert.equal(other.status, 400);
    assert.match(String(other.body.message), /model_path: .*another architecture.*numLayers/);
    assert.equal((await call('/update_weights_from_disk', { model_path: newDir, keep_pause: true })).status, 400);
    assert.deepEqual((await call('/get_weight_version')).body, { weight_version: 'run.base.1' }, 'a refused update changes nothing');
  } finally {
    // Back to the weights the other tests sample from.
    assert.equal((await call('/update_weights_from_disk', { model_path: originalDir, weight_version: 'default' })).status, 200);
    await reference.close();
    await refEngine.close();
  }
  await client.post('/unload_lora_adapter', { body: { lora_name: 'loaded@v1' } });
});
