/**
 * The query thread outlives its failures: a query whose answer does not fit the thread's heap
 * kills that thread only; the query fails with InternalError saying so, and the next query runs
 * in a new thread. A real worker thread on a real store, its heap limited so the answer does not fit.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCodes, RpcError } from '../protocol/json-rpc.ts';
import { defaultDatabasePath, openRunStore } from '../store/index.ts';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { QueryThread } from './query-thread.ts';

test('a query that runs the thread out of memory fails alone; the next query gets a new thread', { timeout: 120_000 }, async () => {
  const ws = mkdtempSync(join(tmpdir(), 'troupe-query-oom-'));
  const store = openRunStore(defaultDatabasePath(ws));
  const big = store.createRun({ name: 'big', config: tinyConfig, state: 'done' }).id;
  // 4000 series x 20 steps: ~100k points, far over a 16 MB heap once read and serialised.
  for (let step = 0; step < 20; step++) store.commitStep(big, { step, metrics: Array.from({ length: 4000 }, (_, i) => ({ name: `m${i}`, value: step + i })) });
  const small = store.createRun({ name: 'small', config: tinyConfig, state: 'done' }).id;
  store.commitStep(small, { step: 0, metrics: [{ name: 'loss', value: 1 }] });
  const log: string[] = [];
  const thread = await QueryThread.open(store.path, (l) => log.push(l), { resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 } });
  try {
    await assert.rejects(thread.run('client', 'metrics/query', { runId: big }), (e: unknown) => {
      assert.ok(e instanceof RpcError && e.code === ErrorCodes.InternalError, String(e));
      assert.match(e.message, /^the query thread stopped: .*memory/);
      return true;
    });
    assert.match(log.join('\n'), /query thread stopped: .*memory.*the next query starts a new one/);
    const answer = JSON.parse((await thread.run('client', 'steps/list', { runId: small })).json) as { steps: Array<{ step: number }> };
    assert.deepEqual(answer.steps.map((s) => s.step), [0]);
    assert.equal(thread.pending, 0);
  } finally {
    await thread.close();
    store.close();
    rmSync(ws, { recursive: true, force: true });
  }
});
