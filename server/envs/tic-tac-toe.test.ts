// Tic-tac-toe: the minimax opponent is perfect (never loses to random, draws itself), forfeits end
// the game, both reward modes score moves as documented, and openings follow the seed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Rng } from './rng.ts';
import { trainSeed } from './seed-ranges.ts';
import { bestMove, bestMoves, isOver, legalMoves, moveValue, optimalMoves, reachablePositions, winnerOf, type Board } from './tic-tac-toe-board.ts';
import { evaluateAgainst, minimaxPlayer, playAgainst, playerPolicy, randomPlayer, scorePositions, ticTacToeOpponents, type BatchTextPolicy } from './tic-tac-toe-players.ts';
import { moveReward, ticTacToe, ticTacToeRewards, trapShare } from './tic-tac-toe.ts';

test('minimax never loses to random, on either side, over many games', async () => {
  for (const side of ['x', 'o'] as const) {
    const r = await evaluateAgainst(playerPolicy(minimaxPlayer, new Rng(0)), randomPlayer, { games: 600, side, seed: 1000 });
    assert.equal(r.losses, 0, `minimax lost as ${side}`);
    assert.equal(r.forfeits, 0);
    assert.ok(r.winRate > (side === 'x' ? 0.9 : 0.6), `win rate ${r.winRate} as ${side}`);
  }
});

test('minimax draws against itself, and random loses to minimax most of the time', async () => {
  const self = await evaluateAgainst(playerPolicy(minimaxPlayer, new Rng(0)), minimaxPlayer, { games: 4, side: 'both', seed: 0 });
  assert.equal(self.draws, 4);
  const rand = await evaluateAgainst(playerPolicy(randomPlayer, new Rng(3)), ticTacToeOpponents.minimax, { games: 300, side: 'both', seed: 7 });
  assert.equal(rand.wins, 0);
  assert.ok(rand.losses > 200);
});

test('minimax varies its games with the seed, so a greedy policy meets many positions', async () => {
  // A fixed policy (first free cell) against minimax: every game differs only by minimax's choices.
  const games = new Set<string>();
  for (let g = 0; g < 32; g++) {
    const seen: string[] = [];
    const firstFree: Parameters<typeof evaluateAgainst>[0] = (_obs, game) => {
      seen.push(game.board.map((m) => m ?? '.').join(''));
      return String(legalMoves(game.board)[0]! + 1);
    };
    const r = await evaluateAgainst(firstFree, minimaxPlayer, { games: 1, side: 'o', seed: 100 + g });
    assert.equal(r.wins, 0, 'minimax never loses');
    games.add(seen.join('|'));
  }
  assert.ok(games.size >= 5, `${games.size} distinct games in 32`);
});

test('perfect play agrees with brute force on every reachable position', () => {
  // Plain minimax over win/draw/loss, memoised by position: the value for the side to move.
  const memo = new Map<string, number>();
  const value = (board: (string | null)[], mark: string): number => {
    const key = board.map((m) => m ?? '.').join('');
    const known = memo.get(key);
    if (known !== undefined) return known;
    const w = winnerOf(board as Board);
    let v: number;
    if (w !== null) v = w === mark ? 1 : -1;
    else if (board.every((m) => m !== null)) v = 0;
    else {
      v = -1;
      for (const cell of legalMoves(board as Board)) {
        board[cell] = mark;
        v = Math.max(v, -value(board, mark === 'X' ? 'O' : 'X') + 0);
        board[cell] = null;
      }
    }
    memo.set(key, v);
    return v;
  };
  const visited = new Set<string>();
  const visit = (board: (string | null)[], mark: string): void => {
    const key = board.map((m) => m ?? '.').join('');
    if (isOver(board as Board) || visited.has(key)) return;
    visited.add(key);
    const v = value(board, mark);
    assert.equal(moveValue(board as Board, bestMove(board as Board)), v, key);
    for (const cell of legalMoves(board as Board)) {
      board[cell] = mark;
      assert.equal(moveValue(board.map((m, i) => (i === cell ? null : m)) as Board, cell), -value(board, mark === 'X' ? 'O' : 'X') + 0, `${key} @${cell}`);
      visit(board, mark === 'X' ? 'O' : 'X');
      board[cell] = null;
    }
  };
  visit(Array<string | null>(9).fill(null), 'X');
  assert.equal(visited.size, 4520, 'non-terminal reachable positions');
  assert.deepEqual(new Set(reachablePositions().map((b) => b.map((m) => m ?? '.').join(''))), visited, 'reachablePositions is every one of them');
});

