/**
 * Handlers for run control and the queries the editor makes. Thin by design: parse has already
 * happened at the connection, so each handler maps params onto the run manager or the store and
 * maps their errors onto JSON-RPC codes.
 */
import { ConfigError, formatConfigPath } from '../protocol/config-errors.ts';
import { ErrorCodes, RpcError, type InvalidConfigData } from '../protocol/json-rpc.ts';
import type { RequestParams, RequestResult } from '../protocol/methods.ts';
import type { MetricSeriesKey, RunSummary } from '../protocol/trajectory.ts';
import { ClientPathError } from '../runs/path-confinement.ts';
import type { RunManager } from '../runs/run-manager.ts';
import type { RequestContext, RequestHandlers } from './connection.ts';

export type RunRequestMethod =
  | 'run/start'
  | 'run/pause'
  | 'run/resume'
  | 'run/stop'
  | 'run/get'
  | 'runs/list'
  | 'steps/list'
  | 'metrics/query'
  | 'trajectories/query'
  | 'trajectories/forTask'
  | 'trajectory/get'
  | 'checkpoints/list';

/** Maps what the run manager and the config parser throw onto protocol errors. */
export function toRpcError(e: unknown): unknown {
  if (e instanceof RpcError) return e;
  if (e instanceof ConfigError) {
    const data: InvalidConfigData = { source: e.source, issues: e.issues.map((i) => ({ path: i.path.length === 0 ? '' : formatConfigPath(i.path), segments: [...i.path], message: i.message })) };
    return new RpcError(ErrorCodes.InvalidConfig, e.message, data);
  }
  // A path outside the workspace and its allowed folders, or a named file that cannot be read.
  if (e instanceof ClientPathError) return new RpcError(ErrorCodes.FileError, e.message);
  const code = e instanceof Error ? (e as Error & { code?: unknown }).code : undefined;
  if (code === 'unknown-run') return new RpcError(ErrorCodes.UnknownRun, (e as Error).message);
  if (code === 'invalid-state') return new RpcError(ErrorCodes.InvalidRunState, (e as Error).message);
  return e;
}

async function mapped<T>(body: () => Promise<T> | T): Promise<T> {
  try {
    return await body();
  } catch (e) {
    throw toRpcError(e);
  }
}

function knownRun(manager: RunManager, runId: string): void {
  if (!manager.store.getRun(runId)) throw new RpcError(ErrorCodes.UnknownRun, `unknown run '${runId}'`);
}

/** Every series of a run, or the ones asked for, each with its points. */
function metricSeries(manager: RunManager, p: RequestParams<'metrics/query'>): RequestResult<'metrics/query'> {
  knownRun(manager, p.runId);
  const keys: MetricSeriesKey[] = p.series ?? manager.store.listMetricSeries(p.runId);
  const range = { ...(p.fromStep !== undefined ? { fromStep: p.fromStep } : {}), ...(p.toStep !== undefined ? { toStep: p.toStep } : {}) };
  return { series: keys.map((k) => ({ ...k, points: manager.store.metricSeries({ runId: p.runId, ...k, ...range }) })) };
}

/** Paths in `run/start` (the config file, checkpoints in the config) are confined by the manager's path rule. */
export function runHandlers(manager: RunManager): Pick<RequestHandlers, RunRequestMethod> {
  const run = (r: RunSummary) => ({ run: r });
  return {
    'run/start': (p, ctx: RequestContext) =>
      mapped(async () => {
        ctx.progress.begin('Starting run', p.configPath ?? 'inline config');
        try {
          const r = await manager.start({ ...(p.configPath !== undefined ? { configPath: p.configPath } : { config: p.config }), ...(p.steps !== undefined ? { steps: p.steps } : {}) });
          ctx.progress.end(`run ${r.id} ${r.state}`);
          return run(r);
        } catch (e) {
          ctx.progress.end('refused');
          throw e;
        }
      }),
    'run/pause': (p) => mapped(() => run(manager.pause(p.runId))),
    'run/resume': (p) => mapped(async () => run(await manager.resume(p.runId, p.steps !== undefined ? { steps: p.steps } : {}))),
    'run/stop': (p) => mapped(() => run(manager.stop(p.runId))),
    'run/get': (p) => {
      const r = manager.store.getRun(p.runId);
      if (!r) throw new RpcError(ErrorCodes.UnknownRun, `unknown run '${p.runId}'`);
      return { run: r };
    },
    'runs/list': () => ({ runs: manager.list() }),
    'steps/list': (p) => {
      knownRun(manager, p.runId);
      return { steps: manager.store.listSteps(p.runId, { ...(p.fromStep !== undefined ? { fromStep: p.fromStep } : {}), ...(p.limit !== undefined ? { limit: p.limit } : {}) }) };
    },
    'metrics/query': (p) => metricSeries(manager, p),
    'trajectories/query': (p) => {
      knownRun(manager, p.runId);
      return { trajectories: manager.store.listTrajectories(p) };
    },
    'trajectories/forTask': (p) => {
      knownRun(manager, p.runId);
      return { trajectories: manager.store.listTrajectories({ runId: p.runId, envSeed: p.envSeed, phase: p.phase, limit: 10_000 }) };
    },
    'trajectory/get': (p) => {
      const t = manager.store.getTrajectory(p.trajectoryId);
      if (!t) throw new RpcError(ErrorCodes.NotFound, `unknown trajectory ${p.trajectoryId}`);
      return { trajectory: t };
    },
    'checkpoints/list': (p) => {
      knownRun(manager, p.runId);
      return { checkpoints: manager.store.listCheckpoints(p.runId) };
    },
  };
}
