/**
 * Tic-tac-toe self-play: a symmetric game for two agents, `x` and `o`, meant to share one policy
 * (the reference prototype's self-play goal, PettingLLMs' July 2025 prototype). Opponents for evaluation
 * (random, minimax) live in `tic-tac-toe-players.ts`.
 *
 * The seed matters only through `openingMoves`: that many random legal moves are played before the
 * agents start (at most 4, so the game is never over before it begins), to vary training positions.
 * A range `[min, max]` draws the count per seed, so that training sees the empty board and its
 * first replies too: a policy trained only on 2-move openings never meets the positions a game
 * against an opponent starts from (measured: it lost all 64 games to minimax, 0 forfeits).
 * `randomOpening: { share, plies }` (off by default) overrides that for a share of the seeds,
 * drawn from the seed: they open with exactly `plies` random moves (plies 1: o answers every first
 * move, where self-play's x opens mostly on one cell).
 * After an odd number of them `o` moves first; always ask `currentAgent()`.
 *
 * `perfectOpponent: { share }` (off by default) mixes self-play with games against a perfect
 * player: a share of the seeds, drawn from the seed on its own stream, start from the empty board
 * (no opening) with one side, drawn from the seed, played by the environment itself with perfect
 * moves (ties drawn from the seed and the position, uniform as the minimax test opponent's). It
 * moves in the constructor and after each policy act, so `currentAgent()` never names it while the
 * game is live: the policy plays only the other side, and the scripted moves earn no reward, make
 * no trajectory turn and count in no agent's stats. The side stays in `agents` (unlike
 * ScriptedSeats, which drops it): a run reads its agents, router and warm-start agent list from
 * one probe environment (seed 0), so a per-seed agent list would break the runs whose probe seed
 * falls in the share.
 *
 * Action: one digit 1-9, the cell to mark, row by row; the prompt shows free cells as their digit:
 *   tic-tac-toe, turn 2/5
 *   X2O
 *   4X6
 *   78O
 *   x: move for X (a free digit)
 * A malformed answer or an occupied cell forfeits the game (the offender loses). The reference
 * instead played a random legal move for it, which hides errors and credits luck to the policy.
 *
 * Rewards. The game is zero-sum, so there is no shared task: teamReward is 0. localReward, for the
 * mover:
 *   'outcome' (default, as the reference's terminal returns): +1 for the winning move, 0 otherwise
 *     (a drawing last move included);
 *   'minimax': the perfect-play value of the move: +1 forced win, 0 draw, -1 forced loss (a dense
 *     signal for per-turn credit, computed by the solver);
 *   'minimax-traps': as 'minimax', plus, for a move that keeps a draw, the share of the opponent's
 *     legal replies that lose by force (`trapShare`, in [0, 1): one reply at least holds the draw).
 *     'minimax' scores every draw-keeping move the same, so nothing in it prefers the moves that
 *     beat a weak player; this does, and keeps the order forced win (1) > any drawing move with
 *     its bonus (0 to < 1) > forced loss (-1) > forfeit (-2). It is also the drawing move's
 *     expected value against a random replier followed by perfect play (a losing reply is then a
 *     win, any other a draw). A move that ends the game scores as in 'minimax' (win 1, draw 0);
 *   forfeit (either mode): -2, worse than any legal move.
 * `solution` (the warm start's demonstrations) is a perfect move: by default the lowest cell of
 * the best ones, which teaches a digit prior (x always opens on 1, and a policy unsure of a move
 * answers low digits); with `solutionTies: 'seeded'` one of them drawn from the seed and the
 * position.
 * `success` means the game ended without a forfeit (a win or a draw); who won is `outcome`.
 */
import { z } from 'zod';
import { describeChar, trimAscii } from './action-text.ts';
import {
  checkActor,
  checkAgent,
  checkSeed,
  copyStats,
  emptyStats,
  parseOptions,
  type AgentStats,
  type AgentTurnResult,
  type Environment,
  type EnvironmentFactory,
} from './environment.ts';
import { Rng } from './rng.ts';
import { bestMove, bestMoves, emptyBoard, isOver, legalMoves, moveValue, optimalMoves, toMove, winnerOf, type Board, type Mark } from './tic-tac-toe-board.ts';

export const ticTacToeRewards = { win: 1, draw: 0, forfeit: -2 } as const;

