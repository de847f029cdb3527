/**
 * What each training step of a tic-tac-toe run fed the update, from its stored groups: per step and
 * side, the groups (a tree node's K branches), the share with reward variance (the only ones whose
 * advantages are not 0), samples, response tokens trained, the share of samples whose move is one
 * of perfect play's, and the share of groups whose branches all chose one move.
 *
 * Usage: node --import tsx bench/learning/ttt-groups.ts <workspace or database> [run id]   (default: the latest run)
 * (docs/experiments/2026-11-28.md: why RL moves the greedy policy so little.)
 */
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { optimalMoves, type Board } from '../../server/envs/tic-tac-toe-board.ts';
import { openRunStore } from '../../server/store/index.ts';

const [ws, runArg] = process.argv.slice(2);
if (!ws) throw new Error('usage: ttt-groups.ts <workspace or database> [run id]');
const db = existsSync(ws) && statSync(ws).isFile() ? ws : join(ws, '.troupe', 'troupe.db');
const store = openRunStore(db, { queryOnly: true });
const run = runArg ?? store.listRuns()[0]?.id;
if (!run) throw new Error(`no run in ${db}`);
const boardOf = (prompt: string): Board | null => {
  const lines = prompt.split('\n').filter((l) => /^[1-9XO]{3}$/.test(l.trim()));
  if (lines.length < 3) return null;
  return lines.slice(-3).join('').split('').map((c) => (c === 'X' || c === 'O' ? c : null)) as Board;
};
const pct = (a: number, b: number) => (b ? ((100 * a) / b).toFixed(0) : '-');
console.log('step side groups variance% samples tokens perfect% one-move%');
type Acc = [number, number, number, number, number, number];
const total: Record<string, Acc> = {};
for (const s of store.listSteps(run, { limit: 10000 })) {
  const acc: Record<string, Acc> = {};
  for (const t of store.listTrajectories({ runId: run, step: s.step, phase: 'train', limit: 10000 })) {
    const d = store.getTrajectory(t.id)!;
    for (const turn of d.turns) {
      const branches = [turn, ...turn.siblings];
      const board = boardOf(turn.promptText);
      const side = turn.agentId;
      const a = (acc[side] ??= [0, 0, 0, 0, 0, 0]);
      a[0] += 1;
      if (!branches.every((b) => b.reward === branches[0]!.reward)) a[1] += 1;
      a[2] += branches.length;
      a[3] += branches.reduce((n, b) => n + b.responseTokens.length, 0);
      if (board) {
        const opt = optimalMoves(board);
        a[4] += branches.filter((b) => opt.includes(Number(b.responseText.trim()) - 1)).length;
      }
      if (branches.every((b) => b.responseText.trim() === branches[0]!.responseText.trim())) a[5] += 1;
    }
  }
  for (const [side, a] of Object.entries(acc)) {
    console.log(`${s.step} ${side} ${a[0]} ${pct(a[1]!, a[0]!)} ${a[2]} ${a[3]} ${pct(a[4]!, a[2]!)} ${pct(a[5]!, a[0]!)}`);
    const t = (total[side] ??= [0, 0, 0, 0, 0, 0]);
    a.forEach((v, i) => (t[i as 0] += v));
  }
}
for (const [side, a] of Object.entries(total)) console.log(`all ${side} ${a[0]} ${pct(a[1]!, a[0]!)} ${a[2]} ${a[3]} ${pct(a[4]!, a[2]!)} ${pct(a[5]!, a[0]!)}`);
store.close();
