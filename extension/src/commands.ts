/**
 * Every Troupe command. Commands invoked on a tree item act on it; from the palette they use the
 * Runs view's selection where that makes sense, else ask with a quick pick. Failures end in one
 * error message naming what went wrong, never in a silent no-op.
 */
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import * as vscode from 'vscode';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { RpcResponseError, type RpcClient } from '../../server/protocol/rpc-client.ts';
import type { TrajectorySummary } from '../../server/protocol/trajectory.ts';
import { bestStep, OutcomeSeries } from '../../webview/src/run-outcome.ts';
import { formatInvalidConfig, issueOffset, parseInvalidConfigData } from './config-issues.ts';
import { describeConnection } from './connection-state.ts';
import { userMessage } from './error-text.ts';
import { commandIds, runsViewId } from './contributions.ts';
import {
  canRun,
  compareChoices,
  exportFolderName,
  formatRewardRange,
  parseRewardRange,
  runActions,
  soleRunFor,
  updateFilter,
  type ExportCheckpoint,
  type FilterPatch,
  type RunAction,
} from './run-format.ts';
import type { RunsModel } from './runs-model.ts';
import type { RunsNode, RunsTree } from './runs-tree.ts';
import { pickConfigFile, pickRun, pickRuns, pickSameTask, pickTrajectory, pickTrajectoryOfRun } from './quick-picks.ts';
import type { ServerConnection } from './server-connection.ts';
import { normalizeServerUrl } from './server-discovery.ts';
import type { ServerProcess } from './server-process.ts';
import type { TrajectoryFeatures } from './trajectories/trajectory-features.ts';

export interface CommandContext {
  readonly server: ServerConnection;
  readonly serverProcess: ServerProcess;
  readonly runs: RunsModel;
  readonly tree: RunsTree;
  readonly output: vscode.OutputChannel;
  readonly trajectories: TrajectoryFeatures;
  readonly showDashboard: (runId: string) => void;
  readonly showInspector: (trajectoryId: number) => void;
  /** Opens the run comparison on these runs (in this order). */
  readonly showComparison: (runIds: readonly string[]) => void;
}

/** An error as the notification shows it (the output channel keeps the whole text). */
const message = userMessage;

/** Runs that no worker trains: what Delete Run offers (the server refuses the others). */
const deletableStates = ['done', 'failed', 'paused'] as const;

/** The run a command argument names: a run id, or any node of a run in the tree. */
function runIdOf(arg: unknown): string | undefined {
  if (typeof arg === 'string') return arg;
  const node = arg as Partial<RunsNode> | undefined;
  return node && (node.kind === 'run' || node.kind === 'step' || node.kind === 'trajectory') ? node.runId : undefined;
}

/** The trajectory a command argument names: an id, or a trajectory node. */
function trajectoryOf(arg: unknown): TrajectorySummary | number | undefined {
  if (typeof arg === 'number' && Number.isInteger(arg) && arg > 0) return arg;
  const node = arg as Partial<RunsNode> | undefined;
  return node?.kind === 'trajectory' ? node.trajectory : undefined;
}

