/** Validation on held-out seeds, tic-tac-toe's games against scripted opponents, and a scored game's (Hanabi) self-play, bot-partner and bot-team scores. */
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
import { scriptedTeamScore } from './partner-evaluation.ts';
import type { RolloutContext } from './rollout.ts';
import { testMetrics, validationMetrics } from './step-metrics.ts';

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

test('hanabi validation plays self-play, the policy with the bot in the other seat, and the bot team on the same seeds', async () => {
  const make = (seed: number) => createEnvironment('hanabi', seed, { maxTurns: 3 });
  const v = await evaluate(make, ctx, { episodes: 4, seedOffset: 0, temperature: 0, maxNewTokens: 10, teamRewardWeight: 1 });
  assert.equal(v.trajectories.length, 4);
  assert.deepEqual(v.trajectories.map((t) => typeof t.score), Array(4).fill('number'));
  assert.ok(v.score !== undefined && v.partners !== undefined);
  // The bot team's score is its own game on each seed (3 rounds here), whatever the policy does.
  const bot = [0, 1, 2, 3].map((i) => scriptedTeamScore(make(validationSeed(i))));
  assert.equal(v.partners.botTeam, bot.reduce((a, b) => a + b, 0) / 4);
  assert.ok(v.partners.botTeam > 0, 'the bot scores in 3 rounds');
  assert.equal(v.partners.episodes, 4);
  // An untrained policy passes or misplays: its self-play never scores more than the bots do.
  assert.ok(v.score <= v.partners.botTeam);
  const names = (ms: { name: string }[]) => ms.map((m) => m.name).filter((n) => n.includes('score'));
  assert.deepEqual(names(validationMetrics(v)), ['val/score', 'val/with_bot/score', 'val/bot_team/score']);
  assert.deepEqual(names(testMetrics(v)), ['test/score', 'test/with_bot/score', 'test/bot_team/score']);
  // Environments without a score report none.
  const plain = await evaluate((seed) => createEnvironment('plan-path', seed, { size: 4, maxTurns: 1 }), ctx, { episodes: 2, seedOffset: 0, temperature: 0, maxNewTokens: 4, teamRewardWeight: 1 });
  assert.equal(plain.score, undefined);
  assert.equal(plain.partners, undefined);
});
