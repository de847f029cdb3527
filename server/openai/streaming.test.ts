/**
 * Streamed text deltas through a real byte-level BPE (Qwen3's tokenizer): one token at a time, a
 * character split over tokens comes out whole in one chunk, and the chunks add up to the whole
 * decoding, special tokens dropped.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HfTokenizer } from '../models/hf-tokenizer.ts';
import { qwen3Files } from '../models/packaged-tokenizers.ts';
import { choiceText } from './completions.ts';
import { TextDeltas } from './streaming.ts';

test('deltas add up to the decoded text, never with half a character', async () => {
  const tok = HfTokenizer.fromFiles(await qwen3Files(), 'qwen3');
  const text = 'Héllo wörld: 世界 🎉🎉 ok — “quoted” 𝔘𝔫𝔦𝔠𝔬𝔡𝔢\n  indented';
  const ids = [...tok.encode(text), tok.stopTokenId];
  // Some character spans several tokens, or the test would not test holding back.
  assert.ok(ids.some((id) => tok.decode([id]).includes('\uFFFD')), 'a token decodes to part of a character');
  const deltas = new TextDeltas(tok);
  const chunks = ids.map((id, t) => deltas.push(id, t === ids.length - 1));
  for (const c of chunks) assert.ok(!c.includes('\uFFFD'), JSON.stringify(c));
  assert.equal(chunks.join(''), choiceText(tok, ids));
  assert.equal(chunks.join(''), text);
  assert.ok(chunks.filter((c) => c.length > 0).length > ids.length / 2, 'text comes out as it is generated, not at the end');
});