export function registerCommands(c: CommandContext): vscode.Disposable[] {
  /** Runs a command body; an error becomes one message, with the server log a click away. */
  const command = (id: string, title: string, body: (...args: unknown[]) => Promise<void>) =>
    vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        await body(...args);
      } catch (e) {
        c.output.appendLine(`[extension] ${title} failed: ${e instanceof Error ? e.message : String(e)}`);
        const choice = await vscode.window.showErrorMessage(`Troupe: ${title}: ${message(e)}`, 'Show Server Output');
        if (choice) c.output.show(true);
      }
    });

  /** The live client, connecting (and in a trusted workspace starting the server) first if needed. */
  const connected = async (): Promise<RpcClient> => {
    if (!c.server.client) {
      await vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'Troupe: connecting to the server' }, () => c.server.connect({ start: true }));
    }
    return c.server.require();
  };

  /** The run selected in the Runs view if it is visible and the action applies to it. */
  const selectedRun = (action: RunAction): string | undefined => {
    if (!c.tree.view.visible) return undefined;
    const node = c.tree.view.selection[0];
    const runId = runIdOf(node);
    const state = runId === undefined ? undefined : c.runs.get(runId)?.summary.state;
    return state !== undefined && canRun(action, state) ? runId : undefined;
  };

  const runAction = (action: RunAction, title: string, method: 'run/pause' | 'run/resume' | 'run/stop', doing: string) =>
    command(commandIds[action], title, async (arg) => {
      const client = await connected();
      // From the palette, Pause and Resume act on the only run they apply to; Stop always asks.
      const sole = action === 'stop' ? undefined : soleRunFor(action, c.runs.runs);
      const runId = runIdOf(arg) ?? selectedRun(action) ?? sole ?? (await pickRun(c.runs, { title, states: runActions[action] }))?.summary.id;
      if (runId === undefined) return;
      const { run } = await client.request(method, { runId });
      vscode.window.setStatusBarMessage(`Troupe: ${doing} ${run.name}`, 5000);
    });

  const reportInvalidConfig = async (uri: vscode.Uri, e: RpcResponseError) => {
    const issues = parseInvalidConfigData(e.data);
    const doc = await vscode.workspace.openTextDocument(uri);
    const first = issues?.[0];
    const at = doc.positionAt(first ? issueOffset(doc.getText(), first.segments) : 0);
    await vscode.window.showTextDocument(doc, { selection: new vscode.Range(at, at) });
    void vscode.window.showErrorMessage(`Troupe: ${issues ? formatInvalidConfig(basename(uri.fsPath), issues) : e.message}`);
  };

  const startTraining = async (arg: unknown) => {
    const uri = arg instanceof vscode.Uri ? arg : await pickConfigFile();
    if (!uri) return;
    const client = await connected();
    // The server reads the file from disk: what the user sees must be what trains.
    const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (open?.isDirty) await open.save();
    let run;
    try {
      ({ run } = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `Troupe: starting ${basename(uri.fsPath)}` }, () =>
        client.request('run/start', { configPath: uri.fsPath }),
      ));
    } catch (e) {
      if (e instanceof RpcResponseError && e.code === ErrorCodes.InvalidConfig) return reportInvalidConfig(uri, e);
      throw e;
    }
    await vscode.commands.executeCommand(`${runsViewId}.focus`);
    const choice = await vscode.window.showInformationMessage(`Troupe: started "${run.name}" (${run.state}).`, 'Open Dashboard');
    if (choice) c.showDashboard(run.id);
  };

  const openDashboard = async (arg: unknown) => {
    await connected();
    const runId = runIdOf(arg) ?? c.runs.activeRun()?.summary.id ?? (await pickRun(c.runs, { title: 'Open Dashboard' }))?.summary.id;
    if (runId !== undefined) c.showDashboard(runId);
  };

  /**
   * Compare Runs: on the rows selected in the Runs view (VS Code passes the clicked row and the
   * selection), or from the palette on the view's selection; with fewer than two runs so given, a
   * picker with checkboxes asks (the given one checked).
   */
  const compareRuns = async (arg: unknown, selection: unknown) => {
    await connected();
    const fromTree = Array.isArray(selection) && selection.length > 0 ? selection : arg !== undefined ? [arg] : c.tree.view.visible ? [...c.tree.view.selection] : [];
    let runIds = [...new Set(fromTree.map(runIdOf).filter((id): id is string => id !== undefined))];
    if (runIds.length < 2) {
      const picked = await pickRuns(c.runs, { title: 'Compare Runs', selected: runIds });
      if (picked === undefined || picked.length === 0) return;
      runIds = picked;
    }
    c.showComparison(runIds);
  };

  const openTrajectory = async (arg: unknown) => {
    const given = trajectoryOf(arg);
    const id = given === undefined ? (await pickTrajectoryOfRun(await connected(), c.runs, 'Open Trajectory'))?.id : typeof given === 'number' ? given : given.id;
    if (id === undefined) return;
    await c.trajectories.openTrajectory(id);
    c.showInspector(id);
  };

  const compareTrajectories = async (arg: unknown, second: unknown) => {
    // From the tree with two trajectories selected, VS Code passes (clicked, selection).
    const selected = Array.isArray(second) ? second.map(trajectoryOf).filter((t) => t !== undefined) : [];
    const idOf = (t: TrajectorySummary | number) => (typeof t === 'number' ? t : t.id);
    if (selected.length === 2) return c.trajectories.compareTrajectories(idOf(selected[0]!), idOf(selected[1]!));
    const a = trajectoryOf(arg);
    const b = trajectoryOf(second);
    if (a !== undefined && b !== undefined) return c.trajectories.compareTrajectories(idOf(a), idOf(b));

    const client = await connected();
    const title = 'Compare Trajectories';
    const first =
      a === undefined ? await pickTrajectoryOfRun(client, c.runs, title) : typeof a === 'number' ? (await client.request('trajectory/get', { trajectoryId: a })).trajectory.trajectory : a;
    if (!first) return;
    const mode = await vscode.window.showQuickPick(compareChoices(first), { title, placeHolder: 'Compare with' });
    if (!mode) return;
    const other = mode.value === 'step' ? await pickTrajectory(client, first.runId, first.step, { title, exclude: first.id }) : await pickSameTask(client, first, title);
    if (!other) return;
    // Earlier step on the left, as a diff reads "before → after".
    const [left, right] = other.step < first.step || (other.step === first.step && other.id < first.id) ? [other, first] : [first, other];
    await c.trajectories.compareTrajectories(left.id, right.id);
  };

  const exportAdapters = async (arg: unknown) => {
    const client = await connected();
    const runId = runIdOf(arg) ?? (await pickRun(c.runs, { title: 'Export Adapters' }))?.summary.id;
    if (runId === undefined) return;
    const runName = c.runs.get(runId)?.summary.name ?? runId;
    // The best validated step, read as the trainer picks it, so the pick says which step it is
    // (and when it is the warm start, that no RL step validated better).
    const validations = client.request('metrics/query', { runId, series: [{ name: 'val/success' }] }).then(({ series }) => new OutcomeSeries().addSeries(series).outcome().best);
    const checkpoints = Promise.all([client.request('checkpoints/list', { runId }), validations]).then(([{ checkpoints }, best]) => {
      const steps = [...new Set(checkpoints.map((k) => k.step))].sort((x, y) => y - x);
      return [
        { label: 'Latest checkpoint', value: 'latest' as ExportCheckpoint },
        { label: 'Best validation', description: best === null ? 'the validated step with the highest success' : bestStep(best), value: 'best' as ExportCheckpoint },
        { label: 'Warm start', description: 'step 0, before RL', value: 'initial' as ExportCheckpoint },
        ...steps.filter((s) => s > 0).map((s) => ({ label: `Step ${s}`, value: s as ExportCheckpoint })),
      ];
    });
    const checkpoint = (await vscode.window.showQuickPick(checkpoints, { title: `Export Adapters of ${runName}`, placeHolder: 'Checkpoint' }))?.value;
    if (checkpoint === undefined) return;
    const [folder] =
      (await vscode.window.showOpenDialog({
        canSelectFolders: true,
        canSelectFiles: false,
        canSelectMany: false,
        openLabel: 'Export Here',
        title: 'Folder to export into',
        // The server writes only inside its workspace (or folders it was started with --allow-path),
        // so the dialog opens there.
        ...(vscode.workspace.workspaceFolders?.[0] ? { defaultUri: vscode.workspace.workspaceFolders[0].uri } : {}),
      })) ?? [];
    if (!folder) return;
    // The server writes only into a new or empty folder; a non-empty choice gets a subfolder.
    const empty = (await readdir(folder.fsPath).catch(() => [])).length === 0;
    const outDir = empty ? folder.fsPath : join(folder.fsPath, exportFolderName(runName, checkpoint));
    const abort = new AbortController();
    const exported = vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Troupe: exporting ${runName}`, cancellable: true },
      async (progress, cancel) => {
        const workDoneToken = `export-${randomUUID()}`;
        const onCancel = cancel.onCancellationRequested(() => abort.abort());
        let reported = 0;
        const onProgress = client.onNotification('$/progress', (p) => {
          if (p.token !== workDoneToken || p.value.kind === 'end') return;
          const { message: text, percentage } = p.value;
          const increment = percentage === undefined ? undefined : percentage - reported;
          if (percentage !== undefined) reported = percentage;
          progress.report({ ...(text !== undefined ? { message: text } : {}), ...(increment !== undefined ? { increment } : {}) });
        });
        try {
          return await client.request('adapters/export', { runId, outDir, checkpoint, workDoneToken }, { signal: abort.signal });
        } finally {
          onProgress.dispose();
          onCancel.dispose();
        }
      },
    );
    let result: Awaited<typeof exported>;
    try {
      result = await exported;
    } catch (e) {
      // The server answers a stopped export with RequestCancelled (and removes what it wrote); any
      // other failure after the user cancelled is part of the cancelling too.
      if (!abort.signal.aborted && !(e instanceof RpcResponseError && e.code === ErrorCodes.RequestCancelled)) throw e;
      void vscode.window.showInformationMessage('Troupe: Export cancelled.');
      return;
    }
    const which = checkpoint === 'best' && result.step === 0 ? ' (the warm start: its validation was the best, no RL step beat it)' : '';
    const choice = await vscode.window.showInformationMessage(`Troupe: exported step ${result.step}${which} of ${runName} (${result.files.length} files) to ${result.outDir}.`, 'Reveal');
    if (choice) await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(result.outDir));
  };

  const connect = async (urlArg: unknown, tokenFileArg: unknown) => {
    if (typeof urlArg === 'string' && typeof tokenFileArg === 'string') {
      c.serverProcess.setSessionEndpoint({ url: urlArg, tokenFile: tokenFileArg });
      await c.server.reconnect({ start: false });
    } else {
      const choice = await vscode.window.showQuickPick(
        [
          { label: "$(server-process) Use this workspace's server", detail: 'The server in .troupe/server.json, or start troupe serve (trusted workspaces only)', value: 'workspace' as const },
          { label: '$(plug) Connect to a server URL…', detail: 'A server started elsewhere: its ws:// URL and its token file', value: 'url' as const },
          { label: '$(output) Show Server Output', value: 'output' as const },
        ],
        { title: 'Connect to Server', placeHolder: describeConnection(c.server.state) },
      );
      if (!choice) return;
      if (choice.value === 'output') return c.output.show();
      if (choice.value === 'workspace') {
        c.serverProcess.setSessionEndpoint(undefined);
        await c.server.reconnect({ start: true });
      } else {
        const url = await vscode.window.showInputBox({
          title: 'Connect to Server',
          prompt: 'WebSocket URL of a running troupe serve',
          placeHolder: 'ws://127.0.0.1:PORT',
          validateInput: (v) => {
            const n = normalizeServerUrl(v);
            return n.ok ? undefined : n.reason;
          },
        });
        if (url === undefined) return;
        const [tokenFile] = (await vscode.window.showOpenDialog({ canSelectFiles: true, canSelectFolders: false, canSelectMany: false, title: "The server's token file (.troupe/server.token)", openLabel: 'Use Token' })) ?? [];
        if (!tokenFile) return;
        c.serverProcess.setSessionEndpoint({ url, tokenFile: tokenFile.fsPath });
        await c.server.reconnect({ start: false });
      }
    }
    const state = c.server.state;
    if (state.kind === 'connected') void vscode.window.showInformationMessage(`Troupe: ${describeConnection(state)}.`);
    else throw new Error(describeConnection(state));
  };

  /**
   * Restart Server: the workspace's server again, started anew if need be. A server this window
   * started is stopped first (its live runs pause at their step boundary and resume later); one
   * that died (killed, crashed) is simply started again. An address given by hand is forgotten.
   */
  const restartServer = async () => {
    await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: 'Troupe: restarting the server' }, async () => {
      await c.serverProcess.stopStartedServerAndWait();
      c.serverProcess.setSessionEndpoint(undefined);
      await c.server.reconnect({ start: true });
    });
    const state = c.server.state;
    if (state.kind !== 'connected') throw new Error(describeConnection(state));
    void vscode.window.showInformationMessage(`Troupe: ${describeConnection(state)}.`);
  };

  const filterTrajectories = async () => {
    const f = c.tree.filter;
    const range = formatRewardRange(f);
    const field = await vscode.window.showQuickPick(
      [
        { label: 'Agent', description: f.agentId ?? 'any', value: 'agent' as const },
        { label: 'Outcome', description: f.success === undefined ? 'any' : f.success ? 'solved' : 'failed', value: 'success' as const },
        { label: 'Team reward', description: range === '' ? 'any' : range, value: 'reward' as const },
        { label: 'Clear all filters', value: 'clear' as const },
      ],
      { title: 'Filter Trajectories', placeHolder: 'Filter the Runs view by' },
    );
    let patch: FilterPatch | undefined;
    if (field?.value === 'clear') patch = { agentId: null, success: null, reward: {} };
    else if (field?.value === 'agent') {
      const agents = [...new Set(c.runs.runs.flatMap((r) => r.agents))].sort();
      const agent = await vscode.window.showQuickPick([{ label: 'Any agent', value: null }, ...agents.map((a) => ({ label: a, value: a }))], { title: 'Filter by agent' });
      if (agent) patch = { agentId: agent.value };
    } else if (field?.value === 'success') {
      const outcomes = [
        { label: 'Any outcome', value: null },
        { label: 'Solved', value: true },
        { label: 'Failed', value: false },
      ];
      const outcome = await vscode.window.showQuickPick(outcomes, { title: 'Filter by outcome' });
      if (outcome) patch = { success: outcome.value };
    } else if (field?.value === 'reward') {
      const text = await vscode.window.showInputBox({
        title: 'Filter by team reward',
        prompt: 'A range: 0.5.. (at least), ..0 (at most), 0..1 (between); empty for any',
        value: range,
        validateInput: (v) => {
          const r = parseRewardRange(v);
          return r.ok ? undefined : r.reason;
        },
      });
      const parsed = text === undefined ? undefined : parseRewardRange(text);
      if (parsed?.ok) {
        const { ok: _ok, ...reward } = parsed;
        patch = { reward };
      }
    }
    if (patch) c.tree.filter = updateFilter(f, patch);
  };

  /** Runs the same config again (the run folder's copy, as the run resolved it). */
  const rerun = async (arg: unknown) => {
    const client = await connected();
    const runId = runIdOf(arg) ?? (await pickRun(c.runs, { title: 'Run Again' }))?.summary.id;
    if (runId === undefined) return;
    const { run } = await client.request('run/rerun', { runId });
    const choice = await vscode.window.showInformationMessage(`Troupe: started "${run.name}" again (${run.state}).`, 'Open Dashboard');
    if (choice) c.showDashboard(run.id);
  };

  const renameRun = async (arg: unknown) => {
    const client = await connected();
    const runId = runIdOf(arg) ?? (await pickRun(c.runs, { title: 'Rename Run' }))?.summary.id;
    if (runId === undefined) return;
    const name = await vscode.window.showInputBox({
      title: 'Rename Run',
      prompt: 'The name the Runs view, the dashboard and the pickers show (the config keeps its own)',
      value: c.runs.get(runId)?.summary.name ?? '',
      validateInput: (v) => (v.trim() === '' ? 'A name cannot be empty' : v.trim().length > 200 ? 'At most 200 characters' : undefined),
    });
    if (name === undefined) return;
    await client.request('run/rename', { runId, name });
  };

  /** Deletes an ended run after asking; a live one is refused by the server (stop it first). */
  const deleteRun = async (arg: unknown) => {
    const client = await connected();
    const runId = runIdOf(arg) ?? (await pickRun(c.runs, { title: 'Delete Run', states: deletableStates }))?.summary.id;
    if (runId === undefined) return;
    const label = c.runs.labelOf(runId);
    const answer = await vscode.window.showWarningMessage(
      `Delete the run "${label}"?`,
      { modal: true, detail: 'Its steps, metrics and trajectories go, and its folder in .troupe/runs with its checkpoints. This cannot be undone.' },
      'Delete',
    );
    if (answer !== 'Delete') return;
    const result = await client.request('run/delete', { runId });
    const kept = result.keptFolder === null ? '' : ` Its folder ${result.keptFolder} lies outside .troupe/runs and was kept.`;
    vscode.window.setStatusBarMessage(`Troupe: deleted ${label}`, 5000);
    if (kept !== '') void vscode.window.showInformationMessage(`Troupe: deleted "${label}".${kept}`);
  };

  return [
    command(commandIds.startTraining, 'Start Training', startTraining),
    command(commandIds.rerun, 'Run Again', rerun),
    command(commandIds.renameRun, 'Rename Run', renameRun),
    command(commandIds.deleteRun, 'Delete Run', deleteRun),
    runAction('pause', 'Pause', 'run/pause', 'pausing at the next step boundary:'),
    runAction('resume', 'Resume', 'run/resume', 'resuming'),
    runAction('stop', 'Stop', 'run/stop', 'stopping at the next step boundary:'),
    command(commandIds.openDashboard, 'Open Dashboard', openDashboard),
    command(commandIds.compareRuns, 'Compare Runs', compareRuns),
    command(commandIds.openTrajectory, 'Open Trajectory', openTrajectory),
    command(commandIds.compareTrajectories, 'Compare Trajectories', compareTrajectories),
    command(commandIds.exportAdapters, 'Export Adapters', exportAdapters),
    command(commandIds.connect, 'Connect to Server', connect),
    command(commandIds.restartServer, 'Restart Server', restartServer),
    command(commandIds.filterTrajectories, 'Filter Trajectories', filterTrajectories),
    command(commandIds.refreshRuns, 'Refresh Runs', async () => {
      // Without a server, refreshing means finding (or in a trusted workspace starting) one.
      if (!c.server.client) await connected();
      c.tree.clearCaches();
      await c.runs.refresh();
    }),
    command(commandIds.showServerOutput, 'Show Server Output', async () => c.output.show()),
  ];
}

