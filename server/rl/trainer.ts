/**
 * The training loop, top to bottom:
 *   warm start → initial validation → for each step:
 *   pick tasks (curriculum) → rollout (tree or independent) → score → group → advantages →
 *   per-policy update → validate on fixed held-out seeds → log → commit the step → checkpoint.
 *
 * Crash safety: a step's rows (trajectories, turns, groups, metrics) are committed in one
 * transaction *before* the resume checkpoint is replaced. After a kill, resume restarts from the
 * checkpoint; if it is one step behind the store, that step is re-run from the same seeds and its
 * rows replaced (the store treats re-committing the last step as a replace), so nothing committed
 * is lost and nothing is applied twice.
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { loadCheckpoint } from '../models/checkpoint.ts';
import { initParameters } from '../models/init.ts';
import type { Policy } from '../models/policy.ts';
import type { TrainSequence } from '../models/train-batch.ts';
import type { Metric } from '../protocol/trajectory.ts';
import { Engine } from '../runtime/engine.ts';
import type { RunStore, StepInput } from '../store/index.ts';
import { stepAdvantages, treeGroupId } from './advantages.ts';
import { selectTasks } from './curriculum.ts';
import type { ProgramRunner } from '../envs/program-acts.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import { evaluate, evaluationOptions, TEST_SEED_OFFSET, type Evaluation } from './evaluate.ts';
import type { ResolvedExperiment } from './experiment.ts';
import { EngineRollout } from './engine-rollout.ts';
import { createPolicies, routingContext, stringSeed } from './policies.ts';
import { mergeUpdateStats, ppoUpdate } from './ppo-update.ts';
import { rollout, type RolloutOptions, type RolloutResult, type Sample, type Trajectory } from './rollout.ts';
import { readBest, readCheckpointState, restorePolicies, resumeDir, saveResumeState, saveStepCheckpoint, stepDir, warmStartDir, warmUpDir, writeBest, type BestValidation } from './run-checkpoint.ts';
import { bestMetric, mismatchMetrics, rolloutMetrics, testMetrics, updateMetrics, validationMetrics } from './step-metrics.ts';
import { Critic } from './value-head.ts';
import { warmStart, warmStartKey, weightsContentKey, type WarmStartHooks, type WarmStartJob, type WarmStartReport } from './warm-start.ts';
import type { WarmUpProgress } from '../protocol/methods.ts';

export interface TrainOptions {
  readonly experiment: ResolvedExperiment;
  readonly store: RunStore;
  readonly runId: string;
  readonly runDir: string;
  /** Folder of cached warm starts (shared by runs of a workspace). */
  readonly cacheRoot: string;
  /** Continue from the run's resume checkpoint. */
  readonly resume: boolean;
  /** Overrides `training.steps`. */
  readonly steps?: number;
  /** The engine to train on, started with `startEngine` (the caller closes it); default: one started and closed here. */
  readonly engine?: Engine;
  /** Polled at step boundaries and before every warm-up step: true stops the run there (Ctrl-C, pause, stop). */
  readonly shouldStop?: () => boolean;
  /** While a model warms up (not when its warm start comes from the cache): stage, step, loss, ETA, checkpoint. */
  readonly onWarmUp?: (p: WarmUpProgress) => void;
  readonly log: (line: string) => void;
  /** After every committed step, step 0 (the initial validation) included, once its resume checkpoint is written. */
  readonly onCommit?: (c: StepCommit) => void;
  /** After every RL step (1..steps), right after `onCommit`, with the numbers a progress line shows. */
  readonly onStep?: (r: StepReport) => void;
}

