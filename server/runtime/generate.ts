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
 */
import * as ort from 'onnxruntime-node';
import type { DeviceTensors } from './device-tensors.ts';
import { maskLogits, Rng, sampleToken, streamSeed, validateSampling, type SamplingParams } from './sampler.ts';

export interface DecoderContract {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** The most positions (prompt + new tokens) the graph's RoPE tables cover, when bounded. */
  readonly maxPositions?: number;
  /** The cache contract: time-major (default; the plain graph) or batch-major with capacity (the fused graph). */
  readonly cacheLayout?: CacheLayout;
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
   * The index of row 0 in a larger batch this request is part of (default 0): row b samples from
   * the stream of (seed, firstRow + b), so a batch split into requests (an engine fleet) samples
   * what it would as one.
   */
  readonly firstRow?: number;
}

export interface GenerateResult {
  /** Generated tokens per row (prompt excluded). */
  readonly tokens: Int32Array[];
  /** Log-probability of each generated token under the temperature-scaled distribution. */
  readonly logprobs: Float32Array[];
  readonly finish: Array<'stop' | 'length'>;
  readonly prefillMs: number;
  readonly decodeMs: number;
  /**
   * Of `decodeMs`, the time inside `session.run` and the number of steps; the rest is host work
   * (feeds, sampling, cache bookkeeping). Optional so scripted policies in tests need not invent it.
   */
  readonly decodeRun?: { readonly ms: number; readonly steps: number };
}

/** Additive attention bias: 0 where attending is allowed, a large negative number elsewhere. */
const MASKED = -1e9;

/**
 * Rows leave the batch once at most this fraction of it is still generating: the cache is
 * compacted (one pass over it) and later steps compute only the live rows instead of padding.
 */
const RETIRE_BELOW = 0.75;

/** batch-major cache: slots added per row at a time (see `KvDecoder.reserve`). */
const CAPACITY_STEP = 16;

/**
 * Rows that share a prompt: u[b], the index among the distinct prompts of row b's (numbered by
 * first occurrence, so u[b] ≤ b), and the first row of each distinct prompt. Every row is its own
 * with `sharePrompts` false.
 */
function promptClasses(req: GenerateRequest, rows: readonly number[]): { u: number[]; distinct: number[] } {
  const first = new Map<string, number>();
  const u = rows.map((b) => {
    const key = req.sharePrompts === false ? String(b) : req.prompts[b]!.join(',');
    let i = first.get(key);
    if (i === undefined) first.set(key, (i = first.size));
    return i;
  });
  return { u, distinct: [...first.values()].map((i) => u.indexOf(i)) };
}

/** The prompt block's inputs for `rows`, left-padded to Tp: ids, positions and bias [B,Tp,Tp]. */
function prefillInputs(req: GenerateRequest, rows: readonly number[], Tp: number): { ids: BigInt64Array; pos: BigInt64Array; bias: Float32Array } {
  const B = rows.length;
  const ids = new BigInt64Array(B * Tp).fill(BigInt(req.padToken));
  const pos = new BigInt64Array(B * Tp);
  const bias = new Float32Array(B * Tp * Tp).fill(MASKED);
  rows.forEach((row, b) => {
    const p = req.prompts[row]!;
    const pad = Tp - p.length;
    for (let t = 0; t < Tp; t++) {
      const real = t >= pad;
      if (real) ids[b * Tp + t] = BigInt(p[t - pad]!);
      pos[b * Tp + t] = BigInt(real ? t - pad : 0);
      // Key s is visible from query t when it is real and not in the future. Padding queries
      // see nothing real and get a uniform row; their outputs are never used.
      for (let s = pad; s <= t; s++) bias[(b * Tp + t) * Tp + s] = 0;
    }
  });
  return { ids, pos, bias };
}

/** One step's positions and bias [B,1,P+1] for `rows` after P cached positions: the n-th generated token. */
function stepInputs(req: GenerateRequest, rows: readonly number[], Tp: number, P: number, n: number): { pos: BigInt64Array; bias: Float32Array } {
  const B = rows.length;
  const pos = new BigInt64Array(B);
  const bias = new Float32Array(B * (P + 1));
  rows.forEach((row, k) => {
    const len = req.prompts[row]!.length;
    pos[k] = BigInt(len + n);
    for (let s = 0; s < Tp - len; s++) bias[k * (P + 1) + s] = MASKED;
  });
  return { pos, bias };
}

