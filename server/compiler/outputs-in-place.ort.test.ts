/**
 * `emitOnnx(…, { outputsInPlace: true })`: an output computed by a node takes its public name on
 * that node (no Identity copying it each run); inputs, constants and a second name for the same
 * value still go through Identity. The values are the same either way, including an output that
 * other nodes also read.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { f32 } from '../runtime/tensor.ts';
import { Graph } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

function outputs(): Array<[string, ReturnType<Graph['input']>]> {
  const b = new Graph();
  const x = b.input('x', 'float32', ['N', 3]);
  const t = b.transpose(x, [1, 0]); // an output that later nodes also read
  const y = b.matmul(x, t); // [N,N]
  const z = b.reduceSum(b.exp(t), [1]); // [3]
  const c = b.constant([1, 2, 3], [3], 'float32');
  return [['t', t], ['y', y], ['y_again', y], ['z', z], ['x_out', x], ['c', b.add(z, c)], ['c_const', c]];
}

test('outputsInPlace drops the Identity of computed outputs and computes the same values', async () => {
  const plain = emitOnnx(outputs(), { name: 'outs' });
  const inPlace = emitOnnx(outputs(), { name: 'outs', outputsInPlace: true });
  const identities = (bytes: Uint8Array) => Buffer.from(bytes).toString('latin1').split('.Identity').length - 1;
  assert.equal(identities(plain), 7);
  // y_again (second name of y), x_out (an input) and c_const (a constant) keep theirs.
  assert.equal(identities(inPlace), 3);
  assert.deepEqual(emitOnnx(outputs(), { name: 'outs', outputsInPlace: true }), inPlace, 'deterministic emission');
  await engine.createSession('plain', plain, {});
  await engine.createSession('in-place', inPlace, {});
  const feed = () => ({ x: f32([4, 3], Array.from({ length: 12 }, (_, i) => Math.cos(i) * 2)) });
  const want = { t: 'return', y: 'return', y_again: 'return', z: 'return', x_out: 'return', c: 'return', c_const: 'return' } as const;
  const a = await engine.run('plain', feed(), want);
  const b = await engine.run('in-place', feed(), want);
  for (const name of Object.keys(want)) {
    assert.deepEqual([...b[name]!.dims], [...a[name]!.dims], name);
    assert.deepEqual([...(b[name]!.data as Float32Array)], [...(a[name]!.data as Float32Array)], name);
  }
});
