/**
 * Opens (creating if needed) the SQLite file behind a run store and puts it in the state every other
 * module assumes: WAL journal, foreign keys enforced, a busy timeout, and the current schema.
 *
 * - WAL lets the editor read while the trainer writes, and makes a commit one append to the log.
 * - synchronous=FULL fsyncs the log at every commit. A step commits once every few seconds, so the
 *   cost is invisible, and it extends "a crash loses at most the step in flight" from process crashes
 *   (which NORMAL already survives) to power loss.
 * - The busy timeout covers a second process (a headless `troupe train` next to `troupe serve`)
 *   holding the write lock for the length of one step commit.
 * - `PRAGMA quick_check` at open: garbage in the middle of a page that the schema read does not
 *   touch (a data page of trajectories) would otherwise surface much later, or as wrong rows. It
 *   checks every page's b-tree structure in one pass without the index cross-checks of
 *   integrity_check (O(N), a fraction of a second per 100 MB), and stops at the first problems.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { migrate, SCHEMA_VERSION } from './schema-migrations.ts';
import { RunStoreError, withFileContext } from './store-error.ts';

/** How long a statement waits for another connection's write lock before failing. */
export const BUSY_TIMEOUT_MS = 5000;

export interface OpenDatabaseOptions {
  /**
   * A second connection that only reads (the server's query thread): it neither creates nor
   * migrates the file, and skips the quick_check the writing connection already ran at its open.
   * `PRAGMA query_only` makes any write on it fail, while WAL still lets it read beside the writer.
   */
  readonly queryOnly?: boolean;
}

export function openDatabase(path: string, options: OpenDatabaseOptions = {}): Database.Database {
  const file = resolve(path);
  if (options.queryOnly) return openQueryOnly(file);
  try {
    mkdirSync(dirname(file), { recursive: true });
  } catch (error) {
    throw new RunStoreError('open-failed', `cannot create the folder of run store ${file}: ${message(error)}`, { cause: error });
  }
  let db: Database.Database;
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw new RunStoreError('open-failed', `cannot open run store ${file}: ${message(error)}`, { cause: error });
  }
  try {
    // The first statement is the first read of the header: a file that is not SQLite fails here.
    const mode = String(db.pragma('journal_mode = WAL', { simple: true }));
    if (mode !== 'wal') {
      throw new RunStoreError('open-failed', `run store ${file} cannot use write-ahead logging (journal_mode stayed '${mode}'); is it on a network or read-only file system?`);
    }
    db.pragma('foreign_keys = ON');
    db.pragma('synchronous = FULL');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    migrate(db, file);
    const problems = (db.pragma('quick_check(5)') as Array<{ quick_check: string }>).map((r) => r.quick_check).filter((m) => m !== 'ok');
    if (problems.length > 0) {
      throw new RunStoreError(
        'corrupt',
        `run store ${file} is corrupted (SQLite quick_check: ${problems.join('; ')}); move it aside to start with an empty store, or recover what is readable with the sqlite3 shell's .recover`,
      );
    }
    return db;
  } catch (error) {
    db.close();
    throw openError(error, file);
  }
}

function openQueryOnly(file: string): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS, fileMustExist: true });
  } catch (error) {
    throw new RunStoreError('open-failed', `cannot open run store ${file}: ${message(error)}`, { cause: error });
  }
  try {
    const mode = String(db.pragma('journal_mode', { simple: true }));
    if (mode !== 'wal') throw new RunStoreError('open-failed', `run store ${file} is not in write-ahead-log mode ('${mode}'): open it for writing first`);
    const version = Number(db.pragma('user_version', { simple: true }));
    if (version !== SCHEMA_VERSION) throw new RunStoreError('open-failed', `run store ${file} has schema version ${version}, this server reads ${SCHEMA_VERSION}: open it for writing first`);
    db.pragma('query_only = ON');
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    return db;
  } catch (error) {
    db.close();
    throw openError(error, file);
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An error raised while opening `file`, as a RunStoreError naming it (one raised as such passes through). */
function openError(error: unknown, file: string): RunStoreError {
  const wrapped = withFileContext(error, file);
  return wrapped instanceof RunStoreError ? wrapped : new RunStoreError('open-failed', `cannot open run store ${file}: ${message(error)}`, { cause: error });
}
