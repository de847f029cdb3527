/**
 * `run.lock` in a run folder: which process is training the run. A run whose state says 'running'
 * may be training in another terminal, or may have been killed (kill -9 leaves the state as it
 * was); the lock tells the two apart, so `--resume` refuses to train a run twice at once but takes
 * over one whose process is gone.
 *
 * The file is created exclusively ('wx'), so of two processes racing for a free run one fails. A
 * holder on another host cannot be checked and counts as alive.
 */
import { hostname } from 'node:os';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

export const RUN_LOCK_FILE = 'run.lock';

const lockSchema = z.object({ pid: z.int().positive(), host: z.string(), startedAt: z.string() });
export type LockHolder = z.infer<typeof lockSchema>;

/** Whether process `pid` is alive on this host (a zombie counts as gone). Shared by run locks and server.json. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    // EPERM: it exists but belongs to someone else.
    return e instanceof Error && 'code' in e && e.code === 'EPERM';
  }
  // A killed process stays signalable until its parent reaps it; on Linux, a zombie is gone.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** The live process holding the run, or null (no lock, an unreadable one, or its process is gone). */
export function runLockHolder(runDir: string): LockHolder | null {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(join(runDir, RUN_LOCK_FILE), 'utf8'));
  } catch {
    return null;
  }
  const r = lockSchema.safeParse(raw);
  if (!r.success) return null;
  const h = r.data;
  if (h.host !== hostname()) return h;
  return h.pid !== process.pid && processAlive(h.pid) ? h : null;
}

export class RunLock {
  private constructor(private readonly path: string) {}

  /** Takes the run's lock; throws, naming the holder, when another live process has it. */
  static acquire(runDir: string, runId: string): RunLock {
    const path = join(runDir, RUN_LOCK_FILE);
    const holder = runLockHolder(runDir);
    if (holder) throw new Error(`run ${runId} is being trained by process ${holder.pid} on ${holder.host} (since ${holder.startedAt}); stop it first (${path})`);
    rmSync(path, { force: true });
    const me: LockHolder = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
    try {
      writeFileSync(path, `${JSON.stringify(me)}\n`, { flag: 'wx' });
    } catch (e) {
      throw new Error(`cannot lock run ${runId} (${path}): ${e instanceof Error ? e.message : String(e)}`);
    }
    return new RunLock(path);
  }

  /** Synchronous, so it also works on the way out of a second Ctrl-C. */
  release(): void {
    rmSync(this.path, { force: true });
  }
}
