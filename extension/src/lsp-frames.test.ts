import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classifyLanguageFrame } from './lsp-frames.ts';

const frame = (o: unknown) => JSON.stringify(o);

test('LSP traffic reaches the language client unchanged', () => {
  const diagnostics = { jsonrpc: '2.0', method: 'textDocument/publishDiagnostics', params: { uri: 'file:///w/configs/a.json', diagnostics: [] } };
  assert.deepEqual(classifyLanguageFrame(frame(diagnostics)), { kind: 'forward', message: diagnostics });
  const response = { jsonrpc: '2.0', id: 3, result: { isIncomplete: false, items: [] } };
  assert.deepEqual(classifyLanguageFrame(frame(response)), { kind: 'forward', message: response });
  const error = { jsonrpc: '2.0', id: 4, error: { code: -32013, message: 'document is not open' } };
  assert.deepEqual(classifyLanguageFrame(frame(error)), { kind: 'forward', message: error });
  const request = { jsonrpc: '2.0', id: 'x', method: 'window/workDoneProgress/create', params: { token: 1 } };
  assert.deepEqual(classifyLanguageFrame(frame(request)), { kind: 'forward', message: request });
});

test('run notifications broadcast to every connection are dropped', () => {
  for (const method of ['run/didChangeState', 'run/didProgress', 'run/didLog']) {
    const v = classifyLanguageFrame(frame({ jsonrpc: '2.0', method, params: {} }));
    assert.equal(v.kind, 'drop', method);
  }
});

test('frames that are not JSON-RPC are dropped with a reason', () => {
  const notJson = classifyLanguageFrame('{oops');
  assert.ok(notJson.kind === 'drop' && /not JSON/.test(notJson.reason));
  const notRpc = classifyLanguageFrame(frame({ hello: 'world' }));
  assert.ok(notRpc.kind === 'drop' && /not a JSON-RPC message/.test(notRpc.reason));
});
