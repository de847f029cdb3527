/**
 * The rollout engine with a real (untrained) policy on real environments: the tree records K
 * branches per (turn, agent) with exactly one kept — the best-scoring one, lowest index on ties —
 * and continues from that branch's stepped state; independent rollouts keep every act and score
 * it by its trajectory's return.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEnvironment } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import { Engine } from '../runtime/engine.ts';
import { assignAdvantages } from './advantages.ts';
import { rollout, type RolloutContext } from './rollout.ts';

const config = parseModelConfig({ vocabSize: defaultTokenizer.vocabSize, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64 });
let engine: Engine;
let ctx: RolloutContext;
before(async () => {
  engine = await Engine.start({ log: () => {} });
  const policy = await Policy.create(engine, { id: 'p', config, weights: initParameters(config, 3, { std: 0.5 }), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false });
  ctx = { tokenizer: defaultTokenizer, route: () => ({ policyId: 'p', policy }) };
});
after(async () => {
  await engine.close();
});

const make = (i: number) => createEnvironment('plan-path', trainSeed(i), { size: 4, maxTurns: 2 });
const opts = { branches: 3, teamRewardWeight: 1, temperature: 1.5, topP: 1, topK: 0, maxNewTokens: 6, seed: 11 };

test('tree sampling: K branches per (instance, agent, turn), one kept, the best, ties to the lowest index', async () => {
  const r = await rollout([make(1), make(2)], ctx, { ...opts, mode: 'tree' });
  const groups = new Map<string, typeof r.samples>();
  for (const s of r.samples) groups.set(s.groupId, [...(groups.get(s.groupId) ?? []), s]);
  assert.ok(groups.size >= 4, 'two tasks × two agents × at least one turn');
  for (const [id, g] of groups) {
    assert.equal(g.length, 3, `group ${id} has K samples`);
    assert.deepEqual(g.map((s) => s.branch), [0, 1, 2]);
    const kept = g.filter((s) => s.kept);
    assert.equal(kept.length, 1, `group ${id}: exactly one kept`);
    const best = Math.max(...g.map((s) => s.reward));
    assert.equal(kept[0]!.branch, g.findIndex((s) => s.reward === best), `group ${id}: the first best branch is kept`);
    assert.equal(id, `${g[0]!.envInstance}/${g[0]!.agent}/${g[0]!.turn}`);
    for (const s of g) assert.equal(s.reward, s.teamReward + s.localReward);
  }
  // The trajectory's returns are those of its kept path.
  for (const t of r.trajectories) {
    const kept = t.samples.filter((s) => s.kept);
    assert.equal(t.teamReturn, kept.reduce((a, s) => a + s.teamReward, 0));
  }
});

test('tree sampling continues from the kept branch: the next prompt is the kept branch state', async () => {
  const env = make(5);
  const r = await rollout([env], ctx, { ...opts, mode: 'tree' });
  const t = r.trajectories[0]!;
  // Replay the kept responses on a fresh copy of the task: every kept prompt must match.
  const replay = make(5);
  for (const s of t.samples.filter((x) => x.kept)) {
    assert.equal(replay.observe(s.agent), s.prompt, `prompt of ${s.agent} at turn ${s.turn}`);
    replay.act(s.agent, s.response);
  }
  assert.equal(replay.done, true);
  assert.equal(replay.success, t.success);
});

test('independent rollouts: K copies per task, one branch per act, one group per task, scored by return', async () => {
  const r = await rollout([make(1), make(2)], ctx, { ...opts, mode: 'independent' });
  assert.equal(r.trajectories.length, 6);
  for (const t of r.trajectories) {
    const ret = t.samples.reduce((a, s) => a + s.reward, 0);
    for (const s of t.samples) {
      assert.equal(s.kept, true);
      assert.equal(s.branch, 0);
      assert.equal(s.groupId, `task/${t.envInstance}`, 'the paper groups a task\'s K trajectories, not (task, agent, turn)');
      assert.ok(Math.abs(s.score - ret) < 1e-12);
    }
  }
  // One member per trajectory: each task's group has K = 3 members, whatever the trajectories' lengths.
  const groups = assignAdvantages(r.trajectories, 'trajectory', 'std');
  assert.deepEqual([...groups.keys()].sort(), ['task/0', 'task/1']);
  for (const g of groups.values()) assert.equal(g.size, 3);
  for (const t of r.trajectories) {
    const g = groups.get(`task/${t.envInstance}`)!;
    const ret = t.samples[0]!.score;
    const want = g.std > 0 ? (ret - g.mean) / (g.std + 1e-6) : 0;
    for (const s of t.samples) assert.ok(Math.abs(s.advantage - want) < 1e-9);
  }
});

test('rollouts are reproducible from their seed', async () => {
  const a = await rollout([make(7)], ctx, { ...opts, mode: 'tree' });
  const b = await rollout([make(7)], ctx, { ...opts, mode: 'tree' });
  assert.deepEqual(a.samples.map((s) => s.response), b.samples.map((s) => s.response));
});
