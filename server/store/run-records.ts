/**
 * The `runs` table: creating runs, reading them back, recording lifecycle changes. The run manager
 * (server/runs/) owns the state machine; this module only records the state it is told, so a
 * transition rule lives in one place.
 */
import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { z } from 'zod';
import { idSchema, runStateSchema, type RunRecord, type RunState, type RunSummary } from '../protocol/trajectory.ts';
import { invalidInput } from './step-input.ts';
import { RunStoreError } from './store-error.ts';
import { defaultRunDir, fromStoredPath, toStoredPath } from './store-paths.ts';

/** Run ids name the run folder by default, so they are restricted to portable file-name characters. */
const runIdSchema = idSchema.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'must be 1–128 letters, digits, ".", "_" or "-", starting with a letter or digit');

export const newRunSchema = z
  .object({
    /** Run id; generated (`run-YYYYMMDD-HHMMSS-xxxx`) when absent. */
    id: runIdSchema.optional(),
    /** Human-readable name. */
    name: z.string(),
    /** The experiment config, any JSON value; stored as given. */
    config: z.unknown(),
    /** Run folder; `<store dir>/runs/<id>` when absent. */
    runDir: z.string().min(1).optional(),
    /** Initial state. */
    state: runStateSchema.default('queued'),
    /** The step the run trains to (the config's `training.steps` unless overridden). */
    targetSteps: z.int().positive().optional(),
  })
  .strict();
export type NewRun = z.input<typeof newRunSchema>;

interface RunRow {
  id: string;
  name: string;
  state: RunState;
  config: string;
  run_dir: string;
  last_committed_step: number | null;
  error: string | null;
  target_steps: number | null;
  created_at: number;
  updated_at: number;
}

const summaryColumns = 'id, name, state, run_dir, last_committed_step, error, target_steps, created_at, updated_at';

export class RunRecords {
  private readonly insert;
  private readonly byId;
  private readonly all;
  private readonly updateState;
  private readonly remove;
  private readonly lastStep;
  private readonly updateTarget;
  private readonly updateName;

  constructor(
    private readonly db: Database.Database,
    private readonly storeDir: string,
    private readonly now: () => number,
  ) {
    this.insert = db.prepare<[string, string, RunState, string, string, number | null, number, number]>(
      'INSERT INTO runs (id, name, state, config, run_dir, target_steps, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    this.updateTarget = db.prepare<[number, number, string]>('UPDATE runs SET target_steps = ?, updated_at = ? WHERE id = ?');
    this.updateName = db.prepare<[string, number, string]>('UPDATE runs SET name = ?, updated_at = ? WHERE id = ?');
    this.byId = db.prepare<[string], RunRow>('SELECT * FROM runs WHERE id = ?');
    this.all = db.prepare<[], Omit<RunRow, 'config'>>(`SELECT ${summaryColumns} FROM runs ORDER BY created_at DESC, id`);
    this.updateState = db.prepare<[RunState, string | null, number, string]>('UPDATE runs SET state = ?, error = ?, updated_at = ? WHERE id = ?');
    this.remove = db.prepare<[string]>('DELETE FROM runs WHERE id = ?');
    this.lastStep = db.prepare<[string], { last_committed_step: number | null }>('SELECT last_committed_step FROM runs WHERE id = ?');
  }

  create(input: NewRun): RunRecord {
    const parsed = newRunSchema.safeParse(input);
    if (!parsed.success) throw invalidInput('createRun', parsed.error.issues);
    const run = parsed.data;
    const id = run.id ?? generateRunId(this.now());
    const config = JSON.stringify(run.config);
    if (config === undefined) throw new RunStoreError('invalid-input', `createRun(${JSON.stringify(id)}): config must be a JSON value`);
    if (this.byId.get(id) !== undefined) throw new RunStoreError('invalid-input', `createRun: run id ${JSON.stringify(id)} already exists`);
    const runDir = toStoredPath(this.storeDir, run.runDir ?? defaultRunDir(this.storeDir, id));
    const now = this.now();
    this.insert.run(id, run.name, run.state, config, runDir, run.targetSteps ?? null, now, now);
    return this.require(id, 'createRun');
  }

  get(id: string): RunRecord | undefined {
    const row = this.byId.get(id);
    if (row === undefined) return undefined;
    const config: unknown = JSON.parse(row.config);
    return { ...this.summary(row), config };
  }

  /** The run, or an 'unknown-run' error naming the operation. */
  require(id: string, operation: string): RunRecord {
    const run = this.get(id);
    if (run === undefined) throw unknownRun(id, operation);
    return run;
  }

  list(): RunSummary[] {
    return this.all.all().map((row) => this.summary(row));
  }

  /** Records a new lifecycle state; `error` is kept only for 'failed'. */
  setState(id: string, state: RunState, error?: string): RunSummary {
    const parsed = runStateSchema.safeParse(state);
    if (!parsed.success) throw invalidInput(`setRunState(${JSON.stringify(id)})`, parsed.error.issues.map((i) => ({ ...i, path: ['state', ...i.path] })));
    const info = this.updateState.run(parsed.data, parsed.data === 'failed' ? (error ?? null) : null, this.now(), id);
    const row = info.changes === 0 ? undefined : this.byId.get(id);
    if (row === undefined) throw unknownRun(id, 'setRunState');
    return this.summary(row);
  }

  /** Records a new target step (a resume that trains further). */
  setTargetSteps(id: string, steps: number): RunSummary {
    if (!Number.isSafeInteger(steps) || steps < 1) throw new RunStoreError('invalid-input', `setRunTargetSteps(${JSON.stringify(id)}): steps must be an integer >= 1, got ${steps}`);
    if (this.updateTarget.run(steps, this.now(), id).changes === 0) throw unknownRun(id, 'setRunTargetSteps');
    return this.require(id, 'setRunTargetSteps');
  }

  /** Gives a run another name (its label; the stored config keeps its own). */
  setName(id: string, name: string): RunSummary {
    if (name.trim() === '') throw new RunStoreError('invalid-input', `renameRun(${JSON.stringify(id)}): the name must not be empty`);
    if (this.updateName.run(name, this.now(), id).changes === 0) throw unknownRun(id, 'renameRun');
    return this.require(id, 'renameRun');
  }

  /** Deletes a run and, by cascade, every row of it. Files in its run folder are left to the caller. */
  delete(id: string): boolean {
    return this.remove.run(id).changes > 0;
  }

  /** The last fully committed step of a run; null before the first. */
  lastCommittedStep(id: string, operation = 'lastCommittedStep'): number | null {
    const row = this.lastStep.get(id);
    if (row === undefined) throw unknownRun(id, operation);
    return row.last_committed_step;
  }

  private summary(row: Omit<RunRow, 'config'>): RunSummary {
    const out: RunSummary = {
      id: row.id,
      name: row.name,
      state: row.state,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      runDir: fromStoredPath(this.storeDir, row.run_dir),
      lastCommittedStep: row.last_committed_step,
      targetSteps: row.target_steps,
    };
    if (row.error !== null) out.error = row.error;
    return out;
  }
}

export function unknownRun(id: string, operation: string): RunStoreError {
  return new RunStoreError('unknown-run', `${operation}: no run with id ${JSON.stringify(id)}`);
}

/** `run-20251121-065300-3fa9`: sorts by creation time, readable in a folder listing, unique enough with the suffix. */
function generateRunId(now: number): string {
  const stamp = new Date(now).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `run-${stamp}-${randomBytes(2).toString('hex')}`;
}
