/**
 * The status bar item: the active run's progress (`$(sync~spin) Troupe: flagship step 12/60 ·
 * val 78%`, click to open its dashboard), or the connection's trouble when there is some (starting,
 * connecting, not running with the reason in the tooltip; click to connect). Nothing when connected
 * with no live run: the item is there to be glanced at during training, not to take space.
 */
import * as vscode from 'vscode';
import { describeConnection } from './connection-state.ts';
import { commandIds } from './contributions.ts';
import { runTooltip, statusBarText } from './run-format.ts';
import type { RunsModel } from './runs-model.ts';
import type { ServerConnection } from './server-connection.ts';

export class RunStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem('troupe.status', vscode.StatusBarAlignment.Left, 10);
  private readonly disposables: vscode.Disposable[] = [this.item];

  constructor(
    private readonly runs: RunsModel,
    private readonly server: ServerConnection,
  ) {
    this.item.name = 'Troupe';
    const changes = runs.onDidChange(() => this.update());
    this.disposables.push({ dispose: () => changes.dispose() }, server.onDidChangeState(() => this.update()));
    this.update();
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }

  private update(): void {
    const state = this.server.state;
    const active = state.kind === 'connected' ? this.runs.activeRun() : undefined;
    if (active) {
      this.item.text = statusBarText(active);
      this.item.tooltip = `${runTooltip(active)}\n\nClick to open the dashboard.`;
      this.item.command = { command: commandIds.openDashboard, title: 'Open Dashboard', arguments: [active.summary.id] };
      this.item.show();
      return;
    }
    switch (state.kind) {
      case 'starting':
      case 'connecting':
        this.item.text = '$(loading~spin) Troupe: connecting';
        break;
      case 'notRunning':
        this.item.text = '$(debug-disconnect) Troupe: server not running';
        break;
      case 'idle':
      case 'connected':
        this.item.hide();
        return;
    }
    this.item.tooltip = `${describeConnection(state)}\n\nClick to connect.`;
    this.item.command = commandIds.connect;
    this.item.show();
  }
}
