/**
 * The dashboard's data: metric points bucketed into charts, one row per step and one column per
 * series, in growable typed arrays that uPlot reads without copying. Pure (no DOM, no uPlot), so
 * the bucketing and appending are unit tested.
 *
 * Why this shape: uPlot wants "aligned" data, one x array and one y array per series of equal
 * length, and redraws from `setData`. Appending a step writes one row in place (amortised O(1) per
 * point); a frame hands uPlot `subarray` views of the same buffers. A series missing at some steps
 * (validation runs every N steps, per-agent series start at step 1) needs `null` at those rows,
 * which a Float64Array cannot hold (uPlot reads NaN as a value, and a leading NaN breaks its
 * autoscale), so such a series also keeps a plain array with nulls, maintained alongside.
 */
import type { Metric } from '../../../server/protocol/trajectory.ts';
import { chartIdOf, chartSpecOf, colorSlots, compareChartIds, scopeOf, seriesLabel, type ChartSpec } from './chart-groups.ts';

/** The parts of a metric series the store reads (the protocol's metric series has more). */
export interface SeriesInput {
  readonly name: string;
  readonly agentId?: string | undefined;
  readonly policyId?: string | undefined;
  readonly points: ReadonlyArray<{ readonly step: number; readonly value: number }>;
}

/** One y column for uPlot: a view of the buffer, or an array with nulls where the series has no point. */
export type YValues = Float64Array | Array<number | null>;
export type AlignedColumns = [Float64Array, ...YValues[]];

export interface SeriesInfo {
  readonly key: string;
  readonly name: string;
  readonly scope: string;
  readonly label: string;
  /** The scope's palette slot (`colorSlots`): the same agent has the same colour in every chart and every run. */
  readonly scopeIndex: number;
  /** Index of the metric name within the chart: drawn as the line's dash pattern. */
  readonly nameIndex: number;
  /** Drawn as a stacked band (its column holds the running sum). */
  readonly stacked: boolean;
}

class Column {
  values: Float64Array;
  /** Rows that hold a value; fewer than the chart's rows means the series has gaps. */
  filled = 0;
  /** Present once the series has a gap; then kept equal to `values` with null for NaN. */
  sparse: Array<number | null> | null = null;

  constructor(
    readonly name: string,
    readonly scope: string,
    capacity: number,
  ) {
    this.values = new Float64Array(capacity).fill(NaN);
  }
}

const seriesKeyOf = (name: string, agentId: string | undefined, policyId: string | undefined) => `${name}\u0000${agentId ?? ''}\u0000${policyId ?? ''}`;

export class ChartData {
  steps = new Float64Array(64);
  rows = 0;
  /** Increases when a series is added: the chart's uPlot instance must be rebuilt. */
  structureVersion = 0;
  readonly columns = new Map<string, Column>();
  #ordered: Array<[string, Column]> | null = null;

  constructor(
    readonly spec: ChartSpec,
    private readonly scopeIndex: (scope: string) => number,
  ) {}

  get lastStep(): number {
    return this.rows > 0 ? this.steps[this.rows - 1]! : -1;
  }

  /** Sets one point, adding the series and the step's row as needed. */
  set(key: string, name: string, scope: string, step: number, value: number): void {
    let col = this.columns.get(key);
    if (!col) {
      col = new Column(name, scope, this.steps.length);
      this.columns.set(key, col);
      this.#ordered = null;
      this.structureVersion++;
    }
    const row = this.#rowOf(step);
    if (Number.isNaN(col.values[row]!)) col.filled++;
    col.values[row] = value;
    if (col.sparse) col.sparse[row] = value;
  }

