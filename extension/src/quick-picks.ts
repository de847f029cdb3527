/**
 * The pickers commands fall back on when they are not invoked on a tree item: a config file, a
 * run, a step of a run, a trajectory of a step. Each returns undefined when the user cancels.
 */
import { basename, dirname } from 'node:path';
import * as vscode from 'vscode';
import type { RpcClient } from '../../server/protocol/rpc-client.ts';
import type { RunState, StepSummary, TrajectorySummary } from '../../server/protocol/trajectory.ts';
import { configFileExclude, configFileInclude, isExperimentConfigPath, sortConfigPaths } from './config-files.ts';
import { describeRun, describeStep, describeTrajectory, runIcon, stepLabel, trajectoryLabel } from './run-format.ts';
import type { RunsModel, RunView } from './runs-model.ts';

interface Item<T> extends vscode.QuickPickItem {
  readonly value: T;
}

/** Trajectories offered in one picker; the quick pick's own filtering narrows them. */
const TRAJECTORY_PICK_LIMIT = 2000;
/** Config files searched for; a workspace with more is unusual enough to cut. */
const CONFIG_SEARCH_LIMIT = 1000;

async function pick<T>(items: readonly Item<T>[] | PromiseLike<readonly Item<T>[]>, o: vscode.QuickPickOptions): Promise<T | undefined> {
  const chosen = await vscode.window.showQuickPick<Item<T>>(Promise.resolve(items).then((i) => [...i]), { matchOnDescription: true, ...o });
  return chosen?.value;
}

/**
 * An experiment config of the workspace, the active editor's first. The picker opens at once and
 * fills when the search is done, so what the user types meanwhile is not lost.
 */
export async function pickConfigFile(): Promise<vscode.Uri | undefined> {
  const items = vscode.workspace.findFiles(configFileInclude, configFileExclude, CONFIG_SEARCH_LIMIT).then((uris) => {
    const found = uris.filter((u) => isExperimentConfigPath(u.path));
    if (found.length === 0) throw new Error('no experiment configs in this workspace (JSON files under a configs/ folder, or files named *.troupe.json)');
    const byPath = new Map(found.map((u) => [vscode.workspace.asRelativePath(u), u]));
    const activeUri = vscode.window.activeTextEditor?.document.uri;
    const active = activeUri && isExperimentConfigPath(activeUri.path) ? vscode.workspace.asRelativePath(activeUri) : undefined;
    return sortConfigPaths([...byPath.keys()], active).map(
      (rel): Item<vscode.Uri> => ({ label: basename(rel), description: rel === active ? `${dirname(rel)} · current file` : dirname(rel), value: byPath.get(rel)! }),
    );
  });
  return pick(items, { title: 'Start Training', placeHolder: 'Experiment config to train' });
}

/** A run, optionally only among those in the given states. */
export async function pickRun(runs: RunsModel, o: { readonly title: string; readonly states?: readonly RunState[] }): Promise<RunView | undefined> {
  const candidates = runs.runs.filter((r) => o.states === undefined || o.states.includes(r.summary.state));
  if (candidates.length === 0) {
    const which = o.states === undefined ? 'no runs' : `no ${o.states.join(' or ')} runs`;
    void vscode.window.showInformationMessage(`Troupe: ${o.title}: there are ${which}.`);
    return undefined;
  }
  const items = candidates.map((r): Item<RunView> => ({ label: `$(${runIcon(r)}) ${runs.labelOf(r.summary.id)}`, description: describeRun(r), detail: r.summary.id, value: r }));
  return pick(items, { title: o.title, placeHolder: 'Run', matchOnDetail: true });
}

/** Several runs (checkboxes), those in `selected` checked; undefined when cancelled. */
export async function pickRuns(runs: RunsModel, o: { readonly title: string; readonly selected?: readonly string[] }): Promise<string[] | undefined> {
  if (runs.runs.length === 0) {
    void vscode.window.showInformationMessage(`Troupe: ${o.title}: there are no runs.`);
    return undefined;
  }
  const items = runs.runs.map(
    (r): Item<string> => ({ label: `$(${runIcon(r)}) ${runs.labelOf(r.summary.id)}`, description: describeRun(r), detail: r.summary.id, value: r.summary.id, picked: o.selected?.includes(r.summary.id) ?? false }),
  );
  const chosen = await vscode.window.showQuickPick(items, { title: o.title, placeHolder: 'Runs to overlay (check two or more)', canPickMany: true, matchOnDescription: true, matchOnDetail: true });
  return chosen?.map((i) => i.value);
}

/** A committed step of a run, newest first. */
export async function pickStep(client: RpcClient, runId: string, title: string): Promise<StepSummary | undefined> {
  const items = client.request('steps/list', { runId, limit: 10_000 }).then(({ steps }) => {
    if (steps.length === 0) throw new Error(`run ${runId} has no committed steps yet`);
    return [...steps].reverse().map((s): Item<StepSummary> => ({ label: stepLabel(s.step), description: describeStep(s), value: s }));
  });
  return pick(items, { title, placeHolder: 'Step' });
}

/** A trajectory of a step (validation ones first, as the server orders them), leaving out `exclude`. */
export async function pickTrajectory(client: RpcClient, runId: string, step: number, o: { readonly title: string; readonly exclude?: number }): Promise<TrajectorySummary | undefined> {
  const items = client.request('trajectories/query', { runId, step, limit: TRAJECTORY_PICK_LIMIT }).then(({ trajectories }) =>
    trajectories.filter((t) => t.id !== o.exclude).map((t): Item<TrajectorySummary> => ({ label: trajectoryLabel(t), description: describeTrajectory(t), value: t })),
  );
  return pick(items, { title: o.title, placeHolder: `Trajectory of ${stepLabel(step).toLowerCase()}` });
}

/** Run → step → trajectory. */
export async function pickTrajectoryOfRun(client: RpcClient, runs: RunsModel, title: string): Promise<TrajectorySummary | undefined> {
  const run = await pickRun(runs, { title });
  if (!run) return undefined;
  const step = await pickStep(client, run.summary.id, title);
  if (!step) return undefined;
  return pickTrajectory(client, run.summary.id, step.step, { title });
}

/** The same task (environment seed and phase) at another step of the run. */
export async function pickSameTask(client: RpcClient, first: TrajectorySummary, title: string): Promise<TrajectorySummary | undefined> {
  const items = client.request('trajectories/forTask', { runId: first.runId, envSeed: first.envSeed, phase: first.phase }).then(({ trajectories }) => {
    const others = trajectories.filter((t) => t.id !== first.id);
    if (others.length === 0) throw new Error(`seed ${first.envSeed} (${first.phase}) ran at no other step`);
    return others.map((t): Item<TrajectorySummary> => ({ label: `${stepLabel(t.step)} · ${trajectoryLabel(t)}`, description: describeTrajectory(t), value: t }));
  });
  return pick(items, { title, placeHolder: `Seed ${first.envSeed} at another step` });
}
