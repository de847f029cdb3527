/** GAE on hand-computed turns (λ = 0 is TD(0), λ = 1 Monte Carlo), turn rewards, per-batch normalisation, explained variance, the clipped value loss. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { clippedValueLoss, explainedVariance, gae, normalizeAdvantages, trajectoryGae, turnRewards } from './gae.ts';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);
const closeAll = (a: ArrayLike<number>, b: readonly number[], tol = 1e-9) => {
  assert.equal(a.length, b.length);
  for (let i = 0; i < b.length; i++) close(a[i]!, b[i]!, tol);
};

test('GAE by hand: rewards [0, 0, 1], values [0.5, 0.2, 0.8], γ 0.9, λ 0.5', () => {
  // δ2 = 1 − 0.8 = 0.2;  δ1 = 0 + 0.9·0.8 − 0.2 = 0.52;  δ0 = 0 + 0.9·0.2 − 0.5 = −0.32
  // A2 = 0.2;  A1 = 0.52 + 0.45·0.2 = 0.61;  A0 = −0.32 + 0.45·0.61 = −0.0455
  const g = gae([0, 0, 1], [0.5, 0.2, 0.8], 0.9, 0.5);
  closeAll(g.advantages, [-0.0455, 0.61, 0.2]);
  closeAll(g.returns, [0.4545, 0.81, 1.0]);
});

test('λ = 0 is TD(0): A_t = r_t + γ V(s_{t+1}) − V(s_t)', () => {
  const r = [1, -0.5, 2];
  const v = [0.3, 0.7, -0.1];
  const g = gae(r, v, 0.8, 0);
  closeAll(g.advantages, [1 + 0.8 * 0.7 - 0.3, -0.5 + 0.8 * -0.1 - 0.7, 2 - -0.1]);
});

test('λ = 1 is Monte Carlo: A_t = Σ γ^k r_{t+k} − V(s_t), returns the discounted returns', () => {
  const r = [1, -0.5, 2];
  const v = [0.3, 0.7, -0.1];
  const g = gae(r, v, 0.8, 1);
  const mc = [1 + 0.8 * -0.5 + 0.64 * 2, -0.5 + 0.8 * 2, 2];
  closeAll(g.returns, mc);
  closeAll(g.advantages, mc.map((x, i) => x - v[i]!));
  // γ = 1, λ = 1, V = 0: every turn's advantage is the sum of the rewards from it on.
  closeAll(gae([0, 0, 1], [0, 0, 0], 1, 1).advantages, [1, 1, 1]);
});

test('the episode ends after the last turn: its value is not bootstrapped', () => {
  closeAll(gae([0], [5], 1, 0.95).advantages, [-5]);
  assert.throws(() => gae([0, 1], [0], 1, 1), /2 rewards but 1 values/);
});

test("turn rewards: a partner's team reward reaches each agent at its latest act, local rewards stay with the actor", () => {
  const s = (agent: string, team: number, local: number) => ({ agent, kept: true, teamReward: team, reward: 2 * team + local });
  // α = 2. a acts (team 0, local 0.1), b acts scoring 1 team point, a acts (team 0), b acts (team 3).
  const r = turnRewards([s('a', 0, 0.1), s('b', 1, 0), s('a', 0, 0), s('b', 3, 0.5)], 2);
  // a's first act gets b's 2·1 after it; a's second gets b's 2·3; b's acts keep their own.
  closeAll(r, [0.1 + 2, 2, 6, 6.5]);
  assert.throws(() => turnRewards([{ agent: 'a', kept: false, teamReward: 0, reward: 0 }], 1), /not kept/);
});

test('trajectoryGae runs GAE over each agent\'s turns separately, in sample order', () => {
  const s = (agent: string, local: number) => ({ agent, kept: true, teamReward: 0, reward: local });
  const t1 = { samples: [s('x', 0), s('o', 0), s('x', 1), s('o', -1)] };
  const t2 = { samples: [s('x', 2)] };
  const values = [0.5, 0, 0.25, 0.5, 1];
  const g = trajectoryGae([t1, t2], values, { gamma: 1, gaeLambda: 1, teamRewardWeight: 1 });
  // x: rewards [0, 1], values [0.5, 0.25] → A = [1 − 0.5, 1 − 0.25]; o: rewards [0, −1], values [0, 0.5] → [−1, −1.5]; t2: 2 − 1.
  closeAll(g.advantages, [0.5, -1, 0.75, -1.5, 1]);
  closeAll(g.returns, [1, -1, 1, -1, 2]);
});

test('advantages are normalised within each batch (policy), to mean 0 and std 1', () => {
  const a = Float64Array.from([1, 2, 3, 10, 10, 7]);
  const n = normalizeAdvantages(a, (i) => (i < 3 ? 'p' : 'q'));
  const std = Math.sqrt(2 / 3);
  closeAll(n.slice(0, 3), [-1 / std, 0, 1 / std], 1e-5);
  // q: mean 9, population std √2.
  closeAll(n.slice(3), [1 / Math.SQRT2, 1 / Math.SQRT2, -2 / Math.SQRT2], 1e-5);
  closeAll(normalizeAdvantages(Float64Array.from([4, 4]), () => 'p'), [0, 0]);
  closeAll(normalizeAdvantages(Float64Array.from([4]), () => 'p'), [0]);
});

test('explained variance: 1 for a perfect critic, 0 for the mean, negative for a worse one, NaN without variance', () => {
  const R = [1, 2, 3, 4];
  close(explainedVariance(R, R), 1);
  close(explainedVariance([2.5, 2.5, 2.5, 2.5], R), 0);
  // V = R + 0.5: the error is constant, so all variance is explained.
  close(explainedVariance(R.map((x) => x + 0.5), R), 1);
  // Var(R) = 1.25; R − V = [1, 0, −1, 0] for V = [0, 2, 4, 4] → Var = 0.5 → 1 − 0.4.
  close(explainedVariance([0, 2, 4, 4], R), 0.6);
  close(explainedVariance([4, 3, 2, 1], R), 1 - 5 / 1.25);
  assert.ok(Number.isNaN(explainedVariance([1, 2], [3, 3])));
});

test('clipped value loss: the clipped term takes over (and stops the gradient) only past the clip range', () => {
  // Sample 0: V moved 0.5 from V_old toward R (inside nothing: clip 0.2) — V_clip = 0.2, farther from R = 1: the clipped term wins, gradient 0.
  // Sample 1: V moved 0.1 (inside the range): V_clip = V, the unclipped term, gradient (V − R)/n.
  // Sample 2: V moved 0.5 away from R: V_clip is closer to R, the unclipped (larger) term wins.
  const v = [0.5, 0.1, -0.5];
  const vOld = [0, 0, 0];
  const R = [1, 1, 1];
  const r = clippedValueLoss(v, vOld, R, 0.2);
  const terms = [(0.2 - 1) ** 2, (0.1 - 1) ** 2, (-0.5 - 1) ** 2];
  close(r.loss, (0.5 * terms.reduce((a, b) => a + b)) / 3);
  closeAll(r.grad, [0, (0.1 - 1) / 3, (-0.5 - 1) / 3]);
  close(r.clipFrac, 1 / 3);
  // A clip range past every move: plain ½ mean squared error.
  const open = clippedValueLoss(v, vOld, R, 1000);
  close(open.loss, (0.5 * (0.25 + 0.81 + 2.25)) / 3);
  close(open.clipFrac, 0);
});
