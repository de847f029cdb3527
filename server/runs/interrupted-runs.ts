/**
 * What a server finds at open: runs left 'running', 'stopping' or 'queued' by a process that is
 * gone (no live holder of their run lock) are marked failed with an error starting "interrupted:",
 * so they are listed as such and can be resumed, and the temporary checkpoints that process left
 * are removed. A run whose lock a live process holds (a terminal's troupe train) is left alone.
 */
import { existsSync } from 'node:fs';
import { removeOrphanTemporaries, warmUpProgressIn } from '../rl/run-checkpoint.ts';
import type { RunStore } from '../store/index.ts';
import { isTrainingState } from './run-lifecycle.ts';
import { RunLock, runLockHolder } from './run-lock.ts';

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export async function markInterruptedRuns(store: RunStore, log: (line: string) => void): Promise<void> {
  for (const r of store.listRuns()) {
    if (!isTrainingState(r.state)) continue;
    const holder = existsSync(r.runDir) ? runLockHolder(r.runDir) : null;
    if (holder) continue; // another live process (a terminal's troupe train) is training it
    const warmUp = r.lastCommittedStep === null && existsSync(r.runDir) ? await warmUpProgressIn(r.runDir) : [];
    const where =
      warmUp.length > 0
        ? `during the warm-up (checkpointed at ${warmUp.map((w) => `step ${w.step} of ${w.steps}${warmUp.length > 1 || w.modelId !== 'base' ? ` of '${w.modelId}'` : ''}`).join(', ')})`
        : r.lastCommittedStep === null
          ? 'before step 0'
          : `after step ${r.lastCommittedStep}`;
    const what = r.state === 'queued' ? 'it was queued in a server that ended' : `the process training it ended ${where}`;
    store.setRunState(r.id, 'failed', `interrupted: ${what}; resume it to continue from its last checkpoint (run/resume, or troupe train --resume ${r.id})`);
    log(`run ${r.id}: marked interrupted (was '${r.state}', no live process holds it)`);
    await removeOrphans(r.id, r.runDir, log);
  }
}

/**
 * The temporary checkpoints a process killed mid-write left in an interrupted run's folder, removed
 * under the run's lock (taken over from the dead holder; a live one that took it meanwhile cleans
 * its own at resume).
 */
async function removeOrphans(runId: string, runDir: string, log: (line: string) => void): Promise<void> {
  if (!existsSync(runDir)) return;
  let lock: RunLock;
  try {
    lock = RunLock.acquire(runDir, runId);
  } catch {
    return;
  }
  try {
    const removed = await removeOrphanTemporaries(runDir);
    if (removed.length > 0) log(`run ${runId}: removed ${removed.length} temporary checkpoint file(s) a killed writer left (${removed.join(', ')})`);
  } catch (e) {
    log(`run ${runId}: cannot remove the temporary checkpoints a killed writer left: ${message(e)}`);
  } finally {
    lock.release();
  }
}
