import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  annotationHoverMarkdown,
  annotationLabel,
  annotationSign,
  escapeMarkdown,
  EXECUTION_LINE_WIDTH,
  EXECUTION_SECTION_LINES,
  executionAtHeaderLine,
  executionHoverMarkdown,
  executionLabel,
  executionSummary,
  formatDuration,
  formatSigned,
  groupStats,
  renderTrajectory,
  turnAtHeaderLine,
  turnRule,
} from './trajectory-document.ts';
import { keptTurn, sampleDetail, sampleDetailWithPrograms, samplePrograms, turnRecord } from './testing/sample-trajectories.ts';

/** The golden rendering of sampleDetail(): change it only together with the layout rules. */
const GOLDEN = [
  'Troupe trajectory',
  '  id        12',
  '  run       run-a',
  '  step      3',
  '  phase     train',
  '  env       plan-path · seed 1042',
  '  instance  0 · rollout 0',
  '  success   yes',
  '  team      +0.50',
  '  local     +0.25',
  '  turns     2',
  '',
  `── turn 0 · tool (policy tool) ──`,
  '  reward',
  '  branch    2 of 4 · kept',
  '  group     0/tool/0 · 4 samples',
  '  parse     ok',
  '  prompt',
  '    Grid 3x3.',
  '',
  '    Find a path from S to G.',
  '  response',
  '    MOVE right',
  '    then down',
  '  branches',
  '      0   0.00  MOVE up',
  '      1  -0.25  (empty)',
  '    ▸ 2  +1.25  MOVE right',
  '      3  +1.00  MOVE right',
  '',
  `── turn 1 · plan (policy plan) ──`,
  '  reward',
  '  branch    0 of 4 · kept',
  '  group     0/plan/1 · 4 samples',
  '  parse     error: no MOVE line',
  '  prompt',
  '    Tool says: path S-R-G',
  '  response',
  '    I think',
  '    we go 0',
  '  branches',
  '    ▸ 0  -0.50  [parse error] I think',
  '      1  -0.50  [parse error] I think',
  '      2  -0.50  [parse error] I think',
  '      3  -0.50  [parse error] I think',
  '',
].join('\n');

test('renders the golden document: header, K=4 branches, a turn with a parse error', () => {
  assert.equal(renderTrajectory(sampleDetail()).text, GOLDEN);
});

test('rendering is deterministic and does not depend on the order of siblings', () => {
  const detail = sampleDetail();
  const shuffled = structuredClone(detail);
  for (const turn of shuffled.turns) turn.siblings.reverse();
  assert.equal(renderTrajectory(shuffled).text, renderTrajectory(detail).text);
  assert.deepEqual(renderTrajectory(detail), renderTrajectory(detail));
});

test('annotation line ranges match the rendered lines', () => {
  const r = renderTrajectory(sampleDetail());
  const lines = r.text.split('\n');
  assert.deepEqual(r.header, { startLine: 0, endLine: 10 });
  assert.equal(lines[r.header.endLine], '  turns     2');
  assert.deepEqual(r.turns.map((t) => [t.headerLine, t.rewardLine, t.startLine, t.endLine]), [[12, 13, 12, 28], [30, 31, 30, 44]]);
  for (const t of r.turns) {
    assert.equal(lines[t.headerLine], turnRule(t));
    // The reward annotation's line: a short label, no number (the decoration draws the values).
    assert.equal(lines[t.rewardLine], '  reward');
    assert.ok(lines[t.endLine]?.startsWith('    '), 'a block ends on its last branch line');
    assert.equal(lines[t.endLine + 1], '', 'blocks are separated by one blank line');
    const block = lines.slice(t.startLine, t.endLine + 1);
    assert.equal(block.filter((l) => l.startsWith('── turn ')).length, 1, 'one rule per block');
  }
  assert.equal(turnAtHeaderLine(r, 30)?.agentId, 'plan');
  assert.equal(turnAtHeaderLine(r, 31)?.agentId, 'plan', 'the hover works on the reward line too');
  assert.equal(turnAtHeaderLine(r, 32), undefined);
});

