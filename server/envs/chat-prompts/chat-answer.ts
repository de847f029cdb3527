/**
 * Reading the final answer out of an instruction-tuned model's free-form response.
 *
 * The chat prompts ask for reasoning first and the answer last, on a line `#### <answer>` (the
 * reference's plan agent format, PettingLLMs' `stateful_env`: regex `(?m)^\s*####\s+(.+)$`, last match).
 * Real models wrap that line in many ways, so the reader is tolerant about packaging and strict
 * about content:
 *  - a Qwen3 `<think>...</think>` block is skipped (an answer inside the reasoning does not count;
 *    an unclosed block means the response ended while thinking);
 *  - the last `####` line wins; markdown around it (`**`, backticks, `>`) and a label such as
 *    `Final answer:` are dropped; `####` alone on its line takes the next non-empty line, code fence
 *    markers skipped;
 *  - for the tool agent, the reference's `**Actions List**: [...]` is accepted when no `####` line is
 *    (in chat the tool's program prints it: chat-environment.ts `programAgents`);
 *  - list answers may be JSON (`["U","R"]`), Python (`['U', 'R']`), bare (`[U, R]`, `U R`, `URR`).
 * Anything else is a parse failure with a short reason that never quotes the model's text beyond
 * one described character (the environments' rule: errors are safe to show anywhere).
 */
import { describeChar, type Parsed } from '../action-text.ts';

const fail = (error: string): { ok: false; error: string } => ({ ok: false, error });

/** Markdown that may wrap the answer line: bold/italic markers, inline code, quote marks. */
const wrapper = /^[\s>*_`]+|[\s*_`]+$/g;
/** A label before the answer ("Final answer:", "Answer -"). */
const label = /^(?:final\s+)?(?:answer|actions?|moves?|move|fills?)\s*[:=-]\s*/i;
const fence = /^\s*```/;

/** The payload of the response's final `#### ...` line (or `**Actions List**: ...` when allowed). */
export function finalAnswer(text: string, options: { actionsList?: boolean } = {}): Parsed<string> {
  let body = text;
  const close = body.lastIndexOf('</think>');
  if (close >= 0) body = body.slice(close + '</think>'.length);
  else if (body.includes('<think>')) return fail('the reasoning block (<think>) never closed, so no answer follows it');

  const lines = body.split(/\r?\n/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^[\s>*_`]*####(?!#)(.*)$/.exec(lines[i]!);
    if (!m) continue;
    let payload = m[1]!.replace(wrapper, '').replace(label, '').trim();
    if (payload === '') {
      // "####" alone: the answer is on the next non-empty line that is not a fence marker.
      const next = lines.slice(i + 1).find((l) => l.trim() !== '' && !fence.test(l));
      payload = (next ?? '').replace(wrapper, '').replace(label, '').trim();
    }
    if (payload === '') return fail("the '####' answer line is empty");
    return { ok: true, action: payload };
  }
  if (options.actionsList) {
    for (let i = lines.length - 1; i >= 0; i--) {
      const m = /^[\s>*_`]*actions\s+list[*_`]*\s*:\s*(.*)$/i.exec(lines[i]!);
      if (m) {
        const payload = m[1]!.replace(wrapper, '').trim();
        if (payload !== '') return { ok: true, action: payload };
      }
    }
  }
  return fail("no final answer: the response must end with a line '#### <answer>'");
}

/**
 * Splits a list answer into its items: `["U","R"]`, `['U', 'R']`, `[U, R]`, `U, R`, `U R`.
 * Quotes around items are dropped; a trailing period is allowed.
 */
export function listItems(payload: string): Parsed<string[]> {
  let s = payload.trim().replace(/\.$/, '').trim();
  if (s.startsWith('[') !== s.endsWith(']')) return fail('the answer list has an unmatched bracket');
  if (s.startsWith('[')) s = s.slice(1, -1);
  const items = s
    .split(/[\s,;]+/)
    .map((x) => x.replace(/^["']|["']$/g, ''))
    .filter((x) => x !== '');
  if (items.length === 0) return fail('the answer list is empty');
  return { ok: true, action: items };
}

const moveWords: Readonly<Record<string, string>> = { u: 'U', up: 'U', d: 'D', down: 'D', l: 'L', left: 'L', r: 'R', right: 'R' };

/**
 * A list of grid moves as the environments' action text (`URRD`). Items are letters or words
 * (case-insensitive: `U`, `up`, `Right`); an item of several move letters (`URR`) counts as each.
 */
export function parseMoveList(payload: string): Parsed<string> {
  const items = listItems(payload);
  if (!items.ok) return items;
  let out = '';
  for (const [i, item] of items.action.entries()) {
    const word = moveWords[item.toLowerCase()];
    if (word !== undefined) out += word;
    else if (/^[UDLR]+$/.test(item)) out += item;
    else return fail(`answer item ${i + 1} is not a move (starts with ${describeChar(item[0]!)}); use "U", "D", "L", "R"`);
  }
  return { ok: true, action: out };
}

/** Parses a JSON-like nested list of integers (`[[1,2,3],[2,1,4]]`, Python spacing allowed). */
export function parseIntegerRows(payload: string): Parsed<number[][]> {
  const s = payload.trim().replace(/\.$/, '').trim();
  let value: unknown;
  try {
    value = JSON.parse(s.replace(/\(/g, '[').replace(/\)/g, ']'));
  } catch {
    return fail('the answer is not a list of lists of numbers, like [[1,2,3],[2,1,4]]');
  }
  if (!Array.isArray(value) || value.length === 0) return fail('the answer must be a non-empty list of lists');
  const rows: number[][] = [];
  for (const [i, row] of value.entries()) {
    if (!Array.isArray(row) || !row.every((x): x is number => Number.isInteger(x))) return fail(`answer entry ${i + 1} is not a list of whole numbers`);
    rows.push(row);
  }
  return { ok: true, action: rows };
}

/** Moves (`URR`) as the JSON list the chat prompts ask for: `["U","R","R"]`. */
export function formatMoveList(moves: string): string {
  return JSON.stringify([...moves]);
}

/** Formats moves (`URR`) the way the chat prompts ask for them: `#### ["U","R","R"]`. */
export function formatMoveAnswer(moves: string): string {
  return `#### ${formatMoveList(moves)}`;
}

/**
 * The last ```python (or bare ```) block of a response, or why there is none: the program of an
 * agent asked for code (the math tool, the puzzles' tool in chat).
 */
export function lastPythonBlock(response: string): Parsed<string> {
  const blocks = [...response.matchAll(/```[ \t]*(?:python|py)?[ \t]*\r?\n([\s\S]*?)```/gi)];
  const code = blocks.at(-1)?.[1]?.trim();
  if (code === undefined) return { ok: false, error: 'no ```python code block' };
  if (code === '') return { ok: false, error: 'the ```python block is empty' };
  return { ok: true, action: code };
}
