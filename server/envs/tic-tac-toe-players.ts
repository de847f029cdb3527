/**
 * Tic-tac-toe opponents and the evaluation harness: play a text policy (the model, answering the
 * environment's prompts) against a scripted player, through the same `act` path as training, so a
 * malformed answer forfeits exactly as it would in self-play.
 *
 *   const r = await evaluateAgainst(policy, ticTacToeOpponents.minimax, { games: 100, side: 'x', seed });
 *   r.losses === 0  // what perfect play achieves against minimax; against random, r.winRate is the score
 */
import { Rng } from './rng.ts';
import { ticTacToe, type TicTacToeAgent } from './tic-tac-toe.ts';
import { legalMoves, optimalMoves, type Board } from './tic-tac-toe-board.ts';

/** A scripted player: the board (cells 0..8) and a seeded stream in, a free cell (0..8) out. */
export type TicTacToePlayer = (board: Board, rng: Rng) => number;

/** Uniform over the free cells. */
export const randomPlayer: TicTacToePlayer = (board, rng) => rng.pick(legalMoves(board));

/**
 * Perfect play (never loses), choosing uniformly among the moves of the best game value. A
 * deterministic minimax would play the same two games (one per side) against a greedy policy in
 * every evaluation, so its non-loss rate could only be 0, 50 or 100%.
 */
export const minimaxPlayer: TicTacToePlayer = (board, rng) => rng.pick(optimalMoves(board));

export const ticTacToeOpponents = {
  random: randomPlayer,
  minimax: minimaxPlayer,
} satisfies Record<string, TicTacToePlayer>;


/** What the evaluated side sees: its prompt, plus the position for scripted policies. */
export type TextPolicy = (observation: string, game: { readonly board: Board; readonly agent: TicTacToeAgent }) => string | Promise<string>;

export interface GameResult {
  /** From the policy's side. */
  readonly outcome: 'win' | 'draw' | 'loss';
  /** Whether the policy lost by a malformed answer or an occupied cell. */
  readonly forfeit: boolean;
  /** Moves made by both sides after the opening. */
  readonly moves: number;
}

export interface GameOptions {
  /** The side the policy plays. */
  readonly side: TicTacToeAgent;
  /** Game seed: drives the opening and the opponent's random choices. */
  readonly seed: number;
  /** Random opening moves before play (as the environment option). */
  readonly openingMoves?: number;
}

/** Plays one game of `policy` against `opponent`. */
export async function playAgainst(policy: TextPolicy, opponent: TicTacToePlayer, options: GameOptions): Promise<GameResult> {
  const env = ticTacToe.create(options.seed, { openingMoves: options.openingMoves ?? 0 });
  const rng = new Rng(options.seed, 'tic-tac-toe-opponent');
  let moves = 0;
  while (!env.done) {
    const agent = env.currentAgent();
    if (agent === options.side) {
      const text = await policy(env.observe(agent), { board: env.board, agent });
      env.act(agent, text);
    } else {
      env.act(agent, String(opponent(env.board, rng) + 1));
    }
    moves++;
  }
  const winner = env.winner;
  const mine = options.side === 'x' ? 'X' : 'O';
  return {
    outcome: winner === null ? 'draw' : winner === mine ? 'win' : 'loss',
    forfeit: env.forfeitedBy === options.side,
    moves,
  };
}

export interface MatchResult {
  readonly games: number;
  readonly wins: number;
  readonly draws: number;
  readonly losses: number;
  /** Losses by forfeit (included in losses). */
  readonly forfeits: number;
  readonly winRate: number;
  /** (wins + draws) / games: 1 is perfect against minimax. */
  readonly nonLossRate: number;
}

export interface MatchOptions {
  readonly games: number;
  /** The policy's side; 'both' alternates, starting with x. */
  readonly side: TicTacToeAgent | 'both';
  /** Game g uses seed + g. */
  readonly seed: number;
  readonly openingMoves?: number;
}

/** Plays `games` games and tallies them from the policy's side. */
export async function evaluateAgainst(policy: TextPolicy, opponent: TicTacToePlayer, options: MatchOptions): Promise<MatchResult> {
  if (!Number.isInteger(options.games) || options.games < 1) throw new RangeError(`games must be a positive integer, got ${options.games}`);
  let wins = 0;
  let draws = 0;
  let losses = 0;
  let forfeits = 0;
  for (let g = 0; g < options.games; g++) {
    const side: TicTacToeAgent = options.side === 'both' ? (g % 2 === 0 ? 'x' : 'o') : options.side;
    const game: GameOptions = { side, seed: options.seed + g, ...(options.openingMoves === undefined ? {} : { openingMoves: options.openingMoves }) };
    const r = await playAgainst(policy, opponent, game);
    if (r.outcome === 'win') wins++;
    else if (r.outcome === 'draw') draws++;
    else losses++;
    if (r.forfeit) forfeits++;
  }
  const games = options.games;
  return { games, wins, draws, losses, forfeits, winRate: wins / games, nonLossRate: (wins + draws) / games };
}

/** Wraps a scripted player as a text policy (for tests and baselines). */
export function playerPolicy(player: TicTacToePlayer, rng: Rng): TextPolicy {
  return (_observation, game) => String(player(game.board, rng) + 1);
}
