/**
 * Where the training server comes from, in this order: an address given in "Connect to Server"
 * for this session; the `troupe.server.url` setting; a live server of the workspace found in
 * `.troupe/server.json` (started by another window or a terminal); or `troupe serve` started here,
 * which only happens in a trusted workspace (it runs code from the workspace). A server this window
 * started logs into the "Troupe Server" output channel and is stopped (SIGTERM: live runs pause at
 * their step boundary, resumable) when the window closes; a found one is left alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as vscode from 'vscode';
import type { ServerEndpoint } from './connection-state.ts';
import { settingKeys, settingsSection } from './contributions.ts';
import { expandVariables, formatCommandLine, isLoopbackUrl, normalizeServerUrl, parseListeningLine, parseServerFile, serveCommandLine, SERVER_FILE_RELATIVE, serverExitReason } from './server-discovery.ts';

/** An endpoint, or why there is none and whether trying again later may help. */
export type EndpointResult = { readonly ok: true; readonly endpoint: ServerEndpoint } | { readonly ok: false; readonly reason: string; readonly retry: boolean };

export interface ResolveOptions {
  /** Whether `troupe serve` may be started when no server is found. */
  readonly start: boolean;
  /** Called when a server is being started (it takes seconds). */
  readonly onStarting?: (detail: string) => void;
}

/** Something changed that may make a server reachable; `start` says whether starting one is in order. */
export interface EndpointChange {
  readonly start: boolean;
  /** Drop the current connection first (the settings now point elsewhere). */
  readonly replace: boolean;
}

/** How long `troupe serve` may take to print its URL (tsx compiles the CLI on a cold start). */
const START_TIMEOUT_MS = 120_000;
/** Lines of the server's stderr kept to explain an exit. */
const STDERR_TAIL = 20;

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readToken(tokenFile: string): Promise<string> {
  const token = (await readFile(tokenFile, 'utf8')).trim();
  if (token === '') throw new Error(`the token file ${tokenFile} is empty`);
  return token;
}

/**
 * The Troupe clone this extension was built from: `extension/esbuild.mjs` defines it at build time
 * (undefined in the unit tests, which run the sources).
 */
declare const __TROUPE_CLONE__: string | undefined;
const builtFrom: string | undefined = typeof __TROUPE_CLONE__ === 'string' ? __TROUPE_CLONE__ : undefined;

export class ServerProcess implements vscode.Disposable {
  private child: ChildProcess | undefined;
  /** URL the child printed; a server.json naming it is ours. */
  private childUrl: string | undefined;
  private starting: Promise<EndpointResult> | undefined;
  /** Why the last server this window started is gone, shown until another one is up. */
  private lastExit: string | undefined;
  private session: { readonly url: string; readonly tokenFile: string } | undefined;
  private readonly changeEmitter = new vscode.EventEmitter<EndpointChange>();
  /** Fires when trust, settings, workspace folders or the workspace's server.json change. */
  readonly onDidChange = this.changeEmitter.event;
  private readonly disposables: vscode.Disposable[] = [this.changeEmitter];
  private disposed = false;

