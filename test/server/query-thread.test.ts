/**
 * The editor's store queries run in the server's query thread, not on its event loop: a heavy query
 * (thousands of metric series) does not hold up `server/status`, clients are served fairly, and a
 * query cancelled before its turn never runs. Over a real socket, on a real store; the assertions
 * are about the order of answers, never about how long anything took.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { defaultDatabasePath, openRunStore } from '../../server/store/index.ts';
import { tinyConfig } from '../fixtures/tiny-config.ts';
import { connect, type TestClient } from './server-harness.ts';

/** Metric series of the big run: a `metrics/query` for all of them reads and serialises ~100k points. */
const SERIES = 2000;
const STEPS = 20;

let ws = '';
let runId = '';
let smallRunId = '';
let server: TroupeServer;
let token = '';
const clients: TestClient[] = [];
const logWaiters = new Set<{ re: RegExp; resolve: (line: string) => void }>();
/** The next server log line matching `re`. */
const logLine = (re: RegExp) =>
  new Promise<string>((resolve) => {
    const w = { re, resolve: (line: string) => (logWaiters.delete(w), resolve(line)) };
    logWaiters.add(w);
  });

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-query-thread-'));
  const store = openRunStore(defaultDatabasePath(ws));
  runId = store.createRun({ name: 'big', config: tinyConfig, state: 'done' }).id;
  for (let step = 0; step < STEPS; step++) store.commitStep(runId, { step, metrics: Array.from({ length: SERIES }, (_, i) => ({ name: `m${i}`, value: step + i / SERIES })) });
  smallRunId = store.createRun({ name: 'small', config: tinyConfig, state: 'done' }).id;
  store.commitStep(smallRunId, { step: 0, metrics: [{ name: 'loss', value: 1 }] });
  store.close();
  server = await TroupeServer.start({
    workspace: ws,
    log: (line) => {
      for (const w of [...logWaiters]) if (w.re.test(line)) w.resolve(line);
    },
  });
  token = readFileSync(server.tokenFile, 'utf8').trim();
});

after(async () => {
  for (const c of clients) await c.close();
  await server.close();
  rmSync(ws, { recursive: true, force: true });
});

async function client(): Promise<TestClient> {
  const c = await connect(server.url, token);
  clients.push(c);
  return c;
}

/** Resolves with the labels of the promises in the order they settled. */
function settleOrder(entries: Record<string, Promise<unknown>>): Promise<string[]> {
  const order: string[] = [];
  return Promise.all(Object.entries(entries).map(([k, p]) => p.then(() => order.push(k), () => order.push(k)))).then(() => order);
}

describe('the query thread', () => {
  test('answers a heavy query in full, the same as the store does', async () => {
    const c = await client();
    const { series } = await c.rpc.request('metrics/query', { runId });
    assert.equal(series.length, SERIES);
    assert.deepEqual(series.find((s) => s.name === 'm7')?.points, Array.from({ length: STEPS }, (_, step) => ({ step, value: step + 7 / SERIES })));
    const e = await c.rpc.request('metrics/query', { runId: 'no-such-run' }).then(() => null, (err: unknown) => err);
    assert.ok(e instanceof RpcResponseError && e.code === ErrorCodes.UnknownRun, String(e));
  });

  test('server/status is answered while a heavy query runs (on the event loop it waited behind it)', async () => {
    const c = await client();
    for (let round = 0; round < 3; round++) {
      const heavy = c.rpc.request('metrics/query', { runId });
      const status = c.rpc.request('server/status', {});
      assert.deepEqual(await settleOrder({ heavy, status }), ['status', 'heavy']);
    }
  });

  test('a client that pipelines many queries delays only itself: another client is served in its turn', async () => {
    const greedy = await client();
    const polite = await client();
    const greedyQueries = Array.from({ length: 8 }, () => greedy.rpc.request('metrics/query', { runId }));
    // Sent after all of greedy's, answered after at most the two already at the thread and one more.
    const mine = polite.rpc.request('steps/list', { runId: smallRunId });
    const order = await settleOrder({ ...Object.fromEntries(greedyQueries.map((p, i) => [`greedy${i}`, p])), polite: mine });
    assert.ok(order.indexOf('polite') <= 3, `answered in turn: ${order.join(' ')}`);
    assert.deepEqual((await mine).steps.map((s) => s.step), [0]);
  });

  test('a client that stops reading is closed, its queued queries are dropped unrun, and the others are served', async () => {
    const stalled = await client();
    const other = await client();
    const closedForNotReading = logLine(/closed, \d+ bytes unread \(the client stopped reading\)/);
    stalled.socket.pause();
    const flood = Array.from({ length: 200 }, () => stalled.rpc.request('metrics/query', { runId }).catch(() => null));
    void flood;
    // Sent after the whole flood, answered in its turn.
    assert.equal((await other.rpc.request('server/status', {})).clients >= 2, true);
    assert.deepEqual((await other.rpc.request('steps/list', { runId: smallRunId })).steps.map((s) => s.step), [0]);
    await closedForNotReading;
    // What the thread holds (at most two) finishes; nothing of the flood is left queued.
    assert.ok(server.pendingQueries <= 2, `${server.pendingQueries} queries still pending`);
    assert.deepEqual((await other.rpc.request('steps/list', { runId: smallRunId })).steps.map((s) => s.step), [0]);
    assert.equal(server.pendingQueries, 0);
  });

  test('a query cancelled before its turn is never run: RequestCancelled, and the others are answered', async () => {
    const c = await client();
    const cancel = new AbortController();
    const before = Array.from({ length: 4 }, () => c.rpc.request('metrics/query', { runId }));
    const cancelled = c.rpc.request('metrics/query', { runId }, { signal: cancel.signal });
    cancel.abort();
    const order = await settleOrder({ cancelled, last: before[3]! });
    assert.deepEqual(order, ['cancelled', 'last'], 'answered at once, not when its turn came');
    const e = await cancelled.then(() => null, (err: unknown) => err);
    assert.ok(e instanceof RpcResponseError && e.code === ErrorCodes.RequestCancelled, String(e));
    const done = await Promise.allSettled(before);
    assert.ok(done.every((d) => d.status === 'fulfilled'));
  });
});
