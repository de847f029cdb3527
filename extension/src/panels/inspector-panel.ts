/**
 * The trajectory inspector panel of one trajectory: on the webview's `ready` it fetches the
 * trajectory (`trajectory/get`, every turn with its sibling branches), then the same task at the
 * other steps that ran it (`trajectories/forTask`) so the user can follow it through training.
 * One panel per trajectory (showing it again reveals it). Open Trajectory reuses the panel it
 * opened last, like a preview editor, so browsing the Runs view leaves one inspector; the
 * webview's links open other trajectories in panels of their own, and start a comparison. Panels come back after a reload through the
 * serializer, from the webview state (trajectory id).
 */
import * as vscode from 'vscode';
import type { TrajectoryDetail } from '../../../server/protocol/trajectory.ts';
import { inspectorStateSchema, inspectorToHostSchema, type HostToInspector, type InspectorToHost } from '../../../webview/src/messages.ts';
import type { ServerClient } from '../server-client.ts';
import { followConnection } from './connection-follower.ts';
import { errorText, loadBundle, logFromWebview, onWebviewMessage, panelLog, registerPanelSerializer, replacePanel, webviewOptions } from './panel-support.ts';

/** The webview panel type; `contributes`/activation (`onWebviewPanel:troupe.inspector`) must name it. */
export const INSPECTOR_VIEW_TYPE = 'troupe.inspector';

/**
 * The command the inspector's "Compare with…" runs, with `(trajectoryId: number, otherId?: number)`;
 * without `otherId` the command asks the user for the other side.
 */
export const COMPARE_TRAJECTORIES_COMMAND = 'troupe.compareTrajectories';

export class InspectorPanel {
  static readonly #open = new Map<number, InspectorPanel>();
  /** The panel the next `show({ reuse: true })` shows its trajectory in, while it is open. */
  static #reusable: InspectorPanel | undefined;

  /**
   * Opens the inspector on a trajectory, or reveals it when it is already open. `beside`: in the
   * editor group beside the active one, leaving the focus where it is (Open Trajectory shows the
   * trajectory's document too, and an inspector on top of it would hide its annotations). `reuse`:
   * show it in the panel the last reusing call opened, if that is still open, instead of a new one.
   */
  static show(context: vscode.ExtensionContext, server: ServerClient, trajectoryId: number, o: { readonly beside?: boolean; readonly reuse?: boolean } = {}): void {
    const column = o.beside ? vscode.ViewColumn.Beside : vscode.ViewColumn.Active;
    const preserveFocus = o.beside === true;
    const open = InspectorPanel.#open.get(trajectoryId);
    if (open) {
      open.panel.reveal(undefined, preserveFocus);
      return;
    }
    const reusable = o.reuse ? InspectorPanel.#reusable : undefined;
    if (reusable) {
      reusable.#retarget(trajectoryId);
      reusable.panel.reveal(undefined, preserveFocus);
      return;
    }
    const panel = vscode.window.createWebviewPanel(INSPECTOR_VIEW_TYPE, `Trajectory #${trajectoryId}`, { viewColumn: column, preserveFocus }, webviewOptions(context));
    const created = new InspectorPanel(context, server, trajectoryId, panel);
    if (o.reuse) InspectorPanel.#reusable = created;
  }

  /** Adopts a panel VS Code restored after a reload. */
  static restore(context: vscode.ExtensionContext, server: ServerClient, panel: vscode.WebviewPanel, trajectoryId: number): void {
    const open = InspectorPanel.#open.get(trajectoryId);
    if (open) {
      panel.dispose();
      open.panel.reveal();
      return;
    }
    new InspectorPanel(context, server, trajectoryId, panel);
  }

  readonly #subscriptions: vscode.Disposable[] = [];
  #detail: TrajectoryDetail | null = null;
  #ready = false;
  #loadGeneration = 0;

