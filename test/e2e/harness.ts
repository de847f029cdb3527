// End-to-end harness: a real VS Code (code-server, installed by test/e2e/setup.sh) driven in
// headless Chromium by playwright-core. It starts code-server on a free port with throwaway
// user data, opens the workbench on a folder, and drives it the way a person would: the
// command palette, Quick Open, the activity bar, the editor.
//
// Nothing here sleeps for a fixed time: every wait is for an explicit condition (a log line,
// an HTTP answer, an element), bounded by a timeout whose error says what was awaited and
// shows what was there instead.
//
// The parts: support/code-server.ts (the server process) and support/workbench.ts (the browser and
// the helpers that drive it); this module joins them and is what the tests import.
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { artifactsDir, startCodeServer, type CodeServer, type CodeServerOptions } from './support/code-server.ts';
import { openWorkbench, screenshot, type Workbench, type WorkbenchOptions } from './support/workbench.ts';

export * from './support/code-server.ts';
export * from './support/workbench.ts';


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
