// End-to-end harness: a real VS Code (code-server, installed by test/e2e/setup.sh) driven in
// headless Chromium by playwright-core. It starts code-server on a free port with throwaway
// user data, opens the workbench on a folder, and drives it the way a person would: the
// command palette, Quick Open, the activity bar, the editor.
//
// Nothing here sleeps for a fixed time: every wait is for an explicit condition (a log line,
// an HTTP answer, an element), bounded by a timeout whose error says what was awaited and
// shows what was there instead.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type Browser, type FrameLocator, type Locator, type Page } from 'playwright-core';

const e2eDir = dirname(fileURLToPath(import.meta.url));
/** Where screenshots and code-server logs go: `test/e2e/artifacts/`. */
export const artifactsDir = join(e2eDir, 'artifacts');
const codeServerEntry = join(e2eDir, 'code-server', 'node_modules', 'code-server', 'out', 'node', 'entry.js');
/** Debian's chromium by default; E2E_CHROMIUM points elsewhere. */
const chromiumPath = process.env['E2E_CHROMIUM'] ?? '/usr/bin/chromium';
/** E2E_KEEP_TMP=1 keeps code-server's throwaway user data and extensions after stop(), for debugging. */
const keepTmp = process.env['E2E_KEEP_TMP'] === '1';

// The machine's network is closed: without the background-networking flags Chromium keeps
// trying (and failing) to reach Google's services. The sandbox needs user namespaces that
// a root container does not have.
const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
] as const;

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
function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}

