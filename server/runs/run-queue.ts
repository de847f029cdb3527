/**
 * The run manager's training slots: at most `maxConcurrent` runs train at once, counting the slots
 * promised to starts and resumes still awaiting their setup; the others wait here, in the order
 * they start.
 */
export class RunQueue {
  /** Queued runs' ids in the order they start. */
  private readonly order: string[] = [];
  /** Slots promised to starts and resumes still awaiting their setup. */
  private reserved = 0;

  constructor(readonly maxConcurrent: number) {
    if (!Number.isSafeInteger(maxConcurrent) || maxConcurrent < 1) throw new RangeError(`maxConcurrentRuns must be an integer >= 1, got ${maxConcurrent}`);
  }

  /** The queued runs, first to start first. */
  get queued(): readonly string[] {
    return this.order;
  }

  /** Promises a slot, when fewer than `maxConcurrent` runs train (`training` runs with a worker) or are promised one. */
  reserve(training: number): boolean {
    if (this.reserved + training >= this.maxConcurrent) return false;
    this.reserved++;
    return true;
  }

  /** Gives back a slot taken by `reserve`; the caller then starts what is queued (`next`). */
  release(): void {
    this.reserved--;
  }

  push(runId: string): void {
    this.order.push(runId);
  }

  /** Takes a run out of the queue (paused or stopped while queued). */
  remove(runId: string): void {
    const i = this.order.indexOf(runId);
    if (i >= 0) this.order.splice(i, 1);
  }

  /** The next queued run, taken out of the queue, if a slot is free for it with `training` runs training. */
  next(training: number): string | undefined {
    if (this.order.length === 0 || this.reserved + training >= this.maxConcurrent) return undefined;
    return this.order.shift();
  }
}
