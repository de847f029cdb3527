/**
 * The dashboard webview: live charts of one run. The host sends the run's history (`init`), then
 * the warm-up's progress (`warmUp`: a progress bar, a status line and its loss curve, until step 0
 * is committed) and every committed step (`progress`); points go into the SeriesStore at once and the charts redraw
 * at most once per animation frame, whatever the message rate. The webview state keeps the run id
 * and the hidden charts (not the data: the host resends it on `ready`), so the panel survives being
 * hidden and VS Code reloading.
 */
import 'uplot/dist/uPlot.min.css';
import './dashboard.css';
import type { RunSummary } from '../../../server/protocol/trajectory.ts';
import { h, openHostChannel } from '../host-channel.ts';
import { DISCONNECTED_CHARTS, StatusBanner } from '../status-banner.ts';
import { dashboardStateSchema, hostToDashboardSchema, type DashboardState, type DashboardToHost, type HostToDashboard } from '../messages.ts';
import type { WarmUpProgress } from '../../../server/protocol/methods.ts';
import { describeBest, describeTest, OutcomeSeries, runEnding, secondsPerStep } from '../run-outcome.ts';
import { ChartView } from './chart-view.ts';
import { SeriesStore } from './series-store.ts';
import { readTheme, watchTheme } from './theme.ts';
import { describeWarmUp, warmUpChartSpecs, warmUpDone, warmUpSeries } from './warm-up.ts';

const title = h('h1', { text: 'Troupe dashboard' });
const badge = h('span', { class: 'badge', attrs: { 'aria-label': 'run state' } });
const progressText = h('span', { class: 'muted' });
/** How the run came out (test before → after, RL gain) and its best validated step so far. */
const outcomeText = h('p', { class: 'outcome', attrs: { 'aria-label': 'run outcome' } });
const banner = new StatusBanner(DISCONNECTED_CHARTS);
const toggles = h('div', { class: 'toggles', attrs: { role: 'group', 'aria-label': 'Hidden charts' } });
const grid = h('main', { class: 'grid' });
const empty = h('p', { class: 'muted empty', text: 'Waiting for the first committed step…' });
/** The warm-up before step 0: how far it is and what it does (its loss curve is a chart card in the grid). */
const warmUpBar = h('progress', { attrs: { max: '1', value: '0', 'aria-label': 'warm-up progress' } });
const warmUpStatus = h('span', { class: 'muted' });
const warmUpBox = h('section', { class: 'warmup', attrs: { 'aria-label': 'Warm-up' } }, h('strong', { text: 'Warm-up' }), warmUpBar, warmUpStatus);
warmUpBox.hidden = true;
document.body.append(h('header', { class: 'bar' }, title, badge, progressText, outcomeText), banner.element, toggles, warmUpBox, empty, grid);

let store = new SeriesStore();
/** The warm-up's latest progress until step 0 is committed, and its loss curve. */
let warmUp: WarmUpProgress | null = null;
let warmUpStore = new SeriesStore(warmUpChartSpecs);
let outcome = new OutcomeSeries();
let theme = readTheme();
const views = new Map<string, ChartView>();
let state: DashboardState | null = null;
let run: RunSummary | null = null;
let steps: number | null = null;
let lastProgress: { step: number; stepMs: number; etaMs: number | null } | null = null;
let requestedFrom = -1;
let frame = 0;
let lastRender = 0;
/** Hidden or off-screen charts whose data changed: redrawn when they come into view. */
const stale = new Set<string>();
/** Charts scrolled out of view (with a margin): redrawing them would be work nobody sees. */
const offscreen = new Set<string>();
const onscreen = new IntersectionObserver(
  (entries) => {
    for (const e of entries) {
      const id = (e.target as HTMLElement).dataset['chart'] ?? '';
      if (!e.isIntersecting) {
        offscreen.add(id);
        continue;
      }
      offscreen.delete(id);
      const view = views.get(id);
      if (view && stale.delete(id)) view.update();
    }
  },
  { rootMargin: '300px 0px' },
);

const channel = openHostChannel<typeof hostToDashboardSchema, DashboardToHost, DashboardState>(hostToDashboardSchema, 'host → dashboard', onMessage);
const stored = dashboardStateSchema.safeParse(channel.getState());
if (stored.success) state = stored.data;

