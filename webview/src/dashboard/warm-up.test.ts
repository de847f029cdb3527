import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WarmUpProgress } from '../../../server/protocol/methods.ts';
import { SeriesStore } from './series-store.ts';
import { describeWarmUp, warmUpChartSpecs, warmUpDone, warmUpSeries } from './warm-up.ts';

const progress = (o: Partial<WarmUpProgress> = {}): WarmUpProgress => ({ modelId: 'base', model: 1, models: 1, stage: 'training', step: 45, steps: 300, loss: 1.23456, etaMs: 95_000, checkpointStep: 30, points: [], ...o });
const duration = (ms: number) => `${Math.round(ms / 1000)} s`;

test('the status line says what the warm-up does, how far it is, its loss, ETA and checkpoint', () => {
  assert.equal(describeWarmUp(progress(), { training: true, duration }), 'step 45 / 300 · loss 1.2346 · ETA 95 s · checkpointed at step 30');
  assert.equal(describeWarmUp(progress({ stage: 'demonstrations', step: 0, loss: null, etaMs: null, checkpointStep: null }), { training: true, duration }), 'collecting solver demonstrations · step 0 / 300');
  assert.match(describeWarmUp(progress({ stage: 'dagger', step: 100 }), { training: true, duration }), /^DAgger round at step 100: .* · step 100 \/ 300/);
  // Of several models, which one; a paused warm-up has no ETA and no activity.
  assert.equal(describeWarmUp(progress({ modelId: 'tool-model', model: 2, models: 2, stage: 'dagger' }), { training: false, duration }), "model 'tool-model' (2 of 2) · step 45 / 300 · loss 1.2346 · checkpointed at step 30");
});

test('the warm-up is done at the last step of the last model', () => {
  assert.equal(warmUpDone(progress({ step: 300 })), true);
  assert.equal(warmUpDone(progress({ step: 299 })), false);
  assert.equal(warmUpDone(progress({ step: 300, model: 1, models: 2 })), false);
});

test('loss points make one warm-up chart with a line per model, merged by step', () => {
  const store = new SeriesStore(warmUpChartSpecs);
  store.addSeries([warmUpSeries({ modelId: 'base', points: [{ step: 1, loss: 4 }, { step: 2, loss: 3.5 }] })]);
  // A report repeating a point (the history load and a notification both held it) overwrites it.
  store.addSeries([warmUpSeries({ modelId: 'base', points: [{ step: 2, loss: 3.5 }, { step: 3, loss: 3 }] }), warmUpSeries({ modelId: 'other', points: [{ step: 1, loss: 5 }] })]);
  const [chart, ...more] = store.charts();
  assert.equal(more.length, 0);
  assert.equal(chart!.spec.id, 'warm-up-loss');
  assert.deepEqual(chart!.series().map((s) => s.label), ['model base', 'model other']);
  const [steps, base] = chart!.aligned();
  assert.deepEqual([...steps], [1, 2, 3]);
  assert.deepEqual([...base!], [4, 3.5, 3]);
});
