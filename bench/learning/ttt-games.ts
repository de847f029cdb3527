/**
 * A tic-tac-toe checkpoint's test games, as the trainer's test plays them (128 games a scripted
 * opponent, both sides alternating from x, game g on validationSeed(TEST_SEED_OFFSET) + g, greedy),
 * split by side (wins, draws, losses), and its moves in them by class against perfect play:
 * missed-win (a forced win was there; the move drew or lost), blunder (a draw was there; the move
 * lost), draw-best-trap / draw-lesser-trap (a drawing move whose trapShare is / is not the best of
 * the drawing moves: what 'minimax-traps' rewards), keeps-win, lost-anyway, forfeit; and the
 * blunders by the side's move number (blunder-at-move-1 is its first move of the game).
 *
 * Usage: node --import tsx bench/learning/ttt-games.ts <run folder> [initial|latest|best|<step>]
 * (a run folder as troupe train or run-variant.ts makes one; bench:learning's kept runs need a
 * config.json and run.json written beside their checkpoints. docs/experiments/2026-11-28.md:
 * a reward for beating weak play.)
 */
import { minimaxPlayer, playAgainst, randomPlayer, type TextPolicy } from '../../server/envs/tic-tac-toe-players.ts';
import { legalMoves, moveValue } from '../../server/envs/tic-tac-toe-board.ts';
import { trapShare, type TicTacToeAgent } from '../../server/envs/tic-tac-toe.ts';
import { TEST_SEED_OFFSET, validationSeed } from '../../server/envs/seed-ranges.ts';
import { greedyTextPolicy } from '../../server/rl/evaluate.ts';
import { routingContext } from '../../server/rl/policies.ts';
import { loadTeamPolicies } from '../../server/runs/checkpoint-weights.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunArgs } from './run-args.ts';

const [dir, which = 'latest'] = process.argv.slice(2);
const { experiment: exp, checkpoint: ck, bases } = await openRunArgs('ttt-games.ts <run folder> [initial|latest|best|<step>]', dir, which, 'tic-tac-toe');
const engine = await Engine.start({ executionProvider: 'cpu', log: () => {} });
const seed = validationSeed(TEST_SEED_OFFSET);
const games = 128; // the configs' training.testEpisodes
try {
  const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
  const greedy = greedyTextPolicy(routingContext(exp, policies), exp.algorithm.maxNewTokens);
  for (const [name, opponent] of [['random', randomPlayer], ['minimax', minimaxPlayer]] as const) {
    const moves: Record<TicTacToeAgent, Record<string, number>> = { x: {}, o: {} };
    const count = (agent: TicTacToeAgent, kind: string): void => void (moves[agent][kind] = (moves[agent][kind] ?? 0) + 1);
    const policy: TextPolicy = async (observation, game) => {
      const text = await greedy(observation, game);
      const cell = Number(text.trim()) - 1;
      const b = game.board;
      if (!(Number.isInteger(cell) && cell >= 0 && cell < 9 && b[cell] === null)) {
        count(game.agent, 'forfeit');
        return text;
      }
      const best = Math.max(...legalMoves(b).map((m) => moveValue(b, m)));
      const value = moveValue(b, cell);
      if (value < best) {
        count(game.agent, best === 1 ? 'missed-win' : 'blunder');
        // Which of the side's moves it was (1st, 2nd, ...): where the policy needs practice.
        if (best === 0) count(game.agent, `blunder-at-move-${(b.filter((m) => m !== null).length >> 1) + 1}`);
      } else if (value === 0) {
        const bestTrap = Math.max(...legalMoves(b).filter((m) => moveValue(b, m) === 0).map((m) => trapShare(b, m)));
        count(game.agent, trapShare(b, cell) >= bestTrap - 1e-9 ? 'draw-best-trap' : 'draw-lesser-trap');
      } else count(game.agent, value === 1 ? 'keeps-win' : 'lost-anyway');
      return text;
    };
    const outcomes = { x: { win: 0, draw: 0, loss: 0 }, o: { win: 0, draw: 0, loss: 0 } };
    for (let g = 0; g < games; g++) {
      const side: TicTacToeAgent = g % 2 === 0 ? 'x' : 'o';
      outcomes[side][(await playAgainst(policy, opponent, { side, seed: seed + g })).outcome]++;
    }
    console.log(`${which} vs ${name}: x ${JSON.stringify(outcomes.x)} o ${JSON.stringify(outcomes.o)}; moves x ${JSON.stringify(moves.x)} o ${JSON.stringify(moves.o)}`);
  }
} finally {
  await engine.close();
}
