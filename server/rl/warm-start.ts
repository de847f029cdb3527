/**
 * Warm start: supervised training of each base model on solver demonstrations before RL, so the
 * tiny from-scratch model knows the action formats and roughly how to solve the task; RL then
 * has something to improve. The result is cached by a hash of everything that determines it
 * (model, initialisation, environment, demonstrations, budget, tokenizer, this file's version),
 * so a second run with the same settings reuses it instead of retraining.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Environment } from '../envs/environment.ts';
import { warmStartOptions } from '../envs/environments.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import { rolloutSolver } from '../envs/solver-rollout.ts';
import { actAllWithPrograms, actWithPrograms, type ProgramRunner } from '../envs/program-acts.ts';
import { loadCheckpoint, saveCheckpoint } from '../models/checkpoint.ts';
import type { ModelConfig } from '../models/model-config.ts';
import { optimizerSchema } from '../models/optimizer.ts';
import { Policy } from '../models/policy.ts';
import { createPrng } from '../models/prng.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import { CharTokenizer } from '../models/tokenizer.ts';
import type { TrainSequence } from '../models/train-batch.ts';
import type { Engine } from '../runtime/engine.ts';
import type { WarmUpPoint, WarmUpProgress } from '../protocol/methods.ts';
import { warmStartSchema, type ExperimentConfig } from '../protocol/experiment-config.ts';
import { readWarmUpCheckpoint, removeWarmUpCheckpoint, saveWarmUpCheckpoint } from './run-checkpoint.ts';

/**
 * Bump when the warm-start procedure or the training numerics change (3: RMSNorm became a fused
 * ONNX Runtime kernel, whose float32 rounding leads SFT elsewhere; 4: the batch order is drawn
 * from `batchOrderSeed`; 5: a team's flawed proposals come from the environment, so Sudoku's are
 * well formed), so a cache made by an older build is not reused: a fresh clone and an
 * old workspace must start from the same policy.
 */
const WARM_START_VERSION = 5;

/**
 * Training seeds for demonstrations start here, far from the seeds RL steps draw (which start
 * at 0), so the warm start does not simply memorise the first RL tasks.
 */
const DEMO_SEED_OFFSET = 500_000_000;
/** DAgger episodes' seeds: apart from the demonstrations' and from the RL steps'. */
const DAGGER_SEED_OFFSET = 700_000_000;

/**
 * What a warm start takes of the config's `warmStart` (fields documented there); callers outside
 * a run (tests, benches) may leave out DAgger (none) and the proposal noise (`defaultProposalNoise`).
 */
export type WarmStartBudget = Readonly<Pick<WarmStartConfig, 'demonstrations' | 'steps' | 'batchSize' | 'lr'>> & {
  /** Stop once the smoothed loss is at or below this (`warmStart.stopAtLoss`); unset: all the steps. */
  readonly stopAtLoss?: number | undefined;
  readonly dagger?: Readonly<WarmStartConfig['dagger']>;
  readonly proposals?: ProposalNoise;
};

/**
 * In a team, one in `flawedEvery` demonstration episodes (offset from the botched ones) starts
 * with a flawed proposal from the round's first agent, the tool (roles follow the turn order, not
 * the names; `Environment.flawedSolution`: two moves swapped, one digit changed): played, but
 * the tool's recorded answer in that state stays the solver's. The planner's recorded
 * answer is then the proposal when it is as good (a swap often gives another shortest path) and
 * the solver's answer when it is not (`PuzzleEnvironment.solution`), so the planner's
 * demonstrations show proposals to copy and proposals to overrule. With the solver playing the
 * tool, every proposal the planner saw was right and equal to its own answer (measured on 7x7
 * Plan-Path: docs/experiments/2026-11-25.md). Of those episodes, one in `missingEvery` has the tool answer
 * nothing readable instead ("tool: no valid proposal"), so the planner also learns to solve from
 * the state alone. 0 turns either off.
 */
export type ProposalNoise = Readonly<WarmStartConfig['proposals']>;

