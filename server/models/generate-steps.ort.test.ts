/**
 * `Policy.generate`'s per-step callback and top alternatives, through the real engine worker:
 * the steps arrive while the batch generates (each before the result), add up to the result row
 * by row, and leave rows out once they stop; the k alternatives per token are the k best of the
 * distribution the sampled token's log-prob comes from, as the score graph computes it; rows
 * whose cancellation flag is set stop at the next step, the others sample what they would have.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import type { GenerateStep, TopAlternatives } from '../runtime/generate.ts';
import { initParameters } from './init.ts';
import { parseModelConfig } from './model-config.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';

const config = parseModelConfig({ vocabSize: 40, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: true });
const prompts = [Int32Array.from([1, 5, 7]), Int32Array.from([2, 3, 4, 9, 11, 6]), Int32Array.from([8])];

let engine: Engine;
let policy: Policy;
before(async () => {
  engine = await Engine.start({ log: () => {} });
  policy = await Policy.create(engine, { id: 'steps', config, weights: initParameters(config, 3, { std: 0.3 }), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false });
});
after(async () => {
  await engine.close();
});

test('each step arrives before the result, and the steps add up to it row by row', async () => {
  const greedy = await policy.generate(prompts, { maxNewTokens: 10, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: 0 });
  // A stop id that row 1 draws at its 3rd token ends that row early: later steps leave it out.
  const stop = greedy.tokens[1]![2]!;
  const steps: GenerateStep[] = [];
  let resolved = false;
  let late = 0;
  const run = policy.generate(prompts, {
    maxNewTokens: 10,
    sampling: { temperature: 0, topP: 1, topK: 0 },
    seed: 0,
    stopTokens: [stop],
    padToken: 0,
    onStep: (s) => {
      if (resolved) late++;
      steps.push(s);
    },
  });
  const r = await run.then((x) => ((resolved = true), x));
  await new Promise((ok) => setImmediate(ok));
  assert.equal(late, 0, 'no step arrives after the result');
  assert.deepEqual(
    steps.map((s) => s.n),
    steps.map((_, n) => n),
  );
  assert.equal(steps.length, Math.max(...r.tokens.map((t) => t.length)));
  prompts.forEach((_, b) => {
    const mine = steps.filter((s) => s.rows.includes(b));
    assert.deepEqual(
      mine.map((s) => s.tokens[s.rows.indexOf(b)]),
      Array.from(r.tokens[b]!),
      `row ${b}`,
    );
    assert.deepEqual(
      mine.map((s) => s.logprobs[s.rows.indexOf(b)]),
      Array.from(r.logprobs[b]!),
    );
  });
  assert.ok(r.tokens[1]!.length <= 3 && r.finish[1] === 'stop', 'row 1 stopped at its stop id');
  assert.ok(!steps.at(-1)!.rows.includes(1), 'a stopped row is absent from later steps');
});

test('top alternatives: the k best ids of the sampled distribution, with the score graph\'s log-probs; the sampled token\'s own log-prob among them when it is one', async () => {
  const k = 5;
  const T = 0.8;
  const steps: GenerateStep[] = [];
  const r = await policy.generate(prompts, { maxNewTokens: 6, sampling: { temperature: T, topP: 1, topK: 0 }, seed: 4, stopTokens: [], padToken: 0, topLogprobs: k, onStep: (s) => steps.push(s) });
  const alternatives: readonly TopAlternatives[] | undefined = r.top;
  assert.ok(alternatives, 'the result carries the alternatives');
  for (const [b, p] of prompts.entries()) {
    const top: TopAlternatives = alternatives[b]!;
    assert.equal(top.ids.length, r.tokens[b]!.length * k);
    for (let t = 0; t < r.tokens[b]!.length; t++) {
      const ids = Array.from(top.ids.subarray(t * k, (t + 1) * k));
      const lps = Array.from(top.logprobs.subarray(t * k, (t + 1) * k));
      // Each alternative scored as the response token after the same prefix: the engine's own log-prob.
      const prefix = [...p, ...r.tokens[b]!.subarray(0, t)];
      const scored = await policy.score(
        ids.map((id) => ({ tokens: Int32Array.from([...prefix, id]), promptLength: prefix.length })),
        T,
      );
      ids.forEach((id, j) => assert.ok(Math.abs(lps[j]! - scored[j]![0]!) < 1e-5, `row ${b} token ${t} alternative ${id}: ${lps[j]} vs ${scored[j]![0]}`));
      for (let j = 1; j < k; j++) assert.ok(lps[j - 1]! >= lps[j]!, 'best first');
      // Nothing outside the k is more likely than the k-th: the full distribution, scored.
      const all = await policy.score(
        Array.from({ length: config.vocabSize }, (_, id) => ({ tokens: Int32Array.from([...prefix, id]), promptLength: prefix.length })),
        T,
      );
      const best = all.map((s, id) => ({ id, lp: s[0]! })).sort((x, y) => y.lp - x.lp || x.id - y.id);
      assert.deepEqual(new Set(ids), new Set(best.slice(0, k).map((x) => x.id)), `row ${b} token ${t}`);
      const sampled = r.tokens[b]![t]!;
      if (ids.includes(sampled)) assert.ok(Math.abs(lps[ids.indexOf(sampled)]! - r.logprobs[b]![t]!) < 1e-6);
      const step = steps[t]!;
      const i = step.rows.indexOf(b);
      assert.deepEqual(Array.from(step.top!.ids.subarray(i * k, (i + 1) * k)), ids, 'the step carries the same alternatives');
    }
  }
  await assert.rejects(policy.generate(prompts, { maxNewTokens: 2, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 0, stopTokens: [], padToken: 0, topLogprobs: 21 }), /topLogprobs must be an integer from 0 to 20/);
});

test('cancellation flags: a flagged row draws nothing more, the other rows sample what they would have; all flagged, the call returns at once', async () => {
  const o = { maxNewTokens: 400, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: 9, stopTokens: [], padToken: 0 };
  const whole = await policy.generate(prompts, o);
  // Row 1 flagged before the worker starts: it gets no token; rows 0 and 2 keep their streams.
  const flags = new Int32Array(new SharedArrayBuffer(4 * prompts.length));
  Atomics.store(flags, 1, 1);
  const r = await policy.generate(prompts, { ...o, cancel: flags });
  assert.deepEqual(r.cancelled, [1]);
  assert.equal(r.tokens[1]!.length, 0);
  for (const b of [0, 2]) {
    assert.deepEqual(Array.from(r.tokens[b]!), Array.from(whole.tokens[b]!), `row ${b}`);
    assert.deepEqual(Array.from(r.logprobs[b]!), Array.from(whole.logprobs[b]!), `row ${b} log-probs`);
  }
  // Flagged from the first step's message, on the main thread, while the worker decodes: the
  // generation stops long before its 400 tokens.
  const live = new Int32Array(new SharedArrayBuffer(4 * prompts.length));
  const stopped = await policy.generate(prompts, { ...o, cancel: live, onStep: () => live.fill(1) });
  const longest = Math.max(...stopped.tokens.map((t) => t.length));
  assert.deepEqual(stopped.cancelled, [0, 1, 2]);
  assert.ok(longest < 400, `the rows ran to ${longest} tokens`);
  console.log(`# cancelled at the first step's message: the rows stopped after ${longest} of 400 tokens (${stopped.decodeRun!.steps} decode runs)`);
  stopped.tokens.forEach((t, b) => assert.deepEqual(Array.from(t), Array.from(whole.tokens[b]!.subarray(0, t.length)), `row ${b}: a prefix of its uncancelled tokens`));
  const none = await policy.generate(prompts, { ...o, cancel: new Int32Array(new SharedArrayBuffer(4 * prompts.length)).fill(1) });
  assert.deepEqual(none.tokens.map((t) => t.length), [0, 0, 0]);
  assert.equal(none.decodeRun!.steps, 0, 'nothing was prefilled or decoded');
  await assert.rejects(policy.generate(prompts, { ...o, cancel: new Int32Array(new SharedArrayBuffer(8)) }), /2 cancellation flags for 3 rows/);
});

test('prompt alternatives: each prompt token\'s log-prob and rank and the k best at its position, as the score graph has them; passes of fewer rows give the same answer', async () => {
  const k = 4;
  const T = 0.8;
  const prompt = Int32Array.from([3, 17, 9, 9, 25, 1, 38, 12]);
  const p = await policy.promptAlternatives(prompt, T, k);
  assert.equal(p.logprobs.length, prompt.length - 1);
  for (let t = 1; t < prompt.length; t++) {
    const prefix = prompt.subarray(0, t);
    const all = (await policy.score(
      Array.from({ length: config.vocabSize }, (_, id) => ({ tokens: Int32Array.from([...prefix, id]), promptLength: t })),
      T,
    )).map((x) => x[0]!);
    const own = all[prompt[t]!]!;
    assert.ok(Math.abs(p.logprobs[t - 1]! - own) < 1e-5, `position ${t}: ${p.logprobs[t - 1]} vs ${own}`);
    // Ids at least as likely, itself included (bounds allow float noise between the two graphs).
    const rank = p.ranks[t - 1]!;
    assert.ok(rank >= 1 + all.filter((x) => x > own + 1e-5).length && rank <= all.filter((x) => x >= own - 1e-5).length, `position ${t}: rank ${rank}`);
    const ids = Array.from(p.top.ids.subarray((t - 1) * k, t * k));
    const best = all.map((lp, id) => ({ id, lp })).sort((a, b) => b.lp - a.lp || a.id - b.id).slice(0, k);
    assert.deepEqual(ids, best.map((b) => b.id), `position ${t}: the ${k} best, best first`);
    ids.forEach((id, j) => assert.ok(Math.abs(p.top.logprobs[(t - 1) * k + j]! - all[id]!) < 1e-5));
  }
  const onePerPass = await policy.promptAlternatives(prompt, T, k, 1);
  const threePerPass = await policy.promptAlternatives(prompt, T, k, 3);
  for (const q of [onePerPass, threePerPass]) {
    // The LM head's product over fewer rows may round differently in the last bit or two.
    q.logprobs.forEach((lp, i) => assert.ok(Math.abs(lp - p.logprobs[i]!) < 1e-6, `position ${i + 1}: ${lp} vs ${p.logprobs[i]}`));
    assert.deepEqual(Array.from(q.ranks), Array.from(p.ranks));
    assert.deepEqual(Array.from(q.top.ids), Array.from(p.top.ids));
  }
  // Nothing to score before the first token, and nothing in an empty prompt.
  for (const none of [Int32Array.of(5), new Int32Array(0)]) {
    const q = await policy.promptAlternatives(none, T, k);
    assert.deepEqual([q.logprobs.length, q.ranks.length, q.top.ids.length, q.top.logprobs.length], [0, 0, 0, 0], `a prompt of ${none.length} tokens`);
  }
});
