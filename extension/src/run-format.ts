/**
 * How runs, steps and trajectories read in the Runs view, the quick picks and the status bar. One
 * place for the wording, so the tree and the pickers describe the same thing the same way.
 */
import type { RunState, RunSummary, StepSummary, TrajectorySummary } from '../../server/protocol/trajectory.ts';
import { describeOutcome, runEnding as endingOf, secondsPerStep, shortOutcome, type RunEnding } from '../../webview/src/run-outcome.ts';
import type { RunView, SuccessRate } from './runs-model.ts';

/** A codicon per run state (`$(name)` in labels, ThemeIcon ids in trees). */
export const runStateIcons: Record<RunState, string> = {
  queued: 'clock',
  running: 'sync~spin',
  paused: 'debug-pause',
  stopping: 'loading~spin',
  done: 'pass',
  failed: 'error',
};

/** Which run commands apply in each state (the tree's context menu and the pickers agree). */
export const runActions = {
  pause: ['running', 'queued'],
  resume: ['paused', 'failed'],
  stop: ['running', 'paused', 'queued', 'failed'],
} as const satisfies Record<string, readonly RunState[]>;
export type RunAction = keyof typeof runActions;

export function canRun(action: RunAction, state: RunState): boolean {
  return (runActions[action] as readonly RunState[]).includes(state);
}

/** `78%`: whole percent, since the validation sets are tens to hundreds of episodes. */
export function formatPercent(fraction: number): string {
  return `${Math.round(fraction * 100)}%`;
}

/** `val 78%` or `train 64%`. */
export function formatSuccess(s: SuccessRate): string {
  return `${s.source} ${formatPercent(s.value)}`;
}

/** `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 07 min`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const totalS = Math.round(s);
  if (totalS < 3600) return `${Math.floor(totalS / 60)} min ${String(totalS % 60).padStart(2, '0')} s`;
  const totalMin = Math.round(totalS / 60);
  return `${Math.floor(totalMin / 60)} h ${String(totalMin % 60).padStart(2, '0')} min`;
}

/** `step 12/60`, `step 12`, or null before the first step. */
export function formatStep(step: number | null, steps: number | null): string | null {
  if (step === null) return null;
  return steps === null ? `step ${step}` : `step ${step}/${steps}`;
}

/** `warm-up 45/300` (of several models: `warm-up of 'tool' (2/2) 45/300`), or null when no warm-up is known or step 0 is committed. */
export function formatWarmUp(v: Pick<RunView, 'step' | 'warmUp'>): string | null {
  const w = v.warmUp;
  if (!w || v.step !== null) return null;
  return `warm-up${w.models > 1 ? ` of '${w.modelId}' (${w.model}/${w.models})` : ''} ${w.step}/${w.steps}`;
}

/** How a run ended (finished, stopped before its last step, failed), or null while it may still train. */
export function runEnding(v: Pick<RunView, 'summary' | 'step' | 'steps'>): RunEnding | null {
  return endingOf(v.summary.state, v.step, v.steps);
}

/** The word for a run's state in the Runs view: the server's state, but `stopped` for a run done before its last step. */
export function stateWord(v: Pick<RunView, 'summary' | 'step' | 'steps'>): string {
  return runEnding(v) === 'stopped' ? 'stopped' : v.summary.state;
}

/** The icon of a run: its state's, and a stop sign for a stopped one. */
export function runIcon(v: Pick<RunView, 'summary' | 'step' | 'steps'>): string {
  return runEnding(v) === 'stopped' ? 'debug-stop' : runStateIcons[v.summary.state];
}

/**
 * The Runs view's description of a run: `running · step 12/60 · val 78%`; an ended run with a test
 * says how it came out instead: `done · step 60/60 · test 48% → 61% (+12.5)`.
 */
export function describeRun(v: RunView): string {
  const parts: string[] = [stateWord(v)];
  const step = formatStep(v.step, v.steps);
  if (step !== null) parts.push(step);
  else if (formatWarmUp(v) !== null) parts.push(formatWarmUp(v)!);
  else if (v.summary.state === 'running') parts.push('warming up');
  const outcome = runEnding(v) === null ? null : shortOutcome(v.outcome);
  if (outcome !== null) parts.push(outcome);
  else if (v.success) parts.push(formatSuccess(v.success));
  return parts.join(' · ');
}

/**
 * The notification when a run ends: `"flagship" finished at step 60: test 48.4% → 60.9% (RL gain
 * +12.5 points) · best validation: step 40 (81.2%)`; a stopped run says where it stopped, a failed
 * one why.
 */