/** The config's defaults (`warmStart.proposals` left out). */
export const defaultProposalNoise: ProposalNoise = warmStartSchema.parse({}).proposals;

type WarmStartConfig = ExperimentConfig['warmStart'];

export interface WarmStartJob {
  readonly modelId: string;
  readonly config: ModelConfig;
  /** Initial weights (from an init seed or a checkpoint). */
  readonly weights: ReadonlyMap<string, Float32Array>;
  /** Identity of the initial weights for the cache key (`init:<seed>`, or `checkpoint:` + `weightsContentKey`). */
  readonly weightsKey: string;
  /** Agents whose demonstrations this model learns (the agents routed to its policies). */
  readonly agents: readonly string[];
  /** Longest response when the model plays (DAgger rounds); the algorithm's maxNewTokens. */
  readonly maxNewTokens: number;
}

export interface WarmStartResult {
  readonly weights: Map<string, Float32Array>;
  readonly cached: boolean;
  readonly cacheDir: string;
  readonly firstLoss: number;
  readonly lastLoss: number;
  readonly demonstrations: number;
  /** Optimizer steps it trained: `steps`, or fewer where `stopAtLoss` ended it (from the cache entry when reused; null for an entry older than the field). */
  readonly stepsTrained: number | null;
}

/** A warm start that `shouldStop` ended before its last step, its progress checkpointed. */
export interface WarmStartStopped {
  readonly stopped: { readonly step: number; readonly steps: number };
}

/** Where a warm start stands, as `WarmStartHooks.onProgress` reports it (the protocol's warm-up progress less the model's place). */
export type WarmStartReport = Omit<WarmUpProgress, 'modelId' | 'model' | 'models'>;

/** What a run adds to a warm start: progress, stopping at a step boundary, checkpoints a resume continues from. */
export interface WarmStartHooks {
  /** Polled before every supervised step and every batch of a DAgger round's play: true ends the warm start there (its progress checkpointed first). */
  readonly shouldStop?: () => boolean;
  /**
   * Progress: when demonstrations are being collected, when a DAgger round starts, and while
   * training at most every `REPORT_MS` (and at the last step and at every checkpoint), with the
   * loss points since the previous report (after a resume, first the checkpoint's).
   */
  readonly onProgress?: (p: WarmStartReport) => void;
  /**
   * The folder of this model's warm-up checkpoint in the run (`warmUpDir`): written every tenth of
   * the steps (at least `MIN_CHECKPOINT_STEPS` apart), every `CHECKPOINT_MS` and when stopped; a warm start that finds one of
   * its own key continues from it, and removes it once its cache entry is written.
   */
  readonly checkpointDir?: string;
}

/** Progress reports while training come at most this often (and at the last step and every checkpoint). */
const REPORT_MS = 250;
/** A warm-up checkpoint is written at least this often (besides every tenth of the steps). */
const CHECKPOINT_MS = 5 * 60_000;
/** Periodic warm-up checkpoints are at least this many steps apart (a 5-step warm-up writes none). */
const MIN_CHECKPOINT_STEPS = 5;
/** The loss curve a checkpoint and a report's receiver keep: at most this many points (`thinPoints`). */
export const MAX_WARM_UP_POINTS = 1000;
/** The policy id of the model being warm-started, in its checkpoint. */
const WARM_START_POLICY = 'warm-start';

/**
 * A loss curve kept within `max` points: past it every other point goes (the last one always
 * stays), so a long warm-up keeps its shape at half the resolution rather than only its tail.
 */
export function thinPoints(points: WarmUpPoint[], max = MAX_WARM_UP_POINTS): WarmUpPoint[] {
  if (points.length <= max) return points;
  const last = points.at(-1)!;
  const kept = points.filter((_, i) => i % 2 === 1);
  if (kept.at(-1) !== last) kept.push(last);
  return kept.length <= max ? kept : thinPoints(kept, max);
}

/**
 * One in `NOISY_EVERY` demonstration episodes starts with a botched round (the first half of each
 * solver answer, so progress is partial or the text malformed) that is played but not recorded:
 * the recorded acts that follow then see what later rounds look like — a moved position, the
 * previous round's report — which a solver that always finishes in one round never shows.
 */