/** Keeps the last `limit` characters of a stream of output. */
class OutputTail {
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
  const env = codeServerEnv(root);
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

// ---------------------------------------------------------------------------------------------
// The workbench in Chromium

/**
 * Console messages every code-server page logs, left out of `consoleTail` so that a failure shows
 * what matters: code-server does not ship VS Code's closed-source `vsda` module (404s), and
 * serves extension hosts and webviews from its own origin (the sandbox warnings).
 */
const consoleNoise: readonly RegExp[] = [
  /Failed to load resource: .*\b404\b.*\/node_modules\/vsda\//,
  /web worker extension host is started in a same-origin iframe/,
  /An iframe which has both allow-scripts and allow-same-origin/,
];

export interface WorkbenchOptions {
  /** How long to wait for the workbench to appear; default 60 s. */
  readyTimeoutMs?: number;
  viewport?: { width: number; height: number };
}

export interface Workbench {
  readonly browser: Browser;
  readonly page: Page;
  /** The page's console errors and warnings and uncaught exceptions so far, newest last. */
  consoleTail(lines?: number): string;
  /** Closes the browser; safe to call twice. */
  close(): Promise<void>;
}

/**
 * Opens VS Code at `url` (a code-server root) on `folder` in headless Chromium and waits for
 * the workbench to be laid out (its status bar shown). The extension host may still be
 * starting then: wait for what a test needs (`runCommand` waits for contributed commands).
 */
export async function openWorkbench(url: string, folder: string, options: WorkbenchOptions = {}): Promise<Workbench> {
  if (!existsSync(chromiumPath)) {
    throw new Error(`no Chromium at ${chromiumPath}; run \`bash test/e2e/setup.sh\` (or set E2E_CHROMIUM)`);
  }
  const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [...chromiumArgs],
    timeout: readyTimeoutMs,
  });
  const consoleLog = new OutputTail(32_000);
  try {
    const context = await browser.newContext({ viewport: options.viewport ?? { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') {
        const where = message.location().url;
        const line = `[${message.type()}] ${message.text()}${where === '' ? '' : ` (${where})`}`;
        if (!consoleNoise.some((noise) => noise.test(line))) consoleLog.push(`${line}\n`);
      }
    });
    page.on('pageerror', (error) => consoleLog.push(`[uncaught] ${error.stack ?? error.message}\n`));

    const target = `${url}?folder=${encodeURIComponent(resolve(folder))}`;
    await page.goto(target, { timeout: readyTimeoutMs });
    try {
      await page.locator('.monaco-workbench .part.statusbar').waitFor({ timeout: readyTimeoutMs });
    } catch (error) {
      throw new Error(
        `the VS Code workbench did not appear at ${target} within ${seconds(readyTimeoutMs)} ` +
          `(${(error as Error).message.split('\n')[0]}); the page's console:\n${consoleLog.tail(4_000)}`,
      );
    }
    return {
      browser,
      page,
      consoleTail: (lines = 40) => consoleLog.tail().split('\n').slice(-lines).join('\n'),
      close: () => browser.close(),
    };
  } catch (error) {
    await browser.close();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Driving VS Code

/** Visible text of a page or element, shortened, for error messages. */
async function visibleText(target: Page | Locator, chars = 2_000): Promise<string> {
  const locator = 'goto' in target ? target.locator('body') : target;
  const text = await locator.innerText({ timeout: 2_000 }).catch((error: Error) => `(unreadable: ${error.message})`);
  const squeezed = text.replace(/\n{2,}/g, '\n').trim();
  return squeezed.length > chars ? `${squeezed.slice(0, chars)}…` : squeezed;
}

/**
 * Waits until `text` (a substring, or a RegExp) is visible in `target` (a page or an element
 * in it) and returns the first element showing it. The error shows the text that was there.
 */
export async function waitForText(target: Page | Locator, text: string | RegExp, timeoutMs = 15_000): Promise<Locator> {
  const match = target.getByText(text).first();
  try {
    await match.waitFor({ state: 'visible', timeout: timeoutMs });
    return match;
  } catch {
    throw new Error(
      `${String(text)} did not appear within ${seconds(timeoutMs)}; the text there:\n${await visibleText(target)}`,
    );
  }
}

/** The quick input (command palette, Quick Open) and its rows. */
function quickInput(page: Page): { widget: Locator; input: Locator; rows: Locator } {
  const widget = page.locator('.quick-input-widget');
  return { widget, input: widget.locator('.quick-input-box input'), rows: widget.locator('.monaco-list-row') };
}

/** Labels of the rows a quick input shows, for error messages. */
async function shownRows(rows: Locator): Promise<string> {
  const labels = await rows.locator('.label-name').allInnerTexts();
  return labels.length === 0 ? '(none)' : labels.map((l) => `  ${l}`).join('\n');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A RegExp matching the whole of `text`, for exact label matches. */
function exactly(text: string): RegExp {
  return new RegExp(`^\\s*${escapeRegExp(text)}\\s*$`);
}

/**
 * Opens a quick input with `key`, types `value` and picks the row labelled exactly `label`.
 *
 * A quick input lists what was registered when it opened and does not refresh: a command that
 * an extension contributes is offered only once the extension host has registered it, a few
 * seconds after the workbench appears (and a new file only once the file search sees it).
 * So when the row is not offered within a short while, the quick input is closed and opened
 * again, until `timeoutMs` is spent.
 */
async function pick(
  page: Page,
  key: string,
  value: string,
  label: string,
  what: string,
  timeoutMs: number,
  then: 'closes' | 'opensPicker' = 'closes',
): Promise<void> {
  const { widget, input, rows } = quickInput(page);
  const row = rows.filter({ has: page.locator('.label-name', { hasText: exactly(label) }) }).first();
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    await page.keyboard.press(key);
    await input.waitFor({ state: 'visible', timeout: Math.max(1, deadline - Date.now()) });
    await input.fill(value);
    const wait = Math.max(1, Math.min(1_000 * 2 ** attempt, deadline - Date.now()));
    const offered = await row.waitFor({ state: 'visible', timeout: wait }).then(
      () => true,
      () => false,
    );
    if (offered) break;
    const shown = await shownRows(rows);
    await page.keyboard.press('Escape');
    await widget.waitFor({ state: 'hidden' });
    if (Date.now() >= deadline) {
      throw new Error(`${what} '${label}' was not offered within ${seconds(timeoutMs)}; rows shown for '${value}':\n${shown}`);
    }
  }
  await row.click();
  if (then === 'closes') {
    await widget.waitFor({ state: 'hidden', timeout: Math.max(1, deadline - Date.now()) });
    return;
  }
  // The palette hides, then the command shows its own quick pick in the same widget: wait for a
  // visible quick input whose value is not the palette's `>…` (a new quick pick starts empty).
  try {
    const seen = await page.waitForFunction(
      () => {
        const shown = document.querySelector<HTMLElement>('.quick-input-widget');
        const box = shown?.querySelector<HTMLInputElement>('.quick-input-box input');
        if (!shown || shown.style.display === 'none' || !box || box.value.startsWith('>')) return false;
        return `title '${shown.querySelector('.quick-input-title')?.textContent ?? ''}', placeholder '${box.placeholder}'`;
      },
      undefined,
      { timeout: Math.max(1, deadline - Date.now()) },
    );
    lastPicker.set(page, `${label}: ${String(await seen.jsonValue())}`);
  } catch {
    throw new Error(
      `${what} '${label}' opened no quick pick within ${seconds(timeoutMs)}; notifications:\n` +
        (await notificationsText(page)),
    );
  }
}

/** The notification toasts' text, for error messages. */
function notificationsText(page: Page): Promise<string> {
  return visibleText(page.locator('.notifications-toasts'));
}

/** What the last command run with `opensPicker` showed when its picker was taken to be open, for `pickItem`'s errors. */
const lastPicker = new WeakMap<Page, string>();

/**
 * Answers the input box that is open (one a command showed, e.g. after `pickItem`): waits for it
 * to offer `shown` (its prefilled value), replaces that with `value` and accepts it. Typing
 * before the box is there would go to whatever has the focus.
 */
export async function answerInputBox(page: Page, shown: string, value: string, timeoutMs = 30_000): Promise<void> {
  const { widget, input } = quickInput(page);
  try {
    await page.waitForFunction(
      (expected) => {
        const box = document.querySelector<HTMLInputElement>('.quick-input-widget .quick-input-box input');
        return box !== null && box.closest<HTMLElement>('.quick-input-widget')?.style.display !== 'none' && box.value === expected;
      },
      shown,
      { timeout: timeoutMs },
    );
  } catch {
    const open = await widget.isVisible();
    throw new Error(
      `no input box offering '${shown}' within ${seconds(timeoutMs)}; ` +
        (open ? `the quick input holds '${await input.inputValue()}'` : `none is open; notifications:\n${await notificationsText(page)}`),
    );
  }
  await input.fill(value);
  await input.press('Enter');
  await widget.waitFor({ state: 'hidden', timeout: timeoutMs });
}

export interface RunCommandOptions {
  /** How long the command may take to be offered (and to open its picker); default 30 s. */
  timeoutMs?: number;
  /**
   * The command asks with a quick pick of its own (Start Training asks for a config): wait for
   * that picker to show instead of for the palette to close, then answer it with `pickItem`.
   */
  opensPicker?: boolean;
}

/**
 * Runs a command through the command palette (F1) by its full title as the palette shows it,
 * category included: `runCommand(page, 'View: Toggle Word Wrap')`. Waits for commands that
 * extensions contribute to be registered (see `pick`). A number as third argument is the timeout.
 */
export async function runCommand(page: Page, title: string, options: number | RunCommandOptions = {}): Promise<void> {
  const { timeoutMs = 30_000, opensPicker = false } = typeof options === 'number' ? { timeoutMs: options } : options;
  await pick(page, 'F1', `>${title}`, title, 'command', timeoutMs, opensPicker ? 'opensPicker' : 'closes');
}

/**
 * Answers the quick pick that is open (one a command showed, see `RunCommandOptions.opensPicker`)
 * by clicking the row whose label is `label` (the whole label, or a RegExp), once the row is there:
 * pickers that load their items show them a moment after they open. Resolves when the pick was
 * accepted: the picker closed, or the next picker of the command replaced it.
 */
export async function pickItem(page: Page, label: string | RegExp, timeoutMs = 30_000): Promise<void> {
  const { widget, input, rows } = quickInput(page);
  const row = rows.filter({ has: page.locator('.label-name', { hasText: typeof label === 'string' ? exactly(label) : label }) }).first();
  try {
    await row.waitFor({ state: 'visible', timeout: timeoutMs });
  } catch {
    const open = await widget.isVisible();
    const placeholder = open ? await input.getAttribute('placeholder') : null;
    throw new Error(
      `no quick pick row labelled ${String(label)} within ${seconds(timeoutMs)}; ` +
        (open ? `the picker ('${placeholder ?? ''}') shows:\n${await shownRows(rows)}` : `no picker is open (the last command's picker, when seen: ${lastPicker.get(page) ?? 'none'}); notifications:\n${await notificationsText(page)}`),
    );
  }
  // The list reuses row elements for the next picker's items, so the pick counts as accepted
  // when the marked row is gone or hidden, or shows another label.
  const picked = await row.evaluate((element) => {
    element.setAttribute('data-e2e-picked', '');
    return element.querySelector('.label-name')?.textContent ?? '';
  });
  await row.click();
  await page.waitForFunction(
    (text) => {
      const marked = document.querySelector<HTMLElement>('[data-e2e-picked]');
      const gone = marked === null || marked.offsetParent === null || marked.querySelector('.label-name')?.textContent !== text;
      if (gone) marked?.removeAttribute('data-e2e-picked');
      return gone;
    },
    picked,
    { timeout: timeoutMs },
  );
}

/** Opens a workspace file through Quick Open (Ctrl+P) by its file name, and waits for its tab. */
export async function quickOpen(page: Page, fileName: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  await pick(page, 'Control+P', fileName, fileName, 'file', timeoutMs);
  await activeTab(page)
    .filter({ hasText: exactly(fileName) })
    .waitFor({ timeout: Math.max(1, deadline - Date.now()) });
}

/** The active editor group's active tab. */
export function activeTab(page: Page): Locator {
  return page.locator('.editor-group-container.active .tab.active .tab-label .label-name');
}

/** The active editor group's text editor. */
export function activeEditor(page: Page): Locator {
  return page.locator('.editor-group-container.active .monaco-editor').first();
}

/**
 * The text the active editor shows, line by line. Monaco renders only the lines in view (and
 * reuses their elements out of order), so this is the whole file only when it fits on screen;
 * with word wrap on, a wrapped line comes back as several.
 */
export async function activeEditorText(page: Page): Promise<string> {
  return editorText(activeEditor(page));
}

/** The text a Monaco editor (`activeEditor`, a side of a diff editor) shows; see `activeEditorText`. */
export async function editorText(editor: Locator): Promise<string> {
  return (await editorLines(editor)).map((line) => line.text).join('\n');
}

/** A line a Monaco editor shows, with the text its after-line decorations add. */
export interface EditorLine {
  readonly text: string;
  /**
   * The `content` of `::after` pseudo-elements in the line: what decorations with
   * `renderOptions.after.contentText` (inline annotations) draw after it. Not part of `text`.
   */
  readonly after: readonly string[];
}

/** The lines a Monaco editor shows, top to bottom (only those in view; see `activeEditorText`). */
export async function editorLines(editor: Locator): Promise<EditorLine[]> {
  const lines = editor.locator('.view-lines').first();
  await lines.waitFor({ state: 'visible' });
  // No named functions inside: tsx compiles this file with esbuild's keepNames, whose `__name`
  // helper does not exist in the page.
  return lines.evaluate((element) =>
    Array.from(element.querySelectorAll<HTMLElement>(':scope > .view-line'))
      .map((line) => ({
        top: parseFloat(line.style.top),
        text: (line.textContent ?? '').replace(/\u00a0/g, ' '),
        // Computed `content` is a CSS string: quoted, with `"` and `\` escaped by a backslash
        // (`none` or `normal` where nothing is drawn).
        after: Array.from(line.querySelectorAll('span'))
          .map((span) => getComputedStyle(span, '::after').content)
          .filter((content) => content.length > 2 && content.startsWith('"') && content.endsWith('"'))
          .map((content) => content.slice(1, -1).replace(/\\(.)/g, '$1')),
      }))
      .sort((a, b) => a.top - b.top)
      .map(({ text, after }) => ({ text, after })),
  );
}

/**
 * The row of a tree or list (the Runs view, the Explorer) whose label is `label` (the whole
 * label, or a RegExp), in `container` (a side bar from `openView`).
 */
export function treeItem(container: Locator, label: string | RegExp): Locator {
  const name = container.page().locator('.label-name', { hasText: typeof label === 'string' ? exactly(label) : label });
  return container.locator('.monaco-list-row').filter({ has: name }).first();
}

/**
 * The page inside the webview panel that is in view (a dashboard, an inspector). VS Code nests
 * it twice: `iframe.webview` (VS Code's host page, shown over the editor area) holds
 * `iframe#active-frame` (the extension's HTML). Hidden panels' frames are not in view.
 */
export function visibleWebview(page: Page): FrameLocator {
  return page.locator('iframe.webview.ready').filter({ visible: true }).first().contentFrame().locator('iframe#active-frame').contentFrame();
}

/** The activity bar's entry for a view container ("Explorer", "Search", an extension's own). */
export function activityBarItem(page: Page, title: string): Locator {
  return page.locator(`.part.activitybar .action-item .action-label[aria-label^="${title.replace(/"/g, '\\"')}"]`);
}

/** Opens a view container from the activity bar and waits for the side bar to show it. */
export async function openView(page: Page, title: string, timeoutMs = 15_000): Promise<Locator> {
  const item = activityBarItem(page, title);
  try {
    await item.waitFor({ state: 'visible', timeout: timeoutMs });
  } catch {
    const shown = await page.locator('.part.activitybar .action-item .action-label').evaluateAll((labels) =>
      labels.map((l) => l.getAttribute('aria-label') ?? '?'),
    );
    throw new Error(`no '${title}' in the activity bar within ${seconds(timeoutMs)}; it has: ${shown.join(', ')}`);
  }
  const sideBar = page.locator('.part.sidebar');
  const header = sideBar.locator('.composite.title h2');
  // Clicking the entry of the container already shown would hide the side bar.
  const clicked = !((await sideBar.isVisible()) && (await header.innerText()).toLowerCase().startsWith(title.toLowerCase()));
  if (clicked) await item.click();
  await header.filter({ hasText: new RegExp(`^\\s*${escapeRegExp(title)}`, 'i') }).waitFor({ timeout: timeoutMs });
  // The click also moves the focus into the view, a moment after its header shows: a quick pick
  // opened before that moment would close as the focus leaves it.
  if (clicked) await waitForSideBarFocus(page, timeoutMs);
  return sideBar;
}

/**
 * Waits until the keyboard focus is in the side bar. Commands that focus a view (Start Training
 * focuses the Runs view, clicking an activity bar entry focuses its view) return before VS Code
 * has moved the focus; a quick pick or input box shown in between closes when the focus arrives,
 * as if it were cancelled. Tests wait for this before their next picker.
 */
async function waitForSideBarFocus(page: Page, timeoutMs = 15_000): Promise<void> {
  try {
    await page.waitForFunction(() => document.activeElement?.closest('.part.sidebar') != null, undefined, { timeout: timeoutMs });
  } catch {
    const focused = await page.evaluate(() => {
      const e = document.activeElement;
      return e === null ? '(nothing)' : `${e.tagName.toLowerCase()}${e.className ? `.${String(e.className).trim().split(/\s+/).join('.')}` : ''}`;
    });
    throw new Error(`the focus did not move into the side bar within ${seconds(timeoutMs)}; it is on ${focused}`);
  }
}

/** Waits for a notification toast containing `text` and returns it. */
export async function waitForNotification(page: Page, text: string | RegExp, timeoutMs = 15_000): Promise<Locator> {
  return waitForText(page.locator('.notifications-toasts'), text, timeoutMs);
}

/** Saves a screenshot of the page to `test/e2e/artifacts/<name>.png` and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(artifactsDir, { recursive: true });
  const path = join(artifactsDir, `${name}.png`);
  // Finite animations (a hover fading in) are finished first, so the picture shows the end state.
  await page.screenshot({ path, animations: 'disabled' });
  return path;
}

// ---------------------------------------------------------------------------------------------
// Both together

export interface VsCode {
  readonly server: CodeServer;
  readonly workbench: Workbench;
  readonly page: Page;
  /** Closes the browser and stops code-server; safe to call twice. */
  close(): Promise<void>;
}