test('annotation values: rewards, advantage, group, K, kept, parse error', () => {
  const [tool, plan] = renderTrajectory(sampleDetail()).turns;
  assert.ok(tool && plan);
  assert.deepEqual(
    { turn: tool.turn, agent: tool.agentId, branch: tool.branch, kept: tool.kept, k: tool.k, team: tool.teamReward, local: tool.localReward, reward: tool.reward, adv: tool.advantage, group: tool.groupId, size: tool.groupSize, parse: tool.parseError },
    { turn: 0, agent: 'tool', branch: 2, kept: true, k: 4, team: 1, local: 0.25, reward: 1.25, adv: 1.02, group: '0/tool/0', size: 4, parse: undefined },
  );
  assert.deepEqual(tool.branches.map((b) => [b.branch, b.isThisTurn, b.reward]), [[0, false, 0], [1, false, -0.25], [2, true, 1.25], [3, false, 1]]);
  assert.equal(plan.parseError, 'no MOVE line');
  assert.equal(annotationLabel(tool), 'team +1.00 · local +0.25 · adv +1.02');
  assert.equal(annotationLabel(plan), 'team -0.50 · local 0.00 · adv 0.00', 'the parse line says the error');
  assert.equal(annotationSign(tool), 'positive');
  assert.equal(annotationSign(plan), 'zero', 'a zero-variance group has advantage 0');
});

test('group statistics recomputed from the members reproduce the stored advantages', () => {
  const [tool] = renderTrajectory(sampleDetail()).turns;
  assert.ok(tool);
  const stats = groupStats(tool);
  assert.ok(stats);
  for (const b of tool.branches) assert.equal(((b.reward - stats.mean) / (stats.std + 1e-6)).toFixed(2), b.advantage?.toFixed(2));
});

test('hover breakdown lists the rewards, group and every branch with the kept one marked', () => {
  const [tool, plan] = renderTrajectory(sampleDetail()).turns;
  assert.ok(tool && plan);
  const md = annotationHoverMarkdown(tool);
  assert.match(md, /\| reward \(α·team \+ local\) \| \+1\.25 \|/);
  assert.match(md, /\| advantage \| \+1\.02 \|/);
  assert.match(md, /\| group \| `0\/tool\/0` · 4 samples \|/);
  assert.match(md, /\| group mean \/ std \| \+0\.50 \/ 0\.74 \|/);
  assert.match(md, /\| \*\*▸ 2\*\* \| \+1\.25 \| \+1\.00 \| \+0\.25 \| \+1\.02 \| kept \|/);
  assert.match(md, /\| 1 \| -0\.25 \| 0\.00 \| -0\.25 \| -1\.02 \| {2}\|/);
  assert.match(annotationHoverMarkdown(plan), /\| parse error \| no MOVE line \|/);
  // Every branch within the hover's first lines (it scrolls past 250 px): the table comes right after the title.
  const lines = md.split('\n');
  assert.equal(lines.findIndex((l) => l.startsWith('| branch |')), 2);
  assert.ok(lines.findIndex((l) => l.startsWith('| **▸')) < lines.findIndex((l) => l.startsWith('| team reward |')));
});

test('an untrained turn has no advantage or group, and the annotation says so', () => {
  const detail = sampleDetail();
  const [first] = detail.turns;
  assert.ok(first);
  const { advantage: _a, groupId: _g, ...rest } = first;
  const siblings = first.siblings.map(({ advantage: _sa, groupId: _sg, ...s }) => s);
  const r = renderTrajectory({ ...detail, turns: [{ ...rest, siblings }] });
  const [turn] = r.turns;
  assert.ok(turn);
  assert.equal(turn.groupSize, undefined);
  assert.equal(annotationLabel(turn), 'team +1.00 · local +0.25');
  assert.equal(annotationSign(turn), 'positive', 'falls back to the sign of the combined reward');
  assert.match(r.text, /\n {2}group {5}none \(not trained on\)\n/);
  assert.match(annotationHoverMarkdown(turn), /\| advantage \| none \(not trained on\) \|/);
});