const NOISY_EVERY = 3;

/** Demonstration episodes played at once when their acts run programs (so the sandbox pool has work for every slot). */
const DEMO_EPISODES_AT_ONCE = 32;

/**
 * Whether `env` is at the start of a round whose first agent proposes to later agents that are
 * learning (`wanted`): a team (tool, then plan) whose environment can flaw an answer. Roles come
 * from the environment's turn order, not from agent names.
 */
function proposesTo(env: Environment, wanted: ReadonlySet<string>): boolean {
  const [proposer, ...reviewers] = env.agents;
  return env.flawedSolution !== undefined && env.currentAgent() === proposer && reviewers.some((a) => wanted.has(a));
}

/** Thrown by `solverDemonstrations` when its `shouldStop` says so; `warmStart` makes it a stop. */
class DemonstrationsStopped extends Error {
  constructor() {
    super('stopped while collecting demonstrations');
  }
}

/**
 * (prompt, response) sequences from solver rollouts on training seeds, for the given agents. In an
 * environment whose agents write code, `run` runs the solver's programs (the sandbox).
 * `shouldStop` is polled every `DEMO_EPISODES_AT_ONCE` episodes (true: DemonstrationsStopped).
 */
export async function solverDemonstrations(
  make: (seed: number) => Environment,
  count: number,
  agents: readonly string[],
  tok: TextTokenizer,
  noise: ProposalNoise = defaultProposalNoise,
  run?: ProgramRunner,
  shouldStop?: () => boolean,
): Promise<TrainSequence[]> {
  const wanted = new Set(agents);
  const out: TrainSequence[] = [];
  const push = (observation: string, response: string) => {
    const prompt = tok.encodePrompt([{ role: 'user', text: observation }]);
    out.push({ tokens: Int32Array.from([...prompt, ...tok.encodeResponse(response)]), promptLength: prompt.length });
  };
  /** Episode i's (observation, response) pairs, in order. */
  const episode = async (i: number): Promise<[string, string][]> => {
    const pairs: [string, string][] = [];
    const env = make(trainSeed(DEMO_SEED_OFFSET + i));
    if (i % NOISY_EVERY === NOISY_EVERY - 1 && env.maxTurns > 1) {
      const round = env.turn;
      while (!env.done && env.turn === round) {
        const agent = env.currentAgent();
        const full = env.solution(agent);
        await actWithPrograms(env, agent, full.slice(0, Math.floor(full.length / 2)), run);
      }
      if (env.done) return pairs;
    } else if (noise.flawedEvery > 0 && i % noise.flawedEvery === 0 && proposesTo(env, wanted)) {
      const proposer = env.currentAgent();
      const variant = Math.floor(i / noise.flawedEvery);
      const missing = noise.missingEvery > 0 && variant % noise.missingEvery === noise.missingEvery - 1;
      // An empty answer parses in no environment: the planner is told "tool: no valid proposal".
      const proposal = missing ? '' : env.flawedSolution!(proposer, variant);
      if (proposal !== null) {
        // The proposer's own label in this state is still the solver's answer.
        if (wanted.has(proposer)) pairs.push([env.observe(proposer), env.solution(proposer)]);
        await actWithPrograms(env, proposer, proposal, run);
      }
    }
    for (const d of (await rolloutSolver(env, run)).demonstrations) if (wanted.has(d.agent)) pairs.push([d.observation, d.response]);
    return pairs;
  };
  // Episodes are independent, so those that run programs wait on the sandbox together
  // (DEMO_EPISODES_AT_ONCE at a time, its pool deciding how many run at once); the sequences
  // come out in episode order whatever order the programs finish in.
  const atOnce = run ? DEMO_EPISODES_AT_ONCE : 1;
  for (let at = 0; at < count; at += atOnce) {
    if (at % DEMO_EPISODES_AT_ONCE === 0 && shouldStop?.()) throw new DemonstrationsStopped();
    const chunk = await Promise.all(Array.from({ length: Math.min(atOnce, count - at) }, (_, k) => episode(at + k)));
    for (const pairs of chunk) for (const [observation, response] of pairs) push(observation, response);
  }
  return out;
}

