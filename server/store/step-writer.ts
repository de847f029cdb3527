/**
 * Writes a training step — its summary row, metrics, groups, trajectories, turns and checkpoints —
 * in one SQLite transaction, and rewinds a run to an earlier step.
 *
 * Atomicity is the whole point: the run's `last_committed_step` moves in the same transaction as the
 * rows, so after any crash every step is either fully present or absent and resume continues after
 * `last_committed_step`.
 *
 * Re-committing rules, chosen for resume:
 * - step > last committed: appended (gaps are allowed; step numbers are the trainer's business).
 * - step = last committed: the old rows of that step are replaced in the same transaction. A trainer
 *   that crashed after the commit but before it recorded that fact retries and converges, instead of
 *   failing on a duplicate.
 * - step < last committed: refused. Replacing it would leave the later steps of an abandoned timeline
 *   in place; resuming from an older checkpoint calls `rewind` first, which says so explicitly.
 */
import type Database from 'better-sqlite3';
import type { Checkpoint, StepSummary } from '../protocol/trajectory.ts';
import { encodeFloat32, encodeInt32 } from './blob-codec.ts';
import type { CheckpointRecords } from './checkpoint-records.ts';
import { encodeExecutions } from './executions-column.ts';
import type { RunRecords } from './run-records.ts';
import { parseStepInput, type StepData } from './step-input.ts';
import { RunStoreError } from './store-error.ts';

/** Test seams: called inside the transaction, after every row is written and before it commits. */
export interface CommitHooks {
  readonly beforeCommit?: () => void;
}

export interface CommitResult extends StepSummary {
  /** Whether the step replaced an earlier commit of the same step. */
  readonly replaced: boolean;
  /** Ids of the stored trajectories, in input order. */
  readonly trajectoryIds: readonly number[];
}

export interface RewindResult {
  /** How many committed steps were deleted. */
  readonly removedSteps: number;
  /** Checkpoint rows deleted; their files are still on disk for the caller to remove. */
  readonly removedCheckpoints: readonly Checkpoint[];
  /** The run's last committed step afterwards. */
  readonly lastCommittedStep: number | null;
}

type Bind = number | string | Buffer | null;

export class StepWriter {
  private readonly insertStep;
  private readonly upsertSeries;
  private readonly insertMetric;
  private readonly insertGroup;
  private readonly insertTrajectory;
  private readonly insertTurn;
  private readonly setLastStep;
  private readonly deleteStepsAfter;
  private readonly deleteMetricsAfter;
  private readonly maxStep;

