/**
 * Validation: the policies play held-out environments (seeds from the validation range, which
 * training never draws) with one branch per act, greedy by default, and we report task success
 * and rewards per agent. The same seeds at every evaluation make the numbers comparable.
 */
import type { Environment } from '../envs/environment.ts';
import type { EnvironmentMeasures, GreedyAnswer, GreedyAnswers } from '../envs/environment-measures.ts';
import { measuresOf } from '../envs/environments.ts';
import { validationSeed } from '../envs/seed-ranges.ts';
import type { AlgorithmConfig } from '../protocol/experiment-config.ts';
import type { ResolvedExperiment } from './experiment.ts';
import { evaluateWithPartners, type PartnerEvaluation } from './partner-evaluation.ts';
import { rollout, type RolloutContext, type RolloutOptions, type Trajectory } from './rollout.ts';

/** Validation index where the test seeds start (defined with the seed ranges). */
export { TEST_SEED_OFFSET } from '../envs/seed-ranges.ts';

export interface EvaluationOptions extends Readonly<Pick<AlgorithmConfig, 'maxNewTokens' | 'teamRewardWeight'>> {
  readonly episodes: number;
  /** First validation index (seed = validationSeed(offset + i)). */
  readonly seedOffset: number;
  /** Sampling temperature; 0 is greedy. */
  readonly temperature: number;
  /** Environments per generate batch (bounds memory for large evaluations). */
  readonly batch?: number;
}

/**
 * How an experiment validates (and tests): `episodes` from validation index `seedOffset` (0 for
 * validation, TEST_SEED_OFFSET for the test) at `training.validationTemperature`, with the
 * algorithm's response length and reward weighting.
 */
export function evaluationOptions(exp: Pick<ResolvedExperiment, 'algorithm' | 'training'>, episodes: number, seedOffset: number): EvaluationOptions {
  return { episodes, seedOffset, temperature: exp.training.validationTemperature, maxNewTokens: exp.algorithm.maxNewTokens, teamRewardWeight: exp.algorithm.teamRewardWeight };
}

/**
 * One branch per act (no tree to choose from), full distribution at `temperature` (0: greedy):
 * how validation plays, and the curriculum's screening of candidate tasks.
 */
export function playOptions(o: Pick<AlgorithmConfig, 'maxNewTokens' | 'teamRewardWeight'>, temperature: number, seed: number): RolloutOptions {
  return { mode: 'tree', branches: 1, teamRewardWeight: o.teamRewardWeight, temperature, topP: 1, topK: 0, maxNewTokens: o.maxNewTokens, seed };
}

export interface AgentEvaluation {
  /** Mean per-episode sum of this agent's α·team + local rewards. */
  readonly meanReward: number;
  /** Mean per-episode sum of this agent's local rewards. */
  readonly meanLocalReward: number;
  /** Fraction of this agent's acts whose text did not parse. */
  readonly parseFailureRate: number;
  readonly acts: number;
}

/** Success and rewards, and the measures the environment contributes (environment-measures.ts). */
export interface Evaluation extends EnvironmentMeasures {
  /** Fraction of episodes solved (0..1). */
  readonly success: number;
  /** Mean per-episode team return + local returns (α-weighted), all agents. */
  readonly meanReward: number;
  readonly meanTeamReturn: number;
  readonly perAgent: Record<string, AgentEvaluation>;
  readonly episodes: number;
  readonly seeds: readonly number[];
  readonly trajectories: Trajectory[];
  /** Scored games (Hanabi): the mean final score in self-play. */
  readonly score?: number;
  /** Scored games: the policy with the scripted partner, and the scripted team alone (`partner-evaluation.ts`). */
  readonly partners?: PartnerEvaluation;
}

