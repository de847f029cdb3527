/**
 * An environment with some of its agents played by its own solver: the policy meets a scripted
 * partner (Hanabi's convention bot) in a cooperative game. The scripted agents leave `agents`, so
 * a rollout asks the policies for the others only; after each of their acts (and at the start)
 * the scripted agents whose turn comes act with `solution(agent)` until a policy agent is due or
 * the game ends.
 *
 * An act's `teamReward` includes what the scripted acts after it scored, so a trajectory's team
 * return is the whole team's but for scripted acts before the policy's first (Hanabi scores
 * nothing there: no card is known playable yet); read a game's result from `score`.
 * `localReward`, `parseError` and `info` are the policy agent's own.
 * A scripted act that fails to parse is a bug in the solver and throws.
 */
import { checkActor, checkAgent, roundReward, type AgentStats, type AgentTurnResult, type Environment } from './environment.ts';
import { WrappedEnvironment } from './wrapped-environment.ts';

export class ScriptedSeats extends WrappedEnvironment implements Environment {
  readonly #env: Environment;
  readonly #scripted: ReadonlySet<string>;
  readonly #agents: readonly string[];

  /** `scripted`: the agents the solver plays; at least one agent must be left to the policy. */
  constructor(env: Environment, scripted: readonly string[], started = false) {
    super(env);
    for (const a of scripted) checkAgent(env, a);
    this.#env = env;
    this.#scripted = new Set(scripted);
    this.#agents = env.agents.filter((a) => !this.#scripted.has(a));
    if (this.#agents.length === 0) throw new Error(`${env.name}: every agent is scripted; leave one to the policy`);
    if (!started) this.#playScripted();
  }

  /** The policy agents (the scripted ones left out). */
  override get agents(): readonly string[] {
    return this.#agents;
  }
  /** The policy agents' counters. */
  override get stats(): Readonly<Record<string, Readonly<AgentStats>>> {
    const all = this.#env.stats;
    return Object.fromEntries(this.#agents.map((a) => [a, all[a]!]));
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    return this.#env.observe(agent);
  }

  act(agent: string, text: string): AgentTurnResult {
    checkActor(this, agent);
    const r = this.#env.act(agent, text);
    const team = r.teamReward + this.#playScripted();
    return { ...r, teamReward: roundReward(team), done: this.#env.done, success: this.#env.success };
  }

  /** Plays the scripted agents due now; returns their team rewards' sum. */
  #playScripted(): number {
    let team = 0;
    while (!this.#env.done && this.#scripted.has(this.#env.currentAgent())) {
      const agent = this.#env.currentAgent();
      const r = this.#env.act(agent, this.#env.solution(agent));
      if (r.parseError !== null) throw new Error(`${this.#env.name} seed ${this.#env.seed}: the scripted ${agent}'s move did not parse: ${r.parseError}`);
      team += r.teamReward;
    }
    return team;
  }

  clone(): ScriptedSeats {
    return new ScriptedSeats(this.#env.clone(), [...this.#scripted], true);
  }

  solution(agent: string): string {
    checkAgent(this, agent);
    return this.#env.solution(agent);
  }
}
