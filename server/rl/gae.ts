/**
 * PPO with a learned value function (`algorithm.name: "ppo"`; Schulman et al. 2017, GAE: Schulman
 * et al. 2016): the pure parts. The value head itself is `value-head.ts`.
 *
 * Turns. Each agent's acts in one trajectory are its time steps t = 0..T−1, in acting order; the
 * state s_t is the prompt the agent answered. The episode ends after its last act (V(s_T) = 0):
 * environments run to `done`, so there is no cut-off to bootstrap.
 * Rewards. r_t = α·team + local of the agent's own act t, plus α·team of every act of the other
 * agents after it and before its next act (or the episode's end): a shared team reward earned by
 * a partner's act reaches every agent at its latest act before it (MAPPO's shared reward, in turns).
 * In a zero-sum game (tic-tac-toe, team reward 0) an agent's rewards are its own acts' only.
 * GAE: δ_t = r_t + γ·V(s_{t+1}) − V(s_t), A_t = δ_t + γλ·A_{t+1}, returns R_t = A_t + V(s_t).
 * λ = 0 is TD(0) (A_t = δ_t); λ = 1 is Monte Carlo (A_t = Σ γ^k r_{t+k} − V(s_t)).
 * Advantages are then normalised over each policy's update batch (`advantageNorm` std; none
 * leaves them as they are); the returns, the value head's targets, are not.
 */
import { ADVANTAGE_EPS, standardDeviation, type StdEstimator } from './advantages.ts';

/** PPO's batch whitening std (see `StdEstimator`: population, as OpenAI Baselines' ppo2). */
const BATCH_STD: StdEstimator = 'population';

/** GAE of one agent's turns (rewards r_0..r_{T−1}, values V(s_0)..V(s_{T−1}), terminal after the last). */
export function gae(rewards: readonly number[], values: readonly number[], gamma: number, lambda: number): { advantages: Float64Array; returns: Float64Array } {
  const n = rewards.length;
  if (values.length !== n) throw new Error(`gae: ${n} rewards but ${values.length} values`);
  const advantages = new Float64Array(n);
  const returns = new Float64Array(n);
  let next = 0; // A_{t+1}
  for (let t = n - 1; t >= 0; t--) {
    const vNext = t + 1 < n ? values[t + 1]! : 0;
    const delta = rewards[t]! + gamma * vNext - values[t]!;
    next = delta + gamma * lambda * next;
    advantages[t] = next;
    returns[t] = next + values[t]!;
  }
  return { advantages, returns };
}

/** What the per-turn rewards need of a sample. */
export interface TurnSample {
  readonly agent: string;
  readonly kept: boolean;
  /** α·team + local of the act. */
  readonly reward: number;
  readonly teamReward: number;
}

/**
 * Each sample's turn reward r_t (see the module comment), in sample order, for one trajectory of
 * independent rollouts (every sample kept: PPO samples one response per act).
 */
export function turnRewards(samples: readonly TurnSample[], teamRewardWeight: number): Float64Array {
  const out = new Float64Array(samples.length);
  const last = new Map<string, number>(); // agent → index of its latest act so far
  samples.forEach((s, i) => {
    if (!s.kept) throw new Error(`turnRewards: sample ${i} (agent ${s.agent}) is a branch that was not kept; PPO needs one response per act (independent rollouts)`);
    out[i] = s.reward;
    for (const [agent, j] of last) if (agent !== s.agent) out[j] = out[j]! + teamRewardWeight * s.teamReward;
    last.set(s.agent, i);
  });
  return out;
}

/** The GAE settings of `algorithm`. */
export interface GaeSettings {
  readonly gamma: number;
  readonly gaeLambda: number;
  readonly teamRewardWeight: number;
}

/**
 * GAE advantages and returns of every sample, in the order of `trajectories.flatMap((t) => t.samples)`,
 * given each sample's value V(s) in the same order. Not normalised.
 */
