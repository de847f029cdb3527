// The math answer checker: extraction, normalisation, exact rationals, and a parity table of
// (gold, answer, verdict) cases in the spirit of Math-Verify's behaviour (Hugging Face's math answer verifier).
// Where this checker deliberately differs from Math-Verify (no symbolic algebra), the case says so.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { extractAnswer, lastNonEmptyLine, normalizeAnswer, parseNumber, verifyAnswer } from './answer-check.ts';

const big = '1234567890123456789012345'; // 25 digits; as a float it equals its neighbours
const bigPlusOne = '1234567890123456789012346';

/** [gold, answer, expected verdict, why]. */
const parity: ReadonlyArray<readonly [string, string, boolean, string]> = [
  ['5', '5', true, 'identical'],
  ['5', '6', false, 'different integers'],
  ['\\frac{1}{2}', '0.5', true, 'fraction vs terminating decimal'],
  ['0.5', '\\frac{1}{2}', true, 'decimal gold vs fraction answer'],
  ['\\frac{1}{2}', '1/2', true, 'LaTeX fraction vs slash'],
  ['\\frac{1}{2}', '\\dfrac{1}{2}', true, '\\dfrac'],
  ['\\tfrac{3}{4}', '0.75', true, '\\tfrac'],
  ['\\frac12', '\\frac{1}{2}', true, '\\frac12 shorthand'],
  ['\\frac{2}{4}', '\\frac{1}{2}', true, 'unreduced fraction'],
  ['\\frac{1}{2}', '\\frac{2}{1}', false, 'inverted fraction'],
  ['1000', '1,000', true, 'thousands separator'],
  ['1000', '1{,}000', true, 'LaTeX thousands separator'],
  ['1000000', '1\\,000\\,000', true, 'thin-space thousands separator'],
  ['1234', '1, 234', false, 'a comma and a space is a list, not a separator'],
  ['10', '10.0', true, 'trailing .0'],
  ['10', '10.000', true, 'trailing .000'],
  ['2.5', '2.50', true, 'trailing zero of a decimal'],
  ['0.5', '0.05', false, 'different decimals'],
  ['-3', '- 3', true, 'space after the minus'],
  ['-3', '3', false, 'sign matters'],
  ['-\\frac{1}{2}', '\\frac{-1}{2}', true, 'sign outside vs inside the fraction'],
  ['-\\frac{1}{2}', '--0.5', false, 'double minus is plus'],
  ['5', 'x = 5', true, 'leading single-variable assignment'],
  ['5', 'x = 5, y = 3', false, 'two assignments are not one answer'],
  ['30', '30^\\circ', true, 'degrees ^\\circ'],
  ['30^{\\circ}', '30', true, 'degrees ^{\\circ} on the gold'],
  ['30', '30°', true, 'degree sign'],
  ['50\\%', '50', true, 'percent sign'],
  ['12', '12 \\text{ cm}', true, 'unit word from the list'],
  ['12', '12 apples', false, 'a word not on the unit list stays'],
  ['2', '2x', false, 'a variable is not a unit'],
  ['$7$', '\\boxed{7}', true, 'dollar delimiters and a boxed answer'],
  ['\\left( 1, 2 \\right)', '(1,2)', true, '\\left/\\right and spaces'],
  ['(1, 2)', '(2, 1)', false, 'tuples are ordered'],
  ['(1,\\frac{1}{2})', '(1, 0.5)', true, 'tuple element-wise numeric'],
  ['\\{1, 2, 3\\}', '\\{3,1,2\\}', true, 'sets are unordered'],
  ['\\{1, 2\\}', '\\{1, 2, 3\\}', false, 'set sizes differ'],
  ['1, 2', '2, 1', true, 'bare lists are unordered (all solutions)'],
  ['1, 1', '1, 2', false, 'multiset: a repeated element must be matched twice'],
  ['[1, 2)', '[1,2)', true, 'an interval matches exactly'],
  ['[1, 2)', '(1, 2)', false, 'interval brackets differ'],
  ['\\text{Monday}', 'Monday', true, '\\text wrapper'],
  ['\\mathrm{B}', 'B', true, '\\mathrm wrapper'],
  ['Monday', 'Tuesday', false, 'different words'],
  ['\\sqrt{8}', '2\\sqrt{2}', false, 'no symbolic algebra (Math-Verify says true)'],
  ['x+1', '1+x', false, 'no symbolic algebra (Math-Verify says true)'],
  ['x^2+1', 'x^{2} + 1', false, 'no brace canonicalisation of exponents (Math-Verify says true)'],
  [big, big, true, '25-digit integer'],
  [big, bigPlusOne, false, '25-digit integer off by one'],
  [big, '1,234,567,890,123,456,789,012,345', true, '25-digit integer with separators'],
  ['\\frac{1}{3}', '0.333333', true, 'decimal vs non-terminating gold, within 1e-6 relative'],
  ['\\frac{1}{3}', '0.33', false, 'decimal vs non-terminating gold, outside 1e-6'],
  ['0.333333', '\\frac{1}{3}', false, 'ORDER: a terminating gold is exact, so the reversed pair fails'],
  ['0.3333', '0.333333', false, 'two decimals compare exactly'],
  ['\\frac{1}{3}', '\\frac{100000}{300001}', false, 'two fractions compare exactly'],
  ['1.5e3', '1500', true, 'exponent notation as programs print it'],
  ['\\frac{1}{2', '0.5', false, 'malformed gold (unbalanced brace)'],
  ['5', '\\boxed{5', false, 'malformed answer (unbalanced brace)'],
  ['', '', false, 'empty strings'],
  ['5', '', false, 'empty answer'],
  ['5', '$$', false, 'answer empty after normalisation'],
  ['1/0', '1/0', true, 'identical strings match before any arithmetic'],
  ['1/0', '2/0', false, 'zero denominators are not numbers'],
];