export function runEndedMessage(v: RunView): string {
  const ending = runEnding(v) ?? v.summary.state;
  const at = v.step === null ? (v.warmUp ? `in the warm-up (step ${v.warmUp.step} of ${v.warmUp.steps})` : 'before step 0') : ending === 'stopped' && v.steps !== null ? `at step ${v.step} of ${v.steps}` : `at step ${v.step}`;
  const outcome = describeOutcome(v.outcome);
  const detail = ending === 'failed' ? (v.summary.error ?? '') : outcome;
  return `Troupe: "${v.summary.name}" ${ending} ${at}${detail === '' ? '.' : `: ${detail}`}`;
}

/** The status bar text for the active run: `$(sync~spin) Troupe: flagship step 12/60 · val 78%`. */
export function statusBarText(v: RunView): string {
  const parts = [formatStep(v.step, v.steps) ?? formatWarmUp(v) ?? (v.summary.state === 'running' ? 'warming up' : v.summary.state)];
  if (v.success) parts.push(formatSuccess(v.success));
  const paused = v.summary.state === 'paused' || v.summary.state === 'queued' ? ` (${v.summary.state})` : '';
  return `$(${runStateIcons[v.summary.state]}) Troupe: ${v.summary.name} ${parts.join(' · ')}${paused}`;
}

/**
 * A run's tooltip, one fact per line (Markdown-safe: no markup characters are added). The start is
 * a clock time, not only a duration: VS Code keeps a tooltip until the row changes, so "ago" alone
 * goes stale on a finished run (the Runs view resolves the tooltip when it is hovered).
 */
export function runTooltip(v: RunView, now = Date.now()): string {
  const lines = [`${v.summary.name} (${v.summary.id})`, `State: ${stateWord(v)}`];
  const step = formatStep(v.step, v.steps);
  if (step !== null) lines.push(`Progress: ${step}`);
  const w = v.step === null ? v.warmUp : undefined;
  if (w) {
    const live = v.summary.state === 'running' || v.summary.state === 'stopping';
    const facts = [
      `step ${w.step} of ${w.steps}${w.models > 1 ? ` of model '${w.modelId}' (${w.model} of ${w.models})` : ''}`,
      ...(w.loss !== null ? [`loss ${w.loss.toFixed(4)}`] : []),
      ...(live && w.etaMs !== null && w.step < w.steps ? [`about ${formatDuration(w.etaMs)} left`] : []),
      ...(w.checkpointStep !== null ? [`checkpointed at step ${w.checkpointStep}`] : []),
    ];
    lines.push(`Warm-up: ${facts.join(' · ')}`);
  }
  if (v.success) lines.push(`Success: ${formatSuccess(v.success)} at step ${v.success.step}`);
  const outcome = describeOutcome(v.outcome);
  if (outcome !== '') lines.push(`Result: ${outcome}`);
  if (v.outcome.meanStepMs !== null) lines.push(`Mean step time: ${secondsPerStep(v.outcome.meanStepMs)} over ${v.outcome.timedSteps} steps`);
  if (v.etaMs !== null && (v.summary.state === 'running' || v.summary.state === 'stopping')) lines.push(`Remaining: about ${formatDuration(v.etaMs)}`);
  lines.push(`Started: ${formatStartTime(v.summary.createdAt, now)}`);
  // An ended run's last change is its end; a live one is still going.
  if (runEnding(v) !== null) lines.push(`Took: ${formatDuration(Math.max(0, v.summary.updatedAt - v.summary.createdAt))}`);
  else lines.push(`Running for: ${formatDuration(Math.max(0, now - v.summary.createdAt))}`);
  lines.push(`Folder: ${v.summary.runDir}`);
  if (v.summary.error !== undefined) lines.push(`Error: ${v.summary.error}`);
  return lines.join('\n');
}

const two = (n: number) => String(n).padStart(2, '0');

/** `15:52:07` today, `2026-11-26 15:52:07` on another day (local time). */
export function formatStartTime(ms: number, now = Date.now()): string {
  const d = new Date(ms);
  const n = new Date(now);
  const clock = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  const sameDay = d.getFullYear() === n.getFullYear() && d.getMonth() === n.getMonth() && d.getDate() === n.getDate();
  return sameDay ? clock : `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clock}`;
}

