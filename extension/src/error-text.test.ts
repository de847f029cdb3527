import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RpcClient, RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { userMessage } from './error-text.ts';

test("an error reads as the server's words, without the method or the JSON-RPC code", async () => {
  // A real client answered by a server that refuses the resume.
  const client: RpcClient = new RpcClient((text) => {
    const { id } = JSON.parse(text) as { id: number };
    setImmediate(() => client.receive(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32002, message: 'run run-1 is running; only a paused or failed run can be resumed' } })));
  });
  const e = await client.request('run/resume', { runId: 'run-1' }).catch((x: unknown) => x);
  assert.ok(e instanceof RpcResponseError);
  assert.match(e.message, /^run\/resume: .* \(code -32002\)$/, 'the raw message names the method (the output channel keeps it)');
  assert.equal(userMessage(e), 'run run-1 is running; only a paused or failed run can be resumed');
  assert.equal(userMessage(new Error('metrics/query: the server\'s result does not match the protocol: x')), "the server's result does not match the protocol: x");
  assert.equal(userMessage(new Error('the Troupe server connection closed (1006)')), 'the Troupe server connection closed (1006)');
  assert.equal(userMessage('plain'), 'plain');
});