/**
 * The share of the opponent's legal replies to `cell` that lose by force (after which the mover
 * has a forced win): 0 when the move ends the game, below 1 for a move that only keeps a draw (one
 * reply at least holds it). What 'minimax-traps' adds to a drawing move's value.
 */
export function trapShare(board: Board, cell: number): number {
  const next = [...board];
  next[cell] = toMove(board);
  if (isOver(next)) return 0;
  const replies = legalMoves(next);
  return replies.filter((r) => moveValue(next, r) === -1).length / replies.length;
}

/** The per-move reward of 'minimax' and 'minimax-traps' (before the move is played; not for a forfeit). */
export function moveReward(board: Board, cell: number, reward: 'minimax' | 'minimax-traps'): number {
  const value = moveValue(board, cell);
  return reward === 'minimax-traps' && value === 0 ? trapShare(board, cell) : value;
}

const openingCount = z.number().int().min(0).max(4);

export const ticTacToeOptionsSchema = z
  .object({
    /** Random legal moves played from the seed before the agents start (0-4), or a range drawn per seed. */
    openingMoves: z
      .union([
        openingCount,
        // An array of two rather than a tuple: the config language's JSON Schema reader takes one `items` schema.
        z
          .array(openingCount)
          .length(2)
          .refine(([min, max]) => (min as number) <= (max as number), { message: 'a range [min, max] needs min <= max' }),
      ])
      .default(0)
      .describe('Random moves played before the agents start: a count (0-4), or a range [min, max] whose count each seed draws.'),
    /** 'outcome': +1 for the winning move only. 'minimax': every move scored by its perfect-play value; 'minimax-traps' adds to a drawing move the share of the replies that lose. */
    reward: z
      .enum(['outcome', 'minimax', 'minimax-traps'])
      .default('outcome')
      .describe(
        "'outcome' (terminal), 'minimax' (per-move perfect-play value) or 'minimax-traps' (the same, plus for a move that keeps a draw the share of the opponent's replies that lose by force, in [0, 1): it prefers the moves that beat weak play).",
      ),
    /** A share of the seeds that open with exactly `plies` random moves instead of `openingMoves`. */
    randomOpening: z
      .object({
        share: z.number().min(0).max(1).describe('The share of seeds (drawn per seed) that open with `plies` random moves; the others follow openingMoves.'),
        plies: z.number().int().min(1).max(4).describe('Random legal moves those seeds play before the agents start (1: o answers any first move; 2: x meets any reply).'),
      })
      .strict()
      .optional()
      .describe(
        "A share of the seeds open with exactly `plies` uniformly random legal moves, drawn from the seed, instead of openingMoves: e.g. { share: 0.5, plies: 1 } makes o answer every first move in half the tasks, where self-play's x mostly opens on one cell. Off by default. It applies to every game the environment makes from a seed (training tasks, the warm start's demonstrations, self-play validation); the games against random and minimax start from the empty board whatever the options.",
      ),
    /** A share of the seeds where one side, drawn per seed, is played by the environment with perfect moves. */
    perfectOpponent: z
      .object({
        share: z.number().min(0).max(1).describe('The share of seeds (drawn per seed) played against the perfect player; the others are self-play as without the option.'),
      })
      .strict()
      .optional()
      .describe(
        "Self-play mixed with games against a perfect player: in a share of the seeds (drawn per seed on its own stream) the game starts from the empty board and one side, drawn from the seed, is played by the environment with perfect moves (ties drawn from the seed and the position, as the minimax test opponent draws them); the policy plays only the other side there, and the scripted moves earn no reward and make no trajectory turn. Off by default. It applies to every game made from a seed: the training tasks, self-play validation, and the warm start's demonstrations (in those seeds the solver demonstrates the policy's side only, against the perfect player's lines).",
      ),
    /** Which of several perfect moves `solution` (the warm start's demonstrations) gives. */
    solutionTies: z
      .enum(['lowest', 'seeded'])
      .optional()
      .describe(
        "Which perfect move the solver demonstrates when several are equally good: 'lowest' (the default) the lowest cell, so x always opens on 1; 'seeded' one drawn from the seed and the position, the same every time they recur, so the demonstrations show every perfect opening and reply.",
      ),
  })
  .strict();

