/**
 * AT-GRPO grouping and advantages ("Stronger Together", arXiv 2510.11062, §3).
 *
 * A group is every sample that answered the same question from the same state: with tree
 * sampling, the K branches of one (environment instance, agent, turn). The GRPO baseline groups
 * the K independent trajectories of one task by their returns (one member per trajectory). Within a group
 *     A = (r − mean) / (std_unbiased + 1e-6)   (why unbiased: `StdEstimator`),
 * and a group of one sample, or whose rewards are all equal, gives A = 0 (nothing to compare;
 * the unbiased std of one sample is undefined, and dividing a zero spread by 1e-6 would only
 * amplify float noise). A is broadcast to every response token of its sample.
 * Departure (opt-in, `algorithm.invalidAdvantage`): invalid acts (unparsed, or refused whole by the
 * rules) are kept out of their group's baseline and get a fixed advantage of their own.
 */
import type { AlgorithmConfig } from '../protocol/experiment-config.ts';

export const ADVANTAGE_EPS = 1e-6;

/**
 * Which standard deviation scales advantages; each algorithm names its own, so the choice is
 * made once and on purpose.
 * - `unbiased` (Bessel's n − 1) for GRPO's groups: the std of a group's rewards in DeepSeekMath's
 *   GRPO (Shao et al. 2024, outcome supervision), as TRL's GRPOTrainer and verl's
 *   `compute_grpo_outcome_advantage` compute it (`torch.std`). A group is the K = 4–8 samples of
 *   one question, where the two estimators differ by √(K/(K−1)): 15% at K = 4.
 * - `population` (n) for PPO's whitening over a policy's update batch, as OpenAI Baselines' ppo2
 *   does it (`advs.std()`, numpy's); verl's and TRL's `masked_whiten` apply Bessel's correction
 *   instead. Over a batch of n turns the two differ by √(n/(n−1)), under 1% from n = 51, so the
 *   choice hardly matters there and `gae.ts` keeps the population std it shipped with.
 */
export type StdEstimator = 'unbiased' | 'population';

/** GRPO's group std (see `StdEstimator`). */
const GROUP_STD: StdEstimator = 'unbiased';

/** The standard deviation of `n` values, from the sum of their squared deviations from their mean; 0 for fewer than two. */
export function standardDeviation(sumSquaredDeviations: number, n: number, estimator: StdEstimator): number {
  return n < 2 ? 0 : Math.sqrt(sumSquaredDeviations / (estimator === 'unbiased' ? n - 1 : n));
}

/**
 * `std`: A = (r − mean) / (std + ε), the paper's GRPO. `none`: A = r − mean (Dr. GRPO, Liu et al.
 * 2025; verl's norm_adv_by_std_in_grpo = false). Dividing by the spread gives a group whose
 * rewards differ by a step penalty the same weight as one whose branches succeed and fail; without
 * it a group's weight is its reward gap.
 */
export type AdvantageNorm = AlgorithmConfig['advantageNorm'];

export interface Scored {
  readonly groupId: string;
  readonly reward: number;
  /** The act was invalid (`Sample.invalid`); matters only when invalid acts are set apart (`InvalidAdvantage`). */
  readonly invalid?: boolean;
}

/**
 * `algorithm.invalidAdvantage`. null: an invalid act is a member of its group like any other (the
 * paper). A number: each group's baseline (mean, and spread under `std`) is taken over its valid
 * members only, and every invalid member gets this advantage. A forfeit's -2 in a group otherwise
 * lifts every legal branch, losing ones included (measured on tic-tac-toe:
 * bench/learning/ttt-signal.ts).
 */
export type InvalidAdvantage = AlgorithmConfig['invalidAdvantage'];

export interface GroupStats {
  readonly groupId: string;
  readonly size: number;
  readonly mean: number;
  /** Unbiased standard deviation (0 for a group of one). */
  readonly std: number;
}

/** Advantages of one group's rewards (the definition, one group at a time). */
export function groupAdvantages(rewards: readonly number[]): number[] {
  const n = rewards.length;
  if (n < 2) return rewards.map(() => 0);
  const mean = rewards.reduce((a, b) => a + b, 0) / n;
  const std = standardDeviation(rewards.reduce((a, r) => a + (r - mean) ** 2, 0), n, GROUP_STD);
  // Equal up to float rounding (1e-12 relative to the mean, at least 1e-12 absolute): rewards are
  // sums of the same few constants, so a group whose rewards differ only by the order they were
  // summed in is a zero-variance group. `computeAdvantages` applies the same test.
  if (rewards.every((r) => Math.abs(r - rewards[0]!) <= 1e-12 * Math.max(1, Math.abs(mean)))) return rewards.map(() => 0);
  return rewards.map((r) => (r - mean) / (std + ADVANTAGE_EPS));
}

