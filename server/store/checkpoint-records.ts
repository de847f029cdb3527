/**
 * The `checkpoints` table: where a run's checkpoint files are and what they hold. The files live in
 * the run folder and are written by server/models; a row is recorded after its file is complete, so
 * resume never picks a half-written checkpoint. A row is keyed by (run, path): recording the same file
 * again (a retried step) updates it instead of adding a duplicate.
 */
import type Database from 'better-sqlite3';
import { checkpointInputSchema, checkpointKindSchema, type Checkpoint, type CheckpointInput, type CheckpointKind } from '../protocol/trajectory.ts';
import { invalidInput } from './step-input.ts';
import { fromStoredPath, toStoredPath } from './store-paths.ts';

interface CheckpointRow {
  id: number;
  run_id: string;
  step: number;
  kind: CheckpointKind;
  policy_id: string | null;
  path: string;
  meta: string | null;
  created_at: number;
}

export class CheckpointRecords {
  private readonly upsert;
  private readonly byRun;
  private readonly latestAny;
  private readonly latestOfKind;
  private readonly after;
  private readonly removeAfter;

  constructor(
    db: Database.Database,
    private readonly storeDir: string,
    private readonly now: () => number,
  ) {
    this.upsert = db.prepare<[string, number, CheckpointKind, string | null, string, string | null, number], CheckpointRow>(
      `INSERT INTO checkpoints (run_id, step, kind, policy_id, path, meta, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id, path) DO UPDATE SET step = excluded.step, kind = excluded.kind, policy_id = excluded.policy_id,
         meta = excluded.meta, created_at = excluded.created_at
       RETURNING *`,
    );
    this.byRun = db.prepare<[string], CheckpointRow>('SELECT * FROM checkpoints WHERE run_id = ? ORDER BY step, id');
    this.latestAny = db.prepare<[string], CheckpointRow>('SELECT * FROM checkpoints WHERE run_id = ? ORDER BY step DESC, id DESC LIMIT 1');
    this.latestOfKind = db.prepare<[string, CheckpointKind], CheckpointRow>(
      'SELECT * FROM checkpoints WHERE run_id = ? AND kind = ? ORDER BY step DESC, id DESC LIMIT 1',
    );
    this.after = db.prepare<[string, number], CheckpointRow>('SELECT * FROM checkpoints WHERE run_id = ? AND step > ? ORDER BY step, id');
    this.removeAfter = db.prepare<[string, number]>('DELETE FROM checkpoints WHERE run_id = ? AND step > ?');
  }

  /** Validates and records one checkpoint; the caller has checked that the run exists. */
  add(runId: string, input: CheckpointInput): Checkpoint {
    const parsed = checkpointInputSchema.strict().safeParse(input);
    if (!parsed.success) throw invalidInput(`addCheckpoint(run ${JSON.stringify(runId)})`, parsed.error.issues);
    return this.record(runId, parsed.data);
  }

  /** Records an already validated checkpoint (inside the caller's transaction). */
  record(runId: string, c: CheckpointInput): Checkpoint {
    const meta = c.meta === undefined ? null : JSON.stringify(c.meta);
    const row = this.upsert.get(runId, c.step, c.kind, c.policyId ?? null, toStoredPath(this.storeDir, c.path), meta, this.now());
    if (row === undefined) throw new Error('INSERT … RETURNING returned no row');
    return this.toCheckpoint(row);
  }

  list(runId: string): Checkpoint[] {
    return this.byRun.all(runId).map((row) => this.toCheckpoint(row));
  }

  /** The checkpoint with the highest step (of one kind, if given) — where resume starts. */
  latest(runId: string, kind?: CheckpointKind): Checkpoint | undefined {
    if (kind !== undefined) {
      const parsed = checkpointKindSchema.safeParse(kind);
      if (!parsed.success) throw invalidInput('latestCheckpoint', parsed.error.issues.map((i) => ({ ...i, path: ['kind', ...i.path] })));
    }
    const row = kind === undefined ? this.latestAny.get(runId) : this.latestOfKind.get(runId, kind);
    return row === undefined ? undefined : this.toCheckpoint(row);
  }

  /** Deletes the rows of checkpoints after `step` and returns them, so their files can be removed. */
  removeAfterStep(runId: string, step: number): Checkpoint[] {
    const removed = this.after.all(runId, step).map((row) => this.toCheckpoint(row));
    this.removeAfter.run(runId, step);
    return removed;
  }

  private toCheckpoint(row: CheckpointRow): Checkpoint {
    const out: Checkpoint = {
      id: row.id,
      runId: row.run_id,
      step: row.step,
      kind: row.kind,
      path: fromStoredPath(this.storeDir, row.path),
      createdAt: row.created_at,
    };
    if (row.policy_id !== null) out.policyId = row.policy_id;
    if (row.meta !== null) {
      const meta: unknown = JSON.parse(row.meta);
      const parsed = checkpointInputSchema.shape.meta.safeParse(meta);
      if (parsed.success && parsed.data !== undefined) out.meta = parsed.data;
    }
    return out;
  }
}