  constructor(
    private readonly db: Database.Database,
    private readonly runs: RunRecords,
    private readonly checkpoints: CheckpointRecords,
    private readonly now: () => number,
  ) {
    this.insertStep = db.prepare<Bind[]>(
      `INSERT INTO steps (run_id, step, timings, trajectory_count, success_count, turn_count, prompt_token_count, response_token_count, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    // The no-op update makes RETURNING yield the id of an existing series too.
    this.upsertSeries = db.prepare<[string, string, string, string], { id: number }>(
      `INSERT INTO metric_series (run_id, name, agent_id, policy_id) VALUES (?, ?, ?, ?)
       ON CONFLICT (run_id, name, agent_id, policy_id) DO UPDATE SET name = excluded.name RETURNING id`,
    );
    this.insertMetric = db.prepare<[number, number, number]>('INSERT INTO metrics (series_id, step, value) VALUES (?, ?, ?)');
    this.insertGroup = db.prepare<Bind[], { id: number }>(
      `INSERT INTO groups (run_id, step, group_key, env_instance, agent_id, turn, size, reward_mean, reward_std)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
    );
    this.insertTrajectory = db.prepare<Bind[], { id: number }>(
      `INSERT INTO trajectories (run_id, step, phase, env_name, env_seed, env_instance, rollout, success, team_reward, local_reward, turn_count)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
    );
    this.insertTurn = db.prepare<Bind[]>(
      `INSERT INTO turns (trajectory_id, ordinal, turn, agent_id, policy_id, branch, kept, prompt_text, response_text,
         prompt_tokens, response_tokens, logprobs, team_reward, local_reward, reward, advantage, group_id, parse_error, executions)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.setLastStep = db.prepare<[number | null, number, string]>('UPDATE runs SET last_committed_step = ?, updated_at = ? WHERE id = ?');
    // Deleting a steps row cascades to its groups, trajectories and turns.
    this.deleteStepsAfter = db.prepare<[string, number]>('DELETE FROM steps WHERE run_id = ? AND step > ?');
    this.deleteMetricsAfter = db.prepare<[number, string]>(
      'DELETE FROM metrics WHERE step > ? AND series_id IN (SELECT id FROM metric_series WHERE run_id = ?)',
    );
    this.maxStep = db.prepare<[string], { step: number | null }>('SELECT max(step) AS step FROM steps WHERE run_id = ?');
  }

  commit(runId: string, input: unknown, hooks: CommitHooks = {}): CommitResult {
    const data = parseStepInput(runId, input);
    const what = `commitStep(run ${JSON.stringify(runId)}, step ${data.step})`;
    const write = this.db.transaction((): CommitResult => {
      const last = this.runs.lastCommittedStep(runId, what);
      if (last !== null && data.step < last) {
        throw new RunStoreError(
          'step-order',
          `${what}: the run's last committed step is ${last}; committing an earlier step would keep the later ones from an abandoned timeline. Call rewindRun(${JSON.stringify(runId)}, ${data.step - 1}) first to discard steps after ${data.step - 1}.`,
        );
      }
      const replaced = last === data.step;
      if (replaced) this.deleteAfter(runId, data.step - 1);
      const result = this.writeRows(runId, data, replaced);
      hooks.beforeCommit?.();
      this.setLastStep.run(data.step, this.now(), runId);
      return result;
    });
    try {
      // IMMEDIATE takes the write lock up front: a deferred transaction that reads first and then
      // writes can fail with SQLITE_BUSY_SNAPSHOT without waiting when another connection wrote.
      return write.immediate();
    } catch (error) {
      // A constraint the schema checks missed is still a bad input, and says so with the step's name.
      if (isConstraintError(error)) {
        throw new RunStoreError('invalid-input', `${what}: the database rejected the step, nothing was written: ${error.message}`, { cause: error });
      }
      throw error;
    }
  }

  /**
   * Deletes every step after `toStep` (all of them for null) with its rows, metrics and checkpoint
   * rows, and moves the run's last committed step back. Used before resuming from a checkpoint older
   * than the last committed step.
   */
  rewind(runId: string, toStep: number | null): RewindResult {
    const after = toStep ?? -1;
    if (!Number.isInteger(after) || after < -1) {
      throw new RunStoreError('invalid-input', `rewindRun(${JSON.stringify(runId)}): toStep must be a non-negative integer or null, got ${String(toStep)}`);
    }
    return this.db
      .transaction((): RewindResult => {
        this.runs.lastCommittedStep(runId, 'rewindRun'); // existence check
        const removedSteps = this.deleteAfter(runId, after);
        const removedCheckpoints = this.checkpoints.removeAfterStep(runId, after);
        const lastCommittedStep = this.maxStep.get(runId)?.step ?? null;
        this.setLastStep.run(lastCommittedStep, this.now(), runId);
        return { removedSteps, removedCheckpoints, lastCommittedStep };
      })
      .immediate();
  }

  private deleteAfter(runId: string, step: number): number {
    this.deleteMetricsAfter.run(step, runId);
    return this.deleteStepsAfter.run(runId, step).changes;
  }

  private writeRows(runId: string, data: StepData, replaced: boolean): CommitResult {
    let successCount = 0;
    let turnCount = 0;
    let promptTokenCount = 0;
    let responseTokenCount = 0;
    for (const t of data.trajectories) {
      if (t.success) successCount++;
      turnCount += t.turns.length;
      for (const turn of t.turns) {
        promptTokenCount += turn.promptTokens.length;
        responseTokenCount += turn.responseTokens.length;
      }
    }
    const createdAt = this.now();
    const timings = JSON.stringify(data.timingsMs);
    this.insertStep.run(runId, data.step, timings, data.trajectories.length, successCount, turnCount, promptTokenCount, responseTokenCount, createdAt);

    for (const m of data.metrics) {
      const series = this.upsertSeries.get(runId, m.name, m.agentId ?? '', m.policyId ?? '');
      if (series === undefined) throw new Error('metric series upsert returned no id');
      this.insertMetric.run(series.id, data.step, m.value);
    }

    const groupRowIds = new Map<string, number>();
    for (const g of data.groups) {
      const row = this.insertGroup.get(runId, data.step, g.groupId, g.envInstance, g.agentId, g.turn, g.size, g.rewardMean, g.rewardStd);
      if (row === undefined) throw new Error('group insert returned no id');
      groupRowIds.set(g.groupId, row.id);
    }

    const trajectoryIds: number[] = [];
    for (const t of data.trajectories) {
      const keptTurns = t.turns.reduce((n, turn) => n + (turn.kept ? 1 : 0), 0);
      const row = this.insertTrajectory.get(
        runId, data.step, t.phase, t.envName, t.envSeed, t.envInstance, t.rollout, t.success ? 1 : 0, t.teamReward, t.localReward, keptTurns,
      );
      if (row === undefined) throw new Error('trajectory insert returned no id');
      trajectoryIds.push(row.id);
      t.turns.forEach((turn, ordinal) => {
        this.insertTurn.run(
          row.id, ordinal, turn.turn, turn.agentId, turn.policyId, turn.branch, turn.kept ? 1 : 0, turn.promptText, turn.responseText,
          encodeInt32(turn.promptTokens), encodeInt32(turn.responseTokens), encodeFloat32(turn.logprobs),
          turn.teamReward, turn.localReward, turn.reward, turn.advantage ?? null,
          turn.groupId === undefined ? null : (groupRowIds.get(turn.groupId) ?? null), turn.parseError ?? null,
          encodeExecutions(turn.executions),
        );
      });
    }

    for (const c of data.checkpoints) this.checkpoints.record(runId, c);

    return {
      step: data.step,
      createdAt,
      timingsMs: data.timingsMs,
      trajectoryCount: data.trajectories.length,
      successCount,
      turnCount,
      promptTokenCount,
      responseTokenCount,
      replaced,
      trajectoryIds,
    };
  }
}

function isConstraintError(error: unknown): error is Error & { code: string } {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('SQLITE_CONSTRAINT');
}
