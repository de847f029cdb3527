import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LoadWatchdog } from './load-watchdog.ts';

/** A host whose page never starts unless the test says `ready`; it records what the watchdog did. */
function host(visible = true) {
  const h = { visible, reloads: [] as number[], gaveUp: [] as number[] };
  const api = { visible: () => h.visible, reload: (n: number) => h.reloads.push(n), giveUp: (n: number) => h.gaveUp.push(n) };
  return { h, api };
}

/** Every watchdog a test made, disposed after it even when it failed (a live timer keeps the process up). */
const made: LoadWatchdog[] = [];
afterEach(() => made.splice(0).forEach((w) => w.dispose()));
function watchdog(...args: ConstructorParameters<typeof LoadWatchdog>): LoadWatchdog {
  const w = new LoadWatchdog(...args);
  made.push(w);
  return w;
}

/** Polls `done` (a busy machine delays timers, so no fixed sleep decides a test). */
async function until(done: () => boolean, what: string, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

test('a page that never says ready is loaded again `retries` times, then the user is told once', async () => {
  const { h, api } = host();
  const w = watchdog(api, 20, 2);
  w.loaded();
  await until(() => h.gaveUp.length > 0, 'the notice');
  await sleep(100);
  assert.deepEqual(h.reloads, [1, 2]);
  assert.deepEqual(h.gaveUp, [3], 'three loads, then one notice');
  w.dispose();
});

test('a page that says ready is left alone; a slow first load is reloaded and then counts as started', async () => {
  const { h, api } = host();
  const w = watchdog(api, 30, 3);
  w.loaded();
  w.ready();
  await sleep(150);
  assert.deepEqual(h.reloads, []);

  const slow = host();
  const w2 = watchdog(slow.api, 30, 3);
  w2.loaded();
  await until(() => slow.h.reloads.length > 0, 'a reload');
  w2.ready();
  await sleep(150);
  assert.equal(slow.h.reloads.length, 1);
  assert.deepEqual(slow.h.gaveUp, []);
  w.dispose();
  w2.dispose();
});

test('the clock runs only while the panel is in view; shown again, the page must say ready again', async () => {
  const { h, api } = host(false);
  const w = watchdog(api, 20, 3);
  w.loaded();
  await sleep(100);
  assert.deepEqual(h.reloads, [], 'out of view: no page to wait for');
  h.visible = true;
  w.viewChanged();
  w.ready();
  await sleep(100);
  assert.deepEqual(h.reloads, [], 'in view and started');
  // Hidden (the page is dropped) and shown again: a new page, which never starts.
  h.visible = false;
  w.viewChanged();
  h.visible = true;
  w.viewChanged();
  await until(() => h.reloads.length > 0, 'a reload of the page shown again');
  w.dispose();
  const n = h.reloads.length;
  await sleep(100);
  assert.equal(h.reloads.length, n, 'disposed: nothing more');
});
