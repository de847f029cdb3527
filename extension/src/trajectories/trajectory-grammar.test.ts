/**
 * Checks the TextMate grammar against what the renderer writes. There is no TextMate engine in the
 * repo, so this walks the grammar's own regexes line by line the way the engine would for this
 * simple grammar (top-level rules; begin/end regions whose end is tried first on each later line).
 * Its patterns use nothing where Oniguruma and JavaScript regexes differ.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { z } from 'zod';
import { renderTrajectory } from './trajectory-document.ts';
import { sampleDetail, sampleDetailWithPrograms, samplePrograms } from './testing/sample-trajectories.ts';

const rule = z.object({ match: z.string().optional(), begin: z.string().optional(), end: z.string().optional(), patterns: z.array(z.object({ match: z.string() }).passthrough()).optional() }).passthrough();
const grammarSchema = z.object({ scopeName: z.string(), repository: z.record(z.string(), rule) });
const grammar = grammarSchema.parse(JSON.parse(readFileSync(new URL('../../syntaxes/troupe-trajectory.tmLanguage.json', import.meta.url), 'utf8')));

function repo(name: string) {
  const r = grammar.repository[name];
  assert.ok(r, `grammar rule ${name}`);
  return r;
}
const re = (s: string | undefined) => new RegExp(s ?? '(?!)', 'u');

type Kind = 'title' | 'turn-rule' | 'field' | 'section' | 'text' | 'branch' | 'program' | 'program-text' | 'note' | 'blank' | 'none';

/** The grammar rule that claims each line. */
function classify(lines: readonly string[]): Kind[] {
  const textSection = repo('text-section');
  const branches = repo('branches-section');
  const fields = (repo('field').patterns ?? []).map((p) => re(p.match));
  const branchLine = re(branches.patterns?.[0]?.match);
  const execution = repo('execution');
  const [programLabel, omittedNote] = (execution.patterns ?? []).map((p) => re(p.match));
  let region: 'text' | 'branches' | 'execution' | undefined;
  return lines.map((line): Kind => {
    if (region === 'text' && re(textSection.end).test(line)) region = undefined;
    if (region === 'branches' && re(branches.end).test(line)) region = undefined;
    if (region === 'execution' && re(execution.end).test(line)) region = undefined;
    if (region === 'text') return line === '' ? 'blank' : 'text';
    if (region === 'branches') return branchLine.test(line) ? 'branch' : 'none';
    if (region === 'execution') {
      if (line === '') return 'blank';
      if (programLabel?.test(line)) return 'section';
      if (omittedNote?.test(line)) return 'note';
      return line.startsWith('      ') ? 'program-text' : 'none';
    }
    if (line === '') return 'blank';
    if (re(repo('title').match).test(line)) return 'title';
    if (re(repo('turn-rule').match).test(line)) return 'turn-rule';
    if (re(textSection.begin).test(line)) return (region = 'text'), 'section';
    if (re(execution.begin).test(line)) return (region = 'execution'), 'program';
    if (re(branches.begin).test(line)) return (region = 'branches'), 'section';
    return fields.some((f) => f.test(line)) ? 'field' : 'none';
  });
}

test('every rendered line is claimed by the grammar rule meant for it', () => {
  const r = renderTrajectory(sampleDetail());
  const lines = r.text.split('\n');
  const kinds = classify(lines);
  assert.equal(kinds[0], 'title');
  for (let i = 1; i <= r.header.endLine; i++) assert.equal(kinds[i], 'field', lines[i]);
  for (const t of r.turns) {
    assert.equal(kinds[t.headerLine], 'turn-rule');
    assert.deepEqual(kinds.slice(t.headerLine + 1, t.headerLine + 4), ['field', 'field', 'field']);
    const block = kinds.slice(t.startLine, t.endLine + 1);
    assert.equal(block.filter((k) => k === 'branch').length, t.branches.length);
  }
  assert.ok(!kinds.includes('none'), `unclaimed lines: ${lines.filter((_, i) => kinds[i] === 'none').join(' | ')}`);
});

test('model output that imitates the document structure stays plain text', () => {
  const detail = sampleDetail();
  const [first] = detail.turns;
  assert.ok(first);
  const imitation = ['── turn 9 · evil (policy x) ──────', '  parse     ok', '  branches', 'Troupe trajectory', '', '  response'].join('\n');
  const r = renderTrajectory({ ...detail, turns: [{ ...first, promptText: imitation, responseText: imitation }] });
  const lines = r.text.split('\n');
  const kinds = classify(lines);
  const [turn] = r.turns;
  assert.ok(turn);
  assert.equal(kinds.filter((k) => k === 'turn-rule').length, 1);
  assert.equal(kinds.filter((k) => k === 'title').length, 1);
  assert.equal(kinds.filter((k) => k === 'text').length, 10, 'five non-blank imitation lines in each of prompt and response');
  assert.equal(kinds.filter((k) => k === 'branch').length, turn.branches.length);
});

test('programs: headers, section labels, omission notes and program text are each claimed by their rule', () => {
  const r = renderTrajectory(sampleDetailWithPrograms());
  const lines = r.text.split('\n');
  const kinds = classify(lines);
  assert.ok(!kinds.includes('none'), `unclaimed lines: ${lines.filter((_, i) => kinds[i] === 'none').join(' | ')}`);
  const [tool] = r.turns;
  assert.ok(tool);
  for (const e of tool.executions) assert.equal(kinds[e.headerLine], 'program', lines[e.headerLine]);
  assert.equal(kinds.filter((k) => k === 'program').length, 3);
  assert.equal(kinds.filter((k) => k === 'note').length, 1, 'the stdout cut to 60 lines');
  assert.equal(kinds.filter((k) => k === 'branch').length, 8, 'the branches section after the programs is still recognised');
  // Every header form the renderer writes opens the region.
  for (const header of ['  ▸ python · error · exit 1', '  ▸ python · error · signal SIGSEGV', '  ▸ python · timeout · signal SIGKILL · [cut]']) {
    assert.equal(classify([header])[0], 'program', header);
  }
});

test('program output that imitates the document stays program text', () => {
  const detail = sampleDetail();
  const [first] = detail.turns;
  const [program] = samplePrograms();
  assert.ok(first && program);
  const imitation = ['── turn 9 · evil (policy x) ──', '  ▸ python · ok · exit 0', '    stderr', '  branches', 'Troupe trajectory', '  parse     ok'].join('\n');
  const r = renderTrajectory({ ...detail, turns: [{ ...first, executions: [{ ...program, stdout: imitation }] }] });
  const kinds = classify(r.text.split('\n'));
  assert.equal(kinds.filter((k) => k === 'turn-rule').length, 1);
  assert.equal(kinds.filter((k) => k === 'program').length, 1);
  assert.equal(kinds.filter((k) => k === 'program-text').length, 2 + 1 + 6 + 1, 'code, stdin, stdout, stderr lines');
  assert.ok(!kinds.includes('none'));
});
