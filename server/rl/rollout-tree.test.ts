/**
 * Tree sampling with a scripted policy whose K branches really differ (branch k answers its own
 * move), so the kept branch and the last branch lead to different states: a rollout that carried
 * the last branch instead of the kept one (the reference's desync, PettingLLMs' trainer) fails the
 * replay below. Also: α ≠ 1 in r = α·team + local, the sampling seed of each policy, and a
 * non-finite reward named by environment, agent and turn.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentTurnResult, Environment } from '../envs/environment.ts';
import { createEnvironment } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import type { GenerateResult } from '../runtime/generate.ts';
import { NonFiniteRewardError, rollout, samplingSeed, stringHash, type RolloutContext, type RolloutPolicy } from './rollout.ts';

const tok = defaultTokenizer;
const K = 4;

/** Branch k of every prompt answers `answers[k]`; records the seeds it was called with. */
function scripted(answers: readonly string[], seeds: number[] = []): RolloutPolicy {
  return {
    generate: async (prompts, o): Promise<GenerateResult> => {
      seeds.push(o.seed);
      const tokens = prompts.map((_, j) => tok.encodeResponse(answers[j % answers.length]!).slice(0, -1)); // without the stop token
      return { tokens, logprobs: tokens.map((t) => new Float32Array(t.length).fill(-1)), finish: tokens.map(() => 'stop' as const), prefillMs: 0, decodeMs: 0 };
    },
  };
}

const ctxOf = (policy: RolloutPolicy, ids: Record<string, string> = { tool: 'tool-p', plan: 'plan-p', solo: 'solo-p' }): RolloutContext => ({
  tokenizer: tok,
  route: (agent) => ({ policyId: ids[agent]!, policy }),
});
const make = (i: number) => createEnvironment('plan-path', trainSeed(i), { size: 5, maxTurns: 3 });
const opts = { mode: 'tree' as const, branches: K, teamRewardWeight: 1, temperature: 1, topP: 1, topK: 0, maxNewTokens: 8, seed: 3 };

test('the tree carries the kept branch, not the last one: replaying kept answers reproduces every prompt', async () => {
  // Branch k commits one step in its own direction; 'L' (the last) is rarely the best.
  const answers = ['D', 'R', 'U', 'L'];
  const r = await rollout(Array.from({ length: 12 }, (_, i) => make(i)), ctxOf(scripted(answers)), opts);
  let divergent = 0;
  for (const t of r.trajectories) {
    const replay = make(t.envInstance);
    const kept = t.samples.filter((s) => s.kept);
    for (const s of kept) {
      assert.equal(replay.observe(s.agent), s.prompt, `task ${t.envInstance}: prompt of ${s.agent} at turn ${s.turn}`);
      if (s.agent === 'plan' && s.branch !== K - 1) {
        // Would the last branch have left a different state? Then carrying it would show here.
        const last = replay.clone();
        last.act(s.agent, answers[K - 1]!);
        const mine = replay.clone();
        mine.act(s.agent, s.response);
        if (!mine.done && !last.done && mine.observe('tool') !== last.observe('tool')) divergent++;
      }
      replay.act(s.agent, s.response);
    }
    assert.equal(replay.done, true, `task ${t.envInstance} ends where the rollout ended`);
    assert.equal(replay.success, t.success);
  }
  assert.ok(divergent >= 3, `the test must be able to fail: ${divergent} kept plan branches left a state the last branch would not`);
});

test('alpha != 1: each branch is scored alpha*team + local and the best of those is kept', async () => {
  const alpha = 0.25;
  const r = await rollout(Array.from({ length: 8 }, (_, i) => make(100 + i)), ctxOf(scripted(['DD', 'RR', 'UUU', 'X'])), { ...opts, teamRewardWeight: alpha });
  let teamScored = 0;
  const groups = new Map<string, typeof r.samples>();
  for (const s of r.samples) groups.set(s.groupId, [...(groups.get(s.groupId) ?? []), s]);
  for (const g of groups.values()) {
    for (const s of g) {
      assert.equal(s.reward, alpha * s.teamReward + s.localReward);
      assert.equal(s.score, s.reward);
      if (s.teamReward !== 0) teamScored++;
    }
    const best = Math.max(...g.map((s) => s.reward));
    assert.equal(g.find((s) => s.kept)!.branch, g.findIndex((s) => s.reward === best));
  }
  assert.ok(teamScored > 0, 'some branches carry a team reward, so alpha changes their score');
  for (const t of r.trajectories) assert.equal(t.teamReturn, t.samples.filter((s) => s.kept).reduce((a, s) => a + s.teamReward, 0));
});

