/**
 * Sudoku in the chat format (sudoku.ts has the puzzle and its terse prompt). The reference took
 * either a whole grid or a list of `[r, c, v]` fills (PettingLLMs' `stateful_env`); both are read here: a
 * grid becomes the fills of the cells it changes, in row order.
 */
import type { Parsed } from '../action-text.ts';
import { parseIntegerRows } from './chat-answer.ts';
import { puzzleChatPrompter } from './puzzle-chat.ts';

const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });

/** The grid in a terse observation: n lines of digits and '.', after the title "sudoku NxN". */
export function observedGrid(observation: string): number[][] | null {
  const n = Number(/^sudoku (\d+)x\d+/.exec(observation)?.[1]);
  if (!Number.isInteger(n) || n < 1) return null;
  const rows = observation.split('\n').filter((l) => l.length === n && /^[0-9.]+$/.test(l));
  return rows.length === n ? rows.map((l) => [...l].map((ch) => (ch === '.' ? 0 : Number(ch)))) : null;
}

function toFills(payload: string, observation: string): Parsed<string> {
  // The terse form itself ("1,4,2 2,1,1") is fine too.
  if (/^\d+,\d+,\d+(\s+\d+,\d+,\d+)*$/.test(payload.trim())) return { ok: true, action: payload.trim().split(/\s+/).join(' ') };
  const rows = parseIntegerRows(payload);
  if (!rows.ok) return rows;
  if (rows.action.every((r) => r.length === 3)) return { ok: true, action: rows.action.map((r) => r.join(',')).join(' ') };
  const grid = observedGrid(observation);
  if (grid === null) throw new Error('sudoku chat prompt: the observation has no grid (the terse prompt changed?)');
  const n = grid.length;
  if (rows.action.length !== n || rows.action.some((r) => r.length !== n)) {
    return fail(`the answer must be fills [row, column, value] or the whole ${n}x${n} grid as ${n} rows of ${n} digits`);
  }
  const fills: string[] = [];
  rows.action.forEach((row, r) => row.forEach((v, c) => {
    if (v !== grid[r]![c]) fills.push(`${r + 1},${c + 1},${v}`);
  }));
  if (fills.length === 0) return fail('the answered grid changes no cell');
  return { ok: true, action: fills.join(' ') };
}

export const sudokuChat = puzzleChatPrompter({
  task: 'solve a Sudoku puzzle',
  rules: [
    'Fill every empty cell (.) so that each row, each column and each box holds every digit from 1 to N exactly once, for an N x N grid (4x4 has 2x2 boxes, 9x9 has 3x3 boxes). The given digits (clues) never change.',
    'A fill is [row, column, value] with rows and columns counted from 1 at the top left; value 0 clears a cell filled earlier. Fills are applied in order; a fill that repeats a digit in its row, column or box, or changes a clue, is rejected and wasted.',
  ],
  report: 'tool: <fills>: <a> ok, <b> bad, <c> empty, solved yes|no',
  reportMeaning: 'how many of the proposed fills would be accepted and rejected, how many cells would stay empty, and whether the grid would be solved',
  answer: 'a JSON list of fills [row, column, value] (or the whole completed grid as a list of rows)',
  example: '[[1,4,2],[2,1,1]]',
  request: {
    tool: 'Propose the fills that solve the grid.',
    plan: 'Decide the fills to make now.',
    solo: 'Give the fills that solve the grid.',
  },
  toAction: toFills,
  formatPayload: (action) => JSON.stringify(action.split(' ').map((f) => f.split(',').map(Number))),
});