/** What the trainer committed for one step: step 0 is the initial validation, 1.. are RL steps. */
export interface StepCommit {
  readonly step: number;
  /** The step the run trains to. */
  readonly steps: number;
  /** Wall-clock time of the step (for step 0, of the initial validation), commit and checkpoint included. */
  readonly ms: number;
  /** Every metric committed for the step, team-wide and per agent/policy. */
  readonly metrics: readonly Metric[];
  /** The step's phases in milliseconds, as committed (`rollout`, `update`, `validation`, `total`…). */
  readonly timingsMs: Readonly<Record<string, number>>;
  readonly validation: Evaluation | null;
}

export interface StepReport extends StepCommit {
  readonly trainSuccess: number;
  readonly meanReward: number;
  readonly policyLoss: number;
}

export interface TrainSummary {
  readonly initial: Evaluation | null;
  readonly final: Evaluation | null;
  /** The test (training.testEpisodes > 0) of the warm-started policy and of the final one; null when not run here. */
  readonly initialTest: Evaluation | null;
  readonly finalTest: Evaluation | null;
  /** The step whose policy `finalTest` played: the last step, or with `training.select: best` the best validated one. */
  readonly testedStep: number | null;
  /** The best validated step so far (checkpoints/best.json). */
  readonly best: BestValidation | null;
  /** The last step committed; null when stopped in the warm-up before step 0. */
  readonly lastStep: number | null;
  readonly stopped: boolean;
  /** Where the warm-up stood when a stop ended it (its checkpoint is there); null otherwise. */
  readonly stoppedInWarmUp: WarmUpStop | null;
}

export interface WarmUpStop {
  readonly modelId: string;
  readonly step: number;
  readonly steps: number;
}

/** The warm start of one base model: its initial weights and the agents whose policies it serves. */
function warmStartJob(exp: ResolvedExperiment, modelId: string, initial: Map<string, Float32Array>): WarmStartJob {
  const m = exp.models.get(modelId)!;
  const agents = [...exp.router].filter(([, p]) => exp.policies.get(p)?.model === modelId).map(([a]) => a);
  return { modelId, config: m.config, weights: initial, weightsKey: m.source.kind === 'init' ? `init:${m.source.seed}` : `checkpoint:${weightsContentKey(initial)}`, agents, maxNewTokens: exp.algorithm.maxNewTokens };
}

/**
 * The warm-start cache key of every base model, by model id, without training anything; null when
 * the experiment has no warm start. Two runs with the same keys start RL from the same weights.
 */
export async function warmStartKeys(exp: ResolvedExperiment): Promise<Record<string, string> | null> {
  if (!exp.warmStart.enabled) return null;
  const keys: Record<string, string> = {};
  const sandbox = await openSandbox(exp, () => {});
  try {
    for (const [modelId, m] of exp.models) {
      const initial = m.source.kind === 'init' ? initParameters(m.config, m.source.seed) : (await loadCheckpoint(m.source.path)).params;
      keys[modelId] = await warmStartKey(warmStartJob(exp, modelId, initial), exp.env, exp.warmStart, exp.tokenizer, sandbox?.runAll);
    }
  } finally {
    await sandbox?.close();
  }
  return keys;
}

/**
 * The sandbox of a run whose agents write code (null otherwise), opened before anything else so
 * that a machine where it cannot start refuses the run at once, saying why.
 */
export async function openSandbox(exp: ResolvedExperiment, log: (line: string) => void): Promise<Sandbox | null> {
  return exp.env.runsCode ? Sandbox.open(exp.sandbox, { log }) : null;
}

