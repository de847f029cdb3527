import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CharTokenizer, defaultTokenizer, defaultTokenizerSpec, loadTokenizer, saveTokenizer } from './tokenizer.ts';
import { escapeRe, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';

const tok = defaultTokenizer;
const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');

test('vocabulary layout is as documented', () => {
  assert.equal(tok.vocabSize, 112);
  assert.deepEqual(tok.specialIds, { pad: 0, bos: 1, eos: 2, unk: 3, system: 4, user: 5, assistant: 6, tool: 7, plan: 8, end: 9 });
  assert.equal(tok.stopTokenId, 9);
  assert.equal(tok.tokenText(10), '\n');
  assert.equal(tok.tokenText(11), ' ');
  assert.equal(tok.tokenText(105), '~');
  assert.equal(tok.tokenText(106), '<|reserved_0|>');
  assert.equal(tok.tokenText(111), '<|reserved_5|>');
  for (let id = 0; id < tok.vocabSize; id++) assert.equal(tok.isSpecial(id), id < 10 || id >= 106, `id ${id}`);
});

test('all printable ASCII and newline round-trip, one token per character', () => {
  const text = `${printable}\n${printable}`;
  const ids = tok.encode(text);
  assert.equal(ids.length, text.length);
  assert.deepEqual([...tok.encode('A~ \n')], [65 - 21, 126 - 21, 11, 10]);
  assert.equal(tok.decode(ids), text);
  assert.equal(tok.decode(tok.encode('')), '');
});

test('unknown characters become one <unk> each and never throw', () => {
  const unk = tok.specialIds.unk;
  assert.deepEqual([...tok.encode('a\tb\r\né😀\u0000\ud800x')], [
    tok.encode('a')[0], unk, tok.encode('b')[0], unk, 10, unk, unk, unk, unk, tok.encode('x')[0],
  ]);
  assert.equal(tok.decode(tok.encode('a😀b')), 'a<unk>b');
  assert.equal(tok.decode(tok.encode('a😀b'), { specials: 'skip' }), 'ab');
});

test('special-looking text stays text', () => {
  const ids = tok.encode('<|end|><pad>');
  assert.equal(ids.length, 12);
  assert.ok([...ids].every((id) => !tok.isSpecial(id)));
});

test('decode renders or skips specials and names bad ids', () => {
  const ids = [tok.specialIds.bos, ...tok.encode('hi'), tok.stopTokenId, 106];
  assert.equal(tok.decode(ids), '<bos>hi<|end|><|reserved_0|>');
  assert.equal(tok.decode(ids, { specials: 'skip' }), 'hi');
  throwsMessage(() => tok.decode([12, 112]), /token id 112 at position 1 is outside the vocabulary \(size 112\)/);
  throwsMessage(() => tok.decode([-1]), /token id -1 at position 0/);
  throwsMessage(() => tok.decode([1.5]), /token id 1.5 at position 0/);
});

test('encodePrompt lays out roles and ends ready for the response', () => {
  const ids = tok.encodePrompt([
    { role: 'system', text: 'S' },
    { role: 'user', text: 'go' },
    { role: 'tool', text: 'ok' },
  ]);
  assert.equal(tok.decode(ids), '<bos><|system|>S<|end|><|user|>go<|end|><|tool|>ok<|end|><|assistant|>');
  assert.equal(ids.at(-1), tok.specialIds.assistant);
  assert.equal(tok.decode(tok.encodePrompt([], { respondAs: 'plan' })), '<bos><|plan|>');
  assert.equal(tok.decode(tok.encodeResponse('R')), 'R<|end|>');
  throwsMessage(() => tok.encodePrompt([{ role: 'judge' as 'user', text: '' }]), /turn 0: unknown chat role 'judge'/);
});

test('spec round-trips through troupe-tokenizer.json; bad specs name the field', async () => {
  await withTempDir(async (dir) => {
    await saveTokenizer(dir, tok);
    const json = JSON.parse(await readFile(join(dir, 'troupe-tokenizer.json'), 'utf8')) as unknown;
    assert.deepEqual(json, defaultTokenizerSpec());
    const back = await loadTokenizer(dir);
    assert.deepEqual(back.toSpec(), tok.toSpec());
    assert.deepEqual(back.encode(printable), tok.encode(printable));

    const path = join(dir, 'troupe-tokenizer.json');
    await writeFile(path, JSON.stringify({ format: 'troupe-char-tokenizer', version: 2 }));
    await rejectsMessage(loadTokenizer(dir), new RegExp(`^invalid ${escapeRe(path)}:\n {2}version: `));
  });
});

test("Troupe's file does not collide with Hugging Face's tokenizer.json; folders from before the rename still load", async () => {
  await withTempDir(async (dir) => {
    await rejectsMessage(loadTokenizer(dir), /no troupe-tokenizer.json \(nor a tokenizer.json in Troupe's format/);
    // An old folder: the char tokenizer under the HF name.
    const legacy = join(dir, 'tokenizer.json');
    await writeFile(legacy, JSON.stringify(defaultTokenizerSpec()));
    assert.deepEqual((await loadTokenizer(dir)).toSpec(), tok.toSpec());
    // A Hugging Face tokenizer.json is named as such, not reported field by field.
    await writeFile(legacy, JSON.stringify({ version: '1.0', added_tokens: [], model: { type: 'BPE', vocab: {}, merges: [] } }));
    await rejectsMessage(loadTokenizer(dir), new RegExp(`^${escapeRe(legacy)} is a Hugging Face tokenizer \\(it has a "model" section\\), not Troupe's character tokenizer \\(troupe-tokenizer.json\\)`));
    // Something else under the old name: its fields are named.
    await writeFile(legacy, JSON.stringify({ vocab: [] }));
    await rejectsMessage(loadTokenizer(dir), new RegExp(`^invalid ${escapeRe(legacy)}:\n {2}format: `));
    // Saving next to a Hugging Face tokenizer.json leaves it alone, and the Troupe file wins.
    await writeFile(legacy, JSON.stringify({ version: '1.0', model: { type: 'BPE' } }));
    await saveTokenizer(dir, tok);
    assert.deepEqual(JSON.parse(await readFile(legacy, 'utf8')), { version: '1.0', model: { type: 'BPE' } });
    assert.deepEqual((await loadTokenizer(dir)).toSpec(), tok.toSpec());
  });
});

test('bad specs name the field', () => {
  const spec = defaultTokenizerSpec();
  const bad = (edit: (s: ReturnType<typeof defaultTokenizerSpec>) => void, re: RegExp): void => {
    const s = defaultTokenizerSpec();
    edit(s);
    throwsMessage(() => CharTokenizer.fromSpec(s, 'spec'), re);
  };
  bad((s) => (s.vocab[20] = 'ab'), /^invalid spec:\n {2}vocab\.20: token 'ab' must be a single character/);
  bad((s) => (s.vocab[20] = 'A'), /vocab\.\d+: token 'A' also has id 20/);
  bad((s) => (s.specials = s.specials.filter((t) => t !== '<|end|>')), /specials: required special token '<\|end\|>' is missing/);
  bad((s) => s.specials.push('<x>'), /specials\.\d+: special token '<x>' is not in vocab/);
  bad((s) => ([s.vocab[0], s.vocab[1]] = [s.vocab[1]!, s.vocab[0]!]), /vocab\.0: id 0 must be '<pad>'/);
  // A custom vocabulary with a non-ASCII character works.
  const custom = CharTokenizer.fromSpec({ ...spec, vocab: [...spec.vocab, 'é', '😀'] });
  assert.equal(custom.vocabSize, 114);
  assert.deepEqual([...custom.encode('é😀')], [112, 113]);
  assert.equal(custom.decode(custom.encode('é😀x')), 'é😀x');
});
