import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReconnectBackoff, backoffDelayMs, defaultBackoff } from './reconnect-backoff.ts';

test('delays double from 250 ms up to a 30 s ceiling', () => {
  const b = new ReconnectBackoff({ jitter: 0 });
  const delays = Array.from({ length: 10 }, () => b.next());
  assert.deepEqual(delays, [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.equal(backoffDelayMs(100, defaultBackoff), 30_000);
});

test('jitter stays within ±20% and spans both sides', () => {
  const low = new ReconnectBackoff({ random: () => 0 });
  const high = new ReconnectBackoff({ random: () => 0.999999 });
  assert.equal(low.next(), 200);
  assert.equal(high.next(), 300);
  const b = new ReconnectBackoff();
  for (let i = 0; i < 12; i++) {
    const base = backoffDelayMs(i, defaultBackoff);
    const d = b.next()!;
    assert.ok(d >= base * 0.8 && d <= base * 1.2, `attempt ${i}: ${d} vs ${base}`);
  }
});

test('a success resets the schedule; attempts can be capped', () => {
  const b = new ReconnectBackoff({ jitter: 0, maxAttempts: 2 });
  assert.equal(b.next(), 250);
  assert.equal(b.next(), 500);
  assert.equal(b.next(), null);
  assert.equal(b.attempts, 2);
  b.reset();
  assert.equal(b.next(), 250);
});
