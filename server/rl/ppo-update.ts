/**
 * One policy's PPO update on one rollout batch, as the reference runs it (verl
 * `dp_actor.update_policy`, which the PettingLLMs reference trainer calls): old log-probs are computed once, before any
 * update, then each of `ppoEpochs` passes shuffles the batch, splits it into `miniBatches`
 * mini-batches and takes one AdamW step per mini-batch. From the second mini-batch on the policy
 * has moved away from the one that sampled, so the ratio π/π_old leaves 1 and the PPO clip bounds
 * how far one batch may push it; with one optimizer step per batch (the old behaviour) the ratio
 * was exactly 1 in every update and the clip never engaged. Mini-batches keep the sequences of
 * one prompt together (`miniBatchGroups`), so a group's branches share packed rows.
 */
import { mix32 } from '../models/prng.ts';
import type { Policy, UpdateStats } from '../models/policy.ts';
import { promptGroups, type TrainSequence } from '../models/train-batch.ts';

export interface PpoUpdateOptions {
  /** Temperature of sampling, at which old and new log-probs are computed. */
  readonly temperature: number;
  readonly clipEps: number;
  readonly klCoef: number;
  readonly entropyCoef: number;
  /** Passes over the batch. */
  readonly ppoEpochs: number;
  /** Optimizer steps per pass (fewer when the batch has fewer sequences). */
  readonly miniBatches: number;
  /** Sequences per forward/backward pass (memory only). */
  readonly microBatch: number;
  /** Seed of the mini-batch shuffles. */
  readonly seed: number;
}

export interface PpoUpdateResult {
  /** Every mini-batch update, in order. */
  readonly updates: UpdateStats[];
  /** The log-probs the ratio is taken against (the policy before the first update). */
  readonly oldLogp: Float32Array[];
}

/** Splits 0..n-1, shuffled by `seed`, into `parts` contiguous slices of sizes differing by at most one. */
export function miniBatchIndices(n: number, parts: number, seed: number): number[][] {
  return miniBatchGroups(
    Array.from({ length: n }, (_, i) => [i]),
    parts,
    seed,
  );
}

/**
 * Splits groups of sequence indices into `parts` mini-batches that keep each group whole: the
 * groups are shuffled by `seed` and cut where the running count reaches the near-equal sizes a
 * split of single sequences would have (a cut falls after the group that reaches it, so sizes
 * differ by up to a group). Never an empty mini-batch: fewer parts when there are fewer groups.
 */
export function miniBatchGroups(groups: ReadonlyArray<readonly number[]>, parts: number, seed: number): number[][] {
  if (!(Number.isInteger(parts) && parts >= 1)) throw new Error(`miniBatches must be a positive integer, got ${parts}`);
  const order = Array.from({ length: groups.length }, (_, i) => i);
  let h = mix32(seed >>> 0);
  // Fisher–Yates with a counter-mode hash: reproducible, no state beyond the seed.
  for (let i = order.length - 1; i > 0; i--) {
    h = mix32(h + 0x9e3779b9);
    const j = h % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const n = groups.reduce((m, g) => m + g.length, 0);
  const k = Math.min(parts, groups.length);
  const out: number[][] = [];
  let cur: number[] = [];
  let done = 0;
  order.forEach((g, at) => {
    cur.push(...groups[g]!);
    const p = out.length;
    const target = (p + 1) * Math.floor(n / k) + Math.min(p + 1, n % k); // sizes of parts 0..p, as for single sequences
    const partsLeft = k - p - 1;
    if (partsLeft > 0 && (done + cur.length >= target || order.length - at - 1 === partsLeft)) {
      out.push(cur);
      done += cur.length;
      cur = [];
    }
  });
  if (cur.length > 0) out.push(cur);
  return out;
}

export async function ppoUpdate(policy: Policy, seqs: readonly TrainSequence[], o: PpoUpdateOptions): Promise<PpoUpdateResult> {
  if (seqs.length === 0) throw new Error(`policy '${policy.id}': PPO update on an empty batch`);
  // Fixed before the first step: every mini-batch of every epoch is measured against the policy
  // that sampled (up to rounding: recomputed at the sampling temperature).
  const old = await policy.score(seqs, o.temperature);
  const ref = o.klCoef > 0 ? await policy.score(seqs, o.temperature, true) : null;
  const batch = seqs.map((q, i) => ({ ...q, oldLogp: old[i]!, ...(ref ? { refLogp: ref[i]! } : {}) }));
  const hp = { temperature: o.temperature, clipEps: o.clipEps, klCoef: o.klCoef, entCoef: o.entropyCoef };
  const updates: UpdateStats[] = [];
  // A mini-batch takes a prompt's sequences (a tree node's K branches) whole: they are the group
  // its advantages were normalised in, and the policy scores them in one shared row.
  const groups = promptGroups(seqs);
  for (let epoch = 0; epoch < o.ppoEpochs; epoch++) {
    for (const idx of miniBatchGroups(groups, o.miniBatches, mix32(o.seed ^ mix32(epoch + 1)))) {
      updates.push(await policy.update('ppo', idx.map((i) => batch[i]!), hp, o.microBatch));
    }
  }
  return { updates, oldLogp: old };
}

/**
 * One line of metrics for a step's mini-batch updates: token-weighted means of the loss and
 * diagnostics over the applied ones, the mean gradient norm, the last learning rate, all tokens.
 * `skipped` names the first skip, if any (the count is in `update/non_finite_skips`).
 */
export function mergeUpdateStats(us: readonly UpdateStats[]): UpdateStats {
  if (us.length === 0) throw new Error('mergeUpdateStats: no updates');
  const applied = us.filter((u) => u.skipped === null);
  const w = applied.reduce((n, u) => n + u.tokens, 0);
  const avg = (f: (u: UpdateStats) => number) => (w > 0 ? applied.reduce((a, u) => a + f(u) * u.tokens, 0) / w : Number.NaN);
  return {
    loss: avg((u) => u.loss),
    clipFrac: avg((u) => u.clipFrac),
    approxKl: avg((u) => u.approxKl),
    entropy: avg((u) => u.entropy),
    klRef: avg((u) => u.klRef),
    gradNorm: applied.length ? applied.reduce((a, u) => a + u.gradNorm, 0) / applied.length : Number.NaN,
    lr: us[us.length - 1]!.lr,
    tokens: us.reduce((n, u) => n + u.tokens, 0),
    skipped: us.find((u) => u.skipped !== null)?.skipped ?? null,
    ms: us.reduce((n, u) => n + u.ms, 0),
  };
}
