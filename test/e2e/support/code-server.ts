// code-server for the end-to-end tests: installed by test/e2e/setup.sh, started on a free port with
// throwaway user data in a process group of its own, and stopped with everything it started.
// Also the small output helpers the workbench side shares (seconds, OutputTail).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/** test/e2e/, this folder's parent. */
const e2eDir = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Where screenshots and code-server logs go: `test/e2e/artifacts/`. */
export const artifactsDir = join(e2eDir, 'artifacts');
const codeServerEntry = join(e2eDir, 'code-server', 'node_modules', 'code-server', 'out', 'node', 'entry.js');
/** E2E_KEEP_TMP=1 keeps code-server's throwaway user data and extensions after stop(), for debugging. */
const keepTmp = process.env['E2E_KEEP_TMP'] === '1';

/**
 * User settings every test starts from: no telemetry, welcome page, tips or update checks,
 * and no workspace trust (the Troupe extension, like most, is disabled in an untrusted
 * folder, and the trust prompt would cover the workbench).
 */
export const defaultSettings = {
  'telemetry.telemetryLevel': 'off',
  'security.workspace.trust.enabled': false,
  'workbench.startupEditor': 'none',
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
  'chat.commandCenter.enabled': false,
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
} as const satisfies Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// Output and process groups

/** Milliseconds as a short human string for error messages: 60000 → "60s". */
export function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

/** Keeps the last `limit` characters of a stream of output. */
export class OutputTail {
  private text = '';
  constructor(private readonly limit: number) {}
  push(chunk: string): void {
    this.text += chunk;
    if (this.text.length > 2 * this.limit) this.text = this.text.slice(-this.limit);
  }
  /** The last `chars` characters as they came. */
  raw(chars = this.limit): string {
    return this.text.slice(-chars);
  }
  /** The last `chars` characters for a message: blank lines dropped (VS Code's server prints many). */
  tail(chars = this.limit): string {
    const text = this.text.replace(/\n\s*\n/g, '\n').trim().slice(-chars);
    return text === '' ? '(nothing)' : text;
  }
}

