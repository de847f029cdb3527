/**
 * Run log lines (`run/didLog`) in the "Troupe Server" output channel, each prefixed with its run
 * id. A server this window started already writes them to its stderr, which that channel shows,
 * so only the logs of a server found through server.json or a URL are forwarded.
 */
import type * as vscode from 'vscode';
import type { ServerConnection } from './server-connection.ts';

/** `[run r1] line`. */
export function runLogLine(runId: string, line: string): string {
  return `[run ${runId}] ${line}`;
}

export function forwardRunLogs(server: ServerConnection, output: vscode.OutputChannel): vscode.Disposable {
  let subscription: vscode.Disposable | undefined;
  const connection = server.onDidChangeConnection((client) => {
    subscription?.dispose();
    subscription = undefined;
    if (client === undefined || server.endpoint?.origin === 'started') return;
    subscription = client.onNotification('run/didLog', (p) => output.appendLine(runLogLine(p.runId, p.line)));
  });
  return {
    dispose: () => {
      connection.dispose();
      subscription?.dispose();
    },
  };
}