  private constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly server: ServerClient,
    private trajectoryId: number,
    readonly panel: vscode.WebviewPanel,
    reopened = false,
  ) {
    InspectorPanel.#open.set(trajectoryId, this);
    loadBundle(panel, context, 'inspector', `Trajectory #${trajectoryId}`, reopened ? undefined : () => this.#reopen());
    this.#subscriptions.push(
      onWebviewMessage(panel, inspectorToHostSchema, `inspector #${trajectoryId} → host`, (m) => this.#onMessage(m)),
      followConnection(server, {
        post: (m) => this.#post(m),
        // A load that failed for want of a server is retried when one connects.
        changed: (client) => {
          if (client && this.#ready && !this.#detail) void this.#load();
        },
      }),
      panel.onDidChangeViewState(() => {
        // The webview reloads when shown again and says `ready` then.
        if (!panel.visible) this.#ready = false;
      }),
      panel.onDidDispose(() => this.#dispose()),
    );
  }

  /** Shows another trajectory in this panel; a load still in flight for the old one is dropped. */
  #retarget(trajectoryId: number): void {
    InspectorPanel.#open.delete(this.trajectoryId);
    this.trajectoryId = trajectoryId;
    InspectorPanel.#open.set(trajectoryId, this);
    this.#detail = null;
    this.#loadGeneration++;
    this.panel.title = `Trajectory #${trajectoryId}`;
    // A hidden webview reloads when revealed and says `ready`, which loads the new trajectory.
    if (this.#ready) void this.#load();
  }

  #post(m: HostToInspector): void {
    if (this.panel.visible) void this.panel.webview.postMessage(m);
  }

  async #onMessage(m: InspectorToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        this.#ready = true;
        await this.#load();
        return;
      case 'openTrajectory':
        InspectorPanel.show(this.context, this.server, m.trajectoryId);
        return;
      case 'compareWith':
        try {
          await vscode.commands.executeCommand(COMPARE_TRAJECTORIES_COMMAND, m.trajectoryId, ...(m.otherId !== undefined ? [m.otherId] : []));
        } catch (e) {
          this.#post({ type: 'error', message: `Could not compare: ${errorText(e)}` });
        }
        return;
      case 'log':
        logFromWebview(`inspector #${this.trajectoryId}`, m.level, m.message);
        return;
    }
  }

  /** Sends the trajectory, then the same task at other steps (a second, cheaper request the page does not wait for). */
  async #load(): Promise<void> {
    const generation = ++this.#loadGeneration;
    const client = this.server.client;
    if (!client) {
      this.#post({ type: 'connection', connected: false });
      return;
    }
    this.#post({ type: 'loading', trajectoryId: this.trajectoryId });
    let detail: TrajectoryDetail;
    try {
      detail = (await client.request('trajectory/get', { trajectoryId: this.trajectoryId })).trajectory;
    } catch (e) {
      if (generation === this.#loadGeneration) this.#post({ type: 'error', message: `Could not load trajectory #${this.trajectoryId}: ${errorText(e)}` });
      return;
    }
    if (generation !== this.#loadGeneration) return;
    this.#detail = detail;
    const t = detail.trajectory;
    this.panel.title = `Trajectory #${t.id} · step ${t.step}`;
    this.#post({ type: 'trajectory', detail });
    try {
      const { trajectories } = await client.request('trajectories/forTask', { runId: t.runId, envSeed: t.envSeed, phase: t.phase });
      if (generation === this.#loadGeneration) this.#post({ type: 'taskHistory', envSeed: t.envSeed, phase: t.phase, trajectories });
    } catch (e) {
      panelLog().warn(`inspector #${this.trajectoryId}: the task's history could not be loaded: ${errorText(e)}`);
    }
  }

  /** Replaces this panel with a new one on the same trajectory, in the same place (its page did not start: `loadBundle`). */
  #reopen(): void {
    const reusable = InspectorPanel.#reusable === this;
    const created = new InspectorPanel(this.context, this.server, this.trajectoryId, replacePanel(this.panel, INSPECTOR_VIEW_TYPE, this.context), true);
    if (reusable) InspectorPanel.#reusable = created;
  }

  #dispose(): void {
    // A reopened panel may already hold the trajectory's entry.
    if (InspectorPanel.#open.get(this.trajectoryId) === this) InspectorPanel.#open.delete(this.trajectoryId);
    if (InspectorPanel.#reusable === this) InspectorPanel.#reusable = undefined;
    for (const d of this.#subscriptions) d.dispose();
    this.#loadGeneration++;
  }
}

/** Restores inspectors after a reload (their webview state holds the trajectory id). Call once on activation. */
export function registerInspectorSerializer(context: vscode.ExtensionContext, server: ServerClient): void {
  registerPanelSerializer(context, INSPECTOR_VIEW_TYPE, 'inspector', inspectorStateSchema, 'a trajectory id', (panel, state) => InspectorPanel.restore(context, server, panel, state.trajectoryId));
}
