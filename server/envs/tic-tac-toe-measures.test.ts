/**
 * Tic-tac-toe's evaluation measures, through the registry `evaluate` reads them from: a policy
 * that plays perfectly from the prompt alone (as a model must) never loses to minimax and finds a
 * perfect move in every reachable position; one that always answers the same cell forfeits.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GreedyPolicy } from './environment-measures.ts';
import { measuresOf } from './environments.ts';
import { bestMove, type Board, type Mark } from './tic-tac-toe-board.ts';

/** The board a tic-tac-toe prompt shows: three rows of three, a digit for a free cell. */
function boardOf(observation: string): Board {
  const rows = observation.split('\n').filter((l) => /^[XO1-9]{3}$/.test(l));
  assert.equal(rows.length, 3, `no board in ${JSON.stringify(observation)}`);
  return rows.join('').split('').map((c): Mark | null => (c === 'X' || c === 'O' ? c : null));
}

const fromPrompt = (answer: (observation: string) => string): GreedyPolicy => ({
  answer: async (observation) => answer(observation),
  answerAll: async (queries) => queries.map((q) => answer(q.observation)),
});

test('tic-tac-toe measures: a perfect player reading only the prompt never loses to minimax and scores every position', async () => {
  const measure = measuresOf('tic-tac-toe');
  assert.ok(measure, 'tic-tac-toe contributes measures');
  const m = await measure(fromPrompt((o) => String(bestMove(boardOf(o)) + 1)), { games: 6, seed: 11 });
  assert.ok(m.opponents && m.positions);
  // Perfect play against perfect play is a draw every game; against random it wins some.
  assert.deepEqual([m.opponents.minimax.games, m.opponents.minimax.draws, m.opponents.minimax.forfeits], [6, 6, 0]);
  assert.deepEqual([m.opponents.random.games, m.opponents.random.losses], [6, 0]);
  assert.ok(m.opponents.random.wins > 0);
  assert.deepEqual([m.positions.all.positions, m.positions.all.optimal, m.positions.all.rate], [4520, 4520, 1]);
});

test('tic-tac-toe measures: a policy that always answers 5 forfeits once the centre is taken', async () => {
  const m = await measuresOf('tic-tac-toe')!(fromPrompt(() => '5'), { games: 4, seed: 2 });
  assert.ok(m.opponents && m.positions);
  assert.equal(m.opponents.minimax.wins, 0);
  assert.ok(m.positions.all.forfeits > 0 && m.positions.all.rate < 1);
});

test('environments without measures of their own contribute none; unknown names none either', () => {
  for (const name of ['plan-path', 'sudoku', 'sokoban', 'math', 'code', 'hanabi', 'no-such-env']) assert.equal(measuresOf(name), undefined, name);
});
