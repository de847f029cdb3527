/** Order statistics shared by the benchmarks (the per-seed mean and spread are in learning/seed-stats.ts). */

/** The median (the mean of the two middle values for an even count); NaN for no values. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The nearest-rank `q` quantile (0 ≤ q ≤ 1; 1 is the largest value); NaN for no values. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

/**
 * Speedups of one side over a baseline from interleaved timings on a machine whose speed drifts:
 * baseline b₀, side t₀, baseline b₁, side t₁, …, baseline bₙ. Each side timing tᵢ is compared with
 * the mean of the baseline timings just before and after it, (bᵢ + bᵢ₊₁) / 2 ÷ tᵢ, so a slowdown that
 * changes slowly next to one pair's span cancels (exactly, for one that is linear in time), and the
 * median of these speedups outvotes a burst of load, where a ratio of the two sides' medians over a
 * run keeps whatever the machine did between them. `baselineMs` has one timing more than `sideMs`.
 */
export function bracketedSpeedups(sideMs: readonly number[], baselineMs: readonly number[]): number[] {
  if (baselineMs.length !== sideMs.length + 1) {
    throw new Error(`bracketedSpeedups: ${sideMs.length} timings need ${sideMs.length + 1} baseline timings around them, got ${baselineMs.length}`);
  }
  return sideMs.map((t, i) => (baselineMs[i]! + baselineMs[i + 1]!) / 2 / t);
}
