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
