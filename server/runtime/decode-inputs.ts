/**
 * The feeds a decode graph takes besides its weights and cache, shared by both KV decoders:
 * rows that share a prompt (prefilled once), the left-padded prompt block, one step's positions
 * and padding bias, and the spreading of shared prompts' logits back to every row.
 */
import type { GenerateRequest } from './generate.ts';

/** Graph inputs of a decode graph that samples (contract `sampling` 'device', models/device-sampling.ts). */
export const SAMPLE_INPUTS = {
  /** [B] float32: each row's uniform in [0, 1) for this step. */
  uniform: 'sample_u',
  /** [1] float32: 1 / temperature. */
  inverseTemperature: 'sample_inv_temperature',
  /** [V] float32: 1 for ids that may be drawn, 0 for ids never drawn. */
  keep: 'sample_keep',
} as const;

/** Graph outputs of a decode graph that samples. */
export const SAMPLE_OUTPUTS = {
  /** [B] float32: the drawn id (exact: ids are below 2^24). */
  token: 'sample.token',
  /** [B] float32: its log-probability under the temperature-scaled (kept) distribution. */
  logprob: 'sample.logprob',
} as const;

/** Additive attention bias: 0 where attending is allowed, a large negative number elsewhere. */
export const MASKED = -1e9;

/**
 * Rows that share a prompt: u[b], the index among the distinct prompts of row b's (numbered by
 * first occurrence, so u[b] ≤ b), and the first row of each distinct prompt. Every row is its own
 * with `sharePrompts` false.
 */
export function promptClasses(req: GenerateRequest, rows: readonly number[]): { u: number[]; distinct: number[] } {
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
export function prefillInputs(req: GenerateRequest, rows: readonly number[], Tp: number): { ids: BigInt64Array; pos: BigInt64Array; bias: Float32Array } {
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
export function stepInputs(req: GenerateRequest, rows: readonly number[], Tp: number, P: number, n: number): { pos: BigInt64Array; bias: Float32Array } {
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
export function spreadLogits(logits: Float32Array<ArrayBufferLike>, u: readonly number[], V: number): Float32Array {
  const out = new Float32Array(u.length * V);
  u.forEach((i, b) => out.set(logits.subarray(i * V, (i + 1) * V), b * V));
  return out;
}
