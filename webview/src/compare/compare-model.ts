/**
 * The run comparison's data: several runs' metric series regrouped as one chart per metric (and
 * agent or policy, for per-agent metrics) with a line per run, as W&B and TensorBoard overlay runs.
 * A run keeps one colour in every chart (the palette slot its id hashes to, `colorSlots`), so the
 * legend above the charts says it once. Charts come in the dashboard's order (chart-groups.ts),
 * are titled in the dashboard's words (metric-labels.ts), and exist only for series with data; the
 * test results (two points a run, stated in each dashboard's header) get none. Live runs add their
 * steps as they commit. Pure: unit tested.
 */
import type { z } from 'zod';
import type { metricSeriesSchema } from '../../../server/protocol/methods.ts';
import type { Metric } from '../../../server/protocol/trajectory.ts';
import { chartIdOf, chartSpecOf, colorSlots, compareChartIds, scopeOf, type ChartSpec } from '../dashboard/chart-groups.ts';
import { metricLabel } from '../dashboard/metric-labels.ts';

export interface ComparedRun {
  readonly runId: string;
  /** The run as the Runs view labels it (`tiny · 15:52` when names repeat). */
  readonly label: string;
}

export interface CompareChart {
  /** `<metric>|<scope>`: stable across runs and reloads. */
  readonly id: string;
  readonly title: string;
  /** The y axis' title (the dashboard chart's). */
  readonly axis: string;
  readonly unit: ChartSpec['unit'];
  /** The runs that have points in this chart, in the comparison's run order. */
  readonly runIds: readonly string[];
}

/** Steps (x) and one column of values per run of the chart (null where that run has no point). */
export interface AlignedRuns {
  readonly steps: number[];
  readonly columns: Array<Array<number | null>>;
}

type MetricSeries = z.infer<typeof metricSeriesSchema>;

interface SeriesKey {
  readonly name: string;
  readonly scope: string;
}

export class RunComparison {
  readonly runs: readonly ComparedRun[];
  /** Palette slot per run id. */
  readonly slots: ReadonlyMap<string, number>;
  /** chart id → run id → step → value. */
  readonly #points = new Map<string, Map<string, Map<number, number>>>();
  readonly #keys = new Map<string, SeriesKey>();

  constructor(runs: readonly ComparedRun[]) {
    this.runs = runs;
    this.slots = colorSlots(runs.map((r) => r.runId));
  }

  /** A run's stored series (its history, or a gap filled in). */
  addSeries(runId: string, series: readonly MetricSeries[]): void {
    for (const s of series) for (const p of s.points) this.#add(runId, s.name, s.agentId, s.policyId, p.step, p.value);
  }

  /** A step a live run committed. */
  addMetrics(runId: string, step: number, metrics: readonly Metric[]): void {
    for (const m of metrics) this.#add(runId, m.name, m.agentId, m.policyId, step, m.value);
  }

  /** The charts, in display order. */
  charts(): CompareChart[] {
    const order = new Map(this.runs.map((r, i) => [r.runId, i]));
    const charts = [...this.#points].map(([id, byRun]): CompareChart & { key: SeriesKey } => {
      const key = this.#keys.get(id)!;
      const spec = chartSpecOf(chartIdOf(key.name));
      const words = metricLabel(key.name);
      return {
        id,
        key,
        title: `${words.charAt(0).toUpperCase()}${words.slice(1)}${key.scope === 'team' ? '' : ` · ${key.scope}`}`,
        axis: spec.axis,
        unit: spec.unit,
        runIds: [...byRun.keys()].sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0)),
      };
    });
    charts.sort(
      (a, b) =>
        compareChartIds(chartIdOf(a.key.name), chartIdOf(b.key.name)) ||
        a.key.name.localeCompare(b.key.name) ||
        (a.key.scope === 'team' ? -1 : b.key.scope === 'team' ? 1 : a.key.scope.localeCompare(b.key.scope)),
    );
    return charts.map(({ key: _, ...chart }) => chart);
  }

  /** A chart's points, aligned on the union of its runs' steps. */
  aligned(chart: CompareChart): AlignedRuns {
    const byRun = this.#points.get(chart.id);
    const steps = [...new Set(chart.runIds.flatMap((r) => [...(byRun?.get(r)?.keys() ?? [])]))].sort((a, b) => a - b);
    const columns = chart.runIds.map((r) => {
      const values = byRun?.get(r);
      return steps.map((s) => values?.get(s) ?? null);
    });
    return { steps, columns };
  }

  #add(runId: string, name: string, agentId: string | undefined, policyId: string | undefined, step: number, value: number): void {
    if (chartSpecOf(chartIdOf(name)).charted === false) return;
    const scope = scopeOf(agentId, policyId);
    const id = `${name}|${scope}`;
    if (!this.#keys.has(id)) this.#keys.set(id, { name, scope });
    let byRun = this.#points.get(id);
    if (!byRun) this.#points.set(id, (byRun = new Map()));
    let values = byRun.get(runId);
    if (!values) byRun.set(runId, (values = new Map()));
    values.set(step, value);
  }
}
