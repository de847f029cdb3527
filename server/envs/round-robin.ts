/**
 * The bookkeeping of environments whose agents act in a fixed order, round after round (the
 * puzzles' tool then planner, math's tool then reasoner, code's coder then tester, and their
 * single-agent variants): whose turn it is, how many rounds have closed, whether the episode is
 * over and won, and each agent's counters. An environment extends `RoundRobinEnvironment` and
 * decides what the end of a round means for its own state (`pass` says when one ended).
 */
import { copyStats, emptyStats, type AgentStats } from './environment.ts';

/** Turn order, round count, outcome and counters; copied whole by `copy` for a clone. */
export class RoundRobin {
  /** Rounds closed so far. */
  turn = 0;
  /** Index into `agents` of the agent to act. */
  next = 0;
  done = false;
  success = false;
  stats: Record<string, AgentStats>;

  constructor(
    readonly agents: readonly string[],
    readonly maxTurns: number,
  ) {
    this.stats = emptyStats(agents);
  }

  get agent(): string {
    return this.agents[this.next]!;
  }

  /**
   * Passes the turn to the next agent. After the last agent the round closes: the first agent is
   * next, and the episode ends once `maxTurns` rounds have closed. Returns whether a round closed.
   */
  pass(): boolean {
    if (this.next < this.agents.length - 1) {
      this.next++;
      return false;
    }
    this.next = 0;
    this.turn++;
    if (this.turn >= this.maxTurns) this.done = true;
    return true;
  }

  copy(): RoundRobin {
    const c = new RoundRobin(this.agents, this.maxTurns);
    c.turn = this.turn;
    c.next = this.next;
    c.done = this.done;
    c.success = this.success;
    c.stats = copyStats(this.stats);
    return c;
  }
}

/** `Environment`'s turn-keeping members, read from a `RoundRobin` the subclass drives. */
export abstract class RoundRobinEnvironment {
  protected rounds: RoundRobin;

  constructor(agents: readonly string[], maxTurns: number) {
    this.rounds = new RoundRobin(agents, maxTurns);
  }

  get agents(): readonly string[] {
    return this.rounds.agents;
  }
  get maxTurns(): number {
    return this.rounds.maxTurns;
  }
  get turn(): number {
    return this.rounds.turn;
  }
  get done(): boolean {
    return this.rounds.done;
  }
  get success(): boolean {
    return this.rounds.success;
  }
  get stats(): Readonly<Record<string, Readonly<AgentStats>>> {
    return copyStats(this.rounds.stats);
  }

  currentAgent(): string {
    return this.rounds.agent;
  }
}
