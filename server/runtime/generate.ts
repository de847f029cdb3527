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
 * The fused decoder (`server/models/decode-graph.ts`) has the same contract except the cache
 * (`CacheLayout` 'batch-major': read in place, never copied by the graph); its RoPE tables cover
 * `maxPositions` positions, which a generation may not exceed.
 *
 * This file is the loop (checks, sampling, stopping, retiring finished rows); the caches live in
 * the decoders: `kv-decoder.ts` (host memory, time-major or batch-major) and `device-kv-decoder.ts`
 * (on the GPU), which build their feeds with `decode-inputs.ts`.
 */
import type * as ort from 'onnxruntime-node';
import { DeviceKvDecoder } from './device-kv-decoder.ts';
import type { DeviceTensors } from './device-tensors.ts';
import { KvDecoder } from './kv-decoder.ts';
import { maskLogits, Rng, sampleToken, streamSeed, validateSampling, type SamplingParams } from './sampler.ts';
import { MAX_TOP_LOGPROBS, topLogprobs } from './top-logprobs.ts';

export interface DecoderContract {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** The most positions (prompt + new tokens) the graph's RoPE tables cover, when bounded. */
  readonly maxPositions?: number;
  /** The cache contract: time-major (default; the plain graph) or batch-major with capacity (the fused graph). */
  readonly cacheLayout?: CacheLayout;
  /**
   * 'device': the graph also draws each row's token from its logits with a uniform the loop
   * passes in (models/device-sampling.ts), and keeps the logits on the GPU unless asked for them.
   * The loop uses it for steps after the first when sampling has no top-k/top-p truncation, a
   * temperature above 0 and no top alternatives; otherwise, and by default, it samples on the host.
   */
  readonly sampling?: 'device' | 'host';
}

/**
 * time-major: past [P,B,Hkv,D] is the filled prefix of the cache, present [T,B,Hkv,D] is written
 * straight after it; one bias `attention_bias` [B,T,P+T].
 * batch-major: past [B,Hkv,S,D] is the whole cache of capacity S (prompt + new tokens), slots not
 * yet filled masked by `attention_bias_past` [B,T,S]; present [B,Hkv,T,D] is copied into each
 * row's next slots after the run; `attention_bias` [B,T,T] covers the new positions. The graph
 * then never copies the cache (decode-graph.ts `cachedAttention`).
 * device: the cache never leaves the GPU (WebGPU). past [B,Hkv,P,D] in; the graph returns the
 * whole grown cache `cache.{i}.key|value` [B,Hkv,P+T,D], kept on the device (the session's
 * `outputsOnDevice`) and fed back at the next step; one bias `attention_bias` [B,T,P+T]. Only the
 * logits come back to the host. onnxruntime-node copies every host input to the GPU and every
 * output back on each run, so a host cache cost two copies of all of it per token.
 */
export type CacheLayout = 'time-major' | 'batch-major' | 'device';

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
  /** Drop finished rows from the batch (default true; false keeps every row to the end, for tests). */
  readonly retireFinished?: boolean;
  /** Prefill identical prompts once and copy their cache (default true; false for tests). */
  readonly sharePrompts?: boolean;
  /**
   * G: consecutive rows [g·G, (g+1)·G) hold one prompt (a tree node's K branches) and draw their
   * first tokens without replacement, so the G responses start differently wherever the sampling
   * distribution has G tokens (`sampleToken`'s `exclude`). Log-probs stay the policy's. 1 or
   * absent: every row samples independently.
   */
  readonly distinctFirst?: number;
  /**
   * The stream seed of each row (default: `streamSeed(seed, b)` for row b). A server that splits
   * one batch into requests, or joins several requests into one batch, gives each row the stream
   * it would have had alone, so the split or join samples the same tokens.
   */
  readonly rowSeeds?: readonly number[];
  /**
   * k: also report each token's k most likely alternatives and their log-probs (the OpenAI APIs'
   * `logprobs` / `top_logprobs`), under the distribution `logprobs` are reported from. 0 or absent: none.
   */
  readonly topLogprobs?: number;
  /**
   * Cancellation flags, one per row, on a SharedArrayBuffer the caller keeps (postMessage shares
   * it with the worker instead of copying it): a row whose flag the caller sets to non-zero
   * (`Atomics.store`) draws no further token; it leaves the batch at the next step (its cache
   * rows dropped, as a finished row's) and ends with the tokens it had (`GenerateResult.cancelled`).
   * Once every row is cancelled or finished the generation returns. An HTTP server sets a row's
   * flag when its client disconnects, so an abandoned request stops costing decode steps.
   */
  readonly cancel?: Int32Array;
}

