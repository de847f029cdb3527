/**
 * Checking a model's final math answer against a gold answer, in the manner of Math-Verify
 * (Hugging Face's math answer verifier): extract the last `\boxed{...}` (or `#### ...` line), normalise the
 * LaTeX packaging, then compare as strings, then as exact numbers, then element-wise as tuples or
 * sets. There is deliberately no symbolic algebra: `\sqrt{8}` and `2\sqrt{2}`, or `x+1` and `1+x`,
 * are equal only if they normalise to the same string. Pulling a computer algebra system into the
 * server for that last few percent of cases was judged not worth its size and attack surface.
 *
 * Numbers are exact rationals over BigInt, so 25-digit integers compare exactly (a float would
 * call 10^24 and 10^24 + 1 equal). A decimal answer for a gold whose decimal expansion does not
 * terminate (1/3) is accepted within a relative tolerance of 1e-6, since the model cannot write
 * it exactly; every other numeric comparison is exact.
 *
 * Argument order matters: `verifyAnswer(gold, answer)`, gold first, as in Math-Verify's
 * `verify(gold, target)` ("the order here is important"). The tolerance above applies only when
 * the gold is the non-terminating rational: verifyAnswer('1/3', '0.333333') is true but
 * verifyAnswer('0.333333', '1/3') is false. The reference passes the two reversed
 * (PettingLLMs' `math_env`), a defect this API's gold-first name is meant to prevent.
 *
 * Nothing here throws on model text: malformed input (unbalanced braces, empty strings, absurd
 * lengths) is simply not a match.
 */

/** Answers longer than this are not compared (a math answer is short; this bounds BigInt work). */
const MAX_ANSWER_CHARS = 4096;
/** Relative tolerance for a decimal answer against a non-terminating rational gold. */
const DECIMAL_TOLERANCE = 1_000_000n; // 1e-6 as its reciprocal
/** Nesting bound for tuples inside tuples. */
const MAX_DEPTH = 4;

/** The index just past the brace that closes the one at `open`, or -1 if it never closes. */
function closingBrace(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const c = s[i];
    if (c === '\\') { i++; continue; } // an escaped brace (`\{`) does not count
    if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * For every `{` of `s`, the index just past its closing brace, or -1 (elsewhere -1 too). One pass
 * with a stack, so a response full of unclosed boxes costs linear time, not quadratic.
 */
function closingBraces(s: string): Int32Array {
  const out = new Int32Array(s.length).fill(-1);
  const stack: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\') i++; // an escaped brace (`\{`) does not count
    else if (c === '{') stack.push(i);
    else if (c === '}' && stack.length > 0) out[stack.pop()!] = i + 1;
  }
  return out;
}

/**
 * The final answer of a response: the content of the last complete `\boxed{...}` or `\fbox{...}`
 * (braces balanced; a truncated last box falls back to the one before), else the payload of the
 * last line `#### <answer>`, else null. The result is trimmed and never empty.
 */
export function extractAnswer(text: string): string | null {
  const boxes = [...text.matchAll(/\\(?:boxed|fbox)\s*\{/g)];
  const close = boxes.length > 0 ? closingBraces(text) : new Int32Array(0);
  for (let k = boxes.length - 1; k >= 0; k--) {
    const m = boxes[k]!;
    const open = m.index + m[0].length - 1;
    const end = close[open]!;
    if (end < 0) continue;
    const inner = text.slice(open + 1, end - 1).trim();
    if (inner !== '') return inner;
  }
  const lines = text.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^\s*####\s*(.+)$/.exec(lines[i]!);
    if (m && m[1]!.trim() !== '') return m[1]!.trim();
  }
  return null;
}

/** The last non-blank line of a program's output, trimmed (the tool agent prints its answer last). */
export function lastNonEmptyLine(stdout: string): string | null {
  const lines = stdout.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (line !== '') return line;
  }
  return null;
}

