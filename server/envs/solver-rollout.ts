/**
 * Runs an environment's own solver through the public workflow: every agent answers with
 * `solution(agent)` and the text goes through `act`, exactly as a policy's would. Used for
 *  - supervised warm-start demonstrations (the (prompt, response) pairs below),
 *  - reporting the optimum (the return and turn count a perfect team achieves),
 *  - tests (the solver's text must parse and solve).
 * It works on a clone, so the environment passed in is left as it was. In an environment whose
 * agents write code (math), the solver's programs run through `run` (the sandbox) like a policy's.
 */
import type { Environment } from './environment.ts';
import { actWithPrograms, type ProgramRunner } from './program-acts.ts';

export interface Demonstration {
  readonly agent: string;
  readonly turn: number;
  /** The prompt the agent saw. */
  readonly observation: string;
  /** The solver's response. */
  readonly response: string;
  readonly teamReward: number;
  readonly localReward: number;
}

export interface SolverRollout {
  readonly success: boolean;
  /** Rounds used. */
  readonly turns: number;
  /** Sum of team rewards over the episode. */
  readonly teamReturn: number;
  /** Sum of local rewards per agent. */
  readonly localReturns: Readonly<Record<string, number>>;
  readonly demonstrations: readonly Demonstration[];
}

/** Plays the solver from the environment's current state to the end, on a clone. */
export async function rolloutSolver(env: Environment, run?: ProgramRunner): Promise<SolverRollout> {
  const sim = env.clone();
  const demonstrations: Demonstration[] = [];
  const localReturns: Record<string, number> = Object.fromEntries(sim.agents.map((a) => [a, 0]));
  let teamReturn = 0;
  // Bounded: every act either ends the episode or advances the agent/turn counters toward maxTurns.
  while (!sim.done) {
    const agent = sim.currentAgent();
    const turn = sim.turn;
    const observation = sim.observe(agent);
    const response = sim.solution(agent);
    const { result: r } = await actWithPrograms(sim, agent, response, run);
    if (r.parseError !== null) throw new Error(`${env.name} seed ${env.seed}: solver text '${response}' did not parse: ${r.parseError}`);
    teamReturn += r.teamReward;
    localReturns[agent] = (localReturns[agent] ?? 0) + r.localReward;
    demonstrations.push({ agent, turn, observation, response, teamReward: r.teamReward, localReward: r.localReward });
  }
  return { success: sim.success, turns: sim.turn, teamReturn, localReturns, demonstrations };
}
