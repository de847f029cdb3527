/**
 * Token sampling from logits: temperature, top-k, top-p (nucleus), seeded and reproducible.
 *
 * Each sequence draws from its own stream, seeded from (request seed, row index), so a row's
 * tokens do not depend on which other rows share the batch or when they finish.
 * The log-probability returned for a sampled token is taken from the full temperature-scaled
 * distribution (before top-k/top-p truncation): that is the quantity the trainer recomputes as
 * the old log-prob for PPO, so the two agree when no truncation is configured.
 */
export interface SamplingParams {
  /** Softmax temperature; 0 means greedy (argmax). */
  readonly temperature: number;
  /** Keep the smallest set of tokens whose probability mass reaches topP (1 = off). */
  readonly topP: number;
  /** Keep only the topK most likely tokens (0 = off). */
  readonly topK: number;
}

/** A 32-bit seeded generator (mulberry32): tiny state, good enough statistics for sampling. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** Mixes a request seed and a row index into an independent stream seed. */
export function streamSeed(seed: number, row: number): number {
  let h = (seed ^ Math.imul(row + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

export function validateSampling(p: SamplingParams): void {
  if (!(p.temperature >= 0) || !Number.isFinite(p.temperature)) throw new Error(`sampling temperature must be a finite number ≥ 0, got ${p.temperature}`);
  if (!(p.topP > 0 && p.topP <= 1)) throw new Error(`sampling topP must be in (0, 1], got ${p.topP}`);
  if (!(Number.isInteger(p.topK) && p.topK >= 0)) throw new Error(`sampling topK must be an integer ≥ 0, got ${p.topK}`);
}

/**
 * Sets the logits of the `masked` ids in the row at `offset` to -Infinity, so that sampling (greedy
 * included) never draws them and log-probs are normalised over the other ids. For a model whose
 * embedding has rows with no token (Qwen2.5: 151936 rows, 151665 tokens; `HfTokenizer.unusedIds`).
 * The trainer's recomputed log-probs still normalise over every row; the difference is the mass the
 * model puts on ids it never saw in training, which is negligible for a pretrained model.
 */
export function maskLogits(logits: Float32Array, offset: number, masked: ArrayLike<number>): void {
  for (let i = 0; i < masked.length; i++) logits[offset + masked[i]!] = -Infinity;
}

/**
 * Samples one token from `logits[offset .. offset+V)`. Returns the token and its log-probability
 * under the temperature-scaled distribution. `scratch` must hold at least 2V floats.
 *
 * `exclude`: ids already drawn by other rows of the same group (`GenerateRequest.distinctFirst`).
 * The draw is then from the sampling distribution (after top-k/top-p) conditioned on the other
 * ids, i.e. successive calls sample without replacement (greedy: the best id not yet taken); when
 * every id the truncation keeps is excluded, the draw ignores the exclusion. The returned
 * log-prob is still the token's under the full temperature-scaled distribution: the policy's.
 */
export function sampleToken(
  logits: Float32Array,
  offset: number,
  V: number,
  p: SamplingParams,
  rng: Rng,
  scratch: Float64Array,
  order: Int32Array,
  exclude?: ReadonlySet<number>,
): { token: number; logprob: number } {
  let max = -Infinity;
  let arg = 0;
  let argFree = -1;
  for (let i = 0; i < V; i++) {
    const v = logits[offset + i]!;
    if (v > max) {
      max = v;
      arg = i;
    }
    if (exclude?.has(i) === false && v > -Infinity && (argFree < 0 || v > logits[offset + argFree]!)) argFree = i;
  }
  if (!Number.isFinite(max)) throw new Error(`logits row at offset ${offset} is not finite (max ${max})`);
  if (p.temperature === 0) {
    // Greedy: report the log-prob under the untempered distribution.
    let z = 0;
    for (let i = 0; i < V; i++) z += Math.exp(logits[offset + i]! - max);
    const token = exclude && argFree >= 0 ? argFree : arg;
    return { token, logprob: logits[offset + token]! - max - Math.log(z) };
  }
  const invT = 1 / p.temperature;
  let z = 0;
  for (let i = 0; i < V; i++) {
    const e = Math.exp((logits[offset + i]! - max) * invT);
    scratch[i] = e;
    z += e;
  }
  const logZ = Math.log(z);
  let token: number;
  if (p.topK === 0 && p.topP >= 1) {
    let total = z;
    let skip = exclude;
    if (skip) {
      for (const i of skip) if (i >= 0 && i < V) total -= scratch[i]!;
      // Rounding can leave a tiny positive remainder of excluded mass: require a real one.
      if (!(total > z * 1e-12)) {
        skip = undefined;
        total = z;
      }
    }
    let u = rng.next() * total;
    token = -1;
    for (let i = 0; i < V; i++) {
      if (skip?.has(i)) continue;
      u -= scratch[i]!;
      if (u < 0) {
        token = i;
        break;
      }
    }
    // u can outlast the loop by rounding: take the last id that was eligible.
    if (token < 0) for (let i = V - 1; i >= 0; i--) if (!skip?.has(i) && scratch[i]! > 0) { token = i; break; }
  } else {
    for (let i = 0; i < V; i++) order[i] = i;
    // Stable sort by probability, descending; ties by token id keep it deterministic.
    const sorted = Array.from(order.subarray(0, V)).sort((a, b) => scratch[b]! - scratch[a]! || a - b);
    const k = p.topK > 0 ? Math.min(p.topK, V) : V;
    let kept = 0;
    let mass = 0;
    while (kept < k) {
      mass += scratch[sorted[kept]!]!;
      kept++;
      if (mass >= p.topP * z) break;
    }
    let skip = exclude;
    let total = mass;
    if (skip) {
      for (let j = 0; j < kept; j++) if (skip.has(sorted[j]!)) total -= scratch[sorted[j]!]!;
      if (!(total > mass * 1e-12)) {
        skip = undefined;
        total = mass;
      }
    }
    let u = rng.next() * total;
    token = -1;
    for (let j = 0; j < kept; j++) {
      if (skip?.has(sorted[j]!)) continue;
      u -= scratch[sorted[j]!]!;
      if (u < 0) {
        token = sorted[j]!;
        break;
      }
    }
    if (token < 0) for (let j = kept - 1; j >= 0; j--) if (!skip?.has(sorted[j]!)) { token = sorted[j]!; break; }
  }
  return { token, logprob: Math.log(scratch[token]!) - logZ };
}
