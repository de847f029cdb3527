/**
 * The handshake between the run manager's last-resort terminate and a run worker's engine calls
 * (EngineCalls): never "terminate" while a call is in flight, and no call after a terminate was
 * granted. The two threads' sides are exercised on one buffer; the cross-thread case with real
 * workers is test/server/run-shutdown.ort.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { EngineCalls } from './engine-gate.ts';

test('tryTerminate refuses while a call is in flight, and lets essential calls resume', () => {
  const calls = EngineCalls.create();
  assert.equal(calls.enter('gated'), true);
  assert.equal(calls.tryTerminate(), false);
  // The refusal closed the gate: gated calls are refused, the engine's close is still allowed.
  assert.equal(calls.enter('gated'), false);
  assert.equal(calls.enter('essential'), true);
  calls.leave();
  calls.leave();
  assert.equal(calls.inFlight, 0);
  assert.equal(calls.tryTerminate(), true);
  assert.equal(calls.enter('gated'), false, 'nothing starts once terminating was granted');
  assert.equal(calls.inFlight, 0);
});

test('across threads: while a worker makes essential calls back to back, tryTerminate is granted only between them', async () => {
  const calls = EngineCalls.create();
  // Cell 0: the worker is inside a call; cell 1: it has started. It enters and leaves as the
  // EngineCalls protocol does (count, then state), stops when it sees TERMINATING (2), and reports
  // how many calls it made.
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(
    `const { workerData: { buffer, flagsBuffer }, parentPort } = require('node:worker_threads');
     const cells = new Int32Array(buffer, 0, 2);
     const flags = new Int32Array(flagsBuffer);
     let n = 0;
     Atomics.store(flags, 1, 1);
     Atomics.notify(flags, 1);
     for (;;) {
       Atomics.add(cells, 0, 1);
       if (Atomics.load(cells, 1) === 2) { Atomics.sub(cells, 0, 1); break; }
       Atomics.store(flags, 0, 1);
       for (let i = 0; i < 100; i++) n++;
       Atomics.store(flags, 0, 0);
       Atomics.sub(cells, 0, 1);
     }
     parentPort.postMessage(n);`,
    { eval: true, workerData: { buffer: calls.buffer, flagsBuffer: flags.buffer } },
  );
  const made = new Promise<number>((resolve) => worker.once('message', resolve));
  Atomics.wait(flags, 1, 0, 10_000);
  // Start once the worker is seen inside a call, so the two really contend.
  const until = Date.now() + 10_000;
  while (Atomics.load(flags, 0) === 0 && Date.now() < until);
  let refusals = 0;
  while (!calls.tryTerminate()) refusals++;
  assert.equal(Atomics.load(flags, 0), 0, 'granted while the worker was inside a call');
  assert.ok((await made) > 0, 'the worker made calls before it was stopped');
  await worker.terminate();
  // Usually the first tries land inside a call and are refused; how many is up to the scheduler.
  void refusals;
});
