/**
 * Where a math team succeeds and fails, tier by tier: plays a run's test episodes (the seeds and
 * settings of the run's own test) from one or more of its checkpoints and splits them by the tier
 * each seed drew, and splits the run's stored training episodes the same way, step by step.
 *
 * Usage: node --import tsx bench/learning/math-tiers.ts <run folder> [checkpoints] [episodes]
 *   e.g. node --import tsx bench/learning/math-tiers.ts /tmp/ws/.troupe/runs/<run> initial,latest
 * checkpoints: a comma list of initial, latest, best or a step (default initial,latest); episodes:
 * default the config's training.testEpisodes, so the totals are the run's test success.
 *
 * Per tier and checkpoint: team success; the tool's first program printed the right answer
 * (`tool right`), failed to run or parse (`tool error`), or was cut at maxNewTokens (`cut`); and
 * of the episodes whose first program was right, how many the team solved (`copied`: the
 * reasoner's answer matched). From the store: training success per tier over each ten RL steps.
 */
import { mathRewards, MathEnvironment } from '../../server/envs/math/math-env.ts';
import { evaluate, evaluationOptions, TEST_SEED_OFFSET, type Evaluation } from '../../server/rl/evaluate.ts';
import { routingContext } from '../../server/rl/policies.ts';
import { openSandbox } from '../../server/rl/trainer.ts';
import { findRunCheckpoint, loadTeamPolicies, parseCheckpointChoice, runBaseWeights } from '../../server/runs/checkpoint-weights.ts';
import { loadRunExperiment, readRunFolder } from '../../server/runs/run-folder.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { openRunStore } from '../../server/store/index.ts';

const [dir, which = 'initial,latest', n] = process.argv.slice(2);
if (!dir) throw new Error('usage: math-tiers.ts <run folder> [initial,latest|best|<step>,...] [episodes]');
const choices = which.split(',').map((w) => parseCheckpointChoice(w) ?? fail(`checkpoints: each must be initial, latest, best or a step, got '${w}'`));
const folder = await readRunFolder(dir);
const { experiment: exp } = await loadRunExperiment(folder);
const episodes = n === undefined ? exp.training.testEpisodes : Number(n);
if (!Number.isSafeInteger(episodes) || episodes < 1) fail(`episodes must be a positive integer, got '${n}'`);
const tierOf = (seed: number): string => {
  const env = exp.env.make(seed);
  return env instanceof MathEnvironment ? env.problem.tier : fail(`math-tiers: the run's environment is ${env.name}, not math`);
};

function fail(why: string): never {
  throw new Error(why);
}

const pct = (k: number, of: number) => (of === 0 ? '   n/a' : `${((100 * k) / of).toFixed(1).padStart(5)}%`);

/** One checkpoint's test, per tier. */
function tierTable(ev: Evaluation): string[] {
  const rows = new Map<string, { n: number; solved: number; right: number; error: number; cut: number; copied: number }>();
  for (const t of ev.trajectories) {
    const tier = tierOf(t.envSeed);
    const r = rows.get(tier) ?? { n: 0, solved: 0, right: 0, error: 0, cut: 0, copied: 0 };
    rows.set(tier, r);
    r.n++;
    if (t.success) r.solved++;
    const tool = t.samples.find((s) => s.kept && (s.agent === 'tool' || s.agent === 'solo') && s.turn === 0);
    if (tool?.truncated) r.cut++;
    if (tool?.localReward === mathRewards.failed) r.error++;
    if (tool?.localReward === mathRewards.right) {
      r.right++;
      if (t.success) r.copied++;
    }
  }
  return [...rows].sort(([a], [b]) => a.localeCompare(b)).map(([tier, r]) => `  ${tier.padEnd(8)} ${String(r.n).padStart(4)} episodes  solved ${pct(r.solved, r.n)}  tool right ${pct(r.right, r.n)}  tool error ${pct(r.error, r.n)}  cut ${pct(r.cut, r.n)}  copied ${pct(r.copied, r.right)}`);
}

const engine = await Engine.start({ executionProvider: exp.engine.executionProvider, log: () => {} });
const sandbox = await openSandbox(exp, () => {});
try {
  const bases = await runBaseWeights(folder.dir, exp);
  for (const choice of choices) {
    const ck = await findRunCheckpoint(folder.dir, choice);
    const policies = await loadTeamPolicies(engine, exp, bases, ck.dir);
    const ev = await evaluate(exp.env.make, routingContext(exp, policies, sandbox?.runAll), evaluationOptions(exp, episodes, TEST_SEED_OFFSET));
    console.log(`${exp.name} (${folder.runId}), checkpoint ${ck.label}: test success ${pct(ev.success * ev.episodes, ev.episodes).trim()} on ${ev.episodes} test seeds`);
    for (const line of tierTable(ev)) console.log(line);
    for (const p of policies.values()) await p.dispose();
  }
} finally {
  await sandbox?.close();
  await engine.close();
}

// Training episodes from the store, per tier and block of ten steps.
const store = openRunStore(folder.databasePath, { queryOnly: true });
try {
  const blocks = new Map<string, Map<number, { n: number; solved: number }>>();
  for (let offset = 0; ; offset += 10_000) {
    const page = store.listTrajectories({ runId: folder.runId, phase: 'train', limit: 10_000, offset });
    for (const t of page) {
      const tier = tierOf(t.envSeed);
      const block = Math.floor((t.step - 1) / 10);
      const byBlock = blocks.get(tier) ?? new Map<number, { n: number; solved: number }>();
      blocks.set(tier, byBlock);
      const b = byBlock.get(block) ?? { n: 0, solved: 0 };
      byBlock.set(block, b);
      b.n++;
      if (t.success) b.solved++;
    }
    if (page.length < 10_000) break;
  }
  console.log('training success per tier, steps 1-10, 11-20, ...:');
  for (const [tier, byBlock] of [...blocks].sort(([a], [b]) => a.localeCompare(b))) {
    console.log(`  ${tier.padEnd(8)} ${[...byBlock].sort(([a], [b]) => a - b).map(([, b]) => `${pct(b.solved, b.n)} (${b.n})`).join('  ')}`);
  }
} finally {
  store.close();
}
