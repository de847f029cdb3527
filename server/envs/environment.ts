/**
 * The environment contract: what the RL trainer drives. Read this first.
 *
 * An Environment is one task instance (a puzzle, a game) together with its agent workflow: which
 * agents act, in what order, until when. It is created from an integer seed and options by a
 * factory in the registry (`environments.ts`), is fully determined by them, and never draws on
 * hidden randomness afterwards.
 *
 * Driving an episode:
 *
 *   const env = createEnvironment('plan-path', trainSeed(i), { size: 5 }, 'train');
 *   while (!env.done) {
 *     const agent = env.currentAgent();         // e.g. 'tool', then 'plan', then 'tool', ...
 *     const turn = env.turn;                     // group key for AT-GRPO: (task, agent, turn)
 *     const prompt = env.observe(agent);         // printable ASCII + '\n' only
 *     const result = env.act(agent, policy(prompt));
 *     // score: r = alpha * result.teamReward + result.localReward   (the trainer combines, not us)
 *   }
 *
 * Tree sampling (AT-GRPO): at each (turn, agent) take K clones of the one current environment,
 * `act` a different sampled response on each, score each branch, and continue with the winning
 * *stepped* clone. `clone()` is deep: stepping a clone never changes its source or siblings. (The
 * reference stepped the originals while reading prompts from copies; here there is one state
 * object per branch, so that desync cannot happen.)
 *
 * Turns. A round is one act by each agent in `agents` order; `turn` counts completed rounds (0 at
 * the start) and the episode ends when the task is solved, becomes unsolvable, or after
 * `maxTurns` rounds. Within a round `turn` is constant, so (agent, turn) names each act uniquely.
 *
 * Rewards, per act:
 *  - `teamReward`: the shared task reward, i.e. what this act did to the real task state (progress,
 *    step costs, completion bonuses). An act that does not touch the real state (a tool agent's
 *    proposal) has team reward 0, so the team rewards of an episode sum to the task's return.
 *    Zero-sum games have no shared task: their team reward is always 0.
 *  - `localReward`: the acting agent's own reward: e.g. the simulated reward of the tool's proposal,
 *    the committed reward for the planner, the penalty for an unparseable response.
 *  Each environment's file documents its numbers.
 *
 * Acts that run code. An act may carry a program (math: the tool agent's Python; code: the coder's
 * program and the tester's test). `programs(agent, text)` extracts what to run, the caller runs it
 * in the sandbox (`actWithPrograms` in program-acts.ts; the rollout runs every branch and
 * environment of a step through the sandbox's pool at once) and passes the executions to `act`,
 * which reads their output like any other part of the response. An environment never starts a
 * process itself, so nothing a model writes can run outside the sandbox by way of an environment.
 *
 * Errors. Model output is untrusted: `act` never throws because of the text. A malformed action
 * yields `parseError` (a short reason), a negative `localReward`, and is counted in `stats`; a
 * puzzle's state is left unchanged (the round goes on), a game is forfeited. `act` does throw on caller bugs: acting after `done`, or acting for an
 * agent whose turn it is not; those are errors in the trainer, not in the model.
 *
 * Text. Prompts, solution texts and `info` lines use only printable ASCII (32..126) and '\n', so
 * a character-level vocabulary covers them; raw model text is never echoed back into a prompt.
 *
 * Seeds. Training must draw seeds from `seedRanges.train` only (`trainSeed(index)`), validation from
 * `seedRanges.validation` (`validationSeed(index)`); see `seed-ranges.ts`. Passing the split to
 * `createEnvironment` makes it refuse a seed from the other range.
 *
 * Warm start and the optimum: `solution(agent)` is the solver's answer for the current state, and
 * `rolloutSolver(env)` (solver-rollout.ts) plays it through `act` to give (prompt, response)
 * demonstrations and the return a perfect team reaches.
 */
import type { z } from 'zod';
import type { Execution, ProgramRequest } from '../protocol/trajectory.ts';

/** What one agent's act did. */
export interface AgentTurnResult {
  /** Shared task reward of this act (0 for acts that do not change the real task state). */
  readonly teamReward: number;
  /** The acting agent's own reward (includes the penalty for a malformed action). */
  readonly localReward: number;
  /** Why the text could not be parsed, or null when it was a well-formed action. */
  readonly parseError: string | null;
  /**
   * The action was well-formed but the rules refused it whole (a tic-tac-toe move to a taken cell,
   * forfeiting the game; a Hanabi move the rules forbid, passed on). Absent: it was legal, or only
   * part of it was refused (a puzzle's blocked step). With a parse error, an invalid act (`Sample.invalid`).
   */
  readonly illegal?: true;
  /** Whether the episode is over after this act. */
  readonly done: boolean;
  /** Whether the task is solved (games: finished without forfeit) after this act. */
  readonly success: boolean;
  /** A short human-readable summary of what happened (printable ASCII). */
  readonly info: string;
}

/** Counters per agent, for dashboards and for checking that malformed actions are counted. */
export interface AgentStats {
  /** Acts taken. */
  acts: number;
  /** Acts whose text did not parse. */
  parseErrors: number;
  /** Well-formed moves that the rules rejected (a wall, a clue, an occupied cell...). */
  invalidMoves: number;
}

