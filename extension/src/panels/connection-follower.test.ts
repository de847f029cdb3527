/**
 * followConnection against real RpcClients: notifications are fed to them as frames, as the
 * server's socket would; the connection manager's event is the test's.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcClient } from '../../../server/protocol/rpc-client.ts';
import { fakeServer } from '../test-util.ts';
import { followConnection } from './connection-follower.ts';

const progress = (runId: string, step: number) => JSON.stringify({ jsonrpc: '2.0', method: 'run/didProgress', params: { runId, step, steps: 10, stepMs: 5, etaMs: null, metrics: [] } });

test('a panel follows the connection: told of each change, its listeners on the live client only, caught up after a change', () => {
  const server = fakeServer();
  const [first, second] = [new RpcClient(() => {}), new RpcClient(() => {})];
  server.connect(first);
  const posted: boolean[] = [];
  const heard: string[] = [];
  const changes: Array<RpcClient | undefined> = [];
  const following = followConnection(server, {
    post: (m) => posted.push(m.connected),
    listen: (client) => [client.onNotification('run/didProgress', (p) => heard.push(`${client === first ? 'first' : 'second'}:${p.step}`))],
    changed: (client) => changes.push(client),
  });
  assert.deepEqual(posted, [true], 'attached to the live client at once');
  assert.deepEqual(changes, [], 'the first attach is no change');
  first.receive(progress('r1', 1));

  server.connect(undefined);
  first.receive(progress('r1', 2));
  server.connect(second);
  first.receive(progress('r1', 3));
  second.receive(progress('r1', 4));
  assert.deepEqual(posted, [true, false, true]);
  assert.deepEqual(heard, ['first:1', 'second:4'], "the old client's listeners went with it");
  assert.deepEqual(changes, [undefined, second]);

  following.dispose();
  second.receive(progress('r1', 5));
  assert.deepEqual(heard, ['first:1', 'second:4'], 'nothing is heard after dispose');
  assert.equal(server.listeners, 0);
});

test('a panel that only shows the connection (the inspector) needs no listeners', () => {
  const server = fakeServer();
  const posted: boolean[] = [];
  const following = followConnection(server, { post: (m) => posted.push(m.connected) });
  server.connect(new RpcClient(() => {}));
  following.dispose();
  server.connect(undefined);
  assert.deepEqual(posted, [false, true]);
});
