/**
 * What a tic-tac-toe config's warm-start demonstrations hold: plays the solver on the episodes the
 * warm start plays (trainSeed(500000000 + i), every third one a half-answer forfeit, as
 * warm-start.ts's solverDemonstrations does) and counts the (prompt, answer) pairs by side, by
 * whether the game was against `perfectOpponent`, and o's pairs at its second move with x's two
 * marks on the board (where o's blunders against minimax were after random openings), with the
 * distinct positions there. Checks its total against solverDemonstrations itself.
 *
 * Usage: node --import tsx bench/learning/ttt-demos.ts <config.json> [...]
 * (docs/experiments/2026-11-28.md: a perfect opponent in a share of games.)
 */
import { readFileSync } from 'node:fs';
import { ticTacToe } from '../../server/envs/tic-tac-toe.ts';
import { trainSeed } from '../../server/envs/seed-ranges.ts';
import { rolloutSolver } from '../../server/envs/solver-rollout.ts';
import { defaultTokenizer } from '../../server/models/tokenizer.ts';
import { solverDemonstrations } from '../../server/rl/warm-start.ts';

const DEMO_SEED_OFFSET = 500_000_000; // warm-start.ts
const NOISY_EVERY = 3; // warm-start.ts: these episodes forfeit at once in tic-tac-toe (half of a one-digit answer)

for (const path of process.argv.slice(2)) {
  const config = JSON.parse(readFileSync(path, 'utf8')) as { env: { options: unknown }; warmStart: { demonstrations: number } };
  const make = (seed: number) => ticTacToe.create(seed, config.env.options);
  const count = config.warmStart.demonstrations;
  const pairs = { x: 0, o: 0, perfectGames: 0, inPerfectGames: 0, oSecond: 0 };
  const oSecondPositions = new Set<string>();
  for (let i = 0; i < count; i++) {
    const env = make(trainSeed(DEMO_SEED_OFFSET + i));
    if (i % NOISY_EVERY === NOISY_EVERY - 1) continue;
    if (env.perfectSide !== null) pairs.perfectGames++;
    for (const d of (await rolloutSolver(env)).demonstrations) {
      pairs[d.agent as 'x' | 'o']++;
      if (env.perfectSide !== null) pairs.inPerfectGames++;
      const board = d.observation.split('\n').slice(1, 4).join('');
      const xs = [...board].filter((c) => c === 'X').length;
      const os = [...board].filter((c) => c === 'O').length;
      if (d.agent === 'o' && xs === 2 && os === 1) {
        pairs.oSecond++;
        oSecondPositions.add(board);
      }
    }
  }
  const real = await solverDemonstrations(make, count, ['x', 'o'], defaultTokenizer);
  if (real.length !== pairs.x + pairs.o) throw new Error(`${path}: counted ${pairs.x + pairs.o} pairs, solverDemonstrations made ${real.length}`);
  console.log(`${path}: ${real.length} pairs from ${count} episodes; x ${pairs.x}, o ${pairs.o}; ${pairs.perfectGames} games against the perfect player with ${pairs.inPerfectGames} pairs; o at its 2nd move (2 X, 1 O): ${pairs.oSecond} pairs in ${oSecondPositions.size} positions`);
}