describe('verifyAnswer parity table', () => {
  test(`at least 40 cases, both verdicts represented (${parity.length} cases)`, () => {
    assert.ok(parity.length >= 40);
    assert.ok(parity.some((c) => c[2]) && parity.some((c) => !c[2]));
  });
  for (const [gold, answer, verdict, why] of parity) {
    test(`${why}: verify(${JSON.stringify(gold)}, ${JSON.stringify(answer)}) = ${verdict}`, () => {
      assert.equal(verifyAnswer(gold, answer), verdict);
    });
  }
  test('never throws, and refuses absurd lengths', () => {
    const junk = ['{', '}', '\\frac{', '\\boxed{\\boxed{', '((((', ')))', '\\', '/', '-', '.', 'e', '1e99999', '\u0000'];
    for (const a of junk) for (const b of junk) assert.equal(typeof verifyAnswer(a, b), 'boolean');
    const long = '1'.repeat(5000);
    assert.equal(verifyAnswer(long, long), false);
  });
  test('adversarial long inputs stay linear (a quadratic regression makes this test take seconds)', () => {
    assert.equal(normalizeAnswer(`1${' '.repeat(200_000)}x`), '1x');
    assert.equal(extractAnswer('\\boxed{'.repeat(30_000)), null);
    assert.equal(extractAnswer(`\\boxed{5}${'\\boxed{'.repeat(30_000)}`), '5');
  });
});

describe('extractAnswer', () => {
  test('the last complete \\boxed{} or \\fbox{}, with nested braces', () => {
    assert.equal(extractAnswer('so \\boxed{3} then \\boxed{\\frac{1}{2}}.'), '\\frac{1}{2}');
    assert.equal(extractAnswer('answer \\fbox{ 42 }'), '42');
    assert.equal(extractAnswer('\\boxed{\\{1,2\\}}'), '\\{1,2\\}');
    assert.equal(extractAnswer('first \\boxed{7} then truncated \\boxed{\\frac{1'), '7');
  });
  test('else the last #### line, else null', () => {
    assert.equal(extractAnswer('Natalia sold 48 clips.\n#### 72\n'), '72');
    assert.equal(extractAnswer('#### 1\nmore\n  ####  2  \n'), '2');
    assert.equal(extractAnswer('\\boxed{9}\n#### 2'), '9', 'a box beats a #### line');
    assert.equal(extractAnswer('no answer here'), null);
    assert.equal(extractAnswer('\\boxed{ }'), null);
    assert.equal(extractAnswer('\\boxed{unclosed'), null);
    assert.equal(extractAnswer(''), null);
  });
  test('lastNonEmptyLine reads a program\'s printed answer', () => {
    assert.equal(lastNonEmptyLine('step 1\n42\n\n  \n'), '42');
    assert.equal(lastNonEmptyLine('\r\n  7 \r\n'), '7');
    assert.equal(lastNonEmptyLine(' \n\n'), null);
  });
});

describe('normalizeAnswer and parseNumber', () => {
  test('normalisation is idempotent on the table', () => {
    for (const [gold, answer] of parity) {
      for (const s of [gold, answer]) assert.equal(normalizeAnswer(normalizeAnswer(s)), normalizeAnswer(s), s);
    }
  });
  test('examples of the canonical form', () => {
    assert.equal(normalizeAnswer(' $\\dfrac{3}{4}$. '), '\\frac{3}{4}');
    assert.equal(normalizeAnswer('Final answer: \\left[ 1, 2 \\right]'), '[1, 2]');
    assert.equal(normalizeAnswer('\\text{(A)}'), '(A)');
    assert.equal(normalizeAnswer('1,234.50'), '1234.5');
    assert.equal(normalizeAnswer('(1,234)'), '(1, 234)');
    assert.equal(normalizeAnswer('{5}'), '5');
    assert.equal(normalizeAnswer('a \\rightarrow b'), 'a\\rightarrowb', '\\right inside \\rightarrow stays');
  });
  test('exact rationals over BigInt', () => {
    assert.deepEqual(parseNumber('-\\frac{6}{4}'), { num: -3n, den: 2n });
    assert.deepEqual(parseNumber('\\frac{-6}{-4}'), { num: 3n, den: 2n });
    assert.deepEqual(parseNumber('.25'), { num: 1n, den: 4n });
    assert.deepEqual(parseNumber('2.5e-1'), { num: 1n, den: 4n });
    assert.deepEqual(parseNumber('3/-6'), { num: -1n, den: 2n });
    assert.deepEqual(parseNumber(big), { num: BigInt(big), den: 1n });
    for (const s of ['', 'x', '\\sqrt{2}', '\\pi', '2\\frac{1}{2}', '1/0', '1/2/3', '.', 'e5']) assert.equal(parseNumber(s), null, s);
  });
});
