/**
 * The runs model against a real RpcClient whose frames go to a fake server: requests are answered
 * from handler functions, notifications are pushed as the server would send them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { z } from 'zod';
import { RpcClient } from '../../server/protocol/rpc-client.ts';
import type { RunSummary } from '../../server/protocol/trajectory.ts';
import { OutcomeSeries, outcomeMetricNames } from '../../webview/src/run-outcome.ts';
import { mergeSuccess, pickActiveRun, RunsModel, type RunView } from './runs-model.ts';

const config: unknown = JSON.parse(readFileSync(new URL('../../configs/plan-path/L2-lora.json', import.meta.url), 'utf8'));
// The model reads a run's target step from its stored config: the flagship's own value, read the same way.
const configSteps = z.object({ training: z.object({ steps: z.number() }) }).parse(config).training.steps;

const run = (id: string, o: Partial<RunSummary> = {}): RunSummary => ({
  id,
  name: `run ${id}`,
  state: 'done',
  createdAt: 1_000,
  updatedAt: 1_000,
  runDir: `/w/.troupe/runs/${id}`,
  lastCommittedStep: null,
  targetSteps: null,
  ...o,
});

type Handler = (params: Record<string, unknown>) => unknown;

function fakeServer(handlers: Record<string, Handler>) {
  const sent: { method?: string; params?: Record<string, unknown> }[] = [];
  const client: RpcClient = new RpcClient((text) => {
    const msg = JSON.parse(text) as { id?: number; method: string; params: Record<string, unknown> };
    sent.push(msg);
    if (msg.id === undefined) return;
    const h = handlers[msg.method];
    const reply = h ? { jsonrpc: '2.0', id: msg.id, result: h(msg.params) } : { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: `no ${msg.method}` } };
    setImmediate(() => client.receive(JSON.stringify(reply)));
  });
  const notify = (method: string, params: unknown) => client.receive(JSON.stringify({ jsonrpc: '2.0', method, params }));
  return { client, sent, notify };
}

const series = (name: string, points: [number, number][]) => ({ name, points: points.map(([step, value]) => ({ step, value })) });

test('success: validation wins over training, newer over older', () => {
  const val = (value: number) => ({ name: 'val/success', value });
  const train = (value: number) => ({ name: 'train/success', value });
  let s = mergeSuccess(null, [train(0.2)], 1);
  assert.deepEqual(s, { value: 0.2, source: 'train', step: 1 });
  s = mergeSuccess(s, [train(0.3), val(0.6)], 2);
  assert.deepEqual(s, { value: 0.6, source: 'val', step: 2 });
  assert.deepEqual(mergeSuccess(s, [train(0.9)], 3), s, 'a training value does not replace validation');
  // Per-agent values are not the team's.
  assert.deepEqual(mergeSuccess(null, [{ name: 'train/success', value: 1, agentId: 'tool' }], 1), null);
});

test('the active run is a training one before a queued or paused one, then the latest', () => {
  const v = (id: string, state: RunSummary['state'], updatedAt: number): RunView => ({ summary: run(id, { state, updatedAt }), step: null, steps: null, success: null, etaMs: null, agents: [], outcome: new OutcomeSeries().outcome() });
  assert.equal(pickActiveRun([v('a', 'paused', 9), v('b', 'running', 1), v('c', 'done', 10)])?.summary.id, 'b');
  assert.equal(pickActiveRun([v('a', 'paused', 9), v('b', 'paused', 10)])?.summary.id, 'b');
  assert.equal(pickActiveRun([v('a', 'done', 1), v('b', 'failed', 2)]), undefined);
});

test('runs load with their target step, agents and latest success, newest first', async () => {
  const server = fakeServer({
    'runs/list': () => ({ runs: [run('old', { createdAt: 1 }), run('new', { createdAt: 2, state: 'running', lastCommittedStep: 12 })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }),
    'metrics/query': (p) =>
      p['runId'] === 'new'
        ? { series: [series('train/success', [[11, 0.5], [12, 0.55]]), series('val/success', [[0, 0.64], [10, 0.78]])] }
        : { series: [] },
  });
  const model = new RunsModel();
  await model.setClient(server.client);
  assert.deepEqual(model.runs.map((r) => r.summary.id), ['new', 'old']);
  const v = model.get('new')!;
  assert.equal(v.step, 12);
  assert.equal(v.steps, configSteps);
  assert.deepEqual(v.agents, ['tool', 'plan']);
  assert.deepEqual(v.success, { value: 0.78, source: 'val', step: 10 });
  assert.equal(model.get('old')!.success, null);
  assert.equal(model.activeRun()?.summary.id, 'new');
  // Only the team-wide success series and the outcome's are asked for.
  const q = server.sent.find((m) => m.method === 'metrics/query');
  assert.deepEqual(q?.params?.['series'], [...new Set(['val/success', 'train/success', ...outcomeMetricNames])].map((name) => ({ name })));
});

test('notifications keep the runs live', async () => {
  const server = fakeServer({
    'runs/list': () => ({ runs: [run('r1', { state: 'running' })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }),
    'metrics/query': () => ({ series: [] }),
  });
  const model = new RunsModel();
  const changes: (string | undefined)[] = [];
  model.onDidChange((id) => changes.push(id));
  await model.setClient(server.client);
  changes.length = 0;

  server.notify('run/didProgress', { runId: 'r1', step: 3, steps: 40, stepMs: 1200, etaMs: 44_400, metrics: [{ name: 'train/success', value: 0.25 }, { name: 'val/success', value: 0.5 }] });
  let v = model.get('r1')!;
  assert.equal(v.step, 3);
  assert.equal(v.steps, 40, 'progress carries the current target (a resume may have changed it)');
  assert.equal(v.etaMs, 44_400);
  assert.deepEqual(v.success, { value: 0.5, source: 'val', step: 3 });
  assert.deepEqual(changes, ['r1']);

  server.notify('run/didChangeState', { runId: 'r1', state: 'paused', previous: 'running', run: run('r1', { state: 'paused', updatedAt: Date.now() + 1000, lastCommittedStep: 3 }) });
  v = model.get('r1')!;
  assert.equal(v.summary.state, 'paused');
  assert.equal(v.steps, 40, 'what the summary lacks survives a state change');

  // A new run appears at the top and gets its details.
  const detailed = new Promise<void>((resolve) => model.onDidChange((id) => id === 'r2' && model.get('r2')?.steps !== null && resolve()));
  server.notify('run/didChangeState', { runId: 'r2', state: 'queued', previous: null, run: run('r2', { state: 'queued', createdAt: 5_000 }) });
  assert.deepEqual(model.runs.map((r) => r.summary.id), ['r2', 'r1']);
  assert.equal(changes.at(-1), undefined, 'a new run changes the list');
  await detailed;
  assert.equal(model.get('r2')!.steps, configSteps);
});

test('a renamed run keeps its details under its new name; a deleted run leaves the list', async () => {
  const server = fakeServer({
    'runs/list': () => ({ runs: [run('r1', { state: 'done' }), run('r2', { state: 'done', createdAt: 5_000 })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }),
    'metrics/query': () => ({ series: [] }),
  });
  const model = new RunsModel();
  await model.setClient(server.client);
  const changes: (string | undefined)[] = [];
  model.onDidChange((id) => changes.push(id));

  server.notify('run/didRename', { runId: 'r1', run: run('r1', { state: 'done', name: 'baseline' }) });
  assert.equal(model.get('r1')?.summary.name, 'baseline');
  assert.equal(model.labelOf('r1'), 'baseline');
  assert.equal(model.get('r1')?.steps, configSteps, 'the details read before stay');

  server.notify('run/didDelete', { runId: 'r2' });
  assert.deepEqual(model.runs.map((r) => r.summary.id), ['r1']);
  assert.equal(changes.at(-1), undefined, 'a deletion changes the list');
});

test('a dropped connection keeps the last run list until another server lists its own; a failed list is reported, not thrown', async () => {
  const first = fakeServer({
    'runs/list': () => ({ runs: [run('a'), run('b', { createdAt: 2_000 })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }),
    'metrics/query': () => ({ series: [] }),
  });
  const lines: string[] = [];
  const model = new RunsModel((l) => lines.push(l));
  await model.setClient(first.client);
  await model.setClient(undefined);
  assert.equal(model.connected, false);
  assert.deepEqual(model.runs.map((r) => r.summary.id), ['b', 'a'], 'the runs stay listed while disconnected');
  // The next server's list replaces them; a list that fails says why, in words without the method.
  const second = fakeServer({ 'runs/list': () => ({ runs: [run('b', { createdAt: 2_000 })] }), 'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }), 'metrics/query': () => ({ series: [] }) });
  await model.setClient(second.client);
  assert.deepEqual(model.runs.map((r) => r.summary.id), ['b']);
  const broken = fakeServer({});
  await model.setClient(broken.client);
  assert.equal(model.error, 'no runs/list');
  assert.equal(lines.length, 1);
});

test('a run that ends while followed is announced once, with its outcome; runs listed as ended are not', async () => {
  let finalMetrics = false;
  const server = fakeServer({
    'runs/list': () => ({ runs: [run('r1', { state: 'running', lastCommittedStep: 1 }), run('old', { state: 'done' })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId'])), config } }),
    'metrics/query': (p) =>
      p['runId'] === 'r1'
        ? { series: [series('val/success', [[0, 0.5], [1, 0.75], ...(finalMetrics ? ([[2, 0.5]] as [number, number][]) : [])]), series('test/success', finalMetrics ? [[0, 0.25], [2, 0.5]] : [[0, 0.25]])] }
        : { series: [series('test/success', [[0, 0.1], [3, 0.2]])] },
  });
  const model = new RunsModel();
  const ended: RunView[] = [];
  model.onDidEnd((v) => ended.push(v));
  await model.setClient(server.client);
  assert.equal(model.get('old')!.outcome.test?.after, 0.2, 'an ended run listed at load has its outcome');
  // Progress extends the outcome without a query.
  server.notify('run/didProgress', { runId: 'r1', step: 2, steps: 2, stepMs: 1000, etaMs: 0, metrics: [{ name: 'test/success', value: 0.5 }, { name: 'test/policy_step', value: 2 }] });
  assert.deepEqual(model.get('r1')!.outcome.test, { before: 0.25, after: 0.5, step: 2, policyStep: 2, games: [] });
  finalMetrics = true;
  const announced = new Promise<void>((resolve) => model.onDidEnd(() => resolve()));
  server.notify('run/didChangeState', { runId: 'r1', state: 'done', previous: 'running', run: run('r1', { state: 'done', updatedAt: Date.now() + 1000, lastCommittedStep: 2 }) });
  await announced;
  assert.deepEqual(ended.map((v) => v.summary.id), ['r1']);
  assert.deepEqual(ended[0]!.outcome.best, { step: 1, success: 0.75 });
  // A state notification for a run already ended announces nothing more.
  server.notify('run/didChangeState', { runId: 'r1', state: 'done', previous: 'done', run: run('r1', { state: 'done', updatedAt: Date.now() + 2000, lastCommittedStep: 2 }) });
  // A refresh's round trips come after any reading that notification could have started.
  await model.refresh();
  assert.equal(ended.length, 1);
});

test("a run's warm-up: read with the run, kept live by run/didWarmUp, gone once step 0 is committed", async () => {
  const warmUp = { modelId: 'base', model: 1, models: 1, stage: 'training', step: 12, steps: 300, loss: 2.5, etaMs: 60_000, checkpointStep: null };
  const server = fakeServer({
    'runs/list': () => ({ runs: [run('r1', { state: 'running' })] }),
    'run/get': (p) => ({ run: { ...run(String(p['runId']), { state: 'running' }), config }, warmUp: { ...warmUp, points: [{ step: 12, loss: 2.5 }] } }),
    'metrics/query': () => ({ series: [] }),
  });
  const model = new RunsModel();
  await model.setClient(server.client);
  assert.deepEqual(model.get('r1')!.warmUp, warmUp, 'a window opened mid-warm-up reads it with the run (without its curve)');
  server.notify('run/didWarmUp', { runId: 'r1', ...warmUp, step: 30, checkpointStep: 30, points: [{ step: 30, loss: 2 }] });
  assert.deepEqual(model.get('r1')!.warmUp, { ...warmUp, step: 30, checkpointStep: 30 });
  server.notify('run/didProgress', { runId: 'r1', step: 0, steps: 40, stepMs: 900, etaMs: null, metrics: [] });
  assert.equal(model.get('r1')!.warmUp, undefined);
  assert.equal(model.get('r1')!.step, 0);
});
