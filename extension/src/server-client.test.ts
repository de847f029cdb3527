import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RpcClient } from '../../server/protocol/rpc-client.ts';
import { whenConnected } from './server-client.ts';
import { fakeServer } from './test-util.ts';

const rpc = {} as RpcClient;

test('whenConnected resolves at once with the live client', async () => {
  const server = fakeServer();
  server.connect(rpc);
  assert.equal(await whenConnected(server, 0), rpc);
  assert.equal(server.listeners, 0);
});

test('whenConnected waits for the first connection, ignoring a drop before it', async () => {
  const server = fakeServer();
  const pending = whenConnected(server, 60_000);
  server.connect(undefined);
  server.connect(rpc);
  assert.equal(await pending, rpc);
  assert.equal(server.listeners, 0);
});

test("whenConnected fails with require()'s error when no server connects in time", async () => {
  const server = fakeServer();
  await assert.rejects(whenConnected(server, 1), /server not running/);
  assert.equal(server.listeners, 0);
});
