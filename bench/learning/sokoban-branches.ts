/**
 * What a Sokoban run's turn-level groups taught about answer length: each training group's branches
 * (the K answers of one agent from one state) are replayed on the environment from the task's seed
 * and classed as solved, stuck (the box pushed where it can no longer reach the goal), open (neither)
 * or unparsed; then, per agent, for the branches that did not solve, by their number of moves: how
 * often they got stuck, their mean reward and mean advantage; and within groups holding non-solving
 * branches of different lengths, the advantage of the shortest minus that of the longest.
 * docs/experiments/2026-11-28-sokoban.md item (3): a push into a dead position costs about
 * 0.1 x 2 x 6^2 = 7.2 in shaping against ~0.09 per good move, so the shortest non-solving branch may
 * look best.
 *
 * The rewards are recomputed by the replay (each must equal the stored one: a check that the replay
 * is the run's), and with `--stuck-moves N,...` again with the env option `stuckMoves` set to each N,
 * the advantages recomputed from them as AT-GRPO computes them (`groupAdvantages`), to show what a
 * smaller stuck penalty would do to the same branches. Trains nothing.
 *
 * Usage: node --import tsx bench/learning/sokoban-branches.ts [--stuck-moves 24,12] [--steps 1-80] <workspace>...
 *   (each workspace holds one `troupe train` run of a Sokoban team config; the report is over all)
 */
