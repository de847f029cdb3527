/**
 * Where a tic-tac-toe policy loses to perfect play: plays a run's checkpoint greedily against the
 * minimax player from the empty board, 32 games a side, and counts its blunders (a move whose game
 * value is below the best available one), printing the first few positions with the move played.
 *
 * Usage: node --import tsx bench/learning/ttt-blunders.ts <run folder> [initial|latest|best|<step>]
 * (docs/experiments/2026-11-27.md: what RL did to the self-play policy's blocking).
 */
import { minimaxPlayer, playAgainst, type TextPolicy } from '../../server/envs/tic-tac-toe-players.ts';
import { moveValue } from '../../server/envs/tic-tac-toe-board.ts';
import { greedyTextPolicy } from '../../server/rl/evaluate.ts';
import { routingContext } from '../../server/rl/policies.ts';
import { loadTeamPolicies } from '../../server/runs/checkpoint-weights.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunArgs } from './run-args.ts';

const [dir, which = 'latest'] = process.argv.slice(2);
const { experiment: exp, checkpoint: ck, bases } = await openRunArgs('ttt-blunders.ts <run folder> [initial|latest|best|<step>]', dir, which, 'tic-tac-toe');
const engine = await Engine.start({ executionProvider: 'cpu', log: () => {} });
try {
  const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
  const greedy = greedyTextPolicy(routingContext(exp, policies), exp.algorithm.maxNewTokens);
  const blunders = { x: 0, o: 0 };
  const moves = { x: 0, o: 0 };
  const counting: TextPolicy = async (observation, game) => {
    const text = await greedy(observation, game);
    const cell = Number(text.trim()) - 1;
    moves[game.agent]++;
    if (Number.isInteger(cell) && game.board[cell] === null) {
      const best = Math.max(...game.board.flatMap((m, i) => (m === null ? [moveValue(game.board, i)] : [])));
      const value = moveValue(game.board, cell);
      if (value < best && ++blunders[game.agent] <= 5) {
        console.log(`${game.agent} on ${game.board.map((m, i) => m ?? String(i + 1)).join('')}: played ${cell + 1} (value ${value}, best ${best})`);
      }
    }
    return text;
  };
  for (const side of ['x', 'o'] as const) {
    const tally = { win: 0, draw: 0, loss: 0 };
    for (let g = 0; g < 32; g++) tally[(await playAgainst(counting, minimaxPlayer, { side, seed: 1_000_000_000 + g })).outcome]++;
    console.log(`as ${side} against minimax: ${tally.win} wins, ${tally.draw} draws, ${tally.loss} losses`);
  }
  console.log(`blunders: x ${blunders.x} of ${moves.x} moves, o ${blunders.o} of ${moves.o}`);
} finally {
  await engine.close();
}
