/**
 * A real run driven entirely through the protocol, over a real socket: start → live state and
 * progress notifications → done, then every query the editor makes on what it committed; a client
 * that disconnects mid-run and a new one that finds the run again; pause → resume; stop; export.
 * Real ONNX Runtime, real SQLite; waits are on notifications, never on timers.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { tinyConfigWithSteps } from '../fixtures/tiny-config.ts';
import { connect, type TestClient } from './server-harness.ts';

let ws = '';
let server: TroupeServer;
let token = '';

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-run-'));
  server = await TroupeServer.start({ workspace: ws, log: () => {} });
  token = readFileSync(server.tokenFile, 'utf8').trim();
});

after(async () => {
  await server.close();
  rmSync(ws, { recursive: true, force: true });
});

const stepsOf = async (c: TestClient, runId: string) => (await c.rpc.request('steps/list', { runId })).steps.map((s) => s.step);

describe('a run driven through the protocol', () => {
  let runId = '';

  test('run/start → running, progress for steps 0..2 with per-agent metrics, → done; a client that left mid-run is replaced by one that finds the run', async () => {
    const a = await connect(server.url, token);
    const watcher = await connect(server.url, token);
    const started = await a.rpc.request('run/start', { config: tinyConfigWithSteps(2), workDoneToken: 'start-1' });
    runId = started.run.id;
    assert.ok(['running', 'queued'].includes(started.run.state));
    const progress = a.received('$/progress').filter((p) => p.token === 'start-1').map((p) => p.value.kind);
    assert.deepEqual(progress, ['begin', 'end']);

    // The watcher leaves after step 0; a new client finds the run still training.
    await watcher.waitFor('run/didProgress', (p) => p.runId === runId && p.step === 0);
    await watcher.close();
    const b = await connect(server.url, token);
    const listed = (await b.rpc.request('runs/list', {})).runs.find((r) => r.id === runId);
    assert.ok(listed, 'the run is listed for a new client');
    assert.ok(['running', 'done'].includes(listed.state));
    assert.equal(listed.targetSteps, 2);

    await a.waitFor('run/didChangeState', (p) => p.runId === runId && p.state === 'done');
    const steps = a.received('run/didProgress').filter((p) => p.runId === runId);
    assert.deepEqual(steps.map((p) => p.step), [0, 1, 2]);
    const states = a.received('run/didChangeState').filter((p) => p.runId === runId).map((p) => p.state);
    assert.equal(states.at(-1), 'done');
    assert.ok(states.includes('running'));
    const last = steps.at(-1)!;
    assert.equal(last.steps, 2);
    assert.ok(last.metrics.some((m) => m.agentId === 'tool') && last.metrics.some((m) => m.agentId === 'plan'), 'per-agent metrics');
    assert.ok(last.metrics.some((m) => m.name.startsWith('val/')), 'validation metrics on the last step');
    // The late client saw the end too.
    await b.waitFor('run/didChangeState', (p) => p.runId === runId && p.state === 'done');
    await Promise.all([a.close(), b.close()]);
  });

  test('queries: steps, metric series, filtered trajectories with paging, one trajectory with sibling branches, the same task across steps, checkpoints', async () => {
    const c = await connect(server.url, token);
    assert.deepEqual(await stepsOf(c, runId), [0, 1, 2]);
    const run = (await c.rpc.request('run/get', { runId })).run;
    assert.equal((run.config as { name: string }).name, 'tiny plan-path L2');

    const all = (await c.rpc.request('metrics/query', { runId })).series;
    const val = all.find((s) => s.name === 'val/success' && s.agentId === undefined);
    assert.ok(val, `val/success among ${all.map((s) => s.name).join(', ')}`);
    assert.deepEqual(val.points.map((p) => p.step), [0, 1, 2]);
    const later = (await c.rpc.request('metrics/query', { runId, series: [{ name: 'val/success' }], fromStep: 1 })).series;
    assert.deepEqual(later[0]!.points.map((p) => p.step), [1, 2]);

    const train = (await c.rpc.request('trajectories/query', { runId, step: 1, phase: 'train' })).trajectories;
    assert.equal(train.length, 2, 'envsPerStep trajectories at step 1');
    const page = (await c.rpc.request('trajectories/query', { runId, phase: 'validation', limit: 3, offset: 2 })).trajectories;
    assert.equal(page.length, 3);
    const failed = (await c.rpc.request('trajectories/query', { runId, success: false })).trajectories;
    assert.ok(failed.every((t) => !t.success));
    const rich = (await c.rpc.request('trajectories/query', { runId, minReward: 0.5 })).trajectories;
    assert.ok(rich.every((t) => t.teamReward >= 0.5));

    const detail = (await c.rpc.request('trajectory/get', { trajectoryId: train[0]!.id })).trajectory;
    assert.equal(detail.trajectory.id, train[0]!.id);
    assert.ok(detail.turns.length > 0);
    for (const t of detail.turns) {
      assert.equal(t.kept, true);
      // K = 2 under tree sampling: each kept turn has the other branch as a sibling.
      assert.ok(t.siblings.some((s) => s.turn === t.turn && s.agentId === t.agentId && s.branch !== t.branch), `turn ${t.turn} ${t.agentId} has its other branch`);
    }

    const seed = page[0]!.envSeed;
    const sameTask = (await c.rpc.request('trajectories/forTask', { runId, envSeed: seed })).trajectories;
    assert.deepEqual(sameTask.map((t) => t.step).sort(), [0, 1, 2]);
    assert.ok(sameTask.every((t) => t.envSeed === seed && t.phase === 'validation'));

    const cks = (await c.rpc.request('checkpoints/list', { runId })).checkpoints;
    assert.ok(cks.some((k) => k.kind === 'final' && k.step === 2), cks.map((k) => `${k.kind}@${k.step}`).join(', '));
    await c.close();
  });

  test('adapters/export writes the PEFT adapters and the base model, with $/progress', async () => {
    const c = await connect(server.url, token);
    const r = await c.rpc.request('adapters/export', { runId, outDir: 'exported', workDoneToken: 7 });
    assert.equal(r.outDir, join(ws, 'exported'));
    assert.equal(r.step, 2);
    for (const f of ['tool-lora/adapter_config.json', 'tool-lora/adapter_model.safetensors', 'plan-lora/adapter_model.safetensors', 'base.model/model.safetensors', 'export.json']) {
      assert.ok(r.files.includes(join(ws, 'exported', f)), `${f} in ${r.files.join(', ')}`);
      assert.ok(existsSync(join(ws, 'exported', f)));
    }
    assert.deepEqual(c.received('$/progress').filter((p) => p.token === 7).map((p) => p.value.kind), ['begin', 'end']);
    await assert.rejects(c.rpc.request('adapters/export', { runId, outDir: 'exported' }), /not empty/);
    await c.close();
  });

  test('pause at a step boundary → paused; resume → done, every step committed once; invalid transitions are refused', async () => {
    writeFileSync(join(ws, 'tiny.json'), JSON.stringify(tinyConfigWithSteps(3)));
    const c = await connect(server.url, token);
    const { run } = await c.rpc.request('run/start', { configPath: 'tiny.json' });
    await c.waitFor('run/didProgress', (p) => p.runId === run.id && p.step === 1);
    await c.rpc.request('run/pause', { runId: run.id });
    const paused = await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'paused');
    const at = paused.run.lastCommittedStep!;
    assert.ok(at >= 1 && at < 3, `paused after step ${at}`);
    await assert.rejects(c.rpc.request('run/pause', { runId: run.id }), /paused/);
    // Resume with a new target: the run records it and trains to it.
    const resumedRun = (await c.rpc.request('run/resume', { runId: run.id, steps: 4 })).run;
    assert.equal(resumedRun.targetSteps, 4);
    await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'done');
    assert.deepEqual(await stepsOf(c, run.id), [0, 1, 2, 3, 4]);
    const resumed = c.received('run/didProgress').filter((p) => p.runId === run.id).map((p) => p.step);
    assert.deepEqual(resumed, [0, 1, 2, 3, 4], 'progress once per step across the pause');
    await assert.rejects(c.rpc.request('run/resume', { runId: run.id }), /done/);
    await c.close();
  });

  test('stop → stopping at once → done at the step boundary', async () => {
    const c = await connect(server.url, token);
    const { run } = await c.rpc.request('run/start', { config: tinyConfigWithSteps(4) });
    await c.waitFor('run/didProgress', (p) => p.runId === run.id && p.step === 0);
    const stopped = await c.rpc.request('run/stop', { runId: run.id });
    assert.equal(stopped.run.state, 'stopping');
    const done = await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'done');
    assert.ok(done.run.lastCommittedStep! < 4, 'stopped before the last step');
    await c.close();
  });
});
