/**
 * The y range of a chart when outliers are ignored, as TensorBoard's "Ignore outliers in chart
 * scaling" (on by default there) does: one spike (a loss of 40 at one step, a gradient norm that
 * blew up once) must not flatten the rest of the curve into a line at the bottom of the card. The
 * points left outside are drawn as marks at the chart's edge (chart-view.ts) and keep their true
 * value in the legend; a chart's "Fit all" button shows the whole range instead.
 *
 * TensorBoard drops everything outside the 5th–95th percentiles, which clips the last stretch of
 * any curve that keeps rising. Tukey's "far out" fences do not: a point is an outlier only when it
 * lies more than 3 interquartile ranges beyond the quartiles (J. W. Tukey, Exploratory Data
 * Analysis, 1977, §2H), so a steady trend, however steep, keeps all its points.
 */

/** Tukey's factor for "far out" values. */
export const FENCE_FACTOR = 3;
/** Below this many points the quartiles say too little to call any point an outlier. */
export const MIN_POINTS = 8;

export interface YExtent {
  readonly min: number;
  readonly max: number;
}

/** The extent of every finite value of the columns, or null when there is none. */
export function fullExtent(columns: Iterable<ArrayLike<number | null>>): YExtent | null {
  let min = Infinity;
  let max = -Infinity;
  for (const column of columns) {
    for (let i = 0; i < column.length; i++) {
      const v = column[i];
      if (v === null || v === undefined || !Number.isFinite(v)) continue;
      if (v < min) min = v;
      if (v > max) max = v;
    }
  }
  return min <= max ? { min, max } : null;
}

/**
 * The extent of the values that are not outliers (all columns of a chart together, since they
 * share its axis), or null when there is no finite value. Equal to `fullExtent` when nothing is
 * far out, when there are fewer than MIN_POINTS values, and when the middle half of the values is
 * a single value (a count that is mostly 0: its rare other values are what it has to show).
 */
export function robustExtent(columns: Iterable<ArrayLike<number | null>>): YExtent | null {
  const values: number[] = [];
  for (const column of columns) {
    for (let i = 0; i < column.length; i++) {
      const v = column[i];
      if (v !== null && v !== undefined && Number.isFinite(v)) values.push(v);
    }
  }
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const full = { min: values[0]!, max: values[values.length - 1]! };
  if (values.length < MIN_POINTS) return full;
  const q1 = quantile(values, 0.25);
  const q3 = quantile(values, 0.75);
  const spread = q3 - q1;
  if (spread <= 0) return full;
  const low = q1 - FENCE_FACTOR * spread;
  const high = q3 + FENCE_FACTOR * spread;
  // The extreme values inside the fences.
  let min = full.min;
  let max = full.max;
  for (const v of values) if (v >= low) { min = v; break; }
  for (let i = values.length - 1; i >= 0; i--) if (values[i]! <= high) { max = values[i]!; break; }
  return { min, max };
}

/** Linear interpolation between closest ranks (the R-7 definition, numpy's default) of sorted values. */
export function quantile(sorted: readonly number[], p: number): number {
  const at = (sorted.length - 1) * p;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** How many values of the columns lie outside [min, max]: the points a chart marks at its edges. */
export function countOutside(columns: Iterable<ArrayLike<number | null>>, range: YExtent): number {
  let n = 0;
  for (const column of columns) {
    for (let i = 0; i < column.length; i++) {
      const v = column[i];
      if (v !== null && v !== undefined && Number.isFinite(v) && (v < range.min || v > range.max)) n++;
    }
  }
  return n;
}