import { join } from 'node:path';
import { groupAdvantages } from '../../server/rl/advantages.ts';
import type { Environment } from '../../server/envs/environment.ts';
import { sokoban } from '../../server/envs/sokoban.ts';
import { openRunStore } from '../../server/store/index.ts';
import type { TurnRecord } from '../../server/protocol/trajectory.ts';
import { mean } from './seed-stats.ts';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const at = args.indexOf(name);
  if (at < 0) return undefined;
  const value = args[at + 1];
  if (value === undefined) throw new Error(`${name} needs a value`);
  args.splice(at, 2);
  return value;
};
const alternatives = (flag('--stuck-moves') ?? '').split(',').filter(Boolean).map((s) => {
  const n = Number(s);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--stuck-moves: ${JSON.stringify(s)} is not a positive integer`);
  return n;
});
const [fromStep, toStep] = (flag('--steps') ?? '1-100000').split('-').map(Number) as [number, number];
if (!Number.isSafeInteger(fromStep) || !Number.isSafeInteger(toStep)) throw new Error('--steps: a range such as 1-80');
if (args.length === 0) throw new Error('usage: sokoban-branches.ts [--stuck-moves 24,12] [--steps 1-80] <workspace>...');

type Kind = 'solved' | 'stuck' | 'open' | 'unparsed';
interface Branch {
  kind: Kind;
  moves: number;
  /** Moves the rules rejected. */
  blocked: number;
  /** Fewest moves left before the answer less after it (committed: for a tool proposal, as if the planner copied it); null where the episode ends with the round. */
  progress: number | null;
  reward: number;
  advantage: number;
  /** Advantages with the rewards recomputed under each alternative stuckMoves, in `alternatives` order. */
  alt: number[];
}
/** Per agent, every group of training branches. */
const groups: Record<string, Branch[][]> = {};

let checked = 0;
let mismatched = 0;
/** The reward AT-GRPO groups a turn by: teamRewardWeight x team + local. */
const turnReward = (r: { teamReward: number; localReward: number }, alpha: number) => alpha * r.teamReward + r.localReward;

/** The fewest moves left before an answer less those after it is committed (a tool's as if the planner copied it); null once the episode is over. */
function progress(env: Environment, b: TurnRecord): number | null {
  const before = env.solution(b.agentId).length;
  const after = env.clone();
  if (b.agentId === 'tool') after.act('tool', b.responseText);
  after.act('plan', b.responseText);
  return after.done ? null : before - after.solution('tool').length;
}

function replayGroup(envs: Environment[], turn: TurnRecord & { siblings: TurnRecord[] }, alpha: number): Branch[] {
  const branches = [turn, ...turn.siblings].filter((b) => b.agentId === turn.agentId && b.turn === turn.turn);
  const per = envs.map((env) => branches.map((b) => env.clone().act(b.agentId, b.responseText)));
  const [base, ...alts] = per as [ReturnType<Environment['act']>[], ...ReturnType<Environment['act']>[][]];
  const altAdv = alts.map((rs) => groupAdvantages(rs.map((r) => turnReward(r, alpha))));
  // The stored advantages recomputed from the replayed rewards: a check that the alternatives are computed as the run computed its own.
  const own = groupAdvantages(base.map((r) => turnReward(r, alpha)));
  branches.forEach((b, i) => {
    checked++;
    if (Math.abs((b.advantage ?? 0) - own[i]!) > 1e-4) mismatched++;
  });
  return branches.map((b, i) => {
    const r = base[i]!;
    const reward = turnReward(r, alpha);
    if (Math.abs(reward - b.reward) > 1e-6) throw new Error(`replay: ${turn.agentId} turn ${turn.turn} '${b.responseText}' earns ${reward}, the run stored ${b.reward}`);
    const moves = r.parseError === null ? (r.info.split(':')[0] ?? '').replace(/^accept /, '').trim().length : 0;
    // The report, not the episode: a tool's proposal runs on a clone, so only its report says it solves.
    const kind: Kind = r.parseError !== null ? 'unparsed' : / solved yes$/.test(r.info) ? 'solved' : r.info.endsWith(', stuck') ? 'stuck' : 'open';
    return { kind, moves, blocked: Number(/(\d+) blocked/.exec(r.info)?.[1] ?? 0), progress: kind === 'open' ? progress(envs[0]!, b) : null, reward, advantage: b.advantage ?? 0, alt: altAdv.map((a) => a[i]!) };
  });
}

for (const ws of args) {
  const store = openRunStore(join(ws, '.troupe', 'troupe.db'), { queryOnly: true });
  try {
    const id = store.listRuns()[0]?.id;
    const run = id === undefined ? undefined : store.getRun(id);
    if (!run) throw new Error(`${ws}: no run`);
    const config = run.config as { env: { name: string; options?: Record<string, unknown> }; algorithm?: { teamRewardWeight?: number } };
    if (config.env.name !== 'sokoban') throw new Error(`${ws}: a ${config.env.name} run, not sokoban`);
    const alpha = config.algorithm?.teamRewardWeight ?? 1;
    const options = config.env.options ?? {};
    for (const s of store.listSteps(run.id, { limit: 100000 })) {
      if (s.step < fromStep || s.step > toStep) continue;
      for (const t of store.listTrajectories({ runId: run.id, step: s.step, phase: 'train', limit: 10000 })) {
        const detail = store.getTrajectory(t.id)!;
        const envs = [options, ...alternatives.map((stuckMoves) => ({ ...options, stuckMoves }))].map((o) => sokoban.create(detail.trajectory.envSeed, o));
        for (const turn of detail.turns) {
          if (!turn.kept) continue;
          if (turn.promptText !== envs[0]!.observe(turn.agentId)) throw new Error(`${ws}: step ${s.step} seed ${detail.trajectory.envSeed}: the replayed prompt of ${turn.agentId} turn ${turn.turn} differs from the stored one`);
          (groups[turn.agentId] ??= []).push(replayGroup(envs, turn, alpha));
          for (const env of envs) env.act(turn.agentId, turn.responseText);
        }
      }
    }
  } finally {
    store.close();
  }
}

console.log(`${checked} branches replayed, every reward equal to the stored one; ${mismatched} stored advantages differ from those recomputed from the replayed rewards by more than 1e-4`);
const f = (x: number, d = 2) => (Number.isNaN(x) ? 'n/a' : `${x >= 0 && d > 0 ? '+' : ''}${x.toFixed(d)}`);
const pct = (x: number) => (Number.isNaN(x) ? 'n/a' : `${(100 * x).toFixed(0)}%`);
const altNames = alternatives.map((n) => `advantage at stuckMoves ${n}`);
const bucket = (m: number) => (m >= 7 ? '7+' : String(m));

for (const [agent, gs] of Object.entries(groups)) {
  const all = gs.flat();
  const count = (k: Kind) => all.filter((b) => b.kind === k).length;
  console.log(`\n## ${agent}: ${gs.length} groups, ${all.length} branches: solved ${count('solved')}, stuck ${count('stuck')}, open ${count('open')}, unparsed ${count('unparsed')}`);
  console.log(`\nNon-solving parsed branches by moves (blocked: moves rejected; progress: fewest moves left before less after, over the open ones whose episode went on):\n\n| moves | branches | stuck | blocked | progress | mean reward | mean advantage | ${altNames.join(' | ')} |`);
  console.log(`|---|---|---|---|---|---|---|${altNames.map(() => '---|').join('')}`);
  const failing = all.filter((b) => b.kind === 'stuck' || b.kind === 'open');
  for (const key of ['0', '1', '2', '3', '4', '5', '6', '7+']) {
    const bs = failing.filter((b) => bucket(b.moves) === key);
    if (bs.length === 0) continue;
    const moved = bs.flatMap((b) => (b.progress === null ? [] : [b.progress]));
    console.log(`| ${key} | ${bs.length} | ${pct(bs.filter((b) => b.kind === 'stuck').length / bs.length)} | ${f(mean(bs.map((b) => b.blocked)), 1)} | ${f(mean(moved), 1)} | ${f(mean(bs.map((b) => b.reward)))} | ${f(mean(bs.map((b) => b.advantage)))} | ${alternatives.map((_, i) => f(mean(bs.map((b) => b.alt[i]!)))).join(' | ')} |`);
  }
  // Within a group: the shortest against the longest non-solving branch (lengths differ).
  console.log(`\nWithin groups, the shortest minus the longest non-solving branch (groups whose non-solving branches differ in length):\n\n| branches compared | groups | mean advantage, shortest − longest | shortest above longest | ${alternatives.map((n) => `at stuckMoves ${n}: difference | shortest above`).join(' | ')} |`);
  console.log(`|---|---|---|---|${alternatives.map(() => '---|---|').join('')}`);
  for (const [label, keep] of [
    ['stuck or open', (b: Branch) => b.kind === 'stuck' || b.kind === 'open'],
    ['open only', (b: Branch) => b.kind === 'open'],
  ] as const) {
    const pairs = gs.flatMap((g) => {
      const bs = g.filter(keep);
      if (bs.length < 2) return [];
      const short = bs.reduce((a, b) => (b.moves < a.moves ? b : a));
      const long = bs.reduce((a, b) => (b.moves > a.moves ? b : a));
      return short.moves === long.moves ? [] : [{ short, long }];
    });
    const diff = (pick: (b: Branch) => number) => pairs.map((p) => pick(p.short) - pick(p.long));
    const above = (pick: (b: Branch) => number) => pairs.filter((p) => pick(p.short) > pick(p.long)).length / pairs.length;
    console.log(`| ${label} | ${pairs.length} | ${f(mean(diff((b) => b.advantage)))} | ${pct(above((b) => b.advantage))} | ${alternatives.map((_, i) => `${f(mean(diff((b) => b.alt[i]!)))} | ${pct(above((b) => b.alt[i]!))}`).join(' | ')} |`);
  }
  // Where the signal goes: the advantage summed over branches of each kind.
  const sum = (k: Kind, pick: (b: Branch) => number) => all.filter((b) => b.kind === k).reduce((a, b) => a + pick(b), 0);
  console.log(`\nAdvantage summed by kind: ${(['solved', 'open', 'stuck', 'unparsed'] as const).map((k) => `${k} ${f(sum(k, (b) => b.advantage), 0)}${alternatives.map((n, i) => ` (at ${n}: ${f(sum(k, (b) => b.alt[i]!), 0)})`).join('')}`).join(', ')}`);
}
