/**
 * The trajectory model: what one training step produced (metrics, AT-GRPO groups, trajectories and
 * their turns) and how the editor reads it back (runs, steps, trajectory lists and details, metric
 * series, checkpoints). The run store writes these shapes and the RPC layer sends them as they are,
 * so the extension and the webviews parse exactly what the server stored.
 *
 * Terms (the paper's §3; ARCHITECTURE.md, "The training loop in one page"): at each (turn t, agent i) of an episode the tree sampler draws K responses
 * ("branches" 0..K-1) from one state, scores each `r = α·r_team + r_local`, keeps the best one and
 * carries it forward. Every branch is recorded; the carried one has `kept: true`. An AT-GRPO group is
 * the set of samples sharing (environment instance, agent, turn); advantages are normalised within it.
 * With independent rollouts (the GRPO baseline) each (turn, agent) has one branch, always kept, and the
 * group spans the rollouts of one environment instance.
 *
 * Numbers are finite everywhere: zod 4's `z.number()` already rejects NaN and ±Infinity, which is the
 * point — a NaN reward must fail at the boundary instead of reaching a chart or an advantage.
 * Token and log-prob arrays are checked with one loop instead of a schema per element: a step holds
 * hundreds of thousands of them and a per-element schema costs ~60x more.
 */
import { z } from 'zod';

const INT32_MAX = 2 ** 31 - 1;

/**
 * Log-probabilities are stored as float32 (what the engine computes in); float32 rounding can push
 * the log-prob of a near-certain token a hair above zero, so the upper bound allows that much.
 */
export const LOGPROB_UPPER_BOUND = 1e-4;

/** A non-empty identifier (run, agent, policy, group, environment name, metric), at most 256 characters. */
export const idSchema = z.string().min(1, 'must be a non-empty string').max(256);

/** Lifecycle of a run (the run manager's state machine: queued → running ⇄ paused → stopping → done|failed). */
export const runStateSchema = z.enum(['queued', 'running', 'paused', 'stopping', 'done', 'failed']);
export type RunState = z.infer<typeof runStateSchema>;

/** Whether a trajectory was collected for training or on the held-out validation seeds. */
export const trajectoryPhaseSchema = z.enum(['train', 'validation']);
export type TrajectoryPhase = z.infer<typeof trajectoryPhaseSchema>;

/** Why a checkpoint was written: the warm-start policy, a periodic RL checkpoint, or the end of the run. */
export const checkpointKindSchema = z.enum(['warmstart', 'rl', 'final']);
export type CheckpointKind = z.infer<typeof checkpointKindSchema>;

/**
 * Index of the first entry that is not a valid token id (an integer in [0, 2^31)), or -1. Shared by
 * the wire schema below and the store's commit schema, which also accepts an Int32Array.
 */
export function findInvalidTokenId(ids: ArrayLike<unknown>): number {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > INT32_MAX) return i;
  }
  return -1;
}

/** Index of the first entry that is not a valid log-probability (finite, <= LOGPROB_UPPER_BOUND), or -1. */
export function findInvalidLogprob(logprobs: ArrayLike<unknown>): number {
  for (let i = 0; i < logprobs.length; i++) {
    const lp = logprobs[i];
    if (typeof lp !== 'number' || !Number.isFinite(lp) || lp > LOGPROB_UPPER_BOUND) return i;
  }
  return -1;
}

/** Token ids: integers in [0, 2^31). */
export const tokenIdsSchema = z.custom<number[]>((v) => Array.isArray(v), 'expected an array of token ids').check((ctx) => {
  const i = findInvalidTokenId(ctx.value);
  if (i >= 0) {
    ctx.issues.push({ code: 'custom', input: ctx.value[i], path: [i], message: `token id must be an integer in [0, 2^31), got ${String(ctx.value[i])}` });
  }
});

/** Natural-log sampling probabilities, one per response token: finite and at most 0 (see LOGPROB_UPPER_BOUND). */
export const logprobsSchema = z.custom<number[]>((v) => Array.isArray(v), 'expected an array of log-probabilities').check((ctx) => {
  const i = findInvalidLogprob(ctx.value);
  if (i >= 0) {
    ctx.issues.push({ code: 'custom', input: ctx.value[i], path: [i], message: `log-probability must be finite and <= 0, got ${String(ctx.value[i])}` });
  }
});

/**
 * The canonical group id of an AT-GRPO group, `${envInstance}/${agentId}/${turn}`. Producers may use
 * other ids; the store only requires that a step's turns reference groups it declares.
 */
export function groupKey(envInstance: number, agentId: string, turn: number): string {
  return `${envInstance}/${agentId}/${turn}`;
}

