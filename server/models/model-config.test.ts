import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parameterShapes, parseModelConfig } from './model-config.ts';

const base = { vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 4, intermediateSize: 128 };

test('a config whose heads do not divide the width is refused, naming the field', () => {
  assert.throws(() => parseModelConfig({ ...base, numHeads: 5 }), /invalid model config:\n {2}numHeads: numHeads \(5\) must divide hiddenSize \(64\), or headDim must be given/);
  assert.throws(() => parseModelConfig({ ...base, numKvHeads: 3 }), /numKvHeads: numKvHeads \(3\) must divide numHeads \(4\)/);
  assert.throws(() => parseModelConfig({ ...base, headDim: 7 }), /headDim: the head dimension \(7: headDim, or hiddenSize \/ numHeads\) must be even/);
  assert.throws(() => parseModelConfig({ ...base, hiddenSize: -1 }), /hiddenSize: /);
  assert.throws(() => parseModelConfig({ ...base, numLayer: 3 }), /numLayer/);
});

test('parameter shapes follow the config (GQA, untied head, biases)', () => {
  const c = parseModelConfig({ ...base, numKvHeads: 2, tieEmbeddings: false, attentionBias: true });
  const shapes = new Map(parameterShapes(c));
  assert.deepEqual(shapes.get('layers.1.attn.k.weight'), [32, 64]);
  assert.deepEqual(shapes.get('layers.0.attn.q.bias'), [64]);
  assert.deepEqual(shapes.get('lm_head.weight'), [112, 64]);
  assert.equal(parameterShapes(parseModelConfig(base)).some(([n]) => n === 'lm_head.weight'), false);
});
