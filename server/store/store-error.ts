/**
 * The one error type the run store throws. `code` lets the RPC layer map failures to JSON-RPC
 * application codes without parsing messages; the message always names the culprit (the database
 * file, the run, the step, or the path of the offending input field).
 */

export type RunStoreErrorCode =
  /** The file is not an SQLite database, SQLite found it corrupt, or a stored value failed its check on read (the message names the row). */
  | 'corrupt'
  /** The file is an SQLite database, but not one Troupe created. */
  | 'foreign-database'
  /** The database was written by a newer Troupe whose schema this build does not know. */
  | 'newer-schema'
  /** The file could not be opened or configured (permissions, missing folder, no WAL support). */
  | 'open-failed'
  /** An argument failed validation; the message lists each offending field. */
  | 'invalid-input'
  /** The run id does not exist. */
  | 'unknown-run'
  /** A step was committed out of order (before the last committed step). */
  | 'step-order';

export class RunStoreError extends Error {
  override readonly name = 'RunStoreError';

  constructor(
    readonly code: RunStoreErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** SQLite result codes that mean the file itself is bad rather than the statement. */
const corruptionCodes = new Set(['SQLITE_CORRUPT', 'SQLITE_NOTADB']);

/**
 * Turns SQLite's corruption errors into a RunStoreError naming the file: better-sqlite3 reports them
 * as "database disk image is malformed" with no path, which tells a user nothing when several
 * workspaces are open. Any other error is returned unchanged, for the caller to rethrow.
 */
export function withFileContext(error: unknown, file: string): unknown {
  if (error instanceof RunStoreError) return error;
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  if (typeof code === 'string' && corruptionCodes.has(code)) {
    const reason = error instanceof Error ? error.message : String(error);
    return new RunStoreError('corrupt', `${file} is not a valid Troupe run store: ${reason} (${code})`, { cause: error });
  }
  return error;
}
