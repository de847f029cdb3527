/**
 * Smoothing of a noisy curve as TensorBoard does it (and W&B's "Exponential moving average"
 * option): an exponential moving average over the points in step order, debiased so the first
 * points are not pulled towards 0 (`last = w·last + (1 − w)·v`, shown as `last / (1 − wⁿ)` after
 * n points). Weight 0 is the raw curve, 0.99 nearly flat. Gaps (null, non-finite) stay gaps and do
 * not count. Pure: unit tested.
 */

/** The slider's range: TensorBoard's (0 to 0.999 in its UI; 0.99 is already nearly flat for a few hundred steps). */
export const SMOOTHING_MAX = 0.99;
/** TensorBoard's default weight. */
export const SMOOTHING_DEFAULT = 0.6;

/** The smoothed values of `values` (same length, gaps where it has gaps). */
export function smoothEma(values: ArrayLike<number | null | undefined>, weight: number): Array<number | null> {
  if (!(weight >= 0 && weight < 1)) throw new RangeError(`smoothing weight must be in [0, 1), got ${weight}`);
  const out: Array<number | null> = new Array<number | null>(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n++;
    out[i] = weight === 0 ? v : last / (1 - weight ** n);
  }
  return out;
}
