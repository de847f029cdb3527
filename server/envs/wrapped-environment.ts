/**
 * The part of an environment wrapper that passes through: identity, turns, ending, score and
 * counters are the wrapped environment's. A wrapper (chat prompts, scripted seats) extends this and
 * writes what it changes: observe, act, clone, solution, and agents or stats where it narrows them.
 */
import type { AgentStats, Environment } from './environment.ts';

export abstract class WrappedEnvironment {
  readonly #env: Environment;

  constructor(env: Environment) {
    this.#env = env;
  }

  /** The wrapped environment. */
  get inner(): Environment {
    return this.#env;
  }
  get name(): string {
    return this.#env.name;
  }
  get seed(): number {
    return this.#env.seed;
  }
  get agents(): readonly string[] {
    return this.#env.agents;
  }
  get maxTurns(): number {
    return this.#env.maxTurns;
  }
  get turn(): number {
    return this.#env.turn;
  }
  get done(): boolean {
    return this.#env.done;
  }
  get success(): boolean {
    return this.#env.success;
  }
  get optimalMoves(): number | null {
    return this.#env.optimalMoves;
  }
  get score(): number | undefined {
    return this.#env.score;
  }
  get stats(): Readonly<Record<string, Readonly<AgentStats>>> {
    return this.#env.stats;
  }

  currentAgent(): string {
    return this.#env.currentAgent();
  }
}
