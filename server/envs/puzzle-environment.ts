/**
 * The workflow shared by the grid puzzles (Plan-Path, Sudoku, Sokoban), in two variants:
 *
 *  - 'team' (agents ['tool', 'plan']): each round the tool agent proposes an action; the environment
 *    applies it to a CLONE of the real state and writes a one-line report (where it would end, what
 *    was blocked, whether it solves the task) into the planner's prompt; the plan agent then commits
 *    its own action to the real state. Rounds repeat until solved, unsolvable, or maxTurns.
 *    The verdict in that report is a departure from the reference, whose planner sees only the
 *    tool's output (its action list): `verdictToPlanner: false` shows the planner just the proposal.
 *    The tool's prompt is the state alone, as the solo agent's is; `reportToTool` adds the previous
 *    round's report ("last tool: ...").
 *    With `planAccepts` the planner may answer `accept` to commit the proposal as parsed (another
 *    departure: the reference's planner always writes its action out).
 *  - 'single' (agents ['solo'], the L0 baseline): one agent sees the state and commits directly.
 *
 * Rewards (PettingLLMs' per-environment rewards, "global + local"). Let R(a, s) be the puzzle's summed
 * per-move reward of action a on state s (each puzzle file defines its per-move reward):
 *  - tool:        team 0 (the real state is untouched), local R(proposal, clone of s)
 *  - plan, solo:  team R(commit, s), local R(commit, s)  (as in the reference the committing agent's
 *                 local reward is its committed reward; with alpha = 1 it sees 2R, as there)
 *  - a response that does not parse: team 0, local `parsePenalty`, state unchanged.
 * The reference also added the real state's previous step reward to the tool's reward; that term is
 * the same for every branch of a tree group (it cancels in the advantage) and double counts the
 * commit in any episode sum, so it is left out.
 */
import { z } from 'zod';
import type { Parsed } from './action-text.ts';
import { checkActor, checkAgent, roundReward, type AgentTurnResult, type Environment } from './environment.ts';
import { RoundRobinEnvironment } from './round-robin.ts';

/**
 * Local reward for a response that does not parse. The reference's agents score an empty or
 * invalid action -2 (its Plan-Path state gives -1, the agent's reward wrapper -2). -1 was too mild
 * for the plan agent, whose parsed answers count twice (team + local): an empty answer then cost
 * less than one step away from the goal, and RL taught the planner to answer nothing when unsure
 * (measured: 5-9% empty answers in greedy validation after 20-40 steps).
 */
export const parsePenalty = -2;

/** What applying one action did. */
export interface MoveOutcome {
  /** Sum of the per-move rewards. */
  readonly reward: number;
  /** Moves the rules rejected (they did not change the state). */
  readonly invalid: number;
  /** One short line for reports and `info`, e.g. "2 from G, 1 blocked, goal no". */
  readonly summary: string;
}

/** A puzzle's state with its rules. `apply` mutates; `clone` is deep. */
export interface PuzzleState<A> {
  /** First prompt line, e.g. "plan-path 5x5". */
  readonly title: string;
  /** What to answer, e.g. "moves (U/D/L/R)". */
  readonly hint: string;
  /** Solved: the episode ends with success. */
  readonly solved: boolean;
  /** No action can solve it any more (e.g. a box in a corner): the episode ends. */
  readonly stuck: boolean;
  /** Minimal number of moves that solved the puzzle from its generated start. */
  readonly optimalMoves: number;
  /** Legend and grid lines (no trailing newline). */
  render(): string;
  parse(text: string): Parsed<A>;
  format(action: A): string;
  apply(action: A): MoveOutcome;
  /** An ideal action from here; only called when neither solved nor stuck. */
  solve(): A;
  /**
   * `action` (normally `solve()`'s) with one small, plausible mistake — two moves swapped, one
   * fill's digit changed — still well formed; `variant` picks which. Null when there is nothing to
   * flaw. The team's warm start plays these as the tool's proposals (`Environment.flawedSolution`).
   */
  flaw(action: A, variant: number): A | null;
  clone(): PuzzleState<A>;
}

export const puzzleVariants = ['team', 'single'] as const;
export type PuzzleVariant = (typeof puzzleVariants)[number];

