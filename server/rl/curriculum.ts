/**
 * Which training tasks a step rolls out.
 *
 * - uniform: `envsPerStep` fresh training seeds.
 * - greedy-failures: `candidates` fresh training seeds are played once greedily (one branch per
 *   act, temperature 0: what validation measures), and the step rolls out the ones the policy
 *   failed first, in seed order, then solved ones up to `envsPerStep`. On Plan-Path the greedy
 *   policy's failures are mostly deterministic loops (the same blocked move every round); with
 *   uniform tasks only one step task in ten or so shows such a state, so most of RL's samples
 *   refine answers that already succeed. Measured on the Plan-Path team (docs/experiments/earlier-builds.md) it
 *   did worse than uniform — on hard tasks turn-level rewards favour one safe move per round —
 *   so it is off by default.
 *
 * - failure-restarts: as greedy-failures, but a failed task is not rolled out from its start: it
 *   restarts where the greedy team went wrong. Its greedy acts are replayed on a fresh copy of the
 *   task up to one of its rounds, and the tree rollout continues from that state. The round is
 *   drawn uniformly from the failed episode's rounds (a pure function of seed, step and task), so
 *   over the steps RL sees the mid-episode states greedy play actually reaches — the loops and
 *   dead ends that tree rollouts, which always continue from the best branch, rarely visit.
 *
 * Either way the tasks are a pure function of (seed, step, the policy's weights at the step), so a
 * step re-run after a crash, from the same checkpoint, rolls out the same tasks.
 */
import type { Environment } from '../envs/environment.ts';
import { trainSeed } from '../envs/seed-ranges.ts';
import type { Metric } from '../protocol/trajectory.ts';
import type { ResolvedExperiment } from './experiment.ts';
import { playOptions } from './evaluate.ts';
import { mixSeed, rollout, type RolloutContext, type Trajectory } from './rollout.ts';

export interface TaskSelection {
  readonly tasks: Environment[];
  /** `curriculum/*` metrics (greedy-failures, failure-restarts): the candidates' greedy success and the failed tasks' share of the step. */
  readonly metrics: Metric[];
  /** Time spent screening candidates. */
  readonly ms: number;
}

/**
 * `env` (fresh) after replaying the greedy trajectory `t`'s kept acts of the rounds before one
 * drawn from (seed, step, task) among the rounds it played. Greedy decoding and the environments
 * are deterministic, so the replay reaches the states the screen saw.
 */
export function restartTask(env: Environment, t: Trajectory, seed: number, step: number): Environment {
  const rounds = Math.max(1, t.turns);
  const round = mixSeed(seed, step, t.envSeed) % rounds;
  for (const s of t.samples) {
    if (!s.kept) continue;
    if (s.turn >= round || env.done) break;
    // Programs are not run again: the screen's recorded executions replay them exactly.
    env.act(s.agent, s.response, s.executions);
  }
  if (env.done) throw new Error(`curriculum: replaying task ${t.envSeed} to round ${round} ended the episode; the environment is not deterministic`);
  return env;
}

/** Training seeds of a step: `count` seeds in a block of its own, from (experiment seed, step). */
function stepSeeds(exp: ResolvedExperiment, step: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => trainSeed((exp.seed * 1_000_003 + step) * count + i));
}

export async function selectTasks(exp: ResolvedExperiment, ctx: RolloutContext, step: number): Promise<TaskSelection> {
  const a = exp.algorithm;
  if (a.curriculum.kind === 'uniform') return { tasks: stepSeeds(exp, step, a.envsPerStep).map(exp.env.make), metrics: [], ms: 0 };
  const t0 = performance.now();
  const seeds = stepSeeds(exp, step, a.curriculum.candidates);
  const screen = await rollout(seeds.map(exp.env.make), ctx, playOptions(a, 0, 0));
  const solved = new Set(screen.trajectories.filter((t) => t.success).map((t) => t.envSeed));
  const failed = seeds.filter((s) => !solved.has(s));
  const chosen = [...failed, ...seeds.filter((s) => solved.has(s))].slice(0, a.envsPerStep);
  const failedChosen = Math.min(failed.length, a.envsPerStep);
  const greedy = new Map(screen.trajectories.map((t) => [t.envSeed, t]));
  const restart = a.curriculum.kind === 'failure-restarts';
  return {
    tasks: chosen.map((s) => (restart && !solved.has(s) ? restartTask(exp.env.make(s), greedy.get(s)!, exp.seed, step) : exp.env.make(s))),
    metrics: [
      { name: 'curriculum/candidate_success', value: solved.size / seeds.length },
      { name: 'curriculum/failed_fraction', value: failedChosen / a.envsPerStep },
    ],
    ms: performance.now() - t0,
  };
}
