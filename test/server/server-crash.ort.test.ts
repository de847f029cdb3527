/**
 * A server killed with SIGKILL mid-run: the next server on the workspace lists the run as
 * interrupted and resumes it to the end with every committed step kept and none repeated. Also: a
 * second server on a workspace that a live one serves is refused, naming the first.
 * `troupe serve` runs in child processes so it can really be killed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tinyConfigWithSteps } from '../fixtures/tiny-config.ts';
import { cliPath, connect, startServerProcess, type ServerProcess } from './server-harness.ts';

let ws = '';
const servers: ServerProcess[] = [];

before(() => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-crash-'));
});

after(() => {
  for (const s of servers) s.child.kill('SIGKILL');
  rmSync(ws, { recursive: true, force: true });
});

test('kill -9 of the server mid-run, restart: the run is listed as interrupted and resumes to done, nothing committed lost or repeated', async () => {
  const first = await startServerProcess(ws);
  servers.push(first);

  // While it is alive, another server on the same workspace is refused.
  const second = spawnSync(process.execPath, [cliPath, 'serve', '--workspace', ws], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(second.status, 1);
  assert.match(second.stderr, new RegExp(`already serving .* at ${first.url.replace(/[.]/g, '\\.')}`));

  const a = await connect(first.url, first.token);
  const { run } = await a.rpc.request('run/start', { config: tinyConfigWithSteps(4) });
  await a.waitFor('run/didProgress', (p) => p.runId === run.id && p.step === 1);
  first.child.kill('SIGKILL');
  assert.equal((await first.exited).signal, 'SIGKILL');
  await a.closed;
  assert.ok(existsSync(join(ws, '.troupe', 'server.json')), 'a killed server leaves its file behind');

  const restarted = await startServerProcess(ws);
  servers.push(restarted);
  const b = await connect(restarted.url, restarted.token);
  const listed = (await b.rpc.request('runs/list', {})).runs.find((r) => r.id === run.id);
  assert.ok(listed);
  assert.equal(listed.state, 'failed');
  assert.match(listed.error ?? '', /^interrupted:/);
  const committed = listed.lastCommittedStep!;
  assert.ok(committed >= 1, `step ${committed} was committed before the kill`);

  await b.rpc.request('run/resume', { runId: run.id });
  await b.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'done');
  const steps = (await b.rpc.request('steps/list', { runId: run.id })).steps.map((s) => s.step);
  assert.deepEqual(steps, [0, 1, 2, 3, 4]);
  // Steps committed before the kill kept their rows: the first train step still has its trajectories.
  const t1 = (await b.rpc.request('trajectories/query', { runId: run.id, step: 1, phase: 'train' })).trajectories;
  assert.equal(t1.length, 2);
  await b.close();

  restarted.child.kill('SIGTERM');
  assert.equal((await restarted.exited).code, 0);
  assert.ok(!existsSync(join(ws, '.troupe', 'server.json')), 'a server that exits cleanly removes its file');
});
