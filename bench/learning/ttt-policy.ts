/**
 * What a tic-tac-toe checkpoint's sampling distribution offers RL, over every reachable position:
 * the probability of each answer digit as the response's first token at the training temperature,
 * from which, per position, the greedy move, the probability mass on perfect play's moves, and
 * for a group of K i.i.d. samples (AT-GRPO's tree node) the chance that it has no reward variance
 * (every sample in one reward class: the move's minimax value, or a forfeit) and the chance that it
 * holds a perfect move. Split by side, by whether the greedy move is perfect, and for the positions
 * greedy play meets against the minimax player from the empty board (the test's lines).
 *
 * Usage: node --import tsx bench/learning/ttt-policy.ts <run folder> [initial|latest|best|<step>] [temperature]
 * (docs/experiments/2026-11-28.md: why RL moves the greedy policy so little.)
 */
import { isOver, legalMoves, moveValue, optimalMoves, reachablePositions, toMove, type Board } from '../../server/envs/tic-tac-toe-board.ts';
import { ticTacToe } from '../../server/envs/tic-tac-toe.ts';
import { loadTeamPolicies } from '../../server/runs/checkpoint-weights.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunArgs } from './run-args.ts';

const [dir, which = 'latest', tArg] = process.argv.slice(2);
const { experiment: exp, checkpoint: ck, bases } = await openRunArgs('ttt-policy.ts <run folder> [initial|latest|best|<step>] [temperature]', dir, which, 'tic-tac-toe');
const temperature = tArg === undefined ? exp.algorithm.temperature : Number(tArg);
const tok = exp.tokenizer;
const digitIds = Array.from({ length: 9 }, (_, i) => {
  const ids = tok.encode(String(i + 1));
  if (ids.length !== 1) throw new Error(`digit ${i + 1} is ${ids.length} tokens`);
  return ids[0]!;
});

interface Pos { board: Board; agent: 'x' | 'o'; observation: string; optimal: number[]; probs: number[] }
const observationOf = (board: Board): string => {
  const env = ticTacToe.create(0, { openingMoves: 0 });
  const cells = (m: 'X' | 'O') => board.flatMap((c, i) => (c === m ? [i] : []));
  const xs = cells('X'), os = cells('O');
  for (let i = 0; i < xs.length; i++) {
    env.act('x', String(xs[i]! + 1));
    if (i < os.length) env.act('o', String(os[i]! + 1));
  }
  return env.observe(toMove(board) === 'X' ? 'x' : 'o');
};
const positions: Pos[] = reachablePositions().map((board) => ({ board, agent: toMove(board) === 'X' ? 'x' : 'o', observation: observationOf(board), optimal: optimalMoves(board), probs: [] }));
const key = (b: Board) => b.map((c) => c ?? '.').join('');
const byKey = new Map(positions.map((p) => [key(p.board), p]));

const engine = await Engine.start({ executionProvider: 'cpu', log: () => {} });
try {
  const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
  for (const agent of ['x', 'o'] as const) {
    const policy = policies.get(exp.router.get(agent)!)!;
    const mine = positions.filter((p) => p.agent === agent);
    for (let s = 0; s < mine.length; s += 256) {
      const part = mine.slice(s, s + 256);
      const seqs = part.flatMap((p) => {
        const prompt = tok.encodePrompt([{ role: 'user', text: p.observation }]);
        return digitIds.map((d) => ({ tokens: Int32Array.from([...prompt, d]), promptLength: prompt.length }));
      });
      const lp = await policy.score(seqs, temperature);
      part.forEach((p, i) => (p.probs = digitIds.map((_, d) => Math.exp(lp[i * 9 + d]![0]!))));
    }
  }
} finally {
  await engine.close();
}

