/**
 * Packing of variable-length sequences into the dense tensors a train step or score pass takes.
 *
 * A sequence is prompt + response tokens. Position t of the packed batch holds token t as input
 * and token t+1 as target, so the response token j (0-based) is predicted at position
 * promptLength − 1 + j. Rows are right-padded: with a causal mask, padding after the real tokens
 * cannot influence them, and positions simply count from 0.
 *
 * Sequences with the same prompt can share one row (`sharePrompts`): the K branches of a tree
 * node, or the K first turns of GRPO's trajectories, all start from one prompt. The row holds the
 * prompt's first P−1 tokens once, then one segment per sequence: its last prompt token and its
 * response, at positions P−1, P, …. A [B,T,T] bias lets each segment see the shared tokens and
 * itself, never another segment, so every response token is predicted from exactly the context it
 * had alone; the prompt's forward pass is computed once instead of K times and its gradient is the
 * sum of the K sequences' (what K separate rows would give, up to float rounding). The last prompt
 * token is repeated per segment because it predicts each response's first token, a different
 * target per sequence.
 *
 * Only response positions need logits: `loss_rows` lists them (flat indices b·T + t, in order),
 * and the score and train graphs compute the final norm, the LM head and the log-softmax over V
 * for those rows alone. At a real vocabulary (151936) a logit row is 0.6 MB, so long prompts
 * would otherwise dominate memory with rows nobody reads.
 */
import { f32, i64, type HostTensor } from '../runtime/tensor.ts';
import { MASKED_BIAS, causalMask } from './attention-bias.ts';

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
  /** Maps sequence i's response token j to its flat index b·T + t in [B,T] outputs (b: the sequence's row). */
  readonly responseIndex: (i: number, j: number) => number;
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

/** Packing choices of `microBatches` and `packBatch`. */
export interface PackOptions {
  /** Pack sequences with identical prompts into one row (see the header). */
  readonly sharePrompts?: boolean;
}

/** A key equal for two sequences exactly when their prompts are the same token ids. */
export function promptKey(s: TrainSequence): string {
  return Buffer.from(s.tokens.buffer, s.tokens.byteOffset, s.promptLength * 4).toString('latin1');
}

/** Sequence indices grouped by identical prompt: prompts in order of first appearance, sequences in order within one. */
export function promptGroups(seqs: readonly TrainSequence[]): number[][] {
  const byKey = new Map<string, number[]>();
  seqs.forEach((s, i) => {
    const k = promptKey(s);
    const list = byKey.get(k);
    if (list) list.push(i);
    else byKey.set(k, [i]);
  });
  return [...byKey.values()];
}

/** Sequence indices with every prompt's sequences next to each other (`promptGroups`, flattened): the order in which shared rows form. */
export function groupedByPrompt(seqs: readonly TrainSequence[]): number[] {
  return promptGroups(seqs).flat();
}

/**
 * Splits sequences, in order, into micro-batches within `limits`. Order is kept so the same
 * sequences always form the same passes; an update's loss is a token mean over all of them
 * however they are split (`token_weight`). With `sharePrompts` the token budget counts packed
 * rows (a sequence whose prompt already has a row in the pass adds only its response to it).
 */
