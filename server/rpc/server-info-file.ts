/**
 * How clients find a running server: `.troupe/server.json` (url, pid, protocol version, token file)
 * and the token file beside it, readable only by the user (mode 0600). The token is new for every
 * server start, so a token read from an old file stops working when its server exits.
 *
 * One server per workspace: starting a second one while the first is alive is refused, since two
 * trainers would fight over the same runs. Checking server.json alone cannot ensure that (two
 * servers started in the same instant both find none), so a server first takes `server.lock`, an
 * exclusive lock file naming its pid (run-lock.ts's LockFile); a lock or server.json left by a
 * killed server is taken over.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonFile } from '../models/json-file.ts';
import { serverFileSchema, type ServerFile } from '../protocol/server-file.ts';
import { LockFile } from '../runs/run-lock.ts';
import { STORE_DIR_NAME } from '../store/index.ts';

export const SERVER_FILE = 'server.json';
export const TOKEN_FILE = 'server.token';
export const LOCK_FILE = 'server.lock';

export const serverFilePath = (workspace: string): string => join(workspace, STORE_DIR_NAME, SERVER_FILE);

/**
 * Takes the workspace's server lock, or throws naming the live server that holds it (with its URL
 * once it has written server.json). Held until `release()` at shutdown.
 */
export async function acquireServerLock(workspace: string): Promise<LockFile> {
  const dir = join(workspace, STORE_DIR_NAME);
  await mkdir(dir, { recursive: true });
  const path = join(dir, LOCK_FILE);
  return LockFile.acquire(path, {
    // Two servers in one process on one workspace would share nothing but the files: refused too.
    ownPid: 'alive',
    refuse: (h) => {
      const info = readServerFileSync(workspace);
      return info?.pid === h.pid
        ? new Error(`a Troupe server (pid ${h.pid}) is already serving ${workspace} at ${info.url}; connect to it, or stop it first`)
        : new Error(`a Troupe server (pid ${h.pid} on ${h.host}) is already serving ${workspace} (it holds ${path} since ${h.startedAt}); connect to it, or stop it first`);
    },
  });
}

function readServerFileSync(workspace: string): ServerFile | null {
  try {
    const parsed = serverFileSchema.safeParse(JSON.parse(readFileSync(serverFilePath(workspace), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** A fresh random token, written to the token file with mode 0600 (replacing any old file). */
export async function createToken(workspace: string): Promise<{ token: string; tokenFile: string }> {
  const dir = join(workspace, STORE_DIR_NAME);
  await mkdir(dir, { recursive: true });
  const tokenFile = join(dir, TOKEN_FILE);
  const token = randomBytes(32).toString('base64url');
  // Remove first: `mode` applies only when the file is created, and an old file may have other bits.
  await rm(tokenFile, { force: true });
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return { token, tokenFile };
}

export async function writeServerFile(workspace: string, file: ServerFile): Promise<void> {
  await writeJsonFile(serverFilePath(workspace), file);
}

/** Removes the server and token files if they are still this process's. */
export async function removeServerFile(workspace: string): Promise<void> {
  const path = serverFilePath(workspace);
  try {
    const parsed = serverFileSchema.safeParse(JSON.parse(await readFile(path, 'utf8')));
    if (!parsed.success || parsed.data.pid !== process.pid) return;
    await rm(parsed.data.tokenFile, { force: true });
    await rm(path, { force: true });
  } catch {
    // Already gone.
  }
}

/** Reads a token file (trailing newline trimmed). */
export async function readToken(tokenFile: string): Promise<string> {
  return (await readFile(tokenFile, 'utf8')).trim();
}
