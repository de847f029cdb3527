/**
 * The run comparison webview: several runs overlaid, one chart per metric (and agent or policy)
 * with a line per run, as W&B and TensorBoard show runs side by side. Each run has one colour in
 * every chart (the legend above says which); an EMA smoothing slider (TensorBoard's debiased EMA,
 * smoothing.ts) smooths the lines while the raw curve stays drawn, faint, underneath in the same
 * colour, so smoothing never hides a spike. Each chart's own legend gives every run's value at the
 * cursor (the smoothed one; the raw one is in its hidden row). Live runs add their steps as they
 * commit. The webview state keeps the run ids and the smoothing; the host resends the data on `ready`.
 */
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import '../dashboard/dashboard.css';
import './compare.css';
import { h, openHostChannel } from '../host-channel.ts';
import { DISCONNECTED_CHARTS, StatusBanner } from '../status-banner.ts';
import { compareStateSchema, hostToCompareSchema, type CompareState, type CompareToHost, type HostToCompare } from '../messages.ts';
import { formatValue } from '../dashboard/chart-groups.ts';
import { fitLabels, STEP_TICK_INCREMENTS } from '../dashboard/chart-view.ts';
import { runEnding } from '../run-outcome.ts';
import type { RunSummary } from '../../../server/protocol/trajectory.ts';
import { readTheme, watchTheme, type ChartTheme } from '../dashboard/theme.ts';
import { RunComparison, type CompareChart } from './compare-model.ts';
import { SMOOTHING_DEFAULT, SMOOTHING_MAX, smoothEma } from './smoothing.ts';

const HEIGHT = 200;
/** The raw line's opacity under the smoothed one (TensorBoard draws it at about 0.25 too). */
const RAW_ALPHA = 0.25;
const SYNC_KEY = 'troupe-compare-steps';

const title = h('h1', { text: 'Compare runs' });
const summary = h('span', { class: 'muted' });
const legend = h('ul', { class: 'runs-legend', attrs: { 'aria-label': 'Runs' } });
const slider = h('input', { attrs: { type: 'range', min: '0', max: String(SMOOTHING_MAX), step: '0.01', 'aria-label': 'Smoothing' } });
const sliderValue = h('output', { attrs: { 'aria-live': 'polite' } });
const smoothingBox = h(
  'label',
  { class: 'smoothing', attrs: { title: "Exponential moving average (TensorBoard's, debiased); the raw line stays drawn, faint, underneath" } },
  h('span', { text: 'Smoothing' }),
  slider,
  sliderValue,
);
/** Narrows the charts by title (a comparison of per-agent metrics has dozens), as W&B's panel search. */
const filter = h('input', { class: 'chart-filter', attrs: { type: 'search', placeholder: 'Filter charts (e.g. loss, plan)', 'aria-label': 'Filter charts' } });
const shown = h('span', { class: 'muted' });
const banner = new StatusBanner(DISCONNECTED_CHARTS);
const grid = h('main', { class: 'grid' });
const empty = h('p', { class: 'muted empty', text: 'Loading the runs…' });
document.body.append(h('header', { class: 'bar' }, title, summary, legend), h('div', { class: 'controls' }, smoothingBox, filter, shown), banner.element, empty, grid);

let theme = readTheme();
let comparison = new RunComparison([]);
let state: CompareState | null = null;
const plots = new Map<string, { card: HTMLElement; body: HTMLElement; plot: uPlot | null; runIds: string; chart: CompareChart }>();
let frame = 0;

const channel = openHostChannel<typeof hostToCompareSchema, CompareToHost, CompareState>(hostToCompareSchema, 'host → compare', onMessage);
const stored = compareStateSchema.safeParse(channel.getState());
if (stored.success) state = stored.data;
setSmoothing(state?.smoothing ?? SMOOTHING_DEFAULT, false);

slider.addEventListener('input', () => setSmoothing(Number(slider.value), true));
filter.addEventListener('input', () => schedule());

/** Whether a chart title matches the filter: every word of it, in any order, case aside. */
function matchesFilter(chartTitle: string): boolean {
  const words = filter.value.toLowerCase().split(/\s+/).filter((w) => w !== '');
  const t = chartTitle.toLowerCase();
  return words.every((w) => t.includes(w));
}