/**
 * Each run's label in the Runs view and the pickers: its name, and where several runs share a name
 * (one config trained twice), the start as well — `flagship · 15:52` — down to the second, or the
 * run id's random suffix when even that is shared.
 */
export function runLabels(runs: readonly Pick<RunSummary, 'id' | 'name' | 'createdAt'>[]): Map<string, string> {
  const byName = new Map<string, Pick<RunSummary, 'id' | 'name' | 'createdAt'>[]>();
  for (const r of runs) byName.set(r.name, [...(byName.get(r.name) ?? []), r]);
  const labels = new Map<string, string>();
  for (const [name, group] of byName) {
    if (group.length === 1) {
      labels.set(group[0]!.id, name);
      continue;
    }
    const minute = (ms: number) => {
      const d = new Date(ms);
      return `${two(d.getHours())}:${two(d.getMinutes())}`;
    };
    const second = (ms: number) => `${minute(ms)}:${two(new Date(ms).getSeconds())}`;
    const days = new Set(group.map((r) => new Date(r.createdAt).toDateString()));
    const day = (ms: number) => {
      const d = new Date(ms);
      return days.size > 1 ? `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` : '';
    };
    const count = (f: (ms: number) => string) => {
      const c = new Map<string, number>();
      for (const r of group) c.set(day(r.createdAt) + f(r.createdAt), (c.get(day(r.createdAt) + f(r.createdAt)) ?? 0) + 1);
      return c;
    };
    const minutes = count(minute);
    const seconds = count(second);
    for (const r of group) {
      const m = day(r.createdAt) + minute(r.createdAt);
      const s = day(r.createdAt) + second(r.createdAt);
      const when = minutes.get(m) === 1 ? m : seconds.get(s) === 1 ? s : `${s} #${r.id.slice(-4)}`;
      labels.set(r.id, `${name} · ${when}`);
    }
  }
  return labels;
}

/**
 * The run a command from the palette acts on without asking: the only one in a state the action
 * applies to (Pause with one run training); undefined when there are none or several.
 */
export function soleRunFor(action: RunAction, runs: readonly Pick<RunView, 'summary'>[]): string | undefined {
  const candidates = runs.filter((r) => canRun(action, r.summary.state));
  return candidates.length === 1 ? candidates[0]!.summary.id : undefined;
}

/** Context value of a run node, `run.<state>`; the manifest's menus match on it. */
export function runContextValue(state: RunState): string {
  return `run.${state}`;
}

/** Total wall-clock time of a step: its `total` timing when recorded, else the sum of its phases. */
export function stepTotalMs(s: StepSummary): number {
  return s.timingsMs['total'] ?? Object.values(s.timingsMs).reduce((a, b) => a + b, 0);
}

/** `Step 12`; step 0 says what it is: the team validated before any RL update (after the warm start, if any). */
export function stepLabel(step: number): string {
  return step === 0 ? 'Step 0 · before RL' : `Step ${step}`;
}

/** A way to choose the other side of a comparison (a quick pick item). */
export interface CompareChoice {
  readonly label: string;
  readonly description?: string;
  readonly detail?: string;
  readonly value: 'step' | 'task';
}

/**
 * What a trajectory can be compared with. The same task at another step exists only for validation
 * trajectories: validation reruns the same seeds at every validation step, while a training task's
 * seed depends on the step, so it never runs again.
 */
export function compareChoices(first: Pick<TrajectorySummary, 'step' | 'envSeed' | 'phase'>): CompareChoice[] {
  const sameStep: CompareChoice = { label: `Another trajectory of ${stepLabel(first.step).toLowerCase()}`, value: 'step' };
  if (first.phase !== 'validation') {
    return [{ ...sameStep, detail: 'Training tasks differ at every step: the same task at another step can be compared only for validation trajectories.' }];
  }
  return [
    sameStep,
    { label: `The same task (seed ${first.envSeed}) at another step`, description: 'how training changed it', detail: 'Validation runs the same tasks at every validation step.', value: 'task' },
  ];
}

/** `12/16 succeeded · 3.4 s`. */
export function describeStep(s: StepSummary): string {
  return `${s.successCount}/${s.trajectoryCount} succeeded · ${formatDuration(stepTotalMs(s))}`;
}

/** `val #3 · seed 1000042` (and the rollout index of independent rollouts). */
export function trajectoryLabel(t: TrajectorySummary): string {
  const rollout = t.rollout > 0 ? ` rollout ${t.rollout}` : '';
  return `${t.phase === 'validation' ? 'val' : 'train'} #${t.envInstance}${rollout} · seed ${t.envSeed}`;
}

