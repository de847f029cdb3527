/**
 * The dashboard panel of one run: loads the run's metric history (`metrics/query`) and, while it
 * warms up, its warm-up so far (`run/get`) when the webview says `ready`, then forwards the run's
 * `run/didWarmUp`, `run/didProgress` and `run/didChangeState`. One
 * panel per run (showing it again reveals it). After a reconnection the notifications are
 * subscribed on the new client and the steps committed meanwhile are fetched; a webview that
 * notices a step gap asks for it (`requestSeries`). Panels come back after a reload through the
 * serializer, from the webview state (run id).
 */
import * as vscode from 'vscode';
import type { Disposable as RpcDisposable, RpcClient } from '../../../server/protocol/rpc-client.ts';
import type { RequestResult } from '../../../server/protocol/methods.ts';
import { runSummarySchema, type RunSummary } from '../../../server/protocol/trajectory.ts';
import { dashboardStateSchema, dashboardToHostSchema, type DashboardToHost, type HostToDashboard } from '../../../webview/src/messages.ts';
import type { ServerClient } from '../server-client.ts';
import { followConnection } from './connection-follower.ts';
import { errorText, loadBundle, logFromWebview, onWebviewMessage, panelLog, registerPanelSerializer, replacePanel, webviewOptions } from './panel-support.ts';

/** The webview panel type; `contributes`/activation (`onWebviewPanel:troupe.dashboard`) must name it. */
export const DASHBOARD_VIEW_TYPE = 'troupe.dashboard';

type Progress = Extract<HostToDashboard, { type: 'progress' | 'warmUp' }>;

export class DashboardPanel {
  static readonly #open = new Map<string, DashboardPanel>();

  /** Opens the dashboard of a run, or reveals it when it is already open. */
  static show(context: vscode.ExtensionContext, server: ServerClient, runId: string): void {
    const open = DashboardPanel.#open.get(runId);
    if (open) {
      open.panel.reveal();
      return;
    }
    const panel = vscode.window.createWebviewPanel(DASHBOARD_VIEW_TYPE, `Troupe: ${runId}`, vscode.ViewColumn.Active, webviewOptions(context));
    new DashboardPanel(context, server, runId, panel);
  }

  /** Adopts a panel VS Code restored after a reload. */
  static restore(context: vscode.ExtensionContext, server: ServerClient, panel: vscode.WebviewPanel, runId: string): void {
    const open = DashboardPanel.#open.get(runId);
    if (open) {
      // Two restored panels for one run: keep the first.
      panel.dispose();
      open.panel.reveal();
      return;
    }
    new DashboardPanel(context, server, runId, panel);
  }

  readonly #subscriptions: vscode.Disposable[] = [];
  /** Highest step sent to the webview; -1 before any. */
  #lastStep = -1;
  /** Progress (steps and warm-up) that arrived while the history was loading: sent after it. */
  #pending: Progress[] | null = null;
  /** Increases with every history load, so a slow one cannot overwrite a newer one. */
  #loadGeneration = 0;

