/** The value head: zero at the start, Adam on the clipped value loss fits a linear target, the clip holds a step back, checkpoints round-trip. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ValueHead, trainValueHead } from './value-head.ts';

function data(n: number, C: number): { f: Float32Array[]; r: number[] } {
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
  const w = Array.from({ length: C }, () => rnd());
  const f = Array.from({ length: n }, () => Float32Array.from({ length: C }, () => rnd()));
  return { f, r: f.map((x) => 0.3 + x.reduce((a, v, c) => a + v * w[c]!, 0)) };
}

test('a new head predicts 0 and training on the clipped value loss fits a linear target', () => {
  const { f, r } = data(64, 8);
  const h = new ValueHead(8);
  assert.deepEqual([...h.predict(f.slice(0, 3))], [0, 0, 0]);
  const mse = () => h.predict(f).reduce((a, v, i) => a + (v - r[i]!) ** 2, 0) / f.length;
  const before = mse();
  for (let step = 0; step < 60; step++) trainValueHead(h, f, r, h.predict(f), { valueClip: 0.2, valueLr: 0.05, ppoEpochs: 1, miniBatches: 4, seed: step });
  assert.ok(mse() < before / 20, `mse ${mse()} from ${before}`);
});

test('the clip stops a step toward a target farther than the clip range from the old values', () => {
  const { f, r } = data(16, 4);
  const h = new ValueHead(4);
  const old = h.predict(f);
  // Old values 0, so V_clip stays within 0.01 of 0; after the first steps move V past it, the
  // clipped term dominates every sample whose target lies beyond, and the head stops moving.
  for (let i = 0; i < 200; i++) h.update(f, r, old, 0.01, 0.05);
  const v = h.predict(f);
  const moved = Math.max(...v.map((x) => Math.abs(x)));
  const free = new ValueHead(4);
  for (let i = 0; i < 200; i++) free.update(f, r, old, 1000, 0.05);
  const err = (x: Float64Array) => x.reduce((a, v, i) => a + (v - r[i]!) ** 2, 0);
  // Unclipped, the head fits the targets; clipped, it stalls once V leaves the range (Adam's momentum carries it a little past).
  assert.ok(err(free.predict(f)) < err(v) / 10, `clipped error ${err(v)}, unclipped ${err(free.predict(f))} (values moved up to ${moved})`);
});

test('state round-trips and a head of another size is refused by name', () => {
  const { f, r } = data(8, 4);
  const h = new ValueHead(4);
  h.update(f, r, h.predict(f), 1, 0.1);
  const back = ValueHead.fromState(JSON.parse(JSON.stringify(h.state())), 4, 'value-heads.json');
  assert.deepEqual([...back.predict(f)], [...h.predict(f)]);
  assert.equal(back.step, 1);
  assert.throws(() => ValueHead.fromState(h.state(), 5, 'value-heads.json'), /value-heads.json: value head of size 4, the model's hidden size is 5/);
});