  /** The row of a step, inserting it (in step order) when new. */
  #rowOf(step: number): number {
    const n = this.rows;
    if (n === 0 || step > this.steps[n - 1]!) return this.#insertRow(n, step);
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.steps[mid]! < step) lo = mid + 1;
      else hi = mid;
    }
    return this.steps[lo] === step ? lo : this.#insertRow(lo, step);
  }

  #insertRow(at: number, step: number): number {
    if (this.rows === this.steps.length) this.#grow(this.steps.length * 2);
    const tail = at < this.rows;
    if (tail) this.steps.copyWithin(at + 1, at, this.rows);
    this.steps[at] = step;
    this.rows++;
    for (const col of this.columns.values()) {
      // Every series lacks a point at the new row until the rest of the step arrives; a null copy
      // is only made at the next frame, and only for series still missing points then.
      if (tail) col.values.copyWithin(at + 1, at, this.rows - 1);
      col.values[at] = NaN;
      col.sparse?.splice(at, 0, null);
    }
    return at;
  }

  #grow(capacity: number): void {
    const steps = new Float64Array(capacity);
    steps.set(this.steps);
    this.steps = steps;
    for (const col of this.columns.values()) {
      const values = new Float64Array(capacity).fill(NaN);
      values.set(col.values);
      col.values = values;
    }
  }

  /**
   * Brings the null-holding copies up to date with the gaps: made for a series that misses points,
   * dropped for one that turned out complete (the usual case once a step has fully arrived).
   */
  #syncGaps(): void {
    for (const col of this.columns.values()) {
      if (col.filled === this.rows) col.sparse = null;
      else col.sparse ??= Array.from(col.values.subarray(0, this.rows), (v) => (Number.isNaN(v) ? null : v));
    }
  }

  #orderedColumns(): Array<[string, Column]> {
    // By metric name in first-seen order of the chart's names, then by scope with the team first.
    this.#ordered ??= [...this.columns.entries()].sort(([, a], [, b]) => {
      const stack = this.spec.stack ?? [];
      const sa = stack.indexOf(a.name);
      const sb = stack.indexOf(b.name);
      if (sa !== sb) return (sa < 0 ? Infinity : sa) - (sb < 0 ? Infinity : sb);
      if (a.name !== b.name) return a.name < b.name ? -1 : 1;
      if (a.scope === 'team' || b.scope === 'team') return a.scope === 'team' ? -1 : 1;
      return a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0;
    });
    return this.#ordered;
  }

  /** The chart's series in drawing order (uPlot's series 1..n). */
  series(): SeriesInfo[] {
    const cols = this.#orderedColumns();
    const names = [...new Set(cols.map(([, c]) => c.name))];
    const stack = new Set(this.spec.stack ?? []);
    return cols.map(([key, c]) => ({
      key,
      name: c.name,
      scope: c.scope,
      label: seriesLabel(c.name, c.scope, names),
      scopeIndex: this.scopeIndex(c.scope),
      nameIndex: names.indexOf(c.name),
      stacked: stack.has(c.name),
    }));
  }

  /**
   * uPlot's data: the steps, then one column per series in `series()` order. Views of the live
   * buffers, valid until the next append. Stacked series get running sums (a missing part counts
   * as 0) so their bands sit on each other; `rawValue` gives the legend the part itself.
   */
  aligned(): AlignedColumns {
    this.#syncGaps();
    const n = this.rows;
    const out: AlignedColumns = [this.steps.subarray(0, n)];
    let sum: Float64Array | null = null;
    for (const [, c] of this.#orderedColumns()) {
      if (this.spec.stack?.includes(c.name)) {
        const next = new Float64Array(n);
        for (let i = 0; i < n; i++) {
          const v = c.values[i]!;
          next[i] = (sum ? sum[i]! : 0) + (Number.isNaN(v) ? 0 : v);
        }
        out.push(next);
        sum = next;
      } else {
        out.push(c.sparse ?? c.values.subarray(0, n));
      }
    }
    return out;
  }

  /** How many steps series `index` (0-based, `series()` order) has a value at. */
  filledCount(index: number): number {
    return this.#orderedColumns()[index]?.[1].filled ?? 0;
  }

  /** The scopes' colour slots changed: the chart's uPlot instance must be rebuilt with the new colours. */
  recolor(): void {
    this.structureVersion++;
  }

  /** The value of series `index` (0-based, `series()` order) at a row, or null where it has none. */
  rawValue(index: number, row: number): number | null {
    const col = this.#orderedColumns()[index]?.[1];
    const v = col && row >= 0 && row < this.rows ? col.values[row]! : NaN;
    return Number.isNaN(v) ? null : v;
  }
}

/** Every chart of one run, fed by the history and then by progress, step by step. */
export class SeriesStore {
  readonly #charts = new Map<string, ChartData>();
  /** Colour slot per scope (agent, policy) seen so far. */
  #slots = new Map<string, number>();
  readonly #dirty = new Set<ChartData>();
  #lastStep = -1;

  constructor(private readonly specs?: readonly ChartSpec[]) {}

  /** The highest step seen, -1 before any. */
  get lastStep(): number {
    return this.#lastStep;
  }

  /** Charts with at least one series, in display order. */
  charts(): ChartData[] {
    return [...this.#charts.values()].sort((a, b) => compareChartIds(a.spec.id, b.spec.id, this.specs));
  }

  /** Adds points of whole series (the history, or a gap filled in); points already held are overwritten. */
  addSeries(series: readonly SeriesInput[]): void {
    this.#addScopes(series.map((s) => scopeOf(s.agentId, s.policyId)));
    for (const s of series) for (const p of s.points) this.#add(s.name, s.agentId, s.policyId, p.step, p.value);
  }

  /**
   * Adds one committed step. Returns the first missing step when this one does not follow the last
   * seen (the webview missed progress while hidden or disconnected), else null.
   */
  addProgress(step: number, metrics: readonly Metric[]): number | null {
    const gap = step > this.#lastStep + 1 ? this.#lastStep + 1 : null;
    this.#addScopes(metrics.map((m) => scopeOf(m.agentId, m.policyId)));
    for (const m of metrics) this.#add(m.name, m.agentId, m.policyId, step, m.value);
    return gap;
  }

  /** Charts changed since the last call (each once). */
  takeDirty(): ChartData[] {
    const out = [...this.#dirty];
    this.#dirty.clear();
    return out;
  }

  #add(name: string, agentId: string | undefined, policyId: string | undefined, step: number, value: number): void {
    if (step > this.#lastStep) this.#lastStep = step;
    const id = chartIdOf(name, this.specs);
    let chart = this.#charts.get(id);
    if (!chart) {
      const spec = chartSpecOf(id, this.specs);
      // Metrics stated elsewhere (the test results, in the header) get no card.
      if (spec.charted === false) return;
      chart = new ChartData(spec, (scope) => this.#slots.get(scope) ?? 0);
      this.#charts.set(id, chart);
    }
    chart.set(seriesKeyOf(name, agentId, policyId), name, scopeOf(agentId, policyId), step, value);
    this.#dirty.add(chart);
  }

  /**
   * Gives new scopes their colour slots. Slots come from the names (`colorSlots`), so they do not
   * depend on the order series arrive in; only a collision between two of the run's scopes moves
   * one, and then every chart is redrawn with the new colours.
   */
  #addScopes(scopes: readonly string[]): void {
    if (scopes.every((s) => s === 'team' || this.#slots.has(s))) return;
    const next = colorSlots([...this.#slots.keys(), ...scopes]);
    const moved = [...this.#slots].some(([scope, slot]) => next.get(scope) !== slot);
    this.#slots = next;
    if (!moved) return;
    for (const chart of this.#charts.values()) {
      chart.recolor();
      this.#dirty.add(chart);
    }
  }
}
