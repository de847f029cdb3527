/**
 * Feeds travel to the engine worker by transfer, which detaches the sender's buffer. Reusing such
 * a feed for a second call used to hang the call (and the process exited without a word); it must
 * fail at once, naming the tensor, and leave the engine usable.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Graph } from '../compiler/ir.ts';
import { emitOnnx } from '../compiler/onnx-emit.ts';
import { Engine } from './engine.ts';
import { f32 } from './tensor.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 1, log: () => {} });
  const b = new Graph();
  const x = b.input('x', 'float32', ['N']);
  await engine.createSession('double', emitOnnx([['y', b.add(x, x)]], { name: 'double' }));
});
after(async () => {
  await engine.close();
});

test('a feed whose buffer an earlier call transferred is refused by name, and the engine still runs', async () => {
  const feeds = { x: f32([3], [1, 2, 3]) };
  const first = await engine.run('double', feeds, { y: 'return' });
  assert.deepEqual([...(first['y']!.data as Float32Array)], [2, 4, 6]);
  await assert.rejects(engine.run('double', feeds, { y: 'return' }), /run 'double': tensor 'x' has 0 elements for dims \[3\] \(3\): its buffer was transferred to the engine by an earlier call/);
  await assert.rejects(engine.upload('w', feeds.x), /upload 'w': tensor 'w' has 0 elements/);
  const again = await engine.run('double', { x: f32([2], [5, 6]) }, { y: 'return' });
  assert.deepEqual([...(again['y']!.data as Float32Array)], [10, 12]);
});

test('a feed whose data does not match its dims is refused before it is sent', async () => {
  await assert.rejects(engine.run('double', { x: { dtype: 'float32', dims: [4], data: new Float32Array(3) } }, { y: 'return' }), /tensor 'x' has 3 elements for dims \[4\] \(4\)$/);
});
