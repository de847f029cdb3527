/**
 * One dashboard chart: a card with a title and a uPlot instance drawing a ChartData. Updates go
 * through `setData` on the store's typed views; the uPlot instance is only rebuilt when the chart
 * gains a series or the theme changes, so a live run never rebuilds its charts step by step.
 *
 * CSP note: uPlot styles its elements through the CSSOM (`el.style.x = ...`), which the webview's
 * `style-src` (no 'unsafe-inline') does not block; it never writes style attributes or <style>
 * elements. Its stylesheet comes in the bundle's CSS file.
 */
import uPlot from 'uplot';
import { h } from '../host-channel.ts';
import { formatValue, lineDash } from './chart-groups.ts';
import type { ChartData, SeriesInfo } from './series-store.ts';
import type { ChartTheme } from './theme.ts';
import { robustExtent } from './y-range.ts';

/** Tick spacings of the step axis: whole steps only. */
export const STEP_TICK_INCREMENTS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1000, 10_000, 100_000].map((p) => m * p)).sort((a, b) => a - b);

const HEIGHT = 200;
const LINE_WIDTH = 1.5;
const SVG_NS = 'http://www.w3.org/2000/svg';
/** All charts share the cursor: hovering step 120 in one shows step 120 in every chart. */
const SYNC_KEY = 'troupe-steps';
/** Half the width of the mark for a point beyond the y range, in CSS pixels. */
const MARK_SIZE = 4;

/** What a chart card asks of the dashboard: hide it, and remember whether it fits all its points. */
export interface ChartViewHost {
  readonly onHide: (id: string) => void;
  readonly onFitAll: (id: string, fitAll: boolean) => void;
}

export class ChartView {
  readonly card: HTMLElement;
  readonly #body: HTMLElement;
  #plot: uPlot | null = null;
  #builtVersion = -1;
  #theme: ChartTheme;
  /** Off: the y range leaves outliers out (y-range.ts) and marks them at the edge; on: it fits every point. */
  #fitAll: boolean;
  readonly #fitAllButton: HTMLButtonElement;
  /** Says how many points lie beyond the y range, when any do. */
  readonly #note: HTMLElement;
  /** Each series' stroke colour, by uPlot series index (0 is the step). */
  #colors: string[] = [];

