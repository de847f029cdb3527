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
import { groupedByPrompt, microBatches, packBatch, type TrainSequence } from './train-batch.ts';
import { MASKED_BIAS } from './attention-bias.ts';

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

describe('rows shared by prompts', () => {
  const need = { advantages: false, oldLogp: false, refLogp: false };
  const S = (prompt: number[], response: number[]): TrainSequence => ({ tokens: Int32Array.from([...prompt, ...response]), promptLength: prompt.length });
  // Two sequences of prompt [1,2,3], one of [4,5] between them.
  const seqs = [S([1, 2, 3], [10, 11]), S([4, 5], [12]), S([1, 2, 3], [13, 14, 15])];

  test('one row per prompt: the prompt once, then per sequence its last prompt token and response', () => {
    const p = packBatch(seqs, V, need, { sharePrompts: true });
    assert.equal(p.B, 2);
    // Row 0: 1 2 | 3 10 | 3 13 14 (the second segment at positions 2 3 4); row 1: 4 | 5, padded.
    assert.equal(p.T, 7);
    const row = (name: string, b: number) => Array.from(p.tensors[name]!.data as BigInt64Array, Number).slice(b * p.T, (b + 1) * p.T);
    assert.deepEqual(row('input_ids', 0), [1, 2, 3, 10, 3, 13, 14]);
    assert.deepEqual(row('targets', 0), [2, 3, 10, 11, 13, 14, 15]);
    assert.deepEqual(row('position_ids', 0), [0, 1, 2, 3, 2, 3, 4]);
    assert.deepEqual(row('input_ids', 1).slice(0, 2), [4, 5]);
    assert.deepEqual(row('targets', 1).slice(0, 2), [5, 12]);
    // Each sequence's response predictions, by its index in the input.
    assert.deepEqual([0, 1].map((j) => p.responseIndex(0, j)), [2, 3]);
    assert.deepEqual([0].map((j) => p.responseIndex(1, j)), [7 + 1]);
    assert.deepEqual([0, 1, 2].map((j) => p.responseIndex(2, j)), [4, 5, 6]);
    assert.deepEqual(Array.from(p.tensors['loss_rows']!.data as BigInt64Array, Number), [2, 3, 4, 5, 6, 8]);
    assert.equal(p.tokenCount, 6);
  });

  test('a segment sees the shared prompt and itself, never another segment', () => {
    const p = packBatch(seqs, V, need, { sharePrompts: true });
    assert.deepEqual(p.tensors['attention_bias']!.dims, [2, 7, 7]);
    const bias = p.tensors['attention_bias']!.data as Float32Array;
    const sees = (q: number) => Array.from({ length: 7 }, (_, k) => (bias[q * 7 + k] === 0 ? k : -1)).filter((k) => k >= 0);
    assert.deepEqual(sees(1), [0, 1], 'prompt: causal');
    assert.deepEqual(sees(3), [0, 1, 2, 3], 'first segment: prompt and itself');
    assert.deepEqual(sees(4), [0, 1, 4], 'second segment: prompt, not the first segment');
    assert.deepEqual(sees(6), [0, 1, 4, 5, 6]);
    assert.ok(bias.every((v) => v === 0 || v === MASKED_BIAS));
  });

  test('without sharing the layout is one row per sequence with the causal [T,T] bias', () => {
    const p = packBatch(seqs, V, need);
    assert.equal(p.B, 3);
    assert.deepEqual(p.tensors['attention_bias']!.dims, [p.T, p.T]);
    assert.deepEqual([0, 1, 2].map((j) => p.responseIndex(2, j)), [2 * p.T + 2, 2 * p.T + 3, 2 * p.T + 4]);
  });

  test('grouping keeps prompts in order of first appearance, and micro-batches count shared rows', () => {
    assert.deepEqual(groupedByPrompt(seqs), [0, 2, 1]);
    const same = Array.from({ length: 4 }, () => S([1, 2, 3, 4, 5, 6, 7, 8, 9], [10])); // 9 packed tokens alone
    // Shared: one row of 8 + 4 = 12 tokens fits a budget of 12; one row each would need 36.
    assert.deepEqual(microBatches(same, { tokens: 12 }, { sharePrompts: true }).map((c) => c.length), [4]);
    assert.deepEqual(microBatches(same, { tokens: 12 }).map((c) => c.length), [1, 1, 1, 1]);
    assert.deepEqual(microBatches(same, { sequences: 3 }, { sharePrompts: true }).map((c) => c.length), [3, 1]);
  });
});
