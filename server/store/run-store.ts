/**
 * The run store: one SQLite database per workspace (`<workspace>/.troupe/troupe.db`) holding runs,
 * steps, metrics, AT-GRPO groups, trajectories, turns and checkpoint records (ARCHITECTURE.md, "Crash safety").
 *
 * This class is the module's whole surface; the rest of the server never sees SQL or better-sqlite3.
 * Calls are synchronous, as better-sqlite3 is: a step commit takes milliseconds and runs between
 * training steps, and reads are indexed, so none of them holds the event loop for long.
 *
 * Every method validates its arguments with the protocol's zod schemas and throws RunStoreError with
 * a message naming the culprit; SQLite's corruption errors are rethrown naming the database file.
 */
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import type {
  Checkpoint,
  CheckpointInput,
  CheckpointKind,
  LatestMetric,
  Metric,
  MetricPoint,
  MetricSeriesKey,
  MetricSeriesQuery,
  RunRecord,
  RunState,
  RunSummary,
  StepSummary,
  TrajectoryDetail,
  TrajectoryQuery,
  TrajectorySummary,
} from '../protocol/trajectory.ts';
import { CheckpointRecords } from './checkpoint-records.ts';
import { MetricReader } from './metric-reader.ts';
import { openDatabase } from './open-database.ts';
import { RunRecords, type NewRun } from './run-records.ts';
import type { StepInput } from './step-input.ts';
import { StepWriter, type CommitHooks, type CommitResult, type RewindResult } from './step-writer.ts';
import { withFileContext } from './store-error.ts';
import { TrajectoryReader } from './trajectory-reader.ts';
import { defaultRunDir } from './store-paths.ts';

export interface StoreSettings {
  readonly journalMode: string;
  readonly foreignKeys: boolean;
  readonly busyTimeoutMs: number;
  readonly synchronous: 'off' | 'normal' | 'full' | 'extra';
  readonly schemaVersion: number;
}

export interface RunStoreOptions {
  /** Clock for created/updated times, Unix epoch milliseconds; tests pin it. */
  readonly now?: () => number;
  /**
   * Open a second, read-only connection to an existing store (see `openDatabase`): every write
   * method fails, the queries answer beside the writing connection. The server's query thread
   * uses one so that the editor's queries never run on the event loop.
   */
  readonly queryOnly?: boolean;
}

/** Opens (creating if needed) the run store at `path`; see `defaultDatabasePath` for the usual place. */
export function openRunStore(path: string, options: RunStoreOptions = {}): RunStore {
  return new RunStore(path, options);
}

export class RunStore {
  /** Absolute path of the database file. */
  readonly path: string;
  /** Folder of the database; run folders default to `<storeDir>/runs/<runId>`. */
  readonly storeDir: string;

  private readonly db: Database.Database;
  private readonly runs: RunRecords;
  private readonly checkpoints: CheckpointRecords;
  private readonly writer: StepWriter;
  private readonly trajectories: TrajectoryReader;
  private readonly metrics: MetricReader;

  constructor(path: string, options: RunStoreOptions = {}) {
    this.path = resolve(path);
    this.storeDir = dirname(this.path);
    const now = options.now ?? Date.now;
    this.db = openDatabase(this.path, { queryOnly: options.queryOnly ?? false });
    try {
      this.runs = new RunRecords(this.db, this.storeDir, now);
      this.checkpoints = new CheckpointRecords(this.db, this.storeDir, now);
      this.writer = new StepWriter(this.db, this.runs, this.checkpoints, now);
      this.trajectories = new TrajectoryReader(this.db);
      this.metrics = new MetricReader(this.db);
    } catch (error) {
      this.db.close();
      throw withFileContext(error, this.path);
    }
  }

  // ---- Runs ----------------------------------------------------------------------------------------

  /** Records a new run (state 'queued' unless given). Does not create its folder. */
  createRun(input: NewRun): RunRecord {
    return this.guard(() => this.runs.create(input));
  }

  /** A run with its config, or undefined. */
  getRun(runId: string): RunRecord | undefined {
    return this.guard(() => this.runs.get(runId));
  }

  /** All runs, newest first. */
  listRuns(): RunSummary[] {
    return this.guard(() => this.runs.list());
  }

  /** Records a lifecycle state; `error` is kept only with 'failed'. */
  setRunState(runId: string, state: RunState, error?: string): RunSummary {
    return this.guard(() => this.runs.setState(runId, state, error));
  }

  /** Records the step a run now trains to (a resume with a new target). */
  setRunTargetSteps(runId: string, steps: number): RunSummary {
    return this.guard(() => this.runs.setTargetSteps(runId, steps));
  }

  /** Renames a run. */
  renameRun(runId: string, name: string): RunSummary {
    return this.guard(() => this.runs.setName(runId, name));
  }

  /** Deletes a run and all its rows; returns false if there was none. Its folder is left alone. */
  deleteRun(runId: string): boolean {
    return this.guard(() => this.runs.delete(runId));
  }

  /** The default folder for a run of this store. */
  defaultRunDir(runId: string): string {
    return defaultRunDir(this.storeDir, runId);
  }

  // ---- Steps ---------------------------------------------------------------------------------------

