/**
 * Where an RL step's time goes: runs the first few RL steps of one config and seed from its cached
 * warm start (as bench:learning trains it: same `train()`, same warm-start cache, same tasks and
 * sampling seeds per step) and prints, per step, the rollout and update seconds beside what each
 * policy had to compute: the acts it sampled, the distinct prompts among them (the generator
 * prefills identical prompts of one call once: `GenerateRequest.sharePrompts`), the samples the
 * update trained (their group survived the filters), the rows they pack into (sequences with the
 * same prompt share a row: `promptGroups`) and the tokens in those rows (each prompt once, every
 * response), which a step's forward and backward passes scale with. Validation is cut to 16
 * episodes and the test skipped (neither touches the training steps). Issue 38: why a GRPO team
 * step cost several times an AT-GRPO one.
 *
 * Usage: node --import tsx bench/learning/step-cost.ts <config.json> [seed, default 1] [RL steps, default 3]
 *   (the warm start is read from, or written to, .troupe/cache/warm-start as bench:learning does)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadExperiment, resolveExperiment } from '../../server/rl/resolve-experiment.ts';
import { train } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';
import type { StepInput } from '../../server/store/step-input.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const [path, seedText = '1', stepsText = '3'] = process.argv.slice(2);
if (!path) throw new Error('usage: step-cost.ts <config.json> [seed] [RL steps]');
const seed = Number(seedText);
const steps = Number(stepsText);
if (!Number.isSafeInteger(seed) || seed < 0 || !Number.isSafeInteger(steps) || steps < 1) throw new Error(`seed and steps must be integers (seed ≥ 0, steps ≥ 1), got ${seedText}, ${stepsText}`);

interface PolicyCost {
  acts: number;
  prompts: Set<string>;
  trained: number;
  rows: Set<string>;
  packedTokens: number;
  responseTokens: number;
}
interface StepCost {
  step: number;
  rolloutMs: number;
  updateMs: number;
  trajectories: number;
  successes: number;
  policies: Map<string, PolicyCost>;
}

/** The counts of one committed step's training trajectories. */
function stepCost(input: StepInput): StepCost {
  const t = input.timingsMs ?? {};
  const train = (input.trajectories ?? []).filter((x) => x.phase === 'train');
  const policies = new Map<string, PolicyCost>();
  for (const traj of train) {
    for (const turn of traj.turns) {
      let p = policies.get(turn.policyId);
      if (!p) policies.set(turn.policyId, (p = { acts: 0, prompts: new Set(), trained: 0, rows: new Set(), packedTokens: 0, responseTokens: 0 }));
      const key = Array.from(turn.promptTokens).join(',');
      p.acts++;
      p.prompts.add(key);
      if (turn.advantage === undefined) continue;
      p.trained++;
      if (!p.rows.has(key)) p.packedTokens += turn.promptTokens.length;
      p.rows.add(key);
      p.packedTokens += turn.responseTokens.length;
      p.responseTokens += turn.responseTokens.length;
    }
  }
  return { step: input.step, rolloutMs: (t['curriculum'] ?? 0) + (t['rollout'] ?? 0), updateMs: t['update'] ?? 0, trajectories: train.length, successes: train.filter((x) => x.success).length, policies };
}

const { config: base } = await loadExperiment(path);
const config = { ...base, seed, training: { ...base.training, validationEpisodes: 16, testEpisodes: 0, validateEvery: 1_000_000 } };
const experiment = await resolveExperiment(config, path);
const work = await mkdtemp(join(tmpdir(), 'troupe-step-cost-'));
const costs: StepCost[] = [];
const store = openRunStore(join(work, 'troupe.db'));
try {
  const commit = store.commitStep.bind(store);
  store.commitStep = (runId, input, hooks) => {
    if (input.step > 0) costs.push(stepCost(input));
    return commit(runId, input, hooks);
  };
  const run = store.createRun({ name: `step-cost ${path} seed ${seed}`, config, runDir: join(work, 'run') });
  await train({
    experiment,
    store,
    runId: run.id,
    runDir: join(work, 'run'),
    cacheRoot: join(root, '.troupe', 'cache', 'warm-start'),
    resume: false,
    steps,
    log: (l) => process.stderr.write(`${l}\n`),
  });
} finally {
  store.close();
  await rm(work, { recursive: true, force: true });
}

console.log(`${path}, seed ${seed} (${experiment.algorithm.name}, K = ${experiment.algorithm.branches}, ${experiment.algorithm.envsPerStep} tasks a step)\n`);
console.log('| step | rollout s | update s | trajectories (solved) | policy | acts | distinct prompts | trained samples | packed rows | packed tokens | response tokens trained |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const c of costs) {
  for (const [policyId, p] of c.policies) {
    console.log(`| ${c.step} | ${(c.rolloutMs / 1000).toFixed(1)} | ${(c.updateMs / 1000).toFixed(1)} | ${c.trajectories} (${c.successes}) | ${policyId} | ${p.acts} | ${p.prompts.size} | ${p.trained} | ${p.rows.size} | ${p.packedTokens} | ${p.responseTokens} |`);
  }
}