test('scorePositions: perfect play scores 100%, a move of lower value or a forfeit counts against, each position once', async () => {
  const perfect: BatchTextPolicy = async (qs) => qs.map((q) => String(bestMove(q.board) + 1));
  const all = await scorePositions(perfect, 1000);
  assert.deepEqual([all.x.positions, all.o.positions, all.all.positions], [2423, 2097, 4520]);
  assert.deepEqual([all.all.optimal, all.all.forfeits, all.all.rate], [4520, 0, 1]);
  // The prompt is what a game from the empty board shows at that position.
  const seen: string[] = [];
  await scorePositions(async (qs) => {
    seen.push(...qs.filter((q) => q.board.filter((m) => m !== null).length === 3).map((q) => q.observation));
    return qs.map(() => '5');
  });
  assert.ok(seen.includes('tic-tac-toe, turn 2/5\nX2O\n4X6\n789\no: move for O (a free digit)\n'), seen[0]);
  // Always the lowest legal move but one position in three answered with junk: exact counts.
  let i = 0;
  let junk = 0;
  let lowestOptimal = 0;
  const mixed = await scorePositions(async (qs) =>
    qs.map((q) => {
      if (i++ % 3 === 0) return junk++, 'x';
      const cell = legalMoves(q.board)[0]!;
      if (optimalMoves(q.board).includes(cell)) lowestOptimal++;
      return String(cell + 1);
    }),
  );
  assert.equal(mixed.all.forfeits, junk);
  assert.equal(mixed.all.optimal, lowestOptimal);
  assert.ok(mixed.all.optimal < 4520 - junk, 'the lowest free cell is not always perfect play');
  assert.equal(mixed.x.optimal + mixed.o.optimal, mixed.all.optimal);
  // An occupied cell is a forfeit too.
  const occupied = await scorePositions(async (qs) => qs.map((q) => String((q.board.findIndex((m) => m !== null) + 1) || 5)));
  assert.equal(occupied.all.forfeits, 4520 - 1, 'every position but the empty board');
});

test('a malformed answer or an occupied cell forfeits: -2, game over, the opponent wins', () => {
  for (const text of ['', '0', '10', 'x', '5 5', 'center', '\u0005']) {
    const env = ticTacToe.create(1);
    const r = env.act('x', text);
    assert.notEqual(r.parseError, null, text);
    assert.equal(r.illegal, undefined, 'unparsed, not refused by the rules');
    assert.equal(r.localReward, ticTacToeRewards.forfeit);
    assert.ok(r.done && !r.success);
    assert.equal(env.winner, 'O');
    assert.equal(env.forfeitedBy, 'x');
    assert.equal(env.stats['x']?.parseErrors, 1);
  }
  const env = ticTacToe.create(1);
  env.act('x', '5');
  const r = env.act('o', ' 5\n');
  assert.equal(r.parseError, null);
  assert.equal(r.illegal, true, 'a taken cell is a well-formed act the rules refuse');
  assert.equal(r.localReward, ticTacToeRewards.forfeit);
  assert.match(r.info, /cell 5 is taken: o forfeits/);
  assert.equal(env.winner, 'X');
  assert.equal(env.stats['o']?.invalidMoves, 1);
});

