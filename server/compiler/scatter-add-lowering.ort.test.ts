/**
 * `emitOnnx(…, { scatterAdd: 'select' })`, the WebGPU lowering of the log-prob pick's gradient:
 * a scatterAdd with one index per row along its axis becomes Equal + Where and computes exactly
 * what ScatterElements(add) computes (into zeros and into other data); a scatterAdd with several
 * indices per row (repeats accumulate) stays ScatterElements.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32, i64 } from '../runtime/tensor.ts';
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

const N = 6;
const V = 11;
const values = (n: number, k = 1.7) => Array.from({ length: n }, (_, i) => Math.sin(i * k) * 3);
const hasOp = (bytes: Uint8Array, op: string) => Buffer.from(bytes).includes(Buffer.from(op));

/** d/dx of Σ w · log softmax(x)[target]: the adjoint of x is the pick's scatter into zeros. */
function pickGradient(scatterAdd: 'scatter' | 'select'): Uint8Array {
  const b = new Graph();
  const x = b.input('x', 'float32', ['N', V]);
  const t = b.input('t', 'int64', ['N']);
  const w = b.input('w', 'float32', ['N']);
  const logp = b.squeeze(b.gatherElements(b.logSoftmax(x, -1), b.unsqueeze(t, [1]), 1), [1]);
  const [g] = gradients(b, b.reduceSum(b.mul(logp, w), [0]), [x]);
  return emitOnnx([['g', g!]], { name: 'pick', scatterAdd });
}

/** A bare scatterAdd into non-zero data, with `k` indices per row along axis 1. */
function bare(scatterAdd: 'scatter' | 'select', k: number): Uint8Array {
  const b = new Graph();
  const d = b.input('d', 'float32', [N, V]);
  const i = b.input('i', 'int64', [N, k]);
  const u = b.input('u', 'float32', [N, k]);
  return emitOnnx([['y', b.scatterAdd(d, i, u, 1)]], { name: 'bare', scatterAdd });
}

async function run(name: string, bytes: Uint8Array, feeds: Parameters<Engine['run']>[1], out: string): Promise<Float32Array> {
  await engine.createSession(name, bytes, { optimization: 'basic' });
  return (await engine.run(name, feeds, { [out]: 'return' }))[out]!.data as Float32Array;
}

test("the log-prob pick's gradient as a select: no ScatterElements, the same values bit for bit", async () => {
  const scatter = pickGradient('scatter');
  const select = pickGradient('select');
  assert.ok(hasOp(scatter, 'ScatterElements'));
  assert.ok(!hasOp(select, 'ScatterElements'), 'the select lowering still emits ScatterElements');
  const targets = [3, 0, 10, 3, 7, 5];
  const feeds = () => ({ x: f32([N, V], values(N * V)), t: i64([N], targets), w: f32([N], values(N, 0.9)) });
  const a = await run('pick-scatter', scatter, feeds(), 'g');
  const c = await run('pick-select', select, feeds(), 'g');
  assert.deepEqual([...c], [...a]);
  // The pick reached the gradient: the target's entry differs from the softmax-only part.
  assert.ok(a.some((v) => v !== 0));
});

test('into non-zero data the select adds the update at the index and keeps the rest', async () => {
  const idx = [0, 10, 4, 4, 2, 9];
  const feeds = () => ({ d: f32([N, V], values(N * V, 0.3)), i: i64([N, 1], idx), u: f32([N, 1], values(N, 2.1)) });
  const select = bare('select', 1);
  assert.ok(!hasOp(select, 'ScatterElements'));
  const a = await run('bare-scatter-1', bare('scatter', 1), feeds(), 'y');
  const c = await run('bare-select-1', select, feeds(), 'y');
  assert.deepEqual([...c], [...a]);
  const d = values(N * V, 0.3).map(Math.fround);
  assert.equal(c[1 * V + 10], Math.fround(d[1 * V + 10]! + Math.fround(values(N, 2.1)[1]!)));
  assert.equal(c[1 * V + 9], d[1 * V + 9]);
});

test('several indices per row (repeats accumulate) stay a ScatterElements', async () => {
  const select = bare('select', 2);
  assert.ok(hasOp(select, 'ScatterElements'));
  const idx = [1, 1, 0, 3, 5, 5, 2, 2, 9, 8, 7, 7];
  const y = await run('bare-select-2', select, { d: f32([N, V], new Array(N * V).fill(0)), i: i64([N, 2], idx), u: f32([N, 2], new Array(2 * N).fill(1)) }, 'y');
  assert.equal(y[1], 2, 'two updates at one index must add up');
});
