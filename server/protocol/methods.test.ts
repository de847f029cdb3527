// The protocol table: the committed JSON Schema snapshot matches it (so protocol changes show in
// review), names follow LSP's conventions, and the typed client rejects results that do not match.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { clientNotifications, clientRequests, protocolJsonSchemaText, serverNotifications } from './methods.ts';
import { RpcClient } from './rpc-client.ts';

test('server/protocol/protocol.schema.json is up to date', () => {
  const committed = readFileSync(fileURLToPath(new URL('./protocol.schema.json', import.meta.url)), 'utf8');
  assert.ok(committed === protocolJsonSchemaText(), 'protocol.schema.json is stale: regenerate it with `npm run schema` and review the diff');
});

test('requests are area/verb, notifications area/didEvent (LSP conventions)', () => {
  const lifecycle = new Set(['initialize', 'shutdown', 'initialized', 'exit']);
  for (const m of Object.keys(clientRequests)) {
    if (lifecycle.has(m)) continue;
    assert.match(m, /^[a-z][A-Za-z]*\/[a-z][A-Za-z]*$/, m);
    assert.doesNotMatch(m.split('/')[1]!, /^did[A-Z]/, `${m} is a request but named like a notification`);
  }
  for (const m of [...Object.keys(clientNotifications), ...Object.keys(serverNotifications)]) {
    if (lifecycle.has(m) || m.startsWith('$/')) continue;
    assert.match(m, /^[a-zA-Z]+\/(did|publish)[A-Z][A-Za-z]*$/, m);
  }
});

test('the typed client parses results: a result that does not match the protocol rejects, naming the method', async () => {
  const sent: string[] = [];
  const client = new RpcClient((t) => sent.push(t));
  const pending = client.request('runs/list', {});
  const { id } = JSON.parse(sent[0]!) as { id: number };
  client.receive(JSON.stringify({ jsonrpc: '2.0', id, result: { runs: [{ id: 'r', state: 'exploded' }] } }));
  await assert.rejects(pending, /runs\/list: the server's result does not match the protocol/);
  const ok = client.request('server/status', {});
  const second = JSON.parse(sent[1]!) as { id: number };
  client.receive(JSON.stringify({ jsonrpc: '2.0', id: second.id, error: { code: -32010, message: 'nope' } }));
  await assert.rejects(ok, /server\/status: nope \(code -32010\)/);
});

test('request params bound their sizes: steps, paths and ids', () => {
  const start = clientRequests['run/start'].params;
  assert.equal(start.safeParse({ configPath: 'configs/x.json', steps: 1_000_000 }).success, true);
  assert.equal(start.safeParse({ configPath: 'configs/x.json', steps: 1_000_001 }).success, false);
  assert.equal(start.safeParse({ configPath: 'x/'.repeat(3000) }).success, false);
  assert.equal(clientRequests['run/resume'].params.safeParse({ runId: 'r1', steps: 1e9 }).success, false);
  assert.equal(clientRequests['run/pause'].params.safeParse({ runId: 'r'.repeat(257) }).success, false);
  assert.equal(clientRequests['adapters/export'].params.safeParse({ runId: 'r1', outDir: 'o'.repeat(5000) }).success, false);
});
