/**
 * Pure compiler tests: symbolic dims, interning, construction and verifier errors that name the
 * culprit, deterministic emission.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildTrainStep } from '../models/artifacts.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { dimAdd, dimMul, evalDim } from './dims.ts';
import { Graph, GraphError, type Node } from './ir.ts';
import { emitOnnx } from './onnx-emit.ts';
import { verify } from './verify.ts';

test('symbolic dims: canonical products and sums', () => {
  assert.equal(dimMul('T', 'B'), 'B*T');
  assert.equal(dimMul(dimMul(2, 'T'), dimMul('B', 3)), '6*B*T');
  assert.equal(dimAdd('T', 'P'), '(P+T)');
  assert.equal(dimAdd(0, 'T'), 'T');
  assert.equal(evalDim(dimMul('B', dimAdd('P', 'T')), { B: 2, P: 3, T: 4 }), 14);
});

test('identical expressions are one node (interning)', () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['B', 4]);
  const y1 = b.exp(b.mul(x, b.like(x, 2)));
  const y2 = b.exp(b.mul(x, b.like(x, 2)));
  assert.equal(y1, y2);
  assert.notEqual(b.exp(b.mul(x, b.like(x, 3))), y1);
  assert.ok(Object.isFrozen(y1) && Object.isFrozen(y1.inputs));
});

function throwsGraphError(fn: () => unknown, re: RegExp): void {
  assert.throws(fn, (e: unknown) => e instanceof GraphError && re.test(e.message));
}

test('shape errors name the op, the new node and the operand shapes', () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['B', 3]);
  const w = b.input('w', 'float32', [4, 5]);
  throwsGraphError(() => b.matmul(x, w), /^matmul \(new node %\d+\) failed: matmul inner dims differ: \[B, 3\] @ \[4, 5\]; inputs: %0 matmul|^matmul \(new node %\d+\) failed: matmul inner dims differ: \[B, 3\] @ \[4, 5\]; inputs: %\d+ input 'x'/);
  throwsGraphError(() => b.add(x, w), /add .*shapes \[B, 3\] and \[4, 5\] do not broadcast/);
  throwsGraphError(() => b.reshape(x, [4, 'B']), /cannot reshape \[B, 3\] \(3\*B elements\) to \[4, B\]/);
  throwsGraphError(() => b.input('x', 'float32', ['B', 4]), /input 'x' redeclared as float32\[B, 4\], was float32\[B, 3\]/);
  throwsGraphError(() => b.gather(w, x, 0), /gather indices must be int64, got float32/);
  throwsGraphError(() => b.transpose(x, [0, 0]), /perm \[0,0\] is not a permutation of rank 2/);
});

test('the verifier rejects a node whose recorded shape its op does not produce, naming it', () => {
  const b = new Graph();
  const x = b.input('x', 'float32', [2, 3]);
  const y = b.exp(x);
  const forged: Node = { ...y, id: 999, shape: [3, 2] };
  assert.throws(() => verify([['y', forged]]), /verifier: %999 exp float32\[3, 2\] records float32\[3, 2\] but its inputs give float32\[2, 3\]/);
  const other = new Graph();
  const x2 = other.input('x', 'float32', [2, 3]);
  assert.throws(() => verify([['y', b.add(x, x)], ['z', other.exp(x2)]]), /two different inputs named 'x'/);
});

test('a reshape ONNX cannot express statically is refused at emission, naming the node', () => {
  const b = new Graph();
  const x = b.input('x', 'float32', ['N', 4]);
  const y = b.reshape(b.reshape(x, [dimMul('N', 4)]), ['N', 2, 2]);
  assert.doesNotThrow(() => emitOnnx([['y', y]], { name: 'ok' }));
  const z = b.input('z', 'float32', [dimMul('B', 'T'), 4]);
  assert.throws(() => emitOnnx([['r', b.reshape(z, ['B', 'T', 4])]], { name: 'bad' }), /reshape %\d+ reshape float32\[B, T, 4\] from \[B\*T, 4\] cannot be expressed statically/);
});

test('emission is deterministic: the same model gives the same bytes', () => {
  const config = parseModelConfig({ vocabSize: 30, hiddenSize: 16, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 32 });
  const opts = { loss: 'ppo', trainable: 'full', lora: null, kl: true, entropy: true } as const;
  const a = buildTrainStep(config, opts).bytes;
  const b = buildTrainStep(config, opts).bytes;
  assert.ok(a.length > 10_000);
  assert.deepEqual(Buffer.from(a).toString('base64'), Buffer.from(b).toString('base64'));
  const c = buildTrainStep({ ...config, ropeTheta: 5000 }, opts).bytes;
  assert.notDeepEqual(Buffer.from(a).toString('base64'), Buffer.from(c).toString('base64'));
});