/** Per position: reward classes of a sampled answer (minimax value, or -2 for a forfeit: an occupied cell or a non-digit). */
function stats(p: Pos, K: number, distinct = true) {
  const cls = new Map<number, number>();
  let digitMass = 0;
  p.probs.forEach((q, cell) => {
    digitMass += q;
    const r = p.board[cell] !== null ? -2 : moveValue(p.board, cell);
    cls.set(r, (cls.get(r) ?? 0) + q);
  });
  cls.set(-2, (cls.get(-2) ?? 0) + Math.max(0, 1 - digitMass));
  const pOpt = p.optimal.reduce((a, c) => a + p.probs[c]!, 0);
  const greedy = p.probs.indexOf(Math.max(...p.probs));
  // distinctBranches: K first tokens drawn without replacement (the non-digit mass as one token).
  const tokens = [...p.probs.map((q, cell) => ({ q, r: p.board[cell] !== null ? -2 : moveValue(p.board, cell), opt: p.optimal.includes(cell) })), { q: Math.max(0, 1 - digitMass), r: -2, opt: false }];
  let dHasOpt = 0, dZeroVar = 0;
  const draw = (left: number, used: boolean[], mass: number, prob: number, rs: number[], opt: boolean) => {
    if (left === 0 || mass <= 1e-12) {
      if (opt) dHasOpt += prob;
      if (rs.every((r) => r === rs[0])) dZeroVar += prob;
      return;
    }
    tokens.forEach((t, i) => {
      if (used[i] || t.q <= 0) return;
      used[i] = true;
      draw(left - 1, used, mass - t.q, (prob * t.q) / mass, [...rs, t.r], opt || t.opt);
      used[i] = false;
    });
  };
  if (distinct) draw(K, tokens.map(() => false), tokens.reduce((a, t) => a + t.q, 0), 1, [], false);
  return {
    dHasOpt,
    dZeroVar,
    zeroVar: [...cls.values()].reduce((a, q) => a + q ** K, 0),
    hasOpt: 1 - (1 - pOpt) ** K,
    pOpt,
    pForfeit: cls.get(-2)!,
    greedyOk: p.optimal.includes(greedy),
    pGreedy: p.probs[greedy]!,
    greedy,
  };
}
const fmt = (x: number) => (100 * x).toFixed(1);
function report(name: string, ps: Pos[]) {
  if (ps.length === 0) return;
  const s4 = ps.map((p) => stats(p, 4)), s8 = ps.map((p) => stats(p, 8, false));
  const m = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const wrong = s4.map((s, i) => [s, s8[i]!] as const).filter(([s]) => !s.greedyOk);
  console.log(
    `${name}: ${ps.length} positions, greedy perfect ${fmt(m(s4.map((s) => +s.greedyOk)))}%, sampled perfect ${fmt(m(s4.map((s) => s.pOpt)))}%, forfeit mass ${fmt(m(s4.map((s) => s.pForfeit)))}%, ` +
      `P(greedy move) ${fmt(m(s4.map((s) => s.pGreedy)))}%, zero-variance group K4 ${fmt(m(s4.map((s) => s.zeroVar)))}% K8 ${fmt(m(s8.map((s) => s.zeroVar)))}% K4 distinct ${fmt(m(s4.map((s) => s.dZeroVar)))}%`,
  );
  if (wrong.length)
    console.log(
      `  where greedy is not perfect (${wrong.length}): P(greedy move) ${fmt(m(wrong.map(([s]) => s.pGreedy)))}%, perfect mass ${fmt(m(wrong.map(([s]) => s.pOpt)))}%, ` +
        `group holds a perfect move K4 ${fmt(m(wrong.map(([s]) => s.hasOpt)))}% K8 ${fmt(m(wrong.map(([, s]) => s.hasOpt)))}% K4 distinct ${fmt(m(wrong.map(([s]) => s.dHasOpt)))}%, ` +
        `zero-variance K4 ${fmt(m(wrong.map(([s]) => s.zeroVar)))}% K4 distinct ${fmt(m(wrong.map(([s]) => s.dZeroVar)))}%`,
    );
}
report('all', positions);
report('x to move', positions.filter((p) => p.agent === 'x'));
report('o to move', positions.filter((p) => p.agent === 'o'));
for (let n = 0; n <= 4; n++) report(`  ${n} marks on the board`, positions.filter((p) => p.board.filter((c) => c !== null).length === n));

// The positions greedy play meets against minimax (which picks any optimal move) from the empty board.
const lines = new Map<string, Pos>();
function walk(board: Board, side: 'X' | 'O') {
  if (isOver(board)) return;
  if (toMove(board) === side) {
    const p = byKey.get(key(board))!;
    lines.set(key(board), p);
    const s = stats(p, 4);
    if (board[s.greedy] !== null) return; // a forfeit ends the game
    walk(board.map((c, i) => (i === s.greedy ? side : c)), side);
  } else for (const m of optimalMoves(board)) walk(board.map((c, i) => (i === m ? toMove(board) : c)), side);
}
walk(Array(9).fill(null), 'X');
walk(Array(9).fill(null), 'O');
report('on greedy lines against minimax', [...lines.values()]);
for (const p of lines.values()) {
  const s = stats(p, 4);
  if (s.greedyOk) continue;
  const legal = legalMoves(p.board);
  const best = Math.max(...legal.map((c) => moveValue(p.board, c)));
  console.log(
    `  ${p.agent} on ${p.board.map((c, i) => c ?? String(i + 1)).join('')}: greedy ${s.greedy + 1} (value ${p.board[s.greedy] === null ? moveValue(p.board, s.greedy) : 'forfeit'}, best ${best}); ` +
      `P: ${p.probs.map((q, i) => `${i + 1}:${fmt(q)}`).filter((_, i) => p.board[i] === null).join(' ')}; perfect ${p.optimal.map((c) => c + 1).join(',')}; group K4 holds one ${fmt(s.hasOpt)}%`,
  );
}
// The openings: x's move on the empty board, o's reply to each first move.
const empty = byKey.get('.........')!;
const e = stats(empty, 4);
console.log(`x on the empty board: greedy ${e.greedy + 1} (P ${fmt(e.pGreedy)}%); P: ${empty.probs.map((q, i) => `${i + 1}:${fmt(q)}`).join(' ')}`);
const replies = Array.from({ length: 9 }, (_, c) => {
  const p = byKey.get(key(Array.from({ length: 9 }, (_, i) => (i === c ? 'X' : null))))!;
  const s = stats(p, 4);
  return `${c + 1}->${s.greedy + 1}${s.greedyOk ? '' : '!'}(${fmt(s.pGreedy)})`;
});
console.log(`o's reply to each first move (! not perfect, P of the reply): ${replies.join(' ')}`);
