/**
 * The warm start's DAgger rounds: the model plays, and the states it reaches — including the ones
 * solver demonstrations never show — are labelled with the solver's answer; a warm start with
 * DAgger rounds trains, is cached under its own key, and is reused.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createEnvironment } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { initParameters } from '../models/init.ts';
import { parseModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { defaultTokenizer as tok } from '../models/tokenizer.ts';
import { Engine } from '../runtime/engine.ts';
import { saveCheckpoint } from '../models/checkpoint.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { openRunStore } from '../store/index.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { train } from './trainer.ts';
import { warmUpProgressIn } from './run-checkpoint.ts';
import { batchOrderSeed, learnerDemonstrations, missedLossTarget, readWarmStartEnd, solverDemonstrations, warmStart, warmStartKey, weightsContentKey, type WarmStartJob, type WarmStartReport, type WarmStartResult, type WarmStartStopped } from './warm-start.ts';

/** A warm start that ran to its end (nothing asked it to stop). */
async function finished(p: Promise<WarmStartResult | WarmStartStopped>): Promise<WarmStartResult> {
  const r = await p;
  assert.ok(!('stopped' in r), 'the warm start was not asked to stop');
  return r;
}

const model = parseModelConfig({ vocabSize: 112, hiddenSize: 64, numLayers: 2, numHeads: 4, intermediateSize: 128, maxSequenceLength: 160 });
const options = { size: 4, maxTurns: 3, wallRatio: 0.2 };
const env = { name: 'plan-path', options, make: (seed: number) => createEnvironment('plan-path', seed, options) };
const prompt = (s: { tokens: Int32Array; promptLength: number }) => tok.decode(s.tokens.subarray(0, s.promptLength));
const response = (s: { tokens: Int32Array; promptLength: number }) => tok.decode(s.tokens.subarray(s.promptLength), { specials: 'skip' });

test("DAgger labels the states the model's own play reaches with the solver's answer", { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  try {
    const policy = await Policy.create(engine, { id: 'p', config: model, weights: initParameters(model, 3), lora: null, optimizer: optimizerSchema.parse({ lr: 3e-3 }), kl: false, entropy: false });
    const seeds = Array.from({ length: 12 }, (_, i) => trainSeed(900 + i));
    // An untrained model answers garbage: every episode runs all its rounds, and the planner sees
    // the tool's failed proposals, which solver play never produces.
    const visited = await learnerDemonstrations(policy, env.make, seeds, ['tool', 'plan'], tok, 12);
    assert.equal(visited.solved, 0);
    assert.equal(visited.sequences.length, seeds.length * options.maxTurns * 2, 'one labelled state per act: 3 rounds of tool + plan');
    const solverPrompts = new Set((await solverDemonstrations(env.make, 200, ['tool', 'plan'], tok)).map(prompt));
    const unseen = visited.sequences.filter((s) => !solverPrompts.has(prompt(s)));
    assert.ok(unseen.length > seeds.length, `${unseen.length} of the labelled states are ones solver demonstrations do not show`);
    assert.ok(unseen.some((s) => /tool: (no valid proposal|.*goal no)/.test(prompt(s))), 'the planner is shown failed tool proposals');
    // Each label is the solver's answer in that state: replaying it from the same seed solves the task.
    for (const s of visited.sequences.filter((q) => prompt(q).includes('turn 1/3') && prompt(q).includes('tool: moves'))) {
      const seed = seeds.find((x) => prompt(s).includes(env.make(x).observe('tool')))!;
      const e = env.make(seed);
      e.act('tool', response(s));
      e.act('plan', response(s));
      assert.ok(e.success, `seed ${seed}: the label '${response(s)}' solves the task`);
    }
    // Agents the model does not learn act as the solver and are not labelled.
    const planOnly = await learnerDemonstrations(policy, env.make, seeds, ['plan'], tok, 12);
    assert.ok(planOnly.sequences.every((s) => prompt(s).includes('plan: moves')));
    assert.equal(planOnly.solved, 0, 'a correct tool proposal does not help a planner that commits garbage');
    await policy.dispose();
  } finally {
    await engine.close();
  }
});

