/**
 * Strict parsing of action text, shared by the environments.
 *
 * Grammars are deliberately tiny (a string of move letters, a list of `r,c,v` fills, one digit) so
 * a small character-level model can emit them. Strict means: after surrounding ASCII whitespace is
 * dropped (a response usually ends in a newline), the whole text must match the grammar. Nothing is
 * guessed: the reference fell back to a random legal move or to any bracketed list it could find,
 * which rewards sloppy output and hides errors. A failure is a value, never an exception, and its
 * message never quotes raw text beyond one described character, so it is safe to show anywhere.
 */

/** Result of parsing an action. */
export type Parsed<A> = { readonly ok: true; readonly action: A } | { readonly ok: false; readonly error: string };

const printable = /^[\x20-\x7e\n]*$/;

/** Whether `s` uses only printable ASCII (codes 32..126) and '\n'. */
export function isPrintableText(s: string): boolean {
  return printable.test(s);
}

/** Drops leading and trailing ASCII whitespace (space, tab, CR, LF) and nothing else. */
export function trimAscii(s: string): string {
  return s.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
}

/** Describes one character safely: 'x' when printable, else its code. */
export function describeChar(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  return code >= 0x20 && code <= 0x7e ? `'${ch}'` : `code ${code}`;
}

/** Grid moves: Up, Down, Left, Right, as row/column deltas. */
export const directions = {
  U: { dr: -1, dc: 0 },
  D: { dr: 1, dc: 0 },
  L: { dr: 0, dc: -1 },
  R: { dr: 0, dc: 1 },
} as const satisfies Record<string, { dr: number; dc: number }>;

export type Direction = keyof typeof directions;

/** The cell one move `d` away from `cell` on a square grid of side `size`, or null off the grid. */
export function stepCell(size: number, cell: number, d: Direction): number | null {
  const r = Math.floor(cell / size) + directions[d].dr;
  const c = (cell % size) + directions[d].dc;
  return r < 0 || r >= size || c < 0 || c >= size ? null : r * size + c;
}

/** Moves between two cells of a square grid of side `size`, walls aside. */
export function manhattan(size: number, a: number, b: number): number {
  return Math.abs(Math.floor(a / size) - Math.floor(b / size)) + Math.abs((a % size) - (b % size));
}

/**
 * Where cell `to` lies from cell `from` on a square grid of side `size`, spelled in move letters
 * with the row first ("2D 1L", "3R"), or "here" when they coincide. A tiny character-level model
 * reads this far more easily than it locates two cells in a grid and counts the rows between them
 * (measured on Plan-Path: docs/experiments).
 */
export function formatOffset(size: number, from: number, to: number): string {
  const dr = Math.floor(to / size) - Math.floor(from / size);
  const dc = (to % size) - (from % size);
  const parts = [dr > 0 ? `${dr}D` : dr < 0 ? `${-dr}U` : '', dc > 0 ? `${dc}R` : dc < 0 ? `${-dc}L` : ''];
  return parts.filter(Boolean).join(' ') || 'here';
}

/** Directions in the fixed order solvers expand them (so solutions are deterministic). */
export const directionOrder: readonly Direction[] = ['U', 'D', 'L', 'R'];

function isDirection(ch: string): ch is Direction {
  return ch === 'U' || ch === 'D' || ch === 'L' || ch === 'R';
}

/**
 * Parses a move string such as `RRDDL`: 1..maxMoves letters from U, D, L, R, nothing else (no
 * separators, no lower case).
 */
export function parseMoves(text: unknown, maxMoves: number): Parsed<Direction[]> {
  if (typeof text !== 'string') return { ok: false, error: 'action is not text' };
  const s = trimAscii(text);
  if (s.length === 0) return { ok: false, error: 'empty action: expected moves like RRDL' };
  if (s.length > maxMoves) return { ok: false, error: `too many moves: at most ${maxMoves}` };
  const moves: Direction[] = [];
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] as string;
    if (!isDirection(ch)) {
      return { ok: false, error: `bad move ${describeChar(ch)} at position ${i + 1}: use U, D, L, R` };
    }
    moves.push(ch);
  }
  return { ok: true, action: moves };
}

/** Formats moves back to their action text. */
export function formatMoves(moves: readonly Direction[]): string {
  return moves.join('');
}

/**
 * `moves` with one small mistake, for proposals a planner must judge (`PuzzleState.flaw`): the
 * `variant`-th pair (modulo their count) of different neighbouring moves swapped, which is often
 * another shortest path and often a bump; without such a pair ("RRRR"), the last move dropped.
 * Null when fewer than two moves leave nothing to flaw.
 */
export function flawMoves(moves: readonly Direction[], variant: number): Direction[] | null {
  if (moves.length < 2) return null;
  const pairs = moves.slice(1).flatMap((d, j) => (d === moves[j] ? [] : [j]));
  if (pairs.length === 0) return moves.slice(0, -1);
  const i = pairs[variant % pairs.length]!;
  const out = [...moves];
  [out[i], out[i + 1]] = [moves[i + 1]!, moves[i]!];
  return out;
}