/** Rewards to two decimals: enough to tell branches apart, short enough for a tree row. */
export function formatReward(r: number): string {
  return r.toFixed(2);
}

/** `solved · team 1.00 · local 0.35 · 6 turns`. */
export function describeTrajectory(t: TrajectorySummary): string {
  return `${t.success ? 'solved' : 'failed'} · team ${formatReward(t.teamReward)} · local ${formatReward(t.localReward)} · ${t.turnCount} turns`;
}

/** Which trajectories the Runs view lists; every set field must hold. */
export interface TrajectoryFilter {
  readonly agentId?: string;
  readonly success?: boolean;
  readonly minReward?: number;
  readonly maxReward?: number;
}

/** The view's description for a filter: `agent tool · failed · reward ≥ 0.5`; empty for none. */
export function describeFilter(f: TrajectoryFilter): string {
  const parts: string[] = [];
  if (f.agentId !== undefined) parts.push(`agent ${f.agentId}`);
  if (f.success !== undefined) parts.push(f.success ? 'solved' : 'failed');
  if (f.minReward !== undefined && f.maxReward !== undefined) parts.push(`reward ${f.minReward}..${f.maxReward}`);
  else if (f.minReward !== undefined) parts.push(`reward ≥ ${f.minReward}`);
  else if (f.maxReward !== undefined) parts.push(`reward ≤ ${f.maxReward}`);
  return parts.join(' · ');
}

/**
 * Parses a reward range as typed in the filter's input box: `0.5..` (at least), `..0` (at most),
 * `0..1` (between), or a single number (at least). Empty clears the range.
 */
export function parseRewardRange(text: string): { ok: true; minReward?: number; maxReward?: number } | { ok: false; reason: string } {
  const t = text.trim();
  if (t === '') return { ok: true };
  const num = (s: string): number | null | undefined => {
    if (s.trim() === '') return undefined;
    const n = Number(s);
    return Number.isFinite(n) ? n : null;
  };
  const [lo, hi, extra] = t.includes('..') ? t.split('..') : [t, ''];
  const min = num(lo ?? '');
  const max = num(hi ?? '');
  if (extra !== undefined || min === null || max === null) return { ok: false, reason: `"${text}" is not a range: write 0.5.. (at least), ..0 (at most) or 0..1` };
  if (min !== undefined && max !== undefined && min > max) return { ok: false, reason: `the range ${text} is empty: ${min} > ${max}` };
  return { ok: true, ...(min !== undefined ? { minReward: min } : {}), ...(max !== undefined ? { maxReward: max } : {}) };
}

/** Which checkpoint `adapters/export` writes. */
export type ExportCheckpoint = 'initial' | 'latest' | 'best' | number;

/**
 * The folder made for an export inside a chosen folder that is not empty (the server writes only
 * into a new or empty one): `<run name>-step40`, `-latest`, `-best` or `-initial`, in file-name-safe form.
 */
export function exportFolderName(runName: string, checkpoint: ExportCheckpoint): string {
  const slug =
    runName
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 60) || 'run';
  return `${slug}-${typeof checkpoint === 'number' ? `step${checkpoint}` : checkpoint}`;
}

/** A change to a filter: a value sets the field, null clears it, absent keeps it. */
export interface FilterPatch {
  readonly agentId?: string | null;
  readonly success?: boolean | null;
  /** Replaces both bounds (an empty object clears the range). */
  readonly reward?: { readonly minReward?: number; readonly maxReward?: number };
}

export function updateFilter(f: TrajectoryFilter, patch: FilterPatch): TrajectoryFilter {
  const agentId = patch.agentId === undefined ? f.agentId : (patch.agentId ?? undefined);
  const success = patch.success === undefined ? f.success : (patch.success ?? undefined);
  const { minReward, maxReward } = patch.reward ?? f;
  return {
    ...(agentId !== undefined ? { agentId } : {}),
    ...(success !== undefined ? { success } : {}),
    ...(minReward !== undefined ? { minReward } : {}),
    ...(maxReward !== undefined ? { maxReward } : {}),
  };
}

/** A filter's reward range as `parseRewardRange` reads it back: `0.5..`, `..0`, `0..1`, or empty. */
export function formatRewardRange(f: TrajectoryFilter): string {
  return f.minReward === undefined && f.maxReward === undefined ? '' : `${f.minReward ?? ''}..${f.maxReward ?? ''}`;
}
