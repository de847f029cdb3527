/**
 * The Runs view: runs (live state, step, success) → their committed steps, newest first → the
 * step's trajectories, a page at a time, filtered by agent, outcome and reward (the filter shows
 * in the view's description). Clicking a trajectory opens it (`troupe.openTrajectory`).
 *
 * Committed steps never change, so a step's loaded trajectory pages are kept until the filter
 * changes or the connection does; a run's step list is re-read whenever the run reports progress.
 */
import * as vscode from 'vscode';
import type { StepSummary, TrajectorySummary } from '../../server/protocol/trajectory.ts';
import { describeConnection } from './connection-state.ts';
import { commandIds, internalCommandIds, runsViewId } from './contributions.ts';
import { userMessage } from './error-text.ts';
import {
  describeFilter,
  describeRun,
  describeStep,
  describeTrajectory,
  runContextValue,
  runIcon,
  runTooltip,
  stepLabel,
  trajectoryLabel,
  type TrajectoryFilter,
} from './run-format.ts';
import type { RunsModel } from './runs-model.ts';
import type { ServerConnection } from './server-connection.ts';

/** Trajectories fetched per page. */
export const TRAJECTORY_PAGE_SIZE = 200;

export interface RunNode {
  readonly kind: 'run';
  readonly runId: string;
}
export interface StepNode {
  readonly kind: 'step';
  readonly runId: string;
  step: StepSummary;
}
export interface TrajectoryNode {
  readonly kind: 'trajectory';
  readonly runId: string;
  readonly trajectory: TrajectorySummary;
}
export interface MoreNode {
  readonly kind: 'more';
  readonly parent: StepNode;
}
export interface MessageNode {
  readonly kind: 'message';
  readonly text: string;
  readonly icon?: string;
}
/** A row that runs a command (the not-running state's way out). */
export interface ActionNode {
  readonly kind: 'action';
  readonly label: string;
  readonly command: string;
  readonly icon: string;
}
export type RunsNode = RunNode | StepNode | TrajectoryNode | MoreNode | MessageNode | ActionNode;

interface Page {
  readonly items: TrajectoryNode[];
  done: boolean;
  /** The fetch in flight: a refresh waits for it rather than showing a page still loading, and
   * "Load more" does not start a second fetch of the same offset (duplicate tree ids). */
  loading: Promise<void> | undefined;
}

export class RunsTree implements vscode.TreeDataProvider<RunsNode>, vscode.Disposable {
  private readonly changeEmitter = new vscode.EventEmitter<RunsNode | undefined>();
  readonly onDidChangeTreeData = this.changeEmitter.event;
  readonly view: vscode.TreeView<RunsNode>;
  private filterValue: TrajectoryFilter = {};
  /** Nodes are kept per id so a refresh of one run or step can name the same object. */
  private readonly runNodes = new Map<string, RunNode>();
  private readonly stepNodes = new Map<string, StepNode>();
  private readonly pages = new Map<string, Page>();
  private readonly disposables: vscode.Disposable[] = [this.changeEmitter];

  constructor(
    private readonly runs: RunsModel,
    private readonly server: ServerConnection,
  ) {
    this.view = vscode.window.createTreeView(runsViewId, { treeDataProvider: this, showCollapseAll: true, canSelectMany: true });
    const changes = runs.onDidChange((runId) => {
      const node = runId === undefined ? undefined : this.runNodes.get(runId);
      if (node === undefined) this.updateMessage();
      this.changeEmitter.fire(node);
    });
    this.disposables.push(
      this.view,
      { dispose: () => changes.dispose() },
      server.onDidChangeConnection(() => this.clearCaches()),
      server.onDidChangeState(() => {
        this.updateMessage();
        // The root shows the connection's trouble when there is no run list to show.
        if (!this.runs.connected) this.changeEmitter.fire(undefined);
      }),
      vscode.commands.registerCommand(internalCommandIds.loadMoreTrajectories, (node: MoreNode) => this.loadMore(node.parent)),
    );
    this.updateMessage();
  }

