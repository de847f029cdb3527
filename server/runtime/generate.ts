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
 * The fused decoder (`server/models/decode-graph.ts`) has the same contract; its RoPE tables cover
 * `maxPositions` positions, which a generation may not exceed.
 */
import * as ort from 'onnxruntime-node';
import { maskLogits, Rng, sampleToken, streamSeed, validateSampling, type SamplingParams } from './sampler.ts';

export interface DecoderContract {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** The most positions (prompt + new tokens) the graph's RoPE tables cover, when bounded. */
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
  /** Ids never sampled: a model's padded vocabulary rows (`HfTokenizer.unusedIds`). */
  readonly maskedTokens?: ArrayLike<number>;
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

/** A decoder with its KV cache: runs the prompt block, then one token per row per step. */
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
  const masked = req.maskedTokens ?? [];
  for (let i = 0; i < masked.length; i++) {
    const id = masked[i]!;
    if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`generate: masked token id ${id} (entry ${i}) is outside the vocabulary of ${V}`);
  }
  const lens = req.prompts.map((p) => p.length);
  const Tp = Math.max(...lens);
  if (lens.some((n) => n === 0)) throw new Error('generate: every prompt needs at least one token');
  const logits = new Float32Array(B * V);
  const weights: Record<string, ort.Tensor> = {};
  for (const [input, name] of Object.entries(req.params)) weights[input] = resident(name);
  const args: DecoderArgs = { req, session, weights, logits: new ort.Tensor('float32', logits, [B, V]), lens, Tp };
  const limit = req.contract.maxPositions ?? Infinity;
  if (Tp + req.maxNewTokens > limit) throw new Error(`generate: prompt (${Tp}) + maxNewTokens (${req.maxNewTokens}) = ${Tp + req.maxNewTokens} positions exceed the decoder's ${limit}`);
  const decoder = timeMajorDecoder(args);

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
      if (masked.length > 0) maskLogits(logits, b * V, masked);
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
