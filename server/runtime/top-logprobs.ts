/**
 * The k most likely tokens of a logits row and their log-probabilities, under the distribution
 * whose log-probs `sampleToken` reports (temperature-scaled; untempered when greedy), for the
 * OpenAI APIs' `logprobs` / `top_logprobs` alternatives.
 */

/** The most alternatives a request may ask for per token (OpenAI's and vLLM's default limit). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * Writes the `k` best ids of `logits[offset .. offset+V)` into `ids[at .. at+k)` and their
 * log-probs into `logprobs[at .. at+k)`, best first, ties by lower id. Ids at -Infinity (masked)
 * are never chosen; slots beyond the finite ids get id -1.
 */
export function topLogprobs(logits: Float32Array, offset: number, V: number, temperature: number, k: number, ids: Int32Array, logprobs: Float32Array, at: number): void {
  const { invT, max, logZ } = normalizer(logits, offset, V, temperature);
  // Insertion into a sorted window of k: a row of 150k logits with k ≤ 20 touches the window rarely.
  let filled = 0;
  for (let i = 0; i < V; i++) {
    const v = logits[offset + i]!;
    if (v === -Infinity || (filled === k && v <= logits[offset + ids[at + k - 1]!]!)) continue;
    let j = filled < k ? filled++ : k - 1;
    while (j > 0 && logits[offset + ids[at + j - 1]!]! < v) {
      ids[at + j] = ids[at + j - 1]!;
      j--;
    }
    ids[at + j] = i;
  }
  for (let j = 0; j < k; j++) {
    if (j >= filled) {
      ids[at + j] = -1;
      logprobs[at + j] = -Infinity;
    } else logprobs[at + j] = (logits[offset + ids[at + j]!]! - max) * invT - logZ;
  }
}

/** What turns a logits row into log-probs: logp(i) = (logits[i] − max)·invT − logZ. */
function normalizer(logits: Float32Array, offset: number, V: number, temperature: number): { invT: number; max: number; logZ: number } {
  const invT = temperature === 0 ? 1 : 1 / temperature;
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (logits[offset + i]! > max) max = logits[offset + i]!;
  let z = 0;
  for (let i = 0; i < V; i++) z += Math.exp((logits[offset + i]! - max) * invT);
  return { invT, max, logZ: Math.log(z) };
}

/**
 * The log-prob of `id` in a logits row, under the distribution `topLogprobs` reports, and its rank
 * as vLLM counts it: the number of ids at least as likely, itself included (1 = the likeliest).
 */
export function tokenLogprob(logits: Float32Array, offset: number, V: number, temperature: number, id: number): { logprob: number; rank: number } {
  const { invT, max, logZ } = normalizer(logits, offset, V, temperature);
  const v = logits[offset + id]!;
  let rank = 0;
  for (let i = 0; i < V; i++) if (logits[offset + i]! >= v) rank++;
  return { logprob: (v - max) * invT - logZ, rank };
}
