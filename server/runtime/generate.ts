/**
 * Batched autoregressive decoding with a KV cache, run inside the engine worker so a whole
 * generation costs one message round trip.
 *
 * The decoder graph contract (built by `server/models`):
 *   inputs  input_ids [B,T] int64, position_ids [B,T] int64, attention_bias [B,T,P+T] float32,
 *           past_key_values.{i}.key|value [P,B,Hkv,D], plus the weights
 *   outputs logits [B,V] (last position only), present.{i}.key|value [T,B,Hkv,D] (new slice only)
 * The names follow the transformers.js/optimum convention; the layout does not: the cache is
 * time-major so that the past is a zero-copy prefix view of one preallocated buffer per layer and
 * the graph writes only the new slice, straight into that buffer (preallocated outputs). The
 * probe measured this layout at 1.5–2x the batch-major one.
 *
 * Ragged prompts are left-padded; padding keys are masked out by the additive bias and positions
 * count real tokens only, so a padded row computes exactly what it would alone.
 *
 * The fused decoder (`server/models/decode-graph.ts`, contract there) uses the 'batch-major'
 * layout instead: one [B,Hkv,M,D] buffer per layer that GroupQueryAttention updates in place
 * (the same memory is fed as the past and fetched as the present), ragged prompts right-padded,
 * each row's length in seqlens_k, and no bias or position inputs.
 */
import * as ort from 'onnxruntime-node';
import { Rng, sampleToken, streamSeed, validateSampling, type SamplingParams } from './sampler.ts';

export interface DecoderContract {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** KV cache layout of the graph: time-major (plain decoder) or batch-major (fused decoder). */
  readonly cache?: 'time-major' | 'batch-major';
  /** Batch-major: the most positions the graph's RoPE tables cover (prompt + new tokens). */
  readonly maxPositions?: number;
}

export interface GenerateRequest {
  readonly session: string;
  /** Graph input name → name of the resident tensor holding it (the weights). */
  readonly params: Readonly<Record<string, string>>;
  /** Prompt token ids, one array per sequence, unpadded. */
  readonly prompts: readonly Int32Array[];
  readonly maxNewTokens: number;
  readonly sampling: SamplingParams;
  readonly seed: number;
  /** Generation of a row stops after it emits one of these (the stop token is kept). */
  readonly stopTokens: readonly number[];
  readonly padToken: number;
  readonly contract: DecoderContract;
}

export interface GenerateResult {
  /** Generated tokens per row (prompt excluded). */
  readonly tokens: Int32Array[];
  /** Log-probability of each generated token under the temperature-scaled distribution. */
  readonly logprobs: Float32Array[];
  readonly finish: Array<'stop' | 'length'>;
  readonly prefillMs: number;
  readonly decodeMs: number;
}

/** Additive attention bias: 0 where attending is allowed, a large negative number elsewhere. */
const MASKED = -1e9;

/** One decoder with its KV cache: runs the prompt block, then one token per row per step. */
interface Decoder {
  prefill(): Promise<void>;
  /** Feeds `ids` [B] as the n-th generated token of each row (n = 0 is the first). */
  step(ids: BigInt64Array, n: number): Promise<void>;
}

interface DecoderArgs {
  readonly req: GenerateRequest;
  readonly session: ort.InferenceSession;
  readonly weights: Record<string, ort.Tensor>;
  readonly logits: ort.Tensor;
  readonly lens: readonly number[];
  readonly Tp: number;
}