export function microBatches<S extends TrainSequence>(seqs: readonly S[], limits: MicroBatchLimits, o: PackOptions = {}): S[][] {
  const maxSeqs = limits.sequences ?? Number.POSITIVE_INFINITY;
  const maxTokens = limits.tokens ?? Number.POSITIVE_INFINITY;
  if (!(maxSeqs >= 1)) throw new Error(`microBatches: sequences must be ≥ 1, got ${limits.sequences}`);
  if (!(maxTokens >= 1)) throw new Error(`microBatches: tokens must be ≥ 1, got ${limits.tokens}`);
  const out: S[][] = [];
  let cur: S[] = [];
  let shared = new Map<string, number>(); // prompt → packed length of its row in this pass
  let rows = 0;
  let widest = 0;
  for (const s of seqs) {
    const key = o.sharePrompts ? promptKey(s) : null;
    // Where `s` goes in the current pass: onto its prompt's row (adding only its response), or a row of its own.
    const place = () => {
      const had = key === null ? undefined : shared.get(key);
      return had === undefined ? { len: s.tokens.length - 1, opens: true } : { len: had + s.tokens.length - s.promptLength, opens: false };
    };
    let p = place();
    if (cur.length > 0 && (cur.length + 1 > maxSeqs || (rows + (p.opens ? 1 : 0)) * Math.max(widest, p.len) > maxTokens)) {
      out.push(cur);
      cur = [];
      shared = new Map();
      rows = 0;
      widest = 0;
      p = place();
    }
    if (key !== null) shared.set(key, p.len);
    if (p.opens) rows++;
    widest = Math.max(widest, p.len);
    cur.push(s);
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

/**
 * Packs sequences; `need` lists which per-token inputs the graph takes. Without `sharePrompts`
 * each sequence is a row and one causal [T,T] bias serves all; with it, rows are shared per
 * prompt and the bias is [B,T,T].
 */
export function packBatch(seqs: readonly TrainSequence[], vocabSize: number, need: { advantages: boolean; oldLogp: boolean; refLogp: boolean }, o: PackOptions = {}): PackedBatch {
  if (seqs.length === 0) throw new Error('packBatch: empty batch');
  seqs.forEach((s, i) => validateSequence(s, i, vocabSize));
  seqs.forEach((s, b) => {
    if (need.advantages && !s.advantages) throw new Error(`sequence ${b}: advantages are required`);
    if (need.oldLogp && !s.oldLogp) throw new Error(`sequence ${b}: oldLogp is required`);
    if (need.refLogp && !s.refLogp) throw new Error(`sequence ${b}: refLogp is required`);
  });
  // Rows: lists of sequence indices sharing a prompt (one each without sharing).
  const rowsOf = o.sharePrompts ? promptGroups(seqs) : seqs.map((_, i) => [i]);
  const rowLength = (row: readonly number[]) => seqs[row[0]!]!.promptLength - 1 + row.reduce((n, i) => n + seqs[i]!.tokens.length - seqs[i]!.promptLength, 0);
  const B = rowsOf.length;
  const T = Math.max(...rowsOf.map(rowLength));
  const ids = new Float64Array(B * T);
  const targets = new Float64Array(B * T);
  const positions = new Float64Array(B * T);
  const mask = new Float32Array(B * T);
  const adv = new Float32Array(B * T);
  const old = new Float32Array(B * T);
  const ref = new Float32Array(B * T);
  const bias = o.sharePrompts ? new Float32Array(B * T * T) : null;
  const causal = causalMask(T);
  const start = new Int32Array(seqs.length); // flat index of each sequence's first response prediction
  const rows: number[] = [];
  let tokenCount = 0;
  rowsOf.forEach((row, b) => {
    const P = seqs[row[0]!]!.promptLength;
    const first = seqs[row[0]!]!.tokens;
    // The shared prompt tokens 0..P−2, at their own positions.
    for (let t = 0; t < P - 1; t++) {
      const k = b * T + t;
      ids[k] = first[t]!;
      targets[k] = first[t + 1]!;
      positions[k] = t;
    }
    if (bias) bias.set(causal, b * T * T);
    let c = P - 1; // column of the next segment
    for (const i of row) {
      const s = seqs[i]!;
      const r = s.tokens.length - P;
      // Segment: the last prompt token and the response but its last token, predicting the response.
      for (let u = 0; u < r; u++) {
        const k = b * T + c + u;
        ids[k] = s.tokens[P - 1 + u]!;
        targets[k] = s.tokens[P + u]!;
        positions[k] = P - 1 + u;
        rows.push(k);
        const w = s.tokenMask ? s.tokenMask[u]! : 1;
        mask[k] = w;
        if (w !== 0) tokenCount++;
        if (s.advantages) adv[k] = s.advantages[u]!;
        if (s.oldLogp) old[k] = s.oldLogp[u]!;
        if (s.refLogp) ref[k] = s.refLogp[u]!;
        // Hide the earlier segments of the row (columns P−1 .. c−1) from this query.
        if (bias) bias.fill(MASKED_BIAS, (b * T + c + u) * T + P - 1, (b * T + c + u) * T + c);
      }
      start[i] = b * T + c;
      c += r;
    }
  });
  const tensors: Record<string, HostTensor> = {
    input_ids: i64([B, T], ids),
    position_ids: i64([B, T], positions),
    targets: i64([B, T], targets),
    attention_bias: bias ? f32([B, T, T], bias) : f32([T, T], causal),
    loss_mask: f32([B, T], mask),
    loss_rows: i64([rows.length], rows),
  };
  if (need.advantages) tensors['advantages'] = f32([B, T], adv);
  if (need.oldLogp) tensors['old_logp'] = f32([B, T], old);
  if (need.refLogp) tensors['ref_logp'] = f32([B, T], ref);
  return { B, T, tensors, tokenCount, responseIndex: (i, j) => start[i]! + j };
}
