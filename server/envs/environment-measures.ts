/**
 * Measures an environment adds to validation and test beyond success and rewards, computed by the
 * environment's own module from the policy's greedy answers (the trainer's validation, its test and
 * `troupe eval` all get them through `evaluate`, which knows no environment by name).
 *
 * Recipe, adding a measure: declare its field here, write the environment's `MeasureEnvironment`
 * beside its module and register it in `environmentMeasures` (environments.ts); step-metrics.ts
 * turns it into metrics and cli/eval-command.ts prints it.
 */
import type { MatchResult, PositionScore } from './tic-tac-toe-players.ts';

/** The evaluated policy's greedy answer to one prompt of `game.agent`. */
export type GreedyAnswer = (observation: string, game: { readonly agent: string }) => Promise<string>;
/** Greedy answers to many prompts at once, in order (one batched generation per agent). */
export type GreedyAnswers = (queries: ReadonlyArray<{ readonly observation: string; readonly agent: string }>) => Promise<string[]>;

/** The policy as a measure sees it: greedy, routed per agent as in training. */
export interface GreedyPolicy {
  readonly answer: GreedyAnswer;
  readonly answerAll: GreedyAnswers;
}

export interface MeasureOptions {
  /** Games per scripted opponent or setting: the evaluation's episodes. */
  readonly games: number;
  /** Seed of the measures' own randomness: the evaluation's first seed. */
  readonly seed: number;
}

export interface EnvironmentMeasures {
  /**
   * Games against scripted opponents, for symmetric games (tic-tac-toe): the policy plays each
   * side in turn, `games` games per opponent, greedy.
   */
  readonly opponents?: { readonly random: MatchResult; readonly minimax: MatchResult };
  /** Tic-tac-toe: the greedy move in every reachable position, scored against perfect play (`scorePositions`). */
  readonly positions?: Record<'x' | 'o' | 'all', PositionScore>;
}

/** An environment's contribution to evaluation. */
export type MeasureEnvironment = (policy: GreedyPolicy, o: MeasureOptions) => Promise<EnvironmentMeasures>;