/** A text policy that answers with the routed policy's greedy response. */
export function greedyTextPolicy(ctx: RolloutContext, maxNewTokens: number): GreedyAnswer {
  const tok = ctx.tokenizer;
  return async (observation, game) => {
    const { policy } = ctx.route(game.agent);
    const g = await policy.generate([tok.encodePrompt([{ role: 'user', text: observation }])], {
      maxNewTokens,
      sampling: { temperature: 0, topP: 1, topK: 0 },
      seed: 0,
      stopTokens: tok.stopTokenIds,
      padToken: tok.padTokenId,
    });
    return tok.decode(g.tokens[0]!, { specials: 'skip' });
  };
}

/** `greedyTextPolicy` for many positions at once: one batched generation per agent. */
export function greedyBatchTextPolicy(ctx: RolloutContext, maxNewTokens: number): GreedyAnswers {
  const tok = ctx.tokenizer;
  return async (queries) => {
    const answers = new Array<string>(queries.length).fill('');
    for (const agent of new Set(queries.map((q) => q.agent))) {
      const rows = queries.flatMap((q, i) => (q.agent === agent ? [i] : []));
      const g = await ctx.route(agent).policy.generate(
        rows.map((i) => tok.encodePrompt([{ role: 'user', text: queries[i]!.observation }])),
        { maxNewTokens, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 0, stopTokens: tok.stopTokenIds, padToken: tok.padTokenId },
      );
      rows.forEach((row, j) => (answers[row] = tok.decode(g.tokens[j]!, { specials: 'skip' })));
    }
    return answers;
  };
}

export async function evaluate(make: (seed: number) => Environment, ctx: RolloutContext, o: EvaluationOptions): Promise<Evaluation> {
  if (!(Number.isInteger(o.episodes) && o.episodes > 0)) throw new Error(`evaluate: episodes must be a positive integer, got ${o.episodes}`);
  const seeds = Array.from({ length: o.episodes }, (_, i) => validationSeed(o.seedOffset + i));
  const batch = o.batch ?? 64;
  const trajectories: Trajectory[] = [];
  for (let start = 0; start < seeds.length; start += batch) {
    const envs = seeds.slice(start, start + batch).map(make);
    const r = await rollout(envs, ctx, playOptions(o, o.temperature, 0x5eed ^ start));
    r.trajectories.forEach((t) => trajectories.push({ ...t, envInstance: t.envInstance + start }));
  }
  const perAgent: Record<string, { reward: number; local: number; fails: number; acts: number }> = {};
  let success = 0;
  let reward = 0;
  let team = 0;
  for (const t of trajectories) {
    if (t.success) success++;
    team += t.teamReturn;
    for (const s of t.samples) {
      const a = (perAgent[s.agent] ??= { reward: 0, local: 0, fails: 0, acts: 0 });
      a.reward += s.reward;
      a.local += s.localReward;
      a.acts++;
      if (s.parseError !== null) a.fails++;
      reward += s.reward;
    }
  }
  const n = trajectories.length;
  const measure = measuresOf(make(seeds[0]!).name);
  const measures = measure ? await measure({ answer: greedyTextPolicy(ctx, o.maxNewTokens), answerAll: greedyBatchTextPolicy(ctx, o.maxNewTokens) }, { games: o.episodes, seed: seeds[0]! }) : {};
  const scores = trajectories.flatMap((t) => (t.score === undefined ? [] : [t.score]));
  const scored = scores.length > 0 ? { score: scores.reduce((a, b) => a + b, 0) / scores.length, partners: await evaluateWithPartners(make, seeds, ctx, o) } : {};
  return {
    ...measures,
    ...scored,
    success: success / n,
    meanReward: reward / n,
    meanTeamReturn: team / n,
    perAgent: Object.fromEntries(
      Object.entries(perAgent).map(([agent, a]) => [agent, { meanReward: a.reward / n, meanLocalReward: a.local / n, parseFailureRate: a.acts ? a.fails / a.acts : 0, acts: a.acts }]),
    ),
    episodes: n,
    seeds,
    trajectories,
  };
}
