/**
 * `splitLike`: ONNX Split at sizes read from other values' last axes at run time, so a value
 * concatenated along a symbolic axis (the fused decode's [past | new] attention scores) can be
 * split back where `slice` needs static bounds.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32 } from '../runtime/tensor.ts';
import { gradients } from './autodiff.ts';
import { Graph } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

const seq = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 0.7 + k) * 3);

test('splitLike splits a concat along symbolic axes back into its parts (sizes read at run time, Shape emitted once per ref list)', async () => {
  const b = new Graph();
  const a = b.input('a', 'float32', [2, 'S']);
  const c = b.input('c', 'float32', [2, 'T']);
  // Two different values split by the same refs: the sizes' Shape/Concat nodes are shared.
  const joined = b.concat([a, c], 1); // [2,S+T]
  const [x, y] = b.splitLike(b.mul(joined, b.scalar(2, 'float32')), 1, [a, c]);
  const [u, v] = b.splitLike(b.exp(joined), 1, [a, c]);
  assert.deepEqual(x!.shape, [2, 'S']);
  assert.deepEqual(y!.shape, [2, 'T']);
  const bytes = emitOnnx([['x', x!], ['y', y!], ['u', u!], ['v', v!]], { name: 'split-like' });
  const count = (op: string) => Buffer.from(bytes).toString('latin1').split(`.${op}`).length - 1;
  assert.equal(count('Split'), 2);
  assert.equal(count('Shape'), 2, 'one Shape per ref, shared by both splits');
  await engine.createSession('split-like', bytes, {});
  for (const [S, T] of [[5, 1], [3, 4]] as const) {
    const av = seq(2 * S, 1);
    const cv = seq(2 * T, 2);
    const out = await engine.run('split-like', { a: f32([2, S], av), c: f32([2, T], cv) }, { x: 'return', y: 'return', u: 'return', v: 'return' });
    assert.deepEqual([...out['x']!.dims], [2, S]);
    assert.deepEqual([...out['y']!.dims], [2, T]);
    const close = (got: ArrayLike<number>, want: number[]) => want.forEach((w, i) => assert.ok(Math.abs(got[i]! - w) <= 1e-6 * Math.max(1, Math.abs(w)), `[${i}] ${got[i]} vs ${w}`));
    close(out['x']!.data as Float32Array, av.map((t) => 2 * t));
    close(out['y']!.data as Float32Array, cv.map((t) => 2 * t));
    close(out['u']!.data as Float32Array, av.map(Math.exp));
    close(out['v']!.data as Float32Array, cv.map(Math.exp));
  }
  await engine.releaseSession('split-like');
});

test('splitLike refuses parts that do not add up, and has no gradient', () => {
  const b = new Graph();
  const a = b.input('a', 'float32', [2, 'S']);
  const c = b.input('c', 'float32', [2, 'T']);
  assert.throws(() => b.splitLike(b.concat([a, a], 1), 1, [a, c]), /do not add up/);
  assert.throws(() => b.splitLike(b.concat([a, c], 1), 1, [a]), /at least two refs/);
  const [x] = b.splitLike(b.concat([a, c], 1), 1, [a, c]);
  assert.throws(() => gradients(b, b.reduceSum(x!, [0, 1]), [a]), /splitLike.*no gradient|no gradient/);
});
