/**
 * The warm-up (the supervised warm start before step 0) as a phase of a run, through a real
 * `troupe serve` process and a real socket: its progress is reported (`run/didWarmUp`, and in
 * `run/get` with the loss curve so far); pause and stop take effect within a warm-up step or two
 * and free the slot for a queued run; a paused run resumes from its warm-up checkpoint; a server
 * killed with SIGKILL mid-warm-up leaves a run listed as interrupted during the warm-up, which
 * resumes from the last periodic warm-up checkpoint. Waits are on notifications, never on timers.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { tinyConfig } from '../fixtures/tiny-config.ts';
import { connect, startServerProcess, type ServerProcess, type TestClient } from './server-harness.ts';

const workspaces: string[] = [];
const servers: ServerProcess[] = [];

after(() => {
  for (const s of servers) s.child.kill('SIGKILL');
  for (const w of workspaces) rmSync(w, { recursive: true, force: true });
});

/** Warm-up steps: long enough to act on; a checkpoint every tenth (6 steps). */
const STEPS = 60;
/** The tiny config with a longer warm-up and one RL step. */
const longWarmUp = (name: string) => ({ ...tinyConfig, name, warmStart: { ...tinyConfig.warmStart, steps: STEPS, batchSize: 4 }, training: { ...tinyConfig.training, steps: 1, testEpisodes: 0 } });

async function serve(): Promise<{ server: ServerProcess; client: TestClient; ws: string }> {
  const ws = mkdtempSync(join(tmpdir(), 'troupe-warm-up-'));
  workspaces.push(ws);
  const server = await startServerProcess(ws);
  servers.push(server);
  return { server, client: await connect(server.url, server.token), ws };
}

test('warm-up progress is reported; pause and stop act within a warm-up step or two, a queued run starts at once, a paused run resumes from its warm-up checkpoint', { timeout: 300_000 }, async (t) => {
  const { server, client: c } = await serve();
  const a = (await c.rpc.request('run/start', { config: longWarmUp('a') })).run;
  const b = (await c.rpc.request('run/start', { config: longWarmUp('b') })).run;
  assert.equal(b.state, 'queued');

  // Progress: demonstrations first, then training steps with a loss, an ETA and loss points.
  const first = await c.waitFor('run/didWarmUp', (p) => p.runId === a.id && p.stage === 'training' && p.step >= 3 && p.loss !== null);
  assert.deepEqual([first.modelId, first.model, first.models, first.steps], ['base', 1, 1, STEPS]);
  assert.equal(c.received('run/didWarmUp').find((p) => p.runId === a.id)!.stage, 'demonstrations');
  assert.ok(first.etaMs !== null && first.etaMs > 0);
  const got = await c.rpc.request('run/get', { runId: a.id });
  assert.ok(got.warmUp, 'run/get carries the warm-up while it trains');
  assert.ok(got.warmUp.step >= first.step && got.warmUp.points.length >= first.step, 'with the loss curve so far');
  assert.deepEqual(got.warmUp.points.slice(0, 3).map((p) => p.step), [1, 2, 3]);
  assert.match(server.stderr(), /warm start \d+\/60 {2}loss \d\.\d{4}/, 'the server log shows the warm-up');

  // Pause: 'paused' within seconds, before step 0, its warm-up checkpointed where it stopped.
  let t0 = performance.now();
  await c.rpc.request('run/pause', { runId: a.id });
  const paused = await c.waitFor('run/didChangeState', (p) => p.runId === a.id && p.state === 'paused', 30_000);
  const pauseMs = performance.now() - t0;
  assert.equal(paused.run.lastCommittedStep, null, 'paused in the warm-up, not after it');
  const atPause = c.received('run/didWarmUp').filter((p) => p.runId === a.id).at(-1)!;
  assert.ok(atPause.checkpointStep !== null && atPause.checkpointStep === atPause.step && atPause.step < STEPS, JSON.stringify(atPause));
  assert.equal((await c.rpc.request('run/get', { runId: a.id })).warmUp, undefined, 'a paused run is not warming up');

  // The queued run took the slot; stopping it in its warm-up ends it within seconds.
  await c.waitFor('run/didWarmUp', (p) => p.runId === b.id && p.stage === 'training' && p.step >= 1);
  t0 = performance.now();
  assert.equal((await c.rpc.request('run/stop', { runId: b.id })).run.state, 'stopping');
  const stopped = await c.waitFor('run/didChangeState', (p) => p.runId === b.id && p.state === 'done', 30_000);
  const stopMs = performance.now() - t0;
  assert.equal(stopped.run.lastCommittedStep, null);
  const bLast = c.received('run/didWarmUp').filter((p) => p.runId === b.id).at(-1)!;
  assert.ok(bLast.step < STEPS, 'stopped in the warm-up');
  // Both take a warm-up step, a checkpoint write and the worker's exit: far below the rest of the warm-up.
  const stepMs = (bLast.etaMs ?? 0) / Math.max(1, STEPS - bLast.step);
  t.diagnostic(`pause took ${pauseMs.toFixed(0)} ms, stop ${stopMs.toFixed(0)} ms (request to state change); a warm-up step about ${stepMs.toFixed(0)} ms`);
  assert.ok(pauseMs < 15_000 && stopMs < 15_000, `pause took ${pauseMs.toFixed(0)} ms, stop ${stopMs.toFixed(0)} ms`);

  // Resume: the warm-up continues from its checkpoint (the first report carries the curve so far), then RL.
  const before = c.received('run/didWarmUp').length;
  await c.rpc.request('run/resume', { runId: a.id });
  const resumed = await c.waitFor('run/didWarmUp', (p) => p.runId === a.id && p.stage === 'training' && c.received('run/didWarmUp').indexOf(p) >= before);
  assert.equal(resumed.step, atPause.step, 'continues at the paused step');
  assert.equal(resumed.points[0]!.step, 1);
  assert.equal(resumed.points.at(-1)!.step, atPause.step);
  await c.waitFor('run/didChangeState', (p) => p.runId === a.id && p.state === 'done', 240_000);
  assert.deepEqual((await c.rpc.request('steps/list', { runId: a.id })).steps.map((s) => s.step), [0, 1]);
  assert.equal((await c.rpc.request('checkpoints/list', { runId: a.id })).checkpoints.filter((k) => k.kind === 'warmstart').length, 1);
  await c.close();
});

