/**
 * Per-step metrics, per agent and per policy, in the store's long format (name, value, agent,
 * policy). Names are slash-separated by area so the dashboard can group them.
 */
import type { Metric } from '../protocol/trajectory.ts';
import type { UpdateStats } from '../models/policy.ts';
import { standardDeviation } from './advantages.ts';
import type { Evaluation } from './evaluate.ts';
import type { RolloutResult } from './rollout.ts';

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
/**
 * The spread of an agent's rewards and advantages in a step: the unbiased std, GRPO's group
 * estimator, so that `reward/std` reads on the same scale as the std that scaled the advantages.
 */
const std = (xs: readonly number[]) => {
  const m = mean(xs);
  return standardDeviation(xs.reduce((a, x) => a + (x - m) ** 2, 0), xs.length, 'unbiased');
};

export function rolloutMetrics(r: RolloutResult): Metric[] {
  const out: Metric[] = [];
  const n = r.trajectories.length;
  out.push({ name: 'train/success', value: n ? r.trajectories.filter((t) => t.success).length / n : 0 });
  out.push({ name: 'train/team_return', value: mean(r.trajectories.map((t) => t.teamReturn)) });
  const scores = r.trajectories.flatMap((t) => (t.score === undefined ? [] : [t.score]));
  if (scores.length > 0) out.push({ name: 'train/score', value: mean(scores) });
  const agents = [...new Set(r.samples.map((s) => s.agent))].sort();
  for (const agentId of agents) {
    const all = r.samples.filter((s) => s.agent === agentId);
    const kept = all.filter((s) => s.kept);
    const adv = all.map((s) => s.advantage);
    out.push(
      { name: 'reward/mean', value: mean(kept.map((s) => s.reward)), agentId },
      { name: 'reward/std', value: std(all.map((s) => s.reward)), agentId },
      { name: 'reward/team', value: mean(kept.map((s) => s.teamReward)), agentId },
      { name: 'reward/local', value: mean(kept.map((s) => s.localReward)), agentId },
      { name: 'advantage/std', value: std(adv), agentId },
      { name: 'advantage/nonzero_frac', value: adv.length ? adv.filter((a) => a !== 0).length / adv.length : 0, agentId },
      { name: 'response/length', value: mean(all.map((s) => s.responseTokens.length)), agentId },
      { name: 'response/parse_fail_rate', value: all.length ? all.filter((s) => s.parseError !== null).length / all.length : 0, agentId },
      { name: 'response/truncated_rate', value: all.length ? all.filter((s) => s.truncated).length / all.length : 0, agentId },
      { name: 'train/success', value: n ? r.trajectories.filter((t) => t.success).length / n : 0, agentId },
    );
  }
  out.push({ name: 'throughput/generate_tok_s', value: r.inferenceMs > 0 ? (r.generatedTokens / r.inferenceMs) * 1000 : 0 });
  return out;
}

export function updateMetrics(policyId: string, s: UpdateStats, tokens: number): Metric[] {
  const finite = (v: number) => (Number.isFinite(v) ? v : 0);
  return [
    { name: 'loss/policy', value: finite(s.loss), policyId },
    { name: 'kl/approx', value: finite(s.approxKl), policyId },
    { name: 'kl/ref', value: finite(s.klRef), policyId },
    { name: 'clip_frac', value: finite(s.clipFrac), policyId },
    { name: 'entropy', value: finite(s.entropy), policyId },
    { name: 'grad_norm', value: finite(s.gradNorm), policyId },
    { name: 'lr', value: s.lr, policyId },
    { name: 'update/skipped', value: s.skipped ? 1 : 0, policyId },
    { name: 'throughput/train_tok_s', value: s.ms > 0 ? (tokens / s.ms) * 1000 : 0, policyId },
  ];
}