/** A row's top alternatives per generated token, flat: token t's are [t·k, (t+1)·k), best first. */
export interface TopAlternatives {
  readonly ids: Int32Array;
  readonly logprobs: Float32Array;
}

/**
 * What one decoding step sampled (`generate`'s `onStep`), so a caller can pass tokens on while
 * the batch is still generating (an HTTP stream). Row `rows[i]` drew `tokens[i]`, its `n`-th token
 * (0-based); rows that had finished before the step are absent.
 */
export interface GenerateStep {
  readonly n: number;
  readonly rows: Int32Array;
  readonly tokens: Int32Array;
  readonly logprobs: Float32Array;
  /** With `topLogprobs` k: row `rows[i]`'s alternatives at [i·k, (i+1)·k). */
  readonly top?: TopAlternatives;
}

export interface GenerateResult {
  /** Generated tokens per row (prompt excluded). */
  readonly tokens: Int32Array[];
  /** Log-probability of each generated token under the temperature-scaled distribution. */
  readonly logprobs: Float32Array[];
  readonly finish: Array<'stop' | 'length'>;
  /** With `GenerateRequest.topLogprobs`: each row's alternatives per generated token. */
  readonly top?: TopAlternatives[];
  readonly prefillMs: number;
  readonly decodeMs: number;
  /**
   * Of `decodeMs`, the time inside `session.run` and the number of steps; the rest is host work
   * (feeds, sampling, cache bookkeeping). Optional so scripted policies in tests need not invent it.
   */
  readonly decodeRun?: { readonly ms: number; readonly steps: number };
  /** With `GenerateRequest.cancel`: the rows cancelled before they finished (their `finish` reads 'length'). */
  readonly cancelled?: readonly number[];
}

/**
 * Rows leave the batch once at most this fraction of it is still generating: the cache is
 * compacted (one pass over it) and later steps compute only the live rows instead of padding.
 */
const RETIRE_BELOW = 0.75;

/** The largest float32 below 1: a uniform in [0, 1) rounded to float32 could otherwise reach 1. */
const BELOW_ONE = 1 - 2 ** -24;

/** What the generation loop needs of a decoder, whichever holds the cache. */
export interface Decoder {
  readonly rows: number[];
  readonly logits: Float32Array;
  /** After a `step` given draws: each row's drawn id and log-prob (the logits are then not read). */
  readonly drawn: { readonly tokens: Int32Array; readonly logprobs: Float32Array } | null;
  readonly runMs: number;
  readonly runs: number;
  prefill(): Promise<void>;
  /** `draws`: one uniform per row, for a decoder whose contract samples on the device. */
  step(ids: BigInt64Array, n: number, draws?: Float32Array): Promise<void>;
  retain(keep: readonly number[]): Promise<void>;
  release?(): void;
}

