/**
 * Tic-tac-toe opponents and the evaluation harness: play a text policy (the model, answering the
 * environment's prompts) against a scripted player, through the same `act` path as training, so a
 * malformed answer forfeits exactly as it would in self-play.
 *
 *   const r = await evaluateAgainst(policy, ticTacToeOpponents.minimax, { games: 100, side: 'x', seed });
 *   r.losses === 0  // what perfect play achieves against minimax; against random, r.winRate is the score
 */
import { Rng } from './rng.ts';
import { TicTacToeEnvironment, ticTacToe, type TicTacToeAgent } from './tic-tac-toe.ts';
import { legalMoves, optimalMoves, reachablePositions, toMove, type Board } from './tic-tac-toe-board.ts';

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

interface PositionQuery {
  readonly observation: string;
  readonly board: Board;
  readonly agent: TicTacToeAgent;
  /** Perfect play's moves there. */
  readonly optimal: readonly number[];
}
let queryCache: readonly PositionQuery[] | null = null;

/** Every reachable position with the prompt a game from the empty board shows there (played to it), computed once. */
function positionQueries(): readonly PositionQuery[] {
  queryCache ??= reachablePositions().map((board) => {
    const env = ticTacToe.create(0, { openingMoves: 0 });
    const cellsOf = (mark: 'X' | 'O') => board.flatMap((m, cell) => (m === mark ? [cell] : []));
    const xs = cellsOf('X');
    const os = cellsOf('O');
    for (let i = 0; i < xs.length; i++) {
      env.act('x', String(xs[i]! + 1));
      if (i < os.length) env.act('o', String(os[i]! + 1));
    }
    const agent: TicTacToeAgent = toMove(board) === 'X' ? 'x' : 'o';
    return { observation: env.observe(agent), board, agent, optimal: optimalMoves(board) };
  });
  return queryCache;
}

/** A text policy that answers many positions at once (one batched generation per chunk). */
export type BatchTextPolicy = (queries: ReadonlyArray<{ readonly observation: string; readonly board: Board; readonly agent: TicTacToeAgent }>) => Promise<string[]>;

/** How often a policy plays a move of the best game value, over positions of one side. */
export interface PositionScore {
  readonly positions: number;
  /** Moves of the best game value (a forced win where there is one, else a draw, else any). */
  readonly optimal: number;
  /** Malformed answers or occupied cells (never optimal). */
  readonly forfeits: number;
  /** optimal / positions. */
  readonly rate: number;
}

/**
 * The policy's answer in every position legal play reaches (`reachablePositions`: 2423 with X to
 * move, 2097 with O), each shown as a game from the empty board would show it, scored against
 * perfect play. Unlike games against minimax, which from the empty board visit a few lines (one
 * blunder on the main line loses every game through it), this covers every position once: the
 * fraction of positions a policy plays perfectly.
 */
export async function scorePositions(policy: BatchTextPolicy, chunk = 512): Promise<Record<TicTacToeAgent | 'all', PositionScore>> {
  const queries = positionQueries();
  const tally = { x: { positions: 0, optimal: 0, forfeits: 0 }, o: { positions: 0, optimal: 0, forfeits: 0 } };
  for (let start = 0; start < queries.length; start += chunk) {
    const part = queries.slice(start, start + chunk);
    const answers = await policy(part.map(({ observation, board, agent }) => ({ observation, board, agent })));
    part.forEach((q, i) => {
      const t = tally[q.agent];
      t.positions++;
      // The environment reads the answer, as in a game: a forfeit there is a forfeit here.
      const env = new TicTacToeEnvironment(0, { openingMoves: 0, reward: 'outcome' }, q.board);
      env.act(q.agent, answers[i] ?? '');
      const cell = env.board.findIndex((m, c) => m !== q.board[c]);
      if (cell < 0) t.forfeits++; // a forfeit leaves the board as it was
      else if (q.optimal.includes(cell)) t.optimal++;
    });
  }
  const score = (t: { positions: number; optimal: number; forfeits: number }): PositionScore => ({ ...t, rate: t.positions ? t.optimal / t.positions : 0 });
  return { x: score(tally.x), o: score(tally.o), all: score({ positions: tally.x.positions + tally.o.positions, optimal: tally.x.optimal + tally.o.optimal, forfeits: tally.x.forfeits + tally.o.forfeits }) };
}
