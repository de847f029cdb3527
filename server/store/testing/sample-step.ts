/**
 * Builds realistic, deterministic step inputs for the store's tests, crash child and benchmark: a
 * tree-sampled AT-GRPO step where every (instance, turn, agent) has K branches scored, the best one
 * kept (ties to the lowest index), grouped by `groupKey` and given group-normalised advantages.
 * Log-probs are float32-exact so a round trip can be compared with `deepEqual`.
 */
import { groupKey, type Group } from '../../protocol/trajectory.ts';
import type { StepInput } from '../step-input.ts';

export interface SampleStepOptions {
  readonly step: number;
  /** Environment instances, one train trajectory each. */
  readonly instances?: number;
  /** Turn indices per episode. */
  readonly turns?: number;
  /** Agents acting in order within each turn. */
  readonly agents?: readonly string[];
  /** Branches K sampled per (turn, agent). */
  readonly branches?: number;
  readonly promptTokens?: number;
  readonly responseTokens?: number;
  /** Extra validation trajectories (one branch, ungrouped). */
  readonly validation?: number;
  /** Pass token ids and log-probs as typed arrays, as the engine produces them. */
  readonly typed?: boolean;
  readonly seed?: number;
}

/** A step of ~3.5 MB, so that a commit loop spends most of its time inside transactions. */
export const crashStepShape = {
  instances: 48, turns: 2, agents: ['tool', 'plan'], branches: 3, promptTokens: 1024, responseTokens: 32,
} as const satisfies Omit<SampleStepOptions, 'step'>;

/**
 * A step of ~25 MB: more than the page cache better-sqlite3 configures (16 MB), so SQLite must spill
 * part of the uncommitted transaction into the WAL file before it commits.
 */
export const spillStepShape = {
  instances: 64, turns: 2, agents: ['tool', 'plan'], branches: 3, promptTokens: 8192, responseTokens: 32, typed: true,
} as const satisfies Omit<SampleStepOptions, 'step'>;

/** mulberry32: tiny, deterministic, good enough to make varied test data. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type StepTurn = NonNullable<StepInput['trajectories']>[number]['turns'][number];

export function sampleStep(options: SampleStepOptions): StepInput {
  const { step, instances = 4, turns = 2, agents = ['tool', 'plan'], branches = 3, promptTokens = 16, responseTokens = 8 } = options;
  const { validation = 1, typed = false } = options;
  const rand = prng(options.seed ?? step * 7919 + 1);
  const ids = (n: number) => {
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = Math.floor(rand() * 32000);
    return typed ? out : Array.from(out);
  };
  const logprobs = (n: number) => {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = -rand() * 5;
    return typed ? out : Array.from(out);
  };
  const makeTurn = (turn: number, agentId: string, branch: number, kept: boolean, reward: number): StepTurn => ({
    turn,
    agentId,
    policyId: `policy-${agentId}`,
    branch,
    kept,
    promptText: `state of turn ${turn} for ${agentId}`,
    responseText: `action ${branch} by ${agentId}`,
    promptTokens: ids(promptTokens),
    responseTokens: ids(responseTokens),
    logprobs: logprobs(responseTokens),
    teamReward: reward,
    localReward: 0,
    reward,
  });

  const groups: Group[] = [];
  const trajectories: NonNullable<StepInput['trajectories']> = [];
  for (let instance = 0; instance < instances; instance++) {
    const rows: StepTurn[] = [];
    let team = 0;
    for (let turn = 0; turn < turns; turn++) {
      for (const agentId of agents) {
        const rewards = Array.from({ length: branches }, () => Math.round(rand() * 4) / 4);
        const best = rewards.indexOf(Math.max(...rewards));
        const mean = rewards.reduce((a, b) => a + b, 0) / branches;
        const std = branches > 1 ? Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (branches - 1)) : 0;
        const groupId = groupKey(instance, agentId, turn);
        groups.push({ groupId, envInstance: instance, agentId, turn, size: branches, rewardMean: mean, rewardStd: std });
        rewards.forEach((reward, branch) => {
          const advantage = branches > 1 && std > 0 ? (reward - mean) / (std + 1e-6) : 0;
          rows.push({ ...makeTurn(turn, agentId, branch, branch === best, reward), advantage, groupId });
        });
        team += rewards[best] ?? 0;
      }
    }
    // The parse error on the first row exercises the nullable column.
    if (rows[0] !== undefined) rows[0] = { ...rows[0], parseError: 'expected "MOVE <dir>"' };
    trajectories.push({
      phase: 'train', envName: 'plan-path', envSeed: 1000 + instance, envInstance: instance, rollout: 0,
      success: rand() < 0.5, teamReward: team, localReward: 0, turns: rows,
    });
  }
  for (let v = 0; v < validation; v++) {
    const rows = agents.map((agentId, i) => makeTurn(0, agentId, 0, true, i));
    trajectories.push({
      phase: 'validation', envName: 'plan-path', envSeed: 900_000 + v, envInstance: v, rollout: 0,
      success: v % 2 === 0, teamReward: v, localReward: 0, turns: rows,
    });
  }
  const trainRewards = trajectories.filter((t) => t.phase === 'train').map((t) => t.teamReward);
  return {
    step,
    timingsMs: { rollout: 10 + step, update: 5, total: 15 + step },
    metrics: [
      { name: 'reward/mean', value: trainRewards.reduce((a, b) => a + b, 0) / Math.max(1, trainRewards.length) },
      ...agents.map((agentId) => ({ name: 'reward/mean', agentId, value: step + agentId.length })),
      ...agents.map((agentId) => ({ name: 'train/kl', policyId: `policy-${agentId}`, value: step / 100 })),
    ],
    groups,
    trajectories,
  };
}
