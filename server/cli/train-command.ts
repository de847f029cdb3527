/**
 * `troupe train`: runs the trainer on an experiment config, or continues a run, with a progress
 * bar, Ctrl-C handling and the run's lifecycle recorded in the workspace database:
 *   running → done     every step trained;
 *   running → paused   stopped by Ctrl-C (or SIGTERM) at a step boundary, or a second Ctrl-C;
 *   running → failed   an error, whose message is stored with the run;
 *   paused | failed | running-but-killed → running   with --resume.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { constants } from 'node:os';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import type { StepReport } from '../rl/trainer.ts';
import type { BestValidation } from '../rl/run-checkpoint.ts';
import { createRun, loadConfigFile, prepareResume, recordFailure, trainRun } from '../runs/run-session.ts';
import { defaultDatabasePath, openRunStore, type RunStore } from '../store/index.ts';
import { expectPositionals, integerFlag, parseCommandLine, printUsage, UsageError, type Command } from './command.ts';
import { ProgressBar } from './progress-bar.ts';
import { findRunToResume } from './resume-target.ts';
import { isRunFolder, type RunFolder } from '../runs/run-folder.ts';
import type { RunLock } from '../runs/run-lock.ts';
import { displayPath, formatDuration, percent } from './text-format.ts';

const usage = `usage: troupe train <config.json> [--out DIR] [--steps N] [--workspace DIR]
       troupe train --resume <run folder | run id | config.json> [--steps N] [--workspace DIR]

Trains the team of agents an experiment config describes. Every step is committed to the
workspace database (<workspace>/.troupe/troupe.db) and checkpointed in the run folder.

options:
  --out DIR        the run folder (default <workspace>/.troupe/runs/<run id>); must be new or empty
  --steps N        train to step N instead of the config's training.steps
  --resume         continue a paused, failed or killed run from its last checkpoint, losing
                   nothing committed. The argument says which run:
                     a run folder   the run it holds (its run.json)
                     a config file  the newest run of the workspace whose name is the config's
                                    "name" and that is not done; the file must equal the config
                                    the run was started with
                     a run id       that run of the workspace (troupe runs lists them)
                   It trains to the run's own target unless --steps gives a new one.
  --workspace DIR  the folder holding .troupe/ (database, warm-start cache, run folders); default .
  -h, --help       this text

Ctrl-C stops after the step in flight: the run is left 'paused' with a checkpoint to resume from.
A second Ctrl-C exits at once; the step in flight is lost, committed steps are kept.
At the end it prints validation success on the held-out seeds before RL (step 0, the warm-started
policy) and after, and the difference in points; with training.testEpisodes, the same on the test
seeds (held out from validation too): the RL gain over the warm start.

Run states: running, then done (every step trained, exit 0), paused (Ctrl-C, exit 130) or
failed (the error is stored with the run, exit 1). A killed process leaves 'running'; troupe runs
marks such runs, and --resume takes them over.
`;

interface Session {
  readonly store: RunStore;
  readonly folder: RunFolder;
  readonly experiment: ResolvedExperiment;
  readonly lock: RunLock;
  readonly resume: boolean;
}

const warn = (line: string) => process.stderr.write(`troupe: ${line}\n`);

async function newSession(configArg: string, workspace: string, out: string | undefined, steps: number | undefined): Promise<Session> {
  const loaded = await loadConfigFile(configArg);
  const runDir = out === undefined ? undefined : resolve(out);
  if (runDir && existsSync(runDir) && (await readdir(runDir)).length > 0) {
    const hint = isRunFolder(runDir) ? `; it holds a run: continue it with troupe train --resume ${displayPath(runDir)}` : '';
    throw new Error(`--out ${displayPath(runDir)} is not empty${hint}`);
  }
  const store = openRunStore(defaultDatabasePath(workspace));
  try {
    const { folder, lock } = await createRun(store, loaded, { state: 'running', warn, ...(runDir ? { runDir } : {}), ...(steps === undefined ? {} : { steps }) });
    return { store, folder, experiment: loaded.experiment, lock, resume: false };
  } catch (e) {
    store.close();
    throw e;
  }
}

async function resumeSession(target: string, workspace: string, steps: number | undefined): Promise<Session> {
  const { store, run, folder: found } = await findRunToResume(target, workspace);
  try {
    const { folder, experiment, lock } = await prepareResume(store, run, found, { stepsOption: '--steps', ...(steps === undefined ? {} : { steps }) });
    try {
      store.setRunState(run.id, 'running');
    } catch (e) {
      lock.release();
      throw e;
    }
    return { store, folder, experiment, lock, resume: true };
  } catch (e) {
    store.close();
    throw e;
  }
}

function stepFields(r: StepReport): string[] {
  return [
    `train ${percent(r.trainSuccess)}`,
    `reward ${r.meanReward.toFixed(3)}`,
    `loss ${r.policyLoss.toFixed(4)}`,
    ...(r.validation ? [`val ${percent(r.validation.success)}`] : []),
  ];
}

/** Validation success before RL (step 0) and at the latest validated step, from the store, and the trainer's best validated step when it is another. */
function printValidationSummary(store: RunStore, runId: string, exp: ResolvedExperiment, best: BestValidation | null, write: (line: string) => void): void {
  const series = store.metricSeries({ runId, name: 'val/success' });
  const before = series.find((p) => p.step === 0);
  const after = series.filter((p) => p.step > 0).at(-1);
  if (!before) return;
  write(`validation success on ${exp.training.validationEpisodes} held-out seeds:`);
  write(`  before RL (step 0, warm-started policy)  ${percent(before.value).padStart(6)}`);
  if (after) {
    const row = (label: string, value: number) => {
      const delta = (value - before.value) * 100;
      write(`${label.padEnd(42)} ${percent(value).padStart(6)}  (${delta >= 0 ? '+' : ''}${delta.toFixed(1)} points)`);
    };
    row(`  after RL  (step ${after.step})`, after.value);
    if (best && best.step !== after.step) row(`  best      (step ${best.step}${best.step === 0 ? ', before RL' : ''})`, best.validationSuccess);
  } else {
    write(`  after RL: not validated since step 0 (validation runs every ${exp.training.validateEvery} steps and after the last)`);
  }
  // The test seeds (training.testEpisodes): held out from validation too, so this is the result to report.
  const test = store.metricSeries({ runId, name: 'test/success' });
  const testBefore = test.find((p) => p.step === 0);
  const testAfter = test.filter((p) => p.step > 0).at(-1);
  if (testBefore && testAfter) {
    const delta = (testAfter.value - testBefore.value) * 100;
    // With training.select 'best' the test after RL played the best validated policy.
    const played = store.metricSeries({ runId, name: 'test/policy_step', fromStep: testAfter.step, toStep: testAfter.step })[0]?.value ?? testAfter.step;
    const which = played === testAfter.step ? `after RL (step ${played})` : `best validated policy (step ${played} of ${testAfter.step})`;
    write(`test success on ${exp.training.testEpisodes} test seeds (apart from the validation seeds):`);
    write(`  warm start ${percent(testBefore.value)}, ${which} ${percent(testAfter.value)}: RL gain ${delta >= 0 ? '+' : ''}${delta.toFixed(1)} points`);
    // A symmetric game: its self-play success (no forfeit) says little; the games against the
    // scripted opponents are the result.
    for (const [metric, label] of [
      ['test/vs_random/win_rate', 'vs random win rate'],
      ['test/vs_minimax/non_loss_rate', 'vs minimax non-loss rate'],
      ['test/optimal_move_rate', 'perfect moves in all 4520 positions'],
    ] as const) {
      const points = store.metricSeries({ runId, name: metric });
      const b = points.find((p) => p.step === 0);
      const a = points.find((p) => p.step === testAfter.step);
      if (!b || !a) continue;
      const d = (a.value - b.value) * 100;
      write(`  ${label}: warm start ${percent(b.value)}, after RL ${percent(a.value)}: ${d >= 0 ? '+' : ''}${d.toFixed(1)} points`);
    }
  }
}

