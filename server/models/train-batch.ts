/**
 * Packing of variable-length sequences into the dense tensors a train step or score pass takes.
 *
 * A sequence is prompt + response tokens. Position t of the packed batch holds token t as input
 * and token t+1 as target, so the response token j (0-based) is predicted at position
 * promptLength − 1 + j. Rows are right-padded: with a causal mask, padding after the real tokens
 * cannot influence them, and positions simply count from 0.
 *
 * Only response positions need logits: `loss_rows` lists them (flat indices b·T + t, in order),
 * and the score and train graphs compute the final norm, the LM head and the log-softmax over V
 * for those rows alone. At a real vocabulary (151936) a logit row is 0.6 MB, so long prompts
 * would otherwise dominate memory with rows nobody reads.
 */
import { f32, i64, type HostTensor } from '../runtime/tensor.ts';
import { causalMask } from './attention-bias.ts';

export interface TrainSequence {
  /** Prompt followed by response, token ids. */
  readonly tokens: Int32Array;
  /** Number of prompt tokens (not trained on). ≥ 1. */
  readonly promptLength: number;
  /** Per response token: advantage (PPO) — omitted for cross-entropy. */
  readonly advantages?: Float32Array;
  /** Per response token: log-prob under the sampling policy (PPO). */
  readonly oldLogp?: Float32Array;
  /** Per response token: log-prob under the reference policy (KL term). */
  readonly refLogp?: Float32Array;
  /** Per response token weight (default 1): e.g. 0 for tokens after a truncation. */
  readonly tokenMask?: Float32Array;
}

export interface PackedBatch {
  readonly B: number;
  readonly T: number;
  readonly tensors: Record<string, HostTensor>;
  /** Number of trained tokens (Σ loss_mask). */
  readonly tokenCount: number;
  /** Maps each sequence's response token j to its flat index b·T + t in [B,T] outputs. */
  readonly responseIndex: (b: number, j: number) => number;
}

/** Bounds on one forward/backward pass: sequences, and padded tokens (B·T). */
export interface MicroBatchLimits {
  /** Most sequences per pass. */
  readonly sequences?: number;
  /**
   * Most padded tokens (B × longest sequence) per pass: activations scale with B·T, so this bounds
   * memory whatever the prompt lengths. A single sequence longer than the budget still forms a
   * pass of its own (a sequence is never split).
   */
  readonly tokens?: number;
}

/**
 * Splits sequences, in order, into micro-batches within `limits`. Order is kept so the same
 * sequences always form the same passes; an update's loss is a token mean over all of them
 * however they are split (`token_weight`).
 */
export function microBatches<S extends TrainSequence>(seqs: readonly S[], limits: MicroBatchLimits): S[][] {
  const maxSeqs = limits.sequences ?? Number.POSITIVE_INFINITY;
  const maxTokens = limits.tokens ?? Number.POSITIVE_INFINITY;
  if (!(maxSeqs >= 1)) throw new Error(`microBatches: sequences must be ≥ 1, got ${limits.sequences}`);
  if (!(maxTokens >= 1)) throw new Error(`microBatches: tokens must be ≥ 1, got ${limits.tokens}`);
  const out: S[][] = [];
  let cur: S[] = [];
  let longest = 0;
  for (const s of seqs) {
    const T = s.tokens.length - 1; // packed length: the last token is only a target
    const widest = Math.max(longest, T);
    if (cur.length > 0 && (cur.length + 1 > maxSeqs || (cur.length + 1) * widest > maxTokens)) {
      out.push(cur);
      cur = [];
      longest = 0;
    }
    cur.push(s);
    longest = Math.max(longest, T);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

export function validateSequence(s: TrainSequence, i: number, vocabSize: number): void {
  const n = s.tokens.length;
  const r = n - s.promptLength;
  if (!(Number.isInteger(s.promptLength) && s.promptLength >= 1)) throw new Error(`sequence ${i}: promptLength must be an integer ≥ 1, got ${s.promptLength}`);
  if (r < 1) throw new Error(`sequence ${i}: no response tokens (length ${n}, promptLength ${s.promptLength})`);
  for (let t = 0; t < n; t++) {
    const id = s.tokens[t]!;
    if (!(id >= 0 && id < vocabSize)) throw new Error(`sequence ${i}: token ${t} is ${id}, outside the vocabulary [0, ${vocabSize})`);
  }
  for (const key of ['advantages', 'oldLogp', 'refLogp', 'tokenMask'] as const) {
    const a = s[key];
    if (!a) continue;
    if (a.length !== r) throw new Error(`sequence ${i}: ${key} has ${a.length} values for ${r} response tokens`);
    for (let j = 0; j < r; j++) if (!Number.isFinite(a[j]!)) throw new Error(`sequence ${i}: ${key}[${j}] is ${a[j]}`);
  }
}

/** Packs sequences; `need` lists which per-token inputs the graph takes. */
export function packBatch(seqs: readonly TrainSequence[], vocabSize: number, need: { advantages: boolean; oldLogp: boolean; refLogp: boolean }): PackedBatch {
  if (seqs.length === 0) throw new Error('packBatch: empty batch');
  seqs.forEach((s, i) => validateSequence(s, i, vocabSize));
  const B = seqs.length;
  const T = Math.max(...seqs.map((s) => s.tokens.length - 1));
  const ids = new Float64Array(B * T);
  const targets = new Float64Array(B * T);
  const positions = new Float64Array(B * T);
  const mask = new Float32Array(B * T);
  const adv = new Float32Array(B * T);
  const old = new Float32Array(B * T);
  const ref = new Float32Array(B * T);
  const rows: number[] = [];
  let tokenCount = 0;
  seqs.forEach((s, b) => {
    const n = s.tokens.length - 1;
    for (let t = 0; t < n; t++) {
      const k = b * T + t;
      ids[k] = s.tokens[t]!;
      targets[k] = s.tokens[t + 1]!;
      positions[k] = t;
    }
    const r = s.tokens.length - s.promptLength;
    for (let j = 0; j < r; j++) {
      const k = b * T + s.promptLength - 1 + j;
      rows.push(k);
      const w = s.tokenMask ? s.tokenMask[j]! : 1;
      mask[k] = w;
      if (w !== 0) tokenCount++;
      if (s.advantages) adv[k] = s.advantages[j]!;
      if (s.oldLogp) old[k] = s.oldLogp[j]!;
      if (s.refLogp) ref[k] = s.refLogp[j]!;
    }
    if (need.advantages && !s.advantages) throw new Error(`sequence ${b}: advantages are required`);
    if (need.oldLogp && !s.oldLogp) throw new Error(`sequence ${b}: oldLogp is required`);
    if (need.refLogp && !s.refLogp) throw new Error(`sequence ${b}: refLogp is required`);
  });
  const tensors: Record<string, HostTensor> = {
    input_ids: i64([B, T], ids),
    position_ids: i64([B, T], positions),
    targets: i64([B, T], targets),
    attention_bias: f32([T, T], causalMask(T)),
    loss_mask: f32([B, T], mask),
    loss_rows: i64([rows.length], rows),
  };
  if (need.advantages) tensors['advantages'] = f32([B, T], adv);
  if (need.oldLogp) tensors['old_logp'] = f32([B, T], old);
  if (need.refLogp) tensors['ref_logp'] = f32([B, T], ref);
  return { B, T, tensors, tokenCount, responseIndex: (b, j) => b * T + seqs[b]!.promptLength - 1 + j };
}