/** One value of one metric at one step. */
export const metricSchema = z.object({
  /** Metric name, slash-separated by area, e.g. `reward/mean`, `train/kl`, `val/success_rate`. */
  name: idSchema,
  /** The value; NaN and infinities are rejected so charts never receive them. */
  value: z.number(),
  /** Agent the value is about; absent for team-wide values. */
  agentId: idSchema.optional(),
  /** Policy the value is about (losses, KL, learning rate); absent when not per-policy. */
  policyId: idSchema.optional(),
});
export type Metric = z.infer<typeof metricSchema>;

/** An AT-GRPO group of one step: the samples whose advantages are normalised together. */
export const groupSchema = z.object({
  /** Group id, unique within the step; `groupKey(envInstance, agentId, turn)` by convention. */
  groupId: idSchema,
  /** Index of the environment instance (task) within the step. */
  envInstance: z.int().nonnegative(),
  /** Agent whose responses form the group. */
  agentId: idSchema,
  /** Turn index the group belongs to. */
  turn: z.int().nonnegative(),
  /** Number of samples in the group (K under tree sampling). A group of size 1 gets advantage 0. */
  size: z.int().positive(),
  /** Mean combined reward of the group's samples. */
  rewardMean: z.number(),
  /** Unbiased standard deviation of the group's rewards (0 for a group of size 1). */
  rewardStd: z.number().nonnegative(),
});
export type Group = z.infer<typeof groupSchema>;

/**
 * How a program's run ended, in the order the sandbox decides it:
 * - `ok`: exited with status 0;
 * - `error`: exited with another status (an exception, `sys.exit(1)`) or was stopped by a signal
 *   it brought on itself (a crash, exceeding the address-space or file-size limit);
 * - `timeout`: hit the wall-clock limit or the CPU-seconds limit, and its process group was killed;
 * - `output-limit`: wrote more than the output limit to stdout + stderr, and was killed;
 * - `refused`: never ran: the sandbox could not start it (the reason is in `stderr`).
 */
export const executionStatuses = ['ok', 'error', 'timeout', 'output-limit', 'refused'] as const;
export const executionStatusSchema = z.enum(executionStatuses);
export type ExecutionStatus = z.infer<typeof executionStatusSchema>;

/**
 * One run of model-written code in the sandbox (`server/sandbox/`): what ran, on what input, and what came
 * out. Environments read it to score an act; trajectories keep it so the editor can show it.
 */
export const executionSchema = z.object({
  /** The language the code is in; Python (Debian's python3) is the only one today. */
  language: z.literal('python'),
  /** The program's source, as the agent wrote it (after extraction from its response). */
  code: z.string(),
  /** What the program read on standard input ('' for none). */
  stdin: z.string(),
  /** How the run ended. */
  status: executionStatusSchema,
  /** Exit status when the process exited; null when a signal ended it or it never ran. */
  exitCode: z.int().nullable(),
  /** The signal that ended the process (e.g. `SIGKILL`), or null. */
  signal: z.string().nullable(),
  /** Standard output, cut at the output limit (UTF-8, invalid bytes replaced). */
  stdout: z.string(),
  /** Standard error, cut at the output limit; for `refused`, why the sandbox could not run it. */
  stderr: z.string(),
  /** Whether stdout or stderr was cut. */
  truncated: z.boolean(),
  /** Wall-clock time from start to exit, in milliseconds. */
  durationMs: z.number().nonnegative(),
});
export type Execution = z.infer<typeof executionSchema>;

/** A program an act asks to run: the code and its standard input. */
export interface ProgramRequest {
  readonly language: 'python';
  readonly code: string;
  readonly stdin: string;
}

/** One sampled response: an agent's prompt, its response and everything the trainer derived from it. */
export const turnSchema = z.object({
  /** Turn index t of the episode, from 0; the agents acting in the same round share it. */
  turn: z.int().nonnegative(),
  /** Agent (workflow role) that produced the response, e.g. `tool` or `plan`. */
  agentId: idSchema,
  /** Policy that generated the response (the router maps agentId → policyId). */
  policyId: idSchema,
  /** Branch index among the K responses sampled at this (turn, agent); 0 for independent rollouts. */
  branch: z.int().nonnegative(),
  /** Whether this branch was carried forward (highest reward, ties to the lowest index); exactly one per (turn, agent). */
  kept: z.boolean(),
  /** The prompt as text, as the agent built it from the environment state. */
  promptText: z.string(),
  /** The sampled response as text. */
  responseText: z.string(),
  /** Prompt token ids fed to the policy. */
  promptTokens: tokenIdsSchema,
  /** Response token ids the policy sampled. */
  responseTokens: tokenIdsSchema,
  /** Sampling log-probability of each response token (stored as float32); same length as responseTokens. */
  logprobs: logprobsSchema,
  /** Team (environment-wide) reward of this branch. */
  teamReward: z.number(),
  /** The agent's local reward for this branch. */
  localReward: z.number(),
  /** Combined reward `α·teamReward + localReward` that ranked the branches and fed the advantage. */
  reward: z.number(),
  /** Group-normalised advantage, broadcast to every response token; absent when the sample was not trained on. */
  advantage: z.number().optional(),
  /** Id of the group (declared in the same step) this sample was normalised in; absent for untrained samples. */
  groupId: idSchema.optional(),
  /** Why the response could not be parsed into an action; absent when it parsed. */
  parseError: z.string().optional(),
  /** Programs this act ran in the sandbox (a tool agent's code, a coder's program on each test), in order; absent when it ran none. */
  executions: z.array(executionSchema).optional(),
});
export type Turn = z.infer<typeof turnSchema>;