/** Logits [U,V] of the distinct prompts spread to every row: row b gets u[b]'s. */
function spreadLogits(logits: Float32Array<ArrayBufferLike>, u: readonly number[], V: number): Float32Array {
  const out = new Float32Array(u.length * V);
  u.forEach((i, b) => out.set(logits.subarray(i * V, (i + 1) * V), b * V));
  return out;
}

/**
 * The KV cache and the decode graph's calls: the prompt block, then one token per live row per
 * step. Time-major cache [P,B,Hkv,D]; left-padded prompts; positions and the padding bias are
 * inputs. `retain` drops finished rows from the batch.
 */
class KvDecoder {
  /** Original row index of each row of the current batch. */
  rows: number[];
  /** Logits of the last call, [rows, V]. */
  logits: Float32Array;
  private readonly keys: Float32Array[];
  private readonly values: Float32Array[];
  private readonly Hkv: number;
  private readonly D: number;
  private readonly layout: CacheLayout;
  /** batch-major: slots per row and head now, and the most a generation needs (prompt + fed tokens). */
  private S: number;
  private readonly maxS: number;
  /** batch-major: where in each cache buffer a run's present outputs land, past every cache slot. */
  private readonly presentAt: number;
  /** Positions written into the cache so far. */
  private filled = 0;
  /** Milliseconds spent inside `session.run`, and the number of runs. */
  runMs = 0;
  runs = 0;

  constructor(
    private readonly req: GenerateRequest,
    private readonly session: ort.InferenceSession,
    private readonly weights: Record<string, ort.Tensor>,
    private readonly Tp: number,
  ) {
    const { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V } = req.contract;
    this.Hkv = Hkv;
    this.D = D;
    const B = req.prompts.length;
    this.rows = Array.from({ length: B }, (_, b) => b);
    this.logits = new Float32Array(B * V);
    this.layout = req.contract.cacheLayout ?? 'time-major';
    // The prompt and every fed token; the last sampled token is never fed.
    this.maxS = Tp + req.maxNewTokens - 1;
    this.S = Math.min(this.maxS, Tp + CAPACITY_STEP);
    this.presentAt = B * Hkv * this.maxS * D;
    const size = this.layout === 'batch-major' ? this.presentAt + B * Hkv * Tp * D : (Tp + req.maxNewTokens) * B * Hkv * D;
    this.keys = Array.from({ length: L }, () => new Float32Array(size));
    this.values = Array.from({ length: L }, () => new Float32Array(size));
  }

  /**
   * batch-major: makes room for `need` slots per row. The graph reads every slot, filled or not,
   * so capacity grows in steps of CAPACITY_STEP rather than starting at the most a generation
   * needs; each growth moves the rows apart in place (from the last row, whose target lies past
   * every row not yet moved).
   */
  private reserve(need: number): void {
    if (need <= this.S) return;
    const S = Math.min(this.maxS, need + CAPACITY_STEP);
    const { Hkv, D } = this;
    const B = this.rows.length;
    const n = this.filled * D;
    for (const buf of [...this.keys, ...this.values]) {
      for (let r = B * Hkv - 1; r > 0; r--) buf.copyWithin(r * S * D, r * this.S * D, r * this.S * D + n);
    }
    this.S = S;
  }

  /** Floats of one batch row of the cache: [Hkv,S,D] (batch-major) or one position's [Hkv,D] (time-major). */
  private get rowFloats(): number {
    return this.layout === 'batch-major' ? this.Hkv * this.S * this.D : this.Hkv * this.D;
  }

