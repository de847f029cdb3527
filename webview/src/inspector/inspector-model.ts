/**
 * What the inspector shows, derived from a `trajectory/get` detail: per kept turn, the K branches it
 * was chosen among (the kept one plus its siblings) with their ranks and group statistics. Pure.
 *
 * Siblings are the other samples of the same AT-GRPO group: under tree sampling the other branches
 * of this trajectory's (turn, agent); under the GRPO baseline the same turn of the other rollouts of
 * the task, which live in other trajectories (those can be opened).
 */
import type { TrajectoryDetail, TurnRecord, TurnWithSiblings } from '../../../server/protocol/trajectory.ts';

export interface BranchView {
  readonly row: TurnRecord;
  /** Whether this is the branch carried forward on this trajectory. */
  readonly isKept: boolean;
  /** Set when the sample belongs to another trajectory (another rollout of the task). */
  readonly otherTrajectoryId?: number;
  /** 1 for the highest combined reward within the group (ties share a rank). */
  readonly rank: number;
}

export interface TurnView {
  /** Stable across renders: `${turn}/${agentId}`. */
  readonly key: string;
  readonly turn: TurnWithSiblings;
  /** The kept branch and its siblings: this trajectory's branches by index, then other rollouts'. */
  readonly branches: readonly BranchView[];
  /** Index in `branches` of the kept one. */
  readonly keptIndex: number;
  readonly rewardMean: number;
  /** Unbiased standard deviation (0 for one sample), as the advantage normalisation uses. */
  readonly rewardStd: number;
}

export function buildTurnViews(detail: TrajectoryDetail): TurnView[] {
  const self = detail.trajectory.id;
  return detail.turns.map((turn) => {
    const rows: TurnRecord[] = [turn, ...turn.siblings.filter((s) => s.id !== turn.id)];
    rows.sort((a, b) => {
      const oa = a.trajectoryId === self ? 0 : 1;
      const ob = b.trajectoryId === self ? 0 : 1;
      return oa - ob || a.trajectoryId - b.trajectoryId || a.branch - b.branch;
    });
    const rewards = rows.map((r) => r.reward);
    const sorted = [...rewards].sort((a, b) => b - a);
    const branches: BranchView[] = rows.map((row) => ({
      row,
      isKept: row.id === turn.id,
      rank: sorted.indexOf(row.reward) + 1,
      ...(row.trajectoryId !== self ? { otherTrajectoryId: row.trajectoryId } : {}),
    }));
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const std = rewards.length < 2 ? 0 : Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / (rewards.length - 1));
    return { key: `${turn.turn}/${turn.agentId}`, turn, branches, keptIndex: branches.findIndex((b) => b.isKept), rewardMean: mean, rewardStd: std };
  });
}

/** A reward or advantage for display: signed, three decimals, '–' when absent. */
export function formatSigned(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  const s = Math.abs(v) >= 1000 ? v.toExponential(2) : v.toFixed(3);
  return v > 0 ? `+${s}` : s;
}

/** The probability of a log-prob, as a short percentage. */
export function formatProbability(logprob: number): string {
  const p = Math.exp(Math.min(0, logprob));
  return p >= 0.01 ? `${(p * 100).toFixed(1)}%` : `${(p * 100).toExponential(1)}%`;
}
