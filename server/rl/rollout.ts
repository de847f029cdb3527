/**
 * The rollout engine: plays batches of environments with the policies, either with AT-GRPO's
 * tree sampling or with independent rollouts (the GRPO baseline).
 *
 * Tree sampling (AT-GRPO, arXiv 2510.11062 §3): at each (turn, agent), from the one current state of each
 * environment instance, sample K responses; apply each to its own clone; score each branch
 * r = α·r_team + r_local; keep the highest-scoring branch (ties: lowest index) and continue from
 * that *stepped* clone. Every branch is recorded (with its `kept` flag) in group
 * (instance, agent, turn).
 * Independent rollouts: K copies of each task play one trajectory each; every act is scored by
 * its trajectory's return, and the task's K trajectories form one group (the paper's GRPO).
 *
 * Inference is batched across every live environment and branch: one `generate` call per policy
 * per agent position, run in the engine worker, while environment stepping (clone + act) runs
 * here on the main thread between calls.
 */
import type { Environment } from '../envs/environment.ts';
import { actAllWithPrograms, type ProgramRunner } from '../envs/program-acts.ts';
import type { AlgorithmConfig } from '../protocol/experiment-config.ts';
import type { Execution } from '../protocol/trajectory.ts';
import type { Policy } from '../models/policy.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import { taskGroupId, treeGroupId } from './advantages.ts';

/**
 * Sampling and scoring as `algorithm` configures them (branches, teamRewardWeight, temperature,
 * topP, topK, maxNewTokens: documented there); validation and the curriculum's screening play one
 * branch at their own temperature.
 */
export interface RolloutOptions extends Readonly<Pick<AlgorithmConfig, 'branches' | 'teamRewardWeight' | 'temperature' | 'topP' | 'topK' | 'maxNewTokens'>> {
  readonly mode: 'tree' | 'independent';
  /** Seed of this rollout batch (sampling streams derive from it). */
  readonly seed: number;
  /** A training rollout: sample with the policies' rollout weights (int8/int4 when configured). */
  readonly training?: boolean;
  /**
   * Tree mode: a node's K branches draw their first tokens without replacement (`algorithm.distinctBranches`),
   * so they start K different ways even where the policy is nearly certain.
   */
  readonly distinctBranches?: boolean;
}

/** One sampled response of one agent at one turn (a branch of the tree, kept or not). */
export interface Sample {
  readonly envInstance: number;
  readonly envSeed: number;
  /** Which independent rollout of the task (0 in tree mode). */
  readonly rollout: number;
  readonly agent: string;
  readonly policyId: string;
  readonly turn: number;
  readonly branch: number;
  kept: boolean;
  readonly prompt: string;
  readonly response: string;
  readonly promptTokens: Int32Array;
  readonly responseTokens: Int32Array;
  /** Sampling log-probs of the response tokens. */
  readonly logprobs: Float32Array;
  readonly teamReward: number;
  readonly localReward: number;
  /** α·team + local of this act. */
  readonly reward: number;
  /** The value advantages are computed from: the act's reward (tree) or the trajectory's return (independent). */
  score: number;
  readonly groupId: string;
  advantage: number;
  readonly parseError: string | null;
  /** An invalid act: its text did not parse, or the rules refused it whole (`AgentTurnResult.illegal`). */
  readonly invalid: boolean;
  readonly truncated: boolean;
  /** Programs the act ran in the sandbox, in order ([] when it ran none). */
  readonly executions: readonly Execution[];
}

export interface Trajectory {
  readonly envInstance: number;
  readonly envSeed: number;
  readonly rollout: number;
  readonly success: boolean;
  readonly turns: number;
  /** Sum of team rewards of the kept acts. */
  readonly teamReturn: number;
  /** Sum of local rewards of the kept acts, per agent. */
  readonly localReturns: Record<string, number>;
  /** The game's final score, for environments that keep one (`Environment.score`: Hanabi). */
  readonly score?: number;
  /** All samples of this trajectory (every branch), in acting order. */
  readonly samples: Sample[];
}

export interface RolloutResult {
  readonly trajectories: Trajectory[];
  readonly samples: Sample[];
  /** Time inside generate calls (inference) and stepping environments (programs included), ms. */
  readonly inferenceMs: number;
  readonly envMs: number;
  /** Time waiting for programs to run in the sandbox (part of envMs), ms, and how many ran. */
  readonly programMs: number;
  readonly programs: number;
  readonly generatedTokens: number;
}

