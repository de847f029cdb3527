/**
 * Tic-tac-toe's evaluation measures. Self-play success only says that nobody forfeited, so the
 * policy is also judged by games against the scripted opponents (both sides, `games` each) and by
 * its greedy move in all 4520 reachable positions against perfect play.
 */
import type { MeasureEnvironment } from './environment-measures.ts';
import { evaluateAgainst, minimaxPlayer, randomPlayer, scorePositions } from './tic-tac-toe-players.ts';

export const ticTacToeMeasures: MeasureEnvironment = async (policy, o) => {
  const match = { games: o.games, side: 'both' as const, seed: o.seed };
  const opponents = { random: await evaluateAgainst(policy.answer, randomPlayer, match), minimax: await evaluateAgainst(policy.answer, minimaxPlayer, match) };
  return { opponents, positions: await scorePositions(policy.answerAll) };
};