/**
 * DAgger's data: the model plays `seeds` greedily (agents it does not learn act as the solver), and
 * each state one of its agents is in gets the solver's answer as the label. These are the states
 * demonstrations never show — after a proposal that hits a wall, with a tool report that says
 * "goal no" — which is where the model's own mistakes lead it.
 */
export async function learnerDemonstrations(
  policy: Policy,
  make: (seed: number) => Environment,
  seeds: readonly number[],
  agents: readonly string[],
  tok: TextTokenizer,
  maxNewTokens: number,
  run?: ProgramRunner,
  shouldStop?: () => boolean,
): Promise<{ sequences: TrainSequence[]; solved: number; stopped: boolean }> {
  const wanted = new Set(agents);
  const sequences: TrainSequence[] = [];
  let solved = 0;
  // 64 environments per generate batch, as validation plays them.
  for (let start = 0; start < seeds.length; start += 64) {
    // A stop between batches gives up the round (it is played again from the same weights).
    if (shouldStop?.()) return { sequences, solved, stopped: true };
    const envs = seeds.slice(start, start + 64).map(make);
    for (let call = 0; envs.some((e) => !e.done); call++) {
      const mine: Environment[] = [];
      const prompts: Int32Array[] = [];
      for (const e of envs) {
        if (e.done) continue;
        const agent = e.currentAgent();
        if (!wanted.has(agent)) {
          await actWithPrograms(e, agent, e.solution(agent), run);
          continue;
        }
        const prompt = tok.encodePrompt([{ role: 'user', text: e.observe(agent) }]);
        sequences.push({ tokens: Int32Array.from([...prompt, ...tok.encodeResponse(e.solution(agent))]), promptLength: prompt.length });
        mine.push(e);
        prompts.push(prompt);
      }
      if (mine.length === 0) continue;
      const gen = await policy.generate(prompts, { maxNewTokens, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: call, stopTokens: tok.stopTokenIds, padToken: tok.padTokenId });
      await actAllWithPrograms(mine.map((e, i) => ({ env: e, agent: e.currentAgent(), text: tok.decode(gen.tokens[i]!, { specials: 'skip' }) })), run);
    }
    solved += envs.filter((e) => e.success).length;
  }
  return { sequences, solved, stopped: false };
}

/**
 * Identity of a set of weights for the cache key: a hash of every tensor's name, length and bytes.
 * A checkpoint's path said nothing about what it holds (a folder overwritten with other weights
 * reused the old warm start; the same weights copied elsewhere retrained).
 */
