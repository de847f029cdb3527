/**
 * A run worker: one training run, whole, in a worker thread — warm start, rollouts, environment
 * stepping, advantages, updates (through its own engine worker) and store commits on its own
 * connection to the workspace database. The server's main thread only reads, records states and
 * relays what this thread reports (run-messages.ts), so its event loop never waits on training.
 *
 * The worker never records a run state: the run manager decides 'paused', 'done' or 'failed' from
 * how this thread ended (a `finished`, `aborted` or `failed` message, or none at all after a crash).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { loadRunExperiment, readRunFolder } from './run-folder.ts';
import { startEngine } from '../rl/trainer.ts';
import type { Engine } from '../runtime/engine.ts';
import { openRunStore, type RunStore } from '../store/index.ts';
import { EngineCalls, gateEngine, type EngineGate } from './engine-gate.ts';
import { fromRunWorkerSchema, runWorkerDataSchema, toRunWorkerSchema, type FromRunWorker } from './run-messages.ts';
import { trainRun } from './run-session.ts';
import { lowerThreadPriority } from './thread-priority.ts';

const port = parentPort;
if (!port) throw new Error('run-worker.ts runs in a worker thread started by the run manager');

// Messages are parsed on the way out too: a report the manager would reject fails here, naming the field.
const post = (m: FromRunWorker) => port.postMessage(fromRunWorkerSchema.parse(m));

const data = runWorkerDataSchema.parse(workerData);
/** Shared with the run manager, which terminates this thread only while no engine call is in flight. */
const calls = new EngineCalls(data.engineCalls);

let stopRequested = false;
let abortRequested = false;
let engineStarting: Promise<Engine> | null = null;
let gate: EngineGate | null = null;
let store: RunStore | null = null;
let abandoning: Promise<void> | null = null;

port.on('message', (raw: unknown) => {
  const parsed = toRunWorkerSchema.safeParse(raw);
  // Throwing here would crash the thread mid-step; a message this worker does not know is ignored, loudly.
  if (!parsed.success) return post({ kind: 'log', line: `run worker: ignored a malformed message: ${parsed.error.message}` });
  const m = parsed.data;
  stopRequested = true;
  if (m.kind === 'abort' && !abortRequested) {
    abortRequested = true;
    void abandon();
  }
});
// The port must not keep the thread alive: when training returns, the worker exits by itself.
port.unref();

/**
 * Leaves the step in flight: no further engine call settles, so the trainer stays suspended where
 * it is; once the calls in flight have returned the engine worker is idle and safe to close. The
 * whole of it counts as one essential engine call, so the manager never terminates the thread in
 * the middle (between the drain and the close, say). The thread then winds down by itself (file
 * writes already started finish first; checkpoints are written under a temporary name and renamed,
 * so one cut short is never mistaken for a whole one); the store closes with it.
 */
function abandon(): Promise<void> {
  abandoning ??= calls
    .essential(async () => {
      // An engine still starting is waited for, then closed unused.
      const engine = await engineStarting?.catch(() => null);
      await gate?.drain();
      await engine?.close();
    })
    .then(() => post({ kind: 'aborted' }));
  return abandoning;
}

async function main(): Promise<void> {
  const folder = await readRunFolder(data.runDir);
  const { experiment } = await loadRunExperiment(folder);
  store = openRunStore(folder.databasePath);
  const log = (line: string) => post({ kind: 'log', line });
  // Before the engine starts, so its threads inherit the lower priority (thread-priority.ts).
  const notLowered = lowerThreadPriority();
  if (notLowered) log(notLowered);
  if (abortRequested) return; // aborted before the engine started: abandon() has reported
  // Creating sessions is ONNX Runtime work too: the manager must not tear the thread down meanwhile.
  engineStarting = calls.essential(() => startEngine(experiment, log));
  const engine = await engineStarting;
  if (abortRequested) return; // abandon() closes it
  gate = gateEngine(engine, calls);
  const summary = await trainRun(
    { store, folder, experiment, resume: data.resume, engine: gate.engine },
    {
      shouldStop: () => stopRequested,
      log,
      onWarmUp: (p) => post({ kind: 'warmUp', ...p }),
      onCommit: (c) => post({ kind: 'progress', step: c.step, steps: c.steps, stepMs: c.ms, metrics: [...c.metrics], timingsMs: { ...c.timingsMs } }),
    },
  );
  await calls.essential(() => engine.close());
  store.close();
  post({ kind: 'finished', lastStep: summary.lastStep, stopped: summary.stopped });
}

main().catch(async (e: unknown) => {
  if (abortRequested) return; // the abandoned trainer's errors are moot: abandon() reports
  const engine = await engineStarting?.catch(() => null);
  if (engine) await calls.essential(() => engine.close());
  store?.close();
  post({ kind: 'failed', error: e instanceof Error ? e.message : String(e) });
});