/**
 * Advantages for many samples at once, in sample order, with per-group statistics: one pass to
 * accumulate sums per group, one to normalise. Equal to `groupAdvantages` applied group by group
 * (tested), in O(n). With `invalidAdvantage` a number, invalid samples get it and the valid ones
 * are compared among themselves (`groupAdvantages` of the valid rewards); the groups' statistics
 * stay those of all members' rewards.
 */
export function computeAdvantages(samples: readonly Scored[], norm: AdvantageNorm = 'std', invalidAdvantage: InvalidAdvantage = null): { advantages: Float64Array; groups: Map<string, GroupStats> } {
  if (invalidAdvantage !== null) return apartAdvantages(samples, norm, invalidAdvantage);
  const index = new Map<string, number>();
  const count: number[] = [];
  const sum: number[] = [];
  const first: number[] = [];
  const allEqual: boolean[] = [];
  const gid = new Int32Array(samples.length);
  samples.forEach((s, i) => {
    if (!Number.isFinite(s.reward)) throw new Error(`sample ${i} (group ${s.groupId}) has a non-finite reward ${s.reward}`);
    let g = index.get(s.groupId);
    if (g === undefined) {
      g = count.length;
      index.set(s.groupId, g);
      count.push(0);
      sum.push(0);
      first.push(s.reward);
      allEqual.push(true);
    }
    gid[i] = g;
    count[g]!++;
    sum[g]! += s.reward;
  });
  const mean = count.map((n, g) => sum[g]! / n);
  const sq = new Array<number>(count.length).fill(0);
  samples.forEach((s, i) => {
    const g = gid[i]!;
    sq[g]! += (s.reward - mean[g]!) ** 2;
    if (Math.abs(s.reward - first[g]!) > 1e-12 * Math.max(1, Math.abs(mean[g]!))) allEqual[g] = false;
  });
  const std = count.map((n, g) => standardDeviation(sq[g]!, n, GROUP_STD));
  const advantages = new Float64Array(samples.length);
  samples.forEach((s, i) => {
    const g = gid[i]!;
    advantages[i] = count[g]! < 2 || allEqual[g] ? 0 : norm === 'std' ? (s.reward - mean[g]!) / (std[g]! + ADVANTAGE_EPS) : s.reward - mean[g]!;
  });
  const groups = new Map<string, GroupStats>();
  for (const [groupId, g] of index) groups.set(groupId, { groupId, size: count[g]!, mean: mean[g]!, std: std[g]! });
  return { advantages, groups };
}

/**
 * `computeAdvantages` with invalid samples set apart: the valid samples of each group are scored
 * among themselves, every invalid one gets `invalidAdvantage`.
 */
function apartAdvantages(samples: readonly Scored[], norm: AdvantageNorm, invalidAdvantage: number): { advantages: Float64Array; groups: Map<string, GroupStats> } {
  const valid: number[] = [];
  samples.forEach((s, i) => {
    if (!s.invalid) valid.push(i);
  });
  const { groups } = computeAdvantages(samples, norm);
  const scored = computeAdvantages(valid.map((i) => samples[i]!), norm);
  const advantages = new Float64Array(samples.length).fill(invalidAdvantage);
  valid.forEach((i, j) => (advantages[i] = scored.advantages[j]!));
  return { advantages, groups };
}

/** The config's `algorithm.filters`. */
export type GroupFilter = Readonly<AlgorithmConfig['filters']>;

/** The group ids that survive the filters. */
export function filterGroups(groups: ReadonlyMap<string, GroupStats>, f: GroupFilter): Set<string> {
  let kept = [...groups.values()];
  if (f.dropZeroVariance) kept = kept.filter((g) => g.size > 1 && g.std > 0);
  if (f.dropLowestMeanFraction > 0) {
    const sorted = [...kept].sort((a, b) => a.mean - b.mean || (a.groupId < b.groupId ? -1 : 1));
    const drop = Math.floor(sorted.length * f.dropLowestMeanFraction);
    kept = sorted.slice(drop);
  }
  return new Set(kept.map((g) => g.groupId));
}

/** Group id of an AT-GRPO tree group: (environment instance, agent, turn). */
export function treeGroupId(envInstance: number, agent: string, turn: number): string {
  return `${envInstance}/${agent}/${turn}`;
}

/**
 * Group id of a GRPO-baseline group: the task. As in the paper's GRPO (and the reference's
 * no-tree mode, uid = prompt), a task's K independent trajectories form one group, compared by
 * their returns; every act of a trajectory carries that trajectory's advantage.
 */
