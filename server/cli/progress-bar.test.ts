import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ProgressBar, type ProgressStream } from './progress-bar.ts';

function stream(isTTY: boolean): ProgressStream & { text: string } {
  const s = { text: '', isTTY, columns: 200, write: (t: string) => (s.text += t) };
  return s;
}

test('into a pipe: plain lines for the first, marked and last steps, and at most one per interval otherwise', () => {
  const out = stream(false);
  let now = 0;
  const bar = new ProgressBar({ total: 6, stream: out, intervalMs: 8_000, now: () => now });
  for (const [step, mark] of [[1, false], [2, false], [3, true], [4, false], [5, false], [6, false]] as const) {
    now += 4_000;
    bar.tick(step, 4_000, [`x ${step}`], mark);
  }
  bar.log('a log line');
  bar.finish();
  const lines = out.text.trimEnd().split('\n');
  // 1 (first), 3 (marked), 6 (last); 5 because 8 s passed since step 3's line, 4 only 4 s.
  assert.deepEqual(lines.map((l) => l.split('  ')[0]), ['step 1/6', 'step 3/6', 'step 5/6', 'step 6/6', 'a log line']);
  assert.equal(lines[0], 'step 1/6  x 1  4.0 s/step  ETA 20 s');
  assert.equal(lines[3], 'step 6/6  x 6  4.0 s/step');
  assert.ok(!out.text.includes('\r'), 'no terminal control characters in a pipe');
});

test('on a terminal: one line redrawn in place, log lines above it, marked steps kept in the scrollback', () => {
  const out = stream(true);
  const bar = new ProgressBar({ total: 4, stream: out });
  bar.tick(1, 90_000, ['reward 0.5']);
  assert.equal(out.text, '\r\x1b[Kstep 1/4  [#####...............]  reward 0.5  90.0 s/step  ETA 4m 30s');
  bar.log('hello');
  assert.ok(out.text.endsWith('\r\x1b[Khello\n\r\x1b[Kstep 1/4  [#####...............]  reward 0.5  90.0 s/step  ETA 4m 30s'));
  bar.tick(2, 30_000, ['val 50.0%'], true);
  assert.ok(out.text.endsWith('\r\x1b[Kstep 2/4  val 50.0%  60.0 s/step  ETA 2m 00s\n'));
  bar.finish();
  assert.ok(out.text.endsWith('\n'));
});
