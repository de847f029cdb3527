/**
 * `emitOnnx(…, { logSoftmax: 'primitives' })`, the lowering for GPU providers without a
 * LogSoftmax kernel, computes what ONNX's LogSoftmax computes, forward and backward (the
 * backward is the primitive's gradient rule either way; only the forward node changes).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32, f64 } from '../runtime/tensor.ts';
import { gradients } from './autodiff.ts';
import { Graph } from './ir.ts';
import type { DType } from './ops.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

const values = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7) * 6 + (i % 5 === 0 ? 40 : 0));

function model(dtype: 'float32' | 'float64', logSoftmax: 'fused' | 'primitives'): Uint8Array {
  const b = new Graph();
  const x = b.input('x', dtype as DType, [4, 7]);
  const y = b.logSoftmax(x, -1); // [4,7]
  const w = b.constant(values(28).map((v) => v / 10), [4, 7], dtype as DType);
  const [g] = gradients(b, b.reduceSum(b.mul(y, w), [0, 1]), [x]);
  return emitOnnx([['y', y], ['g', g!]], { name: 'log-softmax', logSoftmax });
}

const hasOp = (bytes: Uint8Array, op: string) => Buffer.from(bytes).includes(Buffer.from(op));

test('the primitives lowering has no LogSoftmax node and equals the fused one (float64 to 1e-12, float32 to 1 ulp-ish)', async () => {
  for (const dtype of ['float64', 'float32'] as const) {
    const fused = model(dtype, 'fused');
    const prim = model(dtype, 'primitives');
    assert.ok(hasOp(fused, 'LogSoftmax'));
    assert.ok(!hasOp(prim, 'LogSoftmax'), 'primitives lowering still emits LogSoftmax');
    await engine.createSession(`fused-${dtype}`, fused, { optimization: 'basic' });
    await engine.createSession(`prim-${dtype}`, prim, { optimization: 'basic' });
    const x = () => (dtype === 'float64' ? f64([4, 7], values(28)) : f32([4, 7], values(28)));
    const a = await engine.run(`fused-${dtype}`, { x: x() }, { y: 'return', g: 'return' });
    const c = await engine.run(`prim-${dtype}`, { x: x() }, { y: 'return', g: 'return' });
    const tol = dtype === 'float64' ? 1e-12 : 1e-5;
    for (const out of ['y', 'g']) {
      const u = a[out]!.data as Float64Array | Float32Array;
      const v = c[out]!.data as Float64Array | Float32Array;
      u.forEach((p, i) => assert.ok(Math.abs(p - v[i]!) <= tol * Math.max(1, Math.abs(p)), `${dtype} ${out}[${i}]: fused ${p}, primitives ${v[i]}`));
    }
  }
});
