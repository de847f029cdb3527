/** Scored cooperative games (Hanabi): validation reports the self-play score, the score with the scripted partner, and the scripted team's. */
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
