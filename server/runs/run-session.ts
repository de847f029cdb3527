/**
 * What `troupe train` and the run manager share about a run's life outside the trainer: loading
 * and validating its config, creating it (database row, run folder, lock), checking that it can
 * continue, and the trainer call itself. Each caller decides the states around these steps and
 * how to report progress; the rules live here once.
 */
import { dirname, join, resolve } from 'node:path';
import { RunLock } from './run-lock.ts';
import { createRunFolder, loadRunExperiment, RUN_CONFIG_FILE, setRunFolderSteps, type RunFolder } from './run-folder.ts';
import { ConfigError, type ConfigIssue } from '../protocol/config-errors.ts';
import { parseExperimentConfig, type ExperimentConfig } from '../protocol/experiment-config.ts';
import type { RunSummary } from '../protocol/trajectory.ts';
import { readModelFolderConfig } from '../models/model-folder.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { parseConfigText, readConfigText, resolveExperiment } from '../rl/resolve-experiment.ts';
import { readCheckpointState, removeOrphanTemporaries, resumeDir } from '../rl/run-checkpoint.ts';
import { train, type TrainOptions, type TrainSummary } from '../rl/trainer.ts';
import type { Engine } from '../runtime/engine.ts';
import type { RunStore } from '../store/index.ts';
import { ClientPathError, type PathConfinement } from './path-confinement.ts';
import { RunError } from './run-error.ts';

/** A validated experiment config and what a new run records of it. */
export interface LoadedConfig {
  readonly config: ExperimentConfig;
  readonly experiment: ResolvedExperiment;
  /** The run folder's config.json: a file's text byte for byte, an inline config as formatted JSON. */
  readonly text: string;
  /** The config as the database keeps it. */
  readonly json: unknown;
  /**
   * run.json's `configSource`: relative model checkpoint paths resolve against its folder. A file's
   * absolute path; for an inline config a name inside the workspace (no such file exists).
   */
  readonly source: string;
}

/** Where a loader may look: given, every path the config names must pass the server's rule. */
export interface LoadConfigOptions {
  /** The server's rule for paths a client names (path-confinement.ts); the CLI passes none. */
  readonly paths?: PathConfinement;
}

/**
 * Reads a config file once, then parses and resolves that text: what is validated is exactly what
 * is stored, even if the file changes meanwhile (or is a pipe, `troupe train <(…)`, which can be
 * read only once). Problems in the file are a ConfigError naming it; an unreadable file is an Error
 * (a ClientPathError under `paths`).
 */
export async function loadConfigFile(path: string, o: LoadConfigOptions = {}): Promise<LoadedConfig> {
  let source = resolve(path);
  let text: string;
  if (o.paths) ({ path: source, text } = await o.paths.readTextFile(path, 'configPath'));
  else text = await readConfigText(source);
  const { config, json } = parseConfigText(text, source);
  if (o.paths) await confineConfigPaths(config, source, source, o.paths);
  return { config, experiment: await resolveExperiment(config, source), text, json, source };
}

/**
 * Checks every path a config names against the server's rule before anything reads it, resolving
 * them as resolveExperiment does (relative to the config's folder). A refusal is a ConfigError at
 * the field, so the editor underlines it.
 */
async function confineConfigPaths(config: ExperimentConfig, source: string, label: string, paths: PathConfinement): Promise<void> {
  const issues = await configPathIssues(config, source, paths);
  if (issues.length > 0) throw new ConfigError(label, issues);
}

/**
 * The problems with the paths a config at `source` names, each at its field: the server's rule
 * for every path, and with `readModels` also each model checkpoint folder read as a start reads
 * it (its `config.json`; so the config editor flags a missing folder while it is typed, not only
 * at Start Training). Reads nothing the rule refuses.
 */
