/**
 * Deleting and renaming runs through the protocol, on a real server and socket: a live run
 * (training or queued) cannot be deleted; an ended run's rows and its folder inside .troupe/runs
 * go, and every client hears `run/didDelete`; a folder that leads outside .troupe/runs (here by a
 * symbolic link) is kept; a rename is broadcast as `run/didRename` and listed; a re-run starts a
 * new run from the run folder's config.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { tinyConfigWithSteps } from '../fixtures/tiny-config.ts';
import { connect } from './server-harness.ts';

let ws = '';
let server: TroupeServer;
let token = '';

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-delete-'));
  // One slot: the second run waits queued.
  server = await TroupeServer.start({ workspace: ws, log: () => {}, maxConcurrentRuns: 1 });
  token = readFileSync(server.tokenFile, 'utf8').trim();
});

after(async () => {
  await server.close();
  rmSync(ws, { recursive: true, force: true });
});

const refusedAsLive = (e: unknown) => e instanceof RpcResponseError && e.code === ErrorCodes.InvalidRunState && /stop it before deleting it/.test(e.message);

test('live runs are refused; ended ones are deleted with their folder inside .troupe/runs only; renames are broadcast', async () => {
  const c = await connect(server.url, token);
  const watcher = await connect(server.url, token);
  const training = (await c.rpc.request('run/start', { config: tinyConfigWithSteps(50) })).run;
  const queued = (await c.rpc.request('run/start', { config: tinyConfigWithSteps(50) })).run;
  assert.equal(queued.state, 'queued');

  // Live: refused, and nothing is touched.
  await assert.rejects(c.rpc.request('run/delete', { runId: training.id }), refusedAsLive);
  await assert.rejects(c.rpc.request('run/delete', { runId: queued.id }), refusedAsLive);
  assert.ok(existsSync(training.runDir) && existsSync(queued.runDir));

  // A rename while it trains: answered, listed, broadcast.
  const renamed = (await c.rpc.request('run/rename', { runId: training.id, name: '  baseline, seed 1  ' })).run;
  assert.equal(renamed.name, 'baseline, seed 1');
  assert.equal((await watcher.waitFor('run/didRename', (p) => p.runId === training.id)).run.name, 'baseline, seed 1');
  assert.equal((await c.rpc.request('runs/list', {})).runs.find((r) => r.id === training.id)?.name, 'baseline, seed 1');
  await assert.rejects(c.rpc.request('run/rename', { runId: training.id, name: '   ' }), (e) => e instanceof RpcResponseError && e.code === ErrorCodes.InvalidParams);

  // A re-run: a new run with the same config as its run folder keeps it.
  const again = (await c.rpc.request('run/rerun', { runId: queued.id })).run;
  assert.notEqual(again.id, queued.id);
  assert.equal(again.state, 'queued');
  assert.equal(readFileSync(join(again.runDir, 'config.json'), 'utf8'), readFileSync(join(queued.runDir, 'config.json'), 'utf8'));
  await c.rpc.request('run/stop', { runId: again.id });

  // The queued run, stopped (done at once), its folder moved outside .troupe/runs behind a link:
  // the rows go, the folder the link leads to stays.
  await c.rpc.request('run/stop', { runId: queued.id });
  const outside = join(ws, 'kept-elsewhere');
  mkdirSync(outside);
  renameSync(queued.runDir, join(outside, 'run'));
  symlinkSync(join(outside, 'run'), queued.runDir);
  const linked = await c.rpc.request('run/delete', { runId: queued.id });
  assert.deepEqual(linked, { runId: queued.id, removedFolder: null, keptFolder: queued.runDir });
  assert.ok(existsSync(join(outside, 'run', 'config.json')), 'the folder outside .troupe/runs is kept');
  await watcher.waitFor('run/didDelete', (p) => p.runId === queued.id);

  // The training run, stopped: deleted with its folder.
  await c.rpc.request('run/stop', { runId: training.id });
  await c.waitFor('run/didChangeState', (p) => p.runId === training.id && p.state === 'done');
  const deleted = await c.rpc.request('run/delete', { runId: training.id });
  assert.deepEqual(deleted, { runId: training.id, removedFolder: training.runDir, keptFolder: null });
  assert.ok(!existsSync(training.runDir));
  await watcher.waitFor('run/didDelete', (p) => p.runId === training.id);
  const left = (await c.rpc.request('runs/list', {})).runs.map((r) => r.id);
  assert.ok(!left.includes(training.id) && !left.includes(queued.id), left.join(', '));
  await assert.rejects(c.rpc.request('run/delete', { runId: training.id }), (e) => e instanceof RpcResponseError && e.code === ErrorCodes.UnknownRun);
  await c.close();
  await watcher.close();
});