test("'outcome' rewards only the winning move; 'minimax' scores each move by its perfect-play value", () => {
  // X takes a corner, O answers on an adjacent edge (a known loss), X wins with perfect play.
  const play = (reward: 'outcome' | 'minimax'): number[] => {
    const env = ticTacToe.create(0, { reward });
    const rewards = [env.act('x', '1').localReward, env.act('o', '2').localReward];
    while (!env.done) {
      const agent = env.currentAgent();
      rewards.push(env.act(agent, env.solution(agent)).localReward);
    }
    assert.equal(env.winner, 'X');
    return rewards;
  };
  const outcome = play('outcome');
  assert.deepEqual(outcome.slice(0, -1).every((r) => r === 0), true);
  assert.equal(outcome.at(-1), ticTacToeRewards.win);
  const minimax = play('minimax');
  assert.equal(minimax[0], 0, 'a corner opening draws');
  assert.equal(minimax[1], -1, 'the adjacent edge loses');
  minimax.forEach((r, i) => i > 0 && i % 2 === 0 && assert.equal(r, 1, `X move ${i} keeps the forced win`));
});

test('openings follow the seed, never end the game, and the turn order follows the board', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const openingMoves = i % 5;
    const env = ticTacToe.create(trainSeed(i), { openingMoves });
    assert.deepEqual(env.board, ticTacToe.create(trainSeed(i), { openingMoves }).board);
    assert.equal(env.board.filter((m) => m !== null).length, openingMoves);
    assert.ok(!env.done);
    assert.equal(env.currentAgent(), openingMoves % 2 === 0 ? 'x' : 'o');
    const prompt = env.observe(env.currentAgent());
    const rows = prompt.split('\n').slice(1, 4).join('');
    env.board.forEach((m, k) => assert.equal(rows[k], m ?? String(k + 1)));
    if (openingMoves === 3) seen.add(rows);
  }
  assert.ok(seen.size > 30);
});

test('an opening range draws each count in it per seed, the same for a seed every time', () => {
  const counts = new Map<number, number>();
  for (let i = 0; i < 300; i++) {
    const env = ticTacToe.create(trainSeed(i), { openingMoves: [0, 3] });
    const n = env.board.filter((m) => m !== null).length;
    assert.deepEqual(env.board, ticTacToe.create(trainSeed(i), { openingMoves: [0, 3] }).board);
    counts.set(n, (counts.get(n) ?? 0) + 1);
  }
  assert.deepEqual([...counts.keys()].sort(), [0, 1, 2, 3]);
  for (const [n, c] of counts) assert.ok(c > 40, `${c} of 300 seeds open with ${n} moves`);
  // A range of one count is that count, with the same boards as the plain number.
  assert.deepEqual(ticTacToe.create(trainSeed(7), { openingMoves: [2, 2] }).board, ticTacToe.create(trainSeed(7), { openingMoves: 2 }).board);
  assert.throws(() => ticTacToe.create(1, { openingMoves: [3, 1] }), /openingMoves.*min <= max/s);
  assert.throws(() => ticTacToe.create(1, { openingMoves: [0, 5] }), /openingMoves/);
});