  constructor(private readonly output: vscode.OutputChannel) {
    this.disposables.push(
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.changeEmitter.fire({ start: true, replace: false })),
      vscode.workspace.onDidChangeWorkspaceFolders(() => this.changeEmitter.fire({ start: true, replace: false })),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration(`${settingsSection}.server`)) this.changeEmitter.fire({ start: true, replace: true });
      }),
    );
    // A server started from a terminal or another window announces itself by writing server.json.
    const watcher = vscode.workspace.createFileSystemWatcher(`**/${SERVER_FILE_RELATIVE}`);
    const appeared = () => this.changeEmitter.fire({ start: false, replace: false });
    this.disposables.push(watcher, watcher.onDidCreate(appeared), watcher.onDidChange(appeared));
  }

  /** The folder whose server we use: the first holding `.troupe/`, else the first holding `configs/`, else the first. */
  get workspaceFolder(): string | undefined {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
    return folders.find((f) => existsSync(join(f, '.troupe'))) ?? folders.find((f) => existsSync(join(f, 'configs'))) ?? folders[0];
  }

  /** Uses this address for the rest of the session (Connect to Server), or forgets it. */
  setSessionEndpoint(e: { readonly url: string; readonly tokenFile: string } | undefined): void {
    this.session = e;
  }

  get hasSessionEndpoint(): boolean {
    return this.session !== undefined;
  }

  /** Finds (and with `start`, starts) a server to connect to. */
  async resolve(o: ResolveOptions): Promise<EndpointResult> {
    if (this.session) return this.fromAddress(this.session.url, this.session.tokenFile, 'session');
    const config = vscode.workspace.getConfiguration(settingsSection);
    const folder = this.workspaceFolder;
    const configuredUrl = config.get<string>(settingKeys.serverUrl, '').trim();
    if (configuredUrl !== '') {
      const tokenSetting = config.get<string>(settingKeys.serverTokenFile, '').trim();
      // The workspace's own token file is only a default in a trusted workspace: an untrusted one
      // must not decide which local file is sent to which address.
      const fallback = folder !== undefined && vscode.workspace.isTrusted ? join(folder, '.troupe', 'server.token') : undefined;
      const tokenFile = tokenSetting !== '' ? expandVariables(tokenSetting, folder, homedir()) : fallback;
      if (tokenFile === undefined) return { ok: false, reason: 'troupe.server.url is set but troupe.server.tokenFile is not', retry: false };
      return this.fromAddress(configuredUrl, tokenFile, 'configured');
    }
    if (folder === undefined) return { ok: false, reason: 'no folder is open: open the folder that holds your experiment configs', retry: false };
    if (!vscode.workspace.isTrusted) {
      return { ok: false, reason: 'this workspace is not trusted, and Troupe only starts or joins a workspace server in a trusted one (Manage Workspace Trust)', retry: false };
    }
    // A start in flight would also be found in server.json before it prints its URL; wait for it.
    if (this.starting) return this.starting;
    const found = await this.findLiveServer(folder);
    if (found.ok) return found;
    if (!o.start) return { ok: false, reason: this.lastExit ?? found.reason, retry: false };
    this.starting = this.startServer(folder, o.onStarting).finally(() => (this.starting = undefined));
    return this.starting;
  }

  /**
   * Stops the server this window started, if it is still running, and waits for it to exit (it
   * pauses its live runs at their step boundary and gives up the workspace's server lock), so a new
   * one can start. A server this window did not start is left alone.
   */
  async stopStartedServerAndWait(timeoutMs = 120_000): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.stopStartedServer();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((_, reject) => (timer = setTimeout(() => reject(new Error(`the server (pid ${child.pid ?? '?'}) did not stop within ${timeoutMs / 1000} s`)), timeoutMs)));
    try {
      await Promise.race([exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops the server this window started, if any. Its live runs pause at their step boundary. */
  stopStartedServer(): void {
    if (this.child && this.child.exitCode === null) {
      this.log(`stopping troupe serve (pid ${this.child.pid ?? '?'}): live runs pause at their step boundary`);
      this.child.kill('SIGTERM');
    }
  }

  dispose(): void {
    this.stopStartedServer();
    this.disposed = true;
    for (const d of this.disposables) d.dispose();
  }

  private log(line: string): void {
    this.append(`[extension] ${line}`);
  }

  /**
   * Writes to the output channel unless this is disposed: the server's last lines and its exit
   * come after the window closed, when the channel is gone and writing to it throws.
   */
  private append(line: string): void {
    if (!this.disposed) this.output.appendLine(line);
  }

  private async fromAddress(url: string, tokenFile: string, origin: 'session' | 'configured'): Promise<EndpointResult> {
    const normalized = normalizeServerUrl(url);
    if (!normalized.ok) return { ok: false, reason: normalized.reason, retry: false };
    try {
      return { ok: true, endpoint: { url: normalized.value, token: await readToken(tokenFile), origin } };
    } catch (e) {
      return { ok: false, reason: `cannot read the server's token: ${errorText(e)}`, retry: false };
    }
  }

  /** The workspace's live server from `.troupe/server.json`; `retry` when one is there but not ready. */
  private async findLiveServer(folder: string): Promise<EndpointResult> {
    const path = join(folder, SERVER_FILE_RELATIVE);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch {
      return { ok: false, reason: `no Troupe server is running for ${folder}`, retry: false };
    }
    const parsed = parseServerFile(text);
    if (!parsed.ok) return { ok: false, reason: parsed.reason, retry: false };
    const file = parsed.value;
    if (!pidAlive(file.pid)) return { ok: false, reason: `the server recorded in ${SERVER_FILE_RELATIVE} (pid ${file.pid}) is no longer running`, retry: false };
    // server.json is the workspace's word; a discovered server must be on this machine.
    if (!isLoopbackUrl(file.url)) return { ok: false, reason: `${SERVER_FILE_RELATIVE} names ${file.url}, which is not on this machine; connect to it explicitly if you trust it`, retry: false };
    try {
      const token = await readToken(file.tokenFile);
      return { ok: true, endpoint: { url: file.url, token, origin: file.url === this.childUrl ? 'started' : 'found' } };
    } catch (e) {
      // The server writes the token before server.json, so an unreadable token is not a race: report it.
      return { ok: false, reason: `cannot read the server's token: ${errorText(e)}`, retry: false };
    }
  }

  private async startServer(folder: string, onStarting: ((detail: string) => void) | undefined): Promise<EndpointResult> {
    const configured = vscode.workspace.getConfiguration(settingsSection).get<string[]>(settingKeys.serverCommand, []);
    const command = serveCommandLine({ configured, workspace: folder, home: homedir(), platform: process.platform, exists: existsSync, clone: builtFrom });
    if (!command.ok) return { ok: false, reason: command.reason, retry: false };
    const line = formatCommandLine(command.value);
    this.log(`starting: ${line}`);
    onStarting?.(line);
    this.lastExit = undefined;
    this.childUrl = undefined;

    const child = spawn(command.value.command, [...command.value.args], { cwd: folder, shell: command.value.shell, stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
    this.child = child;
    const stderrTail: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`troupe serve did not print its URL within ${START_TIMEOUT_MS / 1000} s (see the Troupe Server output)`)), START_TIMEOUT_MS);
      createInterface({ input: child.stdout! }).on('line', (l) => {
        this.append(l);
        const u = parseListeningLine(l);
        if (u !== null) {
          clearTimeout(timer);
          resolve(u);
        }
      });
      createInterface({ input: child.stderr! }).on('line', (l) => {
        this.append(l);
        stderrTail.push(l);
        if (stderrTail.length > STDERR_TAIL) stderrTail.shift();
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
        reject(new Error(missing ? `cannot run "${command.value.command}": not found (is Node.js on PATH? see troupe.server.command)` : `cannot run troupe serve: ${e.message}`));
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`troupe serve exited (${signal ?? `code ${code}`}) before it listened${stderrTail.length ? `: ${stderrTail.at(-1)}` : ''}`));
      });
    }).catch((e: unknown) => e as Error);

    child.once('exit', (code, signal) => {
      const why = serverExitReason(child.pid, code, signal, stderrTail.at(-1));
      this.log(why);
      if (this.child === child) {
        this.child = undefined;
        this.lastExit = why;
      }
    });

    if (url instanceof Error) {
      this.log(url.message);
      if (child.exitCode === null) child.kill('SIGTERM');
      // Another window may have won the race to serve this workspace; use its server if so.
      const other = await this.findLiveServer(folder);
      return other.ok ? other : { ok: false, reason: url.message, retry: false };
    }
    this.childUrl = url;
    const found = await this.findLiveServer(folder);
    if (!found.ok) return found;
    if (found.endpoint.url !== url) return { ok: false, reason: `troupe serve listens on ${url} but ${SERVER_FILE_RELATIVE} names ${found.endpoint.url}`, retry: false };
    return found;
  }
}