  /**
   * One call of the graph on T new positions per row. `bias` [B,T,P+T] masks keys as the
   * time-major graph reads them (past positions, then the new ones).
   */
  private async run(ids: BigInt64Array, pos: BigInt64Array, bias: Float32Array, T: number): Promise<void> {
    const B = this.rows.length;
    const P = this.filled;
    const { Hkv, D } = this;
    const feeds: Record<string, ort.Tensor> = {
      ...this.weights,
      input_ids: new ort.Tensor('int64', ids, [B, T]),
      position_ids: new ort.Tensor('int64', pos, [B, T]),
    };
    const fetches: Record<string, ort.Tensor> = { logits: new ort.Tensor('float32', this.logits, [B, this.req.contract.vocabSize]) };
    if (this.layout === 'batch-major') {
      this.reserve(P + T);
      const { S } = this;
      // Split the bias at P: past positions go to the capacity-S past block (slots ≥ P masked).
      const past = new Float32Array(B * T * S).fill(MASKED);
      const fresh = new Float32Array(B * T * T);
      for (let r = 0; r < B * T; r++) {
        past.set(bias.subarray(r * (P + T), r * (P + T) + P), r * S);
        fresh.set(bias.subarray(r * (P + T) + P, (r + 1) * (P + T)), r * T);
      }
      feeds['attention_bias_past'] = new ort.Tensor('float32', past, [B, T, S]);
      feeds['attention_bias'] = new ort.Tensor('float32', fresh, [B, T, T]);
      const n = B * Hkv * S * D;
      this.keys.forEach((k, i) => {
        feeds[`past_key_values.${i}.key`] = new ort.Tensor('float32', k.subarray(0, n), [B, Hkv, S, D]);
        feeds[`past_key_values.${i}.value`] = new ort.Tensor('float32', this.values[i]!.subarray(0, n), [B, Hkv, S, D]);
        fetches[`present.${i}.key`] = new ort.Tensor('float32', k.subarray(this.presentAt, this.presentAt + B * Hkv * T * D), [B, Hkv, T, D]);
        fetches[`present.${i}.value`] = new ort.Tensor('float32', this.values[i]!.subarray(this.presentAt, this.presentAt + B * Hkv * T * D), [B, Hkv, T, D]);
      });
      const t0 = performance.now();
      await this.session.run(feeds, fetches);
      this.runMs += performance.now() - t0;
      this.runs++;
      // Each (row, head)'s T new positions go to its slots P..P+T.
      const run = T * D;
      for (const buf of [...this.keys, ...this.values]) {
        for (let r = 0; r < B * Hkv; r++) buf.copyWithin((r * S + P) * D, this.presentAt + r * run, this.presentAt + (r + 1) * run);
      }
      this.filled += T;
      return;
    }
    const slab = B * Hkv * D;
    feeds['attention_bias'] = new ort.Tensor('float32', bias, [B, T, P + T]);
    this.keys.forEach((k, i) => {
      const v = this.values[i]!;
      feeds[`past_key_values.${i}.key`] = new ort.Tensor('float32', k.subarray(0, P * slab), [P, B, Hkv, D]);
      feeds[`past_key_values.${i}.value`] = new ort.Tensor('float32', v.subarray(0, P * slab), [P, B, Hkv, D]);
      fetches[`present.${i}.key`] = new ort.Tensor('float32', k.subarray(P * slab, (P + T) * slab), [T, B, Hkv, D]);
      fetches[`present.${i}.value`] = new ort.Tensor('float32', v.subarray(P * slab, (P + T) * slab), [T, B, Hkv, D]);
    });
    const t0 = performance.now();
    await this.session.run(feeds, fetches);
    this.runMs += performance.now() - t0;
    this.runs++;
    this.filled += T;
  }

  /**
   * Runs the prompts. Identical prompts (the K branches of a tree node) are prefilled once and
   * their cache rows and logits copied to every row that shares them.
   */
  async prefill(): Promise<void> {
    const all = this.rows;
    // u[b] ≤ b, which the in-place expansion below relies on.
    const { u, distinct } = promptClasses(this.req, all);
    this.logits = new Float32Array(distinct.length * this.req.contract.vocabSize);
    const { ids, pos, bias } = prefillInputs(this.req, distinct, this.Tp);
    this.rows = distinct;
    await this.run(ids, pos, bias, this.Tp);
    this.rows = all;
    if (distinct.length === all.length) return;
    const U = distinct.length;
    const B = all.length;
    const row = this.rowFloats;
    // Expand [t, U] to [t, B] (batch-major: [U] to [B]) in place, from the end: every source lies
    // at or before its target, so before every target already written, and nothing is read after
    // being overwritten.
    const positions = this.layout === 'batch-major' ? 1 : this.filled;
    for (const buf of [...this.keys, ...this.values]) {
      for (let t = positions - 1; t >= 0; t--) {
        for (let b = B - 1; b >= 0; b--) buf.copyWithin((t * B + b) * row, (t * U + u[b]!) * row, (t * U + u[b]! + 1) * row);
      }
    }
    this.logits = spreadLogits(this.logits, u, this.req.contract.vocabSize);
  }

  /** Feeds `ids` (one per current row) as the n-th generated token (n = 0 is the first). */
  async step(ids: BigInt64Array, n: number): Promise<void> {
    const { pos, bias } = stepInputs(this.req, this.rows, this.Tp, this.filled, n);
    await this.run(ids, pos, bias, 1);
  }