export function weightsContentKey(weights: ReadonlyMap<string, Float32Array>): string {
  const h = createHash('sha256');
  for (const name of [...weights.keys()].sort()) {
    const d = weights.get(name)!;
    h.update(`${name}:${d.length};`).update(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
  }
  return h.digest('hex');
}

/**
 * The seed of the order in which demonstrations are drawn into batches: the initial weights and the
 * model, nothing else. It used to be the cache key, so a setting that leaves the demonstrations as
 * they are (an option only another agent's prompt reads, a new option's default) drew other
 * batches and trained another policy (measured: 71.6% and 57.7% test success on 7x7 Plan-Path for
 * one team whose key changed that way).
 */
export function batchOrderSeed(job: Pick<WarmStartJob, 'weightsKey' | 'modelId'>): number {
  return createHash('sha256').update(`${job.weightsKey}\0${job.modelId}`).digest().readUInt32BE(0);
}

export async function warmStartKey(
  job: WarmStartJob,
  env: { name: string; options: unknown; make: (seed: number) => Environment },
  budget: WarmStartBudget,
  tok: TextTokenizer,
  run?: ProgramRunner,
): Promise<string> {
  const h = createHash('sha256');
  // A few demonstrations' text stands in for the environment's code: a change to its rendering
  // or its solver changes the key, so a stale warm start is never reused.
  const noise = budget.proposals ?? defaultProposalNoise;
  const demos = await solverDemonstrations(env.make, 3, job.agents, tok, noise, run);
  const sample = demos.map((s) => tok.decode(s.tokens));
  h.update(
    JSON.stringify({
      version: WARM_START_VERSION,
      sample,
      model: job.config,
      weights: job.weightsKey,
      // Reward-only options at their defaults: the demonstrations never read a reward.
      env: { ...env, options: warmStartOptions(env.name, env.options) },
      agents: [...job.agents].sort(),
      // Without DAgger rounds the budget keys as it did before DAgger existed, so caches stay valid.
      // An unset stopAtLoss (undefined) is left out of the JSON, so the caches made before it existed stay valid.
      budget: (budget.dagger?.rounds ?? 0) > 0 ? { ...withoutProposals(budget), maxNewTokens: job.maxNewTokens } : { demonstrations: budget.demonstrations, steps: budget.steps, batchSize: budget.batchSize, lr: budget.lr, stopAtLoss: budget.stopAtLoss },
      // The default mix keys as before it was a setting, so caches stay valid.
      ...(noise.flawedEvery === defaultProposalNoise.flawedEvery && noise.missingEvery === defaultProposalNoise.missingEvery ? {} : { proposals: noise }),
      // The character tokenizer keys by its spec (as before Hugging Face tokenizers, so caches stay
      // valid). A Hugging Face tokenizer keys by what it makes of the sample — the chat template,
      // merges and special ids behind these prompts and answers — and its stop and padding ids.
      tokenizer: tok instanceof CharTokenizer ? tok.toSpec() : { vocabSize: tok.vocabSize, stopTokenIds: tok.stopTokenIds, padTokenId: tok.padTokenId, sampleIds: demos.map((s) => Array.from(s.tokens)) },
    }),
  );
  return h.digest('hex').slice(0, 24);
}

/** Warm-up steps of the warm start's cosine schedule; `stopAtLoss` is checked only after them. */
function warmStartWarmupSteps(steps: number): number {
  return Math.min(20, Math.floor(steps / 10));
}

/** How a finished warm start ended, as its cache entry (`done.json`) records it. */
export interface WarmStartEnd {
  /** Optimizer steps it trained. */
  readonly stepsTrained: number;
  /** Its budget's steps: the most it could train. */
  readonly steps: number;
  /** Its budget's `stopAtLoss`; null when unset. */
  readonly stopAtLoss: number | null;
  /** The smoothed loss it ended at; null in entries written before it was recorded. */
  readonly smoothedLoss: number | null;
}

/** The folder of a finished warm start of one base model in the cache. */
export function warmStartCacheDir(cacheRoot: string, key: string, modelId: string): string {
  return join(cacheRoot, key, modelId);
}

/** How the cached warm start in `dir` ended; null when there is none, or its `done.json` predates `stepsTrained`. */
export async function readWarmStartEnd(dir: string): Promise<WarmStartEnd | null> {
  let done: unknown;
  try {
    done = JSON.parse(await readFile(join(dir, 'done.json'), 'utf8'));
  } catch {
    return null; // informational only: the weights come from the checkpoint beside it
  }
  if (typeof done !== 'object' || done === null) return null;
  const d = done as { stepsTrained?: unknown; smoothedLoss?: unknown; budget?: { steps?: unknown; stopAtLoss?: unknown } };
  const n = d.stepsTrained;
  const steps = d.budget?.steps;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || typeof steps !== 'number' || !Number.isInteger(steps) || steps < n) return null;
  const finite = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
  return { stepsTrained: n, steps, stopAtLoss: finite(d.budget?.stopAtLoss), smoothedLoss: finite(d.smoothedLoss) };
}

/**
 * Whether a warm start with a loss target ran every step of its budget without reaching it: the
 * ceiling, not the target, ended it, so it is not the policy its config means to start RL from.
 * (The target is checked before the last step only, so one that ran every step missed it unless
 * its final smoothed loss, where recorded, shows it reached exactly then.)
 */
