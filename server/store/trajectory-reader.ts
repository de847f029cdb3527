/**
 * Reads what the editor browses: a run's steps, a step's trajectories under filters, and one
 * trajectory with the alternatives of each of its turns.
 *
 * Every query here is answered from an index (checked with EXPLAIN QUERY PLAN in the tests):
 * - steps of a run: the `steps` primary key (run_id, step);
 * - trajectories of a step: UNIQUE (run_id, step, phase, env_instance, rollout), which also gives
 *   the listing order without a sort; one seed across steps: trajectories_by_seed;
 * - turns of a trajectory: UNIQUE (trajectory_id, ordinal); siblings of a turn: turns_by_group.
 * Filters other than run/step/seed are evaluated on the few hundred rows of one step.
 */
import type Database from 'better-sqlite3';
import {
  stepTimingsSchema,
  trajectoryQuerySchema,
  type StepSummary,
  type TrajectoryDetail,
  type TrajectoryPhase,
  type TrajectoryQuery,
  type TrajectorySummary,
  type TurnRecord,
  type TurnWithSiblings,
} from '../protocol/trajectory.ts';
import { decodeFloat32, decodeInt32 } from './blob-codec.ts';
import { decodeExecutions } from './executions-column.ts';
import { invalidInput } from './step-input.ts';

interface StepRow {
  step: number;
  timings: string;
  trajectory_count: number;
  success_count: number;
  turn_count: number;
  prompt_token_count: number;
  response_token_count: number;
  created_at: number;
}

interface TrajectoryRow {
  id: number;
  run_id: string;
  step: number;
  phase: TrajectoryPhase;
  env_name: string;
  env_seed: number;
  env_instance: number;
  rollout: number;
  success: number;
  team_reward: number;
  local_reward: number;
  turn_count: number;
}

interface TurnRow {
  id: number;
  trajectory_id: number;
  turn: number;
  agent_id: string;
  policy_id: string;
  branch: number;
  kept: number;
  prompt_text: string;
  response_text: string;
  prompt_tokens: Buffer;
  response_tokens: Buffer;
  logprobs: Buffer;
  team_reward: number;
  local_reward: number;
  reward: number;
  advantage: number | null;
  group_id: number | null;
  group_key: string | null;
  parse_error: string | null;
  executions: string | null;
}

const turnColumns = `u.id, u.trajectory_id, u.turn, u.agent_id, u.policy_id, u.branch, u.kept, u.prompt_text, u.response_text,
  u.prompt_tokens, u.response_tokens, u.logprobs, u.team_reward, u.local_reward, u.reward, u.advantage, u.group_id,
  g.group_key, u.parse_error, u.executions`;

/** The fixed queries, exported so the tests can check their plans. */
export const trajectorySql = {
  stepsFrom: 'SELECT * FROM steps WHERE run_id = ? AND step >= ? ORDER BY step LIMIT ?',
  trajectoryById: 'SELECT * FROM trajectories WHERE id = ?',
  turnsOfTrajectory: `SELECT ${turnColumns} FROM turns u LEFT JOIN groups g ON g.id = u.group_id WHERE u.trajectory_id = ? ORDER BY u.ordinal`,
  turnsOfGroup: `SELECT ${turnColumns} FROM turns u JOIN groups g ON g.id = u.group_id WHERE u.group_id = ? ORDER BY u.trajectory_id, u.branch`,
} as const;

/** Filters that narrow the SQL, in a fixed order so each combination maps to one cached statement. */
const filterClauses = {
  step: 't.step = @step',
  phase: 't.phase = @phase',
  success: 't.success = @success',
  envSeed: 't.env_seed = @envSeed',
  minReward: 't.team_reward >= @minReward',
  maxReward: 't.team_reward <= @maxReward',
  agentId: 'EXISTS (SELECT 1 FROM turns a WHERE a.trajectory_id = t.id AND a.agent_id = @agentId)',
} as const;
export type TrajectoryFilterName = keyof typeof filterClauses;
export const trajectoryFilterNames: readonly TrajectoryFilterName[] = ['step', 'phase', 'success', 'envSeed', 'minReward', 'maxReward', 'agentId'];

/** SQL listing trajectories under a combination of filters. */
export function listTrajectoriesSql(present: readonly TrajectoryFilterName[]): string {
  const where = ['t.run_id = @runId', ...present.map((name) => filterClauses[name])].join(' AND ');
  return `SELECT t.* FROM trajectories t WHERE ${where} ORDER BY t.step, t.phase, t.env_instance, t.rollout LIMIT @limit OFFSET @offset`;
}

export class TrajectoryReader {
  private readonly stepsFrom;
  private readonly trajectoryById;
  private readonly turnsOfTrajectory;
  private readonly turnsOfGroup;
  private readonly listStatements = new Map<string, Database.Statement<Record<string, number | string>, TrajectoryRow>>();