/** One episode on one environment instance, with every branch of every turn. */
export const trajectorySchema = z.object({
  /** Whether the episode was collected for training or validation. */
  phase: trajectoryPhaseSchema,
  /** Environment name, e.g. `plan-path`. */
  envName: idSchema,
  /** Seed the environment instance was generated from; the same seed at two steps is the same task. */
  envSeed: z.int(),
  /** Index of the environment instance within the step and phase. */
  envInstance: z.int().nonnegative(),
  /** Rollout index among independent rollouts of the same instance (GRPO baseline); 0 under tree sampling. */
  rollout: z.int().nonnegative(),
  /** Whether the environment reported the task solved. */
  success: z.boolean(),
  /** Total team reward of the episode along the kept path. */
  teamReward: z.number(),
  /** Total local reward of the episode along the kept path, summed over agents. */
  localReward: z.number(),
  /** Turns in acting order; each (turn, agent) lists all of its branches. */
  turns: z.array(turnSchema),
});
export type Trajectory = z.infer<typeof trajectorySchema>;

/** A checkpoint file (or folder) written for a run; paths are absolute when read back. */
export const checkpointInputSchema = z.object({
  /** Step the checkpoint captures (0 for the warm-start policy). */
  step: z.int().nonnegative(),
  /** Why it was written. */
  kind: checkpointKindSchema,
  /** File or folder path, normally inside the run folder. */
  path: z.string().min(1, 'must be a non-empty path'),
  /** Policy whose weights or adapter it holds; absent when it holds every policy. */
  policyId: idSchema.optional(),
  /** Free-form JSON metadata (format, byte size, hash). */
  meta: z.record(z.string(), z.unknown()).optional(),
});
export type CheckpointInput = z.infer<typeof checkpointInputSchema>;

/** Wall-clock phases of a step in milliseconds, e.g. `{ rollout: 812, update: 240, total: 1103 }`. */
export const stepTimingsSchema = z.record(z.string(), z.number().nonnegative());

// ---- Records read back by the editor -------------------------------------------------------------

/** A run as listed in the Runs view. */
export const runSummarySchema = z.object({
  /** Run id. */
  id: idSchema,
  /** Human-readable name. */
  name: z.string(),
  /** Lifecycle state. */
  state: runStateSchema,
  /** Creation time, Unix epoch milliseconds. */
  createdAt: z.int(),
  /** Last change of state or last committed step, Unix epoch milliseconds. */
  updatedAt: z.int(),
  /** Absolute path of the run folder (checkpoints, adapters, logs). */
  runDir: z.string(),
  /** Last step whose rows are fully committed; null before the first step. Resume continues after it. */
  lastCommittedStep: z.int().nullable(),
  /** The step the run trains to; null for runs recorded before it was kept (their run.json has it). */
  targetSteps: z.int().positive().nullable(),
  /** Why the run failed; absent unless it did. */
  error: z.string().optional(),
});
export type RunSummary = z.infer<typeof runSummarySchema>;

/** A run with its experiment config (kept as given; the experiment config schema validates it). */
export const runRecordSchema = runSummarySchema.extend({
  /** The experiment config the run was started with. */
  config: z.unknown(),
});
export type RunRecord = z.infer<typeof runRecordSchema>;

/** One committed training step, with counts the store derived from its rows. */
export const stepSummarySchema = z.object({
  /** Step number. */
  step: z.int().nonnegative(),
  /** Commit time, Unix epoch milliseconds. */
  createdAt: z.int(),
  /** Wall-clock phases of the step in milliseconds. */
  timingsMs: stepTimingsSchema,
  /** Trajectories recorded (train and validation). */
  trajectoryCount: z.int().nonnegative(),
  /** Trajectories that reported success. */
  successCount: z.int().nonnegative(),
  /** Turn rows recorded, every branch counted. */
  turnCount: z.int().nonnegative(),
  /** Prompt tokens over all turn rows. */
  promptTokenCount: z.int().nonnegative(),
  /** Response tokens over all turn rows. */
  responseTokenCount: z.int().nonnegative(),
});
export type StepSummary = z.infer<typeof stepSummarySchema>;