/** Workflow options every puzzle accepts (spread into each puzzle's options schema). */
export const workflowOptionsShape = {
  /** Rounds before the episode ends unsolved. */
  maxTurns: z.number().int().min(1).max(64).default(4).describe('Rounds before the episode ends unsolved.'),
  /** 'team': tool proposes, plan commits. 'single': one agent (L0 baseline). */
  variant: z.enum(puzzleVariants).default('team').describe("'team' (tool -> plan) or 'single' (one solo agent)."),
  /** The planner's prompt carries the environment's verdict on the tool's proposal (a departure from the reference). */
  verdictToPlanner: z
    .boolean()
    .default(true)
    .describe(
      "Team variant: the planner's prompt carries the environment's verdict on the tool's proposal ('tool: RRDD: 2 from G, 1 blocked, goal no'). The reference planner sees only the tool's output ('tool: RRDD'); false matches it, as the paper-comparable configs do.",
    ),
  /** The planner may commit the tool's proposal by answering `accept` (a departure from the reference). */
  planAccepts: z
    .boolean()
    .default(false)
    .describe(
      "Team variant: the planner may answer 'accept' to commit the tool's proposal exactly as parsed, instead of writing the action out again. A departure from the reference, whose planner always writes its own action; it spares a small model the copy of a long proposal, where most of its mistakes on right proposals were (docs/experiments/2026-11-25.md).",
    ),
  /** The tool's prompt repeats its previous proposal with the environment's report on it. */
  reportToTool: z
    .boolean()
    .default(false)
    .describe(
      "Team variant: from the second round on, the tool's prompt repeats its previous proposal and the environment's report on it ('last tool: RR: 7 from G, 0 blocked, goal no'). Off by default: the solver's demonstrations rarely show such a line, and with it the warm-started tool solved far fewer episodes after its first round (docs/experiments/2026-11-25.md).",
    ),
};

export interface WorkflowOptions {
  readonly maxTurns: number;
  readonly variant: PuzzleVariant;
  /** Default true. */
  readonly verdictToPlanner?: boolean;
  /** Default false. */
  readonly reportToTool?: boolean;
  /** Default false. */
  readonly planAccepts?: boolean;
}

/** The planner's answer that commits the tool's proposal as it stands (`planAccepts`). */
export const acceptAnswer = 'accept';

const teamAgents = ['tool', 'plan'] as const;
const singleAgents = ['solo'] as const;

export class PuzzleEnvironment<A> extends RoundRobinEnvironment implements Environment {
  readonly name: string;
  readonly seed: number;
  readonly optimalMoves: number;
  readonly variant: PuzzleVariant;
  readonly verdictToPlanner: boolean;
  readonly reportToTool: boolean;
  readonly planAccepts: boolean;
  #state: PuzzleState<A>;
  #report: string | null = null; // the tool's report line of this round, with the verdict
  #planReport: string | null = null; // what the planner is shown of it (verdictToPlanner)
  #lastReport: string | null = null; // the previous round's report, shown to the tool with reportToTool
  #proposal: A | null = null; // the tool's parsed proposal of this round

  constructor(name: string, seed: number, state: PuzzleState<A>, options: WorkflowOptions) {
    super(options.variant === 'team' ? teamAgents : singleAgents, options.maxTurns);
    this.name = name;
    this.seed = seed;
    this.variant = options.variant;
    this.verdictToPlanner = options.verdictToPlanner ?? true;
    this.reportToTool = options.reportToTool ?? false;
    this.planAccepts = options.planAccepts ?? false;
    this.optimalMoves = state.optimalMoves;
    this.#state = state;
  }