/** Time-major cache [P,B,Hkv,D]; left-padded prompts; positions and the padding bias are inputs. */
function timeMajorDecoder({ req, session, weights, logits, lens, Tp }: DecoderArgs): Decoder {
  const { numLayers: L, numKvHeads: Hkv, headDim: D } = req.contract;
  const B = lens.length;
  const pads = lens.map((n) => Tp - n);
  const capacity = Tp + req.maxNewTokens;
  const slab = B * Hkv * D;
  const keys = Array.from({ length: L }, () => new Float32Array(capacity * slab));
  const values = Array.from({ length: L }, () => new Float32Array(capacity * slab));
  const run = async (ids: BigInt64Array, pos: BigInt64Array, bias: Float32Array, P: number, T: number): Promise<void> => {
    const feeds: Record<string, ort.Tensor> = {
      ...weights,
      input_ids: new ort.Tensor('int64', ids, [B, T]),
      position_ids: new ort.Tensor('int64', pos, [B, T]),
      attention_bias: new ort.Tensor('float32', bias, [B, T, P + T]),
    };
    const fetches: Record<string, ort.Tensor> = { logits };
    for (let i = 0; i < L; i++) {
      feeds[`past_key_values.${i}.key`] = new ort.Tensor('float32', keys[i]!.subarray(0, P * slab), [P, B, Hkv, D]);
      feeds[`past_key_values.${i}.value`] = new ort.Tensor('float32', values[i]!.subarray(0, P * slab), [P, B, Hkv, D]);
      fetches[`present.${i}.key`] = new ort.Tensor('float32', keys[i]!.subarray(P * slab, (P + T) * slab), [T, B, Hkv, D]);
      fetches[`present.${i}.value`] = new ort.Tensor('float32', values[i]!.subarray(P * slab, (P + T) * slab), [T, B, Hkv, D]);
    }
    await session.run(feeds, fetches);
  };
  const pos = new BigInt64Array(B);
  return {
    prefill: async () => {
      const ids = new BigInt64Array(B * Tp).fill(BigInt(req.padToken));
      const ppos = new BigInt64Array(B * Tp);
      const bias = new Float32Array(B * Tp * Tp).fill(MASKED);
      for (let b = 0; b < B; b++) {
        const p = req.prompts[b]!;
        for (let t = 0; t < Tp; t++) {
          const real = t >= pads[b]!;
          if (real) ids[b * Tp + t] = BigInt(p[t - pads[b]!]!);
          ppos[b * Tp + t] = BigInt(real ? t - pads[b]! : 0);
          // Key s is visible from query t when it is real and not in the future. Padding queries
          // see nothing real and get a uniform row; their outputs are never used.
          for (let s = pads[b]!; s <= t; s++) bias[(b * Tp + t) * Tp + s] = 0;
        }
      }
      await run(ids, ppos, bias, 0, Tp);
    },
    step: async (ids, n) => {
      const P = Tp + n;
      const bias = new Float32Array(B * (P + 1));
      for (let b = 0; b < B; b++) {
        pos[b] = BigInt(lens[b]! + n);
        for (let s = 0; s < pads[b]!; s++) bias[b * (P + 1) + s] = MASKED;
      }
      await run(ids, pos, bias, P, 1);
    },
  };
}

/**
 * Batch-major cache [B,Hkv,M,D] updated in place by the graph; right-padded prompts, each row's
 * length in seqlens_k. Row b's token n sits at position lens[b] + n, so rows never hold padding
 * between their tokens (a short row's prefill padding is overwritten before it is ever read).
 */
