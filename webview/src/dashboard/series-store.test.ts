// The dashboard's data: history and progress bucketed into charts, rows in step order, typed
// columns for complete series and null-holding ones for series with gaps, stacked running sums.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { colorSlots } from './chart-groups.ts';
import { SeriesStore, type ChartData } from './series-store.ts';

const chart = (s: SeriesStore, id: string): ChartData => {
  const c = s.charts().find((x) => x.spec.id === id);
  assert.ok(c, `chart ${id}`);
  return c;
};
const plain = (col: unknown) => Array.from(col as ArrayLike<number | null>);

test('history is bucketed into charts with one series per agent and per policy', () => {
  const s = new SeriesStore();
  s.addSeries([
    { name: 'reward/mean', agentId: 'tool', points: [{ step: 1, value: 0.1 }, { step: 2, value: 0.2 }] },
    { name: 'reward/mean', agentId: 'plan', points: [{ step: 1, value: 0.3 }, { step: 2, value: 0.4 }] },
    { name: 'kl/approx', policyId: 'p0', points: [{ step: 1, value: 0.01 }, { step: 2, value: 0.02 }] },
    { name: 'update/samples', policyId: 'p0', points: [{ step: 1, value: 12 }] },
  ]);
  assert.deepEqual(s.charts().map((c) => c.spec.id), ['reward', 'kl', 'update-samples']);
  const reward = chart(s, 'reward');
  assert.deepEqual(reward.series().map((x) => x.label), ['plan', 'tool']);
  const data = reward.aligned();
  assert.ok(data[0] instanceof Float64Array);
  assert.deepEqual(plain(data[0]), [1, 2]);
  assert.ok(data[1] instanceof Float64Array, 'a complete series is handed over as a typed view');
  assert.deepEqual(plain(data[1]), [0.3, 0.4]);
  assert.deepEqual(plain(data[2]), [0.1, 0.2]);
  assert.equal(s.lastStep, 2);
  // Colours follow the scope's name, the same in every chart (and every run).
  const slots = colorSlots(['tool', 'plan', 'policy p0']);
  assert.deepEqual(reward.series().map((x) => x.scopeIndex), [slots.get('plan'), slots.get('tool')]);
  assert.equal(chart(s, 'kl').series()[0]!.scopeIndex, slots.get('policy p0'));
});

test('the test results get no card (the header states them); a colour collision arriving late recolours every chart', () => {
  const s = new SeriesStore();
  s.addProgress(0, [{ name: 'val/success', value: 0.5 }, { name: 'test/success', value: 0.4 }, { name: 'test/reward', value: 0.1 }]);
  assert.deepEqual(s.charts().map((c) => c.spec.id), ['success']);
  s.addProgress(1, [{ name: 'reward/mean', value: 1, agentId: 'plan' }]);
  const reward = chart(s, 'reward');
  const before = reward.structureVersion;
  s.takeDirty();
  // coder hashes to plan's slot and sorts first: plan moves, and the chart must be rebuilt.
  s.addProgress(2, [{ name: 'entropy', value: 1, agentId: 'coder' }]);
  assert.ok(reward.structureVersion > before);
  assert.ok(s.takeDirty().includes(reward));
  const slots = colorSlots(['plan', 'coder']);
  assert.equal(reward.series()[0]!.scopeIndex, slots.get('plan'));
});

