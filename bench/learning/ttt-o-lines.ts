/**
 * o's second move on the lines a perfect x plays (the test's minimax opponent): every position with
 * o to move after x's first move (any of nine), one of o's perfect replies and one of x's perfect
 * second moves. For a run folder: how many of them the warm start (`initial`) and the run's last
 * checkpoint answer greedily with a perfect move, and, from the run's stored training groups, how
 * often o met them in training (groups, and the share of sampled branches that were perfect, by
 * half of the run). Where 'perfectOpponent' should teach o if it teaches anything.
 *
 * Usage: node --import tsx bench/learning/ttt-o-lines.ts <run folder> [checkpoint, default latest]
 * (docs/experiments/2026-11-28.md: a perfect opponent in a share of games.)
 */
import { optimalMoves, type Board, type Mark } from '../../server/envs/tic-tac-toe-board.ts';
import { ticTacToe } from '../../server/envs/tic-tac-toe.ts';
import { greedyTextPolicy } from '../../server/rl/evaluate.ts';
import { routingContext } from '../../server/rl/policies.ts';
import { loadTeamPolicies } from '../../server/runs/checkpoint-weights.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunStore } from '../../server/store/index.ts';
import { openRunArgs } from './run-args.ts';

const [dir, which = 'latest'] = process.argv.slice(2);
const key = (b: Board) => b.map((m) => m ?? '.').join('');
const play = (b: Board, cell: number, m: Mark): Board => b.map((v, i) => (i === cell ? m : v));
// The lines: x any first move, o a perfect reply, x a perfect second move; o to move.
const lines = new Map<string, { board: Board; moves: number[] }>();
const empty: Board = Array(9).fill(null);
for (let c1 = 0; c1 < 9; c1++) {
  const b1 = play(empty, c1, 'X');
  for (const r1 of optimalMoves(b1)) {
    const b2 = play(b1, r1, 'O');
    for (const c2 of optimalMoves(b2)) {
      const b3 = play(b2, c2, 'X');
      lines.set(key(b3), { board: b3, moves: [c1, r1, c2] });
    }
  }
}
const observationOf = (moves: number[]): string => {
  const env = ticTacToe.create(0, { openingMoves: 0 });
  moves.forEach((c, i) => env.act(i % 2 === 0 ? 'x' : 'o', String(c + 1)));
  return env.observe('o');
};

const engine = await Engine.start({ executionProvider: 'cpu', log: () => {} });
try {
  const perfect: Record<string, Set<string>> = {};
  let store: ReturnType<typeof openRunStore> | null = null;
  let runId = '';
  let steps = 0;
  for (const w of ['initial', which]) {
    const { experiment: exp, checkpoint: ck, bases, folder } = await openRunArgs('ttt-o-lines.ts <run folder> [checkpoint]', dir, w, 'tic-tac-toe');
    store ??= openRunStore(folder.databasePath, { queryOnly: true });
    runId = folder.runId;
    steps = folder.steps;
    const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
    const greedy = greedyTextPolicy(routingContext(exp, policies), exp.algorithm.maxNewTokens);
    const good = (perfect[w] = new Set());
    for (const [k, { board, moves }] of lines) {
      const text = await greedy(observationOf(moves), { agent: 'o' });
      if (optimalMoves(board).includes(Number(text.trim()) - 1)) good.add(k);
    }
    for (const p of policies.values()) await p.dispose();
  }
  // Training groups at these positions (o's tree nodes: the kept branch and its siblings).
  const met = { first: { groups: 0, branches: 0, perfect: 0 }, second: { groups: 0, branches: 0, perfect: 0 } };
  const seen = new Set<string>();
  for (const s of store!.listSteps(runId, { limit: 10000 })) {
    const half = s.step <= steps / 2 ? met.first : met.second;
    for (const t of store!.listTrajectories({ runId, step: s.step, phase: 'train', limit: 10000 })) {
      for (const turn of store!.getTrajectory(t.id)!.turns) {
        if (turn.agentId !== 'o') continue;
        const rows = turn.promptText.split('\n').filter((l) => /^[1-9XO]{3}$/.test(l.trim()));
        const k = rows.slice(-3).join('').replace(/[1-9]/g, '.');
        const line = lines.get(k);
        if (!line) continue;
        seen.add(k);
        const branches = [turn, ...turn.siblings];
        half.groups++;
        half.branches += branches.length;
        half.perfect += branches.filter((b) => optimalMoves(line.board).includes(Number(b.responseText.trim()) - 1)).length;
      }
    }
  }
  const pct = (a: number, b: number) => (b ? ((100 * a) / b).toFixed(0) : '-');
  const [a, b] = [perfect['initial']!, perfect[which]!];
  console.log(`o's second move on perfect x's lines: ${lines.size} positions; greedy perfect: initial ${a.size}, ${which} ${b.size} (fixed ${[...b].filter((k) => !a.has(k)).length}, broken ${[...a].filter((k) => !b.has(k)).length})`);
  console.log(`training groups there: steps 1-${steps / 2}: ${met.first.groups} groups, ${pct(met.first.perfect, met.first.branches)}% of branches perfect; steps ${steps / 2 + 1}-${steps}: ${met.second.groups} groups, ${pct(met.second.perfect, met.second.branches)}%; ${seen.size} of the positions met`);
  store!.close();
} finally {
  await engine.close();
}