test('independent rollouts: group members from other trajectories are listed after this one, by trajectory', () => {
  const mk = (trajectoryId: number, reward: number, text: string) =>
    ({ id: trajectoryId * 10, trajectoryId, turn: 0, agentId: 'tool', policyId: 'tool', branch: 0, kept: true, promptText: 'p', responseText: text, teamReward: reward, localReward: 0, reward, advantage: reward, groupId: '0/tool/0' });
  const detail = sampleDetail({ id: 40 });
  const r = renderTrajectory({ ...detail, turns: [keptTurn(mk(40, 1, 'mine'), [turnRecord(mk(41, 2, 'b')), turnRecord(mk(39, 0, 'a'))])] });
  assert.deepEqual(r.text.split('\n').slice(-5), ['  branches', '    ▸ 0            +1.00  mine', '      traj 39 · 0   0.00  a', '      traj 41 · 0  +2.00  b', '']);
  const [turn] = r.turns;
  assert.ok(turn);
  assert.equal(turn.k, 1, 'one branch per (turn, agent) in this trajectory');
  assert.equal(turn.groupSize, 3);
  assert.match(annotationHoverMarkdown(turn), /\| 0 \(traj 39\) \| 0\.00 \|/);
});

test('diff alignment: two trajectories of the same task have the same line structure', () => {
  const early = renderTrajectory(sampleDetail({ id: 12, step: 3 }));
  const late = renderTrajectory(sampleDetail({ id: 40, step: 10, shift: 0.5, success: false }));
  const a = early.text.split('\n');
  const b = late.text.split('\n');
  assert.equal(a.length, b.length);
  const label = (l: string) => l.slice(0, 12);
  assert.deepEqual(a.slice(0, early.header.endLine + 1).map(label), b.slice(0, late.header.endLine + 1).map(label), 'header labels line up');
  assert.deepEqual(early.header, late.header);
  assert.deepEqual(early.turns.map((t) => [t.headerLine, t.endLine]), late.turns.map((t) => [t.headerLine, t.endLine]));
  for (const t of early.turns) assert.equal(a[t.headerLine], b[t.headerLine], 'turn rules are identical, so the diff pairs them');
  // Only lines carrying volatile values differ: ids, step, success, totals, and branch rewards.
  const changed = a.flatMap((l, i) => (l === b[i] ? [] : [i]));
  assert.deepEqual(changed, [1, 3, 7, 8, 25, 26, 27, 28, 41, 42, 43, 44]);
});

test('turn rules stay on one line whatever the ids', () => {
  assert.equal(turnRule({ turn: 3, agentId: 'a', policyId: 'p' }), '── turn 3 · a (policy p) ──');
  assert.equal(turnRule({ turn: 3, agentId: 'bad\nid', policyId: 'p' }), '── turn 3 · bad ⏎ id (policy p) ──');
});

test('text edge cases: CRLF, trailing newline, empty, long first lines', () => {
  const detail = sampleDetail();
  const [first] = detail.turns;
  assert.ok(first);
  const r = renderTrajectory({ ...detail, turns: [{ ...first, promptText: '', responseText: 'a\r\nb\n', siblings: [turnRecord({ ...first, id: 999, branch: 0, kept: false, responseText: `\n\n${'y'.repeat(200)}` })] }] });
  const lines = r.text.split('\n');
  const at = (s: string) => lines.indexOf(s);
  assert.equal(lines[at('  prompt') + 1], '    (empty)');
  assert.deepEqual(lines.slice(at('  response') + 1, at('  branches')), ['    a', '    b']);
  assert.equal(lines[at('  branches') + 1], `      0  +1.25  ${'y'.repeat(79)}…`);
});

test('an episode with no turns still renders a complete header', () => {
  const detail = sampleDetail();
  const r = renderTrajectory({ ...detail, trajectory: { ...detail.trajectory, turnCount: 0 }, turns: [] });
  assert.equal(r.turns.length, 0);
  assert.ok(r.text.endsWith('  turns     0\n\n  (no turns)\n'));
});