/** Replaces every `\name{x}` (balanced) with `x` for the given command names. */
function unwrapCommands(s: string, names: readonly string[]): string {
  const pattern = new RegExp(`\\\\(?:${names.join('|')})\\s*\\{`, 'g');
  let out = s;
  for (let guard = 0; guard < 64; guard++) {
    pattern.lastIndex = 0;
    const m = pattern.exec(out);
    if (!m) break;
    const open = m.index + m[0].length - 1;
    const end = closingBrace(out, open);
    if (end < 0) break; // unbalanced: leave the rest as it is
    out = out.slice(0, m.index) + out.slice(open + 1, end - 1) + out.slice(end);
  }
  return out;
}

/**
 * Unit words removed after a plain number ("12 cm" → "12"). Only these, and only when what remains
 * is a number, so "2x" or "3 apples and 4 pears" are left alone. Kept short on purpose.
 */
const UNIT_WORDS = /^(-?[\d.,/]+)\s*(?:square\s+|cubic\s+)?(?:units?|cm|mm|km|m|meters?|metres?|inch(?:es)?|in|feet|foot|ft|miles?|yards?|degrees?|dollars?|cents?|hours?|minutes?|seconds?|days?|weeks?|years?|mph|kg|g|grams?|pounds?|lbs?)(?:\^?\{?[23]\}?)?$/i;

/**
 * The canonical string form of an answer. Removes: `$` and `\(`/`\[` delimiters, a surrounding
 * `\boxed{}`, a leading `answer:` / `final answer:` / single-variable `x =` (one `=` only),
 * `\left`/`\right`, `\displaystyle`, spacing commands (`\!`, `\,`, `\:`, `\;`, `\ `, `\quad`, `~`),
 * the wrappers `\text`, `\textbf`, `\mathrm`, `\mathbf`, `\mbox` (content kept), degree marks
 * (`^\circ`, `^{\circ}`, `°`), a trailing `%`/`\%`, a trailing period, thousands separators in a
 * lone number (`1,234` and `1{,}234`; not `(1,234)` or `1, 234`), a unit word from a short list
 * after a lone number, trailing zeros of a decimal (`10.0` → `10`, `2.50` → `2.5`), and all
 * whitespace except one space after each comma (`(1,2)` → `(1, 2)`). `\dfrac`/`\tfrac` become `\frac`, `\frac12` becomes `\frac{1}{2}`, `\{`/`\}` become
 * `{`/`}`. Case is kept. Idempotent.
 */
export function normalizeAnswer(s: string): string {
  let t = s.trim();
  t = unwrapCommands(t, ['boxed', 'fbox']);
  t = t.replace(/\\\$/g, '').replace(/\$/g, '');
  t = t.replace(/^\\[([]/, '').replace(/\\[)\]]$/, '');
  t = unwrapCommands(t, ['text', 'textbf', 'textit', 'textrm', 'mathrm', 'mathbf', 'mathit', 'mbox']);
  t = t.replace(/\\(?:left|right)(?![a-zA-Z])/g, '').replace(/\\displaystyle(?![a-zA-Z])/g, '');
  t = t.replace(/\\(?:quad|qquad)(?![a-zA-Z])/g, ' ').replace(/\\[!,:; ]|~/g, (m) => (m === '\\,' ? '' : ' '));
  t = t.replace(/\\[dt]frac(?![a-zA-Z])/g, '\\frac');
  t = t.replace(/\\frac\s*(\d)\s*(\d)/g, '\\frac{$1}{$2}');
  t = t.replace(/\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z])/g, '');
  t = t.replace(/\\\{/g, '{').replace(/\\\}/g, '}');
  t = t.trim();
  t = t.replace(/^(?:the\s+)?(?:final\s+)?answer(?![a-z])\s*(?:is\s*)?[:=]?\s*/i, '');
  if ((t.match(/=/g) ?? []).length === 1) t = t.replace(/^\\?[a-zA-Z]\s*=\s*/, '');
  // (`\s*%$` would be quadratic on long runs of spaces, hence trimEnd.)
  t = t.replace(/\.\s*$/, '').trimEnd().replace(/\\?%$/, '').trimEnd().replace(/\.$/, '').trim();
  // Grouping braces around a single value (`{5}`) are packaging; with a top-level comma they are a set.
  if (t.startsWith('{') && closingBracket(t) === t.length - 1 && splitTopLevel(t.slice(1, -1)).length === 1) t = t.slice(1, -1).trim();
  t = t.replace(/\{,\}/g, ',');
  if (/^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(t)) t = t.replace(/,/g, '');
  const unit = UNIT_WORDS.exec(t);
  if (unit && /^-?\d/.test(unit[1]!)) t = unit[1]!;
  if (/^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(t)) t = t.replace(/,/g, '');
  // Whitespace goes, except that a comma is followed by one space: a comma that survived the
  // thousands rule separates items, and "1, 234" must not become the number "1,234" on a second pass.
  t = t.replace(/\s+/g, '').replace(/,/g, ', ');
  t = t.replace(/^([+-]?\d+)\.0*$/, '$1').replace(/^([+-]?\d*\.\d*?[1-9])0+$/, '$1');
  return t;
}

