/**
 * failure-restarts: a failed greedy episode is replayed on a fresh task up to a round drawn per
 * (seed, step, task), and the rollout continues from there — the same state the greedy play
 * reached, mid-episode, with the rounds it has left.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createEnvironment } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { defaultTokenizer as tok } from '../models/tokenizer.ts';
import type { GenerateResult } from '../runtime/generate.ts';
import { restartTask } from './curriculum.ts';
import { rollout, type RolloutPolicy } from './rollout.ts';

/** Always answers 'U' (a loop into the wall on most grids): a deterministic failing team. */
const stubborn: RolloutPolicy = {
  generate: async (prompts): Promise<GenerateResult> => {
    const tokens = prompts.map(() => tok.encodeResponse('U').slice(0, -1));
    return { tokens, logprobs: tokens.map((t) => new Float32Array(t.length)), finish: tokens.map(() => 'stop' as const), prefillMs: 0, decodeMs: 0 };
  },
};
const make = (i: number) => createEnvironment('plan-path', trainSeed(i), { size: 5, maxTurns: 4 });

test('a restarted task is the greedy episode replayed to the start of a drawn round, and rounds differ across steps', async () => {
  const tasks = Array.from({ length: 16 }, (_, i) => make(i));
  const r = await rollout(tasks, { tokenizer: tok, route: () => ({ policyId: 'p', policy: stubborn }) }, { mode: 'tree', branches: 1, teamRewardWeight: 1, temperature: 0, topP: 1, topK: 0, maxNewTokens: 4, seed: 0 });
  const failed = r.trajectories.filter((t) => !t.success);
  assert.ok(failed.length >= 8, `most tasks fail with 'U' only (${failed.length} of 16)`);
  const roundsSeen = new Set<number>();
  for (const t of failed) {
    for (let step = 1; step <= 6; step++) {
      const env = restartTask(make(t.envInstance), t, 7, step);
      assert.equal(env.done, false);
      assert.ok(env.turn < t.turns, 'restarts before the episode ended');
      roundsSeen.add(env.turn);
      // The restarted state is the one the greedy play saw at that round: same prompt, same agent.
      const first = t.samples.find((s) => s.kept && s.turn === env.turn)!;
      assert.equal(env.currentAgent(), first.agent);
      assert.equal(env.observe(first.agent), first.prompt);
      // Pure: the same (seed, step, task) restarts at the same round.
      assert.equal(restartTask(make(t.envInstance), t, 7, step).turn, env.turn);
    }
  }
  assert.deepEqual([...roundsSeen].sort(), [0, 1, 2, 3], 'every round of a 4-round failure is drawn at some step');
});