async function trainSession(s: Session): Promise<number> {
  const { store, folder, experiment, lock } = s;
  const runId = folder.runId;
  const resumeHint = `troupe train --resume ${displayPath(folder.dir)}`;
  const bar = new ProgressBar({ total: folder.steps });
  bar.log(`${s.resume ? 'resuming' : 'training'} run ${runId} (${experiment.name}) to step ${folder.steps}; run folder ${displayPath(folder.dir)}`);

  let signalled: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled === null) {
      signalled = signal;
      bar.log(`${signal}: stopping after the step in flight (press Ctrl-C again to exit now)`);
      return;
    }
    // Second signal: leave at once. Committed steps and the last checkpoint are intact (both are
    // written atomically), so the run is resumable; only the step in flight is lost.
    bar.finish();
    const last = store.lastCommittedStep(runId);
    store.setRunState(runId, 'paused');
    lock.release();
    process.stderr.write(`troupe: interrupted; run ${runId} is paused ${last === null ? 'before step 0' : `after step ${last}`} (the step in flight is lost); resume with: ${resumeHint}\n`);
    // Die by the signal itself rather than process.exit: exiting runs the engine worker's teardown
    // while a session may be mid-run, which aborts inside ONNX Runtime. Without our listeners the
    // signal's default action applies (the shell reports 128 + its number, 130 for Ctrl-C).
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.kill(process.pid, signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const t0 = performance.now();
  try {
    const summary = await trainRun(s, {
      shouldStop: () => signalled !== null,
      log: (line) => bar.log(line),
      onStep: (r) => bar.tick(r.step, r.ms, stepFields(r), r.validation !== null),
    });
    bar.finish();
    const write = (line: string) => process.stdout.write(`${line}\n`);
    if (summary.stopped) {
      store.setRunState(runId, 'paused');
      const where = summary.stoppedInWarmUp
        ? `in the warm-up of '${summary.stoppedInWarmUp.modelId}' at step ${summary.stoppedInWarmUp.step} of ${summary.stoppedInWarmUp.steps} (checkpointed)`
        : `after step ${summary.lastStep} of ${folder.steps}`;
      write(`paused ${where}; resume with: ${resumeHint}`);
    } else {
      store.setRunState(runId, 'done');
      write(`done: run ${runId} trained to step ${summary.lastStep} (${formatDuration(performance.now() - t0)})`);
    }
    printValidationSummary(store, runId, experiment, summary.best, write);
    return signalled === null ? 0 : 128 + constants.signals[signalled];
  } catch (e) {
    bar.finish();
    recordFailure(store, runId, e, warn);
    throw e;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    lock.release();
    store.close();
  }
}

export const trainCommand: Command = {
  synopsis: ['train <config.json> [--out DIR] [--steps N] [--workspace DIR]', 'train --resume <run folder | run id | config.json> [--steps N] [--workspace DIR]'],
  summary: 'train a team of agents; Ctrl-C pauses the run, --resume continues it',
  usage,
  async run(args) {
    const { values, positionals } = parseCommandLine(usage, {
      args: [...args],
      options: {
        out: { type: 'string' },
        steps: { type: 'string' },
        resume: { type: 'boolean', default: false },
        workspace: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) return printUsage(usage);
    expectPositionals(positionals, [values.resume ? '<run folder | run id | config.json>' : '<config.json>'], usage);
    if (values.resume && values.out !== undefined) throw new UsageError('--out cannot be combined with --resume: pass the run folder itself (troupe train --resume DIR)', usage);
    const steps = values.steps === undefined ? undefined : integerFlag('steps', values.steps, 1, usage);
    const workspace = resolve(values.workspace ?? '.');
    const target = positionals[0]!;
    const session = values.resume ? await resumeSession(target, workspace, steps) : await newSession(target, workspace, values.out, steps);
    return trainSession(session);
  },
};