type Rational = { num: bigint; den: bigint };

const abs = (x: bigint): bigint => (x < 0n ? -x : x);
function gcd(a: bigint, b: bigint): bigint {
  let [x, y] = [abs(a), abs(b)];
  while (y !== 0n) [x, y] = [y, x % y];
  return x;
}
function rational(num: bigint, den: bigint): Rational | null {
  if (den === 0n) return null;
  const sign = den < 0n ? -1n : 1n;
  const g = gcd(num, den) || 1n;
  return { num: (sign * num) / g, den: (sign * den) / g };
}

/** An unsigned decimal or integer literal, with an optional exponent (`1.5e3`, as programs print). */
function parseDecimal(s: string): Rational | null {
  const m = /^(\d*)(?:\.(\d*))?(?:e([+-]?\d{1,4}))?$/i.exec(s);
  if (!m || (m[1] === '' && (m[2] ?? '') === '')) return null;
  const frac = m[2] ?? '';
  let num = BigInt((m[1] || '0') + frac);
  let den = 10n ** BigInt(frac.length);
  const exp = Number(m[3] ?? '0');
  if (Math.abs(exp) > 400) return null;
  if (exp > 0) num *= 10n ** BigInt(exp);
  else den *= 10n ** BigInt(-exp);
  return rational(num, den);
}

/** A sign prefix such as `-`, `--`, `+-` and what follows it; the sign is -1 for an odd count of `-`. */
function splitSign(s: string): { sign: bigint; rest: string } {
  const m = /^[+-]*/.exec(s)!;
  const minus = [...m[0]].filter((c) => c === '-').length;
  return { sign: minus % 2 === 1 ? -1n : 1n, rest: s.slice(m[0].length) };
}

/**
 * The exact rational value of a number written as an integer, a decimal (`0.5`, `.5`, `1e-3`),
 * `a/b`, or `\frac{a}{b}` (parts themselves signed integers or decimals), with any run of leading
 * signs. Reduced, denominator positive. Null for anything else (including `\sqrt`, `\pi`, mixed
 * numbers such as `2\frac{1}{2}`, which are ambiguous) and for a zero denominator. The input is
 * normalised first, so `$1{,}000$` and `10.0` parse.
 */
export function parseNumber(s: string): { num: bigint; den: bigint } | null {
  if (s.length > MAX_ANSWER_CHARS) return null;
  const { sign, rest } = splitSign(normalizeAnswer(s));
  const part = (p: string): Rational | null => {
    const q = splitSign(p);
    const v = parseDecimal(q.rest);
    return v && { num: q.sign * v.num, den: v.den };
  };
  let value: Rational | null = null;
  const frac = /^\\frac\{([^{}]+)\}\{([^{}]+)\}$/.exec(rest);
  const slash = /^([^/]+)\/([^/]+)$/.exec(rest);
  const pair = frac ?? slash;
  if (pair) {
    const a = part(pair[1]!);
    const b = part(pair[2]!);
    value = a && b ? rational(a.num * b.den, a.den * b.num) : null;
  } else {
    value = parseDecimal(rest);
  }
  return value && { num: sign * value.num, den: value.den };
}

