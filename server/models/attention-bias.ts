/**
 * Additive attention biases for batches of ragged sequences: 0 where a query may attend a key,
 * −1e9 elsewhere (a large finite number rather than −∞, so a row with nothing visible — a padding
 * query — gives a uniform softmax instead of NaN; its outputs are masked out of every loss).
 */
export const MASKED_BIAS = -1e9;

/**
 * Causal bias [B,T,T] from a key-validity mask [B,T] (1 = real token, 0 = padding):
 * query i sees key j iff j ≤ i and key j is real.
 */
export function causalBias(mask: ArrayLike<number>, B: number, T: number): Float32Array {
  const bias = new Float32Array(B * T * T).fill(MASKED_BIAS);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < T; i++) {
      const row = (b * T + i) * T;
      for (let j = 0; j <= i; j++) if (mask[b * T + j]! !== 0) bias[row + j] = 0;
    }
  }
  return bias;
}

/** The plain causal bias [T,T]: query i sees keys j ≤ i (right-padded batches need nothing more). */
export function causalMask(T: number): Float32Array {
  const bias = new Float32Array(T * T).fill(MASKED_BIAS);
  for (let i = 0; i < T; i++) for (let j = 0; j <= i; j++) bias[i * T + j] = 0;
  return bias;
}
