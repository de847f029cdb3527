/**
 * float16 in ONNX Runtime (CPU): our float32 → float16 rounding equals ORT's Cast bit for bit,
 * float16 initializers are read as we write them, and a graph rewritten by `toHalfPrecision`
 * is valid ONNX that computes the float32 graph's function to float16 accuracy. (The CPU
 * provider runs most float16 ops in float32 behind casts it inserts itself, so this checks the
 * rewrite and the bytes, not float16 kernels: `decode-fp16.gpu.test.ts` does that on WebGPU.)
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32 } from '../runtime/tensor.ts';
import { float16Bytes, float16Value, roundFloat16 } from './float16.ts';
import { toHalfPrecision } from './half-precision.ts';
import { Graph, topoSort } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

test("rounding to float16 equals ONNX Runtime's Cast, bit for bit", async () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['N']);
  await engine.createSession('cast', emitOnnx([['y', b.cast(b.cast(x, 'float16'), 'float32')]], { name: 'cast' }));
  // Every float16 neighbourhood: values on, between and at the midpoints of consecutive halves,
  // plus random float32 bit patterns over the whole range (NaN compared as NaN).
  const values: number[] = [];
  for (let h = 0; h < 0x7c00; h += 3) {
    const lo = float16Value(h);
    const hi = float16Value(h + 1);
    values.push(lo, (lo + hi) / 2, Math.fround(lo + (hi - lo) * 0.25), -lo);
  }
  const bits = new Uint32Array(20000);
  let s = 7;
  for (let i = 0; i < bits.length; i++) bits[i] = s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
  values.push(...new Float32Array(bits.buffer), 65519, 65520, 1e9, -1e9, Infinity, -Infinity);
  const xs = Float32Array.from(values);
  const out = await engine.run('cast', { x: f32([xs.length], xs) }, { y: 'return' });
  const got = out['y']!.data as Float32Array;
  let wrong = 0;
  let example = '';
  for (let i = 0; i < xs.length; i++) {
    const want = Math.fround(roundFloat16(xs[i]!));
    if (!(got[i] === want || (Number.isNaN(got[i]!) && Number.isNaN(want)))) {
      wrong++;
      example ||= `${xs[i]} → ORT ${got[i]}, ours ${want}`;
    }
  }
  assert.equal(wrong, 0, `${wrong} of ${xs.length} values round differently, e.g. ${example}`);
});

test('a float16 initializer reads back as written', async () => {
  const b = new Graph();
  const w = b.input('w', 'float16', [2, 3]);
  const values = Float32Array.from([1 / 3, -2, 65504, 2 ** -24, 0.1, -0]);
  await engine.createSession('init', emitOnnx([['y', b.cast(w, 'float32')]], { name: 'init', initializers: new Map([['w', float16Bytes(values)]]) }));
  const out = await engine.run('init', {}, { y: 'return' });
  assert.deepEqual(Array.from(out['y']!.data as Float32Array), Array.from(values, roundFloat16));
});

test('toHalfPrecision: float32 edges, float32 softmax and sums, float16 elsewhere, same function', async () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['B', 8]);
  const w = b.input('w', 'float32', [8, 8]);
  const bias = b.input('bias', 'float32', ['B', 8]);
  const h = b.matmul(x, w);
  const p = b.softmax(b.add(h, bias), -1);
  const n = b.skipRmsNorm(h, x, b.input('g', 'float32', [8]), 1e-6);
  const y = b.add(b.mul(p, n.normed), b.reduceSum(n.sum, [1], true));
  const wv = Float32Array.from({ length: 64 }, (_, i) => Math.sin(i) * 0.5);
  const gv = Float32Array.from({ length: 8 }, (_, i) => 1 + i / 8);
  const inits = new Map([['w', new Uint8Array(wv.buffer)], ['g', new Uint8Array(gv.buffer)]]);
  const half = toHalfPrecision([['y', y]], inits);
  const nodes = topoSort(half.outputs.map(([, o]) => o));
  const byName = (name: string) => nodes.find((m) => m.op === 'input' && m.attrs['name'] === name)!;
  // Baked inputs became float16 initializers; fed ones stay float32 and are cast where used.
  assert.equal(byName('w').dtype, 'float16');
  assert.equal(byName('g').dtype, 'float16');
  assert.equal(byName('x').dtype, 'float32');
  assert.equal(byName('bias').dtype, 'float32');
  assert.equal(half.initializers.get('w')!.length, 64 * 2);
  for (const m of nodes) if (m.op === 'softmax' || m.op === 'reduceSum') assert.equal(m.dtype, 'float32', `${m.op} runs in float32`);
  for (const m of nodes) if (m.op === 'matmul' || m.op === 'skipRmsNorm') assert.equal(m.dtype, 'float16', `${m.op} runs in float16`);
  assert.equal(half.outputs[0]![1].dtype, 'float32');

  await engine.createSession('full', emitOnnx([['y', y]], { name: 'full', initializers: inits }));
  await engine.createSession('half', emitOnnx(half.outputs, { name: 'half', initializers: half.initializers }));
  const xv = Float32Array.from({ length: 24 }, (_, i) => Math.cos(i * 0.7));
  // Fresh feeds per run: their buffers are transferred to the engine worker.
  const feeds = () => ({ x: f32([3, 8], xv), bias: f32([3, 8], Array.from({ length: 24 }, (_, i) => (i % 5 === 0 ? -1e9 : 0))) });
  const a = (await engine.run('full', feeds(), { y: 'return' }))['y']!.data as Float32Array;
  const c = (await engine.run('half', feeds(), { y: 'return' }))['y']!.data as Float32Array;
  let err = 0;
  let scale = 0;
  for (let i = 0; i < a.length; i++) {
    assert.ok(Number.isFinite(c[i]!), `y[${i}] = ${c[i]}: the −1e9 mask must give an exact 0 weight, not NaN`);
    err = Math.max(err, Math.abs(a[i]! - c[i]!));
    scale = Math.max(scale, Math.abs(a[i]!));
  }
  assert.ok(err / scale < 4e-3, `relative error ${err / scale} (float16 has 11 significant bits: ~5e-4 per rounding)`);
  assert.ok(err > 0, 'the half graph rounded nothing: it did not compute in float16');
});