/** Initial weights of every base model: from the warm start (cached), else init or checkpoint. */
async function baseWeights(engine: Engine, exp: ResolvedExperiment, o: TrainOptions, run: ProgramRunner | undefined): Promise<Map<string, Map<string, Float32Array>> | WarmUpStop> {
  const out = new Map<string, Map<string, Float32Array>>();
  const models = [...exp.models];
  for (const [index, [modelId, m]] of models.entries()) {
    const saved = warmStartDir(o.runDir, modelId);
    if (o.resume && existsSync(join(saved, 'model.safetensors'))) {
      out.set(modelId, (await loadCheckpoint(saved)).params);
      continue;
    }
    const initial = m.source.kind === 'init' ? initParameters(m.config, m.source.seed) : (await loadCheckpoint(m.source.path)).params;
    if (!exp.warmStart.enabled) {
      out.set(modelId, initial);
      continue;
    }
    const onWarmUp = o.onWarmUp;
    const hooks: WarmStartHooks = {
      checkpointDir: warmUpDir(o.runDir, modelId),
      ...(o.shouldStop ? { shouldStop: o.shouldStop } : {}),
      ...(onWarmUp ? { onProgress: (p: WarmStartReport) => onWarmUp({ modelId, model: index + 1, models: models.length, ...p }) } : {}),
    };
    const ws = await warmStart(engine, warmStartJob(exp, modelId, initial), exp.env, exp.warmStart, exp.tokenizer, o.cacheRoot, o.log, run, hooks);
    if ('stopped' in ws) return { modelId, ...ws.stopped };
    // Copied under a temporary name and renamed, so a kill mid-copy never leaves a torn warm start that a resume would load.
    const tmp = `${saved}.tmp-${process.pid}`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(join(saved, '..'), { recursive: true });
    await cp(ws.cacheDir, tmp, { recursive: true });
    await rm(saved, { recursive: true, force: true });
    await rename(tmp, saved);
    out.set(modelId, ws.weights);
  }
  return out;
}

/**
 * The store's id of a sample's group. The store (and the editor's sibling view) holds groups of
 * one agent at one turn; AT-GRPO's groups are that already, while a GRPO task group (the task's K
 * trajectories) is stored as its (agent, turn) parts, each with the task group's statistics.
 */
function storeGroupId(s: Sample): string {
  return s.groupId === treeGroupId(s.envInstance, s.agent, s.turn) ? s.groupId : `${s.groupId}/${s.agent}/${s.turn}`;
}

function turnRows(t: Trajectory, trained: ReadonlySet<string> | null) {
  return t.samples.map((s) => {
    const inGroup = trained !== null && trained.has(s.groupId);
    return {
      turn: s.turn,
      agentId: s.agent,
      policyId: s.policyId,
      branch: s.branch,
      kept: s.kept,
      promptText: s.prompt,
      responseText: s.response,
      promptTokens: s.promptTokens,
      responseTokens: s.responseTokens,
      logprobs: s.logprobs,
      teamReward: s.teamReward,
      localReward: s.localReward,
      reward: s.reward,
      ...(inGroup ? { advantage: s.advantage, groupId: storeGroupId(s) } : {}),
      ...(s.parseError !== null ? { parseError: s.parseError } : {}),
      ...(s.executions.length > 0 ? { executions: [...s.executions] } : {}),
    };
  });
}

function trajectoryRows(phase: 'train' | 'validation', envName: string, ts: readonly Trajectory[], trained: ReadonlySet<string> | null): NonNullable<StepInput['trajectories']> {
  return ts.map((t) => ({
    phase,
    envName,
    envSeed: t.envSeed,
    envInstance: t.envInstance,
    rollout: t.rollout,
    success: t.success,
    teamReward: t.teamReturn,
    localReward: Object.values(t.localReturns).reduce((a, b) => a + b, 0),
    turns: turnRows(t, trained),
  }));
}

/**
 * Trains every policy on the samples routed to it (`ppoUpdate`: old log-probs fixed before the
 * first step, `ppoEpochs` × `miniBatches` optimizer steps); returns metrics.
 */