/**
 * How far the rollout sampler is from the fp32 policy PPO trains (they differ with int8/int4
 * rollout weights): `rollout/mismatch_kl` estimates KL(sampler ‖ fp32) per response token with the
 * k3 estimator r − 1 − log r, r = p_fp32/p_sampler on tokens the sampler drew (non-negative,
 * unbiased; Schulman, "Approximating KL divergence", 2020); `rollout/mismatch_max` is the largest
 * |Δ log p|. Both are 0 up to rounding with fp32 rollouts. Arguments: per sample, the sampling
 * log-probs and the fp32 log-probs of the same tokens at the same temperature.
 */
export function mismatchMetrics(policyId: string, sampled: readonly Float32Array[], fp32: readonly Float32Array[]): Metric[] {
  let k3 = 0;
  let max = 0;
  let n = 0;
  sampled.forEach((q, i) => {
    const p = fp32[i]!;
    if (p.length !== q.length) throw new Error(`mismatchMetrics: sample ${i} has ${q.length} sampling log-probs and ${p.length} fp32 ones`);
    for (let j = 0; j < q.length; j++) {
      const d = p[j]! - q[j]!; // log r
      k3 += Math.expm1(d) - d;
      max = Math.max(max, Math.abs(d));
      n++;
    }
  });
  return [
    { name: 'rollout/mismatch_kl', value: n ? k3 / n : 0, policyId },
    { name: 'rollout/mismatch_max', value: max, policyId },
  ];
}

export function validationMetrics(v: Evaluation): Metric[] {
  const out: Metric[] = [
    { name: 'val/success', value: v.success },
    { name: 'val/reward', value: v.meanReward },
    { name: 'val/team_return', value: v.meanTeamReturn },
  ];
  out.push(...opponentMetrics('val', v), ...scoreMetrics('val', v));
  for (const [agentId, a] of Object.entries(v.perAgent)) {
    out.push({ name: 'val/reward', value: a.meanReward, agentId }, { name: 'val/parse_fail_rate', value: a.parseFailureRate, agentId });
  }
  return out;
}

/**
 * `val/best_success`: the best validation success up to and including this step (a running
 * maximum, committed with every validation), so the dashboard shows where the best checkpoint
 * (checkpoints/best.json, what `select: best` tests) was taken: the step where the line last rose.
 */
export function bestMetric(best: { readonly validationSuccess: number }): Metric {
  return { name: 'val/best_success', value: best.validationSuccess };
}

/** The test (held-out seeds apart from validation's), at step 0 and after the last step. */
export function testMetrics(v: Evaluation): Metric[] {
  return [{ name: 'test/success', value: v.success }, { name: 'test/reward', value: v.meanReward }, ...opponentMetrics('test', v), ...scoreMetrics('test', v)];
}

/**
 * A symmetric game's scores against the scripted opponents (tic-tac-toe): `<phase>/vs_<opponent>/
 * win_rate` and `non_loss_rate`, and `<phase>/optimal_move_rate[/x|/o]`, the fraction of every
 * reachable position where the greedy move is perfect play's. Self-play success (no forfeit) says
 * nothing of how well the policy plays; these do.
 */
function opponentMetrics(phase: 'val' | 'test', v: Evaluation): Metric[] {
  return [
    ...Object.entries(v.opponents ?? {}).flatMap(([name, m]) => [
      { name: `${phase}/vs_${name}/win_rate`, value: m.winRate },
      { name: `${phase}/vs_${name}/non_loss_rate`, value: m.nonLossRate },
    ]),
    ...Object.entries(v.positions ?? {}).map(([side, p]) => ({ name: side === 'all' ? `${phase}/optimal_move_rate` : `${phase}/optimal_move_rate/${side}`, value: p.rate })),
  ];
}

/**
 * A scored game's results (Hanabi): `<phase>/score` in self-play, `<phase>/with_bot/score` with
 * the scripted partner in the other seats, `<phase>/bot_team/score` for the scripted team alone on
 * the same seeds (the bar to reach).
 */
function scoreMetrics(phase: 'val' | 'test', v: Evaluation): Metric[] {
  if (v.score === undefined) return [];
  return [
    { name: `${phase}/score`, value: v.score },
    ...(v.partners ? [{ name: `${phase}/with_bot/score`, value: v.partners.withBot }, { name: `${phase}/bot_team/score`, value: v.partners.botTeam }] : []),
  ];
}