export function taskGroupId(envInstance: number): string {
  return `task/${envInstance}`;
}

/** What the grouping needs of a trajectory: its samples, each with a group and a score. */
export interface ScoredTrajectory {
  readonly samples: ReadonlyArray<{ readonly groupId: string; readonly score: number; readonly invalid?: boolean }>;
}

/**
 * Who is one member of a group. `sample`: each sample (AT-GRPO's K branches of one (task, agent,
 * turn)). `trajectory`: each trajectory, scored once by its return (all its samples share the
 * score and the group), so a trajectory with more turns does not weigh more in its group's mean
 * and spread (the paper's GRPO); its advantage goes to every one of its samples.
 */
export type GroupingUnit = 'sample' | 'trajectory';

/** The grouping unit of an algorithm: AT-GRPO groups samples (tree groups), GRPO trajectories (PPO's task groups: statistics only, its advantages come from GAE). */
export function groupingUnit(algorithm: AlgorithmConfig['name']): GroupingUnit {
  return algorithm === 'at-grpo' ? 'sample' : 'trajectory';
}

/**
 * Every sample's advantage, in the order of `trajectories.flatMap((t) => t.samples)`, and the
 * groups' statistics (sizes count members). Pure: nothing is written into the trajectories. Per
 * trajectory, a trajectory with an invalid act is an invalid member (for `invalidAdvantage`).
 */
export function scoreGroups(trajectories: readonly ScoredTrajectory[], unit: GroupingUnit, norm: AdvantageNorm, invalidAdvantage: InvalidAdvantage = null): { advantages: Float64Array; groups: Map<string, GroupStats> } {
  if (unit === 'sample') return computeAdvantages(trajectories.flatMap((t) => t.samples).map((s) => ({ groupId: s.groupId, reward: s.score, invalid: s.invalid === true })), norm, invalidAdvantage);
  for (const t of trajectories) {
    const first = t.samples[0];
    if (first && t.samples.some((s) => s.groupId !== first.groupId || s.score !== first.score)) throw new Error(`scoreGroups: a trajectory of group ${first.groupId} has samples with different groups or scores`);
  }
  const members = trajectories.filter((t) => t.samples.length > 0);
  const perMember = computeAdvantages(
    members.map((t) => ({ groupId: t.samples[0]!.groupId, reward: t.samples[0]!.score, invalid: t.samples.some((s) => s.invalid === true) })),
    norm,
    invalidAdvantage,
  );
  const advantages = new Float64Array(trajectories.reduce((n, t) => n + t.samples.length, 0));
  let i = 0;
  let m = 0;
  for (const t of trajectories) {
    if (t.samples.length === 0) continue;
    advantages.fill(perMember.advantages[m++]!, i, i + t.samples.length);
    i += t.samples.length;
  }
  return { advantages, groups: perMember.groups };
}

/** What a training step's advantages depend on: the algorithm (its grouping unit), the scale, invalid acts and the filters. */
export type AdvantageSettings = Readonly<Pick<AlgorithmConfig, 'name' | 'advantageNorm' | 'invalidAdvantage' | 'filters'>>;

/**
 * A training step's advantages, from its rollout's trajectories: grouped as the algorithm groups
 * (`groupingUnit`), scaled by `advantageNorm`, invalid acts set apart or not (`invalidAdvantage`), and the groups the update trains on (`filters`).
 * `advantages` is in the order of `trajectories.flatMap((t) => t.samples)`. Pure.
 */
export function stepAdvantages(trajectories: readonly ScoredTrajectory[], settings: AdvantageSettings): { advantages: Float64Array; groups: Map<string, GroupStats>; trained: Set<string> } {
  const { advantages, groups } = scoreGroups(trajectories, groupingUnit(settings.name), settings.advantageNorm, settings.invalidAdvantage);
  return { advantages, groups, trained: filterGroups(groups, settings.filters) };
}

/** `scoreGroups`, written into each sample's `advantage`; returns the groups' statistics. */
export function assignAdvantages(
  trajectories: ReadonlyArray<{ readonly samples: ReadonlyArray<{ readonly groupId: string; readonly score: number; readonly invalid?: boolean; advantage: number }> }>,
  unit: GroupingUnit,
  norm: AdvantageNorm,
  invalidAdvantage: InvalidAdvantage = null,
): Map<string, GroupStats> {
  const { advantages, groups } = scoreGroups(trajectories, unit, norm, invalidAdvantage);
  trajectories.flatMap((t) => t.samples).forEach((s, i) => (s.advantage = advantages[i]!));
  return groups;
}
