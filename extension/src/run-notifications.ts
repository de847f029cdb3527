/**
 * Notifications of what happens without the user asking: a run this window saw training ends (how
 * it came out: test before → after, RL gain, best validated step, with the dashboard a click away; a
 * failed run's says why), and the connection to the server is lost (with Restart Server a click
 * away). Runs that had already ended when the window connected say nothing.
 */
import * as vscode from 'vscode';
import { commandIds } from './contributions.ts';
import { runEnding, runEndedMessage } from './run-format.ts';
import type { RunsModel } from './runs-model.ts';
import type { ServerConnection } from './server-connection.ts';

/** Says so when a live connection drops (the server was killed or crashed), offering a restart. */
export function notifyConnectionLost(server: ServerConnection, showOutput: () => void): vscode.Disposable {
  let wasConnected = server.state.kind === 'connected';
  return server.onDidChangeState(async (s) => {
    const lost = wasConnected && s.kind === 'notRunning';
    wasConnected = s.kind === 'connected';
    if (!lost) return;
    const choice = await vscode.window.showWarningMessage(`Troupe: lost the connection to the server (${s.reason}). The Runs view keeps the runs as last read.`, 'Restart Server', 'Show Server Output');
    if (choice === 'Restart Server') await vscode.commands.executeCommand(commandIds.restartServer);
    else if (choice === 'Show Server Output') showOutput();
  });
}

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
