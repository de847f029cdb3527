/** Hand-computed AT-GRPO advantages, the size-1 and zero-variance rules, filters, and the loop vs vectorised equivalence. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADVANTAGE_EPS, assignAdvantages, computeAdvantages, filterGroups, groupAdvantages, scoreGroups, standardDeviation, stepAdvantages, taskGroupId, treeGroupId, type AdvantageSettings } from './advantages.ts';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test('hand-computed group: rewards [1, 0, 0, 1] → ±0.866 (unbiased std 0.5774)', () => {
  // mean 0.5; unbiased variance = (4 × 0.25) / 3 = 1/3; std = 0.57735.
  const a = groupAdvantages([1, 0, 0, 1]);
  const std = Math.sqrt(1 / 3);
  close(a[0]!, 0.5 / (std + ADVANTAGE_EPS));
  close(a[1]!, -0.5 / (std + ADVANTAGE_EPS));
  close(a[0]!, 0.8660239, 1e-6);
});

test('hand-computed tree branches: rewards [2, -1, 0.5] of one (env, agent, turn)', () => {
  // mean 0.5; deviations 1.5, -1.5, 0; unbiased var = 4.5/2 = 2.25; std 1.5 → A = 1, -1, 0.
  const a = groupAdvantages([2, -1, 0.5]);
  close(a[0]!, 1.5 / (1.5 + ADVANTAGE_EPS));
  close(a[1]!, -1.5 / (1.5 + ADVANTAGE_EPS));
  close(a[2]!, 0);
});

test('the std estimators: [1, 2, 3, 4] has squared deviations 5, so √(5/3) unbiased and √(5/4) population; fewer than two values give 0', () => {
  close(standardDeviation(5, 4, 'unbiased'), Math.sqrt(5 / 3));
  close(standardDeviation(5, 4, 'population'), Math.sqrt(5 / 4));
  assert.equal(standardDeviation(0, 1, 'unbiased'), 0);
  assert.equal(standardDeviation(0, 1, 'population'), 0);
  assert.equal(standardDeviation(0, 0, 'population'), 0);
});

test('a group of one and a zero-variance group give 0', () => {
  assert.deepEqual(groupAdvantages([3.7]), [0]);
  assert.deepEqual(groupAdvantages([0.25, 0.25, 0.25, 0.25]), [0, 0, 0, 0]);
  assert.deepEqual(groupAdvantages([]), []);
});

test('groups are (environment instance, agent, turn): tool and plan at one turn never mix', () => {
  const samples = [
    { groupId: treeGroupId(0, 'tool', 0), reward: 1 },
    { groupId: treeGroupId(0, 'tool', 0), reward: 0 },
    { groupId: treeGroupId(0, 'plan', 0), reward: 5 },
    { groupId: treeGroupId(0, 'plan', 0), reward: 5 },
    { groupId: treeGroupId(1, 'tool', 0), reward: 7 },
  ];
  const { advantages, groups } = computeAdvantages(samples);
  close(advantages[0]!, 0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS));
  close(advantages[1]!, -0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS));
  assert.equal(advantages[2], 0, 'zero variance');
  assert.equal(advantages[3], 0, 'zero variance');
  assert.equal(advantages[4], 0, 'size 1');
  assert.equal(groups.size, 3);
  assert.deepEqual(groups.get('0/plan/0'), { groupId: '0/plan/0', size: 2, mean: 5, std: 0 });
});

test('vectorised advantages equal the per-group reference loop on random data', () => {
  let s = 99;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0), s / 4294967296);
  for (let trial = 0; trial < 50; trial++) {
    const samples = Array.from({ length: 1 + Math.floor(rnd() * 200) }, () => {
      const g = Math.floor(rnd() * 20);
      // Some groups constant on purpose, rewards on a coarse grid so ties happen.
      const reward = g % 5 === 0 ? 1 : Math.round(rnd() * 4) / 2;
      return { groupId: `g${g}`, reward };
    });
    const { advantages } = computeAdvantages(samples);
    const byGroup = new Map<string, number[]>();
    samples.forEach((x, i) => byGroup.set(x.groupId, [...(byGroup.get(x.groupId) ?? []), i]));
    for (const idx of byGroup.values()) {
      const ref = groupAdvantages(idx.map((i) => samples[i]!.reward));
      idx.forEach((i, k) => close(advantages[i]!, ref[k]!, 1e-12));
    }
  }
});

test('non-finite rewards are refused, naming the sample and group', () => {
  assert.throws(() => computeAdvantages([{ groupId: 'a', reward: 1 }, { groupId: 'b', reward: Number.NaN }]), /sample 1 \(group b\) has a non-finite reward NaN/);
});

test('filters drop zero-variance groups and the lowest-mean fraction', () => {
  const { groups } = computeAdvantages([
    { groupId: 'a', reward: 1 },
    { groupId: 'a', reward: 1 },
    { groupId: 'b', reward: 0 },
    { groupId: 'b', reward: 1 },
    { groupId: 'c', reward: 2 },
    { groupId: 'c', reward: 4 },
    { groupId: 'd', reward: 9 },
  ]);
  assert.deepEqual([...filterGroups(groups, { dropZeroVariance: true, dropLowestMeanFraction: 0 })].sort(), ['b', 'c']);
  assert.deepEqual([...filterGroups(groups, { dropZeroVariance: false, dropLowestMeanFraction: 0.5 })].sort(), ['c', 'd']);
  assert.deepEqual([...filterGroups(groups, { dropZeroVariance: true, dropLowestMeanFraction: 0.5 })].sort(), ['c']);
});

test('GRPO baseline: one member per trajectory, grouped by task; a long trajectory does not weigh more', () => {
  const traj = (task: number, ret: number, acts: number) => ({ samples: Array.from({ length: acts }, () => ({ groupId: taskGroupId(task), score: ret, advantage: Number.NaN })) });
  // Task 0: returns 1 (three acts) and 0 (one act): mean 0.5, unbiased std sqrt(0.5).
  const ts = [traj(0, 1, 3), traj(0, 0, 1), traj(1, 2, 2), traj(1, 2, 4)];
  const groups = assignAdvantages(ts, 'trajectory', 'std');
  assert.deepEqual(groups.get('task/0'), { groupId: 'task/0', size: 2, mean: 0.5, std: Math.sqrt(0.5) });
  const a = 0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS);
  for (const s of ts[0]!.samples) assert.ok(Math.abs(s.advantage - a) < 1e-12);
  for (const s of ts[1]!.samples) assert.ok(Math.abs(s.advantage + a) < 1e-12);
  // Task 1: equal returns, zero variance, advantage 0.
  for (const t of ts.slice(2)) for (const s of t.samples) assert.equal(s.advantage, 0);
  // Per sample (AT-GRPO's unit) the same rewards would weigh the 3-act trajectory three times.
  const perSample = assignAdvantages([traj(0, 1, 3), traj(0, 0, 1)], 'sample', 'std');
  assert.equal(perSample.get('task/0')!.mean, 0.75);
  assert.throws(() => assignAdvantages([{ samples: [{ groupId: 'task/0', score: 1, advantage: 0 }, { groupId: 'task/0', score: 2, advantage: 0 }] }], 'trajectory', 'std'), /different groups or scores/);
});

test("advantageNorm 'none' (Dr. GRPO): A = r − mean, so a group's weight is its reward gap, not 1", () => {
  const samples = [
    { groupId: 'near', reward: 1.0 },
    { groupId: 'near', reward: 1.01 },
    { groupId: 'far', reward: 0 },
    { groupId: 'far', reward: 2 },
    { groupId: 'flat', reward: 3 },
    { groupId: 'flat', reward: 3 },
  ];
  const byStd = computeAdvantages(samples, 'std').advantages;
  const raw = computeAdvantages(samples, 'none').advantages;
  // With std, both groups get ±0.7071 whatever their gap.
  assert.ok(Math.abs(Math.abs(byStd[0]!) - Math.abs(byStd[2]!)) < 1e-3);
  assert.deepEqual(
    [...raw].map((x) => Math.round(x * 1e6) / 1e6),
    [-0.005, 0.005, -1, 1, 0, 0],
  );
  // The tree path passes the choice through.
  const t = { samples: [{ groupId: 'g', score: 0, advantage: NaN }, { groupId: 'g', score: 4, advantage: NaN }] };
  assignAdvantages([t], 'sample', 'none');
  assert.deepEqual(t.samples.map((s) => s.advantage), [-2, 2]);
});

const keepAll = { dropZeroVariance: false, dropLowestMeanFraction: 0 };
const settings = (name: AdvantageSettings['name'], advantageNorm: AdvantageSettings['advantageNorm'], filters = keepAll, invalidAdvantage: AdvantageSettings['invalidAdvantage'] = null): AdvantageSettings => ({ name, advantageNorm, invalidAdvantage, filters });

test('stepAdvantages: GRPO groups per trajectory, AT-GRPO per sample (hand-computed)', () => {
  // One task, two trajectories: return 1 over three acts, return 0 over one act.
  const ts = [
    { samples: [1, 1, 1].map((score) => ({ groupId: taskGroupId(0), score })) },
    { samples: [{ groupId: taskGroupId(0), score: 0 }] },
  ];
  // Per trajectory: members 1 and 0, mean 0.5, unbiased std sqrt(0.5); A = ±0.5 / (sqrt(0.5) + ε).
  const grpo = stepAdvantages(ts, settings('grpo', 'std'));
  const a = 0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS);
  assert.deepEqual(grpo.groups.get('task/0'), { groupId: 'task/0', size: 2, mean: 0.5, std: Math.sqrt(0.5) });
  [a, a, a, -a].forEach((x, i) => close(grpo.advantages[i]!, x, 1e-12));
  // Per sample the three-act trajectory would count three times: mean 0.75, four members.
  const perSample = stepAdvantages(ts, settings('at-grpo', 'std'));
  assert.deepEqual(perSample.groups.get('task/0'), { groupId: 'task/0', size: 4, mean: 0.75, std: 0.5 });
  [0.25, 0.25, 0.25, -0.75].forEach((x, i) => close(perSample.advantages[i]!, x / (0.5 + ADVANTAGE_EPS), 1e-12));
});

test("stepAdvantages: the algorithm's advantageNorm reaches both groupings", () => {
  const tree = [
    { samples: [{ groupId: treeGroupId(0, 'tool', 0), score: 0 }, { groupId: treeGroupId(0, 'tool', 0), score: 4 }] },
  ];
  assert.deepEqual([...stepAdvantages(tree, settings('at-grpo', 'none')).advantages], [-2, 2]);
  close(stepAdvantages(tree, settings('at-grpo', 'std')).advantages[1]!, 2 / (Math.sqrt(8) + ADVANTAGE_EPS), 1e-12);
  const tasks = [{ samples: [{ groupId: taskGroupId(3), score: 1 }] }, { samples: [{ groupId: taskGroupId(3), score: 1.5 }, { groupId: taskGroupId(3), score: 1.5 }] }];
  assert.deepEqual([...stepAdvantages(tasks, settings('grpo', 'none')).advantages], [-0.25, 0.25, 0.25]);
});

test("stepAdvantages: the algorithm's filters pick the trained groups; empty trajectories keep the order", () => {
  const ts = [
    { samples: [{ groupId: 'flat', score: 1 }, { groupId: 'flat', score: 1 }] },
    { samples: [] },
    { samples: [{ groupId: 'spread', score: 0 }, { groupId: 'spread', score: 1 }] },
  ];
  const r = stepAdvantages(ts, settings('at-grpo', 'none', { dropZeroVariance: true, dropLowestMeanFraction: 0 }));
  assert.deepEqual([...r.trained], ['spread']);
  assert.deepEqual([...r.advantages], [0, 0, -0.5, 0.5]);
  assert.deepEqual([...stepAdvantages(ts, settings('at-grpo', 'none')).trained].sort(), ['flat', 'spread']);
  // Per trajectory, an empty trajectory is no member and takes no slot.
  const g = scoreGroups([{ samples: [{ groupId: 't', score: 2 }] }, { samples: [] }, { samples: [{ groupId: 't', score: 0 }] }], 'trajectory', 'none');
  assert.deepEqual([...g.advantages], [1, -1]);
  assert.equal(g.groups.get('t')!.size, 2);
});

test('invalid acts set apart: the baseline is over the valid branches, each invalid one gets invalidAdvantage (hand-computed)', () => {
  // A "must block" group of tic-tac-toe: the block draws (0), a miss loses (-1), two forfeits (-2).
  const g = treeGroupId(0, 'x', 1);
  const branches = [
    { groupId: g, score: 0 },
    { groupId: g, score: -1 },
    { groupId: g, score: -2, invalid: true },
    { groupId: g, score: -2, invalid: true },
  ];
  // In the group (the paper): mean -1.25, so the losing move gains (+0.25 before scaling).
  assert.ok(stepAdvantages([{ samples: branches }], settings('at-grpo', 'none')).advantages[1]! > 0);
  // Apart: valid mean -0.5 → +0.5, -0.5; the forfeits get -1 whatever the valid rewards.
  const none = stepAdvantages([{ samples: branches }], settings('at-grpo', 'none', keepAll, -1));
  assert.deepEqual([...none.advantages], [0.5, -0.5, -1, -1]);
  // std: the valid pair's unbiased std is sqrt(0.5), so ±0.5 / (sqrt(0.5) + ε) = ±0.7071.
  const std = stepAdvantages([{ samples: branches }], settings('at-grpo', 'std', keepAll, -1));
  close(std.advantages[0]!, 0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS), 1e-12);
  close(std.advantages[1]!, -0.5 / (Math.sqrt(0.5) + ADVANTAGE_EPS), 1e-12);
  assert.deepEqual([...std.advantages.slice(2)], [-1, -1]);
  // The group's statistics stay those of all its rewards (what the store shows).
  assert.deepEqual(std.groups.get(g), { groupId: g, size: 4, mean: -1.25, std: Math.sqrt(2.75 / 3) });
  // One valid branch (nothing to compare it with) gets 0; a group of forfeits only gets invalidAdvantage.
  const lone = stepAdvantages([{ samples: [{ groupId: 'a', score: 1 }, { groupId: 'a', score: -2, invalid: true }, { groupId: 'b', score: -2, invalid: true }, { groupId: 'b', score: -2, invalid: true }] }], settings('at-grpo', 'std', keepAll, -0.5));
  assert.deepEqual([...lone.advantages], [0, -0.5, -0.5, -0.5]);
});

test('invalid acts set apart under GRPO: a trajectory with an invalid act is an invalid member', () => {
  const t = (scores: number[], invalidAt = -1) => ({ samples: scores.map((score, i) => ({ groupId: taskGroupId(0), score, invalid: i === invalidAt })) });
  // Returns 1, 0 (valid) and -2 (forfeited at its second act): the valid pair is compared alone.
  const r = stepAdvantages([t([1, 1]), t([0]), t([-2, -2], 1)], settings('grpo', 'none', keepAll, -1));
  assert.deepEqual([...r.advantages], [0.5, 0.5, -0.5, -1, -1]);
  assert.equal(r.groups.get(taskGroupId(0))!.size, 3);
});
