/**
 * Sudoku (4x4 by default, 9x9 by option): fill the empty cells so every row, column and box holds
 * each digit once (PettingLLMs' `stateful_env`).
 *
 * Generation: a valid full grid (a base pattern shuffled by digit, row-in-band, band, column-in-
 * stack and stack permutations and a transpose), then cells are emptied in random order while the
 * puzzle keeps exactly one solution, up to `emptyCells`. (The reference read a fixed file of 400
 * puzzles that were not guaranteed solvable or unique, indexed by `seed % 400`.)
 *
 * Action: fills separated by single spaces, `r,c,v` with 1-based row r and column c and value v,
 * e.g. `1,2,3 4,1,2`; v = 0 clears a cell filled earlier. Fills apply left to right until the
 * grid is solved; any after that are rejected (not free padding: see plan-path.ts). A fill is also
 * rejected (and changes nothing) when it targets a clue, repeats a digit in its row, column or box,
 * clears an empty cell, or writes the value already there.
 * Clues can never change: the reference counted any complete valid grid as solved without checking
 * that the original clues were kept; here a clue cannot be written, and `solved` checks them again.
 *
 * Per-fill reward (after the reference's list format, simplified):
 *   -0.01 per accepted fill; -0.3 per rejected fill
 *   a fill into an empty cell: +0.2 when that cell had a single candidate, +0.1 when it had two,
 *     and +0.5 * (1 / cells) for the rise in the filled fraction (a clear loses the same amount)
 *   solved: +2.0, and +0.5 more when the episode never had a rejected, overwriting or clearing fill.
 */
import { z } from 'zod';
import { trimAscii, type Parsed } from './action-text.ts';
import { checkSeed, parseOptions, type EnvironmentFactory } from './environment.ts';
import { PuzzleEnvironment, workflowOptionsShape, type MoveOutcome, type PuzzleState } from './puzzle-environment.ts';
import { Rng } from './rng.ts';

export const sudokuRewards = {
  step: -0.01,
  invalid: -0.3,
  singleCandidate: 0.2,
  twoCandidates: 0.1,
  progress: 0.5,
  solved: 2.0,
  clean: 0.5,
} as const;

/** The `candidates` option's values. */
export const sudokuCandidateViews = ['none', 'row-order', 'fewest-first'] as const;
export type SudokuCandidateView = (typeof sudokuCandidateViews)[number];

/** Default number of emptied cells per size. */
const defaultEmpty = { 4: 6, 9: 40 } as const;

export const sudokuOptionsSchema = z
  .object({
    /** Side of the grid: 4 (2x2 boxes) or 9 (3x3 boxes). */
    size: z.union([z.literal(4), z.literal(9)]).default(4).describe('Grid side: 4 or 9.'),
    /** Cells to empty (at most; fewer when uniqueness forbids more). Default 6 for 4x4, 40 for 9x9. */
    emptyCells: z.number().int().min(1).max(64).optional().describe('Cells to empty, at most (default 6 / 40).'),
    /** Whether and how the prompt's empty-cell line names each cell's candidate digits. */
    candidates: z
      .enum(sudokuCandidateViews)
      .default('none')
      .describe(
        "The prompt's empty-cell line: 'none' lists the empty cells ('empty: 1,4 2,1'); 'row-order' adds each cell's candidates, the digits its row, column and box leave ('empty: 1,4=2 2,1=13'); 'fewest-first' also orders the cells by their number of candidates, row by row within a count ('empty: 2,1=3 1,4=24'). With candidates the solver's demonstrations fill only the cells with one candidate each round (naked singles), which 'fewest-first' lists first. For the embedded character-level model, which cannot derive a cell's digit from the grid (docs/experiments/2026-11-28.md).",
      ),
    /** Whether the empty-cell line keeps the length it had when the puzzle began, padded with '_'. */
    padEmptyLine: z
      .boolean()
      .default(false)
      .describe(
        "Pad the empty-cell line with '_' to the length it had when the puzzle began, so that in later rounds, when fewer cells are listed, the list still starts as far from the end of the prompt as in the first round. For the embedded character-level model, whose tool copied a one-entry list no better than chance while it copied four-entry lists (docs/experiments/2026-11-28-sudoku.md). false: the line ends after the last cell.",
      ),
    ...workflowOptionsShape,
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.emptyCells !== undefined && o.emptyCells >= o.size * o.size) {
      ctx.addIssue({ code: 'custom', path: ['emptyCells'], message: `must be less than ${o.size * o.size} for size ${o.size}` });
    }
  });

export type SudokuOptions = z.output<typeof sudokuOptionsSchema>;