export async function configPathIssues(config: ExperimentConfig, source: string, paths: PathConfinement, o: { readonly readModels?: boolean } = {}): Promise<ConfigIssue[]> {
  const issues: ConfigIssue[] = [];
  const confined = async (path: string, at: ConfigIssue['path']): Promise<string | undefined> => {
    try {
      return await paths.resolve(path, at.join('.'), { base: dirname(source) });
    } catch (e) {
      if (!(e instanceof ClientPathError)) throw e;
      issues.push({ path: at, message: e.detail });
      return undefined;
    }
  };
  for (const [id, m] of Object.entries(config.models)) {
    if (m.checkpoint === undefined) continue;
    const dir = await confined(m.checkpoint, ['models', id, 'checkpoint']);
    if (dir === undefined || !o.readModels) continue;
    try {
      await readModelFolderConfig(dir);
    } catch (e) {
      issues.push({ path: ['models', id, 'checkpoint'], message: e instanceof Error ? e.message : String(e) });
    }
  }
  if (config.env.dataset !== undefined) await confined(config.env.dataset.path, ['env', 'dataset', 'path']);
  return issues;
}

/**
 * What a re-run of a run trains: its folder's config.json (the config it started with, byte for
 * byte), with relative paths meaning its original's folder, as its own run resolved them.
 */
export async function loadRunConfig(folder: RunFolder, o: LoadConfigOptions = {}): Promise<LoadedConfig> {
  const file = join(folder.dir, RUN_CONFIG_FILE);
  const text = await readConfigText(file);
  const { config, json } = parseConfigText(text, file);
  if (o.paths) await confineConfigPaths(config, folder.configSource, file, o.paths);
  return { config, experiment: await resolveExperiment(config, folder.configSource), text, json, source: folder.configSource };
}

/** The `configSource` of runs started from an inline config: relative paths in it mean the workspace's. */
export const inlineConfigSource = (workspace: string): string => join(resolve(workspace), '(inline config)');

/** Validates and resolves a config given as a value; problems are a ConfigError whose source is `label`. */
export async function loadInlineConfig(value: unknown, workspace: string, label = 'inline config', o: LoadConfigOptions = {}): Promise<LoadedConfig> {
  // Round-trip through JSON first: what is validated is exactly what is stored and read back on resume.
  let text: string | undefined;
  try {
    text = JSON.stringify(value, null, 2);
  } catch (e) {
    throw new ConfigError(label, [{ path: [], message: `not JSON-serializable: ${e instanceof Error ? e.message : String(e)}` }]);
  }
  if (text === undefined) throw new ConfigError(label, [{ path: [], message: 'expected an experiment config object, got nothing' }]);
  const json = JSON.parse(text) as unknown;
  const config = parseExperimentConfig(json, label);
  const source = inlineConfigSource(workspace);
  if (o.paths) await confineConfigPaths(config, source, label, o.paths);
  let experiment: ResolvedExperiment;
  try {
    experiment = await resolveExperiment(config, source);
  } catch (e) {
    // resolveExperiment names its source in messages; an inline config is known by its label.
    if (e instanceof ConfigError) throw new ConfigError(label, e.issues);
    throw e;
  }
  return { config, experiment, text: `${text}\n`, json, source };
}

export interface NewRunOptions {
  /** 'running' when it starts training now, 'queued' when it waits for a slot. */
  readonly state: 'running' | 'queued';
  /** The run folder; default `<store dir>/runs/<run id>`. */
  readonly runDir?: string;
  /** Target step; default the config's `training.steps`. */
  readonly steps?: number;
  /** Where to report a failure that could not be recorded in the store. */
  readonly warn: (line: string) => void;
}

export interface NewRun {
  readonly run: RunSummary;
  readonly folder: RunFolder;
  /** Held by this process from creation on; the caller releases it when the run stops training. */
  readonly lock: RunLock;
}

/**
 * Records a new run in the store and creates its folder (config.json, run.json) and lock. A
 * failure after the row exists leaves the run 'failed' with the error, never 'running'.
 */
export async function createRun(store: RunStore, loaded: LoadedConfig, o: NewRunOptions): Promise<NewRun> {
  const steps = o.steps ?? loaded.config.training.steps;
  const run = store.createRun({ name: loaded.config.name, config: loaded.json, state: o.state, targetSteps: steps, ...(o.runDir === undefined ? {} : { runDir: o.runDir }) });
  try {
    const folder: RunFolder = { dir: run.runDir, runId: run.id, databasePath: store.path, configSource: loaded.source, steps };
    await createRunFolder(folder, loaded.text);
    return { run, folder, lock: RunLock.acquire(folder.dir, run.id) };
  } catch (e) {
    recordFailure(store, run.id, e, o.warn);
    throw e;
  }
}

