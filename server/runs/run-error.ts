/**
 * Refusals of the run lifecycle: a run that does not exist, or a transition its state does not
 * allow (pause a run that is not running, resume one that is done without a larger step count, a
 * run another process is training). The RPC layer maps `code` to its application error codes; the
 * CLI prints the message.
 */
export type RunErrorCode = 'unknown-run' | 'invalid-state';

export class RunError extends Error {
  override readonly name = 'RunError';
  constructor(
    readonly code: RunErrorCode,
    message: string,
  ) {
    super(message);
  }
}