export function trajectoryGae(trajectories: ReadonlyArray<{ readonly samples: readonly TurnSample[] }>, values: ArrayLike<number>, o: GaeSettings): { advantages: Float64Array; returns: Float64Array } {
  const total = trajectories.reduce((n, t) => n + t.samples.length, 0);
  if (values.length !== total) throw new Error(`trajectoryGae: ${total} samples but ${values.length} values`);
  const advantages = new Float64Array(total);
  const returns = new Float64Array(total);
  let base = 0;
  for (const t of trajectories) {
    const r = turnRewards(t.samples, o.teamRewardWeight);
    const byAgent = new Map<string, number[]>();
    t.samples.forEach((s, i) => {
      const list = byAgent.get(s.agent);
      if (list) list.push(i);
      else byAgent.set(s.agent, [i]);
    });
    for (const idx of byAgent.values()) {
      const g = gae(
        idx.map((i) => r[i]!),
        idx.map((i) => values[base + i]!),
        o.gamma,
        o.gaeLambda,
      );
      idx.forEach((i, k) => {
        advantages[base + i] = g.advantages[k]!;
        returns[base + i] = g.returns[k]!;
      });
    }
    base += t.samples.length;
  }
  return { advantages, returns };
}

/**
 * (A − mean) / (std + ε) within each batch (`batchOf(i)`: each policy's update batch), with the
 * population std (`BATCH_STD`); a batch of one, or of equal advantages, gives 0.
 */
export function normalizeAdvantages(advantages: Float64Array, batchOf: (i: number) => string): Float64Array {
  const members = new Map<string, number[]>();
  advantages.forEach((_, i) => {
    const k = batchOf(i);
    const list = members.get(k);
    if (list) list.push(i);
    else members.set(k, [i]);
  });
  const out = new Float64Array(advantages.length);
  for (const idx of members.values()) {
    const mean = idx.reduce((s, i) => s + advantages[i]!, 0) / idx.length;
    const std = standardDeviation(idx.reduce((s, i) => s + (advantages[i]! - mean) ** 2, 0), idx.length, BATCH_STD);
    for (const i of idx) out[i] = idx.length < 2 || std <= 1e-12 * Math.max(1, Math.abs(mean)) ? 0 : (advantages[i]! - mean) / (std + ADVANTAGE_EPS);
  }
  return out;
}

/**
 * Explained variance 1 − Var(R − V) / Var(R) of value predictions V against returns R: 1 is a
 * perfect critic, 0 one no better than the mean return, below 0 worse. NaN when the returns do
 * not vary (nothing to explain).
 */
export function explainedVariance(values: ArrayLike<number>, returns: ArrayLike<number>): number {
  const n = returns.length;
  if (values.length !== n) throw new Error(`explainedVariance: ${values.length} values but ${n} returns`);
  if (n === 0) return Number.NaN;
  const variance = (f: (i: number) => number) => {
    let m = 0;
    for (let i = 0; i < n; i++) m += f(i);
    m /= n;
    let v = 0;
    for (let i = 0; i < n; i++) v += (f(i) - m) ** 2;
    return v / n;
  };
  const varR = variance((i) => returns[i]!);
  if (varR <= 1e-12) return Number.NaN;
  return 1 - variance((i) => returns[i]! - values[i]!) / varR;
}

/**
 * PPO's clipped value loss (the baselines / verl recipe): with V_clip = V_old + clip(V − V_old, −c, c),
 *   L = ½ · mean(max((V − R)², (V_clip − R)²)),
 * so a prediction gains nothing from moving more than c from the value it had when the batch was
 * sampled. Returns the loss, dL/dV per sample, and the fraction of samples where the clipped term
 * is the larger (their gradient is 0).
 */
export function clippedValueLoss(v: ArrayLike<number>, vOld: ArrayLike<number>, returns: ArrayLike<number>, clip: number): { loss: number; grad: Float64Array; clipFrac: number } {
  const n = v.length;
  if (vOld.length !== n || returns.length !== n) throw new Error(`clippedValueLoss: ${n} values, ${vOld.length} old values, ${returns.length} returns`);
  const grad = new Float64Array(n);
  if (n === 0) return { loss: Number.NaN, grad, clipFrac: Number.NaN };
  let loss = 0;
  let clipped = 0;
  for (let i = 0; i < n; i++) {
    const d = v[i]! - vOld[i]!;
    const vClip = vOld[i]! + Math.min(Math.max(d, -clip), clip);
    const unclippedSq = (v[i]! - returns[i]!) ** 2;
    const clippedSq = (vClip - returns[i]!) ** 2;
    if (clippedSq > unclippedSq) {
      // Only possible where the clamp is active, so the clipped term is flat in V.
      loss += clippedSq;
      clipped++;
    } else {
      loss += unclippedSq;
      grad[i] = (v[i]! - returns[i]!) / n;
    }
  }
  return { loss: (0.5 * loss) / n, grad, clipFrac: clipped / n };
}
