/**
 * A run folder describes itself, so `troupe eval` and `troupe export` need nothing but its path:
 *   config.json   the experiment config the run was started with, byte for byte
 *   run.json      the run's id, where its database is, the config's original path, the target steps
 *   run.lock      while a process trains it (see run-lock.ts)
 *   checkpoints/  written by the trainer (server/rl/run-checkpoint.ts)
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { z } from 'zod';
import { writeTextFileAtomic } from '../models/atomic-write.ts';
import { readJsonFile, writeJsonFile } from '../models/json-file.ts';
import type { ExperimentConfig } from '../protocol/experiment-config.ts';
import type { ResolvedExperiment } from '../rl/experiment.ts';
import { parseConfigText, readConfigText, resolveExperiment } from '../rl/resolve-experiment.ts';

export const RUN_FILE = 'run.json';
export const RUN_CONFIG_FILE = 'config.json';

const runFileSchema = z.object({
  /** The run's id in its database. */
  runId: z.string().min(1),
  /** The workspace database, relative to the run folder (absolute where no relative path exists). */
  database: z.string().min(1),
  /** Absolute path of the config file the run was started from; relative model checkpoint paths in it resolve against its folder. */
  configSource: z.string().min(1),
  /** The step the run trains to: `training.steps`, or `--steps` when given. */
  steps: z.int().positive(),
});
type RunFile = z.infer<typeof runFileSchema>;

export interface RunFolder {
  /** Absolute path of the folder. */
  readonly dir: string;
  readonly runId: string;
  /** Absolute path of the database that holds the run. */
  readonly databasePath: string;
  readonly configSource: string;
  readonly steps: number;
}

/** Whether `dir` holds a run (has run.json). */
export const isRunFolder = (dir: string): boolean => existsSync(join(dir, RUN_FILE));

/** Writes config.json and run.json into a new run's folder (created if needed). */
export async function createRunFolder(f: RunFolder, configText: string): Promise<void> {
  try {
    await mkdir(f.dir, { recursive: true });
    await writeTextFileAtomic(join(f.dir, RUN_CONFIG_FILE), configText);
    await writeRunFile(f);
  } catch (e) {
    throw new Error(`cannot create run folder ${f.dir}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Records a new target step count (a resume with `--steps`). */
export async function setRunFolderSteps(f: RunFolder, steps: number): Promise<RunFolder> {
  const next = { ...f, steps };
  await writeRunFile(next);
  return next;
}

async function writeRunFile(f: RunFolder): Promise<void> {
  const rel = relative(f.dir, f.databasePath);
  const file: RunFile = { runId: f.runId, database: isAbsolute(rel) ? f.databasePath : rel.split('\\').join('/'), configSource: f.configSource, steps: f.steps };
  await writeJsonFile(join(f.dir, RUN_FILE), file);
}

/** Reads a run folder's run.json; errors say what is missing. */
export async function readRunFolder(dir: string): Promise<RunFolder> {
  const abs = resolve(dir);
  if (!existsSync(abs)) throw new Error(`no run folder at ${abs}`);
  if (!isRunFolder(abs)) throw new Error(`${abs} is not a run folder (no ${RUN_FILE}; run folders are made by troupe train)`);
  const f = await readJsonFile(join(abs, RUN_FILE), runFileSchema);
  return { dir: abs, runId: f.runId, databasePath: resolve(abs, f.database), configSource: f.configSource, steps: f.steps };
}

/** Parses and resolves the run's config.json, as the trainer saw it (read as `troupe train` reads a config). */
export async function loadRunExperiment(f: RunFolder): Promise<{ config: ExperimentConfig; experiment: ResolvedExperiment }> {
  const file = join(f.dir, RUN_CONFIG_FILE);
  const { config } = parseConfigText(await readConfigText(file), file);
  // The copy sits in the run folder, but relative checkpoint paths were written against the original's folder.
  return { config, experiment: await resolveExperiment(config, f.configSource) };
}