function onMessage(m: HostToDashboard): void {
  switch (m.type) {
    case 'init':
      for (const v of views.values()) v.destroy();
      views.clear();
      onscreen.disconnect();
      stale.clear();
      offscreen.clear();
      store = new SeriesStore();
      warmUpStore = new SeriesStore(warmUpChartSpecs);
      warmUp = m.warmUp;
      if (warmUp) warmUpStore.addSeries([warmUpSeries(warmUp)]);
      outcome = new OutcomeSeries().addSeries(m.series);
      requestedFrom = -1;
      lastProgress = null;
      run = m.run;
      steps = m.steps;
      // A new run id starts with every chart visible and fitted by default; the same run keeps what the user chose.
      state = state?.runId === m.runId ? state : { runId: m.runId, hiddenCharts: [], fitAllCharts: [] };
      channel.setState(state);
      store.addSeries(m.series);
      break;
    case 'series':
      store.addSeries(m.series);
      outcome.addSeries(m.series);
      break;
    case 'warmUp': {
      const { type: _, ...p } = m;
      warmUp = p;
      warmUpStore.addSeries([warmUpSeries(p)]);
      break;
    }
    case 'progress': {
      // Step 0 is committed: the warm-up is over, and its curve (kept in no store) goes with it.
      if (warmUp) endWarmUp();
      steps = m.steps;
      lastProgress = { step: m.step, stepMs: m.stepMs, etaMs: m.etaMs };
      const gap = store.addProgress(m.step, m.metrics);
      outcome.addMetrics(m.step, m.metrics);
      // Ask once per gap: the answer arrives as a `series` message and fills the rows in.
      if (gap !== null && gap > requestedFrom) {
        requestedFrom = gap;
        channel.post({ type: 'requestSeries', fromStep: gap });
      }
      break;
    }
    case 'state':
      run = m.run;
      break;
    case 'connection':
    case 'error':
      banner.showStatus(m);
      break;
  }
  schedule();
}

/**
 * Redraws at most every MIN_FRAME_MS: a tiny model can commit tens of steps a second, and redrawing
 * every chart for each would spend the page's time on frames nobody can read. Points are stored at
 * once either way; only the drawing is batched.
 */
const MIN_FRAME_MS = 100;
function schedule(): void {
  if (frame !== 0) return;
  const wait = lastRender + MIN_FRAME_MS - performance.now();
  frame = wait > 0 ? window.setTimeout(() => (frame = requestAnimationFrame(render)), wait) : requestAnimationFrame(render);
}

/** One frame: header, new charts in display order, and a redraw of the charts that changed. */
function render(): void {
  frame = 0;
  lastRender = performance.now();
  renderHeader();
  const hidden = new Set(state?.hiddenCharts ?? []);
  renderWarmUp();
  const dirty = new Set([...warmUpStore.takeDirty(), ...store.takeDirty()]);
  let previous: Element | null = null;
  // The warm-up's loss chart (until step 0) comes first.
  for (const chart of [...warmUpStore.charts(), ...store.charts()]) {
    let view = views.get(chart.spec.id);
    if (!view) {
      view = new ChartView(chart, theme, { onHide: hideChart, onFitAll: setFitAll }, state?.fitAllCharts.includes(chart.spec.id) ?? false);
      views.set(chart.spec.id, view);
      onscreen.observe(view.card);
      dirty.add(chart);
    }
    // Keep the cards in display order even when a chart appears late (the time chart at step 1).
    if (view.card.previousElementSibling !== previous || view.card.parentElement !== grid) {
      if (previous) previous.after(view.card);
      else grid.prepend(view.card);
    }
    previous = view.card;
    const isHidden = hidden.has(chart.spec.id);
    view.card.hidden = isHidden;
    // Hidden and off-screen charts keep their data in the store and catch up when shown.
    if (!dirty.has(chart)) continue;
    if (!isHidden && !offscreen.has(chart.spec.id)) view.update();
    else stale.add(chart.spec.id);
  }
  // While the warm-up trains its box says what happens; once it is done, step 0's validation runs.
  const done = warmUp !== null && warmUpDone(warmUp);
  empty.textContent = done ? 'Warm-up done: validating the warm-started team (step 0)…' : 'Waiting for the first committed step…';
  empty.hidden = store.charts().length > 0 || (warmUp !== null && !done);
  renderToggles(hidden);
}

/** The warm-up's box: progress bar and status line (its loss chart is drawn with the others). */
function renderWarmUp(): void {
  warmUpBox.hidden = warmUp === null;
  if (!warmUp) return;
  warmUpBar.max = warmUp.steps;
  warmUpBar.value = warmUp.step;
  const training = run === null || run.state === 'running' || run.state === 'stopping';
  warmUpStatus.textContent = describeWarmUp(warmUp, { training, duration: formatDuration });
}