test('progress appends rows in place and reports gaps', () => {
  const s = new SeriesStore();
  assert.equal(s.addProgress(0, [{ name: 'val/success', value: 0.2 }]), null);
  s.takeDirty();
  assert.equal(s.addProgress(1, [{ name: 'train/success', value: 0.5 }, { name: 'reward/mean', value: 1, agentId: 'a' }]), null);
  assert.deepEqual(s.takeDirty().map((c) => c.spec.id).sort(), ['reward', 'success']);
  assert.deepEqual(s.takeDirty(), []);
  const success = chart(s, 'success');
  const data = success.aligned();
  assert.deepEqual(plain(data[0]), [0, 1]);
  // train/success has no step 0 and val/success no step 1: nulls, not NaN.
  assert.deepEqual(success.series().map((x) => x.name), ['train/success', 'val/success']);
  assert.deepEqual(data[1], [null, 0.5]);
  assert.deepEqual(data[2], [0.2, null]);
  assert.equal(s.addProgress(4, [{ name: 'train/success', value: 0.7 }]), 2, 'steps 2 and 3 were missed');
  assert.equal(s.lastStep, 4);
});

test('many appends grow the buffers; a late point fills its row; duplicates overwrite', () => {
  const s = new SeriesStore();
  for (let step = 1; step <= 1000; step++) s.addProgress(step, [{ name: 'entropy', value: step, policyId: 'p' }]);
  const c = chart(s, 'entropy');
  assert.equal(c.rows, 1000);
  assert.ok(c.steps.length >= 1000);
  let col = c.aligned()[1]!;
  assert.ok(col instanceof Float64Array && col.length === 1000 && col[999] === 1000);
  s.addProgress(500, [{ name: 'entropy', value: -1, policyId: 'p' }]);
  assert.equal(c.rows, 1000);
  assert.equal(c.aligned()[1]![499], -1);
  // A gap filled after a reconnect, in the middle: rows stay in step order.
  s.addSeries([{ name: 'entropy', policyId: 'p', points: [{ step: 0, value: 7 }] }]);
  col = c.aligned()[1]!;
  assert.equal(c.rows, 1001);
  assert.equal(c.steps[0], 0);
  assert.equal(col[0], 7);
  assert.equal(col[1], 1);
});

test('a series added later starts with nulls and becomes a typed view once complete', () => {
  const s = new SeriesStore();
  s.addProgress(1, [{ name: 'kl/approx', value: 1, policyId: 'a' }]);
  const c = chart(s, 'kl');
  const before = c.structureVersion;
  s.addProgress(2, [{ name: 'kl/approx', value: 2, policyId: 'a' }, { name: 'kl/approx', value: 3, policyId: 'b' }]);
  assert.ok(c.structureVersion > before, 'a new series asks for a rebuild');
  assert.deepEqual(c.aligned()[2], [null, 3]);
  s.addSeries([{ name: 'kl/approx', policyId: 'b', points: [{ step: 1, value: 4 }] }]);
  const col = c.aligned()[2]!;
  assert.ok(col instanceof Float64Array);
  assert.deepEqual(plain(col), [4, 3]);
});

test('stacked phases hold running sums; the legend reads the parts', () => {
  const s = new SeriesStore();
  s.addProgress(1, [
    { name: 'time/total_ms', value: 60 },
    { name: 'time/update_ms', value: 20 },
    { name: 'time/rollout_ms', value: 30 },
    { name: 'time/validation_ms', value: 10 },
  ]);
  s.addProgress(2, [{ name: 'time/rollout_ms', value: 35 }, { name: 'time/update_ms', value: 25 }, { name: 'time/total_ms', value: 60 }]);
  const c = chart(s, 'time');
  const series = c.series();
  assert.deepEqual(series.map((x) => [x.name, x.stacked]), [
    ['time/rollout_ms', true],
    ['time/update_ms', true],
    ['time/validation_ms', true],
    ['time/total_ms', false],
  ]);
  const data = c.aligned();
  assert.deepEqual(plain(data[1]), [30, 35]);
  assert.deepEqual(plain(data[2]), [50, 60]);
  assert.deepEqual(plain(data[3]), [60, 60], 'a missing part counts as 0 in the stack');
  assert.deepEqual(plain(data[4]), [60, 60]);
  assert.equal(c.rawValue(1, 0), 20);
  assert.equal(c.rawValue(2, 1), null);
  assert.equal(c.rawValue(9, 0), null);
});
