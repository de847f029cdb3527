// The open-document store: full and incremental changes (UTF-16 ranges, non-ASCII text, several
// changes in one notification), versions, and errors naming the document; plus how the LSP
// schemas parse what clients send (extra fields stripped, incremental changes keep their range).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { didChangeTextDocumentParamsSchema, didOpenTextDocumentParamsSchema, type DidChangeTextDocumentParams, type Range } from '../protocol/lsp.ts';
import { ConfigDocuments } from './config-documents.ts';

const uri = 'file:///work/configs/plan-path/L2-lora.json';
const range = (sl: number, sc: number, el: number, ec: number): Range => ({ start: { line: sl, character: sc }, end: { line: el, character: ec } });

function opened(text: string, version = 1): ConfigDocuments {
  const docs = new ConfigDocuments();
  docs.open({ textDocument: { uri, languageId: 'json', version, text } });
  return docs;
}

function change(version: number, ...contentChanges: DidChangeTextDocumentParams['contentChanges']): DidChangeTextDocumentParams {
  return { textDocument: { uri, version }, contentChanges };
}

describe('ConfigDocuments', () => {
  test('opens, replaces the whole text, and closes', () => {
    const docs = opened('{}');
    assert.deepEqual(docs.get(uri), { uri, languageId: 'json', version: 1, text: '{}' });
    const doc = docs.change(change(2, { text: '{"name": "x"}' }));
    assert.equal(doc.version, 2);
    assert.equal(docs.get(uri)?.text, '{"name": "x"}');
    assert.deepEqual(docs.all().map((d) => d.uri), [uri]);
    docs.close({ textDocument: { uri } });
    assert.equal(docs.get(uri), undefined);
  });

  test('applies incremental changes with UTF-16 ranges in non-ASCII text', () => {
    // Line 1 holds "🚀" (2 UTF-16 units) and "é" (1) before the value.
    const docs = opened('{\r\n  "name": "🚀 é run",\r\n  "seed": 1\r\n}');
    // Replace "run": line 1, characters 16..19 (`  "name": "` is 11, then 🚀 2, space 1, é 1, space 1).
    docs.change(change(2, { range: range(1, 16, 1, 19), text: 'walk' }));
    assert.equal(docs.get(uri)?.text, '{\r\n  "name": "🚀 é walk",\r\n  "seed": 1\r\n}');
    // Two changes in one notification: the second's range refers to the text after the first.
    docs.change(
      change(3, { range: range(2, 10, 2, 11), text: '42' }, { range: range(1, 11, 1, 13), text: '✨' }),
    );
    assert.equal(docs.get(uri)?.text, '{\r\n  "name": "✨ é walk",\r\n  "seed": 42\r\n}');
    // An insertion spanning lines, and a deletion across a \r\n.
    docs.change(change(4, { range: range(0, 1, 0, 1), text: '\n  "description": "über",' }));
    assert.equal(docs.get(uri)?.text, '{\n  "description": "über",\r\n  "name": "✨ é walk",\r\n  "seed": 42\r\n}');
    docs.change(change(5, { range: range(1, 24, 2, 2), text: ' ' }));
    assert.equal(docs.get(uri)?.text, '{\n  "description": "über", "name": "✨ é walk",\r\n  "seed": 42\r\n}');
  });

  test('clamps a range past the end, as LSP clamps positions', () => {
    const docs = opened('ab\ncd');
    docs.change(change(2, { range: range(1, 1, 9, 0), text: 'X' }));
    assert.equal(docs.get(uri)?.text, 'ab\ncX');
  });

  test('rejects a change for a document that is not open', () => {
    const docs = new ConfigDocuments();
    assert.throws(() => docs.change(change(2, { text: '{}' })), { message: `textDocument/didChange for ${uri}, which is not open` });
  });

  test('rejects a change whose version is not newer, and keeps the text', () => {
    const docs = opened('{}', 5);
    assert.throws(() => docs.change(change(4, { text: 'x' })), { message: `textDocument/didChange for ${uri}: version 4 is not newer than the open document's version 5` });
    assert.throws(() => docs.change(change(5, { text: 'x' })), /version 5 is not newer than the open document's version 5/);
    assert.equal(docs.get(uri)?.text, '{}');
  });

  test('rejects a range that ends before it starts, naming the change', () => {
    const docs = opened('abc\ndef');
    assert.throws(() => docs.change(change(2, { text: 'ok' }, { range: range(1, 2, 0, 1), text: '' })), {
      message: `textDocument/didChange for ${uri}, change 1: range end 0:1 comes before its start 1:2`,
    });
    assert.equal(docs.get(uri)?.text, 'abc\ndef', 'a failed notification changes nothing');
  });

  test('closing a document that is not open is an error; reopening replaces', () => {
    const docs = opened('{}');
    assert.throws(() => docs.close({ textDocument: { uri: 'file:///other.json' } }), /didClose for file:\/\/\/other\.json, which is not open/);
    docs.open({ textDocument: { uri, languageId: 'json', version: 1, text: '[]' } });
    assert.equal(docs.get(uri)?.text, '[]');
  });
});

describe('LSP document schemas', () => {
  test('strip fields we do not use and keep an incremental change\'s range', () => {
    const parsed = didChangeTextDocumentParamsSchema.parse({
      textDocument: { uri, version: 3, extra: true },
      contentChanges: [{ range: range(0, 1, 0, 2), rangeLength: 1, text: 'x' }, { text: 'whole' }],
      workDoneToken: 'abc',
    });
    assert.deepEqual(parsed, {
      textDocument: { uri, version: 3 },
      contentChanges: [{ range: range(0, 1, 0, 2), rangeLength: 1, text: 'x' }, { text: 'whole' }],
    });
  });

  test('are strict on types', () => {
    assert.equal(didOpenTextDocumentParamsSchema.safeParse({ textDocument: { uri, languageId: 'json', version: '1', text: '' } }).success, false);
    assert.equal(didChangeTextDocumentParamsSchema.safeParse({ textDocument: { uri, version: 1 }, contentChanges: [{ range: range(0, -1, 0, 0), text: '' }] }).success, false);
    assert.equal(didChangeTextDocumentParamsSchema.safeParse({ textDocument: { uri, version: 1 }, contentChanges: [{}] }).success, false);
  });
});
