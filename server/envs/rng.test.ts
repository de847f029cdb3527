import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Rng } from './rng.ts';

test('the same seed and salt give the same stream; a salt or seed change gives another', () => {
  const draw = (r: Rng): number[] => Array.from({ length: 8 }, () => r.nextUint32());
  assert.deepEqual(draw(new Rng(7, 'a')), draw(new Rng(7, 'a')));
  assert.notDeepEqual(draw(new Rng(7, 'a')), draw(new Rng(7, 'b')));
  assert.notDeepEqual(draw(new Rng(7, 'a')), draw(new Rng(8, 'a')));
  assert.notDeepEqual(draw(new Rng(0)), draw(new Rng(2 ** 32)), 'high bits of the seed count');
});

test('int stays in range and covers it; shuffle permutes; clone continues independently', () => {
  const r = new Rng(1);
  const seen = new Set<number>();
  for (let i = 0; i < 1000; i++) {
    const x = r.int(6);
    assert.ok(Number.isInteger(x) && x >= 0 && x < 6);
    seen.add(x);
  }
  assert.equal(seen.size, 6);
  assert.deepEqual(r.shuffle([...Array(20).keys()]).sort((a, b) => a - b), [...Array(20).keys()]);
  const c = r.clone();
  assert.equal(c.nextUint32(), r.nextUint32());
  c.nextUint32();
  assert.notEqual(c.nextUint32(), r.nextUint32());
  assert.throws(() => r.int(0), /positive integer/);
  assert.throws(() => r.pick([]), /empty list/);
  assert.throws(() => new Rng(Number.NaN), /safe integer/);
});
