// The chat answer reader against the kinds of text instruction-tuned models actually write:
// reasoning before the answer, Qwen3 think blocks, markdown and code fences, stray whitespace,
// Python-style lists, and malformed answers, which must fail with a reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Parsed } from '../action-text.ts';
import { finalAnswer, formatMoveAnswer, parseMoveList } from './chat-answer.ts';
import { chatPrompters } from './prompt-styles.ts';
import { createEnvironment } from '../environments.ts';

const moves = (text: string, agent = 'plan'): Parsed<string> => {
  const env = createEnvironment('plan-path', 1);
  return chatPrompters['plan-path'].toAction(env, agent, text, env.observe(agent));
};
const ok = (r: Parsed<string>, want: string, what: string): void => assert.deepEqual(r, { ok: true, action: want }, what);
const err = (r: Parsed<string>, re: RegExp, what: string): void => {
  assert.equal(r.ok, false, what);
  if (!r.ok) assert.match(r.error, re, what);
};

test('move answers: the final #### line of realistic responses', () => {
  ok(moves('The goal is 3 up and 3 right. Going up twice, right, up, then right twice avoids the walls.\n\n#### ["U","U","R","U","R","R"]'), 'UURURR', 'plain reasoning');
  ok(moves('<think>\nUp first? #### ["L"] would hit the edge.\n</think>\n\nI will go up then right.\n\n#### ["U", "R"]'), 'UR', 'Qwen3 thinking: an answer inside <think> does not count');
  ok(moves('**Plan:** go down.\n\n**#### ["D", "R"]**'), 'DR', 'bold markdown');
  ok(moves("Here is my answer:\n```\n#### ['U', 'R']\n```\n"), 'UR', 'inside a code fence, Python quotes');
  ok(moves('####\n```json\n["U","R"]\n```'), 'UR', '#### alone, the list in the fenced block after it');
  ok(moves('   ####    [ "U" ,  "R" ]   \n\n\n'), 'UR', 'extra whitespace');
  ok(moves('#### [up, Up, RIGHT]'), 'UUR', 'words, any case');
  ok(moves('#### URR'), 'URR', 'a bare move string');
  ok(moves('#### U R R.'), 'URR', 'spaced letters and a full stop');
  ok(moves('#### Final answer: ["D"]'), 'D', 'a label after ####');
  ok(moves('#### ["L"]\nWait, L is blocked by the edge. Let me redo it.\n#### ["R"]'), 'R', 'the last #### line wins');
  ok(moves('> #### `["U"]`'), 'U', 'quoted and inline code');
  ok(moves('I run the check.\n**Actions List**: ["R", "D"]', 'tool'), 'RD', "the reference tool agent's Actions List line");
});

test('malformed move answers fail with a named reason that quotes no model text', () => {
  err(moves('I think we should go up and then right.'), /^no final answer: the response must end with a line '#### <answer>'$/, 'no answer line');
  err(moves('**Actions List**: ["R", "D"]', 'plan'), /^no final answer/, 'Actions List is only the tool agent\'s format');
  err(moves('<think>\nFirst up, then... #### ["U"]'), /^the reasoning block \(<think>\) never closed/, 'cut off while thinking');
  err(moves('#### []'), /^the answer list is empty$/, 'empty list');
  err(moves('####   \n\n'), /^the '####' answer line is empty$/, 'empty answer line');
  err(moves('#### ["U", "X"]'), /^answer item 2 is not a move \(starts with 'X'\); use "U", "D", "L", "R"$/, 'bad item');
  err(moves('#### ["U", "northeast"]'), /^answer item 2 is not a move \(starts with 'n'\)/, 'a word that is not a move');
  err(moves('#### ["U", "R"'), /^the answer list has an unmatched bracket$/, 'unclosed list');
  err(moves('##### ["U"]'), /^no final answer/, 'five hashes is not the marker');
  err(moves('#### ["U", "\u00e9"]'), /answer item 2 is not a move \(starts with code 233\)/, 'non-ASCII is described, not quoted');
});

test('finalAnswer and formatMoveAnswer round-trip', () => {
  for (const m of ['U', 'UURRDDLL', 'RDRDRD']) {
    const line = finalAnswer(formatMoveAnswer(m));
    assert.ok(line.ok, m);
    if (line.ok) ok(parseMoveList(line.action), m, m);
  }
  assert.equal(formatMoveAnswer('UR'), '#### ["U","R"]');
});

test('sudoku answers: fill lists (JSON, Python tuples, terse) or a whole grid', () => {
  const env = createEnvironment('sudoku', 1); // 341. / .234 / ..23 / ..41
  const read = (text: string): Parsed<string> => chatPrompters.sudoku.toAction(env, 'tool', text, env.observe('tool'));
  ok(read('Row 1 misses 2, so (1,4)=2.\n#### [[1,4,2],[2,1,1]]'), '1,4,2 2,1,1', 'JSON fills');
  ok(read('#### [(1, 4, 2), (2, 1, 1)]'), '1,4,2 2,1,1', 'Python tuples');
  ok(read('#### 1,4,2 2,1,1'), '1,4,2 2,1,1', 'the terse form');
  ok(read('The solved grid:\n#### [[3,4,1,2],[1,2,3,4],[4,1,2,3],[2,3,4,1]]'), '1,4,2 2,1,1 3,1,4 3,2,1 4,1,2 4,2,3', 'a whole grid becomes the fills it changes');
  err(read('#### [[3,4,1,2],[1,2,3,4]]'), /^the answer must be fills \[row, column, value\] or the whole 4x4 grid as 4 rows of 4 digits$/, 'half a grid');
  err(read('#### [[3,4,1,.],[1,2,3,4]]'), /^the answer is not a list of lists of numbers/, 'not numbers');
  err(read('#### [[1,4,2], "x"]'), /^answer entry 2 is not a list of whole numbers$/, 'mixed entries');
  err(read('#### [[3,4,1,.],[1,2,3,4]'), /^the answer is not a list of lists/, 'broken JSON');
  err(read('#### [[3,4,1,2],[1,2,3],[4,1,2,3],[2,3,4,1]]'), /whole 4x4 grid/, 'rows of mixed length');
  err(read('#### [[3,4,1,0],[0,2,3,4],[0,0,2,3],[0,0,4,1]]'), /^the answered grid changes no cell$/, 'the unchanged grid');
});

test('tic-tac-toe answers: one free cell number', () => {
  const env = createEnvironment('tic-tac-toe', 1);
  const read = (text: string): Parsed<string> => chatPrompters['tic-tac-toe'].toAction(env, 'x', text, env.observe('x'));
  ok(read('The centre is strongest.\n#### 5'), '5', 'digit');
  ok(read('#### [7]'), '7', 'bracketed');
  ok(read('#### "3"'), '3', 'quoted');
  ok(read('#### cell 9.'), '9', 'with a word and a stop');
  err(read('#### 10'), /^the answer must be one cell number from 1 to 9$/, 'out of range');
  err(read('#### X(1,1)'), /^the answer must be one cell number/, 'the old prototype format');
  err(read('I take the centre.'), /^no final answer/, 'no answer line');
});