  /** A fresh episode on a generated puzzle. */
  static start<A>(name: string, seed: number, state: PuzzleState<A>, options: WorkflowOptions): PuzzleEnvironment<A> {
    // A generator bug that produced a solved or dead puzzle must not pass silently as a free win.
    if (state.solved || state.stuck) throw new Error(`${name}: seed ${seed} generated a puzzle that is already over`);
    return new PuzzleEnvironment(name, seed, state, options);
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    const lines = [`${this.#state.title}, turn ${Math.min(this.turn + 1, this.maxTurns)}/${this.maxTurns}`, this.#state.render()];
    if (agent === 'plan') lines.push(this.#planReport ?? 'tool: no report');
    // With `reportToTool` the tool sees how its previous proposal fared.
    else if (agent === 'tool' && this.reportToTool && this.#lastReport !== null) lines.push(`last ${this.#lastReport}`);
    lines.push(`${agent}: ${this.#state.hint}${agent === 'plan' && this.planAccepts ? ` or ${acceptAnswer}` : ''}`);
    return `${lines.join('\n')}\n`;
  }

  act(agent: string, text: string): AgentTurnResult {
    checkActor(this, agent);
    const stats = this.rounds.stats[agent]!;
    stats.acts++;
    const parsed: Parsed<A> & { accepted?: boolean } = agent === 'plan' ? this.#parseCommit(text) : this.#state.parse(text);
    if (!parsed.ok) stats.parseErrors++;

    let teamReward = 0;
    let localReward: number;
    let info: string;
    if (agent === 'tool') {
      if (parsed.ok) {
        const sim = this.#state.clone();
        const out = sim.apply(parsed.action);
        stats.invalidMoves += out.invalid;
        localReward = out.reward;
        info = `${this.#state.format(parsed.action)}: ${out.summary}`;
        // The tool's own next prompt ("last tool: ...", with reportToTool) keeps the verdict either
        // way: the reference tool saw its code's execution output.
        this.#report = `tool: ${info}`;
        this.#planReport = this.verdictToPlanner ? this.#report : `tool: ${this.#state.format(parsed.action)}`;
        this.#proposal = parsed.action;
      } else {
        localReward = parsePenalty;
        info = `parse error: ${parsed.error}`;
        this.#report = 'tool: no valid proposal';
        this.#planReport = this.#report;
        this.#proposal = null;
      }
    } else if (parsed.ok) {
      const out = this.#state.apply(parsed.action);
      stats.invalidMoves += out.invalid;
      teamReward = out.reward;
      localReward = out.reward;
      info = `${parsed.accepted ? `${acceptAnswer} ` : ''}${this.#state.format(parsed.action)}: ${out.summary}`;
    } else {
      localReward = parsePenalty;
      info = `parse error: ${parsed.error}`;
    }

    this.#advance();
    return {
      teamReward: roundReward(teamReward),
      localReward: roundReward(localReward),
      parseError: parsed.ok ? null : parsed.error,
      done: this.rounds.done,
      success: this.rounds.success,
      info,
    };
  }

  /**
   * The planner's answer: an action, or with `planAccepts` the word `accept`, which commits this
   * round's proposal (an error when the tool made no valid one).
   */
  #parseCommit(text: string): Parsed<A> & { accepted?: boolean } {
    if (!this.planAccepts || text.trim() !== acceptAnswer) return this.#state.parse(text);
    if (this.#proposal === null) return { ok: false, error: `nothing to ${acceptAnswer}: the tool made no valid proposal` };
    return { ok: true, action: this.#proposal, accepted: true };
  }

  /** Moves to the next agent; a round ends after the last agent, and the episode may end with it. */
  #advance(): void {
    if (!this.rounds.pass()) return;
    this.#lastReport = this.#report;
    this.#report = null;
    this.#planReport = null;
    this.#proposal = null;
    if (this.#state.solved) this.rounds.success = true;
    if (this.#state.solved || this.#state.stuck) this.rounds.done = true;
  }

  clone(): PuzzleEnvironment<A> {
    const copy = new PuzzleEnvironment<A>(this.name, this.seed, this.#state.clone(), {
      maxTurns: this.maxTurns,
      variant: this.variant,
      verdictToPlanner: this.verdictToPlanner,
      reportToTool: this.reportToTool,
      planAccepts: this.planAccepts,
    });
    copy.rounds = this.rounds.copy();
    copy.#report = this.#report;
    copy.#planReport = this.#planReport;
    copy.#lastReport = this.#lastReport;
    copy.#proposal = this.#proposal; // never mutated: apply() reads actions
    return copy;
  }

  /**
   * The solver's answer; for the planner, the tool's proposal when committing it scores as well as
   * the solver's answer (another shortest path, say): copying a proposal the report shows to be
   * right is what the planner should learn, and a label that differs from it would teach the
   * planner to ignore it. With `planAccepts` that label is `accept`.
   */
  solution(agent: string): string {
    checkAgent(this, agent);
    if (this.rounds.done) throw new Error(`${this.name}: no solution once the episode is over`);
    const best = this.#state.solve();
    if (agent === 'plan' && this.#proposal !== null) {
      const proposal = this.#proposal;
      const score = (a: A) => this.#state.clone().apply(a).reward;
      if (score(proposal) >= score(best) - 1e-9) return this.planAccepts ? acceptAnswer : this.#state.format(proposal);
    }
    return this.#state.format(best);
  }

  flawedSolution(agent: string, variant: number): string | null {
    checkAgent(this, agent);
    if (this.rounds.done) throw new Error(`${this.name}: no solution once the episode is over`);
    const flawed = this.#state.flaw(this.#state.solve(), variant);
    return flawed === null ? null : this.#state.format(flawed);
  }
}