test('a branch is invalid when its text does not parse or the rules refuse it (a taken cell), not otherwise', async () => {
  // Branches answer 5, 5, x, 1: x keeps 5 (ties keep the lowest index), so o's 5s take a taken cell.
  const r = await rollout([createEnvironment('tic-tac-toe', trainSeed(0))], ctxOf(scripted(['5', '5', 'x', '1']), { x: 'p', o: 'p' }), opts);
  const group = (agent: string) => r.samples.filter((s) => s.agent === agent && s.turn === 0).map((s) => s.invalid);
  assert.deepEqual(group('x'), [false, false, true, false]);
  assert.deepEqual(group('o'), [true, true, true, false]);
});

test('each policy samples from its own stream: the seed hashes the whole policy id', async () => {
  assert.notEqual(stringHash('agent-a'), stringHash('agent-b'));
  assert.notEqual(samplingSeed(7, 0, 'agent-a'), samplingSeed(7, 0, 'agent-b'), 'same length and first character, different streams');
  assert.notEqual(samplingSeed(7, 0, 'ab'), samplingSeed(7, 0, 'ba'));
  const seeds: number[] = [];
  await rollout([make(1)], ctxOf(scripted(['D', 'R', 'U', 'L'], seeds), { tool: 'agent-a', plan: 'agent-b' }), { ...opts, branches: 2 });
  assert.equal(seeds[0], samplingSeed(3, 0, 'agent-a'));
  assert.equal(seeds[1], samplingSeed(3, 1, 'agent-b'));
});

/** Plan-Path whose plan agent's local reward is NaN from its second round on. */
function nanEnvironment(inner: Environment): Environment {
  return {
    get name() { return inner.name; },
    get seed() { return inner.seed; },
    get agents() { return inner.agents; },
    get maxTurns() { return inner.maxTurns; },
    get turn() { return inner.turn; },
    get done() { return inner.done; },
    get success() { return inner.success; },
    get optimalMoves() { return inner.optimalMoves; },
    get stats() { return inner.stats; },
    currentAgent: () => inner.currentAgent(),
    observe: (agent) => inner.observe(agent),
    act: (agent, text): AgentTurnResult => {
      const turn = inner.turn;
      const r = inner.act(agent, text);
      return agent === 'plan' && turn >= 1 ? { ...r, localReward: Number.NaN } : r;
    },
    clone: () => nanEnvironment(inner.clone()),
    solution: (agent) => inner.solution(agent),
  };
}

test('a NaN reward is a named error (environment, seed, agent, turn), not a TypeError', async () => {
  const env = nanEnvironment(createEnvironment('plan-path', trainSeed(3), { size: 5, maxTurns: 3 }));
  await assert.rejects(rollout([env], ctxOf(scripted(['U', 'U', 'U', 'U'])), opts), (e: unknown) => {
    assert.ok(e instanceof NonFiniteRewardError, String(e));
    assert.match(e.message, new RegExp(`environment plan-path \\(seed ${trainSeed(3)}\\) gave agent 'plan' a non-finite reward at turn 1, branch 0: team -?[0-9.]+, local NaN`));
    return true;
  });
});

test('distinctBranches asks generate for first tokens without replacement per tree node, and only in tree mode', async () => {
  const calls: Array<{ rows: number; distinctFirst: number | undefined }> = [];
  const policy: RolloutPolicy = {
    generate: async (prompts, o) => {
      calls.push({ rows: prompts.length, distinctFirst: o.distinctFirst });
      return scripted(['D', 'R', 'U', 'L']).generate(prompts, o);
    },
  };
  const tasks = () => Array.from({ length: 3 }, (_, i) => make(i));
  await rollout(tasks(), ctxOf(policy), { ...opts, distinctBranches: true });
  assert.ok(calls.length > 0 && calls.every((c) => c.distinctFirst === K && c.rows % K === 0), JSON.stringify(calls));
  calls.length = 0;
  await rollout(tasks(), ctxOf(policy), opts);
  assert.ok(calls.every((c) => c.distinctFirst === undefined), 'off by default');
  calls.length = 0;
  await rollout(tasks(), ctxOf(policy), { ...opts, mode: 'independent', distinctBranches: true });
  assert.ok(calls.every((c) => c.distinctFirst === undefined), 'independent rollouts are not tree nodes');
});
