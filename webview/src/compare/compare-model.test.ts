import assert from 'node:assert/strict';
import { test } from 'node:test';
import { colorSlots } from '../dashboard/chart-groups.ts';
import { RunComparison } from './compare-model.ts';

const points = (...values: number[]) => values.map((value, step) => ({ step, value }));

function twoRuns(): RunComparison {
  const c = new RunComparison([
    { runId: 'run-b', label: 'tiny · 15:52' },
    { runId: 'run-a', label: 'tiny · 15:40' },
  ]);
  c.addSeries('run-a', [
    { name: 'val/success', points: points(0.1, 0.2, 0.3) },
    { name: 'entropy', agentId: 'plan', points: points(2, 1.5) },
    { name: 'test/success', points: points(0.1) },
  ]);
  c.addSeries('run-b', [
    { name: 'val/success', points: [{ step: 0, value: 0.2 }, { step: 4, value: 0.5 }] },
    { name: 'entropy', agentId: 'tool', points: points(3) },
    { name: 'entropy', agentId: 'plan', points: points(2.5) },
  ]);
  return c;
}

test('one chart per metric and agent, in the dashboard order, with the runs that have points, in the run order', () => {
  const charts = twoRuns().charts();
  assert.deepEqual(
    charts.map((c) => [c.id, c.title, c.runIds]),
    [
      ['val/success|team', 'Validation success', ['run-b', 'run-a']],
      ['entropy|plan', 'Entropy · plan', ['run-b', 'run-a']],
      ['entropy|tool', 'Entropy · tool', ['run-b']],
    ],
  );
  // The y axis and unit are the dashboard chart's.
  assert.equal(charts[0]!.unit, 'fraction');
  assert.equal(charts[1]!.axis, 'nats per token');
});

test("the test results get no chart (each dashboard's header states them)", () => {
  assert.ok(!twoRuns().charts().some((c) => c.id.startsWith('test/')));
});

test("runs are aligned on the union of their steps, null where a run has no point", () => {
  const c = twoRuns();
  const chart = c.charts()[0]!;
  assert.deepEqual(c.aligned(chart), {
    steps: [0, 1, 2, 4],
    columns: [
      [0.2, null, null, 0.5],
      [0.1, 0.2, 0.3, null],
    ],
  });
});

test('live steps join the stored ones; a run keeps the palette slot its id hashes to', () => {
  const c = twoRuns();
  c.addMetrics('run-a', 3, [{ name: 'val/success', value: 0.4 }]);
  const chart = c.charts()[0]!;
  assert.deepEqual(c.aligned(chart).columns[1], [0.1, 0.2, 0.3, 0.4, null]);
  assert.deepEqual([...c.slots], [...colorSlots(['run-a', 'run-b'])]);
});
