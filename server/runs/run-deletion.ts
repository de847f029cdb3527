/**
 * What deleting a run does to its folder. The folder goes only when it lies inside the workspace's
 * `.troupe/runs` (checked through realpath, so a link cannot lead the removal out); a folder a
 * `troupe train --run-dir` put elsewhere is the user's and stays where it is. The run lock is taken
 * first, so a run that another process trains is refused instead of having its files pulled away.
 */
import { existsSync } from 'node:fs';
import { realpath, rm } from 'node:fs/promises';
import { dirname, isAbsolute, relative } from 'node:path';
import { RunError } from './run-error.ts';
import { RunLock } from './run-lock.ts';

/** What became of a deleted run's folder. */
export interface RunFolderRemoval {
  /** Removed: it lay inside `.troupe/runs`. */
  readonly removedFolder: string | null;
  /** Left in place: outside `.troupe/runs`, or already gone. */
  readonly keptFolder: string | null;
}

/** Whether `child` lies strictly inside `parent` (both absolute and real). */
function strictlyInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/**
 * Locks the run's folder, runs `deleteRows` (the store's part, which must happen while no one can
 * take the run up again), then removes the folder if it lies inside `runsRoot`. `runsRoot` is the
 * store's `runs` folder (`dirname(store.defaultRunDir(id))`).
 */
export async function deleteRunFolder(runId: string, runDir: string, runsRoot: string, deleteRows: () => void): Promise<RunFolderRemoval> {
  if (!existsSync(runDir)) {
    deleteRows();
    return { removedFolder: null, keptFolder: null };
  }
  let lock: RunLock;
  try {
    lock = RunLock.acquire(runDir, runId);
  } catch (e) {
    throw new RunError('invalid-state', `run ${runId} cannot be deleted: ${e instanceof Error ? e.message : String(e)}`);
  }
  let inside = false;
  try {
    const realRoot = existsSync(runsRoot) ? await realpath(runsRoot) : null;
    const realDir = await realpath(runDir);
    inside = realRoot !== null && strictlyInside(realRoot, realDir) && dirname(realDir) === realRoot;
    deleteRows();
    if (inside) await rm(realDir, { recursive: true, force: true });
  } finally {
    // The lock file went with the folder; releasing an absent lock is a no-op.
    if (!inside) lock.release();
  }
  return inside ? { removedFolder: runDir, keptFolder: null } : { removedFolder: null, keptFolder: runDir };
}