async function updatePolicies(exp: ResolvedExperiment, policies: ReadonlyMap<string, Policy>, samples: readonly Sample[], trained: ReadonlySet<string>, step: number): Promise<{ metrics: Metric[]; loss: number }> {
  const a = exp.algorithm;
  const metrics: Metric[] = [];
  let loss = 0;
  for (const [policyId, policy] of policies) {
    const mine = samples.filter((s) => s.policyId === policyId && trained.has(s.groupId));
    if (mine.length === 0) continue;
    const seqs: TrainSequence[] = mine.map((s) => ({
      tokens: Int32Array.from([...s.promptTokens, ...s.responseTokens]),
      promptLength: s.promptTokens.length,
      advantages: new Float32Array(s.responseTokens.length).fill(s.advantage),
    }));
    const r = await ppoUpdate(policy, seqs, { ...a, seed: stringSeed(policyId, (exp.seed * 7919 + step) >>> 0) });
    metrics.push(...mismatchMetrics(policyId, mine.map((s) => s.logprobs), r.oldLogp));
    const s = mergeUpdateStats(r.updates);
    const tokens = seqs.reduce((n, q) => n + q.tokens.length - q.promptLength, 0);
    metrics.push(...updateMetrics(policyId, s, tokens));
    // The clip fraction of the first mini-batch is 0 by construction (the ratio is 1 there); the
    // last one's shows how far the step's updates moved the policy.
    metrics.push({ name: 'clip_frac_last', value: Number.isFinite(r.updates.at(-1)!.clipFrac) ? r.updates.at(-1)!.clipFrac : 0, policyId });
    loss += Number.isFinite(s.loss) ? s.loss : 0;
    metrics.push({ name: 'update/samples', value: mine.length, policyId }, { name: 'update/optimizer_steps', value: r.updates.filter((u) => u.skipped === null).length, policyId }, { name: 'update/non_finite_skips', value: policy.nonFiniteSkips, policyId });
  }
  return { metrics, loss };
}