export type TicTacToeOptions = z.output<typeof ticTacToeOptionsSchema>;

export type TicTacToeAgent = 'x' | 'o';
const agentOf = { X: 'x', O: 'o' } as const satisfies Record<Mark, TicTacToeAgent>;
const markOf = { x: 'X', o: 'O' } as const satisfies Record<TicTacToeAgent, Mark>;

export class TicTacToeEnvironment implements Environment {
  readonly name = 'tic-tac-toe';
  readonly agents: readonly TicTacToeAgent[] = ['x', 'o'];
  readonly maxTurns = 5; // nine cells, one move per agent per round
  readonly optimalMoves = null;
  readonly seed: number;
  readonly options: TicTacToeOptions;
  #board: (Mark | null)[];
  #acts = 0;
  #forfeitedBy: TicTacToeAgent | null = null;
  #stats: Record<string, AgentStats>;
  #perfectSide: TicTacToeAgent | null = null;

  /** Plays the seed's opening; `position` (used by clone) replaces it with a given board. */
  constructor(seed: number, options: TicTacToeOptions, position?: Board) {
    this.seed = seed;
    this.options = Object.freeze({ ...options });
    this.#stats = emptyStats(this.agents);
    if (position !== undefined) {
      this.#board = [...position];
      return;
    }
    this.#board = emptyBoard();
    const perfect = options.perfectOpponent;
    if (perfect !== undefined) {
      // Its own stream, so the seeds outside the share open exactly as they do without the option.
      const own = new Rng(seed, 'tic-tac-toe perfect opponent');
      if (own.chance(perfect.share)) {
        this.#perfectSide = own.pick(this.agents);
        this.#playPerfect();
        return;
      }
    }
    const forced = options.randomOpening;
    if (forced !== undefined) {
      // Its own stream, so the seeds outside the share open exactly as they do without the option.
      const own = new Rng(seed, 'tic-tac-toe random opening');
      if (own.chance(forced.share)) {
        for (let i = 0; i < forced.plies; i++) this.#board[own.pick(legalMoves(this.#board))] = toMove(this.#board);
        return;
      }
    }
    const rng = new Rng(seed, 'tic-tac-toe');
    const [min, max] = typeof options.openingMoves === 'number' ? [options.openingMoves, options.openingMoves] : (options.openingMoves as [number, number]);
    // A fixed count draws nothing, so seeds keep the openings they had before ranges existed.
    const count = min === max ? min : min + rng.int(max - min + 1);
    for (let i = 0; i < count; i++) this.#board[rng.pick(legalMoves(this.#board))] = toMove(this.#board);
  }

  /** The side the environment plays with perfect moves in this seed (`perfectOpponent`), or null. */
  get perfectSide(): TicTacToeAgent | null {
    return this.#perfectSide;
  }

