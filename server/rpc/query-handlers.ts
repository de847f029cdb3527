/**
 * The editor's read-only queries of the run store: steps, metric series, trajectories, checkpoints.
 * Each is a function of a `RunStore` and parsed params, so the same table runs wherever the store
 * is: the server runs it in its query thread (query-thread.ts) on a connection of its own, never on
 * the event loop that answers `server/status` and relays training progress.
 */
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import type { RequestParams, RequestResult } from '../protocol/methods.ts';
import type { MetricSeriesKey } from '../protocol/trajectory.ts';
import type { RunStore } from '../store/index.ts';

export const queryMethods = ['steps/list', 'metrics/query', 'trajectories/query', 'trajectories/forTask', 'trajectory/get', 'checkpoints/list'] as const;
export type QueryMethod = (typeof queryMethods)[number];

export type QueryHandlers = { readonly [M in QueryMethod]: (params: RequestParams<M>) => RequestResult<M> };

/** How many trajectories `trajectories/forTask` answers with: one seed across every step that ran it. */
const FOR_TASK_LIMIT = 10_000;

function knownRun(store: RunStore, runId: string): void {
  if (!store.getRun(runId)) throw new RpcError(ErrorCodes.UnknownRun, `unknown run '${runId}'`);
}

export function queryHandlers(store: RunStore): QueryHandlers {
  return {
    'steps/list': (p) => {
      knownRun(store, p.runId);
      return { steps: store.listSteps(p.runId, { ...(p.fromStep !== undefined ? { fromStep: p.fromStep } : {}), ...(p.limit !== undefined ? { limit: p.limit } : {}) }) };
    },
    // Every series of a run, or the ones asked for, each with its points.
    'metrics/query': (p) => {
      knownRun(store, p.runId);
      const keys: MetricSeriesKey[] = p.series ?? store.listMetricSeries(p.runId);
      const range = { ...(p.fromStep !== undefined ? { fromStep: p.fromStep } : {}), ...(p.toStep !== undefined ? { toStep: p.toStep } : {}) };
      return { series: keys.map((k) => ({ ...k, points: store.metricSeries({ runId: p.runId, ...k, ...range }) })) };
    },
    'trajectories/query': (p) => {
      knownRun(store, p.runId);
      return { trajectories: store.listTrajectories(p) };
    },
    'trajectories/forTask': (p) => {
      knownRun(store, p.runId);
      return { trajectories: store.listTrajectories({ runId: p.runId, envSeed: p.envSeed, phase: p.phase, limit: FOR_TASK_LIMIT }) };
    },
    'trajectory/get': (p) => {
      const t = store.getTrajectory(p.trajectoryId);
      if (!t) throw new RpcError(ErrorCodes.NotFound, `unknown trajectory ${p.trajectoryId}`);
      return { trajectory: t };
    },
    'checkpoints/list': (p) => {
      knownRun(store, p.runId);
      return { checkpoints: store.listCheckpoints(p.runId) };
    },
  };
}