test('a warm start with DAgger rounds trains on the added states and is cached under its own key', { timeout: 180_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const cache = await mkdtemp(join(tmpdir(), 'troupe-dagger-'));
  try {
    const job: WarmStartJob = { modelId: 'base', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool', 'plan'], maxNewTokens: 12 };
    const plain = { demonstrations: 40, steps: 12, batchSize: 8, lr: 5e-3, dagger: { rounds: 0, episodes: 16 } };
    const dagger = { ...plain, dagger: { rounds: 2, episodes: 16 } };
    assert.notEqual(await warmStartKey(job, env, plain, tok), await warmStartKey(job, env, dagger, tok));
    assert.equal(await warmStartKey(job, env, plain, tok), await warmStartKey(job, env, { ...plain, dagger: { rounds: 0, episodes: 99 } }, tok), 'without rounds the episode count is irrelevant');
    // The default proposal mix keys as a budget without one (caches made before it was a setting stay valid); another mix has its own key.
    for (const b of [plain, dagger]) {
      assert.equal(await warmStartKey(job, env, b, tok), await warmStartKey(job, env, { ...b, proposals: { flawedEvery: 3, missingEvery: 0 } }, tok));
      assert.notEqual(await warmStartKey(job, env, b, tok), await warmStartKey(job, env, { ...b, proposals: { flawedEvery: 1, missingEvery: 2 } }, tok));
    }
    const lines: string[] = [];
    const first = await finished(warmStart(engine, job, env, dagger, tok, cache, (l) => lines.push(l)));
    assert.equal(first.cached, false);
    const rounds = lines.filter((l) => l.includes('DAgger round'));
    assert.equal(rounds.length, 2, lines.join('\n'));
    assert.match(rounds[0]!, /DAgger round 1: the model solved \d+\/16 episodes; \d+ states/);
    const second = await finished(warmStart(engine, job, env, dagger, tok, cache, () => {}));
    assert.equal(second.cached, true);
    for (const [name, w] of first.weights) assert.deepEqual(second.weights.get(name), w, name);
  } finally {
    await engine.close();
    await rm(cache, { recursive: true, force: true });
  }
});

test('a checkpoint warm start is cached by the weights it holds, not by its path', { timeout: 180_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ws-content-'));
  const store = openRunStore(join(dir, 'troupe.db'));
  const small = parseModelConfig({ vocabSize: 112, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64, maxSequenceLength: 160 });
  try {
    const a = initParameters(small, 1);
    const b = initParameters(small, 2);
    assert.notEqual(weightsContentKey(a), weightsContentKey(b));
    assert.equal(weightsContentKey(a), weightsContentKey(initParameters(small, 1)));
    let runs = 0;
    /** Trains one step from the checkpoint at `folder`; true when the warm start came from the cache. */
    const reused = async (folder: string): Promise<boolean> => {
      const cfg = {
        name: 'content key',
        env: { name: 'plan-path', options: { size: 4, maxTurns: 2 } },
        specialization: 'L2',
        models: { base: { checkpoint: folder } },
        policies: { tool: { model: 'base', lora: { rank: 2 } }, plan: { model: 'base', lora: { rank: 2 } } },
        router: { tool: 'tool', plan: 'plan' },
        algorithm: { envsPerStep: 1, branches: 2, maxNewTokens: 6 },
        warmStart: { demonstrations: 8, steps: 2, batchSize: 4 },
        training: { steps: 1, validateEvery: 1, validationEpisodes: 1, checkpointEvery: 1 },
      };
      const experiment = await resolveExperiment(parseExperimentConfig(cfg, 'content key'), join(dir, 'config.json'));
      const runDir = join(dir, `run-${runs++}`);
      const run = store.createRun({ name: cfg.name, config: cfg, runDir });
      const lines: string[] = [];
      await train({ experiment, store, runId: run.id, runDir, cacheRoot: join(dir, 'cache'), resume: false, log: (l) => lines.push(l) });
      return lines.some((l) => l.includes('reusing cache'));
    };
    const ck = join(dir, 'ck');
    await saveCheckpoint(ck, small, a);
    assert.equal(await reused(ck), false);
    // The same folder, other weights: a fresh warm start (keyed by the path, the old one was reused).
    await saveCheckpoint(ck, small, b);
    assert.equal(await reused(ck), false, 'overwritten checkpoint must not reuse the warm start of the old weights');
    // The first weights again, under another path: the cache holds them.
    await saveCheckpoint(join(dir, 'copy'), small, a);
    assert.equal(await reused(join(dir, 'copy')), true, 'the same weights at another path reuse their warm start');
  } finally {
    store.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('settings that leave the demonstrations as they are train the same weights under another key', { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const cache = await mkdtemp(join(tmpdir(), 'troupe-ws-order-'));
  try {
    // A model that learns only the tool: the planner's prompt option changes the key, not its data.
    const job: WarmStartJob = { modelId: 'tool-model', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool'], maxNewTokens: 12 };
    const quiet = { ...options, verdictToPlanner: false };
    const other = { name: 'plan-path', options: quiet, make: (seed: number) => createEnvironment('plan-path', seed, quiet) };
    const budget = { demonstrations: 40, steps: 6, batchSize: 8, lr: 5e-3 };
    assert.notEqual(await warmStartKey(job, env, budget, tok), await warmStartKey(job, other, budget, tok));
    assert.deepEqual((await solverDemonstrations(env.make, 40, ['tool'], tok)), (await solverDemonstrations(other.make, 40, ['tool'], tok)));
    const a = await finished(warmStart(engine, job, env, budget, tok, cache, () => {}));
    const b = await finished(warmStart(engine, job, other, budget, tok, cache, () => {}));
    assert.equal(b.cached, false);
    for (const [name, w] of a.weights) assert.deepEqual(b.weights.get(name), w, name);
    // Other initial weights draw another order.
    assert.notEqual(batchOrderSeed(job), batchOrderSeed({ ...job, weightsKey: 'init:4' }));
  } finally {
    await engine.close();
    await rm(cache, { recursive: true, force: true });
  }
});

test('a warm start stopped or crashed mid-way continues from its checkpoint to the weights of an uninterrupted one (DAgger states included)', { timeout: 240_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ws-resume-'));
  try {
    const job: WarmStartJob = { modelId: 'base', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool', 'plan'], maxNewTokens: 12 };
    // 12 steps in 3 phases of 4 (DAgger rounds at steps 4 and 8); checkpoints every 5 steps (a tenth, at least 5).
    const budget = { demonstrations: 40, steps: 12, batchSize: 8, lr: 5e-3, dagger: { rounds: 2, episodes: 8 } };
    const whole = await finished(warmStart(engine, job, env, budget, tok, join(dir, 'cache-whole'), () => {}));

    // Stopped before step 6 (after the first DAgger round): the checkpoint holds step 6. Polled
    // twice while collecting the 40 demonstrations (every 32 episodes), before each of steps 0-6
    // and once in the round's play (one batch of 8 episodes): the 10th poll.
    const ckDir = join(dir, 'run', 'checkpoints', 'warmup-base');
    const reports: WarmStartReport[] = [];
    let polls = 0;
    const stopped = await warmStart(engine, job, env, budget, tok, join(dir, 'cache'), () => {}, undefined, { checkpointDir: ckDir, shouldStop: () => ++polls > 9, onProgress: (p) => reports.push(p) });
    assert.deepEqual(stopped, { stopped: { step: 6, steps: 12 } });
    assert.equal(reports[0]!.stage, 'demonstrations');
    assert.ok(reports.some((r) => r.stage === 'dagger' && r.step === 4), 'the DAgger round is reported');
    assert.equal(reports.at(-1)!.checkpointStep, 6);
    assert.deepEqual(reports.flatMap((r) => r.points).map((p) => p.step), [1, 2, 3, 4, 5, 6], 'every step\'s loss is reported once');
    assert.deepEqual(await warmUpProgressIn(join(dir, 'run')), [{ modelId: 'base', step: 6, steps: 12 }]);

    // A crash (here: the progress listener throws) right after the checkpoint at step 10 leaves that checkpoint.
    const lines: string[] = [];
    await assert.rejects(
      warmStart(engine, job, env, budget, tok, join(dir, 'cache'), (l) => lines.push(l), undefined, {
        checkpointDir: ckDir,
        onProgress: (p) => {
          if (p.checkpointStep === 10) throw new Error('crash');
        },
      }),
      /crash/,
    );
    assert.ok(lines.some((l) => l.includes('continuing from its checkpoint at step 6/12')), lines.join('\n'));
    assert.deepEqual(await warmUpProgressIn(join(dir, 'run')), [{ modelId: 'base', step: 10, steps: 12 }]);

    const resumed: WarmStartReport[] = [];
    const done = await warmStart(engine, job, env, budget, tok, join(dir, 'cache'), () => {}, undefined, { checkpointDir: ckDir, onProgress: (p) => resumed.push(p) });
    assert.ok(!('stopped' in done));
    assert.equal(done.cached, false);
    // The first report after the resume carries the curve so far; the last step is reported.
    assert.deepEqual(resumed.find((r) => r.stage === 'training')!.points.map((p) => p.step), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.equal(resumed.at(-1)!.step, 12);
    for (const [name, w] of whole.weights) assert.deepEqual(done.weights.get(name), w, `${name}: the resumed warm start trains the same weights`);
    assert.equal(existsSync(ckDir), false, 'the checkpoint goes once the warm start is cached');
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a stop during a DAgger round ends the warm start before the round, which the resume plays again', { timeout: 240_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ws-dagger-stop-'));
  try {
    const job: WarmStartJob = { modelId: 'base', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool', 'plan'], maxNewTokens: 12 };
    // Two batches of play per round (64 episodes each): the stop comes between them.
    const budget = { demonstrations: 40, steps: 8, batchSize: 8, lr: 5e-3, dagger: { rounds: 1, episodes: 65 } };
    const whole = await finished(warmStart(engine, job, env, budget, tok, join(dir, 'cache-whole'), () => {}));
    const ckDir = join(dir, 'warmup-base');
    let inRound = false;
    let polls = 0;
    const stopped = await warmStart(engine, job, env, budget, tok, join(dir, 'cache'), () => {}, undefined, {
      checkpointDir: ckDir,
      onProgress: (p) => (inRound = p.stage === 'dagger'),
      // The round's first batch is played; the poll before its second one stops.
      shouldStop: () => inRound && ++polls === 2,
    });
    assert.deepEqual(stopped, { stopped: { step: 4, steps: 8 } });
    const done = await finished(warmStart(engine, job, env, budget, tok, join(dir, 'cache'), () => {}, undefined, { checkpointDir: ckDir }));
    for (const [name, w] of whole.weights) assert.deepEqual(done.weights.get(name), w, `${name}: the round played again gives the same weights`);
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a stop while the demonstrations are collected keeps the warm-up checkpoint where it was; a checkpoint of other settings is not continued', { timeout: 120_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-ws-other-'));
  try {
    const job: WarmStartJob = { modelId: 'base', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool', 'plan'], maxNewTokens: 12 };
    const budget = { demonstrations: 40, steps: 4, batchSize: 8, lr: 5e-3 };
    const ckDir = join(dir, 'warmup-base');
    // Two polls while collecting demonstrations, then one before each step: stopped before step 2.
    let polls = 0;
    assert.deepEqual(await warmStart(engine, job, env, budget, tok, join(dir, 'cache'), () => {}, undefined, { checkpointDir: ckDir, shouldStop: () => ++polls > 4 }), { stopped: { step: 2, steps: 4 } });
    // A stop while the demonstrations are collected again keeps the checkpoint where it was.
    const lines: string[] = [];
    assert.deepEqual(await warmStart(engine, job, env, budget, tok, join(dir, 'cache'), (l) => lines.push(l), undefined, { checkpointDir: ckDir, shouldStop: () => true }), { stopped: { step: 2, steps: 4 } });
    assert.ok(lines.some((l) => l.includes('stopped while collecting demonstrations; a resume continues from its checkpoint at step 2')), lines.join('\n'));
    lines.length = 0;
    const other = await warmStart(engine, job, env, { ...budget, lr: 1e-3 }, tok, join(dir, 'cache'), (l) => lines.push(l), undefined, { checkpointDir: ckDir });
    assert.ok(!('stopped' in other));
    assert.ok(lines.some((l) => /belongs to other settings .*; starting over/.test(l)), lines.join('\n'));
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('stopAtLoss ends the warm start at the first step past the warm-up whose smoothed loss reaches the target, keys apart, and is reported when reused', { timeout: 180_000 }, async () => {
  const engine = await Engine.start({ log: () => {} });
  const cache = await mkdtemp(join(tmpdir(), 'troupe-ws-target-'));
  try {
    const job: WarmStartJob = { modelId: 'base', config: model, weights: initParameters(model, 3), weightsKey: 'init:3', agents: ['tool', 'plan'], maxNewTokens: 12 };
    // 30 steps: the schedule's warm-up is 3 steps, after which the target is checked.
    const budget = { demonstrations: 40, steps: 30, batchSize: 8, lr: 5e-3 };
    const curve: { step: number; loss: number }[] = [];
    const whole = await finished(warmStart(engine, job, env, budget, tok, cache, () => {}, undefined, { onProgress: (p) => curve.push(...p.points) }));
    assert.equal(whole.stepsTrained, 30);
    assert.deepEqual(curve.map((p) => p.step), Array.from({ length: 30 }, (_, i) => i + 1));
    // A target the curve reaches around step 12; the same batches are drawn, so the run with it
    // stops where this curve first reaches it (never inside the warm-up, where the loss is not looked at).
    const target = curve[11]!.loss;
    const expected = curve.find((p) => p.step >= 3 && p.loss <= target)!.step;
    assert.ok(expected <= 12 && expected < 30);
    const early = curve.find((p) => p.loss <= curve[1]!.loss)!.step;
    assert.ok(early < 3, 'step 1 or 2 already reaches the loss of step 2');
    const withTarget = { ...budget, stopAtLoss: target };
    assert.notEqual(await warmStartKey(job, env, withTarget, tok), await warmStartKey(job, env, budget, tok), 'the target keys apart');
    assert.equal(await warmStartKey(job, env, { ...budget, stopAtLoss: undefined }, tok), await warmStartKey(job, env, budget, tok), 'unset, it keys as before the field existed');
    const reports: WarmStartReport[] = [];
    const lines: string[] = [];
    const stopped = await finished(warmStart(engine, job, env, withTarget, tok, cache, (l) => lines.push(l), undefined, { onProgress: (p) => reports.push(p) }));
    assert.equal(stopped.cached, false);
    assert.equal(stopped.stepsTrained, expected);
    assert.ok(lines.some((l) => l.includes(`warm start ${expected}/30`) && l.includes('stopAtLoss')), lines.join('\n'));
    const stoppedEnd = (await readWarmStartEnd(stopped.cacheDir))!;
    assert.deepEqual({ ...stoppedEnd, smoothedLoss: null }, { stepsTrained: expected, steps: 30, stopAtLoss: target, smoothedLoss: null });
    assert.ok(stoppedEnd.smoothedLoss !== null && stoppedEnd.smoothedLoss <= target && !missedLossTarget(stoppedEnd), `done.json records the loss it stopped at (${stoppedEnd.smoothedLoss})`);
    assert.deepEqual(reports.flatMap((r) => r.points).map((p) => p.step), Array.from({ length: expected }, (_, i) => i + 1), 'no step past the target is trained');
    assert.deepEqual({ step: reports.at(-1)!.step, steps: reports.at(-1)!.steps }, { step: expected, steps: expected }, 'the last report shows the warm-up complete');
    assert.ok(whole.weights.size > 0 && [...whole.weights].some(([name, w]) => !stopped.weights.get(name)!.every((x, i) => x === w[i])), 'fewer steps, other weights');
    // A target reached at step 2 still trains the warm-up's 3 steps.
    const atWarmup = await finished(warmStart(engine, job, env, { ...budget, stopAtLoss: curve[1]!.loss }, tok, cache, () => {}));
    assert.equal(atWarmup.stepsTrained, 3);
    // Reused from the cache, the run still learns where it stopped.
    const again = await finished(warmStart(engine, job, env, withTarget, tok, cache, (l) => lines.push(l)));
    assert.equal(again.cached, true);
    assert.equal(again.stepsTrained, expected);
    assert.ok(lines.some((l) => l.includes(`stopped at its loss target after ${expected}/30 steps`)), lines.join('\n'));
    // A target never reached runs every step.
    const neverLines: string[] = [];
    const never = await finished(warmStart(engine, job, env, { ...budget, stopAtLoss: 1e-6 }, tok, cache, (l) => neverLines.push(l)));
    assert.equal(never.stepsTrained, 30);
    // ... and says so when it ends and when it is reused, and its cache entry tells it apart.
    assert.ok(missedLossTarget((await readWarmStartEnd(never.cacheDir))!));
    assert.ok(!missedLossTarget((await readWarmStartEnd(whole.cacheDir))!), 'without a target, all the steps are the budget');
    await finished(warmStart(engine, job, env, { ...budget, stopAtLoss: 1e-6 }, tok, cache, (l) => neverLines.push(l)));
    assert.equal(neverLines.filter((l) => l.includes('ran all 30 steps without reaching its loss target 0.000001')).length, 2, neverLines.join('\n'));
  } finally {
    await engine.close();
    await rm(cache, { recursive: true, force: true });
  }
});
