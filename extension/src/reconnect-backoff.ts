/**
 * When to try again after the connection to the server drops: exponential backoff from a short
 * first delay (a server that restarts is usually back within a second) to a ceiling (a server that
 * is gone should not be polled hard), with jitter so several windows on one workspace do not
 * reconnect in lockstep. A successful connection resets it.
 */
export interface BackoffOptions {
  /** First delay, milliseconds. */
  readonly initialMs: number;
  /** Ceiling, milliseconds. */
  readonly maxMs: number;
  /** Each delay is the previous one times this. */
  readonly factor: number;
  /** Delays are spread uniformly over ±jitter of their value (0 for none, 0.2 for ±20%). */
  readonly jitter: number;
  /** Attempts before giving up; Infinity for never. */
  readonly maxAttempts: number;
  /** Uniform random numbers in [0, 1); injectable for tests. */
  readonly random: () => number;
}

export const defaultBackoff: BackoffOptions = { initialMs: 250, maxMs: 30_000, factor: 2, jitter: 0.2, maxAttempts: Infinity, random: Math.random };

/** The delay before attempt `attempt` (0-based), without jitter. */
export function backoffDelayMs(attempt: number, o: Pick<BackoffOptions, 'initialMs' | 'maxMs' | 'factor'>): number {
  return Math.min(o.maxMs, o.initialMs * o.factor ** attempt);
}

export class ReconnectBackoff {
  private attempt = 0;
  private readonly o: BackoffOptions;

  constructor(options: Partial<BackoffOptions> = {}) {
    this.o = { ...defaultBackoff, ...options };
  }

  /** Attempts made since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /** The delay before the next attempt, or null when the attempts are used up. */
  next(): number | null {
    if (this.attempt >= this.o.maxAttempts) return null;
    const base = backoffDelayMs(this.attempt++, this.o);
    const spread = base * this.o.jitter * (2 * this.o.random() - 1);
    return Math.max(0, Math.round(base + spread));
  }

  /** Called after a successful connection. */
  reset(): void {
    this.attempt = 0;
  }
}
