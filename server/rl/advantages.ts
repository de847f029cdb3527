/**
 * AT-GRPO grouping and advantages ("Stronger Together", arXiv 2510.11062, §3; DESIGN §3).
 *
 * A group is every sample that answered the same question from the same state: with tree
 * sampling, the K branches of one (environment instance, agent, turn); with the GRPO baseline,
 * the same agent and turn across the K independent rollouts of one task. Within a group
 *     A = (r − mean) / (std_unbiased + 1e-6),
 * and a group of one sample, or whose rewards are all equal, gives A = 0 (nothing to compare;
 * the unbiased std of one sample is undefined, and dividing a zero spread by 1e-6 would only
 * amplify float noise). A is broadcast to every response token of its sample.
 */
export const ADVANTAGE_EPS = 1e-6;

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
export function computeAdvantages(samples: readonly Scored[]): { advantages: Float64Array; groups: Map<string, GroupStats> } {
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
    advantages[i] = count[g]! < 2 || allEqual[g] ? 0 : (s.reward - mean[g]!) / (std[g]! + ADVANTAGE_EPS);
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
 * Group id of a GRPO-baseline group: the acts of one agent at one turn across the K independent
 * rollouts of a task, each scored by its trajectory's return. (Splitting the task's group by
 * agent and turn keeps each group to one agent's responses, as in the run store and the editor's
 * sibling view; a task's rollouts are still compared only with each other.)
 */
export function taskGroupId(envInstance: number, agent: string, turn: number): string {
  return `task/${envInstance}/${agent}/${turn}`;
}