/** Samples up to `req.maxNewTokens` tokens for every prompt in one batch, each row from its own stream. */
export async function generate(
  req: GenerateRequest,
  session: ort.InferenceSession,
  /** Graph input name → tensor: `req.params`' residents, as the session takes them (on the GPU for a WebGPU session). */
  weights: Record<string, ort.Tensor>,
  device: DeviceTensors | null = null,
  /** Called after each decoding step with the tokens it sampled, before the next step runs. */
  onStep?: (step: GenerateStep) => void,
): Promise<GenerateResult> {
  validateSampling(req.sampling);
  const V = req.contract.vocabSize;
  const B = req.prompts.length;
  if (B === 0) return { tokens: [], logprobs: [], finish: [], prefillMs: 0, decodeMs: 0, decodeRun: { ms: 0, steps: 0 } };
  if (!(Number.isInteger(req.maxNewTokens) && req.maxNewTokens > 0)) throw new Error(`maxNewTokens must be a positive integer, got ${req.maxNewTokens}`);
  const masked = req.maskedTokens ?? [];
  for (let i = 0; i < masked.length; i++) {
    const id = masked[i]!;
    if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new Error(`generate: masked token id ${id} (entry ${i}) is outside the vocabulary of ${V}`);
  }
  const lens = req.prompts.map((p) => p.length);
  const Tp = Math.max(...lens);
  if (lens.some((n) => n === 0)) throw new Error('generate: every prompt needs at least one token');
  const limit = req.contract.maxPositions ?? Infinity;
  if (Tp + req.maxNewTokens > limit) throw new Error(`generate: prompt (${Tp}) + maxNewTokens (${req.maxNewTokens}) = ${Tp + req.maxNewTokens} positions exceed the decoder's ${limit}`);
  const k = req.topLogprobs ?? 0;
  if (!(Number.isInteger(k) && k >= 0 && k <= Math.min(MAX_TOP_LOGPROBS, V))) throw new Error(`generate: topLogprobs must be an integer from 0 to ${Math.min(MAX_TOP_LOGPROBS, V)}, got ${k}`);
  if (req.cancel && req.cancel.length !== B) throw new Error(`generate: ${req.cancel.length} cancellation flags for ${B} rows`);
  const G = req.distinctFirst ?? 1;
  if (!(Number.isInteger(G) && G >= 1 && B % G === 0)) throw new Error(`generate: distinctFirst must be a positive integer dividing the batch of ${B}, got ${G}`);
  if (G > 1) {
    req.prompts.forEach((p, b) => {
      const head = req.prompts[b - (b % G)]!;
      if (p !== head && (p.length !== head.length || p.some((t, i) => t !== head[i]))) {
        throw new Error(`generate: distinctFirst ${G} groups rows ${b - (b % G)}..${b - (b % G) + G - 1}, but row ${b}'s prompt differs from row ${b - (b % G)}'s`);
      }
    });
  }
  // Cancelled while it waited for the worker: nothing to prefill.
  if (req.cancel && req.cancel.every((_, b) => Atomics.load(req.cancel!, b) !== 0)) {
    return { tokens: req.prompts.map(() => new Int32Array(0)), logprobs: req.prompts.map(() => new Float32Array(0)), finish: req.prompts.map(() => 'length'), ...(k > 0 ? { top: req.prompts.map(() => ({ ids: new Int32Array(0), logprobs: new Float32Array(0) })) } : {}), prefillMs: 0, decodeMs: 0, decodeRun: { ms: 0, steps: 0 }, cancelled: req.prompts.map((_, b) => b) };
  }
  let decoder: Decoder;
  if (req.contract.cacheLayout === 'device') {
    if (!device) throw new Error("generate: a 'device' KV cache needs the webgpu execution provider");
    decoder = new DeviceKvDecoder(req, session, weights, Tp, device);
  } else {
    decoder = new KvDecoder(req, session, weights, Tp);
  }
  try {
    return await decode(req, decoder, onStep);
  } finally {
    decoder.release?.();
  }
}