/** What rollouts need of a policy: sampling. (A `Policy`; tests also script one.) */
export type RolloutPolicy = Pick<Policy, 'generate'>;

export interface RolloutContext {
  readonly tokenizer: TextTokenizer;
  /** The policy acting for an agent, and its id. */
  readonly route: (agent: string) => { policyId: string; policy: RolloutPolicy };
  /**
   * Runs the programs acts ask for (the sandbox's pool). Needed by environments whose agents write
   * code; every branch and environment of one generate call goes to it at once.
   */
  readonly runPrograms?: ProgramRunner;
}

interface Live {
  env: Environment;
  readonly traj: { envInstance: number; envSeed: number; rollout: number; samples: Sample[] };
}

/** Mixes integers into a 32-bit sampling seed. */
export function mixSeed(...xs: number[]): number {
  let h = 0x811c9dc5;
  for (const x of xs) {
    h ^= x >>> 0;
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= h >>> 15;
  }
  return h >>> 0;
}

/**
 * A 32-bit hash of a whole string (FNV-1a over its UTF-16 code units, then an avalanche), for
 * sampling streams: every character counts, so policies 'agent-a' and 'agent-b' sample from
 * different streams. (The seed used to mix only the id's length and first character.)
 */
export function stringHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return mixSeed(h);
}

/** The sampling seed of one generate call: the batch's seed, the call's index and the policy. */
export function samplingSeed(batchSeed: number, call: number, policyId: string): number {
  return mixSeed(batchSeed, call, stringHash(policyId));
}

/** A reward that is not a finite number, named by where it came from. */
export class NonFiniteRewardError extends Error {
  constructor(
    readonly env: string,
    readonly envSeed: number,
    readonly agent: string,
    readonly turn: number,
    readonly branch: number,
    readonly parts: { readonly teamReward: number; readonly localReward: number },
  ) {
    super(`environment ${env} (seed ${envSeed}) gave agent '${agent}' a non-finite reward at turn ${turn}, branch ${branch}: team ${parts.teamReward}, local ${parts.localReward}`);
    this.name = 'NonFiniteRewardError';
  }
}

/**
 * Plays `tasks` (fresh environments, one per task) to the end. In independent mode each task is
 * cloned K times; in tree mode each task is one trajectory with K branches per act.
 */
