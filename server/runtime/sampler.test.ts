import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maskLogits, Rng, sampleToken } from './sampler.ts';

// Rows of V = 6 logits where the masked ids (4, 5: a padded vocabulary's tail) are the most likely.
const V = 6;
const row = (): Float32Array => Float32Array.from([1, 0.5, 0, -1, 9, 8]);

test('masked ids are never drawn, greedy or sampled, and log-probs are normalised over the rest', () => {
  const scratch = new Float64Array(V);
  const order = new Int32Array(V);
  const unmasked = sampleToken(row(), 0, V, { temperature: 0, topP: 1, topK: 0 }, new Rng(1), scratch, order);
  assert.equal(unmasked.token, 4, 'without the mask the padded id wins');

  const logits = row();
  maskLogits(logits, 0, [4, 5]);
  const greedy = sampleToken(logits, 0, V, { temperature: 0, topP: 1, topK: 0 }, new Rng(1), scratch, order);
  assert.equal(greedy.token, 0);
  const z = Math.exp(1) + Math.exp(0.5) + Math.exp(0) + Math.exp(-1);
  assert.ok(Math.abs(greedy.logprob - (1 - Math.log(z))) < 1e-6);

  const rng = new Rng(7);
  const counts = new Array<number>(V).fill(0);
  for (let i = 0; i < 4000; i++) {
    for (const p of [{ temperature: 1, topP: 1, topK: 0 }, { temperature: 0.7, topP: 0.9, topK: 3 }]) {
      const s = sampleToken(logits, 0, V, p, rng, scratch, order);
      counts[s.token]!++;
      assert.ok(Number.isFinite(s.logprob) && s.logprob <= 0);
    }
  }
  assert.deepEqual(counts.slice(4), [0, 0]);
  assert.ok(counts.slice(0, 4).every((c) => c > 0), `every unmasked id is drawn: ${counts}`);
});

test('masking acts on its row only', () => {
  const two = Float32Array.from([...row(), ...row()]);
  maskLogits(two, V, [4]);
  assert.equal(two[4], 9);
  assert.equal(two[V + 4], -Infinity);
  assert.equal(two[V + 5], 8);
});

test('exclude draws without replacement: never an excluded id while another has mass, log-probs stay the full distribution', () => {
  const scratch = new Float64Array(V);
  const order = new Int32Array(V);
  const logits = Float32Array.from([3, 1, 0.5, 0, -1, -2]);
  const full = (t: number, T: number) => {
    const z = Array.from(logits).reduce((s, v) => s + Math.exp(v / T), 0);
    return logits[t]! / T - Math.log(z);
  };
  for (const p of [{ temperature: 0.7, topP: 1, topK: 0 }, { temperature: 1, topP: 0.99, topK: 5 }]) {
    const rng = new Rng(11);
    const counts = new Array<number>(V).fill(0);
    for (let i = 0; i < 6000; i++) {
      const s = sampleToken(logits, 0, V, p, rng, scratch, order, new Set([0]));
      counts[s.token]!++;
      assert.ok(Math.abs(s.logprob - full(s.token, p.temperature)) < 1e-6, `log-prob of ${s.token}`);
    }
    assert.equal(counts[0], 0, `${JSON.stringify(p)}: the excluded id is never drawn: ${counts}`);
    // Conditioned on "not 0", id 1 keeps its odds against id 2: e^{(1-0.5)/T}.
    const odds = counts[1]! / counts[2]!;
    const want = Math.exp(0.5 / p.temperature);
    assert.ok(Math.abs(odds - want) / want < 0.12, `${JSON.stringify(p)}: odds 1:2 ${odds.toFixed(2)}, want ${want.toFixed(2)}`);
  }
  // Successive draws of a group of V rows take every id once.
  const taken = new Set<number>();
  const rng = new Rng(3);
  for (let i = 0; i < V; i++) taken.add(sampleToken(logits, 0, V, { temperature: 0.7, topP: 1, topK: 0 }, rng, scratch, order, taken).token);
  assert.equal(taken.size, V);
  // Greedy: the best id not taken.
  assert.equal(sampleToken(logits, 0, V, { temperature: 0, topP: 1, topK: 0 }, rng, scratch, order, new Set([0, 1])).token, 2);
  // Everything the truncation keeps is taken: the draw ignores the exclusion instead of failing.
  const top2 = { temperature: 1, topP: 1, topK: 2 };
  const s = sampleToken(logits, 0, V, top2, rng, scratch, order, new Set([0, 1]));
  assert.ok(s.token === 0 || s.token === 1, `drawn from the top 2: ${s.token}`);
});