  constructor(
    readonly chart: ChartData,
    theme: ChartTheme,
    host: ChartViewHost,
    fitAll = false,
  ) {
    this.#theme = theme;
    this.#fitAll = fitAll;
    const hide = h('button', { class: 'icon-button', text: '×', attrs: { type: 'button', title: 'Hide this chart', 'aria-label': `Hide ${chart.spec.title}` } });
    hide.addEventListener('click', () => host.onHide(chart.spec.id));
    this.#fitAllButton = h('button', {
      class: 'icon-button fit-all',
      text: 'Fit all',
      attrs: { type: 'button', title: 'Scale the y axis to every point, outliers included', 'aria-pressed': String(fitAll) },
    });
    this.#fitAllButton.addEventListener('click', () => {
      this.setFitAll(!this.#fitAll);
      host.onFitAll(chart.spec.id, this.#fitAll);
    });
    this.#note = h('span', { class: 'chart-note muted', attrs: { title: 'Points beyond the y range are marked at its edge; "Fit all" shows them' } });
    this.#note.hidden = true;
    // The canvas is invisible to screen readers: the body says what its axes are.
    this.#body = h('div', { class: 'chart-body', attrs: { role: 'img', 'aria-label': `${chart.spec.title}: ${chart.spec.axis || 'value'} by step` } });
    this.card = h(
      'section',
      { class: 'chart-card', attrs: { 'aria-label': chart.spec.title, 'data-chart': chart.spec.id } },
      h('header', { class: 'chart-header' }, h('h2', { text: chart.spec.title }), this.#note, this.#fitAllButton, hide),
      this.#body,
    );
  }

  /** Draws the chart's current data; rebuilds only when the series set changed. */
  update(): void {
    if (this.chart.structureVersion !== this.#builtVersion || !this.#plot) {
      this.#build();
      return;
    }
    const plot = this.#plot;
    const lastStep = this.chart.lastStep;
    // Keep a zoom into the past while new steps arrive; an unzoomed chart follows the run.
    const xMax = plot.scales['x']?.max;
    const zoomed = xMax !== undefined && xMax !== null && plot.data[0].length > 0 && xMax < (plot.data[0][plot.data[0].length - 1] ?? lastStep);
    plot.setData(this.chart.aligned() as uPlot.AlignedData, !zoomed);
  }

  /** Fits every point on the y axis (true) or leaves outliers out and marks them (false). */
  setFitAll(fitAll: boolean): void {
    if (fitAll === this.#fitAll) return;
    this.#fitAll = fitAll;
    this.#fitAllButton.setAttribute('aria-pressed', String(fitAll));
    // The range function reads #fitAll: recompute the scale from the data.
    this.#plot?.setData(this.#plot.data, true);
  }

  setTheme(theme: ChartTheme): void {
    this.#theme = theme;
    this.#builtVersion = -1;
    this.update();
  }

  resize(): void {
    const width = this.#body.clientWidth;
    if (this.#plot && width > 0 && width !== this.#plot.width) this.#plot.setSize({ width, height: HEIGHT });
  }

  destroy(): void {
    this.#plot?.destroy();
    this.#plot = null;
    this.card.remove();
  }

  #build(): void {
    this.#plot?.destroy();
    const series = this.chart.series();
    const t = this.#theme;
    const unit = this.chart.spec.unit;
    // Colour says who (agent/policy) and dash says which metric; a chart about one scope only
    // (the team's time split, say) has nothing to tell apart by colour, so its metrics take the colours.
    const byName = new Set(series.map((s) => s.scope)).size === 1;
    const axis = (): uPlot.Axis => ({
      stroke: t.muted,
      font: t.font,
      grid: { stroke: t.grid, width: 1 },
      ticks: { stroke: t.grid, width: 1, size: 4 },
    });
    const opts: uPlot.Options = {
      width: Math.max(this.#body.clientWidth, 200),
      height: HEIGHT,
      scales: {
        x: { time: false },
        y: { range: (u, min, max) => this.#yRange(u, min, max) },
      },
      // Steps are whole numbers: ticks only at whole-step increments (1, 2, 5, 10, 20, 50, ...).
      axes: [
        { ...axis(), label: 'step', labelSize: 18, labelFont: t.font, incrs: STEP_TICK_INCREMENTS },
        { ...axis(), label: this.chart.spec.axis, labelSize: 18, labelFont: t.font, size: fitLabels, values: (_u, splits) => splits.map((v) => formatValue(v, unit)) },
      ],
      series: [{ label: 'step', value: (_u, v) => (v === null ? '–' : String(v)) }, ...series.map((s, i) => this.#seriesOptions(s, i, byName))],
      bands: bandsOf(series),
      cursor: { sync: { key: SYNC_KEY }, drag: { x: true, y: false }, points: { size: 6 } },
      // The legend's swatches are the series' own line styles (`#legendLabel`), not uPlot's squares,
      // which show neither dashes nor dots.
      legend: { live: true, markers: { show: false } },
      hooks: { draw: [(u) => this.#markOutside(u)] },
    };
    this.#colors = ['', ...series.map((s) => this.#colorOf(s, byName))];
    this.#plot = new uPlot(opts, this.chart.aligned() as uPlot.AlignedData, this.#body);
    this.#builtVersion = this.chart.structureVersion;
  }

  /**
   * The y range: outliers left out unless the chart fits all (stacked bands hold running sums, so
   * they always fit all); rates span at least [0, 1]; other quantities get uPlot's own padding.
   */
  #yRange(u: uPlot, dataMin: number | null, dataMax: number | null): uPlot.Range.MinMax {
    const robust = this.#fitAll || this.chart.spec.stack !== undefined ? null : robustExtent(u.data.slice(1) as Array<ArrayLike<number | null>>);
    const min = robust?.min ?? dataMin;
    const max = robust?.max ?? dataMax;
    if (min === null || max === null) return [dataMin, dataMax];
    if (this.chart.spec.unit === 'fraction') return [Math.min(0, min), Math.max(1, max)];
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  /** Marks each point beyond the y range at the edge it passed, in its series' colour, and counts them. */
  #markOutside(u: uPlot): void {
    const yMin = u.scales['y']?.min;
    const yMax = u.scales['y']?.max;
    if (yMin === undefined || yMin === null || yMax === undefined || yMax === null) return;
    const { ctx } = u;
    const size = MARK_SIZE * devicePixelRatio;
    const top = u.bbox.top;
    const bottom = u.bbox.top + u.bbox.height;
    let outside = 0;
    ctx.save();
    for (let i = 1; i < u.data.length; i++) {
      if (u.series[i]?.show === false) continue;
      const ys = u.data[i]!;
      ctx.fillStyle = this.#colors[i] ?? this.#theme.foreground;
      for (let j = 0; j < ys.length; j++) {
        const v = ys[j];
        if (v === null || v === undefined || !Number.isFinite(v) || (v >= yMin && v <= yMax)) continue;
        outside++;
        const x = u.valToPos(u.data[0][j]!, 'x', true);
        // A triangle pointing off the chart, its base inside the plot area.
        const up = v > yMax;
        const edge = up ? top : bottom;
        ctx.beginPath();
        ctx.moveTo(x, edge);
        ctx.lineTo(x - size, edge + (up ? 1.8 : -1.8) * size);
        ctx.lineTo(x + size, edge + (up ? 1.8 : -1.8) * size);
        ctx.closePath();
        ctx.fill();
      }
    }
    ctx.restore();
    this.card.dataset['outside'] = String(outside);
    this.#note.hidden = outside === 0;
    this.#note.textContent = outside === 1 ? '1 point off the scale ▲' : `${outside} points off the scale ▲`;
  }

  #colorOf(s: SeriesInfo, byName: boolean): string {
    const t = this.#theme;
    return byName ? t.palette[s.nameIndex % t.palette.length]! : s.scope === 'team' ? t.foreground : t.palette[s.scopeIndex % t.palette.length]!;
  }

  #seriesOptions(s: SeriesInfo, index: number, byName: boolean): uPlot.Series {
    const t = this.#theme;
    const color = this.#colorOf(s, byName);
    const unit = this.chart.spec.unit;
    const dash = byName ? [] : [...lineDash(s.nameIndex)];
    return {
      label: legendLabel(s.label, color, dash),
      stroke: color,
      width: LINE_WIDTH,
      dash,
      spanGaps: true,
      // A running maximum (val/best_success) holds its value until the step that beat it.
      ...(s.name === 'val/best_success' ? { paths: uPlot.paths.stepped!({ align: 1 }) } : {}),
      // A series with one point so far (validation at step 0) has no line to draw: show the point.
      points: { show: () => this.chart.filledCount(index) === 1, size: 6 },
      // Stacked columns hold running sums; the legend shows the part itself.
      value: (_u, v, _si, row) => formatValue(s.stacked && row !== null ? this.chart.rawValue(index, row) : v, unit),
      ...(s.stacked ? { fill: t.fill(color, 0.25) } : {}),
    };
  }
}

/** A legend label: a swatch drawn with the series' colour and dash pattern, then the words. */
function legendLabel(text: string, color: string, dash: readonly number[]): HTMLElement {
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('class', 'swatch');
  svg.setAttribute('width', '26');
  svg.setAttribute('height', '8');
  svg.setAttribute('aria-hidden', 'true');
  const line = document.createElementNS(SVG_NS, 'line');
  for (const [k, v] of Object.entries({ x1: '0', y1: '4', x2: '26', y2: '4', stroke: color, 'stroke-width': String(LINE_WIDTH + 0.5) })) line.setAttribute(k, v);
  if (dash.length > 0) line.setAttribute('stroke-dasharray', dash.join(' '));
  svg.append(line);
  const label = h('span', { class: 'series-label' }, h('span', { text }));
  label.prepend(svg);
  return label;
}

/**
 * Width of the y axis: its widest label plus the ticks; fixed widths clip "1500 ms" or "2.00e-4".
 * uPlot calls this once per round while it converges (`cycleNum` 1, 2, 3), and the labels of round
 * 1 are the splits of a plot still as tall as the whole chart (the x axis not yet taken off), which
 * can be fewer and shorter ("0 2 4 6" where the drawn axis reads "0 2.5 5 7.5"). So every round
 * measures the labels it is given, and after the first the width only grows, which keeps the rounds
 * from oscillating (uPlot's recipe, which keeps round 1's width, clipped "2.5" to ".5").
 */
export function fitLabels(u: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const axis = u.axes[axisIdx]!;
  let widest = 0;
  if (values && values.length > 0) {
    u.ctx.font = Array.isArray(axis.font) ? String(axis.font[0]) : String(axis.font ?? '');
    for (const v of values) widest = Math.max(widest, u.ctx.measureText(v).width / devicePixelRatio);
  }
  const size = Math.ceil((axis.ticks?.size ?? 4) + (axis.gap ?? 5) + 4 + widest);
  const previous = (axis as { _size?: number })._size;
  return cycleNum > 1 && previous !== undefined ? Math.max(size, previous) : size;
}

/**
 * A band between each stacked series and the one below it: uPlot then clips the upper series' fill
 * to the band, so each phase fills only its own slice (the first one fills down to the axis).
 */
function bandsOf(series: readonly SeriesInfo[]): uPlot.Band[] {
  const bands: uPlot.Band[] = [];
  for (let i = 1; i < series.length; i++) if (series[i]!.stacked && series[i - 1]!.stacked) bands.push({ series: [i + 1, i] });
  return bands;
}