  get filter(): TrajectoryFilter {
    return this.filterValue;
  }

  set filter(f: TrajectoryFilter) {
    this.filterValue = f;
    const text = describeFilter(f);
    this.view.description = text === '' ? '' : `filter: ${text}`;
    this.pages.clear();
    this.changeEmitter.fire(undefined);
  }

  /** Forgets cached steps and pages and redraws everything. */
  clearCaches(): void {
    this.stepNodes.clear();
    this.pages.clear();
    this.changeEmitter.fire(undefined);
  }

  getTreeItem(node: RunsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'run': {
        const v = this.runs.get(node.runId);
        const item = new vscode.TreeItem(this.runs.labelOf(node.runId), vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `run/${node.runId}`;
        if (v) {
          // The tooltip is left to resolveTreeItem, so it is written when it is shown.
          item.description = describeRun(v);
          item.iconPath = new vscode.ThemeIcon(runIcon(v));
          item.contextValue = runContextValue(v.summary.state);
        }
        return item;
      }
      case 'step': {
        const item = new vscode.TreeItem(stepLabel(node.step.step), vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `step/${node.runId}/${node.step.step}`;
        item.description = describeStep(node.step);
        item.tooltip = `${node.step.turnCount} turns, ${node.step.promptTokenCount} prompt and ${node.step.responseTokenCount} response tokens`;
        item.iconPath = new vscode.ThemeIcon('milestone');
        item.contextValue = 'step';
        return item;
      }
      case 'trajectory': {
        const t = node.trajectory;
        const item = new vscode.TreeItem(trajectoryLabel(t), vscode.TreeItemCollapsibleState.None);
        item.id = `trajectory/${t.id}`;
        item.description = describeTrajectory(t);
        item.tooltip = `Trajectory ${t.id} (${t.envName}, step ${t.step}): click to open it`;
        item.iconPath = t.success ? new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed')) : new vscode.ThemeIcon('close', new vscode.ThemeColor('testing.iconFailed'));
        item.contextValue = 'trajectory';
        item.command = { command: commandIds.openTrajectory, title: 'Open Trajectory', arguments: [t.id] };
        return item;
      }
      case 'more': {
        const item = new vscode.TreeItem('Load more…', vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon('ellipsis');
        item.command = { command: internalCommandIds.loadMoreTrajectories, title: 'Load More', arguments: [node] };
        return item;
      }
      case 'message': {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon(node.icon ?? 'info');
        item.tooltip = node.text;
        return item;
      }
      case 'action': {
        const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon(node.icon);
        item.command = { command: node.command, title: node.label };
        return item;
      }
    }
  }

  /** A run's tooltip, written when the row is hovered (its durations are as of then). */
  resolveTreeItem(item: vscode.TreeItem, node: RunsNode): vscode.TreeItem {
    if (node.kind === 'run' && item.tooltip === undefined) {
      const v = this.runs.get(node.runId);
      if (v) item.tooltip = runTooltip(v);
    }
    return item;
  }

  async getChildren(node?: RunsNode): Promise<RunsNode[]> {
    if (node === undefined) {
      const known = this.runs.runs.map((v) => this.runNode(v.summary.id));
      if (this.runs.connected) return known;
      // VS Code shows welcome content only for an empty tree without a message, and welcome
      // content is static: so a reason (which varies) is shown as rows, with the ways out. An
      // untrusted workspace and a first connection in progress get the manifest's welcome content.
      // The runs last read stay listed under the rows, so a dead server does not take them away.
      const s = this.server.state;
      if (s.kind === 'notRunning' && vscode.workspace.isTrusted) {
        return [
          { kind: 'message', text: describeConnection(s), icon: 'warning' },
          { kind: 'action', label: 'Restart Server', command: commandIds.restartServer, icon: 'debug-restart' },
          { kind: 'action', label: 'Connect to Server…', command: commandIds.connect, icon: 'plug' },
          { kind: 'action', label: 'Show Server Output', command: commandIds.showServerOutput, icon: 'output' },
          ...known,
        ];
      }
      if (known.length === 0) return [];
      return [{ kind: 'message', text: `${describeConnection(s)}: the runs below are as last read`, icon: 'sync~spin' }, ...known];
    }
    try {
      if (node.kind === 'run') return await this.stepsOf(node.runId);
      if (node.kind === 'step') return await this.trajectoriesOf(node);
    } catch (e) {
      return [{ kind: 'message', text: `Could not read from the server: ${userMessage(e)}` }];
    }
    return [];
  }

  getParent(node: RunsNode): RunsNode | undefined {
    if (node.kind === 'step') return this.runNodes.get(node.runId);
    if (node.kind === 'trajectory') return this.stepNodes.get(`${node.runId}/${node.trajectory.step}`);
    if (node.kind === 'more') return node.parent;
    return undefined;
  }

  /** The run node for an id (for reveal). */
  runNode(runId: string): RunNode {
    let n = this.runNodes.get(runId);
    if (!n) this.runNodes.set(runId, (n = { kind: 'run', runId }));
    return n;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }

  /** A message hides the welcome content, so it is used only for a run list that failed to load. */
  private updateMessage(): void {
    this.view.message = this.server.state.kind === 'connected' ? (this.runs.error ?? '') : '';
  }

  private async stepsOf(runId: string): Promise<RunsNode[]> {
    const { steps } = await this.server.require().request('steps/list', { runId, limit: 10_000 });
    if (steps.length === 0) return [{ kind: 'message', text: 'No committed steps yet' }];
    return [...steps].reverse().map((step) => {
      const key = `${runId}/${step.step}`;
      const old = this.stepNodes.get(key);
      if (old) {
        old.step = step;
        return old;
      }
      const node: StepNode = { kind: 'step', runId, step };
      this.stepNodes.set(key, node);
      return node;
    });
  }

  private async trajectoriesOf(node: StepNode): Promise<RunsNode[]> {
    const key = `${node.runId}/${node.step.step}`;
    let page = this.pages.get(key);
    if (!page) {
      const fresh: Page = { items: [], done: false, loading: undefined };
      this.pages.set(key, fresh);
      // A failed first page is not kept, so the next expansion or refresh asks again.
      this.fetchPage(node, fresh).catch(() => {
        if (this.pages.get(key) === fresh) this.pages.delete(key);
      });
      page = fresh;
    }
    try {
      await page.loading;
    } catch (e) {
      // A failed "Load more" leaves the trajectories already loaded to show.
      if (page.items.length === 0) throw e;
    }
    if (page.items.length === 0) return [{ kind: 'message', text: describeFilter(this.filterValue) === '' ? 'No trajectories' : 'No trajectories match the filter' }];
    return page.done ? page.items : [...page.items, { kind: 'more', parent: node }];
  }

  /** Fetches the page's next trajectories, or returns the fetch already in flight. */
  private fetchPage(node: StepNode, page: Page): Promise<void> {
    if (page.loading) return page.loading;
    const loading = this.requestPage(node, page);
    page.loading = loading;
    const settle = (): void => {
      if (page.loading === loading) page.loading = undefined;
    };
    loading.then(settle, settle);
    return loading;
  }

  private async requestPage(node: StepNode, page: Page): Promise<void> {
    const { trajectories } = await this.server.require().request('trajectories/query', {
      runId: node.runId,
      step: node.step.step,
      ...this.filterValue,
      limit: TRAJECTORY_PAGE_SIZE,
      offset: page.items.length,
    });
    page.items.push(...trajectories.map((trajectory): TrajectoryNode => ({ kind: 'trajectory', runId: node.runId, trajectory })));
    page.done = trajectories.length < TRAJECTORY_PAGE_SIZE;
  }

  private async loadMore(node: StepNode): Promise<void> {
    const page = this.pages.get(`${node.runId}/${node.step.step}`);
    if (!page || page.done || page.loading) return;
    try {
      await this.fetchPage(node, page);
    } catch (e) {
      void vscode.window.showErrorMessage(`Troupe: could not load more trajectories: ${userMessage(e)}`);
    }
    this.changeEmitter.fire(node);
  }
}