/** Whether the rational's decimal expansion terminates (its denominator is 2^a·5^b). */
function terminates(r: Rational): boolean {
  let d = r.den;
  while (d % 2n === 0n) d /= 2n;
  while (d % 5n === 0n) d /= 5n;
  return d === 1n;
}

/** Exact equality, or the documented tolerance for a decimal answer against a non-terminating gold. */
function numbersMatch(goldText: string, answerText: string): boolean | null {
  const g = parseNumber(goldText);
  const a = parseNumber(answerText);
  if (!g || !a) return null;
  if (g.num === a.num && g.den === a.den) return true;
  if (terminates(g) || !/^[+-]*\d*\.\d+$/.test(answerText)) return false;
  // |a - g| <= |g| * 1e-6, cross-multiplied: |a.num*g.den - g.num*a.den| * 1e6 <= |g.num| * a.den
  const diff = abs(a.num * g.den - g.num * a.den);
  return diff * DECIMAL_TOLERANCE <= abs(g.num) * a.den;
}

/** Top-level comma-separated parts (commas inside brackets or braces do not split). */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

/** A tuple `(a,b)`, a set `{a,b}`, or a bare list `a,b`; null for anything else, intervals included. */
function structure(s: string): { ordered: boolean; items: string[]; kind: string } | null {
  const wrapped = /^([({])(.*)([)}])$/.exec(s);
  if (wrapped && closingBracket(s) === s.length - 1) {
    const kind = wrapped[1]! + wrapped[3]!;
    if (kind !== '()' && kind !== '{}') return null;
    return { ordered: kind === '()', items: splitTopLevel(wrapped[2]!).map((x) => x.trim()), kind };
  }
  const items = splitTopLevel(s).map((x) => x.trim());
  return items.length > 1 ? { ordered: false, items, kind: 'list' } : null;
}

/** The index of the bracket closing the one at position 0, or -1. */
function closingBracket(s: string): number {
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if ((c === ')' || c === ']' || c === '}') && --depth === 0) return i;
  }
  return -1;
}

function matches(gold: string, answer: string, depth: number): boolean {
  if (gold === '' || answer === '') return false;
  if (gold === answer) return true;
  const numeric = numbersMatch(gold, answer);
  if (numeric !== null) return numeric;
  if (depth >= MAX_DEPTH) return false;
  const g = structure(gold);
  const a = structure(answer);
  if (!g || !a || g.kind !== a.kind || g.items.length !== a.items.length) return false;
  if (g.ordered) return g.items.every((gi, i) => matches(gi, a.items[i]!, depth + 1));
  // Unordered: each gold element takes a distinct matching answer element (greedy is enough for
  // the small, mostly-distinct sets math answers are).
  const left = [...a.items];
  return g.items.every((gi) => {
    const j = left.findIndex((ai) => matches(gi, ai, depth + 1));
    if (j < 0) return false;
    left.splice(j, 1);
    return true;
  });
}

/**
 * Whether `answer` is the same final answer as `gold` — gold first (see the header). Both are
 * normalised (normalizeAnswer), then compared as strings, as exact numbers, and as tuples
 * (`(1,2)`, ordered), sets (`{1,2}`, unordered) or bare lists (`1, 2`, unordered), element-wise.
 * Intervals such as `[1,2)` match only exactly. Never throws; empty or over-long input is false.
 */
export function verifyAnswer(gold: string, answer: string): boolean {
  if (gold.length > MAX_ANSWER_CHARS || answer.length > MAX_ANSWER_CHARS) return false;
  try {
    return matches(normalizeAnswer(gold), normalizeAnswer(answer), 0);
  } catch {
    return false; // nothing in model text may crash a reward; a bug here is a non-match
  }
}
