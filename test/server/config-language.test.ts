/**
 * LSP document features for experiment configs, through the server over a real socket, the way
 * vscode-languageclient drives them: didOpen → publishDiagnostics with exact ranges, incremental
 * didChange → new diagnostics, completion and hover, didClose → cleared; documents are per client.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { defaultModelConfig } from '../../server/models/default-model.ts';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { connect } from './server-harness.ts';

let ws = '';
let server: TroupeServer;
let token = '';

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-lsp-'));
  server = await TroupeServer.start({ workspace: ws, log: () => {} });
  token = readFileSync(server.tokenFile, 'utf8').trim();
});

after(async () => {
  await server.close();
  rmSync(ws, { recursive: true, force: true });
});

const text = `{
  "name": "demo",
  "env": { "name": "plan-path" },
  "specialization": "L2",
  "policies": {
    "tool-lora": { "model": "base", "lora": { "rank": 8 } },
    "plan-lora": { "model": "base", "lora": { "rank": 8 } }
  },
  "router": { "tool": "tool-lora", "planner": "plan-lora" },
  "algorithm": { "branches": 4 }
}
`;

/** Line and character of the first occurrence of `needle` in `text`. */
function positionOf(needle: string, within = text): { line: number; character: number } {
  const i = within.indexOf(needle);
  assert.ok(i >= 0, needle);
  const before = within.slice(0, i).split('\n');
  return { line: before.length - 1, character: before.at(-1)!.length };
}

test('diagnostics with exact ranges, incremental edits, completion, hover, close', async () => {
  const c = await connect(server.url, token);
  const uri = 'file:///ws/configs/demo.json';
  c.rpc.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'json', version: 1, text } });
  const first = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === 1);

  // The unknown agent "planner" is underlined on its key; K = 1 on its value.
  const planner = first.diagnostics.find((d) => /planner/.test(d.message));
  assert.ok(planner, first.diagnostics.map((d) => d.message).join('\n'));
  assert.deepEqual(planner.range.start, positionOf('"planner"'));

  // An incremental edit renames "planner" to "plan": its diagnostic goes away.
  const at = positionOf('"planner"');
  const range = { start: { line: at.line, character: at.character + 1 }, end: { line: at.line, character: at.character + 8 } };
  c.rpc.notify('textDocument/didChange', { textDocument: { uri, version: 2 }, contentChanges: [{ range, text: 'plan' }] });
  const second = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === 2);
  assert.deepEqual(second.diagnostics, []);

  // K < 2 is underlined on its value.
  const k = positionOf('4 }', text);
  c.rpc.notify('textDocument/didChange', { textDocument: { uri, version: 3 }, contentChanges: [{ range: { start: k, end: { ...k, character: k.character + 1 } }, text: '1' }] });
  const third = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === 3);
  assert.equal(third.diagnostics.length, 1);
  assert.deepEqual(third.diagnostics[0]!.range, { start: k, end: { ...k, character: k.character + 1 } });
  assert.match(third.diagnostics[0]!.message, /branches.*>= 2/);

  // Completion inside the algorithm object offers its fields; hover explains "specialization".
  const edited = text.replace('"planner"', '"plan"');
  const inAlgorithm = positionOf('"branches"', edited);
  const completion = await c.rpc.request('textDocument/completion', { textDocument: { uri }, position: inAlgorithm });
  assert.ok(completion.items.some((i) => /temperature|clipEps|name/.test(i.label)), completion.items.map((i) => i.label).join(', '));
  const hover = await c.rpc.request('textDocument/hover', { textDocument: { uri }, position: { ...positionOf('"specialization"', edited), character: positionOf('"specialization"', edited).character + 3 } });
  assert.ok(hover);
  assert.match(hover.contents.value, /LoRA/);

  // Another client has no such document.
  const other = await connect(server.url, token);
  await assert.rejects(other.rpc.request('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: 0 } }), (e) => e instanceof RpcResponseError && e.code === ErrorCodes.NotFound);
  await other.close();

  c.rpc.notify('textDocument/didClose', { textDocument: { uri } });
  const cleared = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.diagnostics.length === 0);
  assert.deepEqual(cleared.diagnostics, []);
  await c.close();
});

test('a syntax error is reported where it is; a stale version is ignored without breaking the connection', async () => {
  const c = await connect(server.url, token);
  const uri = 'file:///ws/configs/broken.json';
  c.rpc.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'json', version: 5, text: '{\n  "name": "x",,\n}' } });
  const d = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri);
  assert.ok(d.diagnostics.some((x) => x.range.start.line === 1), d.diagnostics.map((x) => `${x.range.start.line}:${x.range.start.character} ${x.message}`).join('\n'));
  c.rpc.notify('textDocument/didChange', { textDocument: { uri, version: 3 }, contentChanges: [{ text: '{}' }] });
  assert.equal((await c.rpc.request('server/status', {})).pid, process.pid);
  await c.close();
});

test("a model checkpoint folder is checked while the config is edited: missing, outside the workspace, then present", async () => {
  const c = await connect(server.url, token);
  mkdirSync(join(ws, 'configs'), { recursive: true });
  const uri = pathToFileURL(join(ws, 'configs', 'from-checkpoint.json')).href;
  const withCheckpoint = (checkpoint: string) => text.replace('"env":', `"models": { "base": { "checkpoint": ${JSON.stringify(checkpoint)} } },\n  "env":`).replace('"planner"', '"plan"');
  const diagnosticsAt = async (version: number, checkpoint: string) => {
    const body = withCheckpoint(checkpoint);
    if (version === 1) c.rpc.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'json', version, text: body } });
    else c.rpc.notify('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ text: body }] });
    const d = await c.waitFor('textDocument/publishDiagnostics', (p) => p.uri === uri && p.version === version);
    return { diagnostics: d.diagnostics, value: positionOf(JSON.stringify(checkpoint), body) };
  };

  // Relative to the config's folder, as a start resolves it: ../ckpt is <workspace>/ckpt, not there yet.
  const missing = await diagnosticsAt(1, '../ckpt');
  assert.equal(missing.diagnostics.length, 1, missing.diagnostics.map((d) => d.message).join('\n'));
  assert.equal(missing.diagnostics[0]!.code, 'path');
  assert.deepEqual(missing.diagnostics[0]!.range.start, missing.value);
  assert.match(missing.diagnostics[0]!.message, /^models\.base\.checkpoint: model folder .*ckpt does not exist/);

  // Outside the workspace: the server's path rule, without looking there.
  const outside = await diagnosticsAt(2, '../../..');
  assert.equal(outside.diagnostics.length, 1);
  assert.match(outside.diagnostics[0]!.message, /is outside the workspace/);

  // A model folder (its config.json is what a start reads first): no diagnostic.
  mkdirSync(join(ws, 'ckpt'), { recursive: true });
  writeFileSync(join(ws, 'ckpt', 'config.json'), JSON.stringify(defaultModelConfig));
  const present = await diagnosticsAt(3, '../ckpt');
  assert.deepEqual(present.diagnostics, []);
  await c.close();
});
