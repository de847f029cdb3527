/**
 * AT-GRPO grouping and advantages ("Stronger Together", arXiv 2510.11062, §3; DESIGN §3).
 *
 * A group is every sample that answered the same question from the same state: with tree
 * sampling, the K branches of one (environment instance, agent, turn). The GRPO baseline groups
 * the K independent trajectories of one task by their returns (one member per trajectory). Within a group
 *     A = (r − mean) / (std_unbiased + 1e-6),
 * and a group of one sample, or whose rewards are all equal, gives A = 0 (nothing to compare;
 * the unbiased std of one sample is undefined, and dividing a zero spread by 1e-6 would only
 * amplify float noise). A is broadcast to every response token of its sample.
 */
export const ADVANTAGE_EPS = 1e-6;

/**
 * `std`: A = (r − mean) / (std + ε), the paper's GRPO. `none`: A = r − mean (Dr. GRPO, Liu et al.
 * 2025; verl's norm_adv_by_std_in_grpo = false). Dividing by the spread gives a group whose
 * rewards differ by a step penalty the same weight as one whose branches succeed and fail; without
 * it a group's weight is its reward gap.
 */
export type AdvantageNorm = 'std' | 'none';

export interface Scored {
  readonly groupId: string;
  readonly reward: number;
}

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
  const varU = rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (n - 1);
  const std = Math.sqrt(varU);
  // Exact equality, not a tolerance: rewards are sums of the same few constants, and a group whose
  // rewards differ only by float rounding is a zero-variance group.
  if (rewards.every((r) => Math.abs(r - rewards[0]!) <= 1e-12 * Math.max(1, Math.abs(mean)))) return rewards.map(() => 0);
  return rewards.map((r) => (r - mean) / (std + ADVANTAGE_EPS));
}

/**
 * Advantages for many samples at once, in sample order, with per-group statistics: one pass to
 * accumulate sums per group, one to normalise. Equal to `groupAdvantages` applied group by group
 * (tested), in O(n).
 */
export function computeAdvantages(samples: readonly Scored[], norm: AdvantageNorm = 'std'): { advantages: Float64Array; groups: Map<string, GroupStats> } {
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
  const std = count.map((n, g) => (n > 1 ? Math.sqrt(sq[g]! / (n - 1)) : 0));
  const advantages = new Float64Array(samples.length);
  samples.forEach((s, i) => {
    const g = gid[i]!;
    advantages[i] = count[g]! < 2 || allEqual[g] ? 0 : norm === 'std' ? (s.reward - mean[g]!) / (std[g]! + ADVANTAGE_EPS) : s.reward - mean[g]!;
  });
  const groups = new Map<string, GroupStats>();
  for (const [groupId, g] of index) groups.set(groupId, { groupId, size: count[g]!, mean: mean[g]!, std: std[g]! });
  return { advantages, groups };
}

export interface GroupFilter {
  /** Drop groups whose rewards are all equal (their advantages are 0 and only dilute the token mean). */
  readonly dropZeroVariance: boolean;
  /** Drop this fraction of groups with the lowest mean reward (0 = keep all). */
  readonly dropLowestMeanFraction: number;
}

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

/** What `assignAdvantages` needs of a trajectory: its samples, each with a group and a score. */
export interface AdvantageTarget {
  readonly samples: ReadonlyArray<{ readonly groupId: string; readonly score: number; advantage: number }>;
}

/**
 * Computes and writes every sample's advantage. `sample`: each sample is a member of its group
 * (AT-GRPO's K branches of one (task, agent, turn)). `trajectory`: each trajectory is one member,
 * scored once by its return (all its samples share the score and the group), so a trajectory with
 * more turns does not weigh more in its group's mean and spread; its advantage goes to every
 * sample. Returns the groups' statistics (sizes count members).
 */
export function assignAdvantages(trajectories: readonly AdvantageTarget[], unit: 'sample' | 'trajectory', norm: AdvantageNorm = 'std'): Map<string, GroupStats> {
  if (unit === 'sample') {
    const samples = trajectories.flatMap((t) => t.samples);
    const { advantages, groups } = computeAdvantages(samples.map((s) => ({ groupId: s.groupId, reward: s.score })), norm);
    samples.forEach((s, i) => (s.advantage = advantages[i]!));
    return groups;
  }
  const members = trajectories.filter((t) => t.samples.length > 0);
  for (const t of members) {
    const { groupId, score } = t.samples[0]!;
    if (t.samples.some((s) => s.groupId !== groupId || s.score !== score)) throw new Error(`assignAdvantages: a trajectory of group ${groupId} has samples with different groups or scores`);
  }
  const { advantages, groups } = computeAdvantages(members.map((t) => ({ groupId: t.samples[0]!.groupId, reward: t.samples[0]!.score })), norm);
  members.forEach((t, i) => {
    for (const s of t.samples) s.advantage = advantages[i]!;
  });
  return groups;
}
