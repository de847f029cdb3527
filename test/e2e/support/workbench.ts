// The VS Code workbench in headless Chromium (playwright-core), and the helpers that drive it the
// way a person would: the command palette, Quick Open, pickers, the activity bar, the editor.
// Every wait is for an explicit condition, bounded by a timeout whose error shows what was there.
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type FrameLocator, type Locator, type Page } from 'playwright-core';
import { artifactsDir, OutputTail, seconds } from './code-server.ts';

/** Debian's chromium by default; E2E_CHROMIUM points elsewhere. */
const chromiumPath = process.env['E2E_CHROMIUM'] ?? '/usr/bin/chromium';

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
