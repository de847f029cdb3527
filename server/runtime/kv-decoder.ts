/**
 * The KV cache in host memory (`CacheLayout` 'time-major' or 'batch-major') and the decode
 * graph's calls on it; `generate` drives it one token per live row per step.
 */
import * as ort from 'onnxruntime-node';
import { MASKED, prefillInputs, promptClasses, spreadLogits, stepInputs } from './decode-inputs.ts';
import type { CacheLayout, Decoder, GenerateRequest } from './generate.ts';

/** batch-major cache: slots added per row at a time (see `KvDecoder.reserve`). */
const CAPACITY_STEP = 16;

/**
 * The KV cache and the decode graph's calls: the prompt block, then one token per live row per
 * step. Time-major cache [P,B,Hkv,D]; left-padded prompts; positions and the padding bias are
 * inputs. `retain` drops finished rows from the batch.
 */
export class KvDecoder implements Decoder {
  /** Original row index of each row of the current batch. */
  rows: number[];
  /** Logits of the last call, [rows, V]. */
  logits: Float32Array;
  /** This decoder never samples: its contract has no 'device' sampling. */
  readonly drawn = null;
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