/** One fill: 0-based cell index and value (0 clears). */
export interface Fill {
  readonly cell: number;
  readonly value: number;
}

/** What clones share: the fixed puzzle. */
interface Spec {
  readonly n: number;
  readonly clues: readonly number[]; // 0 where the cell is not a clue
  readonly solution: readonly number[];
  readonly peers: readonly (readonly number[])[];
  /** The `candidates` option. */
  readonly candidateView: SudokuCandidateView;
  /** With `padEmptyLine`, the empty-cell line's length at the start; 0 leaves the line unpadded. */
  readonly emptyLineWidth: number;
}

const peerCache = new Map<number, readonly (readonly number[])[]>();

/** For each cell, the other cells of its row, column and box. */
function peersOf(n: number): readonly (readonly number[])[] {
  const cached = peerCache.get(n);
  if (cached) return cached;
  const b = Math.sqrt(n);
  const peers = Array.from({ length: n * n }, (_, i) => {
    const r = Math.floor(i / n);
    const c = i % n;
    const set = new Set<number>();
    for (let k = 0; k < n; k++) {
      set.add(r * n + k);
      set.add(k * n + c);
      set.add((r - (r % b) + Math.floor(k / b)) * n + (c - (c % b) + (k % b)));
    }
    set.delete(i);
    return Object.freeze([...set]);
  });
  peerCache.set(n, Object.freeze(peers));
  return peers;
}

/** Bitmask of the values (bit v) that `cell` may take given its peers. */
function candidates(cells: readonly number[], peers: readonly (readonly number[])[], n: number, cell: number): number {
  let used = 0;
  for (const p of peers[cell] as readonly number[]) used |= 1 << (cells[p] as number);
  return ((1 << (n + 1)) - 2) & ~used;
}

function bitCount(x: number): number {
  let count = 0;
  for (; x !== 0; x &= x - 1) count++;
  return count;
}

/** Number of completions of `cells`, counting no further than `limit` (backtracking, fewest candidates first). */
function countSolutions(cells: number[], peers: readonly (readonly number[])[], n: number, limit: number): number {
  let best = -1;
  let bestMask = 0;
  let bestCount = n + 1;
  for (let i = 0; i < cells.length; i++) {
    if (cells[i] !== 0) continue;
    const mask = candidates(cells, peers, n, i);
    const count = bitCount(mask);
    if (count < bestCount) [best, bestMask, bestCount] = [i, mask, count];
    if (count === 0) return 0;
  }
  if (best === -1) return 1;
  let found = 0;
  for (let v = 1; v <= n && found < limit; v++) {
    if ((bestMask & (1 << v)) === 0) continue;
    cells[best] = v;
    found += countSolutions(cells, peers, n, limit - found);
  }
  cells[best] = 0;
  return found;
}

class SudokuState implements PuzzleState<Fill[]> {
  readonly hint = 'fills r,c,v';
  readonly stuck = false; // any fill of ours can be cleared, so the solution stays reachable

  constructor(
    private readonly spec: Spec,
    private readonly cells: number[],
    /** False once the episode had a rejected, overwriting or clearing fill. */
    private clean: boolean,
    readonly optimalMoves: number,
  ) {}

  get title(): string {
    return `sudoku ${this.spec.n}x${this.spec.n}`;
  }

  /** The current grid, row-major, 0 for empty. */
  get grid(): readonly number[] {
    return this.cells;
  }

  /** The original clues, row-major, 0 where the cell was empty. */
  get clues(): readonly number[] {
    return this.spec.clues;
  }

  get solved(): boolean {
    const { n, clues, peers } = this.spec;
    return this.cells.every(
      (v, i) => v !== 0 && (clues[i] === 0 || clues[i] === v) && (peers[i] as readonly number[]).every((p) => this.cells[p] !== v),
    );
  }

