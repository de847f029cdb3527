/**
 * What a tic-tac-toe run's training groups taught, by position class: where the mover can win at
 * once, where it must block, and the rest. Per class: groups, zero-variance groups, and the summed
 * advantage of the right moves (the win, the block, or the group's best reward), of the other
 * legal moves and of forfeits; then the summed advantage per answer text.
 *
 * Usage: node --import tsx bench/learning/ttt-signal.ts <workspace> [run id]   (default: the latest run)
 * (docs/experiments/2026-11-27.md: where the training signal goes.)
 */
import { join } from 'node:path';
import { winnerOf, type Board, type Mark } from '../../server/envs/tic-tac-toe-board.ts';
import { openRunStore } from '../../server/store/index.ts';

const [ws, runArg] = process.argv.slice(2);
if (!ws) throw new Error('usage: ttt-signal.ts <workspace> [run id]');
const store = openRunStore(join(ws, '.troupe', 'troupe.db'), { queryOnly: true });
const run = runArg ?? store.listRuns()[0]?.id; // newest first
if (!run) throw new Error(`no run in ${ws}`);
const parse = (prompt: string): { board: Board; me: Mark } | null => {
  const lines = prompt.split('\n').filter((l) => /^[1-9XO]{3}$/.test(l.trim()));
  if (lines.length < 3) return null;
  const cells = lines.slice(-3).join('').split('');
  const board = cells.map((c) => (c === 'X' || c === 'O' ? c : null)) as Board;
  const xs = board.filter((c) => c === 'X').length, os = board.filter((c) => c === 'O').length;
  return { board, me: xs === os ? 'X' : 'O' };
};
const wins = (b: Board, m: Mark) => b.map((c, i) => i).filter((i) => b[i] === null && winnerOf(b.map((c, j) => (j === i ? m : c))) === m);
type Acc = { groups: number; zeroVar: number; samples: number; good: number; goodAdv: number; badAdv: number; forfeitAdv: number; forfeits: number; bad: number; keptGood: number };
const acc: Record<string, Acc> = {};
const A = (k: string) => (acc[k] ??= { groups: 0, zeroVar: 0, samples: 0, good: 0, goodAdv: 0, badAdv: 0, forfeitAdv: 0, forfeits: 0, bad: 0, keptGood: 0 });
const digitAdv: Record<string, number> = {};
for (const s of store.listSteps(run, { limit: 1000 })) {
  const trajs = store.listTrajectories({ runId: run, step: s.step, phase: 'train', limit: 10000 });
  for (const t of trajs) {
    const d = store.getTrajectory(t.id)!;
    for (const turn of d.turns) {
      const branches = [turn, ...turn.siblings];
      const p = parse(turn.promptText);
      if (!p) continue;
      const opp: Mark = p.me === 'X' ? 'O' : 'X';
      const myWins = wins(p.board, p.me), oppWins = wins(p.board, opp);
      const cls = myWins.length ? 'canWin' : oppWins.length ? (oppWins.length > 1 ? 'lostAnyway' : 'mustBlock') : 'other';
      const a = A(cls);
      a.groups++;
      if (branches.every((b) => b.reward === branches[0]!.reward)) a.zeroVar++;
      for (const b of branches) {
        a.samples++;
        const cell = Number(b.responseText.trim()) - 1;
        const legal = cell >= 0 && cell < 9 && p.board[cell] === null;
        const adv = b.advantage ?? 0;
        digitAdv[b.responseText.trim()] = (digitAdv[b.responseText.trim()] ?? 0) + adv;
        if (!legal) { a.forfeits++; a.forfeitAdv += adv; continue; }
        const good = cls === 'canWin' ? myWins.includes(cell) : cls === 'mustBlock' ? oppWins.includes(cell) : b.reward >= Math.max(...branches.map((x) => x.reward));
        if (good) { a.good++; a.goodAdv += adv; if (b.kept) a.keptGood++; } else { a.bad++; a.badAdv += adv; }
      }
    }
  }
}
for (const [k, a] of Object.entries(acc)) console.log(k, JSON.stringify({ ...a, goodAdv: +a.goodAdv.toFixed(1), badAdv: +a.badAdv.toFixed(1), forfeitAdv: +a.forfeitAdv.toFixed(1) }));
console.log('adv by answer', JSON.stringify(Object.fromEntries(Object.entries(digitAdv).map(([k, v]) => [k, +v.toFixed(1)]))));
store.close();