test('randomOpening: a share of the seeds opens with exactly `plies` random legal moves, drawn from the seed', () => {
  for (const [share, plies] of [[0.5, 1], [0.3, 2], [1, 3], [0.8, 4]] as const) {
    const options = { openingMoves: 0, randomOpening: { share, plies } };
    let forced = 0;
    const firstCells = new Map<number, number>();
    for (let i = 0; i < 1000; i++) {
      const env = ticTacToe.create(trainSeed(i), options);
      const again = ticTacToe.create(trainSeed(i), options);
      assert.deepEqual(env.board, again.board, 'the same seed opens the same way');
      assert.equal(env.observe(env.currentAgent()), again.observe(again.currentAgent()));
      const n = env.board.filter((m) => m !== null).length;
      assert.ok(n === 0 || n === plies, `${n} opening moves with plies ${plies}`);
      if (n === 0) continue;
      forced++;
      // Legal: alternate marks from X, nobody has won, the side to move follows the count.
      const xs = env.board.filter((m) => m === 'X').length;
      assert.equal(xs, Math.ceil(plies / 2));
      assert.equal(n - xs, Math.floor(plies / 2));
      assert.equal(winnerOf(env.board), null);
      assert.ok(!env.done);
      assert.equal(env.currentAgent(), plies % 2 === 0 ? 'x' : 'o');
      if (plies === 1) {
        const cell = env.board.findIndex((m) => m !== null);
        firstCells.set(cell, (firstCells.get(cell) ?? 0) + 1);
      }
    }
    assert.ok(Math.abs(forced / 1000 - share) < 0.05, `${forced} of 1000 seeds forced with share ${share}`);
    // Uniform over the legal moves: every first move, each near its ninth.
    if (plies === 1) for (let c = 0; c < 9; c++) assert.ok((firstCells.get(c) ?? 0) > forced / 9 / 2, `cell ${c + 1} opened ${firstCells.get(c) ?? 0} of ${forced}`);
  }
  // Another seed range deals other openings: they come from the seed, not a fixed list.
  const boards = (from: number) => Array.from({ length: 20 }, (_, i) => ticTacToe.create(trainSeed(from + i), { randomOpening: { share: 1, plies: 2 } }).board.join());
  assert.notDeepEqual(boards(0), boards(1000));
});

test('randomOpening off, or outside its share, leaves every seed as it was; bad values are refused', () => {
  const base = { openingMoves: [0, 3], reward: 'minimax' } as const;
  // Off by default, and absent from the parsed options (the warm start's cache key is unchanged).
  assert.ok(!('randomOpening' in ticTacToe.create(1, base).options));
  let outside = 0;
  for (let i = 0; i < 500; i++) {
    const plain = ticTacToe.create(trainSeed(i), base);
    const none = ticTacToe.create(trainSeed(i), { ...base, randomOpening: { share: 0, plies: 1 } });
    assert.equal(none.observe(none.currentAgent()), plain.observe(plain.currentAgent()), 'share 0 changes nothing');
    const half = ticTacToe.create(trainSeed(i), { ...base, randomOpening: { share: 0.5, plies: 2 } });
    const n = half.board.filter((m) => m !== null).length;
    if (n !== 2 || half.board.join() === plain.board.join()) {
      // Not forced (or forced to the same board): the openingMoves board, byte for byte.
      assert.equal(half.observe(half.currentAgent()), plain.observe(plain.currentAgent()));
      outside++;
    }
  }
  assert.ok(outside > 150, `${outside} of 500 seeds outside the share`);
  for (const bad of [{ share: 1.5, plies: 1 }, { share: -0.1, plies: 1 }, { share: 0.5, plies: 0 }, { share: 0.5, plies: 5 }, { share: 0.5, plies: 1.5 }, { share: 0.5 }, { share: 0.5, plies: 1, extra: 1 }]) {
    assert.throws(() => ticTacToe.create(1, { randomOpening: bad }), /randomOpening/, JSON.stringify(bad));
  }
});

test('turn counts rounds of one move each; playAgainst reports forfeits from the policy side', async () => {
  const env = ticTacToe.create(0);
  const turns: number[] = [];
  while (!env.done) {
    turns.push(env.turn);
    const agent = env.currentAgent();
    env.act(agent, env.solution(agent));
  }
  assert.deepEqual(turns, [0, 0, 1, 1, 2, 2, 3, 3, 4]);
  const junk = await playAgainst(() => 'my move is 5', minimaxPlayer, { side: 'o', seed: 3 });
  assert.deepEqual(junk, { outcome: 'loss', forfeit: true, moves: 2 });
  const asyncPolicy = await playAgainst(async (_obs, game) => String(bestMove(game.board) + 1), randomPlayer, { side: 'x', seed: 3 });
  assert.notEqual(asyncPolicy.outcome, 'loss');
});

