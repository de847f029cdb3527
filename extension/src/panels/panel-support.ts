/**
 * What the dashboard, inspector and comparison panels share: where the bundles are, the webview
 * options (scripts on, resources only from the bundle folder), the HTML shell, parsing what a
 * webview posts, the log that bad messages and webview reports go to, reloading a page that does
 * not start, and restoring panels after a reload.
 */
import { existsSync } from 'node:fs';
import * as vscode from 'vscode';
import type { z } from 'zod';
import { parseMessage } from '../../../webview/src/messages.ts';
import { LoadWatchdog } from './load-watchdog.ts';
import { makeNonce, webviewHtml } from './webview-html.ts';
import { userMessage } from '../error-text.ts';

/** The bundles' folder inside the extension (what `buildWebviews('extension/dist/webview')` writes). */
export function bundleRoot(context: vscode.ExtensionContext): vscode.Uri {
  return vscode.Uri.joinPath(context.extensionUri, 'dist', 'webview');
}

/** Webview options: the bundle folder is the only local resource root. */
export function webviewOptions(context: vscode.ExtensionContext): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return {
    enableScripts: true,
    enableFindWidget: true,
    localResourceRoots: [bundleRoot(context)],
    // The webviews keep only small state (getState/setState) and get their data again on `ready`,
    // which is cheaper than keeping a hidden page with thousands of points alive.
    retainContextWhenHidden: false,
  };
}

/** How long a page in view may take to post `ready`, and how often it is loaded again. */
const LOAD_TIMEOUT_MS = 15_000;
const LOAD_RETRIES = 3;

/**
 * Sets the panel's options and its HTML for one bundle (`dashboard`, `inspector` or `compare`),
 * with a fresh nonce, and watches the page start: one in view that has not posted `ready` within
 * LOAD_TIMEOUT_MS is loaded again, up to LOAD_RETRIES times, and then the user is told
 * (load-watchdog.ts says why). New HTML in the same frame seldom helps when the webview's service
 * worker failed it (the e2e reload test saw three such reloads fail in a row, 2026-11-29), so from
 * the second retry on, `reopen` (each panel's, built on `replacePanel`) replaces the panel with a
 * new one (a new frame) on the same content; the new panel is given none, so this happens once.
 * Call once per panel.
 */
export function loadBundle(panel: vscode.WebviewPanel, context: vscode.ExtensionContext, bundle: 'dashboard' | 'inspector' | 'compare', title: string, reopen?: () => void): void {
  const webview = panel.webview;
  webview.options = webviewOptions(context);
  const root = bundleRoot(context);
  const script = reopen !== undefined && failingPagesForTest() ? `${bundle}.missing.js` : `${bundle}.js`;
  const setHtml = (): void => {
    webview.html = webviewHtml({
      title,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(root, script)).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(root, `${bundle}.css`)).toString(),
      cspSource: webview.cspSource,
      nonce: makeNonce(),
    });
  };
  setHtml();
  const watchdog = new LoadWatchdog({
    visible: () => panel.visible,
    reload: (attempt) => {
      if (reopen && attempt >= 2) {
        panelLog().warn(`${title}: the page did not start within ${LOAD_TIMEOUT_MS / 1000} s; opening it in a new panel (${attempt} of ${LOAD_RETRIES})`);
        reopen();
        return;
      }
      panelLog().warn(`${title}: the page did not start within ${LOAD_TIMEOUT_MS / 1000} s; loading it again (${attempt} of ${LOAD_RETRIES})`);
      setHtml();
    },
    giveUp: (loads) => {
      panelLog().error(`${title}: the page did not start after ${loads} loads`);
      void vscode.window
        .showWarningMessage(`Troupe: "${title}" stays blank: VS Code did not serve its page's files after ${loads} tries. Reloading the window usually clears it.`, 'Reload Window')
        .then((choice) => (choice === 'Reload Window' ? vscode.commands.executeCommand('workbench.action.reloadWindow') : undefined));
    },
  }, LOAD_TIMEOUT_MS, LOAD_RETRIES);
  // Each page's start is logged (one line a load): a panel that stays blank then shows whether its
  // script ran (`started`) and whether it was in view to be watched.
  const t0 = Date.now();
  const listeners = [
    webview.onDidReceiveMessage((data: unknown) => {
      if (typeof data !== 'object' || data === null || (data as { type?: unknown }).type !== 'ready') return;
      panelLog().info(`${title}: the ${bundle} page started (${Date.now() - t0} ms after it was first loaded)`);
      watchdog.ready();
    }),
    panel.onDidChangeViewState(() => watchdog.viewChanged()),
  ];
  panel.onDidDispose(() => {
    watchdog.dispose();
    for (const l of listeners) l.dispose();
  });
  panelLog().info(`${title}: the ${bundle} page loaded, ${panel.visible ? 'in view' : 'out of view'}`);
  watchdog.loaded();
}

