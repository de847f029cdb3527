/**
 * What travels between the run manager (server main thread) and a run worker. Each side parses
 * what it receives with these schemas: a worker is our code, but it is also where a bug, a bad
 * config or an out-of-memory lands, and a malformed message must fail loudly at the boundary
 * rather than as a half-updated run.
 *
 * The worker's start parameters travel as `workerData` (so nothing has to keep the worker alive
 * while it waits for them); afterwards the main thread only asks it to stop, at the next step
 * boundary or (shutdown) at once, and the worker reports log lines, the warm-up's progress, one
 * progress message per committed step, and how training ended.
 */
import { z } from 'zod';
import { warmUpProgressSchema } from '../protocol/methods.ts';
import { idSchema, metricSchema, stepTimingsSchema } from '../protocol/trajectory.ts';

/** `workerData` of a run worker (beside `entry`, which the TypeScript boot file consumes). */
export const runWorkerDataSchema = z.object({
  runId: idSchema,
  /** Absolute path of the run folder (its run.json names the target step and the config source). */
  runDir: z.string().min(1),
  /** Continue from the run's resume checkpoint instead of starting at step 0. */
  resume: z.boolean(),
  /** The worker's engine calls in flight, shared with the manager (engine-gate.ts's EngineCalls). */
  engineCalls: z.instanceof(SharedArrayBuffer),
});
export type RunWorkerData = z.infer<typeof runWorkerDataSchema>;

/** Main thread → worker. */
export const toRunWorkerSchema = z.discriminatedUnion('kind', [
  /** Stop after the step in flight (pause or stop: the main thread decides the state). */
  z.object({ kind: z.literal('stop') }),
  /** Give up the step in flight: stop at the next engine call, close the engine, exit (shutdown past its timeout). */
  z.object({ kind: z.literal('abort') }),
]);
export type ToRunWorker = z.infer<typeof toRunWorkerSchema>;

/** Worker → main thread. */
export const fromRunWorkerSchema = z.discriminatedUnion('kind', [
  /** A line of the trainer's log (warm start, step 0, resume). */
  z.object({ kind: z.literal('log'), line: z.string() }),
  /** A step was committed (step 0, the initial validation, included) and its resume checkpoint written. */
  z.object({
    kind: z.literal('progress'),
    step: z.int().nonnegative(),
    steps: z.int().positive(),
    stepMs: z.number().nonnegative(),
    metrics: z.array(metricSchema),
    timingsMs: stepTimingsSchema,
  }),
  /** The warm-up before step 0 moved on (the protocol's `run/didWarmUp`, less the run id). */
  warmUpProgressSchema.extend({ kind: z.literal('warmUp') }),
  /** Training returned: every step trained, or stopped at a boundary as asked (lastStep null: in the warm-up). The worker exits next. */
  z.object({ kind: z.literal('finished'), lastStep: z.int().nonnegative().nullable(), stopped: z.boolean() }),
  /** Aborted as asked: the step in flight is abandoned, the engine closed; the worker exits next. */
  z.object({ kind: z.literal('aborted') }),
  /** Training threw; the worker exits next. */
  z.object({ kind: z.literal('failed'), error: z.string() }),
]);
export type FromRunWorker = z.infer<typeof fromRunWorkerSchema>;
