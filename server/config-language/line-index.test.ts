// Offsets ⇄ LSP positions: line breaks of every kind, UTF-16 counting for text outside the BMP, and
// LSP's clamping of positions past a line's or the text's end.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LineIndex } from './line-index.ts';

describe('LineIndex', () => {
  test('maps offsets to positions across \\n, \\r\\n and \\r', () => {
    const text = 'ab\ncd\r\nef\rg';
    const index = new LineIndex(text);
    assert.equal(index.lineCount, 4);
    assert.deepEqual(index.positionAt(0), { line: 0, character: 0 });
    assert.deepEqual(index.positionAt(2), { line: 0, character: 2 }); // before \n
    assert.deepEqual(index.positionAt(3), { line: 1, character: 0 });
    assert.deepEqual(index.positionAt(7), { line: 2, character: 0 }); // after \r\n
    assert.deepEqual(index.positionAt(10), { line: 3, character: 0 }); // after \r
    assert.deepEqual(index.positionAt(11), { line: 3, character: 1 }); // end of text
  });

  test('counts characters in UTF-16 code units', () => {
    // "🚀" is one code point but two UTF-16 units; "é" is one.
    const text = '{"é🚀": 1}';
    const index = new LineIndex(text);
    assert.deepEqual(index.positionAt(text.indexOf(':')), { line: 0, character: 6 });
    assert.equal(index.offsetAt({ line: 0, character: 6 }), 6);
  });

  test('round-trips every offset', () => {
    const text = 'x\r\n🚀y\n\nz\rw';
    const index = new LineIndex(text);
    for (let o = 0; o <= text.length; o++) {
      // The offset between \r and \n of a \r\n is not a position LSP can name; it maps to the line end.
      if (text[o - 1] === '\r' && text[o] === '\n') continue;
      assert.equal(index.offsetAt(index.positionAt(o)), o, `offset ${o}`);
    }
  });

  test('clamps positions past the end of a line or of the text, as LSP says', () => {
    const text = 'abc\r\nde';
    const index = new LineIndex(text);
    assert.equal(index.offsetAt({ line: 0, character: 99 }), 3, 'end of line 0, before its \\r\\n');
    assert.equal(index.offsetAt({ line: 1, character: 99 }), text.length);
    assert.equal(index.offsetAt({ line: 7, character: 0 }), text.length);
    assert.deepEqual(index.positionAt(-5), { line: 0, character: 0 });
    assert.deepEqual(index.positionAt(999), { line: 1, character: 2 });
  });

  test('an empty text has one empty line', () => {
    const index = new LineIndex('');
    assert.equal(index.lineCount, 1);
    assert.deepEqual(index.positionAt(0), { line: 0, character: 0 });
    assert.equal(index.offsetAt({ line: 0, character: 3 }), 0);
  });

  test('rangeOf gives start and end positions', () => {
    const index = new LineIndex('a\nbcd');
    assert.deepEqual(index.rangeOf(1, 4), { start: { line: 0, character: 1 }, end: { line: 1, character: 2 } });
  });
});