test('kill -9 during the warm-up: the run is listed as interrupted during the warm-up and resumes from its last warm-up checkpoint', { timeout: 300_000 }, async () => {
  const { server: first, client: a, ws } = await serve();
  const { run } = await a.rpc.request('run/start', { config: longWarmUp('killed') });
  // Past the second periodic checkpoint (every 6 steps), before the end.
  const seen = await a.waitFor('run/didWarmUp', (p) => p.runId === run.id && (p.checkpointStep ?? 0) >= 12);
  assert.ok(seen.step < STEPS);
  first.child.kill('SIGKILL');
  await first.exited;
  await a.closed;

  const restarted = await startServerProcess(ws);
  servers.push(restarted);
  const b = await connect(restarted.url, restarted.token);
  const listed = (await b.rpc.request('runs/list', {})).runs.find((r) => r.id === run.id)!;
  assert.equal(listed.state, 'failed');
  const m = /^interrupted: the process training it ended during the warm-up \(checkpointed at step (\d+) of 60\)/.exec(listed.error ?? '');
  assert.ok(m, listed.error ?? '');
  const checkpointed = Number(m[1]);
  assert.ok(checkpointed >= seen.checkpointStep! && checkpointed % 6 === 0);

  await b.rpc.request('run/resume', { runId: run.id });
  const resumed = await b.waitFor('run/didWarmUp', (p) => p.runId === run.id && p.stage === 'training');
  assert.equal(resumed.step, checkpointed, 'the warm-up continues from its checkpoint, not from step 0');
  assert.equal(resumed.checkpointStep, checkpointed);
  assert.equal(resumed.points.at(-1)!.step, checkpointed, 'with its loss curve so far');
  await b.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'done', 240_000);
  assert.deepEqual((await b.rpc.request('steps/list', { runId: run.id })).steps.map((s) => s.step), [0, 1]);
  await b.close();
});
