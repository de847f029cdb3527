/**
 * What extension.e2e.ts opens and watches from outside the window: the packaged extension, a
 * workspace of experiment configs (each made for one of the tests), and the training server the
 * extension starts there (its pid from `.troupe/server.json`, its exit).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { experimentConfigJsonSchema } from '../../../server/protocol/experiment-config.ts';
import { SERVER_FILE_RELATIVE, serverFileSchema } from '../../../server/protocol/server-file.ts';
import { processAlive } from '../../../server/runs/run-lock.ts';
import { tinyConfigWithSteps } from '../../fixtures/tiny-config.ts';

/** The repository the extension is built from (and whose CLI serves the workspace). */
export const root = fileURLToPath(new URL('../../..', import.meta.url));

export const STEPS = 3;
/** The tiny experiment (a few seconds a step on 2 cores), without `$schema`: the workspace has no schema file. */
export const config = tinyConfigWithSteps(STEPS);
export const runName = config.name;
/** The tiny experiment with a warm-up of minutes (a few hundred steps of a fraction of a second). */
export const WARM_UP_STEPS = 400;
export const warmUpConfig = { ...config, name: 'tiny warm-up', warmStart: { ...config.warmStart, steps: WARM_UP_STEPS, batchSize: 4 } };
/** The name of the run that the Runs-view management test renames, runs again and deletes. */
export const manageName = 'tiny to manage';

/**
 * The .vsix exactly as `npm run package` makes it (a clean build of the bundles into
 * extension/dist, then vsce), copied into `dir` before it is installed, so a package built
 * meanwhile by someone else cannot change under the installer. Returns the copy's path.
 */
export async function packageExtension(dir: string): Promise<string> {
  const vsix = join(dir, 'troupe.vsix');
  try {
    await promisify(execFile)(process.execPath, [join(root, 'extension', 'scripts', 'package.mjs')], {
      cwd: root,
      timeout: 180_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const { stdout = '', stderr = '', message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`packaging the extension failed: ${message}\n${stdout}${stderr}`.trimEnd());
  }
  copyFileSync(join(root, 'extension', 'dist', 'troupe.vsix'), vsix);
  return vsix;
}

/**
 * Writes the workspace: configs only (no installed troupe, no settings), so the extension serves
 * it with the CLI of the clone it was built from.
 */
export function writeWorkspace(workspace: string): void {
  const configs = join(workspace, 'configs');
  mkdirSync(configs, { recursive: true });
  const write = (name: string, value: unknown) => writeFileSync(join(configs, name), `${JSON.stringify(value, null, 2)}\n`);
  write('tiny.troupe.json', config);
  // The same experiment (same name) again, long enough to pause and stop: a second run of the config.
  write('tiny-again.troupe.json', tinyConfigWithSteps(50));
  // A long warm-up (its own name, so its row is apart from the runs above): watched, paused and stopped in it.
  write('tiny-warm-up.troupe.json', warmUpConfig);
  // Valid for the JSON Schema, wrong for the environment: only the server's semantic check sees it.
  write('misrouted.troupe.json', { ...config, router: { tool: 'tool-lora', planner: 'plan-lora' } });
  // A run to rename, run again and delete (its own name, so its row is apart from the others).
  write('manage.troupe.json', { ...tinyConfigWithSteps(50), name: manageName });
  // Config-editor noise (issue 32 item 7): a value both the JSON Schema and the server reject,
  // and a duplicate key, which VS Code's JSON language features report (the sign that they have
  // checked the file); a config whose model folder does not exist, valid otherwise.
  const noisyText = `${JSON.stringify({ ...config, algorithm: { ...config.algorithm, branches: 1 } }, null, 2)}\n`.replace('"seed": 1,', '"seed": 1,\n  "seed": 1,');
  writeFileSync(join(configs, 'noisy.troupe.json'), noisyText);
  // The same bound broken in a config with its own `$schema` (as the repository's configs have),
  // which VS Code checks against that schema whatever the extension serves; and an option of the
  // environment that only the server checks.
  write('schema.json', experimentConfigJsonSchema());
  write('with-schema.troupe.json', { $schema: './schema.json', ...config, env: { ...config.env, options: { ...config.env.options, maxTurns: 'two' } }, algorithm: { ...config.algorithm, branches: 1 } });
  write('missing-model.troupe.json', { ...config, models: { base: { checkpoint: '../models/no-such-model' } } });
}

/** The workspace's server file (`.troupe/server.json`). */
export const serverFile = (workspace: string): string => join(workspace, SERVER_FILE_RELATIVE);

/** The pid of the server serving `workspace`, from its server file. */
export function serverPid(workspace: string): number {
  return serverFileSchema.parse(JSON.parse(readFileSync(serverFile(workspace), 'utf8'))).pid;
}

/** Waits until process `pid` (not a child of this one, so there is no event for it) has exited. */
export async function waitForExit(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid)) {
    if (Date.now() >= deadline) throw new Error(`process ${pid} was still running after ${timeoutMs / 1000} s`);
    // Poll interval, not a wait for the exit: each turn checks the process again.
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The window's "Troupe Webviews" log as VS Code writes it to disk (`<userDataDir>/logs/...`, one
 * file a window session), all sessions joined in name order; '' before anything is logged.
 */
export function webviewLog(userDataDir: string): string {
  const logs = join(userDataDir, 'logs');
  let files: string[];
  try {
    files = readdirSync(logs, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('Troupe Webviews.log')).sort();
  } catch {
    return '';
  }
  return files.map((f) => readFileSync(join(logs, f), 'utf8')).join('');
}

