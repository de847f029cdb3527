/**
 * A short real training run: a small model, warm-started briefly on Plan-Path solver
 * demonstrations, then trained with AT-GRPO. The team's reward on the training tasks rises and
 * every step lands in the store with its groups, trajectories and metrics.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { openRunStore } from '../store/index.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { train, type StepReport } from './trainer.ts';

const config = {
  name: 'trainer test',
  seed: 3,
  env: { name: 'plan-path', options: { size: 4, maxTurns: 2, wallRatio: 0.1 } },
  specialization: 'L2',
  models: { base: { config: { vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 4, intermediateSize: 128, maxSequenceLength: 160 } } },
  policies: { tool: { model: 'base', lora: { rank: 8 } }, plan: { model: 'base', lora: { rank: 8 } } },
  router: { tool: 'tool', plan: 'plan' },
  algorithm: { name: 'at-grpo', branches: 4, envsPerStep: 8, maxNewTokens: 10, filters: { dropZeroVariance: true } },
  optimizer: { lr: 0.003 },
  warmStart: { demonstrations: 200, steps: 60, batchSize: 16, lr: 0.005 },
  training: { steps: 12, validateEvery: 12, validationEpisodes: 32, checkpointEvery: 12 },
};

test('a short AT-GRPO run raises the team reward and commits every step', { timeout: 240_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const experiment = await resolveExperiment(parseExperimentConfig(config, 'trainer test'), join(dir, 'config.json'));
    const run = store.createRun({ name: config.name, config, runDir: join(dir, 'run') });
    const steps: StepReport[] = [];
    const summary = await train({ experiment, store, runId: run.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), resume: false, log: () => {}, onStep: (r) => steps.push(r) });
    assert.equal(summary.lastStep, 12);
    assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    // Training tasks differ from step to step, so compare on the fixed validation seeds.
    const before = summary.initial!.meanReward;
    const after = summary.final!.meanReward;
    console.log(`validation reward ${before.toFixed(3)} → ${after.toFixed(3)}, success ${summary.initial!.success} → ${summary.final!.success}; train reward by step ${steps.map((r) => r.meanReward.toFixed(1)).join(' ')}`);
    assert.ok(after > before, `validation reward should rise: ${before.toFixed(3)} → ${after.toFixed(3)}`);
    // Groups and advantages were stored for the trained samples.
    const trajectories = store.listTrajectories({ runId: run.id, step: 12, phase: 'train', limit: 100, offset: 0 });
    assert.equal(trajectories.length, 8);
    const detail = store.getTrajectory(trajectories[0]!.id)!;
    for (const turn of detail.turns) assert.equal(turn.siblings.length + 1, 4, 'each kept turn has its K-1 sibling branches');
    const series = store.metricSeries({ runId: run.id, name: 'reward/mean', agentId: 'plan' });
    assert.equal(series.length, 12);
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the GRPO baseline trains and commits its per-(task, agent, turn) groups', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-grpo-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const grpo = { ...config, name: 'grpo test', algorithm: { ...config.algorithm, name: 'grpo', envsPerStep: 3, branches: 2 }, warmStart: { enabled: false }, training: { steps: 2, validateEvery: 2, validationEpisodes: 4, checkpointEvery: 2 } };
    const experiment = await resolveExperiment(parseExperimentConfig(grpo, 'grpo test'), join(dir, 'config.json'));
    const run = store.createRun({ name: grpo.name, config: grpo, runDir: join(dir, 'run') });
    await train({ experiment, store, runId: run.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), resume: false, log: () => {} });
    assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [0, 1, 2]);
    const trajectories = store.listTrajectories({ runId: run.id, step: 1, phase: 'train', limit: 100, offset: 0 });
    assert.equal(trajectories.length, 6, 'three tasks, two independent rollouts each');
    assert.deepEqual([...new Set(trajectories.map((t) => t.rollout))].sort(), [0, 1]);
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
