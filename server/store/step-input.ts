/**
 * What `commitStep` accepts, and the checks that run before anything touches the database.
 *
 * The shapes are the protocol's (server/protocol/trajectory.ts), with two changes for the trainer's
 * convenience: token ids and log-probs may also be the Int32Array / Float32Array the engine produced
 * (no copy into number[] just to be stored as bytes), and every object is strict, so a misspelt field
 * fails instead of silently dropping data. Cross-field rules that a per-object schema cannot see
 * (lengths that must agree, one kept branch per (turn, agent), group references) are checked over the
 * whole step, and every failure is reported with the path of the offending field.
 */
import { z } from 'zod';
import {
  checkpointInputSchema,
  executionSchema,
  findInvalidLogprob,
  findInvalidTokenId,
  groupSchema,
  metricSchema,
  stepTimingsSchema,
  trajectorySchema,
  turnSchema,
} from '../protocol/trajectory.ts';
import { executionsBytes, MAX_EXECUTIONS_BYTES } from './executions-column.ts';
import { RunStoreError } from './store-error.ts';

const tokenIdsInputSchema = z
  .custom<Int32Array | number[]>((v) => v instanceof Int32Array || Array.isArray(v), 'expected an Int32Array or an array of token ids')
  .check((ctx) => {
    const i = findInvalidTokenId(ctx.value);
    if (i >= 0) {
      ctx.issues.push({ code: 'custom', input: ctx.value[i], path: [i], message: `token id must be an integer in [0, 2^31), got ${String(ctx.value[i])}` });
    }
  });

const logprobsInputSchema = z
  .custom<Float32Array | number[]>((v) => v instanceof Float32Array || Array.isArray(v), 'expected a Float32Array or an array of log-probabilities')
  .check((ctx) => {
    const i = findInvalidLogprob(ctx.value);
    if (i >= 0) {
      ctx.issues.push({ code: 'custom', input: ctx.value[i], path: [i], message: `log-probability must be finite and <= 0, got ${String(ctx.value[i])}` });
    }
  });

export const commitTurnSchema = turnSchema
  .extend({
    promptTokens: tokenIdsInputSchema,
    responseTokens: tokenIdsInputSchema,
    logprobs: logprobsInputSchema,
    executions: z.array(executionSchema.strict()).optional(),
  })
  .strict();

export const commitTrajectorySchema = trajectorySchema.extend({ turns: z.array(commitTurnSchema) }).strict();

/** Everything one training step produced; committed atomically by `RunStore.commitStep`. */
export const stepInputSchema = z
  .object({
    /** Step number; must not be before the run's last committed step (equal replaces it). */
    step: z.int().nonnegative(),
    /** Wall-clock phases of the step in milliseconds. */
    timingsMs: stepTimingsSchema.default({}),
    /** Metric values logged at this step; at most one per (name, agent, policy). */
    metrics: z.array(metricSchema.strict()).default([]),
    /** AT-GRPO groups the step's turns reference. */
    groups: z.array(groupSchema.strict()).default([]),
    /** Trajectories of the step, train and validation. */
    trajectories: z.array(commitTrajectorySchema).default([]),
    /** Checkpoints written for this step, recorded in the same transaction. */
    checkpoints: z.array(checkpointInputSchema.strict()).default([]),
  })
  .strict()
  .check((ctx) => checkStepInvariants(ctx.value, (path, message) => ctx.issues.push({ code: 'custom', input: ctx.value, path, message })));

/** The argument of `commitStep`. */
export type StepInput = z.input<typeof stepInputSchema>;
/** A validated step, defaults applied. */
export type StepData = z.output<typeof stepInputSchema>;

/** Parses a step, throwing one RunStoreError that lists every offending field by path. */
export function parseStepInput(runId: string, input: unknown): StepData {
  const parsed = stepInputSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const step = typeof input === 'object' && input !== null && 'step' in input ? String(input.step) : '?';
  throw invalidInput(`commitStep(run ${JSON.stringify(runId)}, step ${step})`, parsed.error.issues);
}

/** A RunStoreError for zod issues: one line per issue, `path.to[3].field: message`. */
export function invalidInput(what: string, issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }>): RunStoreError {
  const shown = issues.slice(0, 20).map((i) => `  ${formatPath(i.path)}: ${i.message}`);
  if (issues.length > shown.length) shown.push(`  … and ${issues.length - shown.length} more`);
  return new RunStoreError('invalid-input', `${what}: invalid input\n${shown.join('\n')}`);
}

export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : `${out === '' ? '' : '.'}${String(key)}`;
  return out === '' ? '(root)' : out;
}

