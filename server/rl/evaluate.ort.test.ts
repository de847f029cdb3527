/** Validation on held-out seeds, and tic-tac-toe's games against scripted opponents. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createEnvironment } from '../envs/environments.ts';
import { validationSeed } from '../envs/seed-ranges.ts';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import { Engine } from '../runtime/engine.ts';
import { evaluate } from './evaluate.ts';
import type { RolloutContext } from './rollout.ts';

const config = parseModelConfig({ vocabSize: defaultTokenizer.vocabSize, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64 });
let engine: Engine;
let ctx: RolloutContext;
before(async () => {
  engine = await Engine.start({ log: () => {} });
  const policy = await Policy.create(engine, { id: 'p', config, weights: initParameters(config, 5, { std: 0.5 }), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false });
  ctx = { tokenizer: defaultTokenizer, route: () => ({ policyId: 'p', policy }) };
});
after(async () => {
  await engine.close();
});

test('validation plays the held-out seeds and summarises success and rewards per agent', async () => {
  const make = (seed: number) => createEnvironment('plan-path', seed, { size: 4, maxTurns: 2 });
  const v = await evaluate(make, ctx, { episodes: 5, seedOffset: 3, temperature: 0, maxNewTokens: 6, teamRewardWeight: 1 });
  assert.deepEqual(v.seeds, [3, 4, 5, 6, 7].map(validationSeed));
  assert.equal(v.trajectories.length, 5);
  assert.deepEqual(Object.keys(v.perAgent).sort(), ['plan', 'tool']);
  assert.ok(v.success >= 0 && v.success <= 1);
  const again = await evaluate(make, ctx, { episodes: 5, seedOffset: 3, temperature: 0, maxNewTokens: 6, teamRewardWeight: 1 });
  assert.equal(again.meanReward, v.meanReward, 'greedy validation is deterministic');
  assert.equal(v.opponents, undefined);
});

test('tic-tac-toe validation also plays random and minimax opponents from both sides', async () => {
  const make = (seed: number) => createEnvironment('tic-tac-toe', seed, {});
  const v = await evaluate(make, ctx, { episodes: 4, seedOffset: 0, temperature: 0, maxNewTokens: 3, teamRewardWeight: 1 });
  assert.ok(v.opponents);
  for (const m of [v.opponents.random, v.opponents.minimax]) {
    assert.equal(m.games, 4);
    assert.equal(m.wins + m.draws + m.losses, 4);
  }
  assert.equal(v.opponents.minimax.wins, 0, 'nobody beats minimax');
});
