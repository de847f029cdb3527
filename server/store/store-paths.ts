/**
 * Where a workspace keeps its run store, and how paths are written into it.
 *
 * Paths inside the store's folder (`<workspace>/.troupe/`) are stored relative to it, so a workspace
 * that is moved or cloned elsewhere still finds its run folders and checkpoints; paths outside it are
 * stored absolute. Stored paths always use `/` so a database copied between platforms stays readable.
 */
import { isAbsolute, join, relative, resolve, sep } from 'node:path';

/** Folder, inside a workspace, that holds the database and the run folders. */
export const STORE_DIR_NAME = '.troupe';

/** File name of the database inside STORE_DIR_NAME. */
export const DATABASE_FILE_NAME = 'troupe.db';

/** The default database path of a workspace: `<workspace>/.troupe/troupe.db`. */
export function defaultDatabasePath(workspaceDir: string): string {
  return join(resolve(workspaceDir), STORE_DIR_NAME, DATABASE_FILE_NAME);
}

/** The default folder of a run, next to the database: `<store dir>/runs/<runId>`. */
export function defaultRunDir(storeDir: string, runId: string): string {
  return join(resolve(storeDir), 'runs', runId);
}

/** The form of `path` written into the database whose folder is `storeDir`. */
export function toStoredPath(storeDir: string, path: string): string {
  const absolute = resolve(storeDir, path);
  const rel = relative(storeDir, absolute);
  const inside = rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
  return (inside ? rel : absolute).split(sep).join('/');
}

/** The absolute path for a stored path read from the database whose folder is `storeDir`. */
export function fromStoredPath(storeDir: string, stored: string): string {
  return isAbsolute(stored) ? stored : resolve(storeDir, ...stored.split('/'));
}
