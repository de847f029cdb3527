/**
 * The server's memory limit while runs train: the process's resident set is compared with the
 * limit every second, and past it the manager fails the runs training, so that the server keeps
 * serving instead of the system's out-of-memory killer ending it. Sampled between engine calls'
 * allocations, it catches a run that grows step after step; one allocation larger than the
 * machine is what `rl/memory-estimate.ts` refuses before the run starts.
 */
import { totalmem } from 'node:os';

/** How often the process's memory is compared with the limit while a run trains. */
const MEMORY_CHECK_MS = 1000;

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;

/** The failure recorded for a run training when the server passed its memory limit. */
export function outOfMemoryFailure(rssBytes: number, limitBytes: number): string {
  return (
    `out of memory: the server reached ${gib(rssBytes)}, over its limit of ${gib(limitBytes)} (of this machine's ${gib(totalmem())}), while this run trained; ` +
    'the run was stopped so that the server keeps serving. Make the model, LoRA rank, batch or token budgets smaller, or train it apart with troupe train'
  );
}

export class MemoryWatch {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    readonly limitBytes: number,
    /** Whether any run trains; the watch ends itself when none does. */
    private readonly training: () => boolean,
    /** Called on every check that finds the process over the limit. */
    private readonly onOverLimit: (rssBytes: number) => void,
  ) {}

  /** Starts checking, if it is not already. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (!this.training()) {
        this.stop();
        return;
      }
      const rss = process.memoryUsage.rss();
      if (rss > this.limitBytes) this.onOverLimit(rss);
    }, MEMORY_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