  /**
   * Commits one training step — summary, metrics, groups, trajectories with all branches of every
   * turn, and checkpoint records — in one transaction. A step after the last committed one is
   * appended; the last committed step itself is replaced (a retried commit is idempotent); an earlier
   * step is refused with a pointer to `rewindRun`.
   */
  commitStep(runId: string, input: StepInput, hooks?: CommitHooks): CommitResult {
    return this.guard(() => this.writer.commit(runId, input, hooks));
  }

  /** The last step whose rows are all committed, or null; resume continues after it. */
  lastCommittedStep(runId: string): number | null {
    return this.guard(() => this.runs.lastCommittedStep(runId));
  }

  /**
   * Deletes the steps after `toStep` (every step for null) with their rows, metrics and checkpoint
   * records, before resuming from an older checkpoint. Returns the removed checkpoints so their files
   * can be deleted.
   */
  rewindRun(runId: string, toStep: number | null): RewindResult {
    return this.guard(() => this.writer.rewind(runId, toStep));
  }

  /** Committed steps of a run in order, from `fromStep`. */
  listSteps(runId: string, options: { fromStep?: number; limit?: number } = {}): StepSummary[] {
    return this.guard(() => this.trajectories.steps(runId, options.fromStep, options.limit));
  }

  // ---- Trajectories --------------------------------------------------------------------------------

  /** Trajectories matching every given filter (a step's, or one seed's across steps), paged. */
  listTrajectories(query: TrajectoryQuery): TrajectorySummary[] {
    return this.guard(() => this.trajectories.list(query));
  }

  /** One trajectory with its kept turns, each with its sibling branches; undefined if unknown. */
  getTrajectory(trajectoryId: number): TrajectoryDetail | undefined {
    return this.guard(() => this.trajectories.detail(trajectoryId));
  }

  // ---- Metrics -------------------------------------------------------------------------------------

  /** One metric series (team-wide unless agentId/policyId are given), ordered by step. */
  metricSeries(query: MetricSeriesQuery): MetricPoint[] {
    return this.guard(() => this.metrics.series(query));
  }

  /** The metric series a run has logged. */
  listMetricSeries(runId: string): MetricSeriesKey[] {
    return this.guard(() => this.metrics.seriesKeys(runId));
  }

  /** The latest value of every metric series of a run. */
  latestMetrics(runId: string): LatestMetric[] {
    return this.guard(() => this.metrics.latest(runId));
  }

  /** All metric values logged at one step. */
  stepMetrics(runId: string, step: number): Metric[] {
    return this.guard(() => this.metrics.atStep(runId, step));
  }

  // ---- Checkpoints ---------------------------------------------------------------------------------

  /** Records a checkpoint written outside a step commit (e.g. the warm-start policy at step 0). */
  addCheckpoint(runId: string, input: CheckpointInput): Checkpoint {
    return this.guard(() =>
      this.db.transaction(() => {
        this.runs.require(runId, 'addCheckpoint');
        return this.checkpoints.add(runId, input);
      })(),
    );
  }

  /** A run's checkpoints ordered by step. */
  listCheckpoints(runId: string): Checkpoint[] {
    return this.guard(() => this.checkpoints.list(runId));
  }

  /** The checkpoint with the highest step (of one kind, if given): where resume loads weights from. */
  latestCheckpoint(runId: string, kind?: CheckpointKind): Checkpoint | undefined {
    return this.guard(() => this.checkpoints.latest(runId, kind));
  }

  // ---- Maintenance ---------------------------------------------------------------------------------

  /** The connection's SQLite settings, for a diagnostics command and for the tests. */
  settings(): StoreSettings {
    return this.guard(() => {
      const synchronous = Number(this.db.pragma('synchronous', { simple: true }));
      return {
        journalMode: String(this.db.pragma('journal_mode', { simple: true })),
        foreignKeys: Number(this.db.pragma('foreign_keys', { simple: true })) === 1,
        busyTimeoutMs: Number(this.db.pragma('busy_timeout', { simple: true })),
        synchronous: (['off', 'normal', 'full', 'extra'] as const)[synchronous] ?? 'off',
        schemaVersion: Number(this.db.pragma('user_version', { simple: true })),
      };
    });
  }

  /**
   * Runs SQLite's full integrity check; returns [] when the file is sound, else its findings. It reads
   * the whole file, so it is a command to run on demand, not on every open.
   */
  checkIntegrity(): string[] {
    return this.guard(() => {
      const rows = this.db.prepare<[], { integrity_check: string }>('PRAGMA integrity_check').all();
      const problems = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
      const fk = this.db.prepare<[], { table: string; rowid: number; parent: string }>('PRAGMA foreign_key_check').all();
      return [...problems, ...fk.map((v) => `${v.table} row ${v.rowid} references a missing ${v.parent} row`)];
    });
  }

  /**
   * Closes the database. `PRAGMA optimize` first refreshes the planner's statistics where SQLite finds
   * them stale (cheap, and what SQLite recommends at close); the WAL is folded into the main file by
   * SQLite when the last connection closes.
   */
  close(): void {
    if (!this.db.open) return;
    try {
      this.db.pragma('optimize');
    } catch {
      // Statistics are only an optimisation; a database another process keeps busy must still close.
    }
    this.db.close();
  }

  private guard<T>(body: () => T): T {
    try {
      return body();
    } catch (error) {
      throw withFileContext(error, this.path);
    }
  }
}
