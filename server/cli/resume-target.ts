/**
 * Which run `troupe train --resume <target>` continues. The target is one of, checked in order:
 *   a run folder   (a directory with run.json): the run it holds, in the database its run.json names;
 *   a config file  (an existing file): the newest run of the workspace database whose name is the
 *                  config's "name" and whose state is not 'done'; the file must still equal the
 *                  config that run was started with, so a resume never silently trains a different
 *                  experiment;
 *   a run id       (anything else): that run of the workspace database (`troupe runs` lists them).
 */
import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { formatConfigPath, type ConfigPath } from '../protocol/config-errors.ts';
import type { RunRecord } from '../protocol/trajectory.ts';
import { loadExperiment } from '../rl/resolve-experiment.ts';
import { defaultDatabasePath, openRunStore, type RunStore } from '../store/index.ts';
import { isRunFolder, readRunFolder, type RunFolder } from '../runs/run-folder.ts';
import { displayPath } from './text-format.ts';

export interface ResumeTarget {
  readonly folder: RunFolder;
  /** Open store holding the run; the caller closes it. */
  readonly store: RunStore;
  readonly run: RunRecord;
}

function openExisting(path: string, what: string): RunStore {
  if (!existsSync(path)) throw new Error(`${what}: no database at ${path}`);
  return openRunStore(path);
}

/** The JSON path of the first place where `a` and `b` differ, or null when they are equal. */
export function firstDifference(a: unknown, b: unknown, path: ConfigPath = []): string | null {
  if (Object.is(a, b)) return null;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return formatConfigPath(path);
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], [...path, i]);
      if (d !== null) return d;
    }
    return null;
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  for (const k of new Set([...Object.keys(ra), ...Object.keys(rb)])) {
    const d = firstDifference(ra[k], rb[k], [...path, k]);
    if (d !== null) return d;
  }
  return null;
}

export async function findRunToResume(target: string, workspace: string): Promise<ResumeTarget> {
  const path = resolve(target);
  if (existsSync(path) && statSync(path).isDirectory()) {
    if (!isRunFolder(path)) throw new Error(`${displayPath(path)} is not a run folder (no run.json); --resume takes a run folder, a run id or a config file`);
    const folder = await readRunFolder(path);
    const store = openExisting(folder.databasePath, `run folder ${displayPath(path)}`);
    const run = store.getRun(folder.runId);
    if (!run) {
      store.close();
      throw new Error(`run ${folder.runId} of ${displayPath(path)} is not in its database ${folder.databasePath}`);
    }
    return { folder, store, run };
  }

  const dbPath = defaultDatabasePath(workspace);
  if (existsSync(path)) {
    const { config } = await loadExperiment(path);
    const json: unknown = JSON.parse(await readFile(path, 'utf8'));
    const store = openExisting(dbPath, `no runs to resume in workspace ${displayPath(workspace)}`);
    try {
      const candidates = store.listRuns().filter((r) => r.name === config.name && r.state !== 'done');
      const newest = candidates[0];
      if (!newest) throw new Error(`no unfinished run named ${JSON.stringify(config.name)} in ${displayPath(dbPath)}; start a new one without --resume`);
      const run = store.getRun(newest.id)!;
      const diff = firstDifference(run.config, json);
      if (diff !== null) {
        throw new Error(
          `${displayPath(path)} differs from the config run ${run.id} was started with (at ${diff}); ` +
            `resume that run as it was with: troupe train --resume ${displayPath(run.runDir)} (use --steps to change its length)`,
        );
      }
      return { folder: await readRunFolder(run.runDir), store, run };
    } catch (e) {
      store.close();
      throw e;
    }
  }

  if (!existsSync(dbPath)) throw new Error(`'${target}' is not a run folder or a config file, and workspace ${displayPath(workspace)} has no database to look up a run id in`);
  const store = openRunStore(dbPath);
  try {
    const run = store.getRun(target);
    if (!run) throw new Error(`'${target}' is not a run folder, a config file or a run id of ${displayPath(dbPath)} (see troupe runs)`);
    return { folder: await readRunFolder(run.runDir), store, run };
  } catch (e) {
    store.close();
    throw e;
  }
}