export async function train(o: TrainOptions): Promise<TrainSummary> {
  const exp = o.experiment;
  const a = exp.algorithm;
  const totalSteps = o.steps ?? exp.training.steps;
  const sandbox = await openSandbox(exp, o.log);
  const engine = o.engine ?? (await startEngine(exp, o.log).catch(async (e: unknown) => {
    await sandbox?.close();
    throw e;
  }));
  try {
    const run = sandbox?.runAll;
    // The base weights are not kept in a variable: once uploaded the engine holds them, and a
    // host copy alive for the whole run would cost as much again (2 GB for a 0.5B model).
    const weights = await baseWeights(engine, exp, o, run);
    if (!(weights instanceof Map)) {
      const last = o.store.lastCommittedStep(o.runId);
      return { initial: null, final: null, initialTest: null, finalTest: null, testedStep: null, best: null, lastStep: last, stopped: true, stoppedInWarmUp: weights };
    }
    const policies = await createPolicies(engine, exp, weights);
    // PPO's value heads (value-head.ts), saved beside the policies in every run checkpoint.
    const critic = a.name === 'ppo' ? new Critic(policies) : null;
    const criticFiles = () => (critic ? { [Critic.file]: critic.serialize() } : {});
    const ctx = routingContext(exp, policies, run);
    // Training rollouts on an engine fleet (rollout.backend); validation and curriculum stay here.
    const backend = exp.rolloutBackend;
    const fleet = backend && backend.kind !== 'in-process' ? new EngineRollout(exp, backend, join(o.runDir, 'engine-adapters'), o.log, o.runId) : null;
    // The servers were started with the source base: a warm-started one is sent before each step's adapters.
    if (fleet && exp.warmStart.enabled) await fleet.setBases(o.runDir, weights);
    const rolloutCtx = fleet ? fleet.context(ctx) : ctx;
    if (exp.training.validationEpisodes > TEST_SEED_OFFSET) throw new Error(`training.validationEpisodes (${exp.training.validationEpisodes}) would reach the test seeds at validation index ${TEST_SEED_OFFSET}`);
    const validate = (test = false) =>
      evaluate(exp.env.make, ctx, test ? evaluationOptions(exp, exp.training.testEpisodes, TEST_SEED_OFFSET) : evaluationOptions(exp, exp.training.validationEpisodes, 0));

    let startStep = 1;
    let initial: Evaluation | null = null;
    let initialTest: Evaluation | null = null;
    let finalTest: Evaluation | null = null;
    const resumeState = o.resume ? await readCheckpointState(resumeDir(o.runDir)) : null;
    let best: BestValidation | null = null;
    if (resumeState) {
      await restorePolicies(resumeDir(o.runDir), policies);
      if (critic) {
        const file = join(resumeDir(o.runDir), Critic.file);
        critic.restore(await readFile(file, 'utf8'), file);
      }
      startStep = resumeState.step + 1;
      o.log(`resuming after step ${resumeState.step} (store has steps up to ${o.store.lastCommittedStep(o.runId) ?? 'none'})`);
      best = await resumedBest(o, resumeState.step, exp.training.validationEpisodes);
    } else {
      // Step 0: the warm-started team before any RL, on the validation seeds.
      const t0 = performance.now();
      initial = await validate();
      const warmRows = [...exp.models.keys()].map((m) => ({ step: 0, kind: 'warmstart' as const, path: warmStartDir(o.runDir, m), meta: { model: m } }));
      const tVal = performance.now();
      if (exp.training.testEpisodes > 0) {
        initialTest = await validate(true);
        o.log(`step 0 (warm-started policy): test success ${pct(initialTest.success)} on ${initialTest.episodes} test seeds`);
      }
      const timingsMs = { validation: tVal - t0, ...(initialTest ? { test: performance.now() - tVal } : {}) };
      // The first validation is the best so far; its checkpoint (the warm-started team's state,
      // listed in the store as the warm start) lets `select: best` come back to it.
      best = { step: 0, validationSuccess: initial.success, episodes: initial.episodes };
      const metrics = [...validationMetrics(initial), bestMetric(best), ...(initialTest ? testMetrics(initialTest) : [])];
      await saveStepCheckpoint(o.runDir, 0, policies, criticFiles());
      o.store.commitStep(o.runId, {
        step: 0,
        timingsMs,
        metrics,
        trajectories: trajectoryRows('validation', exp.env.name, initial.trajectories, null),
        checkpoints: exp.warmStart.enabled ? warmRows.filter((r) => existsSync(r.path)) : [],
      });
      await saveResumeState(o.runDir, 0, policies, criticFiles());
      await writeBest(o.runDir, best);
      o.log(`step 0 (warm-started policy): validation success ${(initial.success * 100).toFixed(1)}%, mean reward ${initial.meanReward.toFixed(3)}`);
      o.onCommit?.({ step: 0, steps: totalSteps, ms: performance.now() - t0, metrics, timingsMs, validation: initial });
    }

    let final: Evaluation | null = null;
    let testedStep: number | null = null;
    let lastStep = startStep - 1;
    let stopped = false;
    // A stop asked for during step 0 takes effect before the first RL step (one during the warm-up ended it there).
    if (o.shouldStop?.() && startStep <= totalSteps) stopped = true;
    for (let step = startStep; !stopped && step <= totalSteps; step++) {
      const tStep = performance.now();
      // 1. Rollout on fresh training tasks, picked by the curriculum from (seed, step) and the
      //    current policy, so a re-run step from the same checkpoint sees the same tasks.
      const selection = await selectTasks(exp, ctx, step);
      // The fleet samples with the adapters as this step starts (after the last update or a resume).
      if (fleet) await fleet.publish(step, policies);
      const r: RolloutResult = await rollout(selection.tasks, rolloutCtx, trainingRolloutOptions(exp, step));
      const tRollout = performance.now();
      // 2–3. Score and group: advantages within (instance, agent, turn) — or per task's K returns for GRPO.
      //    PPO: GAE from the value heads (the task groups only give the store its statistics).
      const grouped = stepAdvantages(r.trajectories, a);
      const { groups, trained } = grouped;
      const ppo = critic ? await critic.advantages(policies, r.trajectories, a) : null;
      const advantages = ppo ? ppo.advantages : grouped.advantages;
      r.trajectories.flatMap((t) => t.samples).forEach((s, i) => (s.advantage = advantages[i]!));
      // 4. Per-policy update on the samples routed to each policy (PPO: then each value head).
      const upd = await updatePolicies(exp, policies, r.samples, trained, step);
      if (critic && ppo) upd.metrics.push(...critic.trainAll(ppo.step, (i) => trained.has(r.samples[i]!.groupId), a, (id) => stringSeed(`${id}/value`, (exp.seed * 7919 + step) >>> 0)));
      const tUpdate = performance.now();
      // 5. Validation on the fixed held-out seeds.
      let val: Evaluation | null = null;
      if (step % exp.training.validateEvery === 0 || step === totalSteps) val = await validate();
      const tVal = performance.now();
      // A validation above every earlier one is the new best (a tie keeps the earlier step); it
      // gets a checkpoint like the history ones, written before the step is committed.
      const newBest = val !== null && (best === null || val.success > best.validationSuccess) ? { step, validationSuccess: val.success, episodes: val.episodes } : null;
      if (newBest) best = newBest;
      const history = step % exp.training.checkpointEvery === 0 || step === totalSteps || newBest !== null;
      const stepCk = history ? await saveStepCheckpoint(o.runDir, step, policies, criticFiles()) : null;
      if (step === totalSteps && exp.training.testEpisodes > 0) {
        testedStep = exp.training.select === 'best' && best ? best.step : step;
        if (testedStep === step) finalTest = await validate(true);
        else {
          // Test the best validated policy, then put the last step's state back: the resume
          // checkpoint and `latest` stay the state training reached.
          await restorePolicies(stepDir(o.runDir, testedStep), policies);
          finalTest = await validate(true);
          await restorePolicies(stepDir(o.runDir, step), policies);
        }
      }
      const tTest = performance.now();
      // 6. Log and commit the step in one transaction.
      const tested = step === totalSteps && finalTest ? [...testMetrics(finalTest), { name: 'test/policy_step', value: testedStep ?? step }] : [];
      const metrics: Metric[] = [...rolloutMetrics(r), ...selection.metrics, ...upd.metrics, ...(val ? validationMetrics(val) : []), ...(val && best ? [bestMetric(best)] : []), ...tested, ...(fleet?.stepMetrics() ?? [])];
      const timingsMs = { curriculum: selection.ms, rollout: tRollout - tStep - selection.ms, inference: r.inferenceMs, env: r.envMs, update: tUpdate - tRollout, validation: tVal - tUpdate, ...(tTest > tVal + 0.5 ? { test: tTest - tVal } : {}), total: tTest - tStep };
      metrics.push(...Object.entries(timingsMs).map(([k, v]) => ({ name: `time/${k}_ms`, value: v })));
      const firstOfGroup = new Map<string, { s: Sample; members: number }>();
      for (const s of r.samples) {
        if (!trained.has(s.groupId)) continue;
        const id = storeGroupId(s);
        const e = firstOfGroup.get(id);
        if (e) e.members++;
        else firstOfGroup.set(id, { s, members: 1 });
      }
      const groupRows = [...firstOfGroup].map(([groupId, { s, members }]) => {
        const g = groups.get(s.groupId)!;
        return { groupId, envInstance: s.envInstance, agentId: s.agent, turn: s.turn, size: a.name === 'at-grpo' ? g.size : members, rewardMean: g.mean, rewardStd: g.std };
      });
      o.store.commitStep(o.runId, {
        step,
        timingsMs,
        metrics,
        groups: groupRows,
        trajectories: [...trajectoryRows('train', exp.env.name, r.trajectories, trained), ...(val ? trajectoryRows('validation', exp.env.name, val.trajectories, null) : [])],
        checkpoints: stepCk ? [{ step, kind: step === totalSteps ? 'final' : 'rl', path: stepCk }] : [],
      });
      // 7. Checkpoint the state the next step starts from, then name a new best.
      await saveResumeState(o.runDir, step, policies, criticFiles());
      if (newBest) await writeBest(o.runDir, newBest);
      lastStep = step;
      if (val) final = val;
      const commit: StepCommit = { step, steps: totalSteps, ms: performance.now() - tStep, metrics, timingsMs, validation: val };
      o.onCommit?.(commit);
      o.onStep?.({
        ...commit,
        trainSuccess: r.trajectories.filter((t) => t.success).length / Math.max(1, r.trajectories.length),
        meanReward: r.samples.filter((s) => s.kept).reduce((x, s) => x + s.reward, 0) / Math.max(1, r.trajectories.length),
        policyLoss: upd.loss,
      });
      if (step === totalSteps && finalTest) {
        const before = initialTest?.success ?? o.store.metricSeries({ runId: o.runId, name: 'test/success', toStep: 0 })[0]?.value;
        const gain = before === undefined ? '' : ` (warm start ${pct(before)}, RL gain ${signed((finalTest.success - before) * 100)} points)`;
        const which = testedStep === step ? `step ${step} (after RL)` : `step ${testedStep} (best validation, ${pct(best!.validationSuccess)}; last step ${step})`;
        o.log(`${which}: test success ${pct(finalTest.success)} on ${finalTest.episodes} test seeds${gain}`);
      }
      if (o.shouldStop?.() && step < totalSteps) stopped = true;
    }
    return { initial, final, initialTest, finalTest, testedStep, best, lastStep, stopped, stoppedInWarmUp: null };
  } finally {
    await sandbox?.close();
    if (!o.engine) await engine.close();
  }
}

