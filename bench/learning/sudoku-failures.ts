/**
 * Where a Sudoku team run fails and what RL could learn there, from its store alone (no model):
 *   1. success by the rounds of naked singles the puzzle needs (the solver's rounds), per
 *      validation step and over the training rollouts;
 *   2. per tool state — `k of n`: this round's singles k among the n empty cells listed — how often
 *      the tool's answer is exactly the solver's (this round's singles), greedy at validation step 0
 *      and sampled in training (every branch);
 *   3. the training tree nodes (K branches of one agent at one turn) whose rewards differ, the only
 *      groups `filters.dropZeroVariance` keeps, split into round 1 and later rounds.
 * Each trajectory is replayed from its seed through the environment (kept acts only), so the states
 * are the environment's own; one whose first prompt is not the fresh puzzle's (a failure-restarts
 * curriculum task) is counted as skipped.
 *
 * Usage: node --import tsx bench/learning/sudoku-failures.ts <troupe.db> [run id]
 * (the workspace's .troupe/troupe.db; the run defaults to the store's only run).
 */
import { sudoku } from '../../server/envs/sudoku.ts';
import { rolloutSolver } from '../../server/envs/solver-rollout.ts';
import { parseExperimentConfig } from '../../server/protocol/experiment-config.ts';
import type { TurnRecord } from '../../server/protocol/trajectory.ts';
import { openRunStore } from '../../server/store/index.ts';

const [dbPath, runArg] = process.argv.slice(2);
if (!dbPath) throw new Error('usage: sudoku-failures.ts <troupe.db> [run id]');
const store = openRunStore(dbPath, { queryOnly: true });
const runs = store.listRuns();
const runId = runArg ?? (runs.length === 1 ? runs[0]!.id : undefined);
if (!runId) throw new Error(`run id: the store holds ${runs.length} runs (${runs.map((r) => r.id).join(', ')}); name one`);
const record = store.getRun(runId) ?? (() => { throw new Error(`run id: no run ${runId} in ${dbPath}`); })();
const config = parseExperimentConfig(record.config, dbPath);
if (config.env.name !== 'sudoku') throw new Error(`run ${runId} trains ${config.env.name}, not sudoku`);
const options = config.env.options;
const make = (seed: number) => sudoku.create(seed, options);

const counts = new Map<string, [number, number]>();
const tally = (key: string, hit: boolean) => {
  const c = counts.get(key) ?? [0, 0];
  c[hit ? 0 : 1]++;
  counts.set(key, c);
};
const roundsNeeded = new Map<number, number>();
const rounds = async (seed: number) => {
  if (!roundsNeeded.has(seed)) roundsNeeded.set(seed, (await rolloutSolver(make(seed))).turns);
  return roundsNeeded.get(seed)!;
};
/** `k of n`: the tool's answer has k fills; the prompt lists n empty cells. */
const toolState = (prompt: string, answer: string) => `${answer.split(' ').length} of ${(/^empty: (.*)$/m.exec(prompt)?.[1] ?? '').split(' ').length}`;

let skipped = 0;
for (let offset = 0; ; offset += 500) {
  const page = store.listTrajectories({ runId, limit: 500, offset });
  for (const summary of page) {
    const detail = store.getTrajectory(summary.id)!;
    const env = make(summary.envSeed);
    const first = detail.turns[0];
    if (!first || first.promptText !== env.observe(first.agentId)) {
      skipped++;
      continue;
    }
    const phase = summary.phase === 'validation' ? `validation step ${String(summary.step).padStart(2)}` : 'train (all steps)';
    if (summary.rollout === 0) tally(`1 success | ${phase} | ${await rounds(summary.envSeed)} round(s)`, summary.success);
    for (const turn of detail.turns) {
      const branches: TurnRecord[] = [turn, ...turn.siblings.filter((s) => s.turn === turn.turn && s.agentId === turn.agentId && s.trajectoryId === turn.trajectoryId)];
      if (turn.agentId === 'tool' && (summary.phase === 'train' || summary.step === 0)) {
        const want = env.solution('tool');
        const how = summary.phase === 'train' ? 'train (sampled)' : 'validation step 0 (greedy)';
        for (const b of branches) tally(`2 tool right | ${how} | ${toolState(turn.promptText, want)}`, b.responseText.trim() === want);
      }
      if (summary.phase === 'train') {
        const rewards = branches.map((b) => b.reward);
        tally(`3 nodes with variance | ${turn.agentId} | ${turn.turn === 0 ? 'round 1' : 'rounds 2+'}`, Math.max(...rewards) - Math.min(...rewards) > 1e-9);
      }
      env.act(turn.agentId, turn.responseText);
    }
  }
  if (page.length < 500) break;
}
store.close();

const titles = ['', 'success by the rounds of naked singles the puzzle needs', "tool's answer is exactly this round's singles, by state (k singles of n cells listed)", 'training tree nodes whose K branches differ in reward'];
let section = '';
for (const [key, [hit, miss]] of [...counts].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))) {
  const [n, ...rest] = key.split(' | ');
  if (n !== section) console.log(`${titles[Number(n!.split(' ')[0])]}:`);
  section = n!;
  console.log(`  ${rest.join('  ').padEnd(48)} ${String(hit).padStart(5)} / ${String(hit + miss).padEnd(5)} ${((100 * hit) / (hit + miss)).toFixed(0).padStart(3)}%`);
}
if (skipped > 0) console.log(`skipped ${skipped} trajectories that do not start at their puzzle's first state (curriculum restarts)`);