/**
 * For the end-to-end test of the replacement in `loadBundle`: while the file that the environment
 * variable TROUPE_E2E_FAIL_PAGES names exists (the test's VS Code has it set; users never do), a
 * panel that can be replaced is served a script that is not there, so its page never starts, as
 * when the webview's service worker fails it, and only the replacement comes up.
 */
function failingPagesForTest(): boolean {
  const marker = process.env['TROUPE_E2E_FAIL_PAGES'];
  return marker !== undefined && marker !== '' && existsSync(marker);
}

/**
 * Closes `panel` and opens a new one of the same type, title and column in its place, leaving the
 * focus where it is: what a panel's `reopen` (`loadBundle`) builds its replacement on.
 */
export function replacePanel(panel: vscode.WebviewPanel, viewType: string, context: vscode.ExtensionContext): vscode.WebviewPanel {
  const column = panel.viewColumn ?? vscode.ViewColumn.Active;
  const title = panel.title;
  panel.dispose();
  return vscode.window.createWebviewPanel(viewType, title, { viewColumn: column, preserveFocus: true }, webviewOptions(context));
}

let log: vscode.LogOutputChannel | undefined;

/** The webviews' log (an output channel made on first use). */
export function panelLog(): vscode.LogOutputChannel {
  log ??= vscode.window.createOutputChannel('Troupe Webviews', { log: true });
  return log;
}

/**
 * Calls `handler` with every message the webview posts that parses with `schema`; logs the others
 * with what was wrong and drops them.
 */
export function onWebviewMessage<S extends z.ZodType>(panel: vscode.WebviewPanel, schema: S, from: string, handler: (m: z.infer<S>) => void | Promise<void>): vscode.Disposable {
  return panel.webview.onDidReceiveMessage(async (data: unknown) => {
    const parsed = parseMessage(schema, data, from);
    if (!parsed.ok) {
      panelLog().warn(parsed.error);
      return;
    }
    try {
      await handler(parsed.message);
    } catch (e) {
      panelLog().error(`${from}: handling a message failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  });
}

/** Writes a webview's own `log` message to the log, tagged with the webview. */
export function logFromWebview(from: string, level: 'info' | 'warn' | 'error', message: string): void {
  panelLog()[level](`${from}: ${message}`);
}

/**
 * Restores a panel type's panels after a reload: VS Code hands back each panel with the state its
 * webview last saved (`setState`), and `restore` adopts it. A state that does not parse with
 * `schema` (the webview never saved one, or an older one) is logged, saying what it lacked
 * (`lacking`: `a run id`), and its panel closed. Call once on activation.
 */
export function registerPanelSerializer<S extends z.ZodType>(
  context: vscode.ExtensionContext,
  viewType: string,
  from: string,
  schema: S,
  lacking: string,
  restore: (panel: vscode.WebviewPanel, state: z.infer<S>) => void,
): void {
  context.subscriptions.push(
    vscode.window.registerWebviewPanelSerializer(viewType, {
      async deserializeWebviewPanel(panel: vscode.WebviewPanel, state: unknown) {
        const parsed = schema.safeParse(state);
        if (!parsed.success) {
          panelLog().warn(`${from}: cannot restore a panel without ${lacking} in its state (${JSON.stringify(state)?.slice(0, 200)})`);
          panel.dispose();
          return;
        }
        restore(panel, parsed.data);
      },
    }),
  );
}

/** An error's message for a webview banner. */
export function errorText(e: unknown): string {
  return userMessage(e);
}