/**
 * The best validated step of a resumed run, from the store's committed validations up to the
 * resume checkpoint's step (later ones are re-run), and checkpoints/best.json brought in line with
 * it: a kill between a step's commit and best.json's rename leaves the file one best behind.
 * Validations without a checkpoint (a run from before best checkpoints were kept) are passed over.
 */
async function resumedBest(o: TrainOptions, resumeStep: number, episodes: number): Promise<BestValidation | null> {
  let best: BestValidation | null = null;
  for (const p of o.store.metricSeries({ runId: o.runId, name: 'val/success', toStep: resumeStep })) {
    if (best !== null && p.value <= best.validationSuccess) continue;
    if (!(await readCheckpointState(stepDir(o.runDir, p.step)))) continue;
    best = { step: p.step, validationSuccess: p.value, episodes };
  }
  const saved = await readBest(o.runDir);
  if (best && (saved?.step !== best.step || saved.validationSuccess !== best.validationSuccess)) await writeBest(o.runDir, best);
  return best;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}`;

/** How step `step`'s training rollouts sample: the algorithm's settings and the step's seed. */
export function trainingRolloutOptions(exp: ResolvedExperiment, step: number): RolloutOptions {
  const a = exp.algorithm;
  return {
    mode: a.name === 'at-grpo' ? 'tree' : 'independent',
    branches: a.branches,
    teamRewardWeight: a.teamRewardWeight,
    temperature: a.temperature,
    topP: a.topP,
    topK: a.topK,
    maxNewTokens: a.maxNewTokens,
    seed: (exp.seed * 7919 + step) >>> 0,
    training: true,
    distinctBranches: a.distinctBranches,
  };
}

/** The engine an experiment asks for (execution provider, threads). */
export function startEngine(exp: ResolvedExperiment, log: (line: string) => void): Promise<Engine> {
  return Engine.start({ executionProvider: exp.engine.executionProvider, ...(exp.engine.threads ? { threads: exp.engine.threads } : {}), log });
}