/** Starts code-server on `options.workspace` and opens the workbench on it. */
export async function launchVsCode(options: CodeServerOptions & WorkbenchOptions): Promise<VsCode> {
  const server = await startCodeServer(options);
  let workbench: Workbench;
  try {
    workbench = await openWorkbench(server.url, server.workspace, options);
  } catch (error) {
    await server.stop();
    throw new Error(`${(error as Error).message}\ncode-server's output (${server.logFile}):\n${server.logTail(2_000)}`);
  }
  return {
    server,
    workbench,
    page: workbench.page,
    close: async () => {
      try {
        await workbench.close();
      } finally {
        await server.stop();
      }
    },
  };
}

/**
 * Runs `body`; if it throws, saves a screenshot (`artifacts/<name>.failure.png`) and VS Code's
 * logs (`artifacts/<name>.vscode-logs/`), and adds the page's console and code-server's output to
 * the error, so a failure in CI can be read without running it again.
 */
export async function withFailureArtifacts<T>(vscode: VsCode, name: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    const shot = await screenshot(vscode.page, `${name}.failure`).catch((e: Error) => `(no screenshot: ${e.message})`);
    // VS Code's own logs: the extension host's, and every output channel (an extension's server
    // output among them). They live in the throwaway user data folder, gone after stop().
    const logs = join(artifactsDir, `${name}.vscode-logs`);
    let logsSaved: string;
    try {
      cpSync(join(vscode.server.userDataDir, 'logs'), logs, { recursive: true });
      logsSaved = logs;
    } catch (e) {
      logsSaved = `(not saved: ${(e as Error).message})`;
    }
    const message = error instanceof Error ? error.message : String(error);
    const wrapped = new Error(
      `${message}\n\nscreenshot: ${shot}\nVS Code's logs (extension host, output channels): ${logsSaved}\n` +
        `page console:\n${vscode.workbench.consoleTail(20)}\n` +
        `code-server's output (${vscode.server.logFile}):\n${vscode.server.logTail(2_000)}`,
      { cause: error },
    );
    throw wrapped;
  }
}