  render(): string {
    const n = this.spec.n;
    const rows = [`rows, cols, boxes: 1-${n} once`];
    for (let r = 0; r < n; r++) rows.push(this.cells.slice(r * n, r * n + n).map((v) => (v === 0 ? '.' : String(v))).join(''));
    // The empty cells' coordinates, row by row, as the fills write them ("empty: 1,4 2,1"): the
    // embedded character-level model could not count its way to a '.' in the grid (measured: with
    // 3 empty cells it named a clue's coordinates in most fills and solved 0 of 256), as Plan-Path's
    // model could not locate the goal (plan-path.ts, "goal: 2D 1L").
    // With `candidates`, each cell also names the digits its peers leave ("1,4=2 2,1=13"), and with
    // 'fewest-first' the cells come in order of their candidate count (a stable sort keeps rows).
    const view = this.spec.candidateView;
    const empty = this.cells.flatMap((v, i) => {
      if (v !== 0) return [];
      const cell = `${Math.floor(i / n) + 1},${(i % n) + 1}`;
      if (view === 'none') return [{ text: cell, count: 0 }];
      const mask = candidates(this.cells, this.spec.peers, n, i);
      const digits = Array.from({ length: n }, (_, k) => k + 1).filter((d) => (mask & (1 << d)) !== 0);
      return [{ text: `${cell}=${digits.join('') || '-'}`, count: digits.length }];
    });
    if (view === 'fewest-first') empty.sort((a, b) => a.count - b.count);
    rows.push(`empty: ${empty.map((e) => e.text).join(' ') || 'none'}`.padEnd(this.spec.emptyLineWidth, '_'));
    return rows.join('\n');
  }

  parse(text: string): Parsed<Fill[]> {
    const n = this.spec.n;
    if (typeof text !== 'string') return { ok: false, error: 'action is not text' };
    const s = trimAscii(text);
    if (s.length === 0) return { ok: false, error: 'empty action: expected fills like 1,2,3 4,1,2' };
    const tokens = s.split(' ');
    if (tokens.length > 2 * n * n) return { ok: false, error: `too many fills: at most ${2 * n * n}` };
    const fills: Fill[] = [];
    for (const [k, token] of tokens.entries()) {
      const m = /^([0-9]),([0-9]),([0-9])$/.exec(token);
      const r = Number(m?.[1]);
      const c = Number(m?.[2]);
      const v = Number(m?.[3]);
      if (m === null || r < 1 || r > n || c < 1 || c > n || v > n) {
        return { ok: false, error: `fill ${k + 1}: expected r,c,v with r and c in 1-${n}, v in 0-${n}, one space apart` };
      }
      fills.push({ cell: (r - 1) * n + (c - 1), value: v });
    }
    return { ok: true, action: fills };
  }

  format(fills: Fill[]): string {
    const n = this.spec.n;
    return fills.map((f) => `${Math.floor(f.cell / n) + 1},${(f.cell % n) + 1},${f.value}`).join(' ');
  }

  apply(fills: Fill[]): MoveOutcome {
    const { n, clues, peers } = this.spec;
    const k = sudokuRewards;
    let reward = 0;
    let accepted = 0;
    const rejected: Fill[] = [];
    for (const f of fills) {
      // Fills after the grid is solved are rejected, not free (see plan-path.ts).
      if (this.solved) {
        rejected.push(f);
        reward += k.invalid;
        continue;
      }
      const current = this.cells[f.cell] as number;
      const allowed = candidates(this.cells, peers, n, f.cell);
      const ok =
        clues[f.cell] === 0 &&
        current !== f.value &&
        (f.value === 0 || (allowed & (1 << f.value)) !== 0);
      if (!ok) {
        rejected.push(f);
        reward += k.invalid;
        this.clean = false;
        continue;
      }
      accepted++;
      reward += k.step;
      if (current === 0) {
        const options = bitCount(allowed);
        reward += (options === 1 ? k.singleCandidate : options === 2 ? k.twoCandidates : 0) + k.progress / (n * n);
      } else {
        this.clean = false; // an overwrite or a clear fixes an earlier mistake
        if (f.value === 0) reward -= k.progress / (n * n);
      }
      this.cells[f.cell] = f.value;
      if (this.solved) reward += k.solved + (this.clean ? k.clean : 0);
    }
    const shown = rejected.slice(0, 3).map((f) => this.format([f]));
    const bad = rejected.length === 0 ? '0 bad' : `${rejected.length} bad (${shown.join(' ')}${rejected.length > 3 ? ' ...' : ''})`;
    const empty = this.cells.filter((v) => v === 0).length;
    return {
      reward,
      invalid: rejected.length,
      summary: `${accepted} ok, ${bad}, ${empty} empty, solved ${this.solved ? 'yes' : 'no'}`,
    };
  }

