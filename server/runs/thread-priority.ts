/**
 * Training yields the CPU to the server's event loop. A run worker lowers its own thread's
 * scheduling priority before it starts its engine; on Linux niceness is a per-thread attribute
 * that threads inherit when they are created, so the engine worker and ONNX Runtime's intra-op
 * pool, all started from this thread, run at the lower priority too, while the main thread (which
 * answers the editor) keeps the default. On a machine whose cores are all busy training, this is
 * what keeps request latency and event-loop delay low (bench/server: bench:server).
 *
 * `os.setPriority(pid)` calls setpriority(PRIO_PROCESS, pid), which Linux applies to a single
 * thread when given a thread id; the thread id comes from /proc/thread-self. Elsewhere (macOS,
 * Windows) the call would renice the whole process, so it is skipped and the reason returned.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** Nice value of training threads: below the server's, above idle. */
export const TRAINING_NICE = 10;

/** Lowers the calling thread's priority; returns null on success, else why it was not done. */
export function lowerThreadPriority(nice: number = TRAINING_NICE): string | null {
  if (process.platform !== 'linux') return `thread priority is left as is on ${process.platform} (per-thread niceness is Linux's)`;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return 'cannot read this thread\'s id from /proc/thread-self';
    setPriority(tid, nice);
    return null;
  } catch (e) {
    return `cannot lower the training thread's priority: ${e instanceof Error ? e.message : String(e)}`;
  }
}