test('formatSigned and escapeMarkdown', () => {
  assert.deepEqual([1.005, 0.25, 0, -0, -0.001, -2.5].map(formatSigned), ['+1.00', '+0.25', '0.00', '0.00', '0.00', '-2.50']);
  assert.equal(escapeMarkdown('a|b*c_[x](y)'), 'a\\|b\\*c\\_\\[x\\]\\(y\\)');
});

// ---- Programs a turn ran ------------------------------------------------------------------------

/** The golden rendering of the tool turn's programs in sampleDetailWithPrograms(), stdout's lines 5…59 elided. */
const PROGRAMS_GOLDEN_HEAD = [
  '  response',
  '    MOVE right',
  '    then down',
  '  ▸ python · ok · exit 0',
  '    code',
  '      n = int(input())',
  '      print(n * (n + 1) // 2)',
  '    stdin',
  '      10',
  '    stdout',
  '      55',
  '    stderr',
  '      (empty)',
  '  ▸ python · output-limit · signal SIGKILL · [cut]',
  '    code',
  '      i = 0',
  '      while True:',
  '          print(i)',
  '          i += 1',
  '    stdout',
  '      0',
];
const PROGRAMS_GOLDEN_TAIL = [
  '      59',
  '    … 40 more lines of stdout not shown',
  '    stderr',
  '      ␛[31mKilled␛[0m',
  '  ▸ python · refused',
  '    code',
  '      import os',
  '    stdout',
  '      (empty)',
  '    stderr',
  '      sandbox: could not start python3',
  '  branches',
];

test('programs render after the response: header with status, exit or signal and [cut]; code, stdin when given, stdout, stderr', () => {
  const lines = renderTrajectory(sampleDetailWithPrograms()).text.split('\n');
  const start = lines.indexOf('  response');
  assert.deepEqual(lines.slice(start, start + PROGRAMS_GOLDEN_HEAD.length), PROGRAMS_GOLDEN_HEAD);
  const end = lines.indexOf('  branches') + 1;
  assert.deepEqual(lines.slice(end - PROGRAMS_GOLDEN_TAIL.length, end), PROGRAMS_GOLDEN_TAIL);
  assert.equal(end - start, PROGRAMS_GOLDEN_HEAD.length + 58 + PROGRAMS_GOLDEN_TAIL.length, 'stdout shows its first 60 lines (0 … 59)');
  assert.equal(EXECUTION_SECTION_LINES.stdout, 60);
  // The turn without programs is rendered exactly as before.
  const plain = GOLDEN.split('\n');
  assert.deepEqual(lines.slice(lines.indexOf('── turn 1 · plan (policy plan) ──')), plain.slice(plain.indexOf('── turn 1 · plan (policy plan) ──')));
});

test('every status has its header; a signal and an exit code are both shown when both are set', () => {
  const base = { language: 'python', exitCode: null, signal: null, truncated: false } as const;
  assert.equal(executionSummary({ ...base, status: 'ok', exitCode: 0 }), '▸ python · ok · exit 0');
  assert.equal(executionSummary({ ...base, status: 'error', exitCode: 1 }), '▸ python · error · exit 1');
  assert.equal(executionSummary({ ...base, status: 'error', signal: 'SIGSEGV' }), '▸ python · error · signal SIGSEGV');
  assert.equal(executionSummary({ ...base, status: 'timeout', signal: 'SIGKILL' }), '▸ python · timeout · signal SIGKILL');
  assert.equal(executionSummary({ ...base, status: 'output-limit', signal: 'SIGKILL', truncated: true }), '▸ python · output-limit · signal SIGKILL · [cut]');
  assert.equal(executionSummary({ ...base, status: 'refused' }), '▸ python · refused');
});

