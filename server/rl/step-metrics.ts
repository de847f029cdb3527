/**
 * Per-step metrics, per agent and per policy, in the store's long format (name, value, agent,
 * policy). Names are slash-separated by area so the dashboard can group them.
 */
import type { Metric } from '../protocol/trajectory.ts';
import type { UpdateStats } from '../models/policy.ts';
import type { Evaluation } from './evaluate.ts';
import type { RolloutResult } from './rollout.ts';

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const std = (xs: readonly number[]) => {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
};

export function rolloutMetrics(r: RolloutResult): Metric[] {
  const out: Metric[] = [];
  const n = r.trajectories.length;
  out.push({ name: 'train/success', value: n ? r.trajectories.filter((t) => t.success).length / n : 0 });
  out.push({ name: 'train/team_return', value: mean(r.trajectories.map((t) => t.teamReturn)) });
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

export function validationMetrics(v: Evaluation): Metric[] {
  const out: Metric[] = [
    { name: 'val/success', value: v.success },
    { name: 'val/reward', value: v.meanReward },
    { name: 'val/team_return', value: v.meanTeamReturn },
  ];
  if (v.opponents) {
    for (const [name, m] of Object.entries(v.opponents)) {
      out.push({ name: `val/vs_${name}/win_rate`, value: m.winRate }, { name: `val/vs_${name}/non_loss_rate`, value: m.nonLossRate });
    }
  }
  for (const [agentId, a] of Object.entries(v.perAgent)) {
    out.push({ name: 'val/reward', value: a.meanReward, agentId }, { name: 'val/parse_fail_rate', value: a.parseFailureRate, agentId });
  }
  return out;
}