function endWarmUp(): void {
  warmUp = null;
  for (const chart of warmUpStore.charts()) {
    const view = views.get(chart.spec.id);
    if (view) onscreen.unobserve(view.card);
    view?.destroy();
    views.delete(chart.spec.id);
    stale.delete(chart.spec.id);
    offscreen.delete(chart.spec.id);
  }
  warmUpStore = new SeriesStore(warmUpChartSpecs);
}

function renderHeader(): void {
  title.textContent = run?.name ?? state?.runId ?? 'Troupe dashboard';
  const step = lastProgress?.step ?? run?.lastCommittedStep ?? null;
  // The server calls a run stopped before its last step `done`; the header does not.
  const ending = run ? runEnding(run.state, step, steps ?? run.targetSteps) : null;
  const word = ending === 'stopped' ? 'stopped' : (run?.state ?? '');
  badge.textContent = word;
  badge.dataset['state'] = word;
  const o = outcome.outcome();
  const parts: string[] = [];
  if (step !== null) parts.push(steps !== null ? `step ${step} / ${steps}` : `step ${step}`);
  // While training, the last step's time (what the ETA is made of); once ended, the mean over its
  // RL steps: the last step also ran the final test, so its time alone says little.
  if (ending === null && lastProgress) parts.push(secondsPerStep(lastProgress.stepMs));
  else if (ending !== null && o.meanStepMs !== null) parts.push(`mean ${secondsPerStep(o.meanStepMs)} over ${o.timedSteps} steps`);
  if (lastProgress?.etaMs != null && run?.state === 'running') parts.push(`ETA ${formatDuration(lastProgress.etaMs)}`);
  if (run?.error) parts.push(`failed: ${run.error}`);
  progressText.textContent = parts.join(' · ');
  const outcomeParts = [o.test ? describeTest(o.test) : null, o.best ? describeBest(o.best, ending === null) : null].filter((p) => p !== null);
  outcomeText.textContent = outcomeParts.length === 0 ? '' : `${ending === null ? '' : 'Result: '}${outcomeParts.join(' · ')}`;
}

function renderToggles(hidden: ReadonlySet<string>): void {
  toggles.replaceChildren();
  toggles.hidden = hidden.size === 0;
  if (hidden.size === 0) return;
  toggles.append(h('span', { class: 'muted', text: 'Hidden:' }));
  for (const id of hidden) {
    const view = views.get(id);
    const chip = h('button', { class: 'chip', text: `${view?.chart.spec.title ?? id} +`, attrs: { type: 'button', title: 'Show this chart again' } });
    chip.addEventListener('click', () => setHidden(id, false));
    toggles.append(chip);
  }
}

/** `ids` with `id` in it (on) or not. */
function toggled(ids: readonly string[], id: string, on: boolean): string[] {
  return on ? [...new Set([...ids, id])] : ids.filter((x) => x !== id);
}

/** Remembers a chart's "Fit all" (the view has applied it). */
function setFitAll(id: string, fitAll: boolean): void {
  if (!state) return;
  state = { ...state, fitAllCharts: toggled(state.fitAllCharts, id, fitAll) };
  channel.setState(state);
}

function hideChart(id: string): void {
  setHidden(id, true);
}

function setHidden(id: string, hide: boolean): void {
  if (!state) return;
  state = { ...state, hiddenCharts: toggled(state.hiddenCharts, id, hide) };
  channel.setState(state);
  const view = views.get(id);
  if (view && !hide) {
    view.card.hidden = false;
    // Its width may have changed while it was hidden, and it may have missed data.
    view.resize();
    if (stale.delete(id)) view.update();
  }
  schedule();
}

function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 90) return `${s} s`;
  const m = Math.round(s / 60);
  return m < 90 ? `${m} min` : `${(m / 60).toFixed(1)} h`;
}

// Resizes follow the panel, batched per frame.
let resizeFrame = 0;
new ResizeObserver(() => {
  if (resizeFrame !== 0) return;
  resizeFrame = requestAnimationFrame(() => {
    resizeFrame = 0;
    for (const v of views.values()) if (!v.card.hidden) v.resize();
  });
}).observe(grid);

watchTheme(() => {
  theme = readTheme();
  for (const v of views.values()) v.setTheme(theme);
});

renderHeader();
channel.post({ type: 'ready' });
