/**
 * Progress of a training run, one tick per finished step: `step 3/40`, the caller's fields
 * (metrics), seconds per step and an ETA.
 *
 * On a terminal the bar is one line redrawn in place, and log lines are printed above it. Into a
 * pipe or file (CI logs, `troupe train … > log`) redrawing would leave escape codes and a line
 * per redraw, so it prints plain lines instead: the first and last step, steps the caller marks
 * (validation), and otherwise at most one line per `intervalMs`. On a terminal a marked step also
 * leaves its line in the scrollback.
 */
import { formatDuration } from './text-format.ts';

/** What the bar writes to: process.stdout, or a stand-in in tests. */
export interface ProgressStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

export interface ProgressBarOptions {
  /** Steps of the whole run. */
  readonly total: number;
  /** Defaults to process.stdout. */
  readonly stream?: ProgressStream;
  /** Plain-line mode: least time between two lines for unmarked steps. Default 10 s. */
  readonly intervalMs?: number;
  /** Clock in milliseconds; tests pin it. */
  readonly now?: () => number;
}

const BAR_WIDTH = 20;

export class ProgressBar {
  private readonly stream: ProgressStream;
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private readonly now: () => number;
  /** Durations of the steps ticked in this process (a resumed run has none from before). */
  private readonly durations: number[] = [];
  private drawn = '';
  private lastPrinted = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: ProgressBarOptions) {
    this.stream = o.stream ?? process.stdout;
    this.tty = this.stream.isTTY === true;
    this.intervalMs = o.intervalMs ?? 10_000;
    this.now = o.now ?? Date.now;
  }

  /** Prints a line; on a terminal above the bar, which is redrawn below it. */
  log(line: string): void {
    if (!this.tty) {
      this.stream.write(`${line}\n`);
      return;
    }
    this.stream.write(`\r\x1b[K${line}\n`);
    if (this.drawn) this.stream.write(this.drawn);
  }

  /**
   * Step `step` finished after `ms`. `fields` are shown after the step count; `mark` forces a
   * line in plain-line mode (e.g. a step with validation results).
   */
  tick(step: number, ms: number, fields: readonly string[], mark = false): void {
    this.durations.push(ms);
    const total = this.o.total;
    const recent = this.durations.slice(-10);
    const perStep = recent.reduce((a, b) => a + b, 0) / recent.length;
    const left = Math.max(0, total - step);
    const timing = `${(perStep / 1000).toFixed(1)} s/step${left > 0 ? `  ETA ${formatDuration(perStep * left)}` : ''}`;
    const count = `step ${step}/${total}`;
    if (this.tty) {
      const filled = Math.round((BAR_WIDTH * Math.min(step, total)) / Math.max(1, total));
      const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`;
      const line = [count, bar, ...fields, timing].join('  ');
      const width = this.stream.columns ?? 120;
      const fitted = line.length >= width ? `${line.slice(0, Math.max(0, width - 2))}…` : line;
      if (mark) {
        this.stream.write(`\r\x1b[K${[count, ...fields, timing].join('  ')}\n`);
        this.drawn = '';
      } else {
        this.drawn = `\r\x1b[K${fitted}`;
        this.stream.write(this.drawn);
      }
      return;
    }
    const t = this.now();
    if (this.durations.length === 1 || step >= total || mark || t - this.lastPrinted >= this.intervalMs) {
      this.stream.write(`${[count, ...fields, timing].join('  ')}\n`);
      this.lastPrinted = t;
    }
  }

  /** Leaves the bar's last state on screen and moves below it. */
  finish(): void {
    if (this.tty && this.drawn) this.stream.write('\n');
    this.drawn = '';
  }
}
