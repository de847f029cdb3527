/**
 * Scored cooperative games (environments that keep a `score`: Hanabi): besides self-play, the
 * evaluation plays the policy with the environment's scripted player (its `solution`: Hanabi's
 * convention bot) in every other seat, and the scripted team alone on the same seeds, the bar a
 * trained team is measured against. In game g the policy takes seat g mod players, so every seat
 * is played. Both run the validation's greedy play (`playOptions`), batched like validation.
 */
import type { Environment } from '../envs/environment.ts';
import { ScriptedSeats } from '../envs/scripted-seats.ts';
import { playOptions, type EvaluationOptions } from './evaluate.ts';
import { rollout, type RolloutContext } from './rollout.ts';

export interface PartnerEvaluation {
  /** Mean score of the policy in one seat with the scripted player in the others. */
  readonly withBot: number;
  /** Mean score of the scripted player in every seat (no model involved). */
  readonly botTeam: number;
  readonly episodes: number;
}

/** The environment's score once it is over; a scored environment must keep one. */
function finalScore(env: Environment): number {
  if (env.score === undefined) throw new Error(`${env.name} keeps no score`);
  return env.score;
}

/** Plays the scripted team alone on `seed`; returns its score. */
export function scriptedTeamScore(env: Environment): number {
  const sim = env.clone();
  while (!sim.done) {
    const agent = sim.currentAgent();
    sim.act(agent, sim.solution(agent));
  }
  return finalScore(sim);
}

export async function evaluateWithPartners(make: (seed: number) => Environment, seeds: readonly number[], ctx: RolloutContext, o: EvaluationOptions): Promise<PartnerEvaluation> {
  const batch = o.batch ?? 64;
  let withBot = 0;
  let botTeam = 0;
  for (let start = 0; start < seeds.length; start += batch) {
    const envs = seeds.slice(start, start + batch).map((seed, i) => {
      const env = make(seed);
      botTeam += scriptedTeamScore(env);
      const seat = (start + i) % env.agents.length;
      return new ScriptedSeats(env, env.agents.filter((_, k) => k !== seat));
    });
    const r = await rollout(envs, ctx, playOptions(o, o.temperature, 0xb07 ^ start));
    for (const t of r.trajectories) withBot += t.score ?? 0;
  }
  return { withBot: withBot / seeds.length, botTeam: botTeam / seeds.length, episodes: seeds.length };
}
