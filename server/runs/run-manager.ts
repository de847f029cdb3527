/**
 * The run manager: the server's owner of training runs. Each live run trains in its own worker
 * thread (run-worker.ts, driven through run-thread.ts); this class, on the server's main thread,
 * owns the lifecycle state machine (run-lifecycle.ts) and is the only writer of run states (the
 * workers write steps). Runs past `maxConcurrentRuns` wait in its queue (run-queue.ts).
 *
 * Events, per run, in this order: the state change to 'running' comes before any progress of that
 * worker; progress comes once per committed step (step 0, the initial validation, included); the
 * state change that ends the worker ('paused', 'done', 'failed') comes after its last progress.
 * State events are fired synchronously inside the call that caused them (start, resume, pause,
 * stop), before it returns.
 *
 * The server process holds a run's lock (run.lock) from the moment the run is queued or running
 * until its worker has exited, so a terminal's `troupe train --resume` refuses a run the server is
 * training and the server refuses one a terminal is training.
 */
import { existsSync } from 'node:fs';
import { totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import type { ResourceLimits } from 'node:worker_threads';
import { readRunFolder, type RunFolder } from './run-folder.ts';
import { runLockHolder, type RunLock } from './run-lock.ts';
import { markInterruptedRuns } from './interrupted-runs.ts';
import { deleteRunFolder, type RunFolderRemoval } from './run-deletion.ts';
import { thinPoints } from '../rl/warm-start.ts';
import type { WarmUpProgress } from '../protocol/methods.ts';
import { ConfigError } from '../protocol/config-errors.ts';
import type { Metric, RunState, RunSummary } from '../protocol/trajectory.ts';
import { defaultDatabasePath, openRunStore, type RunStore } from '../store/index.ts';
import { Emitter, type Disposable } from './emitter.ts';
import { RunError } from './run-error.ts';
import { MemoryWatch, outOfMemoryFailure } from './memory-watch.ts';
import { notLiveError, runEnd, type StopRequest } from './run-lifecycle.ts';
import { RunQueue } from './run-queue.ts';
import { defaultWorkerLimits, EXIT_GRACE_MS, RunThread, type RunReport, type WorkerEnd } from './run-thread.ts';
import { ClientPathError, type PathConfinement } from './path-confinement.ts';
import { createRun, loadConfigFile, loadInlineConfig, loadRunConfig, prepareResume, recordFailure, type LoadedConfig } from './run-session.ts';

export interface RunManagerOptions {
  /** Folder holding .troupe/ (database at .troupe/troupe.db, run folders at .troupe/runs/<id>). */
  readonly workspace: string;
  /** The server log. Default: stderr. */
  readonly log?: (line: string) => void;
  /** Runs training at once (default 1); more start as 'queued' and start when a slot frees. */
  readonly maxConcurrentRuns?: number;
  /** How long `close()` waits for live runs to reach a step boundary before terminating them (default 60 s). */
  readonly closeTimeoutMs?: number;
  /**
   * How long a worker that reported how training ended, or was asked to abort, may take to exit
   * before it is terminated (default 30 s); never while its engine has a call in flight.
   */
  readonly exitGraceMs?: number;
  /**
   * Limits of each run worker's JavaScript heap. A worker that runs out fails its run (the server
   * stays up). Tensors live in ONNX Runtime's worker, outside these limits. Default: an old
   * generation of a quarter of the machine's memory, between 512 MB and 4 GB (about what Node
   * gives a heap by default, stated so that the out-of-memory error can name it).
   */
  readonly workerResourceLimits?: ResourceLimits;
  /**
   * The most memory (resident set, bytes) this process may hold while runs train; past it, the
   * runs training are stopped and failed with an out-of-memory error, so the server keeps serving
   * instead of the system's out-of-memory killer ending it. Default: 90% of the machine's memory.
   * Sampled every second between engine calls' allocations, so it catches a run that grows step
   * after step; one allocation larger than the machine is what `rl/memory-estimate.ts` refuses
   * before the run starts.
   */
  readonly memoryLimitBytes?: number;
  /**
   * The rule for paths a start request names (its config file, and the checkpoint folders in the
   * config): the server passes the workspace plus `--allow-path` folders. Without it any path is
   * read (tests, and embedders that trust their caller).
   */
  readonly paths?: PathConfinement;
}

export interface StartRunRequest {
  /** A config file, absolute or relative to the workspace. */
  readonly configPath?: string;
  /** Or an inline config object (exactly one of the two); written to the run folder as config.json. */
  readonly config?: unknown;
  /** Or another run's id: a re-run, with that run's config as it started (relative paths as it resolved them). */
  readonly rerunOf?: string;
  /** Overrides training.steps. */
  readonly steps?: number;
}

/** One committed step of a run (step 0, the initial validation, included). */
export interface RunProgress {
  readonly runId: string;
  readonly step: number;
  /** The step the run trains to. */
  readonly steps: number;
  /** Wall-clock time of the step, commit and checkpoint included (step 0: the initial validation). */
  readonly stepMs: number;
  /** Time left at the recent RL steps' pace; null until this worker has finished an RL step. */
  readonly etaMs: number | null;
  /** Everything the trainer committed for the step, team-wide and per agent/policy. */
  readonly metrics: readonly Metric[];
  /** The step's committed phases in milliseconds (`rollout`, `update`, `validation`, `total`…). */
  readonly timingsMs: Readonly<Record<string, number>>;
}

/** A run's warm-up moved on (`RunManager.onDidWarmUp`): the points are the ones since the previous event. */
export interface RunWarmUp extends WarmUpProgress {
  readonly runId: string;
}

/** A run renamed or deleted (the list changed without a state change). */
export type RunListChange = { readonly kind: 'renamed'; readonly run: RunSummary } | { readonly kind: 'deleted'; readonly runId: string };

export interface RunStateChange {
  readonly runId: string;
  readonly state: RunState;
  /** The state before; null for a run just created. */
  readonly previous: RunState | null;
  readonly run: RunSummary;
}

export interface RunLog {
  readonly runId: string;
  readonly line: string;
}

/** A run this manager owns: queued (no worker yet) or training in a worker. */
interface LiveRun {
  readonly runId: string;
  readonly folder: RunFolder;
  readonly lock: RunLock;
  readonly resume: boolean;
  /** The run's worker thread while it trains; null while queued and once it exited. */
  thread: RunThread | null;
  /** What the user asked for; both stop the worker at the next step boundary. */
  request: StopRequest | null;
  /** Why the manager stopped the run as failed (the memory limit); decides its end over anything else. */
  failure: string | null;
  /** Durations of this worker's RL steps, for the ETA. */
  readonly stepMs: number[];
  /** The warm-up's latest progress with its whole loss curve, until step 0 is committed; null outside the warm-up. */
  warmUp: WarmUpProgress | null;
  readonly exited: Promise<void>;
  markExited(): void;
}

/** The recent RL steps whose mean duration gives a run's ETA. */
const ETA_WINDOW = 10;

/** Workspaces with an open manager in this process: two would each take the other's runs for dead. */
const openWorkspaces = new Set<string>();

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class RunManager {
  private readonly live = new Map<string, LiveRun>();
  /** Runs with a start or resume in progress (between its checks and its worker). */
  private readonly busy = new Set<string>();
  private readonly pendingOps = new Set<Promise<unknown>>();
  private closing: Promise<void> | null = null;
  private readonly stateEmitter: Emitter<RunStateChange>;
  private readonly progressEmitter: Emitter<RunProgress>;
  private readonly logEmitter: Emitter<RunLog>;
  private readonly warmUpEmitter: Emitter<RunWarmUp>;
  private readonly listEmitter: Emitter<RunListChange>;
  private readonly memory: MemoryWatch;

  private constructor(
    /** The main thread's connection: queries for the RPC handlers, and every state change. */
    readonly store: RunStore,
    private readonly workspace: string,
    private readonly log: (line: string) => void,
    private readonly queue: RunQueue,
    private readonly closeTimeoutMs: number,
    private readonly resourceLimits: ResourceLimits,
    private readonly paths: PathConfinement | undefined,
    private readonly exitGraceMs: number,
    memoryLimitBytes: number,
  ) {
    const onListenerError = (e: unknown) => log(`run manager: an event listener threw: ${message(e)}`);
    this.stateEmitter = new Emitter(onListenerError);
    this.progressEmitter = new Emitter(onListenerError);
    this.logEmitter = new Emitter(onListenerError);
    this.warmUpEmitter = new Emitter(onListenerError);
    this.listEmitter = new Emitter(onListenerError);
    this.memory = new MemoryWatch(memoryLimitBytes, () => this.training() > 0, (rss) => this.failTraining(rss));
  }

  /**
   * Opens (creating if needed) the workspace's store. Runs left 'running', 'stopping' or 'queued'
   * by a process that is gone (no live holder of their run lock) are marked failed with an error
   * starting "interrupted:", so they are listed as such and can be resumed, and the temporary
   * checkpoints that process left are removed.
   */
  static async open(o: RunManagerOptions): Promise<RunManager> {
    const workspace = resolve(o.workspace);
    const queue = new RunQueue(o.maxConcurrentRuns ?? 1);
    const dbPath = defaultDatabasePath(workspace);
    if (openWorkspaces.has(dbPath)) throw new Error(`a run manager is already open on ${dbPath} in this process`);
    const store = openRunStore(dbPath);
    openWorkspaces.add(dbPath);
    const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const manager = new RunManager(store, workspace, log, queue, o.closeTimeoutMs ?? 60_000, o.workerResourceLimits ?? defaultWorkerLimits(), o.paths, o.exitGraceMs ?? EXIT_GRACE_MS, o.memoryLimitBytes ?? Math.floor(totalmem() * 0.9));
    try {
      await markInterruptedRuns(store, log);
    } catch (e) {
      openWorkspaces.delete(dbPath);
      store.close();
      throw e;
    }
    return manager;
  }

  onDidChangeState(l: (e: RunStateChange) => void): Disposable {
    return this.stateEmitter.event(l);
  }

  onDidProgress(l: (e: RunProgress) => void): Disposable {
    return this.progressEmitter.event(l);
  }

  onDidLog(l: (e: RunLog) => void): Disposable {
    return this.logEmitter.event(l);
  }

  /** The warm-up's progress, while a run warms up (not when its warm start comes from the cache). */
  onDidWarmUp(l: (e: RunWarmUp) => void): Disposable {
    return this.warmUpEmitter.event(l);
  }

  /** Where a run's warm-up stands, with its loss curve so far; undefined when the run is not warming up here. */
  warmUp(runId: string): WarmUpProgress | undefined {
    return this.live.get(runId)?.warmUp ?? undefined;
  }

  /** All runs of the workspace, newest first. */
  list(): RunSummary[] {
    return this.store.listRuns();
  }

  onDidChangeList(l: (e: RunListChange) => void): Disposable {
    return this.listEmitter.event(l);
  }

  /** Renames a run, whatever its state (the name is its label; the config keeps its own). */
  rename(runId: string, name: string): RunSummary {
    this.assertOpen();
    this.require(runId);
    const run = this.store.renameRun(runId, name);
    this.listEmitter.fire({ kind: 'renamed', run });
    return run;
  }

  /**
   * Deletes a run no worker trains: its rows, and its folder when that lies inside .troupe/runs
   * (run-deletion.ts). A run this server trains, queues, stops or resumes is refused: stop it first.
   */
  async delete(runId: string): Promise<RunFolderRemoval & { runId: string }> {
    this.assertOpen();
    const run = this.require(runId);
    if (this.live.has(runId) || this.busy.has(runId)) throw new RunError('invalid-state', `run ${runId} is ${run.state}; stop it before deleting it`);
    const removal = await deleteRunFolder(runId, run.runDir, dirname(this.store.defaultRunDir(runId)), () => {
      // Checked again: a resume may have begun while the lock was taken.
      if (this.live.has(runId) || this.busy.has(runId)) throw new RunError('invalid-state', `run ${runId} was resumed meanwhile; stop it before deleting it`);
      this.store.deleteRun(runId);
    });
    this.log(`run ${runId}: deleted${removal.removedFolder ? `, folder ${removal.removedFolder} removed` : removal.keptFolder ? `; its folder ${removal.keptFolder} is outside .troupe/runs and was kept` : ''}`);
    this.listEmitter.fire({ kind: 'deleted', runId });
    return { runId, ...removal };
  }

  /** Runs with a live worker, from memory (no store read): what `server/status` reports. */
  activeRuns(): string[] {
    return [...this.live.values()].filter((l) => l.thread !== null).map((l) => l.runId);
  }

  /** Whether the run has a live worker (a queued run has none yet). */
  isActive(runId: string): boolean {
    return this.live.get(runId)?.thread != null;
  }

  /**
   * Validates the config (a ConfigError names every problem; no run is created then), creates the
   * run and its folder, and starts its worker, or queues it when every slot is taken. Resolves with
   * the new run without waiting for training.
   */
  start(req: StartRunRequest): Promise<RunSummary> {
    return this.track(this.startRun(req));
  }

  private async startRun(req: StartRunRequest): Promise<RunSummary> {
    this.assertOpen();
    if (req.steps !== undefined) checkSteps(req.steps);
    const loaded = await this.loadConfig(req);
    this.assertOpen();
    const running = this.reserveSlot();
    try {
      const warn = (line: string) => this.log(`run manager: ${line}`);
      const { run, folder, lock } = await createRun(this.store, loaded, { state: running ? 'running' : 'queued', warn, ...(req.steps === undefined ? {} : { steps: req.steps }) });
      this.log(`run ${run.id} (${loaded.config.name}): created, ${running ? 'starting' : 'queued'}; run folder ${folder.dir}`);
      const live = this.addLive(run.id, folder, lock, false);
      this.stateEmitter.fire({ runId: run.id, state: run.state, previous: null, run });
      return this.launch(live, running);
    } finally {
      if (running) this.releaseSlot();
    }
  }

  /**
   * Continues a paused or failed run from its last checkpoint, or a done one to a larger `steps`
   * (also: a run left 'running' by a process that is gone). It becomes 'running', or 'queued' when
   * every slot is taken.
   */
  resume(runId: string, o: { steps?: number } = {}): Promise<RunSummary> {
    return this.track(this.resumeRun(runId, o));
  }

  private async resumeRun(runId: string, o: { steps?: number }): Promise<RunSummary> {
    this.assertOpen();
    const run = this.require(runId);
    if (this.busy.has(runId)) throw new RunError('invalid-state', `run ${runId} is already being resumed`);
    if (this.live.has(runId)) throw new RunError('invalid-state', `run ${runId} is ${run.state} in this server; it cannot be resumed`);
    if (o.steps !== undefined) checkSteps(o.steps);
    this.busy.add(runId);
    const running = this.reserveSlot();
    try {
      const found = await readRunFolder(run.runDir).catch((e: unknown) => {
        throw new RunError('invalid-state', `run ${runId} cannot be resumed: ${message(e)}`);
      });
      const { folder, lock } = await prepareResume(this.store, run, found, { stepsOption: 'steps', ...(o.steps === undefined ? {} : { steps: o.steps }) });
      let summary: RunSummary;
      try {
        this.assertOpen();
        summary = this.store.setRunState(runId, running ? 'running' : 'queued');
      } catch (e) {
        lock.release();
        throw e;
      }
      this.log(`run ${runId}: resuming to step ${folder.steps}${running ? '' : ' (queued)'}`);
      const live = this.addLive(runId, folder, lock, true);
      this.stateEmitter.fire({ runId, state: summary.state, previous: run.state, run: summary });
      return this.launch(live, running);
    } finally {
      this.busy.delete(runId);
      if (running) this.releaseSlot();
    }
  }

  /**
   * A running run stays 'running' until its step boundary, then becomes 'paused' (its worker exits
   * after writing the checkpoint); a queued one is paused at once. Asking again while a pause is
   * pending is a no-op.
   */
  pause(runId: string): RunSummary {
    this.assertOpen();
    const run = this.require(runId);
    const live = this.live.get(runId);
    if (!live) throw this.notLive(run, 'paused');
    if (!live.thread) return this.dequeue(live, 'paused');
    if (live.request === 'stop') throw new RunError('invalid-state', `run ${runId} is stopping; it cannot be paused`);
    if (live.request === null) this.requestStop(live, 'pause');
    return run;
  }

  /**
   * A running run becomes 'stopping' at once and 'done' at its step boundary (checkpoint written);
   * a queued, paused or failed one becomes 'done' at once. Stopping a stopping run is a no-op.
   */
  stop(runId: string): RunSummary {
    this.assertOpen();
    const run = this.require(runId);
    const live = this.live.get(runId);
    if (live && !live.thread) return this.dequeue(live, 'done');
    if (live) {
      if (live.request === 'stop') return run;
      if (live.request === null) this.requestStop(live, 'stop');
      else live.request = 'stop'; // a pause was pending: the worker is already stopping at the boundary
      return this.transition(runId, 'stopping', run.state);
    }
    if (this.busy.has(runId)) throw new RunError('invalid-state', `run ${runId} is being resumed; stop it once it runs`);
    if (run.state === 'paused' || run.state === 'failed') return this.transition(runId, 'done', run.state);
    throw this.notLive(run, 'stopped');
  }

  /**
   * Server shutdown: queued runs become 'paused'; every live run is asked to pause at its step
   * boundary and awaited; a worker still training after `timeoutMs` (default: the manager's
   * `closeTimeoutMs`) abandons its step in flight at its next engine call (see engine-gate.ts),
   * leaving the run 'paused' (or 'done' if it was stopping), resumable from its last checkpoint.
   * Then the store closes.
   */
  close(o: { timeoutMs?: number } = {}): Promise<void> {
    this.closing ??= this.shutDown(o.timeoutMs ?? this.closeTimeoutMs);
    return this.closing;
  }

  private async shutDown(timeoutMs: number): Promise<void> {
    await Promise.allSettled([...this.pendingOps]);
    for (const id of [...this.queue.queued]) {
      const live = this.live.get(id);
      if (live) this.dequeue(live, 'paused');
    }
    const running = [...this.live.values()];
    for (const live of running) if (live.request === null) this.requestStop(live, 'pause');
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)));
    await Promise.race([Promise.all(running.map((l) => l.exited)), timedOut]);
    clearTimeout(timer);
    const late = running.filter((l) => l.thread);
    for (const live of late) {
      this.log(`run ${live.runId}: still training ${timeoutMs} ms after shutdown began; abandoning its step in flight`);
      this.abort(live);
    }
    await Promise.all(late.map((l) => l.exited));
    this.memory.stop();
    this.stateEmitter.clear();
    this.progressEmitter.clear();
    this.logEmitter.clear();
    this.warmUpEmitter.clear();
    this.store.close();
    openWorkspaces.delete(this.store.path);
  }

  // ---- Internals -----------------------------------------------------------------------------------

  private track<T>(p: Promise<T>): Promise<T> {
    this.pendingOps.add(p);
    const done = () => this.pendingOps.delete(p);
    p.then(done, done);
    return p;
  }

  private assertOpen(): void {
    if (this.closing) throw new RunError('invalid-state', 'the run manager is shutting down');
  }

  private require(runId: string): RunSummary {
    const run = this.store.getRun(runId);
    if (!run) throw new RunError('unknown-run', `no run with id ${JSON.stringify(runId)} in ${this.store.path}`);
    const { config: _config, ...summary } = run;
    return summary;
  }

  /** Why a run this manager does not own cannot be paused or stopped. */
  private notLive(run: RunSummary, verb: 'paused' | 'stopped'): RunError {
    return notLiveError(run, verb, this.busy.has(run.id), () => (existsSync(run.runDir) ? runLockHolder(run.runDir) : null));
  }

  /**
   * Gives back a slot taken by reserveSlot. After a failed start or resume the slot is free again,
   * so a run queued meanwhile must start now rather than wait for some other run to end.
   */
  private releaseSlot(): void {
    this.queue.release();
    this.startQueued();
  }

  private reserveSlot(): boolean {
    return this.queue.reserve(this.training());
  }

  /** Live runs with a worker. */
  private training(): number {
    let n = 0;
    for (const l of this.live.values()) if (l.thread) n++;
    return n;
  }

  private async loadConfig(req: StartRunRequest): Promise<LoadedConfig> {
    if ([req.configPath, req.config, req.rerunOf].filter((x) => x !== undefined).length !== 1) {
      throw new ConfigError('start request', [{ path: [], message: 'give exactly one of configPath (a config file), config (an inline config) and rerunOf (a run)' }]);
    }
    const o = this.paths ? { paths: this.paths } : {};
    if (req.rerunOf !== undefined) {
      const run = this.require(req.rerunOf);
      const folder = await readRunFolder(run.runDir).catch((e: unknown) => {
        throw new RunError('invalid-state', `run ${run.id} cannot be run again: ${message(e)}`);
      });
      return loadRunConfig(folder, o);
    }
    if (req.config !== undefined) return loadInlineConfig(req.config, this.workspace, 'inline config', o);
    // Under the path rule the path is resolved (and refused) by it, relative to the workspace.
    const path = this.paths ? req.configPath! : resolve(this.workspace, req.configPath!);
    try {
      return await loadConfigFile(path, o);
    } catch (e) {
      // Unreadable files and JSON syntax errors are config problems too, for the editor as for the
      // RPC; a path the rule refuses is not, and keeps its own error.
      if (e instanceof ConfigError || e instanceof ClientPathError) throw e;
      throw new ConfigError(path, [{ path: [], message: message(e) }]);
    }
  }

  private addLive(runId: string, folder: RunFolder, lock: RunLock, resume: boolean): LiveRun {
    let markExited = () => {};
    const exited = new Promise<void>((r) => (markExited = r));
    const live: LiveRun = { runId, folder, lock, resume, thread: null, request: null, failure: null, stepMs: [], warmUp: null, exited, markExited };
    this.live.set(runId, live);
    return live;
  }

  /** Starts the worker of a run that holds a slot, or queues it; returns its current summary. */
  private launch(live: LiveRun, running: boolean): RunSummary {
    if (running) this.spawn(live);
    else {
      this.queue.push(live.runId);
      // A slot may have been freed while this run was being created (another start or resume failed).
      this.startQueued();
    }
    return this.require(live.runId);
  }

  private spawn(live: LiveRun): void {
    try {
      live.thread = RunThread.start({
        runId: live.runId,
        runDir: live.folder.dir,
        resume: live.resume,
        resourceLimits: this.resourceLimits,
        exitGraceMs: this.exitGraceMs,
        log: this.log,
        onReport: (r) => this.onReport(live, r),
        onExit: (end) => this.onExit(live, end),
      });
    } catch (e) {
      this.finish(live, 'failed', `cannot start the run worker: ${message(e)}`);
      return;
    }
    this.memory.start();
  }

  private onReport(live: LiveRun, m: RunReport): void {
    switch (m.kind) {
      case 'log':
        this.log(`run ${live.runId}: ${m.line}`);
        this.logEmitter.fire({ runId: live.runId, line: m.line });
        return;
      case 'warmUp': {
        const { kind: _, ...p } = m;
        // Another model's warm-up starts a new curve.
        const before = live.warmUp?.modelId === p.modelId ? live.warmUp.points : [];
        live.warmUp = { ...p, points: thinPoints([...before, ...p.points]) };
        this.warmUpEmitter.fire({ runId: live.runId, ...p });
        return;
      }
      case 'progress': {
        live.warmUp = null;
        if (m.step > 0) live.stepMs.push(m.stepMs);
        const recent = live.stepMs.slice(-ETA_WINDOW);
        const etaMs = recent.length === 0 ? null : (recent.reduce((a, b) => a + b, 0) / recent.length) * Math.max(0, m.steps - m.step);
        this.progressEmitter.fire({ runId: live.runId, step: m.step, steps: m.steps, stepMs: m.stepMs, etaMs, metrics: m.metrics, timingsMs: m.timingsMs });
        return;
      }
    }
  }

  /** Abandons the step in flight; the worker exits once its engine call in flight returns. */
  private abort(live: LiveRun): void {
    live.thread?.abort();
  }

  /** The process is over its memory limit: every run training is stopped as failed. */
  private failTraining(rss: number): void {
    for (const live of this.live.values()) {
      if (!live.thread || live.failure !== null) continue;
      live.failure = outOfMemoryFailure(rss, this.memory.limitBytes);
      this.log(`run ${live.runId}: ${live.failure}`);
      this.abort(live);
    }
  }

  private onExit(live: LiveRun, end: WorkerEnd): void {
    live.thread = null;
    const e = runEnd(end, live, this.resourceLimits.maxOldGenerationSizeMb);
    if (e.state === 'failed') this.finish(live, 'failed', e.error);
    else this.finish(live, e.state);
  }

  /** The run leaves this manager: its final state is recorded, its lock released, the next queued run starts. */
  private finish(live: LiveRun, state: 'paused' | 'done' | 'failed', error?: string): void {
    this.live.delete(live.runId);
    try {
      const previous = this.store.getRun(live.runId)?.state ?? null;
      if (state === 'failed') recordFailure(this.store, live.runId, error ?? 'unknown error', (l) => this.log(`run manager: ${l}`));
      else this.store.setRunState(live.runId, state);
      const run = this.require(live.runId);
      this.log(`run ${live.runId}: ${state}${error ? `: ${error}` : ''} (last committed step ${run.lastCommittedStep ?? 'none'})`);
      this.stateEmitter.fire({ runId: live.runId, state: run.state, previous, run });
    } catch (e) {
      this.log(`run manager: cannot record run ${live.runId} as ${state}: ${message(e)}`);
    } finally {
      live.lock.release();
      live.markExited();
    }
    this.startQueued();
  }

  private startQueued(): void {
    while (!this.closing) {
      const id = this.queue.next(this.training());
      if (id === undefined) return;
      const live = this.live.get(id);
      if (!live) continue;
      try {
        this.transition(id, 'running', 'queued');
      } catch (e) {
        this.log(`run manager: cannot start queued run ${id}: ${message(e)}`);
        this.live.delete(id);
        live.lock.release();
        live.markExited();
        continue;
      }
      this.spawn(live);
    }
  }

  private dequeue(live: LiveRun, state: 'paused' | 'done'): RunSummary {
    this.queue.remove(live.runId);
    this.live.delete(live.runId);
    try {
      return this.transition(live.runId, state, 'queued');
    } finally {
      live.lock.release();
      live.markExited();
    }
  }

  private requestStop(live: LiveRun, request: StopRequest): void {
    live.request = request;
    live.thread?.stop();
  }

  private transition(runId: string, state: RunState, previous: RunState | null): RunSummary {
    const run = this.store.setRunState(runId, state);
    this.stateEmitter.fire({ runId, state, previous, run });
    return run;
  }
}

function checkSteps(steps: number): void {
  if (!Number.isSafeInteger(steps) || steps < 1) throw new RangeError(`steps must be an integer >= 1, got ${steps}`);
}
