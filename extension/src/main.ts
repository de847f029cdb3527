/**
 * Activation: builds the pieces and wires them together; the logic lives in the modules.
 *
 *   ServerProcess (find/start troupe serve) ──▶ ServerConnection (ws + RpcClient, reconnects)
 *        ServerConnection ──▶ RunsModel ──▶ RunsTree, RunStatusBar
 *                         ──▶ ConfigLanguageClient (LSP over its own socket)
 *                         ──▶ dashboard, inspector, run comparison, trajectory documents (features take ServerClient)
 *   commands act on all of the above.
 */
import * as vscode from 'vscode';
import { registerCommands } from './commands.ts';
import { ConfigLanguageClient } from './config-language-client.ts';
import { ConfigSchemaProvider } from './config-schema-provider.ts';
import { configSchemaScheme, serverOutputChannelName } from './contributions.ts';
import { ComparePanel, registerCompareSerializer } from './panels/compare-panel.ts';
import { DashboardPanel, registerDashboardSerializer } from './panels/dashboard-panel.ts';
import { InspectorPanel, registerInspectorSerializer } from './panels/inspector-panel.ts';
import { forwardRunLogs } from './run-log.ts';
import { notifyConnectionLost, notifyRunEnds } from './run-notifications.ts';
import { RunsModel } from './runs-model.ts';
import { RunsTree } from './runs-tree.ts';
import { ServerConnection } from './server-connection.ts';
import { ServerProcess } from './server-process.ts';
import { RunStatusBar } from './status-bar.ts';
import { registerTrajectoryFeatures } from './trajectories/trajectory-features.ts';

let languageClient: ConfigLanguageClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel(serverOutputChannelName);
  const log = (line: string) => output.appendLine(`[extension] ${line}`);
  const serverProcess = new ServerProcess(output);
  const version = (context.extension.packageJSON as { version?: unknown }).version;
  const server = new ServerConnection(serverProcess, log, { name: 'troupe-vscode', version: typeof version === 'string' ? version : '0.0.0' });
  const runs = new RunsModel(log);
  const tree = new RunsTree(runs, server);
  const schema = new ConfigSchemaProvider(context.extensionUri, log);
  context.subscriptions.push(schema, vscode.workspace.registerTextDocumentContentProvider(configSchemaScheme, schema));
  languageClient = new ConfigLanguageClient(server, output, log);
  context.subscriptions.push(languageClient.onDidChangeRunning((running) => schema.setServerChecks(running)));
  const trajectories = registerTrajectoryFeatures(context, server);
  registerDashboardSerializer(context, server);
  registerInspectorSerializer(context, server);
  const labelOf = (runId: string) => runs.labelOf(runId);
  registerCompareSerializer(context, server, labelOf);

  context.subscriptions.push(
    serverProcess,
    server,
    { dispose: () => runs.dispose() },
    server.onDidChangeConnection((client) => void runs.setClient(client)),
    forwardRunLogs(server, output),
    tree,
    new RunStatusBar(runs, server),
    notifyRunEnds(runs, { showDashboard: (runId) => DashboardPanel.show(context, server, runId), showOutput: () => output.show(true) }),
    notifyConnectionLost(server, () => output.show(true)),
    languageClient,
    ...registerCommands({
      server,
      serverProcess,
      runs,
      tree,
      output,
      trajectories,
      showDashboard: (runId) => DashboardPanel.show(context, server, runId),
      showInspector: (trajectoryId) => InspectorPanel.show(context, server, trajectoryId, { beside: true, reuse: true }),
      showComparison: (runIds) => ComparePanel.show(context, server, runIds, labelOf),
    }),
    // Last: VS Code disposes subscriptions in order, and the ones above log while they stop (an
    // appendLine on a disposed channel throws, which stopped ServerProcess before it ended the server).
    output,
  );
  // Starting a server runs workspace code: ServerProcess refuses in an untrusted workspace and
  // connects once trust is granted.
  void server.connect({ start: true });
}

/** Lets the language client say goodbye; the subscriptions stop the rest (and the server this window started). */
export async function deactivate(): Promise<void> {
  await languageClient?.stop().catch(() => {});
}
