/**
 * A run that outgrows its memory fails with an out-of-memory error and the server keeps serving:
 * past the server's memory limit (the process's resident set, sampled while runs train) the run is
 * stopped and failed; a run worker whose JavaScript heap reaches its limit dies alone. Real server,
 * real socket, real training; the limits are set low so that the tiny run meets them.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ResourceLimits } from 'node:worker_threads';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { tinyConfigWithSteps } from '../fixtures/tiny-config.ts';
import { connect } from './server-harness.ts';

async function withServer(o: { memoryLimitBytes?: number; workerResourceLimits?: ResourceLimits }, body: (c: Awaited<ReturnType<typeof connect>>) => Promise<void>): Promise<void> {
  const ws = mkdtempSync(join(tmpdir(), 'troupe-run-memory-'));
  const server = await TroupeServer.start({ workspace: ws, log: () => {}, ...o });
  const c = await connect(server.url, readFileSync(server.tokenFile, 'utf8').trim());
  try {
    await body(c);
  } finally {
    await c.close();
    await server.close();
    rmSync(ws, { recursive: true, force: true });
  }
}

test('past the server memory limit the training run fails with out of memory, and the server keeps serving', { timeout: 300_000 }, async () => {
  // A limit below any process: the first sample after the worker starts is over it.
  await withServer({ memoryLimitBytes: 1 }, async (c) => {
    const { run } = await c.rpc.request('run/start', { config: tinyConfigWithSteps(50) });
    const failed = await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'failed', 240_000);
    assert.match(failed.run.error ?? '', /^out of memory: the server reached [\d.]+ GiB, over its limit of 0\.0 GiB .* while this run trained; the run was stopped so that the server keeps serving/);
    const status = await c.rpc.request('server/status', {});
    assert.deepEqual(status.activeRuns, []);
    assert.equal((await c.rpc.request('run/get', { runId: run.id })).run.state, 'failed');
    assert.ok(!existsSync(join(failed.run.runDir, 'run.lock')), 'its lock is released: it can be resumed or closed');
    assert.equal((await c.rpc.request('run/stop', { runId: run.id })).run.state, 'done');
  });
});

test('a run worker whose JavaScript heap reaches its limit fails its run alone, naming the limit', { timeout: 300_000 }, async () => {
  await withServer({ workerResourceLimits: { maxOldGenerationSizeMb: 12, maxYoungGenerationSizeMb: 4 } }, async (c) => {
    const { run } = await c.rpc.request('run/start', { config: tinyConfigWithSteps(2) });
    const failed = await c.waitFor('run/didChangeState', (p) => p.runId === run.id && p.state === 'failed', 240_000);
    assert.match(failed.run.error ?? '', /^out of memory: the run worker's JavaScript heap reached its limit of 12 MB/);
    const status = await c.rpc.request('server/status', {});
    assert.deepEqual(status.activeRuns, []);
    assert.equal((await c.rpc.request('runs/list', {})).runs.length, 1);
  });
});