  /**
   * Keeps only the current rows at `keep` (ascending indices into the batch). The cache is
   * compacted in place: row k of position t moves from (t·B + k) to (t·B' + k'), never forward,
   * so one ascending pass of copyWithin is safe.
   */
  async retain(keep: readonly number[]): Promise<void> {
    const B = this.rows.length;
    const row = this.rowFloats;
    // batch-major: one "position" whose rows are whole [Hkv,S,D] blocks.
    const positions = this.layout === 'batch-major' ? 1 : this.filled;
    for (const buf of [...this.keys, ...this.values]) {
      for (let t = 0; t < positions; t++) {
        keep.forEach((k, j) => {
          const src = (t * B + k) * row;
          const dst = (t * keep.length + j) * row;
          if (src !== dst) buf.copyWithin(dst, src, src + row);
        });
      }
    }
    this.rows = keep.map((k) => this.rows[k]!);
    this.logits = new Float32Array(keep.length * this.req.contract.vocabSize);
  }
}

/** What the generation loop needs of a decoder, whichever holds the cache. */
interface Decoder {
  readonly rows: number[];
  readonly logits: Float32Array;
  readonly runMs: number;
  readonly runs: number;
  prefill(): Promise<void>;
  step(ids: BigInt64Array, n: number): Promise<void>;
  retain(keep: readonly number[]): Promise<void>;
  release?(): void;
}

/**
 * The cache on the GPU (`CacheLayout` 'device'): each run's `cache.*` outputs stay there and are
 * the next run's past; dropping rows and copying a shared prompt's rows are gathers on the device.
 * Tensors a run or gather replaced are freed at once (`dispose`), not when collected.
 */
class DeviceKvDecoder implements Decoder {
  rows: number[];
  logits: Float32Array<ArrayBufferLike> = new Float32Array(0);
  runMs = 0;
  runs = 0;
  /** Per layer [key, value], [B,Hkv,P,D] on the device; null before the prefill. */
  private cache: ort.Tensor[] | null = null;
  private filled = 0;

  constructor(
    private readonly req: GenerateRequest,
    private readonly session: ort.InferenceSession,
    private readonly weights: Record<string, ort.Tensor>,
    private readonly Tp: number,
    private readonly device: DeviceTensors,
  ) {
    this.rows = req.prompts.map((_, b) => b);
  }

  private async run(ids: BigInt64Array, pos: BigInt64Array, bias: Float32Array, T: number): Promise<void> {
    const { numLayers: L, numKvHeads: Hkv, headDim: D } = this.req.contract;
    const B = this.rows.length;
    const P = this.filled;
    const feeds: Record<string, ort.Tensor> = {
      ...this.weights,
      input_ids: new ort.Tensor('int64', ids, [B, T]),
      position_ids: new ort.Tensor('int64', pos, [B, T]),
      attention_bias: new ort.Tensor('float32', bias, [B, T, P + T]),
    };
    // Before the prefill the past is empty: [B,Hkv,0,D] from the host.
    const past = this.cache ?? new Array<ort.Tensor>(2 * L).fill(new ort.Tensor('float32', new Float32Array(0), [B, Hkv, 0, D]));
    for (let i = 0; i < L; i++) {
      feeds[`past_key_values.${i}.key`] = past[2 * i]!;
      feeds[`past_key_values.${i}.value`] = past[2 * i + 1]!;
    }
    const t0 = performance.now();
    const out = await this.session.run(feeds);
    this.runMs += performance.now() - t0;
    this.runs++;
    const next: ort.Tensor[] = [];
    for (let i = 0; i < L; i++) {
      for (const kv of ['key', 'value']) {
        const t = out[`cache.${i}.${kv}`];
        if (!t) throw new Error(`decode: the graph returned no 'cache.${i}.${kv}' (a 'device' decode graph must)`);
        next.push(t);
      }
    }
    const logits = out['logits'];
    if (!logits || logits.location !== 'cpu') throw new Error("decode: the graph's logits did not come back to the host");
    this.replace(next);
    this.logits = logits.data as Float32Array;
    this.filled += T;
  }

  private replace(next: ort.Tensor[]): void {
    for (const t of this.cache ?? []) if (!next.includes(t)) t.dispose();
    this.cache = next;
  }

  private async gather(rows: readonly number[]): Promise<void> {
    const next: ort.Tensor[] = [];
    for (const t of this.cache!) next.push(await this.device.gatherRows(t, rows));
    this.replace(next);
  }

