import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RoundRobin } from './round-robin.ts';

test('agents act in order; a round closes after the last, and the episode ends at maxTurns rounds', () => {
  const r = new RoundRobin(['tool', 'plan'], 2);
  const seen: Array<[string, number, boolean]> = [];
  while (!r.done) {
    const agent = r.agent;
    const closed = r.pass();
    seen.push([agent, r.turn, closed]);
  }
  assert.deepEqual(seen, [
    ['tool', 0, false],
    ['plan', 1, true],
    ['tool', 1, false],
    ['plan', 2, true],
  ]);
  assert.equal(r.agent, 'tool');
  assert.equal(r.success, false);
});

test('a single agent closes a round with every act', () => {
  const r = new RoundRobin(['solo'], 3);
  assert.deepEqual([r.pass(), r.pass()], [true, true]);
  assert.deepEqual([r.turn, r.done], [2, false]);
  assert.equal(r.pass(), true);
  assert.equal(r.done, true);
});

test('a copy carries the whole state and shares nothing with the original', () => {
  const r = new RoundRobin(['coder', 'tester'], 4);
  r.pass();
  r.stats['coder']!.acts = 3;
  r.success = true;
  const c = r.copy();
  assert.deepEqual([c.turn, c.next, c.done, c.success, c.agent, c.stats], [r.turn, r.next, r.done, r.success, r.agent, r.stats]);
  c.pass();
  c.stats['coder']!.acts++;
  c.done = true;
  assert.deepEqual([r.turn, r.next, r.done, r.stats['coder']!.acts], [0, 1, false, 3], 'the original moved with its copy');
});
