/**
 * Reads metrics for the dashboard: one series ordered by step (a chart), the series a run has (which
 * charts to draw), the latest value of each series (the live numbers) and all values of one step.
 *
 * A series is a (run, name, agent, policy) row of `metric_series`; its points are the `metrics` rows
 * clustered under the primary key (series_id, step). A chart is therefore one index seek plus a range
 * scan, and "latest" is one seek per series (max(step) on the primary key) instead of a scan of every
 * value the run ever logged. In SQL, '' stands for "no agent" / "no policy"; the API uses absent fields.
 */
import type Database from 'better-sqlite3';
import {
  metricSeriesQuerySchema,
  type LatestMetric,
  type Metric,
  type MetricPoint,
  type MetricSeriesKey,
  type MetricSeriesQuery,
} from '../protocol/trajectory.ts';
import { invalidInput } from './step-input.ts';

interface SeriesRow {
  name: string;
  agent_id: string;
  policy_id: string;
}

/** The queries, exported so the tests can check their plans. */
export const metricSql = {
  points: `SELECT m.step AS step, m.value AS value
    FROM metric_series s JOIN metrics m ON m.series_id = s.id
    WHERE s.run_id = ? AND s.name = ? AND s.agent_id = ? AND s.policy_id = ? AND m.step BETWEEN ? AND ?
    ORDER BY m.step`,
  seriesOfRun: `SELECT name, agent_id, policy_id FROM metric_series s
    WHERE run_id = ? AND EXISTS (SELECT 1 FROM metrics m WHERE m.series_id = s.id)
    ORDER BY name, agent_id, policy_id`,
  latestOfRun: `SELECT s.name, s.agent_id, s.policy_id, m.step, m.value
    FROM metric_series s JOIN metrics m
      ON m.series_id = s.id AND m.step = (SELECT max(step) FROM metrics WHERE series_id = s.id)
    WHERE s.run_id = ?
    ORDER BY s.name, s.agent_id, s.policy_id`,
  valuesOfStep: `SELECT s.name, s.agent_id, s.policy_id, m.value
    FROM metric_series s JOIN metrics m ON m.series_id = s.id AND m.step = ?
    WHERE s.run_id = ?
    ORDER BY s.name, s.agent_id, s.policy_id`,
} as const;

export class MetricReader {
  private readonly points;
  private readonly seriesOfRun;
  private readonly latestOfRun;
  private readonly valuesOfStep;

  constructor(db: Database.Database) {
    this.points = db.prepare<[string, string, string, string, number, number], MetricPoint>(metricSql.points);
    this.seriesOfRun = db.prepare<[string], SeriesRow>(metricSql.seriesOfRun);
    this.latestOfRun = db.prepare<[string], SeriesRow & { step: number; value: number }>(metricSql.latestOfRun);
    this.valuesOfStep = db.prepare<[number, string], SeriesRow & { value: number }>(metricSql.valuesOfStep);
  }

  /** Points of one series, ordered by step. */
  series(query: MetricSeriesQuery): MetricPoint[] {
    const parsed = metricSeriesQuerySchema.safeParse(query);
    if (!parsed.success) throw invalidInput('metricSeries', parsed.error.issues);
    const q = parsed.data;
    return this.points.all(q.runId, q.name, q.agentId ?? '', q.policyId ?? '', q.fromStep ?? 0, q.toStep ?? Number.MAX_SAFE_INTEGER);
  }

  /** The series of a run that have at least one point. */
  seriesKeys(runId: string): MetricSeriesKey[] {
    return this.seriesOfRun.all(runId).map((row) => withScope({ name: row.name }, row));
  }

  /** The most recent value of every series of a run. */
  latest(runId: string): LatestMetric[] {
    return this.latestOfRun.all(runId).map((row) => withScope({ name: row.name, value: row.value, step: row.step }, row));
  }

  /** Every value logged at one step. */
  atStep(runId: string, step: number): Metric[] {
    return this.valuesOfStep.all(step, runId).map((row) => withScope({ name: row.name, value: row.value }, row));
  }
}

/** Adds agentId / policyId only when the series has them ('' in SQL means none). */
function withScope<T extends { name: string }>(base: T, row: SeriesRow): T & { agentId?: string; policyId?: string } {
  const out: T & { agentId?: string; policyId?: string } = base;
  if (row.agent_id !== '') out.agentId = row.agent_id;
  if (row.policy_id !== '') out.policyId = row.policy_id;
  return out;
}
