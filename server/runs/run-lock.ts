/**
 * `run.lock` in a run folder: which process is training the run. A run whose state says 'running'
 * may be training in another terminal, or may have been killed (kill -9 leaves the state as it
 * was); the lock tells the two apart, so `--resume` refuses to train a run twice at once but takes
 * over one whose process is gone.
 *
 * The file is a `LockFile`: created atomically, so of two processes racing for a free run one
 * fails, and taken over from a dead holder under a second lock, so two processes taking over the
 * same dead one cannot both win. A holder on another host cannot be checked and counts as alive.
 * The server's `server.lock` (one server per workspace) is a LockFile too.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const errnoCode = (e: unknown): string | undefined => (e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : undefined);

/** The holder recorded in a lock file, or null (no file, or not a lock). */
function readHolder(path: string): { holder: LockHolder; text: string } | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return null;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { holder: { pid: 0, host: '', startedAt: '' }, text };
  }
  const r = lockSchema.safeParse(raw);
  return { holder: r.success ? r.data : { pid: 0, host: '', startedAt: '' }, text };
}

/**
 * Whether a lock's holder is alive. A holder on another host cannot be checked and counts as alive;
 * a malformed lock (pid 0) as dead. `ownPid`: whether this process holding it counts as alive (a
 * server started twice in one process) or as a leftover this process may take over (a run lock).
 */
function holderAlive(h: LockHolder, ownPid: 'alive' | 'stale'): boolean {
  if (h.pid === 0) return false;
  if (h.host !== hostname()) return true;
  if (h.pid === process.pid) return ownPid === 'alive';
  return processAlive(h.pid);
}

/** Creates `path` holding `text`, whole, or fails with EEXIST: a reader never sees it half written. */
function createWhole(path: string, text: string): boolean {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(tmp, text, { flag: 'wx' });
  try {
    linkSync(tmp, path);
    return true;
  } catch (e) {
    if (errnoCode(e) === 'EEXIST') return false;
    throw e;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** How long `LockFile.acquire` waits for another process that is taking over a stale lock. */
const BREAK_WAIT_MS = 5000;

/**
 * An exclusive lock file naming its holder (pid, host, start time), taken over when its holder is
 * gone. Creation is atomic (a complete file is hard-linked into place, so there is no moment when
 * it exists half written), so of two processes racing for a free lock one fails. Taking over a
 * stale lock is itself serialised by `<lock>.break`, taken the same way: without it, two processes
 * that both saw the dead holder could each remove the lock, one of them removing the other's fresh
 * one, and both would go on holding it. (A process that dies while holding `.break`, for the
 * microseconds it does, leaves one that is taken over by the same liveness rule.)
 */
export class LockFile {
  private constructor(readonly path: string) {}

  /**
   * Takes the lock, or throws `refuse(holder)` when a live process holds it. Synchronous, so two
   * acquisitions in one process cannot interleave.
   */
  static acquire(path: string, o: { readonly ownPid: 'alive' | 'stale'; readonly refuse: (holder: LockHolder) => Error }): LockFile {
    const me: LockHolder = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
    const text = `${JSON.stringify(me)}\n`;
    const deadline = Date.now() + BREAK_WAIT_MS;
    for (;;) {
      if (createWhole(path, text)) return new LockFile(path);
      const found = readHolder(path);
      if (found === null) continue; // released between our attempt and the read: try again
      if (holderAlive(found.holder, o.ownPid)) throw o.refuse(found.holder);
      const breakPath = `${path}.break`;
      if (!createWhole(breakPath, text)) {
        const breaker = readHolder(breakPath);
        if (breaker && holderAlive(breaker.holder, 'alive')) {
          if (Date.now() > deadline) throw new Error(`cannot take the lock ${path}: process ${breaker.holder.pid} has been taking it over for ${BREAK_WAIT_MS} ms`);
          sleepSync(10);
        } else {
          rmSync(breakPath, { force: true });
        }
        continue;
      }
      try {
        // Still the stale lock we judged (not one a faster process created meanwhile): remove it.
        if (readHolder(path)?.text === found.text) rmSync(path, { force: true });
      } finally {
        rmSync(breakPath, { force: true });
      }
    }
  }

  /** Synchronous, so it also works on the way out of a second Ctrl-C. */
  release(): void {
    rmSync(this.path, { force: true });
  }
}

/** The live process holding the run, or null (no lock, an unreadable one, or its process is gone). */
export function runLockHolder(runDir: string): LockHolder | null {
  const found = readHolder(join(runDir, RUN_LOCK_FILE));
  return found && holderAlive(found.holder, 'stale') ? found.holder : null;
}

export class RunLock {
  private constructor(private readonly lock: LockFile) {}

  /** Takes the run's lock; throws, naming the holder, when another live process has it. */
  static acquire(runDir: string, runId: string): RunLock {
    const path = join(runDir, RUN_LOCK_FILE);
    try {
      return new RunLock(
        LockFile.acquire(path, {
          ownPid: 'stale',
          refuse: (h) => new Error(`run ${runId} is being trained by process ${h.pid} on ${h.host} (since ${h.startedAt}); stop it first (${path})`),
        }),
      );
    } catch (e) {
      if (e instanceof Error && e.message.startsWith(`run ${runId} is being trained`)) throw e;
      throw new Error(`cannot lock run ${runId} (${path}): ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** Synchronous, so it also works on the way out of a second Ctrl-C. */
  release(): void {
    this.lock.release();
  }
}
