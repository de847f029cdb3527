/**
 * The runs of the connected server as the Runs view and the status bar show them: each run's
 * summary plus what the summary lacks (the step it trains to, its latest success rate, its agents),
 * kept live from `run/didChangeState` and `run/didProgress`. No vscode import: the model is tested
 * against a real RpcClient fed by a fake server.
 */
import { safeParseExperimentConfig } from '../../server/protocol/experiment-config.ts';
import type { WarmUpProgress } from '../../server/protocol/methods.ts';
import type { Disposable, RpcClient } from '../../server/protocol/rpc-client.ts';
import type { Metric, RunState, RunSummary } from '../../server/protocol/trajectory.ts';
import { OutcomeSeries, outcomeMetricNames, type RunOutcome } from '../../webview/src/run-outcome.ts';
import { userMessage } from './error-text.ts';
import { runLabels } from './run-format.ts';

/** A success rate in [0, 1] and where it came from. */
export interface SuccessRate {
  readonly value: number;
  /** `val`: held-out validation (`val/success`); `train`: the step's rollouts (`train/success`). */
  readonly source: 'val' | 'train';
  /** Step the value was logged at. */
  readonly step: number;
}

export interface RunView {
  readonly summary: RunSummary;
  /** Last committed step; null before the first (step 0 is the warm-start validation). */
  readonly step: number | null;
  /** Step the run trains to; null until the config or a progress notification says. */
  readonly steps: number | null;
  /** Latest team-wide success rate, validation preferred. */
  readonly success: SuccessRate | null;
  /** Estimated time to the last step, from the latest progress notification. */
  readonly etaMs: number | null;
  /** The config's agent ids (its router's keys), for the trajectory filter; empty until read. */
  readonly agents: readonly string[];
  /** What the run came to so far (test before → after, best validated step, mean step time). */
  readonly outcome: RunOutcome;
  /** Where its warm-up stands (`run/didWarmUp`, `run/get`), until step 0 is committed; absent when not known. */
  readonly warmUp?: RunWarmUp | undefined;
}

/** A run's warm-up as the Runs view tells it: the protocol's progress less its loss points. */
export type RunWarmUp = Omit<WarmUpProgress, 'points'>;

/** Metric names the success rate is read from, validation first. */
export const successMetricNames = { val: 'val/success', train: 'train/success' } as const;

type MetricLike = Pick<Metric, 'name' | 'value' | 'agentId' | 'policyId'>;

/**
 * The success rate after a step's metrics: a team-wide `val/success` replaces anything older, a
 * `train/success` only replaces another training value. Validation runs every few steps on fixed
 * held-out seeds, so its last value is the honest number even when a later training value exists.
 */
export function mergeSuccess(current: SuccessRate | null, metrics: readonly MetricLike[], step: number): SuccessRate | null {
  const teamValue = (name: string) => metrics.find((m) => m.name === name && m.agentId === undefined && m.policyId === undefined)?.value;
  const val = teamValue(successMetricNames.val);
  if (val !== undefined && (current === null || current.source === 'train' || current.step <= step)) return { value: val, source: 'val', step };
  const train = teamValue(successMetricNames.train);
  if (train !== undefined && (current === null || (current.source === 'train' && current.step <= step))) return { value: train, source: 'train', step };
  return current;
}

const activePriority: Partial<Record<RunState, number>> = { running: 0, stopping: 1, queued: 2, paused: 3 };

/**
 * The run the status bar follows: a training one before a queued or paused one, and among equals
 * the one that changed last. Undefined when no run is live.
 */
export function pickActiveRun(runs: Iterable<RunView>): RunView | undefined {
  let best: RunView | undefined;
  for (const r of runs) {
    const p = activePriority[r.summary.state];
    if (p === undefined) continue;
    const bp = best === undefined ? undefined : activePriority[best.summary.state];
    if (best === undefined || bp === undefined || p < bp || (p === bp && r.summary.updatedAt > best.summary.updatedAt)) best = r;
  }
  return best;
}

const emptyOutcome: RunOutcome = new OutcomeSeries().outcome();

function withoutPoints(p: WarmUpProgress): RunWarmUp {
  const { points: _, ...rest } = p;
  return rest;
}

