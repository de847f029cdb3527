/**
 * Handlers for run control and the queries the editor makes. Thin by design: parse has already
 * happened at the connection, so each handler maps params onto the run manager or the query
 * thread and maps their errors onto JSON-RPC codes.
 */
import { ConfigError, formatConfigPath } from '../protocol/config-errors.ts';
import { ErrorCodes, RpcError, type InvalidConfigData } from '../protocol/json-rpc.ts';
import type { RequestParams } from '../protocol/methods.ts';
import type { RunSummary } from '../protocol/trajectory.ts';
import { ClientPathError } from '../runs/path-confinement.ts';
import type { RunManager } from '../runs/run-manager.ts';
import type { RequestContext, RequestHandlers } from './connection.ts';
import type { QueryMethod } from './query-handlers.ts';
import type { QueryThread } from './query-thread.ts';

export type RunRequestMethod =
  | 'run/start'
  | 'run/pause'
  | 'run/resume'
  | 'run/stop'
  | 'run/rename'
  | 'run/rerun'
  | 'run/delete'
  | 'run/get'
  | 'runs/list'
  | QueryMethod;

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

/** Paths in `run/start` (the config file, checkpoints in the config) are confined by the manager's path rule. */
export function runHandlers(manager: RunManager, queries: QueryThread): Pick<RequestHandlers, RunRequestMethod> {
  const run = (r: RunSummary) => ({ run: r });
  const query =
    <M extends QueryMethod>(method: M) =>
    (p: RequestParams<M>, ctx: RequestContext) =>
      queries.run(ctx.connection, method, p, ctx.signal);
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
    'run/rerun': (p) => mapped(async () => run(await manager.start({ rerunOf: p.runId }))),
    'run/rename': (p) => mapped(() => run(manager.rename(p.runId, p.name))),
    'run/delete': (p) => mapped(() => manager.delete(p.runId)),
    'run/get': (p) => {
      const r = manager.store.getRun(p.runId);
      if (!r) throw new RpcError(ErrorCodes.UnknownRun, `unknown run '${p.runId}'`);
      const warmUp = manager.warmUp(p.runId);
      return warmUp ? { run: r, warmUp } : { run: r };
    },
    'runs/list': () => ({ runs: manager.list() }),
    // The store queries run in the query thread, fairly between clients (query-thread.ts).
    'steps/list': query('steps/list'),
    'metrics/query': query('metrics/query'),
    'trajectories/query': query('trajectories/query'),
    'trajectories/forTask': query('trajectories/forTask'),
    'trajectory/get': query('trajectory/get'),
    'checkpoints/list': query('checkpoints/list'),
  };
}
