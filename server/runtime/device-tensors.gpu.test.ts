/**
 * WebGPU sessions take resident tensors from device copies (device-tensors.ts): one host→device
 * copy per resident until the host tensor is written, and every way of writing it (a run's output
 * written into it, accumulate, a new upload) makes the next run see the new values.
 *
 * Runs wherever Dawn finds an adapter (lavapipe in CI: test/gpu/setup-webgpu.sh) and skips,
 * naming what is missing, elsewhere.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from './engine.ts';
import { f32 } from './tensor.ts';

const gpu = await Engine.start({ executionProvider: 'webgpu', threads: 1, log: () => {} });
const skip = gpu.provider === 'webgpu' ? false : `no WebGPU adapter on this machine (${gpu.providerReason}); bash test/gpu/setup-webgpu.sh installs lavapipe`;
after(() => gpu.close());

const N = 4;
before(async () => {
  if (skip) return;
  const b = new Graph();
  const x = b.input('x', 'float32', ['B', N]);
  const w = b.input('w', 'float32', [N, N]);
  await gpu.createSession('mm', emitOnnx([['y', b.matmul(x, w)]], { name: 'mm' }));
  // Writes 2·w into a resident (the way a train step writes its updated weights).
  await gpu.createSession('double', emitOnnx([['w2', b.mul(w, b.scalar(2, 'float32'))]], { name: 'double' }));
});

const x = () => f32([1, N], [1, 0, 0, 0]);
/** Row 0 of w, as the product reads it. */
async function firstRow(): Promise<number[]> {
  const out = await gpu.run('mm', { x: x(), w: { resident: 'w' } }, { y: 'return' });
  return [...(out['y']!.data as Float32Array)];
}

test('a resident is copied to the device once, and again only after it is written', { skip }, async () => {
  await gpu.upload('w', f32([N, N], Array.from({ length: N * N }, (_, i) => i)));
  const before = (await gpu.stats()).deviceUploads;
  assert.deepEqual(await firstRow(), [0, 1, 2, 3]);
  assert.deepEqual(await firstRow(), [0, 1, 2, 3]);
  let stats = await gpu.stats();
  assert.equal(stats.deviceUploads - before, 1, 'two runs on an unchanged resident copy it once');
  assert.equal(stats.deviceCopies, 1);
  assert.equal(stats.deviceCopyBytes, N * N * 4);

  // A run writes its output into the resident: the next run reads the new values.
  await gpu.run('double', { w: { resident: 'w' } }, { w2: { into: 'w2', dtype: 'float32', dims: [N, N] } });
  await gpu.swap([['w', 'w2']]);
  assert.deepEqual(await firstRow(), [0, 2, 4, 6], 'the copy of the swapped-in tensor');
  await gpu.run('double', { w: { resident: 'w' } }, { w2: { into: 'w', dtype: 'float32', dims: [N, N] } });
  assert.deepEqual(await firstRow(), [0, 4, 8, 12], 'a run wrote into the resident fed to it');

  // accumulate writes in place.
  await gpu.upload('g', f32([N, N], new Array<number>(N * N).fill(1)));
  await gpu.accumulate([['w', 'g']], 0.5);
  assert.deepEqual(await firstRow(), [0.5, 4.5, 8.5, 12.5]);

  // A new upload replaces the tensor; a drop frees its copy.
  await gpu.upload('w', f32([N, N], new Array<number>(N * N).fill(7)));
  assert.deepEqual(await firstRow(), [7, 7, 7, 7]);
  const held = (await gpu.stats()).deviceCopies;
  await gpu.drop(['w']);
  stats = await gpu.stats();
  assert.equal(stats.deviceCopies, held - 1, 'dropping a resident frees its device copy');
});