test('program positions: headers, block ends, and the turn positions around them', () => {
  const r = renderTrajectory(sampleDetailWithPrograms());
  const lines = r.text.split('\n');
  const [tool, plan] = r.turns;
  assert.ok(tool && plan);
  assert.deepEqual(tool.executions.map((e) => [e.headerLine, e.endLine]), [[24, 33], [34, 103], [104, 110]]);
  for (const e of tool.executions) {
    assert.ok(lines[e.headerLine]?.startsWith('  ▸ python · '), lines[e.headerLine]);
    assert.ok(e.headerLine > tool.startLine && e.endLine < tool.endLine);
    assert.equal(executionAtHeaderLine(r, e.headerLine), e);
  }
  assert.equal(lines[tool.executions[2]!.endLine + 1], '  branches');
  assert.deepEqual(tool.executions.map((e) => e.omittedLines.stdout), [0, 40, 0]);
  assert.deepEqual(plan.executions, []);
  // The second turn moved down by the programs' lines; its rule, decorations and CodeLens follow.
  assert.deepEqual(r.turns.map((t) => [t.headerLine, t.endLine]), [[12, 115], [117, 131]]);
  assert.equal(lines[plan.headerLine], turnRule(plan));
  assert.equal(turnAtHeaderLine(r, 117)?.agentId, 'plan');
  assert.equal(turnAtHeaderLine(r, 24), undefined);
  assert.equal(executionAtHeaderLine(r, 25), undefined);
  assert.equal(executionAtHeaderLine(r, 12), undefined);
});

test('durations stay out of the text: the same programs at other speeds diff clean, the time is in the annotation', () => {
  const fast = renderTrajectory(sampleDetailWithPrograms({}, 1));
  const slow = renderTrajectory(sampleDetailWithPrograms({}, 3));
  assert.equal(fast.text, slow.text);
  assert.deepEqual(fast.turns[0]?.executions.map(executionLabel), ['12 ms', '840 ms', '0 ms']);
  assert.deepEqual(slow.turns[0]?.executions.map(executionLabel), ['37 ms', '2.52 s', '0 ms']);
  assert.equal(formatDuration(999.6), '1000 ms');
  assert.equal(formatDuration(1000), '1.00 s');
});

test('the hover on a program header says how it ended, its time, and what the document left out', () => {
  const [ok, killed, refused] = renderTrajectory(sampleDetailWithPrograms()).turns[0]?.executions ?? [];
  assert.ok(ok && killed && refused);
  assert.match(executionHoverMarkdown(ok), /\*\*program 1\*\* — exited with status 0/);
  assert.match(executionHoverMarkdown(ok), /\| time \| 12 ms \|/);
  const md = executionHoverMarkdown(killed);
  assert.match(md, /\| status \| output-limit \|/);
  assert.match(md, /\| signal \| SIGKILL \|/);
  assert.match(md, /\| output \| cut by the sandbox at its output limit \|/);
  assert.match(md, /\| not shown here \| stdout 40 lines/);
  assert.match(executionHoverMarkdown(refused), /never ran/);
  assert.doesNotMatch(executionHoverMarkdown(refused), /not shown here/);
});

test('program output that imitates the document, control characters and very long lines stay inside their block', () => {
  const detail = sampleDetail();
  const [first] = detail.turns;
  assert.ok(first);
  const [program] = samplePrograms();
  assert.ok(program);
  const imitation = ['── turn 9 · evil (policy x) ──', '  ▸ python · ok · exit 0', '    stderr', '  branches', 'x\u0000y\u007f\r\nz\rw', 'q'.repeat(EXECUTION_LINE_WIDTH + 5)].join('\n');
  const r = renderTrajectory({ ...detail, turns: [{ ...first, executions: [{ ...program, stdout: imitation, code: '', stdin: '' }] }] });
  const [turn] = r.turns;
  assert.ok(turn);
  const lines = r.text.split('\n');
  const [e] = turn.executions;
  assert.ok(e);
  assert.deepEqual(lines.slice(e.headerLine, e.endLine + 1), [
    '  ▸ python · ok · exit 0',
    '    code',
    '      (empty)',
    '    stdout',
    '      ── turn 9 · evil (policy x) ──',
    '        ▸ python · ok · exit 0',
    '          stderr',
    '        branches',
    '      x␀y␡',
    '      z',
    '      w',
    `      ${'q'.repeat(EXECUTION_LINE_WIDTH)}… (5 more characters)`,
    '    stderr',
    '      (empty)',
  ]);
  assert.equal(lines.filter((l) => l.startsWith('── turn ')).length, 1);
  assert.equal(lines.filter((l) => l === '  branches').length, 1);
});
