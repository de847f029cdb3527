/**
 * Tic-tac-toe rules and perfect play, shared by the environment and its opponents.
 *
 * Cells are numbered 0..8 row by row here (1..9 in action text). X always moves first, so the side
 * to move follows from the counts. Perfect play is a memoised negamax over the at most 5478 legal
 * positions; its scores prefer faster wins and slower losses, and ties go to the lowest cell, so
 * the minimax player is deterministic.
 */

export type Mark = 'X' | 'O';
export type Board = readonly (Mark | null)[];

const lines = [
  [0, 1, 2], [3, 4, 5], [6, 7, 8],
  [0, 3, 6], [1, 4, 7], [2, 5, 8],
  [0, 4, 8], [2, 4, 6],
] as const;

/** A fresh empty board. */
export function emptyBoard(): (Mark | null)[] {
  return new Array<Mark | null>(9).fill(null);
}

/** The mark with three in a line, or null. */
export function winnerOf(board: Board): Mark | null {
  for (const [a, b, c] of lines) {
    const m = board[a];
    if (m !== null && m !== undefined && m === board[b] && m === board[c]) return m;
  }
  return null;
}

/** Empty cells, ascending. */
export function legalMoves(board: Board): number[] {
  const moves: number[] = [];
  board.forEach((m, i) => {
    if (m === null) moves.push(i);
  });
  return moves;
}

/** Whose move it is: X when both have placed as many marks. */
export function toMove(board: Board): Mark {
  const xs = board.filter((m) => m === 'X').length;
  const os = board.filter((m) => m === 'O').length;
  return xs === os ? 'X' : 'O';
}

/** Whether the game is over (a line, or a full board). */
export function isOver(board: Board): boolean {
  return winnerOf(board) !== null || board.every((m) => m !== null);
}

const memo = new Map<string, number>();

/**
 * Score for the side to move under perfect play: positive wins (larger = sooner), 0 draws,
 * negative loses (more negative = sooner).
 */
function negamax(board: (Mark | null)[]): number {
  const key = board.map((m) => m ?? '.').join('');
  const cached = memo.get(key);
  if (cached !== undefined) return cached;
  const empty = board.filter((m) => m === null).length;
  let score: number;
  if (winnerOf(board) !== null) score = -(1 + empty); // the previous move won
  else if (empty === 0) score = 0;
  else {
    score = -Infinity;
    const mark = toMove(board);
    for (const cell of legalMoves(board)) {
      board[cell] = mark;
      score = Math.max(score, -negamax(board));
      board[cell] = null;
    }
  }
  memo.set(key, score);
  return score;
}

/** Perfect-play score of playing `cell` for the side to move (see negamax). */
function scoreOf(board: Board, cell: number): number {
  const next = [...board];
  next[cell] = toMove(board);
  return -negamax(next);
}

/** Game-theoretic value of playing `cell`, for the mover: 1 forced win, 0 draw, -1 forced loss. */
export function moveValue(board: Board, cell: number): -1 | 0 | 1 {
  const s = scoreOf(board, cell);
  return s > 0 ? 1 : s < 0 ? -1 : 0;
}

/** Every move of the best game value (forced win, else draw, else loss) for the mover. The game must not be over. */
export function optimalMoves(board: Board): number[] {
  if (isOver(board)) throw new Error('tic-tac-toe: no move in a finished game');
  const values = legalMoves(board).map((cell) => ({ cell, value: moveValue(board, cell) }));
  const top = Math.max(...values.map((v) => v.value));
  return values.filter((v) => v.value === top).map((v) => v.cell);
}

/**
 * Every move of the best score (the best game value, the faster win or the slower loss), lowest
 * cell first: the moves `bestMove` chooses among. The game must not be over.
 */
export function bestMoves(board: Board): number[] {
  if (isOver(board)) throw new Error('tic-tac-toe: no move in a finished game');
  const scored = legalMoves(board).map((cell) => ({ cell, score: scoreOf(board, cell) }));
  const top = Math.max(...scored.map((m) => m.score));
  return scored.filter((m) => m.score === top).map((m) => m.cell);
}

/** The perfect move: best score, ties to the lowest cell. The game must not be over. */
export function bestMove(board: Board): number {
  return bestMoves(board)[0]!;
}

let reachable: readonly Board[] | null = null;

/**
 * Every position legal play reaches from the empty board with the game not over, the empty board
 * included (4520; 2423 with X to move), in a fixed order. Computed once.
 */
export function reachablePositions(): readonly Board[] {
  if (reachable) return reachable;
  const seen = new Set<string>();
  const out: Board[] = [];
  const visit = (board: (Mark | null)[]): void => {
    const key = board.map((m) => m ?? '.').join('');
    if (seen.has(key) || isOver(board)) return;
    seen.add(key);
    out.push([...board]);
    const mark = toMove(board);
    for (const cell of legalMoves(board)) {
      board[cell] = mark;
      visit(board);
      board[cell] = null;
    }
  };
  visit(emptyBoard());
  reachable = out;
  return out;
}