test("solutionTies 'seeded' demonstrates a perfect move drawn per seed and position; the default is the lowest", () => {
  // The default: the lowest of the best moves, and options without the field parse to what they did.
  const plain = ticTacToe.create(5, { openingMoves: 0 });
  assert.equal(plain.solution('x'), '1');
  assert.ok(!('solutionTies' in plain.options), 'an absent solutionTies must stay absent (warm-start cache keys)');
  const openings = new Set<string>();
  for (let seed = 0; seed < 60; seed++) {
    const env = ticTacToe.create(seed, { openingMoves: [0, 3], solutionTies: 'seeded' });
    // The same position and seed give the same move, every time and in a clone.
    assert.equal(env.solution(env.currentAgent()), env.solution(env.currentAgent()));
    assert.equal(env.clone().solution(env.currentAgent()), env.solution(env.currentAgent()));
    if (env.board.every((m) => m === null)) openings.add(env.solution('x'));
    while (!env.done) {
      const agent = env.currentAgent();
      const move = env.solution(agent);
      assert.ok(bestMoves(env.board).includes(Number(move) - 1), `seed ${seed}: ${move} is not a best move`);
      env.act(agent, move);
    }
    assert.ok(env.success);
  }
  // On the empty board every cell draws: seeded ties open on several cells, not only on 1.
  assert.ok(openings.size >= 4, `x opened on ${[...openings].join(',')} only`);
  assert.deepEqual(bestMoves([null, null, null, null, null, null, null, null, null]), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.throws(() => ticTacToe.create(1, { solutionTies: 'random' }), /solutionTies/);
});

/** A board from 9 characters, row by row: X, O, or anything else for a free cell. */
const boardOf = (cells: string): Board => cells.split('').map((c) => (c === 'X' || c === 'O' ? c : null));
/** The 'minimax-traps' reward of each legal move, by its digit. */
const trapRewards = (cells: string): Record<string, number> =>
  Object.fromEntries(legalMoves(boardOf(cells)).map((c) => [String(c + 1), moveReward(boardOf(cells), c, 'minimax-traps')]));

test("'minimax-traps' ranks a forced win over every drawing move, drawing moves by the share of replies that lose, and both over a losing move", () => {
  const near = (a: number, b: number) => Math.abs(a - b) < 1e-12;
  // The empty board: every move draws; a corner leaves 7 of 8 replies losing (all but the centre), the centre and an edge 4 of 8.
  const empty = trapRewards('.........');
  for (const d of ['1', '3', '7', '9']) assert.ok(near(empty[d]!, 7 / 8), `corner ${d}: ${empty[d]}`);
  for (const d of ['2', '4', '5', '6', '8']) assert.ok(near(empty[d]!, 4 / 8), `${d}: ${empty[d]}`);
  // X corner, O centre: a move that threatens a line (2, 3, 4, 7) leaves O one block among 6 replies.
  const threat = trapRewards('X...O....');
  for (const d of ['2', '3', '4', '7']) assert.ok(near(threat[d]!, 5 / 6), `${d}: ${threat[d]}`);
  for (const d of ['6', '8', '9']) assert.ok(near(threat[d]!, 2 / 6), `${d}: ${threat[d]}`);
  // X corner, O opposite corner: 3 and 7 win by force; 5 draws (4 of 6 replies lose), 6 and 8 draw
  // (3 of 6); 2 and 4 lose by force although 5 of 6 of O's replies would lose (the bonus is for drawing moves only).
  const mixed = trapRewards('X.......O');
  assert.deepEqual([mixed['3'], mixed['7'], mixed['2'], mixed['4']], [1, 1, -1, -1]);
  assert.ok(near(mixed['5']!, 4 / 6) && near(mixed['6']!, 3 / 6) && near(mixed['8']!, 3 / 6), JSON.stringify(mixed));
  assert.ok(trapShare(boardOf('X.......O'), 1) > trapShare(boardOf('X.......O'), 4), "the losing move's own share is the larger");
  // Over every reachable position: a forced win scores 1, a forced loss -1, a drawing move its trap share in [0, 1).
  for (const board of reachablePositions()) {
    for (const cell of legalMoves(board)) {
      const value = moveValue(board, cell);
      const r = moveReward(board, cell, 'minimax-traps');
      if (value !== 0) assert.equal(r, value);
      else assert.ok(r >= 0 && r < 1 && r === trapShare(board, cell), `${board.map((m) => m ?? '.').join('')} cell ${cell}: ${r}`);
      assert.equal(moveReward(board, cell, 'minimax'), value, "'minimax' is unchanged");
    }
  }
});

test("'minimax-traps' gives a drawing move no bonus where the opponent has no losing reply", () => {
  // After a corner opening, the centre is O's only drawing reply, and none of X's answers then loses.
  assert.deepEqual(trapRewards('X........'), { 2: -1, 3: -1, 4: -1, 5: 0, 6: -1, 7: -1, 8: -1, 9: -1 });
  // After a centre opening, O's corners draw and X can answer anything without losing by force.
  const centre = trapRewards('....X....');
  for (const d of ['1', '3', '7', '9']) assert.equal(centre[d], 0, `corner ${d}`);
  // A move that fills the board draws: no replies, no bonus.
  assert.equal(trapShare(boardOf('XOXXOOOX.'), 8), 0);
});

test("'minimax-traps' through the environment: drawing moves score their bonus, a win 1, the last drawing move 0, a forfeit -2", () => {
  const env = ticTacToe.create(0, { reward: 'minimax-traps' });
  assert.equal(env.act('x', '1').localReward, 7 / 8, 'a corner opening');
  assert.equal(env.act('o', '5').localReward, 0, 'the only drawing reply: no losing answer for X');
  assert.equal(env.act('x', '9').localReward, trapShare(boardOf('X...O....'), 8));
  const forfeit = ticTacToe.create(0, { reward: 'minimax-traps' });
  assert.equal(forfeit.act('x', '10').localReward, ticTacToeRewards.forfeit);
  // A game to its end with the solver: X wins after O's losing edge reply; every X move scores 1, the winning one too.
  const won = ticTacToe.create(0, { reward: 'minimax-traps' });
  won.act('x', '1');
  assert.equal(won.act('o', '2').localReward, -1);
  while (!won.done) {
    const agent = won.currentAgent();
    const r = won.act(agent, won.solution(agent)).localReward;
    if (agent === 'x') assert.equal(r, 1);
  }
  assert.equal(won.winner, 'X');
  // Perfect play from the empty board draws; its last move scores the draw, 0.
  const drawn = ticTacToe.create(0, { reward: 'minimax-traps' });
  let last = NaN;
  while (!drawn.done) last = drawn.act(drawn.currentAgent(), drawn.solution(drawn.currentAgent())).localReward;
  assert.equal(drawn.winner, null);
  assert.equal(last, 0);
  // Options without the field keep parsing to the default ('outcome'), as before the option existed.
  assert.equal(ticTacToe.create(0, {}).options.reward, 'outcome');
  assert.throws(() => ticTacToe.create(0, { reward: 'traps' }), /reward/);
});

/** Seeds of `perfectOpponent { share }` with the perfect side each drew (null: self-play). */
function perfectSides(share: number, count: number, from = 0): (string | null)[] {
  return Array.from({ length: count }, (_, i) => ticTacToe.create(trainSeed(from + i), { openingMoves: [0, 3], perfectOpponent: { share } }).perfectSide);
}

test('perfectOpponent: a share of the seeds, each with its side drawn from the seed, starts from the empty board', () => {
  for (const share of [0.25, 0.5, 1]) {
    const sides = perfectSides(share, 1000);
    const played = sides.filter((s) => s !== null);
    assert.ok(Math.abs(played.length / 1000 - share) < 0.05, `${played.length} of 1000 seeds with share ${share}`);
    const xs = played.filter((s) => s === 'x').length;
    assert.ok(Math.abs(xs / played.length - 0.5) < 0.06, `x scripted in ${xs} of ${played.length}`);
    assert.deepEqual(perfectSides(share, 1000), sides, 'the same seed draws the same side every time');
  }
  assert.notDeepEqual(perfectSides(1, 40, 0), perfectSides(1, 40, 5000), 'the sides come from the seed');
  for (let i = 0; i < 300; i++) {
    const env = ticTacToe.create(trainSeed(i), { openingMoves: [0, 3], randomOpening: { share: 1, plies: 2 }, perfectOpponent: { share: 0.5 } });
    if (env.perfectSide === null) continue;
    // The perfect side is never to move in a live game; at most its first move is on the board.
    assert.notEqual(env.currentAgent(), env.perfectSide);
    assert.deepEqual(env.board.filter((m) => m !== null), env.perfectSide === 'x' ? ['X'] : [], 'no opening, only the perfect x move');
    assert.equal(env.turn, 0);
  }
});

test("perfectOpponent: the scripted moves are perfect, legal, varied like minimax's, and the same in a clone", () => {
  const firstMoves = new Map<number, number>();
  let games = 0;
  for (let i = 0; i < 400; i++) {
    const env = ticTacToe.create(trainSeed(i), { reward: 'minimax', perfectOpponent: { share: 1 } });
    const side = env.perfectSide!;
    const mark = side === 'x' ? 'X' : 'O';
    if (side === 'x') {
      const cell = env.board.findIndex((m) => m !== null);
      firstMoves.set(cell, (firstMoves.get(cell) ?? 0) + 1);
    }
    const rng = new Rng(i, 'test policy');
    const turns: number[] = [];
    while (!env.done) {
      const agent = env.currentAgent();
      turns.push(env.turn);
      assert.notEqual(agent, side, 'the policy never plays the perfect side');
      assert.throws(() => env.act(side, '5'), /out of turn/);
      const before = env.board;
      const move = rng.pick(legalMoves(before));
      const copy = env.clone();
      const r = env.act(agent, String(move + 1));
      const again = copy.act(agent, String(move + 1));
      assert.deepEqual(copy.board, env.board, 'a clone gets the same reply');
      assert.equal(again.info, r.info);
      // The policy move's own value (a winning move 1, a drawing last move 0), whatever the reply did.
      assert.equal(r.localReward, moveValue(before, move), "the reward is the policy move's own");
      const after = env.board;
      const played = after.flatMap((m, c) => (m !== before[c] ? [c] : []));
      assert.ok(played.length === 1 || played.length === 2);
      if (played.length === 2) {
        const reply = played.find((c) => c !== move)!;
        const mid = [...before];
        mid[move] = agent === 'x' ? 'X' : 'O';
        assert.equal(after[reply], mark);
        assert.ok(optimalMoves(mid).includes(reply), `reply ${reply + 1} to ${mid.map((m) => m ?? '.').join('')} is not perfect`);
      }
    }
    assert.notEqual(env.winner, mark === 'X' ? 'O' : 'X', 'the perfect side never loses');
    // The policy's acts are one a round (the rollout groups branches by agent and turn), as in self-play.
    assert.deepEqual(turns, turns.map((_, k) => k), `turns ${turns.join()}`);
    assert.ok(env.stats[side]!.acts === 0, 'scripted moves count in no stats');
    games++;
  }
  assert.equal(games, 400);
  // Every first cell draws, so a perfect x opens on all nine (the minimax opponent's ties are uniform too).
  for (let c = 0; c < 9; c++) assert.ok((firstMoves.get(c) ?? 0) >= 5, `x opened on ${c + 1} ${firstMoves.get(c) ?? 0} times`);
});

test('perfectOpponent: the game ends and scores right when the perfect side wins or draws', () => {
  const find = (side: 'x' | 'o') => {
    for (let i = 0; i < 100; i++) {
      const env = ticTacToe.create(trainSeed(i), { reward: 'minimax', perfectOpponent: { share: 1 } });
      if (env.perfectSide === side) return env;
    }
    throw new Error(`no seed in 100 with a perfect ${side}`);
  };
  // Perfect o against an x that plays the lowest free cell: o wins; x's losing move scores -1, the act reports o's win.
  const lost = find('o');
  let last: ReturnType<typeof lost.act> | null = null;
  const rewards: number[] = [];
  while (!lost.done) {
    const board = lost.board;
    last = lost.act('x', String(legalMoves(board)[0]! + 1));
    rewards.push(last.localReward);
  }
  assert.equal(lost.winner, 'O');
  assert.equal(lost.forfeitedBy, null);
  assert.ok(last!.done && last!.success, 'a game lost to the perfect side ends without a forfeit');
  assert.match(last!.info, /o \(perfect\) plays \d and wins$/);
  assert.equal(last!.teamReward, 0);
  assert.ok(rewards.includes(-1), `x's blunder scores -1: ${rewards.join()}`);
  // Perfect x against a perfect o policy: a draw, and every o move scores 0.
  const drawn = find('x');
  while (!drawn.done) assert.equal(drawn.act('o', drawn.solution('o')).localReward, 0);
  assert.equal(drawn.winner, null);
  assert.ok(drawn.success);
  // 'outcome': a loss to the perfect side scores the policy's moves 0, as a loss in self-play.
  const outcome = ticTacToe.create(trainSeed(0), { perfectOpponent: { share: 1 } });
  while (!outcome.done) assert.equal(outcome.act(outcome.currentAgent(), String(legalMoves(outcome.board)[0]! + 1)).localReward, 0);
  // A forfeit ends the game before any reply.
  const forfeit = find('o');
  const f = forfeit.act('x', 'z');
  assert.deepEqual([f.localReward, f.done, forfeit.board.filter((m) => m !== null).length], [ticTacToeRewards.forfeit, true, 0]);
});

test('perfectOpponent off, at share 0, or outside its share leaves every seed as it was; bad values are refused', () => {
  const base = { openingMoves: [0, 3], reward: 'minimax', randomOpening: { share: 0.5, plies: 1 } } as const;
  assert.ok(!('perfectOpponent' in ticTacToe.create(1, base).options), 'absent from the parsed options (warm-start cache keys)');
  let outside = 0;
  for (let i = 0; i < 500; i++) {
    const plain = ticTacToe.create(trainSeed(i), base);
    const none = ticTacToe.create(trainSeed(i), { ...base, perfectOpponent: { share: 0 } });
    const half = ticTacToe.create(trainSeed(i), { ...base, perfectOpponent: { share: 0.5 } });
    for (const env of half.perfectSide === null ? [none, half] : [none]) {
      assert.equal(env.perfectSide, null);
      // Byte for byte, through a whole game with the solver.
      const a = plain.clone();
      const b = env.clone();
      assert.equal(b.observe(b.currentAgent()), a.observe(a.currentAgent()));
      while (!a.done) {
        const agent = a.currentAgent();
        assert.deepEqual(b.act(agent, a.solution(agent)), a.act(agent, a.solution(agent)));
        if (!a.done) assert.equal(b.observe(b.currentAgent()), a.observe(a.currentAgent()));
      }
    }
    if (half.perfectSide === null) outside++;
  }
  assert.ok(outside > 200 && outside < 300, `${outside} of 500 seeds outside the share`);
  for (const bad of [{ share: 1.5 }, { share: -0.1 }, {}, { share: 0.5, side: 'x' }]) {
    assert.throws(() => ticTacToe.create(1, { perfectOpponent: bad }), /perfectOpponent/, JSON.stringify(bad));
  }
});

test("perfectOpponent: the solver's demonstrations show the policy's side only in those seeds", async () => {
  const { rolloutSolver } = await import('./solver-rollout.ts');
  for (let i = 0; i < 40; i++) {
    const env = ticTacToe.create(trainSeed(i), { perfectOpponent: { share: 1 } });
    const r = await rolloutSolver(env);
    assert.ok(r.demonstrations.length > 0);
    assert.ok(r.demonstrations.every((d) => d.agent !== env.perfectSide), 'no demonstration for the perfect side');
    assert.ok(r.success);
  }
});