export function missedLossTarget(end: WarmStartEnd): boolean {
  if (end.stopAtLoss === null || end.stepsTrained < end.steps) return false;
  return end.smoothedLoss === null || end.smoothedLoss > end.stopAtLoss;
}

/** A missed target in words, e.g. "ran all 600 steps without reaching its loss target 0.15 (smoothed loss 0.2280)". */
export function missedTargetText(end: WarmStartEnd): string {
  return `ran all ${end.steps} steps without reaching its loss target ${end.stopAtLoss}${end.smoothedLoss === null ? '' : ` (smoothed loss ${end.smoothedLoss.toFixed(4)})`}`;
}

function withoutProposals(budget: WarmStartBudget): Omit<WarmStartBudget, 'proposals'> {
  const { proposals: _, ...rest } = budget;
  return rest;
}

/**
 * Runs (or reuses) the warm start of one base model. `make` creates a training environment from a
 * seed; `cacheRoot` holds finished warm starts by key.
 */
export async function warmStart(
  engine: Engine,
  job: WarmStartJob,
  env: { name: string; options: unknown; make: (seed: number) => Environment },
  budget: WarmStartBudget,
  tok: TextTokenizer,
  cacheRoot: string,
  log: (line: string) => void,
  run?: ProgramRunner,
  hooks: WarmStartHooks = {},
): Promise<WarmStartResult | WarmStartStopped> {
  const key = await warmStartKey(job, env, budget, tok, run);
  const dir = warmStartCacheDir(cacheRoot, key, job.modelId);
  const ckDir = hooks.checkpointDir;
  if (existsSync(join(dir, 'done.json'))) {
    const ck = await loadCheckpoint(dir);
    const end = await readWarmStartEnd(dir);
    const stepsTrained = end?.stepsTrained ?? null;
    const how = stepsTrained !== null && stepsTrained < budget.steps ? ` (stopped at its loss target after ${stepsTrained}/${budget.steps} steps)` : end && missedLossTarget(end) ? ` (${missedTargetText(end)})` : '';
    log(`warm start of '${job.modelId}': reusing cache ${key}${how}`);
    if (ckDir) await removeWarmUpCheckpoint(ckDir);
    return { weights: ck.params, cached: true, cacheDir: dir, firstLoss: Number.NaN, lastLoss: Number.NaN, demonstrations: 0, stepsTrained };
  }
  const report = (p: WarmStartReport) => hooks.onProgress?.(p);
  const saved = ckDir ? await readWarmUpCheckpoint(ckDir, WARM_START_POLICY) : null;
  /** Where a checkpoint of these settings left the warm start (0: none). */
  const from = saved?.state.key === key ? saved.state.step : 0;
  report({ stage: 'demonstrations', step: from, steps: budget.steps, loss: null, etaMs: null, checkpointStep: from > 0 ? from : null, points: [] });
  let demos: TrainSequence[];
  try {
    demos = await solverDemonstrations(env.make, budget.demonstrations, job.agents, tok, budget.proposals, run, hooks.shouldStop);
  } catch (e) {
    if (!(e instanceof DemonstrationsStopped)) throw e;
    log(`warm start of '${job.modelId}': stopped while collecting demonstrations${from > 0 ? `; a resume continues from its checkpoint at step ${from}` : ''}`);
    return { stopped: { step: from, steps: budget.steps } };
  }
  if (demos.length === 0) throw new Error(`warm start of '${job.modelId}': the solver produced no demonstrations for agents ${job.agents.join(', ')}`);
  log(`warm start of '${job.modelId}': ${demos.length} demonstrations from ${budget.demonstrations} solver episodes, ${budget.steps} steps of ${budget.batchSize}`);
  const policy = await Policy.create(engine, {
    id: `warm-start:${job.modelId}`,
    config: job.config,
    weights: job.weights,
    lora: null,
    optimizer: optimizerSchema.parse({
      lr: budget.lr,
      weightDecay: 0.01,
      schedule: { kind: 'cosine', warmupSteps: warmStartWarmupSteps(budget.steps), totalSteps: budget.steps, minLrRatio: 0.1 },
    }),
    kl: false,
    entropy: false,
    // DAgger rounds sample from it: never the embedding rows the tokenizer has no token for.
    maskedTokens: tok.unusedIds(job.config.vocabSize),
    // A row per demonstration, as every cached warm start was trained: demonstrations seldom share
    // a prompt (no speed to gain), and a shared row would round differently and fork the cache.
    sharePrompts: false,
  });
  const rng = createPrng(batchOrderSeed(job));
  let firstLoss = Number.NaN;
  let lastLoss = Number.NaN;
  let ema = Number.NaN;
  const rounds = budget.dagger?.rounds ?? 0;
  const phase = Math.ceil(budget.steps / (rounds + 1));
  let stepsTrained = budget.steps;
  /** The states DAgger rounds added (kept in checkpoints: they came from the model's play at the time). */
  const daggerDemos: TrainSequence[] = [];
  let start = 0;
  let points: WarmUpPoint[] = [];
  let checkpointStep: number | null = null;
  try {
    if (saved && saved.state.key !== key) {
      log(`warm start of '${job.modelId}': its checkpoint in ${ckDir} belongs to other settings (warm-start key ${saved.state.key}, now ${key}); starting over`);
    } else if (saved && ckDir) {
      // The same key draws the same demonstrations; the batches already trained are drawn again
      // (and dropped) so the next batch is the one an uninterrupted warm start would draw.
      await saved.restore(policy);
      start = saved.state.step;
      for (let i = 0; i < start * budget.batchSize; i++) rng.nextUint32();
      for (const d of saved.state.dagger) daggerDemos.push({ tokens: Int32Array.from(d.tokens), promptLength: d.promptLength });
      demos.push(...daggerDemos);
      firstLoss = saved.state.firstLoss ?? Number.NaN;
      lastLoss = ema = saved.state.loss ?? Number.NaN;
      points = saved.state.points;
      checkpointStep = start;
      log(`warm start of '${job.modelId}': continuing from its checkpoint at step ${start}/${budget.steps} (${ckDir})`);
    }
    // A tenth of the steps, but not more often than every MIN_CHECKPOINT_STEPS (a kill repeats at most that many).
    const checkpointEvery = Math.max(MIN_CHECKPOINT_STEPS, Math.ceil(budget.steps / 10));
    let lastCheckpointAt = performance.now();
    const checkpoint = async (step: number) => {
      if (!ckDir || checkpointStep === step) return;
      await saveWarmUpCheckpoint(ckDir, step, WARM_START_POLICY, policy, {
        key,
        step,
        steps: budget.steps,
        firstLoss: Number.isFinite(firstLoss) ? firstLoss : null,
        loss: Number.isFinite(ema) ? ema : null,
        points,
        dagger: daggerDemos.map((d) => ({ tokens: Array.from(d.tokens), promptLength: d.promptLength })),
      });
      checkpointStep = step;
      lastCheckpointAt = performance.now();
      log(`  warm start ${step}/${budget.steps}: checkpoint written (${ckDir})`);
    };
    /** Points not yet reported: after a resume, the whole curve so far. */
    let unreported = [...points];
    let reportedAt = -Infinity;
    const recentMs: number[] = [];
    /** `steps`: the planned total, or where the loss target ended it (the last report then shows the warm-up complete). */
    const progress = (step: number, stage: WarmStartReport['stage'], steps = budget.steps) => {
      const mean = recentMs.length === 0 ? null : recentMs.reduce((a, b) => a + b, 0) / recentMs.length;
      report({ stage, step, steps, loss: Number.isFinite(ema) ? ema : null, etaMs: mean === null ? null : mean * (steps - step), checkpointStep, points: unreported });
      unreported = [];
      reportedAt = performance.now();
    };
    const logEvery = Math.max(1, Math.round(budget.steps / 20));
    progress(start, 'training');
    /** Ends the warm start before `step` (a DAgger round cut short there is played again on resume). */
    const stop = async (step: number): Promise<WarmStartStopped> => {
      await checkpoint(step);
      progress(step, 'training');
      log(`warm start of '${job.modelId}': stopped at step ${step}/${budget.steps}${ckDir ? '; a resume continues from its checkpoint' : ''}`);
      return { stopped: { step, steps: budget.steps } };
    };
    for (let step = start; step < budget.steps; step++) {
      if (hooks.shouldStop?.()) return await stop(step);
      if (rounds > 0 && step > 0 && step % phase === 0) {
        progress(step, 'dagger');
        const round = step / phase;
        const seeds = Array.from({ length: budget.dagger!.episodes }, (_, i) => trainSeed(DAGGER_SEED_OFFSET + round * 1_000_000 + i));
        const visited = await learnerDemonstrations(policy, env.make, seeds, job.agents, tok, job.maxNewTokens, run, hooks.shouldStop);
        if (visited.stopped) return await stop(step);
        demos.push(...visited.sequences);
        daggerDemos.push(...visited.sequences);
        log(`  warm start ${step}: DAgger round ${round}: the model solved ${visited.solved}/${seeds.length} episodes; ${visited.sequences.length} states it reached labelled by the solver (${demos.length} demonstrations now)`);
      }
      const t0 = performance.now();
      const batch = Array.from({ length: budget.batchSize }, () => demos[rng.nextUint32() % demos.length]!);
      const s = await policy.update('ce', batch, null);
      recentMs.push(performance.now() - t0);
      if (recentMs.length > 20) recentMs.shift();
      if (step === 0) firstLoss = s.loss;
      lastLoss = s.loss;
      if (Number.isFinite(s.loss)) ema = Number.isNaN(ema) ? s.loss : 0.9 * ema + 0.1 * s.loss;
      if (Number.isFinite(ema)) {
        const point = { step: step + 1, loss: ema };
        points = thinPoints([...points, point]);
        unreported.push(point);
      }
      const done = step + 1;
      if (done % logEvery === 0 || step === 0 || done === budget.steps) log(`  warm start ${done}/${budget.steps}  loss ${ema.toFixed(4)}`);
      const due = done < budget.steps && (done % checkpointEvery === 0 || performance.now() - lastCheckpointAt >= CHECKPOINT_MS);
      if (budget.stopAtLoss !== undefined && done < budget.steps && done >= warmStartWarmupSteps(budget.steps) && ema <= budget.stopAtLoss) {
        stepsTrained = done;
        log(`  warm start ${done}/${budget.steps}  loss ${ema.toFixed(4)}: at or below its target ${budget.stopAtLoss} (stopAtLoss), so it ends here`);
        progress(done, 'training', done);
        break;
      }
      if (due) await checkpoint(done);
      if (due || done === budget.steps || performance.now() - reportedAt >= REPORT_MS) progress(done, 'training');
    }
    const weights = await policy.weights();
    // Write into a temporary folder and rename, so a crash never leaves a half-written cache entry.
    const tmp = `${dir}.tmp-${process.pid}`;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    await saveCheckpoint(tmp, job.config, weights, { metadata: { warmStartKey: key } });
    await writeFile(join(tmp, 'done.json'), `${JSON.stringify({ key, firstLoss, lastLoss, smoothedLoss: ema, demonstrations: demos.length, budget, stepsTrained }, null, 2)}\n`);
    await rm(dir, { recursive: true, force: true });
    await mkdir(join(dir, '..'), { recursive: true });
    await rename(tmp, dir);
    if (ckDir) await removeWarmUpCheckpoint(ckDir);
    const end: WarmStartEnd = { stepsTrained, steps: budget.steps, stopAtLoss: budget.stopAtLoss ?? null, smoothedLoss: Number.isFinite(ema) ? ema : null };
    if (missedLossTarget(end)) log(`warm start of '${job.modelId}': ${missedTargetText(end)}`);
    return { weights, cached: false, cacheDir: dir, firstLoss, lastLoss, demonstrations: demos.length, stepsTrained };
  } finally {
    await policy.dispose();
  }
}