  constructor(private readonly db: Database.Database) {
    this.stepsFrom = db.prepare<[string, number, number], StepRow>(trajectorySql.stepsFrom);
    this.trajectoryById = db.prepare<[number], TrajectoryRow>(trajectorySql.trajectoryById);
    this.turnsOfTrajectory = db.prepare<[number], TurnRow>(trajectorySql.turnsOfTrajectory);
    this.turnsOfGroup = db.prepare<[number], TurnRow>(trajectorySql.turnsOfGroup);
  }

  /** Steps of a run in order, starting at `fromStep`. */
  steps(runId: string, fromStep = 0, limit = 10_000): StepSummary[] {
    return this.stepsFrom.all(runId, fromStep, limit).map((row) => ({
      step: row.step,
      createdAt: row.created_at,
      timingsMs: stepTimingsSchema.parse(JSON.parse(row.timings)),
      trajectoryCount: row.trajectory_count,
      successCount: row.success_count,
      turnCount: row.turn_count,
      promptTokenCount: row.prompt_token_count,
      responseTokenCount: row.response_token_count,
    }));
  }

  /** Trajectories matching every given filter, ordered by step, phase, instance and rollout. */
  list(query: TrajectoryQuery): TrajectorySummary[] {
    const parsed = trajectoryQuerySchema.safeParse(query);
    if (!parsed.success) throw invalidInput('listTrajectories', parsed.error.issues);
    const q = parsed.data;
    const present: TrajectoryFilterName[] = [];
    const params: Record<string, number | string> = { runId: q.runId, limit: q.limit, offset: q.offset };
    for (const name of trajectoryFilterNames) {
      const value = q[name];
      if (value === undefined) continue;
      present.push(name);
      params[name] = typeof value === 'boolean' ? Number(value) : value; // SQLite has no booleans
    }
    return this.listStatement(present).all(params).map(toTrajectorySummary);
  }

  /**
   * One trajectory: its kept turns in acting order, each with its siblings — the other samples of its
   * group (other branches, or the same turn in other rollouts of the task), or for an ungrouped turn
   * the other branches of the same (turn, agent) in this trajectory.
   */
  detail(trajectoryId: number): TrajectoryDetail | undefined {
    const row = this.trajectoryById.get(trajectoryId);
    if (row === undefined) return undefined;
    const rows = this.turnsOfTrajectory.all(trajectoryId);
    const turns: TurnWithSiblings[] = [];
    for (const kept of rows) {
      if (kept.kept !== 1) continue;
      const siblings = kept.group_id !== null
        ? this.turnsOfGroup.all(kept.group_id).filter((r) => r.id !== kept.id)
        : rows.filter((r) => r.id !== kept.id && r.turn === kept.turn && r.agent_id === kept.agent_id);
      turns.push({ ...toTurnRecord(kept), siblings: siblings.map(toTurnRecord) });
    }
    return { trajectory: toTrajectorySummary(row), turns };
  }

  private listStatement(present: readonly TrajectoryFilterName[]) {
    const key = present.join(',');
    let statement = this.listStatements.get(key);
    if (statement === undefined) {
      statement = this.db.prepare<Record<string, number | string>, TrajectoryRow>(listTrajectoriesSql(present));
      this.listStatements.set(key, statement);
    }
    return statement;
  }
}

function toTrajectorySummary(row: TrajectoryRow): TrajectorySummary {
  return {
    id: row.id,
    runId: row.run_id,
    step: row.step,
    phase: row.phase,
    envName: row.env_name,
    envSeed: row.env_seed,
    envInstance: row.env_instance,
    rollout: row.rollout,
    success: row.success === 1,
    teamReward: row.team_reward,
    localReward: row.local_reward,
    turnCount: row.turn_count,
  };
}

function toTurnRecord(row: TurnRow): TurnRecord {
  const where = `turn row ${row.id}`;
  const out: TurnRecord = {
    id: row.id,
    trajectoryId: row.trajectory_id,
    turn: row.turn,
    agentId: row.agent_id,
    policyId: row.policy_id,
    branch: row.branch,
    kept: row.kept === 1,
    promptText: row.prompt_text,
    responseText: row.response_text,
    promptTokens: decodeInt32(row.prompt_tokens, `${where} prompt_tokens`),
    responseTokens: decodeInt32(row.response_tokens, `${where} response_tokens`),
    logprobs: decodeFloat32(row.logprobs, `${where} logprobs`),
    teamReward: row.team_reward,
    localReward: row.local_reward,
    reward: row.reward,
  };
  if (row.advantage !== null) out.advantage = row.advantage;
  if (row.group_key !== null) out.groupId = row.group_key;
  if (row.parse_error !== null) out.parseError = row.parse_error;
  const executions = decodeExecutions(row.executions, row.id);
  if (executions !== undefined) out.executions = executions;
  return out;
}
