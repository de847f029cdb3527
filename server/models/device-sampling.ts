/**
 * Sampling inside the decode graph, so that a GPU decode step returns B token ids and log-probs
 * instead of B×V logits. At Qwen's vocabulary (151,936) and 64 rows the host path downloads 39 MB
 * of logits per step and spends about 60–140 ms in JavaScript drawing from them
 * (`sampleToken`); on the device the draw is a few small kernels.
 *
 * The draw is the host sampler's inverse CDF with the host's uniform (one per row per step from
 * the row's own stream, `GenerateRequest` seeds): the token is the first id whose running sum of
 * weights exceeds u·total, so the same u picks the same token except where float32 sums (here)
 * and float64 sums (host) put a boundary on different sides of u·total. The running sum is two
 * level: per-block sums of S ids, their prefix sums as a product with a triangular matrix, then
 * the prefix sums within the chosen block, because ONNX Runtime's WebGPU CumSum sums each output
 * from the start of its axis (quadratic in V).
 *
 * Covers temperature > 0 without top-k/top-p truncation; `sample_keep` zeroes ids never to be
 * sampled (a tokenizer's unused ids) in both the draw and the normalizer, as `maskLogits` does on
 * the host. Anything else samples on the host from the logits (generate.ts).
 */
import type { Graph, Node } from '../compiler/ir.ts';
import { SAMPLE_INPUTS } from '../runtime/decode-inputs.ts';

/** Ids per block of the two-level running sum (about √V at Qwen's vocabulary). */
export const SAMPLE_BLOCK = 512;

/** The upper triangle with its diagonal: t[i][j] = 1 where i ≤ j, so x·t is x's running sum. */
function runningSumMatrix(b: Graph, n: number): Node {
  const t = new Float32Array(n * n);
  for (let i = 0; i < n; i++) for (let j = i; j < n; j++) t[i * n + j] = 1;
  return b.constant(t, [n, n], 'float32');
}

/**
 * The index along the last axis of x [R, n] at which the running sum `cum` first exceeds `at`
 * [R, 1], clamped to the last id with weight (rounding can leave `at` at or past the total), as
 * float32 [R, 1] (exact: n ≤ 2^24).
 */
function firstAbove(b: Graph, x: Node, cum: Node, at: Node, n: number): Node {
  const above = b.reduceSum(b.cast(b.greater(cum, at), 'float32'), [1], true); // [R,1]
  const index = b.sub(b.like(above, n), above);
  const lastWeighted = b.reduceMax(b.mul(positions(b, n), b.cast(b.greater(x, b.like(x, 0)), 'float32')), [1], true);
  return b.min(index, lastWeighted);
}

/** A float32 [n] constant 0, 1, …, n − 1 (positions compared with float indices, exact below 2^24). */
function positions(b: Graph, n: number): Node {
  return b.constant(Array.from({ length: n }, (_, i) => i), [n], 'float32');
}

/**
 * The sampling tail on logits [B, V]: returns the drawn ids [B] and their log-probs [B], both
 * float32 (ids are exact below 2^24). Declares the `SAMPLE_INPUTS` on `b`. Indices stay floats
 * and picks are selects (Equal with positions, Where, ReduceSum): ONNX Runtime's WebGPU provider
 * has no int64 Cast, and a CPU node in the tail would copy to the host mid-graph on every step.
 */
export function sampleOnDevice(b: Graph, logits: Node, vocabSize: number, block = SAMPLE_BLOCK): { token: Node; logprob: Node } {
  const V = vocabSize;
  const S = Math.min(block, V);
  const G = Math.ceil(V / S);
  const u = b.unsqueeze(b.input(SAMPLE_INPUTS.uniform, 'float32', ['B']), [1]); // [B,1]
  const invT = b.input(SAMPLE_INPUTS.inverseTemperature, 'float32', [1]);
  const keep = b.input(SAMPLE_INPUTS.keep, 'float32', [V]);
  const zero = b.like(logits, 0);

  const z = b.mul(b.sub(logits, b.reduceMax(logits, [1], true)), invT); // [B,V], ≤ 0
  const w = b.mul(b.exp(z), keep); // [B,V] weights
  const logTotal = b.log(b.reduceSum(w, [1], true)); // [B,1]

  // Blocks of S ids (the last padded with zero weights), their running sums, the threshold.
  const blocks = b.reshape(b.pad(w, 1, 0, G * S - V), ['B', G, S]); // [B,G,S]
  const blockSums = b.reduceSum(blocks, [2]); // [B,G]
  const blockCum = b.matmul(blockSums, runningSumMatrix(b, G)); // [B,G]
  const at = b.mul(u, b.slice(blockCum, 1, G - 1, G)); // u·total, [B,1]
  const g = firstAbove(b, blockSums, blockCum, at, G); // [B,1]
  const inG = b.equal(positions(b, G), g); // [B,G]: block g

  // Within block g: the weight before it, its ids' running sums, the first above the rest of u·total.
  const before = b.reduceSum(b.where(inG, b.sub(blockCum, blockSums), zero), [1], true); // [B,1]
  const rest = b.max(b.sub(at, before), zero);
  const inBlock = b.reduceSum(b.where(b.unsqueeze(inG, [2]), blocks, zero), [1]); // [B,S]
  const s = firstAbove(b, inBlock, b.matmul(inBlock, runningSumMatrix(b, S)), rest, S); // [B,1]

  const id = b.add(b.mul(g, b.like(g, S)), s); // [B,1]
  const picked = b.reduceSum(b.where(b.equal(positions(b, V), id), z, zero), [1], true); // z at id, [B,1]
  return { token: b.squeeze(id, [1]), logprob: b.squeeze(b.sub(picked, logTotal), [1]) };
}
