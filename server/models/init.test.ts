import { test } from 'node:test';
import assert from 'node:assert/strict';
import { initParameters } from './init.ts';
import { parameterShapes, parseModelConfig } from './model-config.ts';
import { writeSafetensors } from './safetensors.ts';
import { shapeParameters } from './checkpoint.ts';

const config = parseModelConfig({
  vocabSize: 40, hiddenSize: 16, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 24,
  attentionBias: true, tieEmbeddings: false,
});

const bytesOf = (params: Map<string, Float32Array>): Uint8Array =>
  writeSafetensors(shapeParameters(parameterShapes(config), params, 'init'));

test('same seed gives identical bytes; another seed differs', () => {
  const a = bytesOf(initParameters(config, 1));
  assert.deepEqual(bytesOf(initParameters(config, 1)), a);
  assert.notDeepEqual(bytesOf(initParameters(config, 2)), a);
});

test('every parameter present in order; norms ones, biases zeros, matrices ~N(0, 0.02)', () => {
  const params = initParameters(config, 3);
  assert.deepEqual([...params.keys()], parameterShapes(config).map(([n]) => n));
  for (const [name, data] of params) {
    if (name.endsWith('norm.weight')) assert.ok(data.every((v) => v === 1), name);
    else if (name.endsWith('.bias')) assert.ok(data.every((v) => v === 0), name);
    else {
      const std = Math.sqrt(data.reduce((s, v) => s + v * v, 0) / data.length);
      assert.ok(std > 0.015 && std < 0.025, `${name} std ${std}`);
    }
  }
});

test('a tensor depends only on (seed, name), not on the other parameters', () => {
  const tied = initParameters({ ...config, tieEmbeddings: true }, 5);
  const untied = initParameters(config, 5);
  assert.deepEqual(tied.get('layers.1.mlp.up.weight'), untied.get('layers.1.mlp.up.weight'));
  assert.notDeepEqual(untied.get('layers.0.mlp.up.weight'), untied.get('layers.1.mlp.up.weight'));
});

test('scaled residual init divides o/down by sqrt(2L) and leaves the rest alone', () => {
  const plain = initParameters(config, 9);
  const scaled = initParameters(config, 9, { scaleResidualProjections: true });
  const k = 1 / Math.sqrt(2 * config.numLayers);
  for (const [name, data] of scaled) {
    const ref = plain.get(name)!;
    if (/\.(attn\.o|mlp\.down)\.weight$/.test(name)) {
      data.forEach((v, i) => assert.ok(Math.abs(v - ref[i]! * k) < 1e-7, name));
    } else assert.deepEqual(data, ref, name);
  }
});

test('allocator is used', () => {
  const params = initParameters(config, 1, { alloc: (n) => new Float32Array(new SharedArrayBuffer(4 * n)) });
  for (const d of params.values()) assert.ok(d.buffer instanceof SharedArrayBuffer);
});
