/**
 * Short real training runs: a small model warm-started briefly on Plan-Path solver
 * demonstrations, then trained with AT-GRPO (every step lands in the store with its groups,
 * trajectories and metrics) or with the GRPO baseline; and PPO updates on one real rollout batch
 * raise the reward the policy expects from each group's sampled branches.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { openRunStore } from '../store/index.ts';
import { createEnvironment } from '../envs/environments.ts';
import { trainSeed, validationSeed } from '../envs/seed-ranges.ts';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import { Engine } from '../runtime/engine.ts';
import { computeAdvantages } from './advantages.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { selectTasks } from './curriculum.ts';
import { rollout } from './rollout.ts';
import { solverDemonstrations } from './warm-start.ts';
import { train, type StepReport } from './trainer.ts';
import { evaluate, TEST_SEED_OFFSET } from './evaluate.ts';
import { createPolicies, routingContext } from './policies.ts';
import { bestFile, readBest } from './run-checkpoint.ts';
import { findRunCheckpoint, policyTensors, runBaseWeights } from '../runs/checkpoint-weights.ts';

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
  warmStart: { demonstrations: 100, steps: 15, batchSize: 16, lr: 0.005 },
  training: { steps: 12, validateEvery: 12, validationEpisodes: 32, checkpointEvery: 12 },
};

test('a short AT-GRPO run trains every policy and commits every step', { timeout: 240_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const experiment = await resolveExperiment(parseExperimentConfig(config, 'trainer test'), join(dir, 'config.json'));
    const run = store.createRun({ name: config.name, config, runDir: join(dir, 'run') });
    const steps: StepReport[] = [];
    const summary = await train({ experiment, store, runId: run.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), resume: false, log: () => {}, onStep: (r) => steps.push(r) });
    assert.equal(summary.lastStep, 12);
    assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    // Learning itself is checked where it is deterministic (the next test); twelve steps on fresh
    // tasks move validation reward by less than its seed-to-seed noise.
    assert.ok(summary.initial && summary.final && Number.isFinite(summary.final.meanReward));
    assert.equal(steps.length, 12);
    // Groups and advantages were stored for the trained samples.
    const trajectories = store.listTrajectories({ runId: run.id, step: 12, phase: 'train', limit: 100, offset: 0 });
    assert.equal(trajectories.length, 8);
    const detail = store.getTrajectory(trajectories[0]!.id)!;
    for (const turn of detail.turns) assert.equal(turn.siblings.length + 1, 4, 'each kept turn has its K-1 sibling branches');
    const series = store.metricSeries({ runId: run.id, name: 'reward/mean', agentId: 'plan' });
    assert.equal(series.length, 12);
    // PPO mini-batches (default 4): several optimizer steps per rollout batch, and after the first
    // the ratio leaves 1 (with one step per batch approx-KL was 0 at every step; whether the clip
    // engages too depends on the learning rate: ppo-update.ort.test.ts).
    for (const policyId of ['tool', 'plan']) {
      const optSteps = store.metricSeries({ runId: run.id, name: 'update/optimizer_steps', policyId }).map((p) => p.value);
      assert.ok(optSteps.some((n) => n > 1), `${policyId}: optimizer steps per RL step ${optSteps.join(',')}`);
      const kl = store.metricSeries({ runId: run.id, name: 'kl/approx', policyId }).map((p) => p.value);
      assert.ok(kl.some((c) => c > 1e-6), `${policyId}: approx-KL to the sampling policy ${kl.join(',')}`);
    }
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the GRPO baseline trains and commits one group per task', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-grpo-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const grpo = { ...config, name: 'grpo test', algorithm: { ...config.algorithm, name: 'grpo', envsPerStep: 3, branches: 2 }, warmStart: { enabled: false }, training: { steps: 2, validateEvery: 2, validationEpisodes: 4, testEpisodes: 3, checkpointEvery: 2 } };
    const experiment = await resolveExperiment(parseExperimentConfig(grpo, 'grpo test'), join(dir, 'config.json'));
    const run = store.createRun({ name: grpo.name, config: grpo, runDir: join(dir, 'run') });
    const lines: string[] = [];
    const summary = await train({ experiment, store, runId: run.id, runDir: join(dir, 'run'), cacheRoot: join(dir, 'cache'), resume: false, log: (l) => lines.push(l) });
    assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [0, 1, 2]);
    // The test runs before RL and after the last step, on seeds validation never plays.
    assert.equal(summary.initialTest?.episodes, 3);
    assert.equal(summary.finalTest?.episodes, 3);
    assert.deepEqual(summary.initialTest.seeds, [0, 1, 2].map((i) => validationSeed(500_000 + i)));
    assert.ok(summary.initialTest.seeds.every((s) => !summary.initial!.seeds.includes(s)));
    assert.deepEqual(store.metricSeries({ runId: run.id, name: 'test/success' }).map((p) => p.step), [0, 2]);
    assert.ok(lines.some((l) => /test success .* on 3 test seeds \(warm start .*, RL gain [+-]\d+\.\d points\)/.test(l)), lines.join('\n'));
    const trajectories = store.listTrajectories({ runId: run.id, step: 1, phase: 'train', limit: 100, offset: 0 });
    assert.equal(trajectories.length, 6, 'three tasks, two independent rollouts each');
    assert.deepEqual([...new Set(trajectories.map((t) => t.rollout))].sort(), [0, 1]);
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('PPO updates on a real rollout batch raise the reward the policy expects from each group', { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  try {
    const model = parseModelConfig(config.models.base.config);
    const policy = await Policy.create(engine, { id: 'p', config: model, weights: initParameters(model, 7, { std: 0.3 }), lora: null, optimizer: optimizerSchema.parse({ lr: 3e-3, weightDecay: 0 }), kl: false, entropy: false });
    const ctx = { tokenizer: defaultTokenizer, route: () => ({ policyId: 'p', policy }) };
    // A brief supervised start, so sampled branches differ in quality rather than all failing to parse.
    const make = (seed: number) => createEnvironment('plan-path', seed, { size: 4, maxTurns: 1 });
    const demos = (await solverDemonstrations(make, 60, ['tool', 'plan'], defaultTokenizer));
    for (let i = 0; i < 40; i++) await policy.update('ce', demos.slice((i * 16) % 96, ((i * 16) % 96) + 16), null);
    await policy.resetOptimizer();
    const tasks = Array.from({ length: 8 }, (_, i) => createEnvironment('plan-path', trainSeed(i), { size: 4, maxTurns: 1 }));
    const r = await rollout(tasks, ctx, { mode: 'tree', branches: 4, teamRewardWeight: 1, temperature: 1.5, topP: 1, topK: 0, maxNewTokens: 8, seed: 5 });
    const { advantages } = computeAdvantages(r.samples.map((s) => ({ groupId: s.groupId, reward: s.score })));
    r.samples.forEach((s, i) => (s.advantage = advantages[i]!));
    const trained = r.samples.filter((s) => r.samples.some((o) => o.groupId === s.groupId && o.reward !== s.reward));
    assert.ok(trained.length >= 8, 'some groups have reward spread');
    const seqs = trained.map((s) => ({ tokens: Int32Array.from([...s.promptTokens, ...s.responseTokens]), promptLength: s.promptTokens.length, advantages: new Float32Array(s.responseTokens.length).fill(s.advantage) }));
    // The policy's preference among each group's branches: p_k ∝ π(response_k); its expected reward Σ p_k r_k.
    const expected = async () => {
      const logp = await policy.score(seqs, 1);
      const byGroup = new Map<string, Array<{ lp: number; r: number }>>();
      trained.forEach((s, i) => byGroup.set(s.groupId, [...(byGroup.get(s.groupId) ?? []), { lp: logp[i]!.reduce((a, b) => a + b, 0), r: s.reward }]));
      let total = 0;
      for (const g of byGroup.values()) {
        const m = Math.max(...g.map((x) => x.lp));
        const z = g.reduce((a, x) => a + Math.exp(x.lp - m), 0);
        total += g.reduce((a, x) => a + (Math.exp(x.lp - m) / z) * x.r, 0);
      }
      return total / byGroup.size;
    };
    const before = await expected();
    for (let epoch = 0; epoch < 3; epoch++) {
      const old = await policy.score(seqs, 1);
      await policy.update('ppo', seqs.map((q, i) => ({ ...q, oldLogp: old[i]! })), { temperature: 1, clipEps: 0.2, klCoef: 0, entCoef: 0 });
    }
    const after = await expected();
    console.log(`expected group reward ${before.toFixed(3)} → ${after.toFixed(3)}`);
    assert.ok(after > before + 0.05, `expected group reward ${before.toFixed(3)} → ${after.toFixed(3)}`);
  } finally {
    await engine.close();
  }
});

test('L1 (one shared policy) and L3 (a model per agent, sizes differ) train, and a warm start is reused from its cache', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-levels-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  const small = { vocabSize: 112, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64, maxSequenceLength: 160 };
  const base = { ...config, algorithm: { ...config.algorithm, envsPerStep: 2, branches: 2 }, warmStart: { demonstrations: 10, steps: 3, batchSize: 4, lr: 0.005 }, training: { steps: 1, validateEvery: 1, validationEpisodes: 2, checkpointEvery: 1 } };
  const levels = {
    L1: { ...base, name: 'L1 test', specialization: 'L1', models: { base: { config: small } }, policies: { shared: { model: 'base' } }, router: { tool: 'shared', plan: 'shared' }, optimizer: { lr: 1e-4 } },
    L3: { ...base, name: 'L3 test', specialization: 'L3', models: { t: { config: small }, p: { config: { ...small, hiddenSize: 48, numHeads: 3 } } }, policies: { tool: { model: 't' }, plan: { model: 'p' } }, router: { tool: 'tool', plan: 'plan' }, optimizer: { lr: 1e-4 } },
  };
  try {
    for (const [level, cfg] of Object.entries(levels)) {
      const experiment = await resolveExperiment(parseExperimentConfig(cfg, `${level} test`), join(dir, 'config.json'));
      for (const attempt of [0, 1]) {
        const runDir = join(dir, `${level}-${attempt}`);
        const run = store.createRun({ name: cfg.name, config: cfg, runDir });
        const lines: string[] = [];
        await train({ experiment, store, runId: run.id, runDir, cacheRoot: join(dir, 'cache'), resume: false, log: (l) => lines.push(l) });
        assert.deepEqual(store.listSteps(run.id).map((s) => s.step), [0, 1], `${level} attempt ${attempt}`);
        const reused = lines.filter((l) => l.includes('reusing cache')).length;
        assert.equal(reused, attempt === 0 ? 0 : experiment.models.size, `${level} attempt ${attempt}: warm starts reused`);
      }
    }
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the greedy-failures curriculum rolls out the candidates the greedy policy fails first, then solved ones', { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  try {
    const cfg = { ...config, algorithm: { ...config.algorithm, envsPerStep: 6, curriculum: { kind: 'greedy-failures', candidates: 16 } } };
    const experiment = await resolveExperiment(parseExperimentConfig(cfg, 'curriculum test'), '/nonexistent/config.json');
    const model = parseModelConfig(config.models.base.config);
    const policy = await Policy.create(engine, { id: 'p', config: model, weights: initParameters(model, 7, { std: 0.3 }), lora: null, optimizer: optimizerSchema.parse({ lr: 3e-3, weightDecay: 0 }), kl: false, entropy: false });
    const ctx = { tokenizer: defaultTokenizer, route: () => ({ policyId: 'p', policy }) };
    // A brief supervised start, so the greedy policy solves some candidates and fails others.
    const demos = (await solverDemonstrations((seed) => experiment.env.make(seed), 80, ['tool', 'plan'], defaultTokenizer));
    for (let i = 0; i < 40; i++) await policy.update('ce', demos.slice((i * 16) % 128, ((i * 16) % 128) + 16), null);

    const greedy = async (envs: ReturnType<typeof experiment.env.make>[]) =>
      (await rollout(envs, ctx, { mode: 'tree', branches: 1, teamRewardWeight: 1, temperature: 0, topP: 1, topK: 0, maxNewTokens: 10, seed: 0 })).trajectories.map((t) => t.success);
    const candidates = Array.from({ length: 16 }, (_, i) => trainSeed((cfg.seed * 1_000_003 + 5) * 16 + i));
    const outcome = await greedy(candidates.map((s) => experiment.env.make(s)));
    const failed = candidates.filter((_, i) => !outcome[i]);
    const solved = candidates.filter((_, i) => outcome[i]);
    assert.ok(failed.length > 0 && solved.length > 0, `the policy fails ${failed.length} of 16 candidates: the test needs both kinds`);

    const sel = await selectTasks(experiment, ctx, 5);
    assert.deepEqual(sel.tasks.map((t) => t.seed), [...failed, ...solved].slice(0, 6), 'failed candidates first, in seed order, then solved ones');
    const metric = (name: string) => sel.metrics.find((m) => m.name === name)?.value;
    assert.equal(metric('curriculum/candidate_success'), solved.length / 16);
    assert.equal(metric('curriculum/failed_fraction'), Math.min(failed.length, 6) / 6);
    // Same weights, same step: the same tasks (a step re-run after a crash sees what the first run saw).
    assert.deepEqual((await selectTasks(experiment, ctx, 5)).tasks.map((t) => t.seed), sel.tasks.map((t) => t.seed));

    // uniform: envsPerStep seeds of the step's own block, as before the curriculum existed.
    const uniform = await resolveExperiment(parseExperimentConfig(config, 'uniform test'), '/nonexistent/config.json');
    assert.deepEqual((await selectTasks(uniform, ctx, 5)).tasks.map((t) => t.seed), Array.from({ length: 8 }, (_, i) => trainSeed((config.seed * 1_000_003 + 5) * 8 + i)));
    await policy.dispose();
  } finally {
    await engine.close();
  }
});

test('select best: the test plays the best validated policy, latest stays the last step, and a resume restores best.json', { timeout: 240_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-best-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  const runDir = join(dir, 'run');
  try {
    // A learning rate far too high for RL: the warm-started team is good and the steps wreck it,
    // so the best validation is step 0's and the last policy is not the one to test.
    const cfg = {
      ...config,
      name: 'select best test',
      optimizer: { lr: 0.5, maxGradNorm: 0 },
      warmStart: { demonstrations: 200, steps: 60, batchSize: 16, lr: 0.01 },
      training: { steps: 3, validateEvery: 1, validationEpisodes: 24, testEpisodes: 24, checkpointEvery: 3, select: 'best' },
    };
    const experiment = await resolveExperiment(parseExperimentConfig(cfg, 'select best test'), join(dir, 'config.json'));
    const run = store.createRun({ name: cfg.name, config: cfg, runDir });
    const base = { experiment, store, runId: run.id, runDir, cacheRoot: join(dir, 'cache'), log: () => {} };
    await train({ ...base, resume: false, steps: 2 });
    // A kill between a step's commit and best.json's rename: the file is behind (here, gone).
    await rm(bestFile(runDir));
    const lines: string[] = [];
    const summary = await train({ ...base, resume: true, log: (l) => lines.push(l) });
    assert.equal(summary.lastStep, 3);

    const val = store.metricSeries({ runId: run.id, name: 'val/success' });
    assert.deepEqual(val.map((p) => p.step), [0, 1, 2, 3]);
    const argmax = val.reduce((b, p) => (p.value > b.value ? p : b));
    assert.ok(argmax.value > 0, `the warm start solves some validation tasks (${val.map((p) => p.value).join(', ')})`);
    assert.ok(val.at(-1)!.value < argmax.value, `the last step is not the best (${val.map((p) => p.value).join(', ')})`);
    assert.deepEqual(summary.best, { step: argmax.step, validationSuccess: argmax.value, episodes: 24 });
    // The dashboard's best line: the running maximum at every validation, across the resume too.
    const runningMax = val.map((p, i) => ({ step: p.step, value: Math.max(...val.slice(0, i + 1).map((q) => q.value)) }));
    assert.deepEqual(store.metricSeries({ runId: run.id, name: 'val/best_success' }), runningMax);
    assert.deepEqual(await readBest(runDir), summary.best, 'best.json rewritten on resume');
    assert.equal(summary.testedStep, argmax.step);
    // (The first invocation ended at step 2 and tested there too.)
    assert.deepEqual(store.metricSeries({ runId: run.id, name: 'test/policy_step' }).at(-1), { step: 3, value: argmax.step });
    assert.ok(lines.some((l) => l.startsWith(`step ${argmax.step} (best validation, `) && l.includes('last step 3)')), lines.join('\n'));

    // The test after RL is the best checkpoint's: replayed on its own, it scores the same.
    const ck = await findRunCheckpoint(runDir, { kind: 'best' });
    assert.equal(ck.step, argmax.step);
    const engine = await Engine.start({ log: () => {} });
    try {
      const policies = await createPolicies(engine, experiment, await runBaseWeights(runDir, experiment));
      const replay = async (tensors: Map<string, Map<string, Float32Array>>) => {
        for (const [id, p] of policies) await p.restore(tensors.get(id)!, new Map(), 0);
        return evaluate(experiment.env.make, routingContext(experiment, policies), { episodes: 24, seedOffset: TEST_SEED_OFFSET, temperature: 0, maxNewTokens: config.algorithm.maxNewTokens, teamRewardWeight: 1 });
      };
      const bases = await runBaseWeights(runDir, experiment);
      assert.equal((await replay(await policyTensors(experiment, ck, bases))).success, summary.finalTest!.success);
      // latest is the state the last step reached, not the restored best.
      const latest = await findRunCheckpoint(runDir, { kind: 'latest' });
      assert.equal(latest.step, 3);
      const [last, resumed] = [await policyTensors(experiment, await findRunCheckpoint(runDir, { kind: 'step', step: 3 }), bases), await policyTensors(experiment, latest, bases)];
      for (const [id, t] of last) for (const [name, data] of t) assert.deepEqual(resumed.get(id)!.get(name), data, `${id}/${name}`);
      const lastTest = (await replay(last)).success;
      assert.notEqual(lastTest, summary.finalTest!.success, 'the last policy tests differently, so the test above tells them apart');
      for (const p of policies.values()) await p.dispose();
    } finally {
      await engine.close();
    }
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a run paused after a step and resumed ends exactly where the same run uninterrupted ends: weights, trajectories, metrics', { timeout: 300_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-trainer-resume-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  try {
    const cfg = { ...config, name: 'resume equality test', training: { steps: 4, validateEvery: 2, validationEpisodes: 16, checkpointEvery: 2, testEpisodes: 16 } };
    const experiment = await resolveExperiment(parseExperimentConfig(cfg, 'resume equality test'), join(dir, 'config.json'));
    const cacheRoot = join(dir, 'cache');
    const runOf = (name: string) => {
      const runDir = join(dir, name);
      const run = store.createRun({ name, config: cfg, runDir });
      return { experiment, store, runId: run.id, runDir, cacheRoot, log: () => {} };
    };
    const whole = runOf('whole');
    const wholeSummary = await train({ ...whole, resume: false });
    // Paused after step 1 (Ctrl-C, or the server's pause), which is no checkpoint step: the resume state carries it on.
    const parts = runOf('parts');
    let committed = 0;
    const first = await train({ ...parts, resume: false, onStep: (r) => { committed = r.step; }, shouldStop: () => committed >= 1 });
    assert.deepEqual({ stopped: first.stopped, lastStep: first.lastStep }, { stopped: true, lastStep: 1 });
    const partsSummary = await train({ ...parts, resume: true });
    assert.equal(partsSummary.lastStep, 4);

    // What a run computes, without its clock: every trajectory (seed, rewards, each turn's text, log-probabilities and
    // advantage, its siblings') and every metric but the clock's (time/, throughput/, *_ms).
    const trajectories = (runId: string) => store.listTrajectories({ runId, limit: 10_000 }).map((t) => {
      const detail = store.getTrajectory(t.id)!;
      return { step: t.step, phase: t.phase, envSeed: t.envSeed, reward: t.teamReward, turns: detail.turns.map((u) => [u.agentId, u.responseText, [...u.logprobs], u.reward, u.advantage, u.siblings.map((s) => [s.responseText, s.advantage])]) };
    });
    const metrics = (runId: string) => [0, 1, 2, 3, 4].map((step) => store.stepMetrics(runId, step).filter((m) => !/^(time|throughput)\/|_ms$/.test(m.name)).map((m) => [m.name, m.value]));
    const wholeTrajectories = trajectories(whole.runId);
    assert.ok(wholeTrajectories.some((t) => t.step === 3 && t.phase === 'train'), 'steps after the pause sampled training trajectories');
    assert.deepEqual(trajectories(parts.runId), wholeTrajectories);
    assert.deepEqual(metrics(parts.runId), metrics(whole.runId));
    assert.deepEqual(partsSummary.finalTest, wholeSummary.finalTest);

    const bases = await runBaseWeights(whole.runDir, experiment);
    const [a, b] = [await policyTensors(experiment, await findRunCheckpoint(whole.runDir, { kind: 'latest' }), bases), await policyTensors(experiment, await findRunCheckpoint(parts.runDir, { kind: 'latest' }), bases)];
    let compared = 0;
    for (const [id, t] of a) for (const [name, data] of t) { assert.deepEqual(b.get(id)!.get(name), data, `${id}/${name}`); compared++; }
    assert.ok(compared > 0, 'the runs have policy tensors to compare');
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