function setSmoothing(weight: number, save: boolean): void {
  const w = Math.min(SMOOTHING_MAX, Math.max(0, Number.isFinite(weight) ? weight : SMOOTHING_DEFAULT));
  slider.value = String(w);
  sliderValue.textContent = w.toFixed(2);
  if (save && state) {
    state = { ...state, smoothing: w };
    channel.setState(state);
  }
  schedule();
}

const smoothing = () => Number(slider.value);

function onMessage(m: HostToCompare): void {
  switch (m.type) {
    case 'init': {
      for (const p of plots.values()) {
        p.plot?.destroy();
        p.card.remove();
      }
      plots.clear();
      comparison = new RunComparison(m.runs.map((r) => ({ runId: r.runId, label: r.label })));
      for (const r of m.runs) comparison.addSeries(r.runId, r.series);
      const runIds = m.runs.map((r) => r.runId);
      state = { runIds, smoothing: smoothing() };
      channel.setState(state);
      renderLegend(m.runs.map((r) => ({ runId: r.runId, label: r.label, state: r.run === null ? null : stateWord(r.run), error: r.error ?? null })));
      const errors = m.runs.filter((r) => r.error !== undefined);
      banner.show(errors.length === 0 ? null : errors.map((r) => `${r.label}: ${r.error}`).join(' · '));
      break;
    }
    case 'progress':
      comparison.addMetrics(m.runId, m.step, m.metrics);
      break;
    case 'state': {
      const item = legend.querySelector(`li[data-run="${CSS.escape(m.run.id)}"]`);
      const label = item?.querySelector('.run-label');
      const badge = item?.querySelector('.muted');
      if (label) label.textContent = m.label;
      if (badge) badge.textContent = stateWord(m.run);
      break;
    }
    case 'connection':
    case 'error':
      banner.showStatus(m);
      break;
  }
  schedule();
}

/** A run's state as the Runs view says it: a run the server calls `done` before its last step was stopped. */
function stateWord(run: RunSummary): string {
  return runEnding(run.state, run.lastCommittedStep ?? null, run.targetSteps ?? null) === 'stopped' ? 'stopped' : run.state;
}

function renderLegend(runs: ReadonlyArray<{ runId: string; label: string; state: string | null; error: string | null }>): void {
  legend.replaceChildren(
    ...runs.map((r) => {
      const swatch = h('span', { class: 'swatch', attrs: { 'aria-hidden': 'true' } });
      swatch.style.background = colorOf(r.runId);
      return h(
        'li',
        { attrs: { 'data-run': r.runId, title: r.runId } },
        swatch,
        h('span', { class: 'run-label', text: r.label }),
        h('span', { class: r.error === null ? 'muted' : 'muted run-error', text: r.error === null ? (r.state ?? '') : 'not loaded' }),
      );
    }),
  );
  summary.textContent = `${runs.length} runs`;
}

function colorOf(runId: string, t: ChartTheme = theme): string {
  return t.palette[(comparison.slots.get(runId) ?? 0) % t.palette.length]!;
}

function labelOf(runId: string): string {
  return comparison.runs.find((r) => r.runId === runId)?.label ?? runId;
}

function schedule(): void {
  if (frame === 0) frame = requestAnimationFrame(render);
}

function render(): void {
  frame = 0;
  const charts = comparison.charts();
  empty.hidden = charts.length > 0 || comparison.runs.length === 0;
  empty.textContent = comparison.runs.length === 0 ? 'Loading the runs…' : 'None of these runs has committed a step yet.';
  let previous: Element | null = null;
  for (const chart of charts) {
    let p = plots.get(chart.id);
    if (!p) {
      const body = h('div', { class: 'chart-body', attrs: { role: 'img', 'aria-label': `${chart.title}: ${chart.axis || 'value'} by step, a line per run` } });
      const card = h('section', { class: 'chart-card', attrs: { 'aria-label': chart.title, 'data-chart': chart.id } }, h('header', { class: 'chart-header' }, h('h2', { text: chart.title })), body);
      p = { card, body, plot: null, runIds: '', chart };
      plots.set(chart.id, p);
    }
    p.chart = chart;
    if (p.card.previousElementSibling !== previous || p.card.parentElement !== grid) {
      if (previous) previous.after(p.card);
      else grid.prepend(p.card);
    }
    previous = p.card;
    p.card.hidden = !matchesFilter(chart.title);
    if (!p.card.hidden) draw(p);
  }
  const visible = charts.filter((c) => matchesFilter(c.title)).length;
  shown.textContent = filter.value.trim() === '' ? `${charts.length} charts` : `${visible} of ${charts.length} charts`;
}

