import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lineChart } from './svg-chart.ts';

const series = [{ name: 'shared (2 seeds)', points: [[0, 8] as const, [10, 12] as const], band: [[0, 7, 9] as const, [10, 11, 13] as const] }];

describe('line chart', () => {
  it('draws fractions with percentage ticks by default', () => {
    const svg = lineChart('t', [{ name: 'a', points: [[0, 0.5], [10, 1]] }]);
    assert.match(svg, />100%</);
    assert.match(svg, />validation success</);
    assert.doesNotMatch(svg, /stroke-dasharray/);
  });

  it('draws points on their own scale, with the bar as a dashed line at its height', () => {
    const svg = lineChart('t', series, { yMax: 15, points: true, yLabel: 'validation score (points)', reference: { value: 11.42, name: 'bot team (11.42)' } });
    assert.match(svg, />15</);
    assert.doesNotMatch(svg, /%</);
    // Plot from y = 36 to 360 − 44 = 316: a value v sits at 36 + (1 − v/15)·280.
    const at = (v: number) => (36 + (1 - v / 15) * 280).toFixed(1);
    assert.match(svg, new RegExp(`y1="${at(11.42)}" y2="${at(11.42)}" stroke="#333" stroke-width="1.5" stroke-dasharray`));
    assert.ok(svg.includes(`,${at(12)}"`), 'the last point is drawn at 12 on the 0-15 scale');
    assert.match(svg, />bot team \(11\.42\)</);
  });
});