export interface ResumeOptions {
  /** New target step; default the run's own. */
  readonly steps?: number;
  /** How the caller's users spell the steps option in a message (`--steps N`, `steps`). */
  readonly stepsOption?: string;
}

export interface ResumableRun {
  /** The run folder, with the new target step recorded when one was given. */
  readonly folder: RunFolder;
  readonly experiment: ResolvedExperiment;
  /** Held by this process; the caller releases it when the run stops training. */
  readonly lock: RunLock;
}

/**
 * Checks that a run can continue and takes its lock: not done (unless `steps` goes past its last
 * committed step), `steps` not below a committed step, no other live process training it, a
 * resume checkpoint for the steps it has committed, a config that still resolves. Sets no state:
 * the caller records 'running' or 'queued'. Refusals are RunErrors ('invalid-state').
 */
export async function prepareResume(store: RunStore, run: RunSummary, found: RunFolder, o: ResumeOptions = {}): Promise<ResumableRun> {
  const { steps } = o;
  const option = o.stepsOption ?? 'steps';
  const last = store.lastCommittedStep(run.id);
  if (run.state === 'done' && (steps === undefined || steps <= (last ?? 0))) {
    throw new RunError('invalid-state', `run ${run.id} is done (${last ?? 0} steps); to train it further pass ${option} N with N > ${last ?? 0}`);
  }
  if (steps !== undefined && last !== null && steps < last) throw new RunError('invalid-state', `${option} ${steps} is below step ${last}, which run ${run.id} has already committed`);
  let lock: RunLock;
  try {
    lock = RunLock.acquire(found.dir, run.id);
  } catch (e) {
    throw new RunError('invalid-state', e instanceof Error ? e.message : String(e));
  }
  try {
    // Holding the lock, every temporary checkpoint name is a dead writer's (a kill mid-write).
    await removeOrphanTemporaries(found.dir);
    const state = await readCheckpointState(resumeDir(found.dir));
    if (last !== null && last > 0 && state === null) {
      throw new RunError('invalid-state', `run ${run.id} has steps up to ${last} committed but no resume checkpoint (${resumeDir(found.dir)} is missing); it cannot be resumed`);
    }
    const { experiment } = await loadRunExperiment(found);
    const folder = steps !== undefined && steps !== found.steps ? await setRunFolderSteps(found, steps) : found;
    if (run.targetSteps !== folder.steps) store.setRunTargetSteps(run.id, folder.steps);
    return { folder, experiment, lock };
  } catch (e) {
    lock.release();
    throw e;
  }
}

/** Marks the run failed with the error's message; a store that fails too must not hide the first error. */
export function recordFailure(store: RunStore, runId: string, e: unknown, warn: (line: string) => void): void {
  try {
    store.setRunState(runId, 'failed', e instanceof Error ? e.message : String(e));
  } catch (inner) {
    warn(`could not record run ${runId} as failed: ${inner instanceof Error ? inner.message : String(inner)}`);
  }
}

/**
 * The trainer on a run folder: its target steps, its checkpoints, the workspace's warm-start cache;
 * on the given engine (which the caller closes), or on one the trainer starts and closes.
 */
export function trainRun(
  s: { readonly store: RunStore; readonly folder: RunFolder; readonly experiment: ResolvedExperiment; readonly resume: boolean; readonly engine?: Engine },
  hooks: Pick<TrainOptions, 'shouldStop' | 'log' | 'onStep' | 'onCommit' | 'onWarmUp'>,
): Promise<TrainSummary> {
  return train({
    experiment: s.experiment,
    store: s.store,
    runId: s.folder.runId,
    runDir: s.folder.dir,
    cacheRoot: join(s.store.storeDir, 'cache', 'warm-start'),
    resume: s.resume,
    steps: s.folder.steps,
    ...(s.engine ? { engine: s.engine } : {}),
    ...hooks,
  });
}