  async prefill(): Promise<void> {
    const all = this.rows;
    const { u, distinct } = promptClasses(this.req, all);
    const { ids, pos, bias } = prefillInputs(this.req, distinct, this.Tp);
    this.rows = distinct;
    await this.run(ids, pos, bias, this.Tp);
    this.rows = all;
    if (distinct.length === all.length) return;
    await this.gather(u);
    this.logits = spreadLogits(this.logits, u, this.req.contract.vocabSize);
  }

  async step(ids: BigInt64Array, n: number): Promise<void> {
    const { pos, bias } = stepInputs(this.req, this.rows, this.Tp, this.filled, n);
    await this.run(ids, pos, bias, 1);
  }

  async retain(keep: readonly number[]): Promise<void> {
    await this.gather(keep);
    this.rows = keep.map((k) => this.rows[k]!);
    const V = this.req.contract.vocabSize;
    this.logits = new Float32Array(keep.length * V);
  }

  release(): void {
    this.replace([]);
  }
}

export async function generate(
  req: GenerateRequest,
  session: ort.InferenceSession,
  /** Graph input name → tensor: `req.params`' residents, as the session takes them (on the GPU for a WebGPU session). */
  weights: Record<string, ort.Tensor>,
  device: DeviceTensors | null = null,
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
  let decoder: Decoder;
  if (req.contract.cacheLayout === 'device') {
    if (!device) throw new Error("generate: a 'device' KV cache needs the webgpu execution provider");
    decoder = new DeviceKvDecoder(req, session, weights, Tp, device);
  } else {
    decoder = new KvDecoder(req, session, weights, Tp);
  }
  try {
    return await decode(req, decoder);
  } finally {
    decoder.release?.();
  }
}

async function decode(req: GenerateRequest, decoder: Decoder): Promise<GenerateResult> {
  const V = req.contract.vocabSize;
  const B = req.prompts.length;
  const G = req.distinctFirst ?? 1;
  const masked = req.maskedTokens ?? [];
  const t0 = performance.now();
  await decoder.prefill();
  const t1 = performance.now();
  const prefill = { ms: decoder.runMs, runs: decoder.runs };

  const rngs = Array.from({ length: B }, (_, b) => new Rng(streamSeed(req.seed, (req.firstRow ?? 0) + b)));
  const scratch = new Float64Array(V);
  const order = new Int32Array(V);
  const outTokens = Array.from({ length: B }, () => new Int32Array(req.maxNewTokens));
  const outLogp = Array.from({ length: B }, () => new Float32Array(req.maxNewTokens));
  const produced = new Int32Array(B);
  const done = new Array<boolean>(B).fill(false);
  const finish = new Array<'stop' | 'length'>(B).fill('length');
  const stop = new Set(req.stopTokens);
  // First tokens already drawn in each row group (distinctFirst); rows are still in order at n = 0.
  const taken = G > 1 ? Array.from({ length: B / G }, () => new Set<number>()) : null;
  for (let n = 0; n < req.maxNewTokens; n++) {
    // Each row samples from its own stream, so retiring rows changes no other row's draws.
    decoder.rows.forEach((b, k) => {
      if (done[b]) return;
      if (masked.length > 0) maskLogits(decoder.logits, k * V, masked);
      const group = n === 0 && taken ? taken[Math.floor(b / G)]! : undefined;
      const { token, logprob } = sampleToken(decoder.logits, k * V, V, req.sampling, rngs[b]!, scratch, order, group);
      group?.add(token);
      outTokens[b]![n] = token;
      outLogp[b]![n] = logprob;
      produced[b] = n + 1;
      if (stop.has(token)) {
        done[b] = true;
        finish[b] = 'stop';
      }
    });
    if (n === req.maxNewTokens - 1 || done.every(Boolean)) break;
    const live = decoder.rows.flatMap((b, k) => (done[b] ? [] : [k]));
    if (req.retireFinished !== false && live.length <= RETIRE_BELOW * decoder.rows.length) await decoder.retain(live);
    // A finished row still in the batch is fed padding; its outputs are never read.
    const ids = BigInt64Array.from(decoder.rows, (b) => BigInt(done[b] ? req.padToken : outTokens[b]![n]!));
    await decoder.step(ids, n);
  }
  const t2 = performance.now();
  return {
    tokens: outTokens.map((t, b) => t.slice(0, produced[b]!)),
    logprobs: outLogp.map((l, b) => l.slice(0, produced[b]!)),
    finish,
    prefillMs: t1 - t0,
    decodeMs: t2 - t1,
    decodeRun: { ms: decoder.runMs - prefill.ms, steps: decoder.runs - prefill.runs },
  };
}