  /**
   * Clears every wrong fill, then fills the solution (found most constrained cell first), written row
   * by row. With `candidates`, after the clears only this round's naked singles (see below).
   */
  solve(): Fill[] {
    const { n, clues, solution, peers } = this.spec;
    const board = [...this.cells];
    const fills: Fill[] = [];
    board.forEach((v, i) => {
      if (clues[i] === 0 && v !== 0 && v !== solution[i]) {
        fills.push({ cell: i, value: 0 });
        board[i] = 0;
      }
    });
    if (this.spec.candidateView !== 'none') {
      // What the prompt lets a reader infer: the cells with one candidate now (the solution's digit,
      // since the board holds no wrong fill after the clears), row by row. When there is none, the
      // most constrained cell gets the solution's digit, a choice the prompt alone does not settle.
      const empties = board.flatMap((v, i) => (v === 0 ? [i] : []));
      const singles = empties.filter((i) => bitCount(candidates(board, peers, n, i)) === 1);
      const chosen =
        singles.length > 0
          ? singles
          : empties.length === 0
            ? []
            : [empties.reduce((a, b) => (bitCount(candidates(board, peers, n, b)) < bitCount(candidates(board, peers, n, a)) ? b : a))];
      return [...fills, ...chosen.map((i) => ({ cell: i, value: solution[i] as number }))];
    }
    for (;;) {
      let best = -1;
      let bestCount = n + 1;
      board.forEach((v, i) => {
        if (v !== 0) return;
        const count = bitCount(candidates(board, peers, n, i));
        if (count < bestCount) [best, bestCount] = [i, count];
      });
      // Written row by row, the order the prompt lists the empty cells in: every fill is the
      // solution's digit, so any order is accepted.
      if (best === -1) return [...fills.filter((f) => f.value === 0), ...fills.filter((f) => f.value !== 0).sort((a, b) => a.cell - b.cell)];
      board[best] = solution[best] as number;
      fills.push({ cell: best, value: solution[best] as number });
    }
  }

  /** One digit fill (the `variant`-th, modulo their count) given the next digit instead, n wrapping to 1. */
  flaw(fills: Fill[], variant: number): Fill[] | null {
    const digits = fills.flatMap((f, i) => (f.value === 0 ? [] : [i]));
    if (digits.length === 0) return null;
    const i = digits[variant % digits.length]!;
    return fills.map((f, j) => (j === i ? { cell: f.cell, value: (f.value % this.spec.n) + 1 } : f));
  }

  clone(): SudokuState {
    return new SudokuState(this.spec, [...this.cells], this.clean, this.optimalMoves);
  }
}

/** A full valid grid: a base pattern under random symmetry-preserving permutations. */
function fullGrid(rng: Rng, n: number): number[] {
  const b = Math.sqrt(n);
  const digits = rng.shuffle(Array.from({ length: n }, (_, i) => i + 1));
  const lines = (): number[] =>
    rng.shuffle(Array.from({ length: b }, (_, i) => i)).flatMap((band) => rng.shuffle(Array.from({ length: b }, (_, i) => band * b + i)));
  const rows = lines();
  const cols = lines();
  const transpose = rng.chance(0.5);
  const grid: number[] = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const [r, c] = transpose ? [cols[j] as number, rows[i] as number] : [rows[i] as number, cols[j] as number];
      grid.push(digits[(b * (r % b) + Math.floor(r / b) + c) % n] as number);
    }
  }
  return grid;
}

function generate(seed: number, n: 4 | 9, emptyCells: number, candidateView: SudokuCandidateView, padEmptyLine: boolean): SudokuState {
  const rng = new Rng(seed, 'sudoku');
  const peers = peersOf(n);
  const solution = fullGrid(rng, n);
  const cells = [...solution];
  let emptied = 0;
  for (const cell of rng.shuffle(Array.from({ length: n * n }, (_, i) => i))) {
    if (emptied === emptyCells) break;
    const value = cells[cell] as number;
    cells[cell] = 0;
    if (countSolutions(cells, peers, n, 2) === 1) emptied++;
    else cells[cell] = value;
  }
  const spec: Spec = { n, clues: Object.freeze([...cells]), solution: Object.freeze(solution), peers, candidateView, emptyLineWidth: 0 };
  // The unpadded render's last line is the empty-cell line.
  const width = padEmptyLine ? (new SudokuState(spec, [...cells], true, emptied).render().split('\n').at(-1) as string).length : 0;
  return new SudokuState({ ...spec, emptyLineWidth: width }, cells, true, emptied);
}

export const sudoku = {
  description: 'Sudoku: fill the grid so rows, columns and boxes hold each digit once; clues are fixed.',
  optionsSchema: sudokuOptionsSchema,
  create(seed: number, options?: unknown): PuzzleEnvironment<Fill[]> {
    const o = parseOptions(sudokuOptionsSchema, options, 'sudoku');
    checkSeed(seed, 'sudoku');
    return PuzzleEnvironment.start('sudoku', seed, generate(seed, o.size, o.emptyCells ?? defaultEmpty[o.size], o.candidates, o.padEmptyLine), o);
  },
} satisfies EnvironmentFactory<SudokuOptions>;
