/**
 * Tic-tac-toe ceilings: what scripted perfect play scores on the bench's test games, with the
 * evaluation code the trainer's test uses (`ticTacToeMeasures`: `evaluateAgainst`, both sides,
 * `games` games from seed validationSeed(TEST_SEED_OFFSET), game g on seed + g, from the empty
 * board). Policies, all but the last never losing (they play only moves of the best game value):
 *   solver-lowest     `bestMove`: the best score, ties to the lowest cell (the warm start's demonstrations)
 *   solver-uniform    uniform among the moves of the best game value (the minimax opponent itself)
 *   traps-greedy      among them, the move that leaves the opponent the largest share of replies
 *                     that lose by force (what 'minimax-traps' rewards, played greedily; ties lowest)
 *   best-vs-random    among them, the move with the highest chance of beating the random player
 *                     (expectimax, the policy then playing the same way; ties lowest)
 *   expectimax        the highest chance of beating random with no constraint (may lose to minimax)
 * and, over the 4520 reachable positions, how often each never-losing policy's choice is as good as
 * best-vs-random's (the same win chance), and how well the trap share predicts that chance.
 *
 * Usage: node --import tsx bench/learning/ttt-ceiling.ts [games]   (default 128, the configs' testEpisodes)
 */
import { TEST_SEED_OFFSET } from '../../server/envs/seed-ranges.ts';
import { validationSeed } from '../../server/envs/seed-ranges.ts';
import { Rng } from '../../server/envs/rng.ts';
import { bestMove, isOver, legalMoves, moveValue, optimalMoves, reachablePositions, toMove, winnerOf, type Board, type Mark } from '../../server/envs/tic-tac-toe-board.ts';
import { evaluateAgainst, minimaxPlayer, playAgainst, randomPlayer, type TextPolicy } from '../../server/envs/tic-tac-toe-players.ts';
import { trapShare } from '../../server/envs/tic-tac-toe.ts';

const games = Number(process.argv[2] ?? 128);
const seed = validationSeed(TEST_SEED_OFFSET);
const key = (b: Board): string => b.map((m) => m ?? '.').join('');
const play = (b: Board, cell: number): Board => b.map((m, i) => (i === cell ? toMove(b) : m));

/** P(`me` beats the random player from `b`), `me` choosing among `choices(b)` to maximise it. */
function winChance(choices: (b: Board) => number[]): (b: Board, me: Mark) => number {
  const memo = new Map<string, number>();
  const f = (b: Board, me: Mark): number => {
    const w = winnerOf(b);
    if (w !== null) return w === me ? 1 : 0;
    if (isOver(b)) return 0;
    const k = `${me}${key(b)}`;
    const cached = memo.get(k);
    if (cached !== undefined) return cached;
    const v = toMove(b) === me ? Math.max(...choices(b).map((c) => f(play(b, c), me))) : legalMoves(b).reduce((s, c) => s + f(play(b, c), me), 0) / legalMoves(b).length;
    memo.set(k, v);
    return v;
  };
  return f;
}
const safeChance = winChance(optimalMoves);
const freeChance = winChance(legalMoves);
const argmax = (b: Board, cells: number[], score: (c: number) => number): number => cells.reduce((best, c) => (score(c) > score(best) + 1e-12 ? c : best));

const policies: Record<string, (b: Board, rng: Rng) => number> = {
  'solver-lowest': (b) => bestMove(b),
  'solver-uniform': (b, rng) => rng.pick(optimalMoves(b)),
  'traps-greedy': (b) => argmax(b, optimalMoves(b), (c) => trapShare(b, c)),
  'best-vs-random': (b) => argmax(b, optimalMoves(b), (c) => safeChance(play(b, c), toMove(b))),
  expectimax: (b) => argmax(b, legalMoves(b), (c) => freeChance(play(b, c), toMove(b))),
};

const pct = (x: number): string => (100 * x).toFixed(1);
console.log(`test games: ${games} per opponent, both sides, seeds ${seed}..${seed + games - 1}\n`);
console.log('| policy | non-loss vs minimax | win vs random | draws vs random | losses vs random | wins vs random as x / as o | as good as best-vs-random (all positions) |');
console.log('|---|---|---|---|---|---|---|');
const positions = reachablePositions();
for (const [name, choose] of Object.entries(policies)) {
  // A fresh stream per match (only solver-uniform draws from it), so the split below replays the random match.
  const policy = (): TextPolicy => {
    const rng = new Rng(0, 'ttt-ceiling');
    return (_obs, game) => String(choose(game.board, rng) + 1);
  };
  const match = { games, side: 'both' as const, seed };
  const mm = await evaluateAgainst(policy(), minimaxPlayer, match);
  const rd = await evaluateAgainst(policy(), randomPlayer, match);
  const rng = new Rng(0, 'ttt-ceiling');
  // The same games split by side (evaluateAgainst alternates x, o from game 0 on seed + g).
  const sideText = policy();
  const sideWins = { x: 0, o: 0 };
  for (let g = 0; g < games; g++) {
    const side = g % 2 === 0 ? 'x' : 'o';
    if ((await playAgainst(sideText, randomPlayer, { side, seed: seed + g })).outcome === 'win') sideWins[side]++;
  }
  const agree = name === 'expectimax' ? NaN : positions.filter((b) => {
    const c = choose(b, new Rng(0, 'agree'));
    return safeChance(play(b, c), toMove(b)) >= safeChance(play(b, policies['best-vs-random']!(b, rng)), toMove(b)) - 1e-12;
  }).length;
  console.log(`| ${name} | ${pct(mm.nonLossRate)}% (${mm.wins + mm.draws}/${games}) | ${pct(rd.winRate)}% (${rd.wins}/${games}) | ${rd.draws} | ${rd.losses} | ${sideWins.x} / ${sideWins.o} | ${Number.isNaN(agree) ? 'n/a' : `${pct(agree / positions.length)}%`} |`);
}

// How well each per-move bonus predicts the win chance against random, over draw-valued moves.
const rows: { trap: number; chance: number }[] = [];
for (const b of positions) for (const c of legalMoves(b)) if (moveValue(b, c) === 0) rows.push({ trap: trapShare(b, c), chance: safeChance(play(b, c), toMove(b)) });
const corr = (xs: number[], ys: number[]): number => {
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length, my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let sxy = 0, sxx = 0, syy = 0;
  xs.forEach((x, i) => ((sxy += (x - mx) * (ys[i]! - my)), (sxx += (x - mx) ** 2), (syy += (ys[i]! - my) ** 2)));
  return sxy / Math.sqrt(sxx * syy);
};
console.log(`\ndraw-valued moves in reachable positions: ${rows.length}; correlation of the trap share with the win chance vs random (best-vs-random after the move): ${corr(rows.map((r) => r.trap), rows.map((r) => r.chance)).toFixed(3)}`);
