/**
 * One run's worker thread, seen from the server's main thread: starting it (run-worker.ts, through
 * tsx's loader when running from sources), parsing what it posts (run-messages.ts), asking it to
 * stop or abort, and the last resort for a worker that does not exit. The run manager decides what
 * its end means for the run (run-lifecycle.ts); this module only records how it ended.
 */
import { totalmem } from 'node:os';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import { EngineCalls } from './engine-gate.ts';
import { fromRunWorkerSchema, type FromRunWorker, type RunWorkerData, type ToRunWorker } from './run-messages.ts';

/** How training ended, as the worker reported it. */
export type RunOutcome = Extract<FromRunWorker, { kind: 'finished' | 'aborted' | 'failed' }>;
/** What a worker reports while it trains: a log line, the warm-up's progress, a committed step. */
export type RunReport = Extract<FromRunWorker, { kind: 'log' | 'warmUp' | 'progress' }>;

/** How a worker thread ended. */
export interface WorkerEnd {
  /** The thread's exit code. */
  readonly code: number;
  /** How training ended, as the worker reported it; null after a crash. */
  readonly outcome: RunOutcome | null;
  /** The first error the worker raised (uncaught exception, out of memory, a malformed message). */
  readonly crash: Error | null;
  /** The worker was terminated, as a last resort after asking it to abort. */
  readonly terminated: boolean;
}

export interface RunThreadOptions {
  readonly runId: string;
  readonly runDir: string;
  /** Continue from the run's resume checkpoint instead of starting at step 0. */
  readonly resume: boolean;
  readonly resourceLimits: ResourceLimits;
  /** How long a worker that reported how training ended, or was asked to abort, may take to exit. */
  readonly exitGraceMs: number;
  readonly log: (line: string) => void;
  readonly onReport: (report: RunReport) => void;
  /** Once, after every message the worker posted. */
  readonly onExit: (end: WorkerEnd) => void;
}

/**
 * After a worker reports how training ended it should exit at once, and an aborted one as soon as
 * its engine call in flight returns; past this it is terminated, but never inside an engine call.
 */
export const EXIT_GRACE_MS = 30_000;

/** A run worker's heap limits when none are given (see `RunManagerOptions.workerResourceLimits`). */
export const defaultWorkerLimits = (): ResourceLimits => ({ maxOldGenerationSizeMb: Math.min(4096, Math.max(512, Math.floor(totalmem() / 4 / 2 ** 20))) });

function workerEntry(): { url: URL; data: Record<string, unknown> } {
  const self = import.meta.url;
  // From TypeScript sources the worker needs tsx's loader registered in its own thread (as the engine's does).
  if (self.endsWith('.ts')) return { url: new URL('../runtime/tsx-worker-boot.mjs', self), data: { entry: new URL('./run-worker.ts', self).href } };
  return { url: new URL('./run-worker.js', self), data: {} };
}

export class RunThread {
  private outcome: RunOutcome | null = null;
  private crash: Error | null = null;
  private terminated = false;
  /** terminateLater is watching the worker. */
  private terminating = false;
  private exited = false;

  private constructor(
    private readonly worker: Worker,
    /** The worker's engine calls in flight (shared memory): it is never terminated inside one. */
    private readonly calls: EngineCalls,
    private readonly o: RunThreadOptions,
  ) {
    worker.on('message', (raw: unknown) => this.onMessage(raw));
    worker.on('error', (e: Error) => {
      this.crash ??= e;
    });
    // Node delivers every message the worker posted before it emits 'exit', so the run's last
    // progress always precedes its final state.
    worker.on('exit', (code) => {
      this.exited = true;
      o.onExit({ code, outcome: this.outcome, crash: this.crash, terminated: this.terminated });
    });
  }

  /** Starts the worker; throws when the thread cannot be created. */
  static start(o: RunThreadOptions): RunThread {
    const entry = workerEntry();
    const calls = EngineCalls.create();
    const data: RunWorkerData = { runId: o.runId, runDir: o.runDir, resume: o.resume, engineCalls: calls.buffer };
    const worker = new Worker(entry.url, { workerData: { ...entry.data, ...data }, resourceLimits: o.resourceLimits });
    return new RunThread(worker, calls, o);
  }

  /** Stop after the step in flight (pause or stop: the manager decides the state). */
  stop(): void {
    const m: ToRunWorker = { kind: 'stop' };
    this.worker.postMessage(m);
  }

  /** Abandons the step in flight; the worker exits once its engine call in flight returns. */
  abort(): void {
    const m: ToRunWorker = { kind: 'abort' };
    this.worker.postMessage(m);
    this.terminateLater('it was asked to abort');
  }

  private onMessage(raw: unknown): void {
    const parsed = fromRunWorkerSchema.safeParse(raw);
    if (!parsed.success) {
      this.crash ??= new Error(`malformed message from the run worker: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
      this.abort();
      return;
    }
    const m = parsed.data;
    switch (m.kind) {
      case 'log':
      case 'warmUp':
      case 'progress':
        this.o.onReport(m);
        return;
      case 'finished':
      case 'aborted':
      case 'failed':
        // A run that finished right as it was aborted has finished.
        if (this.outcome?.kind !== 'finished') this.outcome = m;
        this.terminateLater('training ended');
        return;
    }
  }

  /**
   * The last resort for a worker that does not exit: terminated once `exitGraceMs` have passed and
   * its engine has no call in flight (a thread torn down inside an ONNX Runtime call aborts the
   * whole process, and a call can outlast any grace: a long train step on a big model). While one
   * is in flight it waits, checking again every grace period.
   */
  private terminateLater(since: string): void {
    if (this.exited || this.terminating) return;
    this.terminating = true;
    const { exitGraceMs, runId, log } = this.o;
    let waited = 0;
    const check = () => {
      if (this.exited) return;
      waited += exitGraceMs;
      if (!this.calls.tryTerminate()) {
        if (waited === exitGraceMs) log(`run ${runId}: its worker did not exit ${exitGraceMs} ms after ${since}; waiting for its engine call in flight to return`);
        setTimeout(check, exitGraceMs).unref();
        return;
      }
      log(`run ${runId}: its worker did not exit ${waited} ms after ${since} and has no engine call in flight; terminating it`);
      this.terminated = true;
      void this.worker.terminate();
    };
    setTimeout(check, exitGraceMs).unref();
  }
}