function newView(summary: RunSummary): RunView {
  return { summary, step: summary.lastCommittedStep, steps: summary.targetSteps, success: null, etaMs: null, agents: [], outcome: emptyOutcome };
}

/** States in which a run may still train; leaving them for `done` or `failed` ends it. */
const liveStates: ReadonlySet<RunState> = new Set(['queued', 'running', 'paused', 'stopping']);

/** Called with the id of the run that changed, or undefined when the list itself changed. */
export type RunsListener = (runId: string | undefined) => void;
/** Called once when a run seen training ends (done or failed), with its outcome read after the end. */
export type RunEndListener = (run: RunView) => void;

/** Details are read for this many runs at once, so a long run list does not flood the server. */
const DETAIL_CONCURRENCY = 4;

export class RunsModel {
  private client: RpcClient | undefined;
  private subscriptions: Disposable[] = [];
  private readonly views = new Map<string, RunView>();
  private readonly listeners = new Set<RunsListener>();
  private readonly endListeners = new Set<RunEndListener>();
  /** The outcome's series per run, so progress extends them without a query. */
  private readonly outcomes = new Map<string, OutcomeSeries>();
  /** Labels of the listed runs (`runLabels`); dropped whenever anything changes. */
  private labels: Map<string, string> | null = null;
  /** Bumped on every client change and refresh, so answers to an older one are dropped. */
  private generation = 0;
  private lastError: string | null = null;

  constructor(private readonly log: (line: string) => void = () => {}) {}

  /**
   * Follows a new connection (or none); resolves once the run list is loaded. Without a connection
   * the runs last read stay listed (`connected` says they may be out of date); the next connection's
   * list replaces them.
   */
  setClient(client: RpcClient | undefined): Promise<void> {
    for (const s of this.subscriptions) s.dispose();
    this.subscriptions = [];
    this.client = client;
    this.lastError = null;
    this.generation++;
    if (!client) {
      this.fire(undefined);
      return Promise.resolve();
    }
    this.subscriptions.push(
      client.onNotification('run/didChangeState', (p) => this.upsert(p.run)),
      client.onNotification('run/didRename', (p) => this.upsert(p.run)),
      client.onNotification('run/didDelete', (p) => {
        if (!this.views.delete(p.runId)) return;
        this.outcomes.delete(p.runId);
        this.fire(undefined);
      }),
      client.onNotification('run/didWarmUp', (p) => {
        const v = this.views.get(p.runId);
        if (!v) return;
        const { runId: _, points: __, ...warmUp } = p;
        this.views.set(p.runId, { ...v, warmUp });
        this.fire(p.runId);
      }),
      client.onNotification('run/didProgress', (p) => {
        const v = this.views.get(p.runId);
        if (!v) return;
        const outcome = this.outcomeSeries(p.runId).addMetrics(p.step, p.metrics).outcome();
        this.views.set(p.runId, {
          ...v,
          summary: { ...v.summary, lastCommittedStep: p.step, updatedAt: Math.max(v.summary.updatedAt, Date.now()) },
          step: p.step,
          steps: p.steps,
          etaMs: p.etaMs,
          success: mergeSuccess(v.success, p.metrics, p.step),
          outcome,
          warmUp: undefined,
        });
        this.fire(p.runId);
      }),
    );
    return this.refresh();
  }

  /** Runs, newest first. */
  get runs(): RunView[] {
    return [...this.views.values()].sort((a, b) => b.summary.createdAt - a.summary.createdAt);
  }

  get(runId: string): RunView | undefined {
    return this.views.get(runId);
  }