  private constructor(
    context: vscode.ExtensionContext,
    private readonly server: ServerClient,
    readonly runId: string,
    readonly panel: vscode.WebviewPanel,
    reopened = false,
  ) {
    DashboardPanel.#open.set(runId, this);
    loadBundle(panel, context, 'dashboard', `Troupe dashboard: ${runId}`, reopened ? undefined : () => this.#reopen(context));
    this.#subscriptions.push(
      onWebviewMessage(panel, dashboardToHostSchema, `dashboard ${runId} → host`, (m) => this.#onMessage(m)),
      followConnection(server, {
        post: (m) => this.#post(m),
        listen: (client) => this.#listen(client),
        changed: (client) => {
          if (client) this.#catchUp();
        },
      }),
      panel.onDidDispose(() => this.#dispose()),
    );
  }

  #post(m: HostToDashboard): void {
    // A hidden webview is discarded (retainContextWhenHidden is off) and reloads with `ready`.
    if (this.panel.visible) void this.panel.webview.postMessage(m);
  }

  async #onMessage(m: DashboardToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        await this.#loadHistory();
        return;
      case 'requestSeries':
        await this.#fetchSince(m.fromStep);
        return;
      case 'log':
        logFromWebview(`dashboard ${this.runId}`, m.level, m.message);
        return;
    }
  }

  /** Forwards the run's warm-up, steps and state changes. */
  #listen(client: RpcClient): RpcDisposable[] {
    return [
      client.onNotification('run/didProgress', (p) => {
        if (p.runId !== this.runId) return;
        const { runId: _, ...rest } = p;
        this.#onProgress({ type: 'progress', ...rest });
      }),
      client.onNotification('run/didWarmUp', (w) => {
        if (w.runId !== this.runId) return;
        const { runId: _, ...rest } = w;
        // Points both run/get and a report hold are merged by step.
        this.#onProgress({ type: 'warmUp', ...rest });
      }),
      client.onNotification('run/didChangeState', (s) => {
        if (s.runId !== this.runId) return;
        this.#setTitle(s.run);
        this.#post({ type: 'state', run: s.run });
      }),
    ];
  }

  /** After a reconnection: fetches what was committed meanwhile. */
  #catchUp(): void {
    // A history load still in flight asked the old connection, which will not answer: load again
    // (the new load's generation drops the old one's result).
    if (this.#pending !== null) void this.#loadHistory();
    else void this.#fetchSince(this.#lastStep + 1, true);
  }

  #onProgress(p: Progress): void {
    if (this.#pending) {
      this.#pending.push(p);
      return;
    }
    if (p.type === 'progress') this.#lastStep = Math.max(this.#lastStep, p.step);
    this.#post(p);
  }

  /** Sends the run and its whole history (`init`), then any progress that arrived meanwhile. */
  async #loadHistory(): Promise<void> {
    const generation = ++this.#loadGeneration;
    this.#pending = [];
    const client = this.server.client;
    let run: RunSummary | null = null;
    let steps: number | null = null;
    let series: RequestResult<'metrics/query'>['series'] = [];
    let warmUp: RequestResult<'run/get'>['warmUp'] | null = null;
    let failure: string | null = null;
    if (client) {
      const [got, metrics] = await Promise.allSettled([client.request('run/get', { runId: this.runId }), client.request('metrics/query', { runId: this.runId })]);
      if (got.status === 'fulfilled') {
        // The summary only: the config stays on this side.
        run = runSummarySchema.parse(got.value.run);
        steps = run.targetSteps ?? targetSteps(got.value.run.config);
        warmUp = got.value.warmUp ?? null;
      } else failure = errorText(got.reason);
      if (metrics.status === 'fulfilled') series = metrics.value.series;
      else failure = errorText(metrics.reason);
    }
    if (generation !== this.#loadGeneration) return;
    const pending = this.#pending ?? [];
    this.#pending = null;
    this.#lastStep = series.reduce((m, s) => Math.max(m, s.points.at(-1)?.step ?? -1), -1);
    if (run) this.#setTitle(run);
    this.#post({ type: 'init', runId: this.runId, run, steps, series, warmUp });
    this.#post({ type: 'connection', connected: client !== undefined });
    if (failure !== null) this.#post({ type: 'error', message: `Could not load run ${this.runId}: ${failure}` });
    for (const p of pending) this.#onProgress(p);
  }

  /** Sends the points from `fromStep` on (a gap the webview saw, or steps missed while disconnected). */
  async #fetchSince(fromStep: number, withState = false): Promise<void> {
    const client = this.server.client;
    if (!client) return;
    try {
      const [{ series }, got] = await Promise.all([
        client.request('metrics/query', { runId: this.runId, fromStep }),
        withState ? client.request('run/get', { runId: this.runId }) : Promise.resolve(null),
      ]);
      if (got) this.#post({ type: 'state', run: runSummarySchema.parse(got.run) });
      if (series.some((s) => s.points.length > 0)) {
        this.#lastStep = Math.max(this.#lastStep, ...series.map((s) => s.points.at(-1)?.step ?? -1));
        this.#post({ type: 'series', series });
      }
    } catch (e) {
      panelLog().warn(`dashboard ${this.runId}: fetching steps from ${fromStep} failed: ${errorText(e)}`);
    }
  }

  #setTitle(run: RunSummary): void {
    this.panel.title = `Troupe: ${run.name || run.id}`;
  }

  /** Replaces this panel with a new one on the same run, in the same place (its page did not start: `loadBundle`). */
  #reopen(context: vscode.ExtensionContext): void {
    new DashboardPanel(context, this.server, this.runId, replacePanel(this.panel, DASHBOARD_VIEW_TYPE, context), true);
  }

  #dispose(): void {
    // A reopened panel may already hold the run's entry.
    if (DashboardPanel.#open.get(this.runId) === this) DashboardPanel.#open.delete(this.runId);
    for (const d of this.#subscriptions) d.dispose();
    this.#loadGeneration++;
  }
}

/** The target step from a run's config (`training.steps`), for a server whose summary has none; the config itself is not parsed here. */
function targetSteps(config: unknown): number | null {
  if (typeof config !== 'object' || config === null) return null;
  const training = (config as { training?: unknown }).training;
  if (typeof training !== 'object' || training === null) return null;
  const steps = (training as { steps?: unknown }).steps;
  return typeof steps === 'number' && Number.isInteger(steps) && steps > 0 ? steps : null;
}

/** Restores dashboards after a reload (their webview state holds the run id). Call once on activation. */
export function registerDashboardSerializer(context: vscode.ExtensionContext, server: ServerClient): void {
  registerPanelSerializer(context, DASHBOARD_VIEW_TYPE, 'dashboard', dashboardStateSchema, 'a run id', (panel, state) => DashboardPanel.restore(context, server, panel, state.runId));
}
