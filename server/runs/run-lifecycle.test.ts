/**
 * The run manager's rules that need no worker: the state a run ends in when its worker exits
 * (run-lifecycle.ts `runEnd`), and its training slots (run-queue.ts). The same rules with real
 * workers are run-manager.ort.test.ts and test/server/run-shutdown.ort.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runEnd } from './run-lifecycle.ts';
import { RunQueue } from './run-queue.ts';
import type { WorkerEnd } from './run-thread.ts';

const exit = (o: Partial<WorkerEnd> = {}): WorkerEnd => ({ code: 0, outcome: null, crash: null, terminated: false, ...o });
const asked = (request: 'pause' | 'stop' | null, failure: string | null = null) => ({ request, failure });
const oom = Object.assign(new Error('heap out of memory'), { code: 'ERR_WORKER_OUT_OF_MEMORY' });

test('a worker that finished every step leaves the run done; one stopped at a boundary leaves it paused, or done when stop was asked', () => {
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'finished', lastStep: 4, stopped: false } }), asked(null), 512), { state: 'done' });
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'finished', lastStep: 2, stopped: true } }), asked('pause'), 512), { state: 'paused' });
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'finished', lastStep: 2, stopped: true } }), asked('stop'), 512), { state: 'done' });
});

test('the manager\'s failure (memory limit) decides over what the worker reported', () => {
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'finished', lastStep: 4, stopped: false } }), asked(null, 'out of memory: server'), 512), { state: 'failed', error: 'out of memory: server' });
});

test('a reported failure, a heap out of memory and a crash fail the run, each with its own error', () => {
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'failed', error: 'trainer threw' }, crash: new Error('later') }), asked(null), 512), { state: 'failed', error: 'trainer threw' });
  const heap = runEnd(exit({ code: 1, crash: oom }), asked(null), 512);
  assert.equal(heap.state, 'failed');
  assert.match(heap.state === 'failed' ? heap.error : '', /JavaScript heap reached its limit of 512 MB \(heap out of memory\)/);
  assert.deepEqual(runEnd(exit({ code: 1, crash: new Error('boom') }), asked(null), 512), { state: 'failed', error: 'the run worker crashed: boom' });
});

test('an aborted or terminated worker leaves the run paused (done when stop was asked); a silent exit fails it', () => {
  assert.deepEqual(runEnd(exit({ outcome: { kind: 'aborted' } }), asked('pause'), 512), { state: 'paused' });
  assert.deepEqual(runEnd(exit({ code: 1, terminated: true }), asked('stop'), 512), { state: 'done' });
  assert.deepEqual(runEnd(exit({ code: 3 }), asked(null), 512), { state: 'failed', error: 'the run worker exited with code 3 before training ended' });
});

test('slots: runs training and slots promised count against the limit; the queue starts in order', () => {
  assert.throws(() => new RunQueue(0), /maxConcurrentRuns must be an integer >= 1, got 0/);
  const q = new RunQueue(2);
  assert.equal(q.reserve(1), true); // one training, one promised: full
  assert.equal(q.reserve(1), false);
  q.push('a');
  q.push('b');
  q.push('c');
  assert.equal(q.next(1), undefined);
  q.release();
  q.remove('b');
  assert.equal(q.next(1), 'a');
  assert.equal(q.next(2), undefined);
  assert.equal(q.next(1), 'c');
  assert.deepEqual(q.queued, []);
});