export interface Environment {
  /** Registry name: 'plan-path' | 'sudoku' | 'sokoban' | 'tic-tac-toe' | 'math' | 'code' | 'hanabi'. */
  readonly name: string;
  /** The seed this instance was generated from. */
  readonly seed: number;
  /** The agents in their turn order within a round, e.g. ['tool', 'plan'] or ['solo']. */
  readonly agents: readonly string[];
  /** The most rounds an episode can last. */
  readonly maxTurns: number;
  /** Completed rounds so far. */
  readonly turn: number;
  /** Whether the episode is over. */
  readonly done: boolean;
  /** Whether the task was solved (games: finished without a forfeit). */
  readonly success: boolean;
  /** Minimal number of moves that solves the task from its start, per the solver; null for games. */
  readonly optimalMoves: number | null;
  /**
   * A game's score in its own units, where the game keeps one beside its rewards (Hanabi: the
   * fireworks' points); absent elsewhere. Evaluation reports its mean.
   */
  readonly score?: number | undefined;
  /** Per-agent counters (a snapshot copy). */
  readonly stats: Readonly<Record<string, Readonly<AgentStats>>>;

  /** Whose act it is; once done, the agent that would have acted next. */
  currentAgent(): string;
  /** The prompt for `agent` now (normally the current agent). Throws for an unknown agent. */
  observe(agent: string): string;
  /**
   * The programs that `act(agent, text)` needs run before it can score the act (a tool agent's
   * code, a coder's program on each test), extracted from `text` without running anything; [] when
   * this act runs none (including text that does not parse). Absent on environments whose acts
   * never run code. Environments never start processes: the caller runs these in the sandbox
   * (`actWithPrograms`) and hands the executions to `act`, in the same order.
   */
  programs?(agent: string, text: string): ProgramRequest[];
  /**
   * Parses and applies `agent`'s response. Never throws because of `text`; see the header.
   * `executions` are the runs of `programs(agent, text)`, in order; `act` throws (a caller bug) when
   * an act that needs them gets a different number.
   */
  act(agent: string, text: string, executions?: readonly Execution[]): AgentTurnResult;
  /** A deep, independent copy (state, turn, counters). */
  clone(): Environment;
  /** The solver's ideal response for `agent` now, as text `act` accepts. Throws once done. */
  solution(agent: string): string;
  /**
   * The solver's response with one small mistake (`variant` picks which), still text `act`
   * accepts; null when it has none to make. Optional: warm starts use it, where an environment has
   * it, to show a team's later agents proposals to overrule. Throws once done.
   */
  flawedSolution?(agent: string, variant: number): string | null;
}

/** Creates environments of one kind. Options are validated; errors name the offending field. */
export interface EnvironmentFactory<Options = unknown> {
  /** One line for config hovers and listings. */
  readonly description: string;
  /** The options schema, with defaults (the source of truth for the config's env options). */
  readonly optionsSchema: z.ZodType<Options>;
  /**
   * Whether its agents write code that runs (math, code): a run on it needs the sandbox, opened
   * before the run starts so that a machine without one is refused up front.
   */
  readonly runsCode?: boolean;
  /**
   * Options that only change rewards: never an observation, what an act does, success, or the
   * solver's answer. The warm start imitates the solver and never reads a reward, so its cache key
   * takes each of these at its default (`warmStartOptions`): configs that differ only in them share
   * one warm start, and comparisons between them start from the same weights. The contract test
   * (environments.test.ts) checks that each leaves the solver's episodes unchanged.
   */
  readonly rewardOnlyOptions?: readonly (unknown extends Options ? string : keyof Options & string)[];
  /** Generates the instance for `seed` (a non-negative safe integer). Throws on bad seed or options. */
  create(seed: number, options?: unknown): Environment;
}

/** Parses options with `schema`, throwing an error that names every offending field. */
export function parseOptions<T>(schema: z.ZodType<T>, input: unknown, envName: string): T {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => `  ${i.path.length > 0 ? i.path.join('.') : '(options)'}: ${i.message}`);
  throw new Error(`invalid ${envName} options:\n${lines.join('\n')}`);
}

/** Throws unless `seed` is a non-negative safe integer. */
export function checkSeed(seed: number, envName: string): number {
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new RangeError(`${envName}: seed must be a non-negative safe integer, got ${String(seed)}`);
  }
  return seed;
}

/** Throws when `agent` may not act now: a caller bug, never a model error. */
export function checkActor(env: Environment, agent: string): void {
  if (!env.agents.includes(agent)) {
    throw new Error(`${env.name}: unknown agent '${agent}' (agents: ${env.agents.join(', ')})`);
  }
  if (env.done) throw new Error(`${env.name}: agent '${agent}' acted after the episode ended`);
  const current = env.currentAgent();
  if (agent !== current) throw new Error(`${env.name}: agent '${agent}' acted out of turn; it is '${current}''s turn`);
}

/** Throws for an agent the environment does not have. */
export function checkAgent(env: Environment, agent: string): void {
  if (!env.agents.includes(agent)) {
    throw new Error(`${env.name}: unknown agent '${agent}' (agents: ${env.agents.join(', ')})`);
  }
}

/** Fresh zeroed counters for each agent. */
export function emptyStats(agents: readonly string[]): Record<string, AgentStats> {
  return Object.fromEntries(agents.map((a) => [a, { acts: 0, parseErrors: 0, invalidMoves: 0 }]));
}

/** A deep copy of per-agent counters. */
export function copyStats(stats: Readonly<Record<string, Readonly<AgentStats>>>): Record<string, AgentStats> {
  return Object.fromEntries(Object.entries(stats).map(([a, s]) => [a, { ...s }]));
}

/** Rounds to 1e-6 so that sums of shaped rewards print and compare cleanly. */
export function roundReward(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}
