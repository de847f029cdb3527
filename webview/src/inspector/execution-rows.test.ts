// The programs a branch ran, as the inspector shows them: badges, tones, times, sections in order
// (stdin only when given), the cut note, and the flag in the branch list.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Execution } from '../../../server/protocol/trajectory.ts';
import { executionBadge, executionRows, formatDuration, programsFlag } from './execution-rows.ts';

const ok: Execution = {
  language: 'python', code: 'print(int(input()) * 2)', stdin: '21\n', status: 'ok', exitCode: 0, signal: null,
  stdout: '42\n', stderr: '', truncated: false, durationMs: 12.4,
};
const timeout: Execution = {
  language: 'python', code: 'while True: pass', stdin: '', status: 'timeout', exitCode: null, signal: 'SIGKILL',
  stdout: '', stderr: '', truncated: false, durationMs: 2000,
};
const flood: Execution = {
  language: 'python', code: 'print("<b>x</b>" * 10**6)', stdin: '', status: 'output-limit', exitCode: null, signal: 'SIGKILL',
  stdout: '<b>x</b><img src=x onerror=alert(1)>', stderr: '', truncated: true, durationMs: 310,
};
const refused: Execution = {
  language: 'python', code: 'x', stdin: '', status: 'refused', exitCode: null, signal: null,
  stdout: '', stderr: 'sandbox: could not start python3', truncated: false, durationMs: 0,
};

test('one row per program, in order, with badge, tone, time and sections', () => {
  const rows = executionRows([ok, timeout, flood, refused]);
  assert.deepEqual(rows.map((r) => [r.number, r.badge, r.tone, r.time, r.cutNote]), [
    [1, 'ok · exit 0', 'ok', '12 ms', undefined],
    [2, 'timeout · SIGKILL', 'failed', '2.00 s', undefined],
    [3, 'output-limit · SIGKILL', 'failed', '310 ms', 'output cut at the sandbox limit'],
    [4, 'refused', 'refused', '0 ms', undefined],
  ]);
  assert.deepEqual(rows[0]?.sections, [
    { label: 'code', text: 'print(int(input()) * 2)' },
    { label: 'stdin', text: '21\n' },
    { label: 'stdout', text: '42\n' },
    { label: 'stderr', text: '' },
  ]);
  assert.deepEqual(rows[1]?.sections.map((s) => s.label), ['code', 'stdout', 'stderr'], 'no stdin section when none was given');
  // Program output is carried as it is: the view sets it as text, so markup in it stays text.
  assert.equal(rows[2]?.sections.find((s) => s.label === 'stdout')?.text, flood.stdout);
  assert.equal(rows[3]?.sections.find((s) => s.label === 'stderr')?.text, 'sandbox: could not start python3');
});

test('no executions, no rows and no flag', () => {
  assert.deepEqual(executionRows(undefined), []);
  assert.deepEqual(executionRows([]), []);
  assert.equal(programsFlag(undefined), undefined);
  assert.equal(programsFlag([]), undefined);
});

test('the branch-list flag counts programs and those that did not end ok', () => {
  assert.equal(programsFlag([ok]), '1 program');
  assert.equal(programsFlag([ok, timeout, refused]), '3 programs · 2 not ok');
});

test('badges name the exit code or the signal; durations read in ms or s', () => {
  assert.equal(executionBadge({ status: 'error', exitCode: 1, signal: null }), 'error · exit 1');
  assert.equal(executionBadge({ status: 'error', exitCode: null, signal: 'SIGSEGV' }), 'error · SIGSEGV');
  assert.deepEqual([0, 12.6, 999.4, 1000, 1234].map(formatDuration), ['0 ms', '13 ms', '999 ms', '1.00 s', '1.23 s']);
});