function batchMajorDecoder({ req, session, weights, logits, lens, Tp }: DecoderArgs): Decoder {
  const { numLayers: L, numKvHeads: Hkv, headDim: D } = req.contract;
  const B = lens.length;
  const M = Tp + req.maxNewTokens;
  const limit = req.contract.maxPositions ?? Infinity;
  if (M > limit) throw new Error(`generate: prompt (${Tp}) + maxNewTokens (${req.maxNewTokens}) = ${M} positions exceed the decoder's ${limit}`);
  const caches: Record<string, ort.Tensor> = {};
  for (let i = 0; i < L; i++) {
    for (const kind of ['key', 'value']) caches[`${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(B * Hkv * M * D), [B, Hkv, M, D]);
  }
  const run = async (ids: BigInt64Array, T: number, seqlens: Int32Array, total: number, rows: BigInt64Array): Promise<void> => {
    const feeds: Record<string, ort.Tensor> = {
      ...weights,
      input_ids: new ort.Tensor('int64', ids, [B, T]),
      seqlens_k: new ort.Tensor('int32', seqlens, [B]),
      total_sequence_length: new ort.Tensor('int32', Int32Array.of(total), []),
      logit_rows: new ort.Tensor('int64', rows, [B]),
    };
    const fetches: Record<string, ort.Tensor> = { logits };
    for (let i = 0; i < L; i++) {
      for (const kind of ['key', 'value']) {
        // One buffer as past and present: GroupQueryAttention then writes only the new positions.
        feeds[`past_key_values.${i}.${kind}`] = caches[`${i}.${kind}`]!;
        fetches[`present.${i}.${kind}`] = caches[`${i}.${kind}`]!;
      }
    }
    await session.run(feeds, fetches);
  };
  const seqlens = new Int32Array(B);
  const rows = BigInt64Array.from({ length: B }, (_, b) => BigInt(b));
  return {
    prefill: async () => {
      const ids = new BigInt64Array(B * Tp).fill(BigInt(req.padToken));
      const last = new BigInt64Array(B);
      for (let b = 0; b < B; b++) {
        const p = req.prompts[b]!;
        for (let t = 0; t < p.length; t++) ids[b * Tp + t] = BigInt(p[t]!);
        seqlens[b] = lens[b]! - 1;
        last[b] = BigInt(b * Tp + lens[b]! - 1);
      }
      await run(ids, Tp, seqlens, Tp, last);
    },
    step: async (ids, n) => {
      for (let b = 0; b < B; b++) seqlens[b] = lens[b]! + n;
      await run(ids, 1, seqlens, Tp + n + 1, rows);
    },
  };
}

export async function generate(
  req: GenerateRequest,
  session: ort.InferenceSession,
  resident: (name: string) => ort.Tensor,
): Promise<GenerateResult> {
  validateSampling(req.sampling);
  const V = req.contract.vocabSize;
  const B = req.prompts.length;
  if (B === 0) return { tokens: [], logprobs: [], finish: [], prefillMs: 0, decodeMs: 0 };
  if (!(Number.isInteger(req.maxNewTokens) && req.maxNewTokens > 0)) throw new Error(`maxNewTokens must be a positive integer, got ${req.maxNewTokens}`);
  const lens = req.prompts.map((p) => p.length);
  const Tp = Math.max(...lens);
  if (lens.some((n) => n === 0)) throw new Error('generate: every prompt needs at least one token');
  const logits = new Float32Array(B * V);
  const weights: Record<string, ort.Tensor> = {};
  for (const [input, name] of Object.entries(req.params)) weights[input] = resident(name);
  const args: DecoderArgs = { req, session, weights, logits: new ort.Tensor('float32', logits, [B, V]), lens, Tp };
  const decoder = req.contract.cache === 'batch-major' ? batchMajorDecoder(args) : timeMajorDecoder(args);

  const t0 = performance.now();
  await decoder.prefill();
  const t1 = performance.now();

  const rngs = Array.from({ length: B }, (_, b) => new Rng(streamSeed(req.seed, b)));
  const scratch = new Float64Array(V);
  const order = new Int32Array(V);
  const outTokens = Array.from({ length: B }, () => new Int32Array(req.maxNewTokens));
  const outLogp = Array.from({ length: B }, () => new Float32Array(req.maxNewTokens));
  const produced = new Int32Array(B);
  const done = new Array<boolean>(B).fill(false);
  const finish = new Array<'stop' | 'length'>(B).fill('length');
  const stop = new Set(req.stopTokens);
  const ids = new BigInt64Array(B);
  for (let n = 0; n < req.maxNewTokens; n++) {
    for (let b = 0; b < B; b++) {
      if (done[b]) {
        ids[b] = BigInt(req.padToken);
        continue;
      }
      const { token, logprob } = sampleToken(logits, b * V, V, req.sampling, rngs[b]!, scratch, order);
      outTokens[b]![n] = token;
      outLogp[b]![n] = logprob;
      produced[b] = n + 1;
      ids[b] = BigInt(token);
      if (stop.has(token)) {
        done[b] = true;
        finish[b] = 'stop';
      }
    }
    if (n === req.maxNewTokens - 1 || done.every(Boolean)) break;
    await decoder.step(ids, n);
  }
  const t2 = performance.now();
  return {
    tokens: outTokens.map((t, b) => t.slice(0, produced[b]!)),
    logprobs: outLogp.map((l, b) => l.slice(0, produced[b]!)),
    finish,
    prefillMs: t1 - t0,
    decodeMs: t2 - t1,
  };
}
