/**
 * Memory at real vocabularies, checked on the graphs and the batching rather than by measuring:
 * the score and train graphs hold nothing over the vocabulary per batch position ([B,T,V], or a
 * one-hot of any shape) — only per scored row ([N,V]) — and micro-batches respect their token
 * budget. `bench:engine`'s qwen2.5-0.5b case measures the resulting peak RSS.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { topoSort } from '../compiler/ir.ts';
import { scoreGraph, trainStepGraph, type GraphOutputs } from './artifacts.ts';
import { parseModelConfig } from './model-config.ts';
import { microBatches, packBatch, type TrainSequence } from './train-batch.ts';

// A vocabulary size no other dimension of the model has, so any axis of size V is one over V.
const V = 97;
const config = parseModelConfig({ vocabSize: V, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: true, attentionBias: true });
const lora = { rank: 4, alpha: 8, targets: ['q', 'v'] as const };

function overVocab(g: GraphOutputs): string[] {
  const bad: string[] = [];
  for (const n of topoSort(g.outputs.map(([, x]) => x))) {
    if (!n.shape.includes(V)) continue;
    // Per batch position: any axis tied to B or T. Allowed: [N,V] rows, [V,C] weights and their gradients.
    const perPosition = n.shape.some((d) => typeof d === 'string' && /\bB\b|\bT\b/.test(d));
    if (perPosition || n.op === 'equal') bad.push(`${n.op}[${n.shape.join(',')}]`);
  }
  return bad;
}

describe('no tensor over the vocabulary per batch position', () => {
  test('score graph (with and without an adapter)', () => {
    assert.deepEqual(overVocab(scoreGraph(config, null)), []);
    assert.deepEqual(overVocab(scoreGraph(config, lora)), []);
  });

  for (const o of [
    { loss: 'ppo', trainable: 'lora', lora, kl: true, entropy: true },
    { loss: 'ppo', trainable: 'full', lora: null, kl: true, entropy: true },
    { loss: 'ce', trainable: 'full', lora: null, kl: false, entropy: false },
  ] as const) {
    test(`train step ${o.loss}/${o.trainable} (tied embeddings: the embedding gradient is a scatter, not a one-hot GEMM)`, () => {
      const g = trainStepGraph(config, o);
      assert.deepEqual(overVocab(g), []);
      // The logits that do exist are per scored row.
      const rows = topoSort(g.outputs.map(([, x]) => x)).filter((n) => n.op === 'logSoftmax');
      assert.deepEqual(rows.map((n) => n.shape.join(',')), [`N,${V}`]);
    });
  }
});

function seq(prompt: number, response: number): TrainSequence {
  return { tokens: Int32Array.from({ length: prompt + response }, (_, i) => i % V), promptLength: prompt };
}

describe('micro-batches by token budget', () => {
  test('each pass holds at most the budget in padded tokens, in order, and a longer sequence goes alone', () => {
    const seqs = [seq(10, 5), seq(3, 2), seq(40, 9), seq(100, 50), seq(5, 5), seq(6, 6), seq(2, 1)];
    const chunks = microBatches(seqs, { tokens: 100 });
    assert.deepEqual(chunks.flat(), seqs, 'order and membership are kept');
    for (const c of chunks) {
      const padded = c.length * Math.max(...c.map((s) => s.tokens.length - 1));
      assert.ok(padded <= 100 || c.length === 1, `a pass of ${c.length} sequences holds ${padded} padded tokens`);
    }
    assert.deepEqual(
      chunks.map((c) => c.length),
      [2, 1, 1, 3],
      'greedy in order: [14,4]·2 = 28, then 48 with them would be 144, [48], [149] alone, then three short ones',
    );
  });

  test('the sequence limit still applies, and both limits together', () => {
    const seqs = Array.from({ length: 10 }, () => seq(4, 4)); // 7 packed tokens each
    assert.deepEqual(microBatches(seqs, { sequences: 4 }).map((c) => c.length), [4, 4, 2]);
    assert.deepEqual(microBatches(seqs, { sequences: 4, tokens: 21 }).map((c) => c.length), [3, 3, 3, 1]);
    assert.deepEqual(microBatches(seqs, {}).map((c) => c.length), [10]);
  });

  test('a bad limit is refused with its name', () => {
    assert.throws(() => microBatches([seq(2, 2)], { tokens: 0 }), /tokens must be ≥ 1, got 0/);
    assert.throws(() => microBatches([seq(2, 2)], { sequences: 0 }), /sequences must be ≥ 1, got 0/);
  });

  test('loss_rows lists exactly the response positions, row-major', () => {
    const p = packBatch([seq(3, 2), seq(1, 3)], V, { advantages: false, oldLogp: false, refLogp: false });
    // T = 4; sequence 0 predicts its response at t = 2, 3; sequence 1 at t = 0, 1, 2.
    assert.deepEqual(Array.from(p.tensors['loss_rows']!.data as BigInt64Array, Number), [2, 3, 4, 5, 6]);
  });
});