  /** The run's label: its name, with its start when another run has the same name. */
  labelOf(runId: string): string {
    this.labels ??= runLabels([...this.views.values()].map((v) => v.summary));
    return this.labels.get(runId) ?? this.views.get(runId)?.summary.name ?? runId;
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  /** Why the run list could not be read, or null. */
  get error(): string | null {
    return this.lastError;
  }

  activeRun(): RunView | undefined {
    return pickActiveRun(this.views.values());
  }

  onDidChange(listener: RunsListener): Disposable {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Runs that end while this model follows them (not the ones listed as already ended). */
  onDidEnd(listener: RunEndListener): Disposable {
    this.endListeners.add(listener);
    return { dispose: () => this.endListeners.delete(listener) };
  }

  /** Re-reads the run list and every run's details. */
  async refresh(): Promise<void> {
    const client = this.client;
    if (!client) return;
    const generation = ++this.generation;
    let runs: RunSummary[];
    try {
      runs = (await client.request('runs/list', {})).runs;
    } catch (e) {
      if (generation !== this.generation) return;
      this.lastError = userMessage(e);
      this.log(`runs/list failed: ${e instanceof Error ? e.message : String(e)}`);
      this.fire(undefined);
      return;
    }
    if (generation !== this.generation) return;
    this.lastError = null;
    const listed = new Set(runs.map((r) => r.id));
    for (const id of this.views.keys()) {
      if (listed.has(id)) continue;
      this.views.delete(id);
      this.outcomes.delete(id);
    }
    for (const summary of runs) {
      const old = this.views.get(summary.id);
      // A notification that arrived while the list was in flight is newer than the list.
      if (old && old.summary.updatedAt > summary.updatedAt) continue;
      this.views.set(summary.id, old ? { ...old, summary, step: summary.lastCommittedStep ?? old.step, steps: summary.targetSteps ?? old.steps } : newView(summary));
    }
    this.fire(undefined);
    const queue = runs.map((r) => r.id);
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) await this.loadDetails(client, id, generation);
    };
    await Promise.all(Array.from({ length: Math.min(DETAIL_CONCURRENCY, queue.length) }, worker));
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.subscriptions = [];
    this.listeners.clear();
    this.endListeners.clear();
  }

  private outcomeSeries(runId: string): OutcomeSeries {
    let s = this.outcomes.get(runId);
    if (!s) this.outcomes.set(runId, (s = new OutcomeSeries()));
    return s;
  }

  private upsert(summary: RunSummary): void {
    const old = this.views.get(summary.id);
    this.views.set(summary.id, old ? { ...old, summary, step: summary.lastCommittedStep ?? old.step, steps: summary.targetSteps ?? old.steps } : newView(summary));
    this.fire(old ? summary.id : undefined);
    const ended = old !== undefined && liveStates.has(old.summary.state) && !liveStates.has(summary.state);
    if (!this.client || (old && !ended)) return;
    // An ending re-reads the run's metrics (the last step's test came with its progress, but a
    // progress lost to a reconnect would leave the outcome short), then tells the listeners.
    const client = this.client;
    const generation = this.generation;
    void this.loadDetails(client, summary.id, generation).then(() => {
      const v = this.views.get(summary.id);
      if (!ended || !v || generation !== this.generation) return;
      for (const l of this.endListeners) l(v);
    });
  }

  /** Reads what the summary lacks: the target step and agents (from the config) and the success rate. */
  private async loadDetails(client: RpcClient, runId: string, generation: number): Promise<void> {
    try {
      const [record, metrics] = await Promise.all([
        client.request('run/get', { runId }),
        client.request('metrics/query', { runId, series: [...new Set([successMetricNames.val, successMetricNames.train, ...outcomeMetricNames])].map((name) => ({ name })) }),
      ]);
      const v = this.views.get(runId);
      if (generation !== this.generation || !v) return;
      const config = safeParseExperimentConfig(record.run.config);
      let success = v.success;
      const outcome = this.outcomeSeries(runId).addSeries(metrics.series).outcome();
      // Team-wide series only: the query names no agent, but a server may return more.
      for (const s of metrics.series) {
        if (s.name !== successMetricNames.val && s.name !== successMetricNames.train) continue;
        if (s.agentId !== undefined || s.policyId !== undefined) continue;
        const last = s.points.at(-1);
        if (last) success = mergeSuccess(success, [{ name: s.name, value: last.value }], last.step);
      }
      this.views.set(runId, {
        ...v,
        // Runs recorded before the store kept their target fall back to the config's.
        steps: v.steps ?? record.run.targetSteps ?? (config.success ? config.config.training.steps : null),
        agents: config.success ? Object.keys(config.config.router) : v.agents,
        success,
        outcome,
        ...(record.warmUp ? { warmUp: withoutPoints(record.warmUp) } : {}),
      });
      this.fire(runId);
    } catch (e) {
      if (generation === this.generation) this.log(`reading run ${runId} failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private fire(runId: string | undefined): void {
    this.labels = null;
    for (const l of this.listeners) l(runId);
  }
}
