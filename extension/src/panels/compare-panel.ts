/**
 * The run comparison panel: several runs' metrics overlaid, a chart per metric with a line per run
 * (webview/src/compare). One panel; comparing another set of runs replaces its runs. On `ready` it
 * loads each run's summary and history (`run/get`, `metrics/query`; a run that cannot be read is
 * shown as such, the others still are), then forwards the runs' committed steps and state changes.
 * Panels come back after a reload through the serializer, from the webview state (run ids).
 */
import * as vscode from 'vscode';
import type { Disposable as RpcDisposable, RpcClient } from '../../../server/protocol/rpc-client.ts';
import { runSummarySchema } from '../../../server/protocol/trajectory.ts';
import { compareStateSchema, compareToHostSchema, type CompareToHost, type HostToCompare } from '../../../webview/src/messages.ts';
import type { ServerClient } from '../server-client.ts';
import { followConnection } from './connection-follower.ts';
import { errorText, loadBundle, logFromWebview, onWebviewMessage, panelLog, registerPanelSerializer, replacePanel, webviewOptions } from './panel-support.ts';

/** The webview panel type; activation (`onWebviewPanel:troupe.compare`) must name it. */
export const COMPARE_VIEW_TYPE = 'troupe.compare';

/** The most runs one comparison overlays (the message schema's bound; the palette has 6 colours). */
export const COMPARE_MAX_RUNS = 50;

/** How the Runs view labels a run (names repeat across runs of one config). */
export type RunLabeller = (runId: string) => string;

type Progress = Extract<HostToCompare, { type: 'progress' }>;

export class ComparePanel {
  static #current: ComparePanel | undefined;

  /** Compares `runIds` (in this order), in the open comparison if there is one. */
  static show(context: vscode.ExtensionContext, server: ServerClient, runIds: readonly string[], labelOf: RunLabeller): void {
    const ids = [...new Set(runIds)].slice(0, COMPARE_MAX_RUNS);
    const open = ComparePanel.#current;
    if (open) {
      open.#setRuns(ids);
      open.panel.reveal();
      return;
    }
    const panel = vscode.window.createWebviewPanel(COMPARE_VIEW_TYPE, titleOf(ids), vscode.ViewColumn.Active, webviewOptions(context));
    new ComparePanel(context, server, ids, panel, labelOf);
  }

  /** Adopts a panel VS Code restored after a reload. */
  static restore(context: vscode.ExtensionContext, server: ServerClient, panel: vscode.WebviewPanel, runIds: readonly string[], labelOf: RunLabeller): void {
    if (ComparePanel.#current) {
      panel.dispose();
      return;
    }
    new ComparePanel(context, server, runIds, panel, labelOf);
  }

  readonly #subscriptions: vscode.Disposable[] = [];
  #runIds: readonly string[];
  /** Steps that arrived while the histories were loading: sent after them. */
  #pending: Progress[] | null = null;
  #loadGeneration = 0;

  private constructor(
    context: vscode.ExtensionContext,
    private readonly server: ServerClient,
    runIds: readonly string[],
    readonly panel: vscode.WebviewPanel,
    private readonly labelOf: RunLabeller,
    reopened = false,
  ) {
    ComparePanel.#current = this;
    this.#runIds = runIds;
    loadBundle(panel, context, 'compare', 'Troupe: compare runs', reopened ? undefined : () => this.#reopen(context));
    this.#subscriptions.push(
      onWebviewMessage(panel, compareToHostSchema, 'compare → host', (m) => this.#onMessage(m)),
      followConnection(server, {
        post: (m) => this.#post(m),
        listen: (client) => this.#listen(client),
        // Steps committed while disconnected: load everything again.
        changed: (client) => {
          if (client) void this.#load();
        },
      }),
      panel.onDidDispose(() => this.#dispose()),
    );
  }

  #post(m: HostToCompare): void {
    if (this.panel.visible) void this.panel.webview.postMessage(m);
  }

  async #onMessage(m: CompareToHost): Promise<void> {
    if (m.type === 'ready') await this.#load();
    else logFromWebview('compare', m.level, m.message);
  }

  #setRuns(runIds: readonly string[]): void {
    this.#runIds = runIds;
    this.panel.title = titleOf(runIds);
    void this.#load();
  }

  /** Forwards the compared runs' steps and state changes. */
  #listen(client: RpcClient): RpcDisposable[] {
    return [
      client.onNotification('run/didProgress', (p) => {
        if (!this.#runIds.includes(p.runId)) return;
        const progress: Progress = { type: 'progress', runId: p.runId, step: p.step, metrics: p.metrics };
        if (this.#pending) this.#pending.push(progress);
        else this.#post(progress);
      }),
      client.onNotification('run/didChangeState', (s) => {
        if (this.#runIds.includes(s.runId)) this.#post({ type: 'state', run: s.run, label: this.labelOf(s.runId) });
      }),
    ];
  }

  /** Sends every run with its history (`init`), then the steps that arrived meanwhile. */
  async #load(): Promise<void> {
    const generation = ++this.#loadGeneration;
    this.#pending = [];
    const client = this.server.client;
    const runIds = this.#runIds;
    const runs = await Promise.all(
      runIds.map(async (runId) => {
        const label = this.labelOf(runId);
        if (!client) return { runId, label, run: null, series: [], error: 'the training server is not connected' };
        try {
          const [got, metrics] = await Promise.all([client.request('run/get', { runId }), client.request('metrics/query', { runId })]);
          return { runId, label, run: runSummarySchema.parse(got.run), series: metrics.series };
        } catch (e) {
          panelLog().warn(`compare: loading run ${runId} failed: ${errorText(e)}`);
          return { runId, label, run: null, series: [], error: errorText(e) };
        }
      }),
    );
    if (generation !== this.#loadGeneration) return;
    const pending = this.#pending ?? [];
    this.#pending = null;
    if (runs.length === 0) return;
    this.#post({ type: 'init', runs });
    this.#post({ type: 'connection', connected: client !== undefined });
    for (const p of pending) this.#post(p);
  }

  /** Replaces this panel with a new one on the same runs, in the same place (its page did not start: `loadBundle`). */
  #reopen(context: vscode.ExtensionContext): void {
    new ComparePanel(context, this.server, this.#runIds, replacePanel(this.panel, COMPARE_VIEW_TYPE, context), this.labelOf, true);
  }

  #dispose(): void {
    if (ComparePanel.#current === this) ComparePanel.#current = undefined;
    for (const d of this.#subscriptions) d.dispose();
    this.#loadGeneration++;
  }
}

function titleOf(runIds: readonly string[]): string {
  return `Troupe: compare ${runIds.length} runs`;
}

/** Restores the comparison after a reload (its webview state holds the run ids). Call once on activation. */
export function registerCompareSerializer(context: vscode.ExtensionContext, server: ServerClient, labelOf: RunLabeller): void {
  registerPanelSerializer(context, COMPARE_VIEW_TYPE, 'compare', compareStateSchema, 'run ids', (panel, state) => ComparePanel.restore(context, server, panel, state.runIds, labelOf));
}
