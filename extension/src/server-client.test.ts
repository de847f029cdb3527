import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RpcClient } from '../../server/protocol/rpc-client.ts';
import { whenConnected, type ServerClient } from './server-client.ts';

/** A ServerClient whose connection the test sets; counts listeners to check they are removed. */
function fakeServer(): ServerClient & { connect(c: RpcClient | undefined): void; listeners: number } {
  let client: RpcClient | undefined;
  const listeners = new Set<(c: RpcClient | undefined) => void>();
  return {
    get client() {
      return client;
    },
    get listeners() {
      return listeners.size;
    },
    onDidChangeConnection: (listener) => {
      listeners.add(listener);
      return { dispose: () => listeners.delete(listener) };
    },
    require() {
      if (client) return client;
      throw new Error('server not running');
    },
    connect(c) {
      client = c;
      for (const l of [...listeners]) l(c);
    },
  };
}

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
