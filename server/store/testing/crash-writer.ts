/**
 * Child process for the crash tests: commits steps to a run in a loop and reports each commit on
 * stdout, so the parent can SIGKILL it at a moment it chooses.
 *
 *   node --import tsx crash-writer.ts <db> <runId> loop
 *     commits large steps until killed, printing `committed <step>` after each. The step is built
 *     once and renumbered, so nearly all of the loop's time is spent inside commits.
 *   node --import tsx crash-writer.ts <db> <runId> hang <step>
 *     commits small steps up to <step>, then a large one; inside its transaction, after every row is
 *     written, prints `in-flight <step> <wal bytes before> <wal bytes now>` and blocks until killed.
 *     The large step overflows the page cache, so part of the uncommitted transaction is on disk in
 *     the WAL when the process dies — the case recovery must get right.
 *
 * Lines are written with writeSync so they reach the parent before the next statement runs.
 */
import { statSync, writeSync } from 'node:fs';
import { openRunStore } from '../index.ts';
import { crashStepShape, sampleStep, spillStepShape } from './sample-step.ts';

const [dbPath, runId, mode, hangAt] = process.argv.slice(2);
if (dbPath === undefined || runId === undefined || (mode !== 'loop' && mode !== 'hang')) {
  throw new Error('usage: crash-writer.ts <db> <runId> loop | hang <step>');
}
const store = openRunStore(dbPath);
const say = (line: string) => writeSync(1, `${line}\n`);
const walBytes = () => statSync(`${dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 0;
const hangStep = Number(hangAt);
const loopStep = sampleStep({ step: 0, ...crashStepShape });

for (let step = (store.lastCommittedStep(runId) ?? 0) + 1; ; step++) {
  const before = walBytes();
  if (mode === 'hang' && step === hangStep) {
    store.commitStep(runId, sampleStep({ step, ...spillStepShape }), {
      beforeCommit: () => {
        say(`in-flight ${step} ${before} ${walBytes()}`);
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // blocks until SIGKILL
      },
    });
  } else {
    store.commitStep(runId, mode === 'loop' ? { ...loopStep, step } : sampleStep({ step }));
    say(`committed ${step}`);
  }
}
