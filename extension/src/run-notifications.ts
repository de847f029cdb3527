/**
 * A notification when a run this window saw training ends: how it came out (test before → after,
 * RL gain, best validated step), with the dashboard a click away; a failed run's says why, with the
 * server output a click away. Runs that had already ended when the window connected say nothing.
 */
import * as vscode from 'vscode';
import { runEnding, runEndedMessage } from './run-format.ts';
import type { RunsModel } from './runs-model.ts';

export function notifyRunEnds(runs: RunsModel, actions: { readonly showDashboard: (runId: string) => void; readonly showOutput: () => void }): vscode.Disposable {
  const subscription = runs.onDidEnd(async (v) => {
    const text = runEndedMessage(v);
    if (runEnding(v) === 'failed') {
      if ((await vscode.window.showErrorMessage(text, 'Show Server Output')) !== undefined) actions.showOutput();
      return;
    }
    if ((await vscode.window.showInformationMessage(text, 'Open Dashboard')) !== undefined) actions.showDashboard(v.summary.id);
  });
  return { dispose: () => subscription.dispose() };
}
