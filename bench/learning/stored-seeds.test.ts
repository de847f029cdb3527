import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseExperimentConfig } from '../../server/protocol/experiment-config.ts';
import { configDigest, storedSeedProblems } from './stored-seeds.ts';

const path = join(fileURLToPath(new URL('../..', import.meta.url)), 'configs', 'sokoban', 'L2-lora.json');
const config = parseExperimentConfig(JSON.parse(readFileSync(path, 'utf8')), path);

test('the digest ignores name, description, $schema and seed, and follows every setting that trains', () => {
  const d = configDigest(config, path);
  assert.equal(configDigest({ ...config, name: 'other', description: 'other', seed: 7 }, path), d);
  assert.notEqual(configDigest({ ...config, warmStart: { ...config.warmStart, steps: config.warmStart.steps * 2 } }, path), d);
  assert.notEqual(configDigest({ ...config, optimizer: { ...config.optimizer, lr: config.optimizer.lr / 2 } }, path), d);
  assert.notEqual(configDigest({ ...config, env: { ...config.env, options: { ...config.env.options, stuckMoves: 16 } } }, path), d);
});

test('stored seeds count only when their digest, or without one their warm-start keys, match the config now', async () => {
  const d = configDigest(config, path);
  const keysAt = async (seed: number) => ({ base: `key-${seed}` });
  assert.deepEqual(await storedSeedProblems([{ seed: 1, configDigest: d }, { seed: 2, warmStart: { base: 'key-2' } }], d, keysAt), []);
  const problems = await storedSeedProblems(
    [
      { seed: 1, configDigest: '0123456789abcdef' },
      { seed: 2, warmStart: { base: 'key-of-400-steps' } },
      { seed: 3 },
      { seed: 4, configDigest: d, warmStart: { base: 'ignored-when-the-digest-matches' } },
    ],
    d,
    keysAt,
  );
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.match(problems[0]!, /^seed 1 trained under another config/);
  assert.match(problems[1]!, /^seed 2 started RL from another warm start/);
  assert.match(problems[2]!, /^seed 3 records neither/);
});