function checkStepInvariants(step: StepData, issue: (path: PropertyKey[], message: string) => void): void {
  firstDuplicates(step.metrics, (m) => `${m.name}\0${m.agentId ?? ''}\0${m.policyId ?? ''}`, (i, j) =>
    issue(['metrics', i], `duplicate metric ${JSON.stringify(step.metrics[i]?.name)} for the same agent and policy as metrics[${j}]`),
  );
  firstDuplicates(step.groups, (g) => g.groupId, (i, j) => issue(['groups', i, 'groupId'], `duplicate group id, also at groups[${j}]`));
  firstDuplicates(step.trajectories, (t) => `${t.phase}\0${t.envInstance}\0${t.rollout}`, (i, j) =>
    issue(['trajectories', i], `duplicate (phase, envInstance, rollout), also at trajectories[${j}]`),
  );
  step.checkpoints.forEach((c, i) => {
    if (c.step > step.step) issue(['checkpoints', i, 'step'], `checkpoint step ${c.step} is after the step being committed (${step.step})`);
  });

  const groups = new Map(step.groups.map((g, i) => [g.groupId, { group: g, index: i, members: 0 }]));
  step.trajectories.forEach((trajectory, t) => {
    // Per (turn, agent): where its branches start, which one is kept, which group they share.
    const slots = new Map<string, { first: number; kept: number[]; groupId: string | undefined }>();
    const branches = new Set<string>();
    trajectory.turns.forEach((turn, u) => {
      const at = (field: string): PropertyKey[] => ['trajectories', t, 'turns', u, field];
      if (turn.logprobs.length !== turn.responseTokens.length) {
        issue(at('logprobs'), `has ${turn.logprobs.length} entries but responseTokens has ${turn.responseTokens.length}; there is one log-probability per response token`);
      }
      const executionBytes = executionsBytes(turn.executions);
      if (executionBytes > MAX_EXECUTIONS_BYTES) {
        issue(at('executions'), `take ${executionBytes} bytes as JSON, over the ${MAX_EXECUTIONS_BYTES} a turn may store; the sandbox cuts each program's output at its limit, so an act ran too many programs or the cut was skipped`);
      }
      const branchKey = `${turn.turn}\0${turn.agentId}\0${turn.branch}`;
      if (branches.has(branchKey)) issue(at('branch'), `branch ${turn.branch} of agent ${JSON.stringify(turn.agentId)} at turn ${turn.turn} appears twice`);
      branches.add(branchKey);

      const slotKey = `${turn.turn}\0${turn.agentId}`;
      const slot = slots.get(slotKey) ?? { first: u, kept: [], groupId: turn.groupId };
      slots.set(slotKey, slot);
      if (turn.kept) slot.kept.push(u);
      if (slot.groupId !== turn.groupId) {
        issue(at('groupId'), `branches of agent ${JSON.stringify(turn.agentId)} at turn ${turn.turn} must share one group, but turns[${slot.first}] has ${JSON.stringify(slot.groupId) ?? 'none'}`);
      }
      if (turn.groupId !== undefined) {
        const entry = groups.get(turn.groupId);
        if (entry === undefined) {
          issue(at('groupId'), `group ${JSON.stringify(turn.groupId)} is not declared in groups`);
        } else {
          entry.members++;
          if (entry.group.agentId !== turn.agentId || entry.group.turn !== turn.turn) {
            issue(at('groupId'), `group ${JSON.stringify(turn.groupId)} is for agent ${JSON.stringify(entry.group.agentId)} at turn ${entry.group.turn}, not agent ${JSON.stringify(turn.agentId)} at turn ${turn.turn}`);
          }
        }
      }
    });
    for (const slot of slots.values()) {
      if (slot.kept.length !== 1) {
        const turn = trajectory.turns[slot.first];
        issue(['trajectories', t, 'turns', slot.kept[1] ?? slot.first, 'kept'],
          `agent ${JSON.stringify(turn?.agentId)} at turn ${String(turn?.turn)} has ${slot.kept.length} kept branches; exactly one must be kept`);
      }
    }
  });
  for (const { group, index, members } of groups.values()) {
    if (members > group.size) issue(['groups', index, 'size'], `group ${JSON.stringify(group.groupId)} declares size ${group.size} but ${members} turns reference it`);
  }
}

/** Calls `report(i, j)` for each element i whose key already appeared at index j. */
function firstDuplicates<T>(items: readonly T[], key: (item: T) => string, report: (i: number, j: number) => void): void {
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const k = key(item);
    const j = seen.get(k);
    if (j === undefined) seen.set(k, i);
    else report(i, j);
  });
}