// code-server runs in its own process group (spawned detached) so that stop() can end it
// together with everything it started: the VS Code server, extension hosts, pty host, file
// watcher. Being its own group also means a Ctrl-C in the terminal does not reach it, so the
// groups still alive are killed when this process exits or is signalled. The map goes from
// process group id to that server's temporary folder, removed with it.
const liveGroups = new Map<number, string>();
let exitHooksInstalled = false;

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  const killAll = (): void => {
    for (const [pid, root] of liveGroups) {
      killGroup(pid, 'SIGKILL');
      try {
        if (!keepTmp) rmSync(root, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // A process killed a moment ago may still be writing there; the folder is in tmp.
      }
    }
    liveGroups.clear();
  };
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killAll();
      process.exit(128 + constants.signals[signal]);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// code-server

export interface CodeServerOptions {
  /** The folder VS Code opens; it must exist. */
  workspace: string;
  /** Where extensions are installed; a fresh temporary folder if not given. */
  extensionsDir?: string;
  /** VS Code's user data (settings, state, logs); a fresh temporary folder if not given. */
  userDataDir?: string;
  /** A .vsix to install (with code-server's --install-extension) before the server starts. */
  vsix?: string;
  /** User settings on top of `defaultSettings`; written to `<userDataDir>/User/settings.json`. */
  settings?: Record<string, unknown>;
  /** Environment variables for code-server and the extension hosts it starts, on top of this process's. */
  env?: Record<string, string>;
  /** Names the log file, `artifacts/<name>.code-server.log`; default "code-server". */
  name?: string;
  /** How long to wait for the server to answer; default 60 s. */
  readyTimeoutMs?: number;
}

export interface CodeServer {
  /** The server's root URL, ending in "/": `http://127.0.0.1:PORT/`. */
  readonly url: string;
  readonly workspace: string;
  readonly userDataDir: string;
  readonly extensionsDir: string;
  /** code-server's whole output (stdout and stderr). */
  readonly logFile: string;
  /** The last `chars` characters of code-server's output. */
  logTail(chars?: number): string;
  /** Ends code-server and every process it started; safe to call twice. */
  stop(): Promise<void>;
}

function assertInstalled(): void {
  if (!existsSync(codeServerEntry)) {
    throw new Error(
      `code-server is not installed (no ${codeServerEntry}); run \`bash test/e2e/setup.sh\` first ` +
        '(`node test/e2e/run.mjs` does)',
    );
  }
}

/** Writes the user settings file VS Code reads at start-up. */
function writeSettings(userDataDir: string, settings: Record<string, unknown>): void {
  const dir = join(userDataDir, 'User');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
}

/** The environment code-server runs in: its config and state kept out of the user's home. */
function codeServerEnv(root: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Run from a VS Code terminal, these would make code-server talk to that VS Code instead.
  for (const key of Object.keys(env)) if (key.startsWith('VSCODE_')) delete env[key];
  delete env['PASSWORD'];
  delete env['HASHED_PASSWORD'];
  env['XDG_CONFIG_HOME'] = join(root, 'xdg', 'config');
  env['XDG_DATA_HOME'] = join(root, 'xdg', 'data');
  env['XDG_CACHE_HOME'] = join(root, 'xdg', 'cache');
  return env;
}

async function installVsix(vsix: string, common: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  const path = resolve(vsix);
  if (!existsSync(path)) throw new Error(`cannot install ${path}: no such file`);
  try {
    await promisify(execFile)(
      process.execPath,
      [codeServerEntry, ...common, '--force', '--install-extension', path],
      { env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (error) {
    const { stdout = '', stderr = '', message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`code-server --install-extension ${path} failed: ${message}\n${stdout}${stderr}`.trimEnd());
  }
}

/** Polls `GET <url>healthz` until it answers 200 or `deadline` (a Date.now() value) passes. */
async function waitForHealthz(url: string, deadline: number, child: ChildProcess): Promise<void> {
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`code-server exited (${child.exitCode ?? child.signalCode}) before it answered at ${url}`);
    }
    try {
      const response = await fetch(`${url}healthz`, { signal: AbortSignal.timeout(5_000) });
      if (response.ok) return;
      last = `HTTP ${response.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    // Poll interval, not a wait for readiness: each turn checks the server again.
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`GET ${url}healthz did not answer 200 (last: ${last})`);
}

/**
 * Starts code-server with authentication off on 127.0.0.1 and a port the OS picks, and
 * resolves once it answers HTTP. Stop it with `stop()` (in an `after` hook); it is killed
 * anyway when this process exits.
 */
export async function startCodeServer(options: CodeServerOptions): Promise<CodeServer> {
  assertInstalled();
  const workspace = resolve(options.workspace);
  if (!existsSync(workspace)) throw new Error(`workspace ${workspace} does not exist`);
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const root = mkdtempSync(join(tmpdir(), 'troupe-e2e-'));
  const userDataDir = resolve(options.userDataDir ?? join(root, 'user-data'));
  const extensionsDir = resolve(options.extensionsDir ?? join(root, 'extensions'));
  mkdirSync(extensionsDir, { recursive: true });
  writeSettings(userDataDir, { ...defaultSettings, ...options.settings });
  // An explicit config file, or code-server writes one (with a generated password) to ~/.config.
  const configFile = join(root, 'config.yaml');
  writeFileSync(configFile, 'auth: none\ncert: false\n');
  const env = { ...codeServerEnv(root), ...options.env };
  const common = ['--config', configFile, '--user-data-dir', userDataDir, '--extensions-dir', extensionsDir];
  if (options.vsix !== undefined) {
    try {
      await installVsix(options.vsix, common, env);
    } catch (error) {
      if (!keepTmp) rmSync(root, { recursive: true, force: true });
      throw error;
    }
  }

  mkdirSync(artifactsDir, { recursive: true });
  const logFile = join(artifactsDir, `${options.name ?? 'code-server'}.code-server.log`);
  const log = createWriteStream(logFile);
  const output = new OutputTail(64_000);
  const args = [
    codeServerEntry,
    ...common,
    '--auth', 'none',
    // Port 0: the OS picks a free port, with no window for another process to take it;
    // code-server prints the address it got.
    '--bind-addr', '127.0.0.1:0',
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-workspace-trust',
    '--disable-getting-started-override',
    '--ignore-last-opened',
    workspace,
  ];
  installExitHooks();
  const child = spawn(process.execPath, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start code-server (${process.execPath} ${args.join(' ')})`);
  liveGroups.set(pid, root);

  // 'close' comes after 'exit', once every process holding code-server's stdout has ended.
  const closed = once(child, 'close').then(() => undefined);
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        killGroup(pid, 'SIGTERM');
        const timer = setTimeout(() => killGroup(pid, 'SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      // The main process may be gone while a process it started lingers.
      killGroup(pid, 'SIGKILL');
      liveGroups.delete(pid);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
      clearTimeout(timer);
      await new Promise<void>((r) => log.end(r));
      if (!keepTmp) rmSync(root, { recursive: true, force: true });
    })();
    return stopped;
  };

  const listening = new Promise<string>((resolveUrl, reject) => {
    const onOutput = (chunk: Buffer): void => {
      const text = chunk.toString();
      if (!log.writableEnded) log.write(text);
      output.push(text);
      // A chunk may end inside the line: the URL counts once the whitespace after it came.
      const match = /HTTP server listening on (http:\/\/\S+)\s/.exec(output.raw(4_000));
      if (match?.[1] !== undefined) resolveUrl(match[1].endsWith('/') ? match[1] : `${match[1]}/`);
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`code-server exited (${code ?? signal}) before listening`)));
  });

  const deadline = Date.now() + readyTimeoutMs;
  let url: string | undefined;
  try {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('it printed no "HTTP server listening on" line')), readyTimeoutMs);
    });
    url = await Promise.race([listening, timeout]).finally(() => clearTimeout(timer));
    await waitForHealthz(url, deadline, child);
  } catch (error) {
    await stop();
    throw new Error(
      `code-server did not become ready ${url === undefined ? '' : `at ${url} `}within ${seconds(readyTimeoutMs)}: ` +
        `${(error as Error).message}; its output (${logFile}):\n${output.tail(4_000)}`,
    );
  }
  return {
    url,
    workspace,
    userDataDir,
    extensionsDir,
    logFile,
    logTail: (chars = 4_000) => output.tail(chars),
    stop,
  };
}