  /** A copy of the board, cells 0..8 row by row. */
  get board(): Board {
    return [...this.#board];
  }
  /** The winner: by a line, or the opponent of whoever forfeited; null for a draw or while playing. */
  get winner(): Mark | null {
    if (this.#forfeitedBy !== null) return this.#forfeitedBy === 'x' ? 'O' : 'X';
    return winnerOf(this.#board);
  }
  /** Which agent forfeited (malformed answer or occupied cell), if any. */
  get forfeitedBy(): TicTacToeAgent | null {
    return this.#forfeitedBy;
  }
  get done(): boolean {
    return this.#forfeitedBy !== null || isOver(this.#board);
  }
  get success(): boolean {
    return this.done && this.#forfeitedBy === null;
  }
  get turn(): number {
    return Math.floor(this.#acts / 2);
  }
  get stats(): Readonly<Record<string, Readonly<AgentStats>>> {
    return copyStats(this.#stats);
  }

  currentAgent(): TicTacToeAgent {
    return agentOf[toMove(this.#board)];
  }

  observe(agent: string): string {
    checkAgent(this, agent);
    const rows: string[] = [];
    for (let r = 0; r < 3; r++) {
      rows.push(this.#board.slice(3 * r, 3 * r + 3).map((m, c) => m ?? String(3 * r + c + 1)).join(''));
    }
    const mark = markOf[agent as TicTacToeAgent];
    return `tic-tac-toe, turn ${Math.min(this.turn + 1, this.maxTurns)}/${this.maxTurns}\n${rows.join('\n')}\n${agent}: move for ${mark} (a free digit)\n`;
  }

  act(agent: string, text: string): AgentTurnResult {
    checkActor(this, agent);
    const me = agent as TicTacToeAgent;
    const stats = this.#stats[me] as AgentStats;
    stats.acts++;
    this.#acts++;
    const s = typeof text === 'string' ? trimAscii(text) : '';
    if (!/^[1-9]$/.test(s)) {
      stats.parseErrors++;
      this.#forfeitedBy = me;
      const error = s.length === 0 ? 'empty action: expected one digit 1-9' : s.length > 1 ? 'expected exactly one digit 1-9' : `bad cell ${describeChar(s)}: expected a digit 1-9`;
      return this.#result(ticTacToeRewards.forfeit, error, `${me} forfeits (malformed move)`);
    }
    const cell = Number(s) - 1;
    if (this.#board[cell] !== null) {
      stats.invalidMoves++;
      this.#forfeitedBy = me;
      return { ...this.#result(ticTacToeRewards.forfeit, null, `cell ${s} is taken: ${me} forfeits`), illegal: true };
    }
    const value = this.options.reward === 'outcome' ? 0 : moveReward(this.#board, cell, this.options.reward);
    this.#board[cell] = markOf[me];
    if (winnerOf(this.#board) !== null) return this.#result(ticTacToeRewards.win, null, `${me} plays ${s} and wins`);
    if (isOver(this.#board)) return this.#result(ticTacToeRewards.draw, null, `${me} plays ${s}: draw`);
    // The perfect player's reply (if it has one this game) is part of this act's result: done and success after it.
    const reply = this.#playPerfect();
    return this.#result(value, null, `${me} plays ${s}${reply}`);
  }

  /** Plays the perfect side while it is to move and the game is live; returns what it did, for `info`. */
  #playPerfect(): string {
    const side = this.#perfectSide;
    if (side === null || this.done || this.currentAgent() !== side) return '';
    const moves = optimalMoves(this.#board);
    // Drawn from the seed and the position, not a stream: a clone (a tree branch) replies as the original would.
    const cell = this.#pickForPosition(moves, 'tic-tac-toe perfect opponent');
    this.#board[cell] = markOf[side];
    this.#acts++;
    const end = winnerOf(this.#board) !== null ? ' and wins' : isOver(this.#board) ? ': draw' : '';
    return `; ${side} (perfect) plays ${cell + 1}${end}`;
  }

  #result(localReward: number, parseError: string | null, info: string): AgentTurnResult {
    return { teamReward: 0, localReward, parseError, done: this.done, success: this.success, info };
  }

  clone(): TicTacToeEnvironment {
    const copy = new TicTacToeEnvironment(this.seed, this.options, this.#board);
    copy.#acts = this.#acts;
    copy.#forfeitedBy = this.#forfeitedBy;
    copy.#perfectSide = this.#perfectSide;
    copy.#stats = copyStats(this.#stats);
    return copy;
  }

  /** One of `moves`, drawn from the seed and the position (not a stream): the same whenever the position recurs, in a clone too. */
  #pickForPosition(moves: readonly number[], salt: string): number {
    return new Rng(this.seed, `${salt} ${this.#board.map((m) => m ?? '.').join('')}`).pick(moves);
  }

  /** The perfect move for the side to move, as action text. */
  solution(agent: string): string {
    checkAgent(this, agent);
    if (this.done) throw new Error('tic-tac-toe: no solution once the game is over');
    if (this.options.solutionTies !== 'seeded') return String(bestMove(this.#board) + 1);
    const ties = bestMoves(this.#board);
    return String(this.#pickForPosition(ties, 'tic-tac-toe ties') + 1);
  }
}

export const ticTacToe = {
  description: 'Tic-tac-toe self-play: agents x and o (one shared policy), evaluated against random and minimax.',
  optionsSchema: ticTacToeOptionsSchema,
  create(seed: number, options?: unknown): TicTacToeEnvironment {
    const o = parseOptions(ticTacToeOptionsSchema, options, 'tic-tac-toe');
    return new TicTacToeEnvironment(checkSeed(seed, 'tic-tac-toe'), o);
  },
} satisfies EnvironmentFactory<TicTacToeOptions>;
