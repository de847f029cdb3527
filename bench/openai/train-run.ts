/**
 * One training run for the rollout-backend benchmarks: an experiment config with a given
 * `rollout.backend`, trained into a fresh store, timed, with every training sample listed so two
 * runs can be compared sample for sample (in process against over HTTP).
 */
import { join } from 'node:path';
import { parseExperimentConfig } from '../../server/protocol/experiment-config.ts';
import { resolveExperiment } from '../../server/rl/resolve-experiment.ts';
import { train } from '../../server/rl/trainer.ts';
import { openRunStore } from '../../server/store/index.ts';

export interface TrainedRun {
  /** Wall time of `train`, warm start and evaluations included. */
  readonly ms: number;
  /** Wall time from step 0's commit (warm start and the first validation and test done) to the end. */
  readonly rlMs: number;
  /** `step/seed/turn/agent/branch:tokens` per training sample, sorted. */
  readonly dump: string[];
  /** Requests the fleet retried elsewhere (`engine/server<i>/failures`, summed). */
  readonly failures: number;
  /** Test success of the final policy (training.testEpisodes > 0), else null. */
  readonly testSuccess: number | null;
}

export async function trainRun(dir: string, name: string, config: Record<string, unknown>, backend: unknown): Promise<TrainedRun> {
  const store = openRunStore(join(dir, `${name}.db`));
  try {
    const c = { ...config, rollout: { ...(config['rollout'] as object | undefined), backend } };
    const experiment = await resolveExperiment(parseExperimentConfig(c, name), join(dir, `${name}.json`));
    const run = store.createRun({ name, config: c, runDir: join(dir, name) });
    const t0 = performance.now();
    let tStep0 = t0;
    const summary = await train({ experiment, store, runId: run.id, runDir: join(dir, name), cacheRoot: join(dir, 'cache'), resume: false, log: () => {}, onCommit: (c) => void (c.step === 0 && (tStep0 = performance.now())) });
    const tEnd = performance.now();
    const [ms, rlMs] = [tEnd - t0, tEnd - tStep0];
    const dump: string[] = [];
    let failures = 0;
    for (const { step } of store.listSteps(run.id)) {
      failures += store.stepMetrics(run.id, step).filter((m) => /^engine\/server\d+\/failures$/.test(m.name)).reduce((a, m) => a + m.value, 0);
      for (const t of store.listTrajectories({ runId: run.id, step, phase: 'train' })) {
        for (const turn of store.getTrajectory(t.id)!.turns) for (const s of [turn, ...turn.siblings]) dump.push(`${step}/${t.envSeed}/${s.turn}/${s.agentId}/${s.branch}:${s.responseTokens.join(',')}`);
      }
    }
    return { ms, rlMs, dump: dump.sort(), failures, testSuccess: summary.finalTest?.success ?? null };
  } finally {
    store.close();
  }
}
