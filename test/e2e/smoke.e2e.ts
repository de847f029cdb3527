// Smoke test of the end-to-end harness itself: code-server starts, the workbench opens in
// headless Chromium, and the things extension tests will lean on work — Quick Open, the
// command palette, the activity bar, reading the editor, the extension host (the built-in
// JSON language server reports problems), screenshots.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import {
  activeEditor,
  activeEditorText,
  launchVsCode,
  openView,
  quickOpen,
  runCommand,
  screenshot,
  waitForText,
  withFailureArtifacts,
  type VsCode,
} from './harness.ts';

// Long enough that the line is wider than the editor at the harness's 1400 px viewport.
const longValue = 'lorem ipsum dolor sit amet '.repeat(12).trim();
const smokeJson = `${JSON.stringify({ greeting: 'hello from the e2e harness', long: longValue }, null, 2)}\n`;

let workspace = '';
let vscode: VsCode | undefined;

function started(): VsCode {
  assert.ok(vscode, 'VS Code did not start (see the before hook)');
  return vscode;
}

before(async () => {
  workspace = mkdtempSync(join(tmpdir(), 'troupe-e2e-smoke-'));
  writeFileSync(join(workspace, 'smoke.json'), smokeJson);
  writeFileSync(join(workspace, 'broken.json'), '{ "a": 1,, "b": }\n');
  vscode = await launchVsCode({ workspace, name: 'smoke' });
}, { timeout: 120_000 });

after(async () => {
  await vscode?.close();
  if (workspace !== '') rmSync(workspace, { recursive: true, force: true });
});

test('the Explorer lists the workspace files', { timeout: 60_000 }, () =>
  withFailureArtifacts(started(), 'smoke-explorer', async () => {
    const sideBar = await openView(started().page, 'Explorer');
    await waitForText(sideBar, 'smoke.json');
    await waitForText(sideBar, 'broken.json');
  }),
);

test('Quick Open opens a JSON file and the editor shows its text', { timeout: 60_000 }, () =>
  withFailureArtifacts(started(), 'smoke-quick-open', async () => {
    const { page } = started();
    await quickOpen(page, 'smoke.json');
    assert.equal(await activeEditorText(page), smokeJson);
    // The language mode in the status bar: VS Code recognised the file.
    await waitForText(page.locator('#status\\.editor\\.mode'), 'JSON');
  }),
);

test('View: Toggle Word Wrap from the command palette wraps the long line', { timeout: 60_000 }, () =>
  withFailureArtifacts(started(), 'smoke-word-wrap', async () => {
    const { page } = started();
    await quickOpen(page, 'smoke.json');
    const viewLines = activeEditor(page).locator('.view-lines > .view-line');
    const modelLines = smokeJson.split('\n').length; // the final newline starts an empty line
    assert.equal(await viewLines.count(), modelLines, 'one view line per line before wrapping');
    await runCommand(page, 'View: Toggle Word Wrap');
    // Wrapped, the long line takes several view lines.
    await page.waitForFunction(
      ([selector, lines]) => document.querySelectorAll(selector).length > lines,
      ['.editor-group-container.active .monaco-editor .view-lines > .view-line', modelLines] as const,
      { timeout: 15_000 },
    );
    await screenshot(page, 'smoke');
  }),
);

test('the extension host runs: the JSON language server reports problems', { timeout: 60_000 }, () =>
  withFailureArtifacts(started(), 'smoke-extension-host', async () => {
    const { page } = started();
    await quickOpen(page, 'broken.json');
    // Diagnostics come from the built-in JSON extension's language server, a Node process
    // the extension host starts: the same path the Troupe extension's own code takes.
    const errors = page.locator('#status\\.problems[aria-label^="Errors: "]');
    await errors.waitFor({ timeout: 30_000 });
    assert.doesNotMatch((await errors.getAttribute('aria-label')) ?? '', /^Errors: 0\b/);
    await screenshot(page, 'smoke-problems');
  }),
);