/** A trajectory without its turns, as listed for a step. */
export const trajectorySummarySchema = trajectorySchema.omit({ turns: true }).extend({
  /** Trajectory id, stable for the life of the database. */
  id: z.int().positive(),
  /** Run it belongs to. */
  runId: idSchema,
  /** Step that produced it. */
  step: z.int().nonnegative(),
  /** Number of kept turns, i.e. the episode's length in agent actions. */
  turnCount: z.int().nonnegative(),
});
export type TrajectorySummary = z.infer<typeof trajectorySummarySchema>;

/** A stored turn row. */
export const turnRecordSchema = turnSchema.extend({
  /** Turn row id. */
  id: z.int().positive(),
  /** Trajectory the row belongs to. */
  trajectoryId: z.int().positive(),
});
export type TurnRecord = z.infer<typeof turnRecordSchema>;

/** A turn on a trajectory's kept path with the alternatives it was chosen among. */
export const turnWithSiblingsSchema = turnRecordSchema.extend({
  /**
   * The other samples of the same group (other branches, or the same turn in other rollouts of the
   * same task); for ungrouped turns, the other branches of the same (turn, agent). Ordered by
   * trajectory, then branch.
   */
  siblings: z.array(turnRecordSchema),
});
export type TurnWithSiblings = z.infer<typeof turnWithSiblingsSchema>;

/** One trajectory with its kept path and, for every turn on it, the sibling branches. */
export const trajectoryDetailSchema = z.object({
  /** The trajectory. */
  trajectory: trajectorySummarySchema,
  /** Kept turns in acting order, each with its siblings. */
  turns: z.array(turnWithSiblingsSchema),
});
export type TrajectoryDetail = z.infer<typeof trajectoryDetailSchema>;

/** Filters for listing trajectories; all given filters must hold. */
export const trajectoryQuerySchema = z.object({
  /** Run to read. */
  runId: idSchema,
  /** Step to read; absent for every step (useful with envSeed to follow one task through training). */
  step: z.int().nonnegative().optional(),
  /** Only this phase. */
  phase: trajectoryPhaseSchema.optional(),
  /** Only trajectories in which this agent acted. */
  agentId: idSchema.optional(),
  /** Only successful (true) or failed (false) trajectories. */
  success: z.boolean().optional(),
  /** Only this environment seed. */
  envSeed: z.int().optional(),
  /** Only trajectories whose team reward is at least this. */
  minReward: z.number().optional(),
  /** Only trajectories whose team reward is at most this. */
  maxReward: z.number().optional(),
  /** Page size. */
  limit: z.int().positive().max(10_000).default(500),
  /** Rows to skip, for paging. */
  offset: z.int().nonnegative().default(0),
});
export type TrajectoryQuery = z.input<typeof trajectoryQuerySchema>;

/** Identifies one metric series of a run. */
export const metricSeriesKeySchema = z.object({
  /** Metric name. */
  name: idSchema,
  /** Agent of a per-agent series; absent for the team-wide series. */
  agentId: idSchema.optional(),
  /** Policy of a per-policy series; absent when not per-policy. */
  policyId: idSchema.optional(),
});
export type MetricSeriesKey = z.infer<typeof metricSeriesKeySchema>;

/** Which points of a metric series to read. */
export const metricSeriesQuerySchema = metricSeriesKeySchema.extend({
  /** Run to read. */
  runId: idSchema,
  /** First step to include. */
  fromStep: z.int().nonnegative().optional(),
  /** Last step to include. */
  toStep: z.int().nonnegative().optional(),
});
export type MetricSeriesQuery = z.infer<typeof metricSeriesQuerySchema>;

/** One point of a metric series. */
export const metricPointSchema = z.object({
  /** Step the value was logged at. */
  step: z.int().nonnegative(),
  /** The value. */
  value: z.number(),
});
export type MetricPoint = z.infer<typeof metricPointSchema>;

/** The most recent value of one series. */
export const latestMetricSchema = metricSchema.extend({
  /** Step of that value. */
  step: z.int().nonnegative(),
});
export type LatestMetric = z.infer<typeof latestMetricSchema>;

/** A recorded checkpoint. */
export const checkpointSchema = checkpointInputSchema.extend({
  /** Checkpoint row id. */
  id: z.int().positive(),
  /** Run it belongs to. */
  runId: idSchema,
  /** When it was recorded, Unix epoch milliseconds. */
  createdAt: z.int(),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;
