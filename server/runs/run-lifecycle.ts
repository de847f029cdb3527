/**
 * A run's lifecycle as the run manager drives it (it is the only writer of run states; the workers
 * write steps):
 *
 *   start ─▶ queued ─(slot frees)─▶ running ─(every step trained)─────────────▶ done
 *                │                    │ ├─(pause: at the step boundary)──────▶ paused ─(resume)─▶ running | queued
 *                │                    │ └─(stop: 'stopping' at once)─▶ stopping ─(boundary)─▶ done
 *                │                    └─(the trainer throws, the worker crashes)─▶ failed ─(resume)─▶ …
 *                ├─(pause)─▶ paused
 *                └─(stop)──▶ done         paused | failed ─(stop)─▶ done;  done ─(resume with more steps)─▶ …
 *
 * This module holds the rules that need no live worker: the state a run ends in when its worker
 * exits, and why a run the manager does not own cannot be paused or stopped.
 */
import type { RunState, RunSummary } from '../protocol/trajectory.ts';
import type { LockHolder } from './run-lock.ts';
import { RunError } from './run-error.ts';
import type { WorkerEnd } from './run-thread.ts';

/** What the user asked of a running run; both stop its worker at the next step boundary. */
export type StopRequest = 'pause' | 'stop';

/** The state a run's worker leaves it in, with the error recorded for a failed one. */
export type RunEnd = { readonly state: 'paused' | 'done' } | { readonly state: 'failed'; readonly error: string };

/**
 * The state a run ends in when its worker exits. In order: a failure the manager decided (the
 * memory limit) wins; then what the worker reported; then a crash; then an abort or termination
 * (shutdown cut the step in flight: everything committed and the last checkpoint are intact).
 */
export function runEnd(end: WorkerEnd, run: { readonly failure: string | null; readonly request: StopRequest | null }, heapLimitMb: number | undefined): RunEnd {
  const o = end.outcome;
  if (run.failure !== null) return { state: 'failed', error: run.failure };
  if (o?.kind === 'finished') return { state: o.stopped && run.request !== 'stop' ? 'paused' : 'done' };
  if (o?.kind === 'failed') return { state: 'failed', error: o.error };
  if (end.crash && (end.crash as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY') {
    return { state: 'failed', error: `out of memory: the run worker's JavaScript heap reached its limit${heapLimitMb === undefined ? '' : ` of ${heapLimitMb} MB`} (${end.crash.message}); the server keeps serving. Make the demonstrations, batch or token budgets smaller` };
  }
  if (end.crash) return { state: 'failed', error: `the run worker crashed: ${end.crash.message}` };
  if (o?.kind === 'aborted' || end.terminated) return { state: run.request === 'stop' ? 'done' : 'paused' };
  return { state: 'failed', error: `the run worker exited with code ${end.code} before training ended` };
}

/** Whether a run in this state is recorded as trained or about to be by some process. */
export const isTrainingState = (state: RunState): boolean => state === 'running' || state === 'stopping' || state === 'queued';

/**
 * Why a run this manager does not own cannot be paused or stopped: it is being resumed here,
 * another process trains it (`holder`, its run lock's holder), or its state does not allow it.
 */
export function notLiveError(run: RunSummary, verb: 'paused' | 'stopped', resuming: boolean, holder: () => LockHolder | null): RunError {
  if (resuming) return new RunError('invalid-state', `run ${run.id} is being resumed; it can be ${verb} once it runs`);
  if (isTrainingState(run.state)) {
    const h = holder();
    if (h) return new RunError('invalid-state', `run ${run.id} is being trained by process ${h.pid} on ${h.host}, not by this server; it can only be ${verb} there`);
    return new RunError('invalid-state', `run ${run.id} is recorded as ${run.state} but no process is training it; resume it first`);
  }
  return new RunError('invalid-state', `run ${run.id} is ${run.state}; only a running or queued run can be ${verb}`);
}