export async function rollout(tasks: readonly Environment[], ctx: RolloutContext, o: RolloutOptions): Promise<RolloutResult> {
  if (!(Number.isInteger(o.branches) && o.branches >= 1)) throw new Error(`rollout: branches must be a positive integer, got ${o.branches}`);
  const K = o.mode === 'tree' ? o.branches : 1;
  const live: Live[] = [];
  tasks.forEach((env, i) => {
    const copies = o.mode === 'independent' ? o.branches : 1;
    for (let r = 0; r < copies; r++) live.push({ env: copies > 1 ? env.clone() : env, traj: { envInstance: i, envSeed: env.seed, rollout: r, samples: [] } });
  });
  let inferenceMs = 0;
  let envMs = 0;
  let generatedTokens = 0;
  let programMs = 0;
  let programCount = 0;
  const run = ctx.runPrograms;
  const timedRunner = run
    ? async (requests: Parameters<typeof run>[0]) => {
        programCount += requests.length;
        return run(requests);
      }
    : undefined;
  const tok = ctx.tokenizer;
  for (let call = 0; ; call++) {
    const active = live.filter((l) => !l.env.done);
    if (active.length === 0) break;
    // Environments can be at different agents (a finished round elsewhere); batch per policy.
    const byPolicy = new Map<string, Live[]>();
    for (const l of active) {
      const { policyId } = ctx.route(l.env.currentAgent());
      const group = byPolicy.get(policyId);
      if (group) group.push(l);
      else byPolicy.set(policyId, [l]);
    }
    for (const [policyId, group] of byPolicy) {
      const agents = group.map((l) => l.env.currentAgent());
      const turns = group.map((l) => l.env.turn);
      const prompts = group.map((l, i) => l.env.observe(agents[i]!));
      const promptTokens = prompts.map((p) => tok.encodePrompt([{ role: 'user', text: p }]));
      const batch: Int32Array[] = [];
      for (const pt of promptTokens) for (let k = 0; k < K; k++) batch.push(pt);
      const { policy } = ctx.route(agents[0]!);
      const t0 = performance.now();
      const gen = await policy.generate(batch, {
        maxNewTokens: o.maxNewTokens,
        sampling: { temperature: o.temperature, topP: o.topP, topK: o.topK },
        seed: samplingSeed(o.seed, call, policyId),
        stopTokens: tok.stopTokenIds,
        padToken: tok.padTokenId,
        rollout: o.training ?? false,
        ...(o.distinctBranches && K > 1 ? { distinctFirst: K } : {}),
      });
      inferenceMs += performance.now() - t0;
      const t1 = performance.now();
      // Every branch steps its own clone (the last branch may step the live environment itself: it
      // is not needed afterwards); their programs run together, then each act is scored.
      const acts = group.flatMap((l, i) =>
        Array.from({ length: K }, (_, k) => {
          const j = i * K + k;
          return { env: k === K - 1 ? l.env : l.env.clone(), agent: agents[i]!, text: tok.decode(gen.tokens[j]!, { specials: 'skip' }) };
        }),
      );
      const tp = performance.now();
      const ranBefore = programCount;
      const results = await actAllWithPrograms(acts, timedRunner);
      if (programCount > ranBefore) programMs += performance.now() - tp;
      group.forEach((l, i) => {
        const agent = agents[i]!;
        const turn = turns[i]!;
        const groupId = o.mode === 'tree' ? treeGroupId(l.traj.envInstance, agent, turn) : taskGroupId(l.traj.envInstance);
        let best = -1;
        let bestReward = -Infinity;
        let bestEnv: Environment | null = null;
        const branchSamples: Sample[] = [];
        for (let k = 0; k < K; k++) {
          const j = i * K + k;
          const tokens = gen.tokens[j]!;
          generatedTokens += tokens.length;
          const truncated = gen.finish[j] !== 'stop';
          const { env, text: response } = acts[j]!;
          const { result: r, executions } = results[j]!;
          const reward = o.teamRewardWeight * r.teamReward + r.localReward;
          // Caught here, where the culprit is known: further on a NaN only shows as no kept branch.
          if (!Number.isFinite(reward)) throw new NonFiniteRewardError(env.name, l.traj.envSeed, agent, turn, k, r);
          branchSamples.push({
            envInstance: l.traj.envInstance,
            envSeed: l.traj.envSeed,
            rollout: l.traj.rollout,
            agent,
            policyId,
            turn,
            branch: k,
            kept: false,
            prompt: prompts[i]!,
            response,
            promptTokens: promptTokens[i]!,
            responseTokens: tokens,
            logprobs: gen.logprobs[j]!,
            teamReward: r.teamReward,
            localReward: r.localReward,
            reward,
            score: reward,
            groupId,
            advantage: 0,
            parseError: r.parseError,
            invalid: r.parseError !== null || r.illegal === true,
            truncated,
            executions,
          });
          if (reward > bestReward) {
            bestReward = reward;
            best = k;
            bestEnv = env;
          }
        }
        branchSamples[best]!.kept = true;
        l.env = bestEnv!;
        l.traj.samples.push(...branchSamples);
      });
      envMs += performance.now() - t1;
    }
  }
  const trajectories: Trajectory[] = live.map((l) => {
    const kept = l.traj.samples.filter((s) => s.kept);
    const localReturns: Record<string, number> = Object.fromEntries(l.env.agents.map((a) => [a, 0]));
    let teamReturn = 0;
    for (const s of kept) {
      teamReturn += s.teamReward;
      localReturns[s.agent] = (localReturns[s.agent] ?? 0) + s.localReward;
    }
    if (o.mode === 'independent') {
      // GRPO baseline: every act of a trajectory is scored by the trajectory's return.
      const ret = kept.reduce((a, s) => a + s.reward, 0);
      for (const s of l.traj.samples) s.score = ret;
    }
    const score = l.env.score;
    return { ...l.traj, success: l.env.success, turns: l.env.turn, teamReturn, localReturns, ...(score === undefined ? {} : { score }) };
  });
  return { trajectories, samples: trajectories.flatMap((t) => t.samples), inferenceMs, envMs, programMs, programs: programCount, generatedTokens };
}