/** Columns for uPlot: the steps, then per run its raw values and its smoothed ones. */
function columns(chart: CompareChart): uPlot.AlignedData {
  const { steps, columns: raw } = comparison.aligned(chart);
  const w = smoothing();
  return [steps, ...raw.flatMap((values) => [values, smoothEma(values, w)])] as uPlot.AlignedData;
}

function draw(p: { card: HTMLElement; body: HTMLElement; plot: uPlot | null; runIds: string; chart: CompareChart }): void {
  const data = columns(p.chart);
  const runIds = p.chart.runIds.join('\n');
  if (p.plot && p.runIds === runIds) {
    p.plot.setData(data, true);
    return;
  }
  p.plot?.destroy();
  const t = theme;
  const unit = p.chart.unit;
  const axis = (): uPlot.Axis => ({ stroke: t.muted, font: t.font, grid: { stroke: t.grid, width: 1 }, ticks: { stroke: t.grid, width: 1, size: 4 } });
  const series: uPlot.Series[] = [{ label: 'step', value: (_u, v) => (v === null ? '–' : String(v)) }];
  for (const runId of p.chart.runIds) {
    const color = colorOf(runId);
    const value = (_u: uPlot, v: number | null) => formatValue(v, unit);
    series.push({ label: `${labelOf(runId)} (raw)`, stroke: t.fill(color, RAW_ALPHA), width: 1, spanGaps: true, value, points: { show: false } });
    series.push({ label: labelOf(runId), stroke: color, width: 1.75, spanGaps: true, value, points: { show: (u, si) => (u.data[si] ?? []).filter((v) => v !== null).length === 1, size: 6 } });
  }
  const opts: uPlot.Options = {
    width: Math.max(p.body.clientWidth, 200),
    height: HEIGHT,
    scales: {
      x: { time: false },
      y: {
        range: (_u, min, max) => {
          if (min === null || max === null) return [min, max];
          if (unit === 'fraction') return [Math.min(0, min), Math.max(1, max)];
          return uPlot.rangeNum(min, max, 0.1, true);
        },
      },
    },
    axes: [
      { ...axis(), label: 'step', labelSize: 18, labelFont: t.font, incrs: STEP_TICK_INCREMENTS },
      { ...axis(), label: p.chart.axis, labelSize: 18, labelFont: t.font, size: fitLabels, values: (_u, splits) => splits.map((v) => formatValue(v, unit)) },
    ],
    series,
    cursor: { sync: { key: SYNC_KEY }, drag: { x: true, y: false }, points: { size: 6 } },
    legend: { live: true },
  };
  p.plot = new uPlot(opts, data, p.body);
  p.runIds = runIds;
  // Raw series have no legend row of their own (the smoothed one carries the run's name and colour).
  p.plot.root.querySelectorAll('.u-legend .u-series').forEach((row, i) => {
    if (i > 0 && i % 2 === 1) row.classList.add('raw');
  });
}

let resizeFrame = 0;
new ResizeObserver(() => {
  if (resizeFrame !== 0) return;
  resizeFrame = requestAnimationFrame(() => {
    resizeFrame = 0;
    for (const p of plots.values()) {
      const width = p.body.clientWidth;
      if (p.plot && width > 0 && width !== p.plot.width) p.plot.setSize({ width, height: HEIGHT });
    }
  });
}).observe(grid);

watchTheme(() => {
  theme = readTheme();
  for (const p of plots.values()) p.runIds = '';
  schedule();
});

channel.post({ type: 'ready' });
