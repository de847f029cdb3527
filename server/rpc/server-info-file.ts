/**
 * How clients find a running server: `.troupe/server.json` (url, pid, protocol version, token file)
 * and the token file beside it, readable only by the user (mode 0600). The token is new for every
 * server start, so a token read from an old file stops working when its server exits.
 *
 * One server per workspace: starting a second one while the first is alive is refused, since two
 * trainers would fight over the same runs. A file left by a killed server is taken over.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonFile } from '../models/json-file.ts';
import { serverFileSchema, type ServerFile } from '../protocol/server-file.ts';
import { processAlive } from '../runs/run-lock.ts';
import { STORE_DIR_NAME } from '../store/index.ts';

export const SERVER_FILE = 'server.json';
export const TOKEN_FILE = 'server.token';


export const serverFilePath = (workspace: string): string => join(workspace, STORE_DIR_NAME, SERVER_FILE);

/** The server file of a live server of this workspace, or null (no file, unreadable, or its process is gone). */
export async function readLiveServerFile(workspace: string): Promise<ServerFile | null> {
  const path = serverFilePath(workspace);
  if (!existsSync(path)) return null;
  try {
    const parsed = serverFileSchema.safeParse(JSON.parse(await readFile(path, 'utf8')));
    if (!parsed.success) return null;
    return parsed.data.pid !== process.pid && processAlive(parsed.data.pid) ? parsed.data : null;
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