async function decode(req: GenerateRequest, decoder: Decoder, onStep?: (step: GenerateStep) => void): Promise<GenerateResult> {
  const V = req.contract.vocabSize;
  const B = req.prompts.length;
  const G = req.distinctFirst ?? 1;
  const masked = req.maskedTokens ?? [];
  const t0 = performance.now();
  await decoder.prefill();
  const t1 = performance.now();
  const prefill = { ms: decoder.runMs, runs: decoder.runs };

  if (req.rowSeeds && req.rowSeeds.length !== B) throw new Error(`generate: ${req.rowSeeds.length} row seeds for ${B} rows`);
  const rngs = Array.from({ length: B }, (_, b) => new Rng(req.rowSeeds?.[b] ?? streamSeed(req.seed, b)));
  const scratch = new Float64Array(V);
  const order = new Int32Array(V);
  const outTokens = Array.from({ length: B }, () => new Int32Array(req.maxNewTokens));
  const outLogp = Array.from({ length: B }, () => new Float32Array(req.maxNewTokens));
  const K = req.topLogprobs ?? 0;
  const outTop = K > 0 ? Array.from({ length: B }, () => ({ ids: new Int32Array(req.maxNewTokens * K), logprobs: new Float32Array(req.maxNewTokens * K) })) : null;
  const produced = new Int32Array(B);
  const done = new Array<boolean>(B).fill(false);
  const finish = new Array<'stop' | 'length'>(B).fill('length');
  const stop = new Set(req.stopTokens);
  // Steps after the first draw on the device where its graph can: the rows' streams are consumed
  // as on the host (one uniform per live row per token), so the draws are the host's.
  const onDevice = req.contract.sampling === 'device' && req.sampling.temperature > 0 && req.sampling.topK === 0 && req.sampling.topP >= 1 && K === 0;
  // First tokens already drawn in each row group (distinctFirst); rows are still in order at n = 0.
  const taken = G > 1 ? Array.from({ length: B / G }, () => new Set<number>()) : null;
  const cancelled: number[] = [];
  for (let n = 0; n < req.maxNewTokens; n++) {
    // Rows cancelled since the last step draw nothing more (a step's logits are already paid for,
    // but its tokens would go to a caller that has left).
    if (req.cancel) {
      for (const b of decoder.rows) {
        if (!done[b] && Atomics.load(req.cancel, b) !== 0) {
          done[b] = true;
          cancelled.push(b);
        }
      }
      if (done.every(Boolean)) break;
    }
    // Each row samples from its own stream, so retiring rows changes no other row's draws.
    decoder.rows.forEach((b, k) => {
      if (done[b]) return;
      const drawn = n > 0 && onDevice;
      if (masked.length > 0 && !drawn) maskLogits(decoder.logits, k * V, masked);
      const group = n === 0 && taken ? taken[Math.floor(b / G)]! : undefined;
      const { token, logprob } =
        drawn ? { token: decoder.drawn!.tokens[k]!, logprob: decoder.drawn!.logprobs[k]! } : sampleToken(decoder.logits, k * V, V, req.sampling, rngs[b]!, scratch, order, group);
      group?.add(token);
      outTokens[b]![n] = token;
      outLogp[b]![n] = logprob;
      if (outTop) topLogprobs(decoder.logits, k * V, V, req.sampling.temperature, K, outTop[b]!.ids, outTop[b]!.logprobs, n * K);
      produced[b] = n + 1;
      if (stop.has(token)) {
        done[b] = true;
        finish[b] = 'stop';
      }
    });
    if (onStep) onStep(stepOf(n, decoder.rows.filter((b) => produced[b] === n + 1), outTokens, outLogp, outTop, K));
    if (n === req.maxNewTokens - 1 || done.every(Boolean)) break;
    const live = decoder.rows.flatMap((b, k) => (done[b] ? [] : [k]));
    // A cancelled row leaves at once: its slot stops costing compute now, not once enough rows end.
    const leaving = req.cancel ? decoder.rows.some((b) => done[b] && cancelled.includes(b)) : false;
    if (req.retireFinished !== false && (leaving || live.length <= RETIRE_BELOW * decoder.rows.length)) await decoder.retain(live);
    // A finished row still in the batch is fed padding; its outputs are never read.
    const ids = BigInt64Array.from(decoder.rows, (b) => BigInt(done[b] ? req.padToken : outTokens[b]![n]!));
    await decoder.step(ids, n, onDevice ? Float32Array.from(decoder.rows, (b) => (done[b] ? 0 : Math.min(rngs[b]!.next(), BELOW_ONE))) : undefined);
  }
  const t2 = performance.now();
  return {
    tokens: outTokens.map((t, b) => t.slice(0, produced[b]!)),
    logprobs: outLogp.map((l, b) => l.slice(0, produced[b]!)),
    finish,
    ...(outTop ? { top: outTop.map((t, b) => ({ ids: t.ids.slice(0, produced[b]! * K), logprobs: t.logprobs.slice(0, produced[b]! * K) })) } : {}),
    prefillMs: t1 - t0,
    decodeMs: t2 - t1,
    decodeRun: { ms: decoder.runMs - prefill.ms, steps: decoder.runs - prefill.runs },
    ...(req.cancel ? { cancelled } : {}),
  };
}

function stepOf(n: number, rows: readonly number[], tokens: readonly Int32Array[], logprobs: readonly Float32Array[], top: readonly TopAlternatives[] | null, K: number): GenerateStep {
  const step = { n, rows: Int32Array.from(rows), tokens: Int32Array.from(rows, (b) => tokens[b]![n]!), logprobs: Float32Array.from(rows, (b) => logprobs[b]![n]!) };
  if (!top) return step;
  const ids = new Int32Array(rows.length * K);
  const lps = new Float32Array(rows.length * K);
  rows.forEach((b, i) => {
    ids.set(top[b]!.ids.subarray(n * K, (n + 1) * K), i * K);
    lps.set(top[b]!.logprobs.subarray(n * K, (n + 1) * K), i * K);
  });
  return { ...step, top: { ids, logprobs: lps } };
}
