/**
 * Per-token shading of a response: which characters of `responseText` each response token covers,
 * and how strongly to shade it by log-probability or advantage. Pure, unit tested.
 *
 * Alignment. The server stores the response text decoded with special tokens skipped, and the
 * sampled ids with them (the stop token `<|end|>` ends every finished response; a model can also
 * sample other specials mid-text). The embedded tokenizer (server/models/tokenizer.ts) is
 * character-level: id 10 is '\n', ids 11..105 are printable ASCII (id = code − 21), every other id
 * is special and has no text. So, in order of preference:
 *   1. the ids decode, with that layout, to exactly the text: every token gets its character and the
 *      specials become markers (exact);
 *   2. as many code points as tokens: another character-level tokenizer, one to one (exact);
 *   3. otherwise (a subword tokenizer from a Hugging Face checkpoint, whose vocabulary the webview
 *      does not have): the text is split evenly over the tokens by position, so shading still shows
 *      where the surprising stretch is, and `exact: false` makes the view say so.
 * The layout in (1) is a copy, but it is checked against the text before it is trusted: a different
 * tokenizer falls through to (2) or (3) instead of producing wrong boundaries.
 */

export interface TokenSegment {
  /** Index into responseTokens / logprobs. */
  readonly token: number;
  /** The characters the token covers ('' for a special token). */
  readonly text: string;
  /** A special token's name (e.g. `<|end|>`), shown as a marker; absent for text tokens. */
  readonly special?: string;
}

export interface TokenAlignment {
  readonly segments: readonly TokenSegment[];
  /** Whether segment boundaries are the real token boundaries. */
  readonly exact: boolean;
}

/** Names of the embedded tokenizer's special ids (see the table in server/models/tokenizer.ts). */
const SPECIAL_NAMES: Readonly<Record<number, string>> = {
  0: '<pad>', 1: '<bos>', 2: '<eos>', 3: '<unk>', 4: '<|system|>', 5: '<|user|>', 6: '<|assistant|>', 7: '<|tool|>', 8: '<|plan|>', 9: '<|end|>',
  106: '<|reserved_0|>', 107: '<|reserved_1|>', 108: '<|reserved_2|>', 109: '<|reserved_3|>', 110: '<|reserved_4|>', 111: '<|reserved_5|>',
};

/** A token's character under the embedded layout, or null for a special id. */
function embeddedChar(id: number): string | null {
  if (id === 10) return '\n';
  if (id >= 11 && id <= 105) return String.fromCharCode(id + 21);
  return null;
}

export function alignTokens(text: string, tokens: ArrayLike<number>): TokenAlignment {
  const embedded = alignEmbedded(text, tokens);
  if (embedded) return { segments: embedded, exact: true };
  const chars = Array.from(text);
  const n = tokens.length;
  if (chars.length === n) return { segments: chars.map((c, i) => ({ token: i, text: c })), exact: true };
  // Spread by position: token i covers characters [floor(i·C/n), floor((i+1)·C/n)).
  const segments: TokenSegment[] = [];
  for (let i = 0; i < n; i++) {
    segments.push({ token: i, text: chars.slice(Math.floor((i * chars.length) / n), Math.floor(((i + 1) * chars.length) / n)).join('') });
  }
  if (n === 0 && chars.length > 0) segments.push({ token: -1, text });
  return { segments, exact: false };
}

function alignEmbedded(text: string, tokens: ArrayLike<number>): TokenSegment[] | null {
  const out: TokenSegment[] = [];
  let at = 0;
  for (let i = 0; i < tokens.length; i++) {
    const id = tokens[i]!;
    const c = embeddedChar(id);
    if (c === null) {
      const name = SPECIAL_NAMES[id];
      if (name === undefined) return null; // outside the embedded vocabulary: another tokenizer
      out.push({ token: i, text: '', special: name });
      continue;
    }
    if (text[at] !== c) return null;
    out.push({ token: i, text: c });
    at++;
  }
  return at === text.length ? out : null;
}

/** Shading runs in this many steps: class names `l0`..`l8`, each a fixed colour-mix percentage in CSS. */
export const SHADE_LEVELS = 8;

/** Log-probs at or below −LOGPROB_SPAN nats (p ≈ 0.25%) get the strongest shade. */
export const LOGPROB_SPAN = 6;
/** |advantage| at or above this gets the strongest shade (advantages are z-scores within a group). */
export const ADVANTAGE_SPAN = 2;

const clamp01 = (x: number) => (x <= 0 ? 0 : x > 1 ? 1 : x); // `<= 0` also turns −0 into 0

/**
 * How surprising a token was, 0 (certain, log-prob 0) to 1 (log-prob ≤ −span). In nats, not in
 * probability: 1 − p saturates by p = 0.1 and would paint every unlikely token alike. The square
 * root lifts the first nats (issue 32: linear shading left a coin-flip token, −0.69 nats, at the
 * faintest level, which reads as no shade at all), while keeping the order and the ends.
 */
export function logprobIntensity(logprob: number, span = LOGPROB_SPAN): number {
  return Number.isFinite(logprob) ? Math.sqrt(clamp01(-logprob / span)) : 1;
}

/** Diverging: positive advantages one colour, negative the other, intensity by magnitude. */
export function advantageShade(advantage: number | undefined, span = ADVANTAGE_SPAN): { sign: 'pos' | 'neg' | 'none'; intensity: number } {
  if (advantage === undefined || !Number.isFinite(advantage) || advantage === 0) return { sign: 'none', intensity: 0 };
  return { sign: advantage > 0 ? 'pos' : 'neg', intensity: clamp01(Math.abs(advantage) / span) };
}

/** An intensity in [0, 1] as a level 0..SHADE_LEVELS (0 only for exactly 0, so any signal shows). */
export function shadeLevel(intensity: number): number {
  const x = clamp01(Number.isFinite(intensity) ? intensity : 0);
  return x === 0 ? 0 : Math.max(1, Math.round(x * SHADE_LEVELS));
}

/** A token's text for a tooltip: visible whitespace, a special's name. */
export function tokenLabel(segment: TokenSegment): string {
  if (segment.special) return segment.special;
  return JSON.stringify(segment.text);
}
