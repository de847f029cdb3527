// Token shading: responses align to their tokens (exactly for the embedded character tokenizer,
// specials included; one to one for other character-level ones; by position otherwise), and
// log-probs and advantages map to clamped intensities and levels.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultTokenizer } from '../../../server/models/tokenizer.ts';
import { ADVANTAGE_SPAN, LOGPROB_SPAN, SHADE_LEVELS, advantageShade, alignTokens, logprobIntensity, shadeLevel, tokenLabel } from './token-shading.ts';

test('the embedded tokenizer aligns exactly, the stop token becomes a marker', () => {
  // The real tokenizer, so the copied layout is checked against the source of truth.
  const text = 'move U,R\nok';
  const tokens = Array.from(defaultTokenizer.encodeResponse(text));
  const { segments, exact } = alignTokens(text, tokens);
  assert.ok(exact);
  assert.equal(segments.length, tokens.length);
  assert.equal(segments.map((s) => s.text).join(''), text);
  assert.deepEqual(segments.at(-1), { token: tokens.length - 1, text: '', special: '<|end|>' });
  assert.equal(tokenLabel(segments[4]!), '" "');
  assert.equal(tokenLabel(segments.at(-1)!), '<|end|>');
});

test('specials sampled mid-response (skipped in the text) keep every later token in place', () => {
  const unk = defaultTokenizer.specialIds.unk;
  const tokens = [...defaultTokenizer.encode('ab'), unk, ...defaultTokenizer.encode('c'), defaultTokenizer.stopTokenId];
  const text = defaultTokenizer.decode(tokens, { specials: 'skip' });
  assert.equal(text, 'abc');
  const { segments, exact } = alignTokens(text, tokens);
  assert.ok(exact);
  assert.deepEqual(segments.map((s) => s.special ?? s.text), ['a', 'b', '<unk>', 'c', '<|end|>']);
  assert.equal(segments[3]!.token, 3);
});

test('another character-level tokenizer aligns one to one by code point', () => {
  const { segments, exact } = alignTokens('añ😀', [500, 501, 502]);
  assert.ok(exact);
  assert.deepEqual(segments.map((s) => s.text), ['a', 'ñ', '😀']);
});

test('a subword tokenizer degrades to spreading the text by position', () => {
  const { segments, exact } = alignTokens('abcdefgh', [1000, 1001, 1002]);
  assert.ok(!exact);
  assert.equal(segments.length, 3);
  assert.equal(segments.map((s) => s.text).join(''), 'abcdefgh', 'no character lost or repeated');
  assert.deepEqual(segments.map((s) => s.token), [0, 1, 2]);
  const none = alignTokens('text but no tokens', []);
  assert.ok(!none.exact);
  assert.equal(none.segments.map((s) => s.text).join(''), 'text but no tokens');
  assert.deepEqual(alignTokens('', []), { segments: [], exact: true });
});

test('log-prob intensity: 0 when certain, linear in nats, clamped at the span', () => {
  assert.equal(logprobIntensity(0), 0);
  assert.equal(logprobIntensity(1e-5), 0, 'float32 rounding above 0 clamps to 0');
  assert.equal(logprobIntensity(-LOGPROB_SPAN / 4), 0.5);
  // Visible where it matters: a coin flip (p = 0.5) is shaded at level 3 of 8 at least, p = 0.1 at 5.
  assert.ok(shadeLevel(logprobIntensity(Math.log(0.5))) >= 3);
  assert.ok(shadeLevel(logprobIntensity(Math.log(0.1))) >= 5);
  assert.equal(logprobIntensity(-LOGPROB_SPAN), 1);
  assert.equal(logprobIntensity(-100), 1);
  assert.equal(logprobIntensity(-Infinity), 1);
  assert.ok(logprobIntensity(-0.5) < logprobIntensity(-2));
});

test('advantage: diverging sign, intensity by magnitude, clamped; absent or zero is unshaded', () => {
  assert.deepEqual(advantageShade(ADVANTAGE_SPAN / 2), { sign: 'pos', intensity: 0.5 });
  assert.deepEqual(advantageShade(-ADVANTAGE_SPAN / 2), { sign: 'neg', intensity: 0.5 });
  assert.deepEqual(advantageShade(-50), { sign: 'neg', intensity: 1 });
  assert.deepEqual(advantageShade(0), { sign: 'none', intensity: 0 });
  assert.deepEqual(advantageShade(undefined), { sign: 'none', intensity: 0 });
  assert.deepEqual(advantageShade(NaN), { sign: 'none', intensity: 0 });
});

test('levels: 0 only for no signal, any signal at least 1, clamped at the top', () => {
  assert.equal(shadeLevel(0), 0);
  assert.equal(shadeLevel(0.001), 1);
  assert.equal(shadeLevel(0.5), SHADE_LEVELS / 2);
  assert.equal(shadeLevel(1), SHADE_LEVELS);
  assert.equal(shadeLevel(7), SHADE_LEVELS);
  assert.equal(shadeLevel(-1), 0);
  assert.equal(shadeLevel(NaN), 0);
});
