/**
 * A small dependency-free SVG line chart: validation success (0..1) against step, one line per
 * series, each with an optional shaded band (e.g. the lowest to the highest of several seeds).
 * Other scales (a game's score in points) set `yMax` and `points`; `reference` draws a dashed
 * horizontal line (a bar to reach, such as a scripted team's score).
 */
export interface Series {
  readonly name: string;
  readonly points: ReadonlyArray<readonly [step: number, value: number]>;
  /** Lower and upper edge of a band around the line, per step. */
  readonly band?: ReadonlyArray<readonly [step: number, low: number, high: number]>;
}

const palette = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export interface ChartOptions {
  readonly width?: number;
  readonly height?: number;
  readonly yLabel?: string;
  /** Top of the y axis (default 1, with ticks as percentages). */
  readonly yMax?: number;
  /** Ticks as plain numbers (points), not percentages. */
  readonly points?: boolean;
  readonly reference?: { readonly value: number; readonly name: string };
}

export function lineChart(title: string, series: readonly Series[], opts: ChartOptions = {}): string {
  const H = opts.height ?? 360;
  // The legend and the title get the room their text needs (glyph widths estimated generously for
  // sans-serif: 7 px at 12 px, 8.5 px at 14 px bold), so a long series name is not cut off; the
  // plot keeps the width `opts.width` gives it with the default legend.
  const left = 56;
  const plotWidth = (opts.width ?? 640) - left - 160;
  const legendWidth = Math.max(160, 46 + 7 * Math.max(0, ...series.map((s) => s.name.length), opts.reference?.name.length ?? 0));
  const W = Math.ceil(Math.max(left + plotWidth + legendWidth, left + 8.5 * title.length + 8));
  const m = { left, right: W - left - plotWidth, top: 36, bottom: 44 };
  const maxStep = Math.max(1, ...series.flatMap((s) => s.points.map(([x]) => x)));
  const x = (step: number) => m.left + (step / maxStep) * (W - m.left - m.right);
  const yMax = opts.yMax ?? 1;
  const y = (v: number) => m.top + (1 - v / yMax) * (H - m.top - m.bottom);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${m.left}" y="20" font-size="14" font-weight="bold">${esc(title)}</text>`);
  for (let i = 0; i <= 5; i++) {
    const v = (i / 5) * yMax;
    out.push(`<line x1="${m.left}" x2="${W - m.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${m.left - 8}" y="${y(v) + 4}" text-anchor="end">${opts.points ? Number(v.toFixed(1)) : `${(v * 100).toFixed(0)}%`}</text>`);
  }
  const ticks = 5;
  for (let i = 0; i <= ticks; i++) {
    const s = Math.round((i / ticks) * maxStep);
    out.push(`<text x="${x(s)}" y="${H - m.bottom + 16}" text-anchor="middle">${s}</text>`);
  }
  out.push(`<text x="${(m.left + W - m.right) / 2}" y="${H - 8}" text-anchor="middle">RL step</text>`);
  out.push(`<text transform="translate(14 ${(m.top + H - m.bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(opts.yLabel ?? 'validation success')}</text>`);
  out.push(`<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${H - m.bottom}" stroke="#333"/><line x1="${m.left}" x2="${W - m.right}" y1="${H - m.bottom}" y2="${H - m.bottom}" stroke="#333"/>`);
  // Bands first, so every line is drawn over them.
  series.forEach((s, i) => {
    if (!s.band || s.band.length === 0) return;
    const color = palette[i % palette.length]!;
    const upper = s.band.map(([a, , hi]) => `${x(a).toFixed(1)},${y(hi).toFixed(1)}`);
    const lower = [...s.band].reverse().map(([a, lo]) => `${x(a).toFixed(1)},${y(lo).toFixed(1)}`);
    out.push(`<polygon fill="${color}" fill-opacity="0.15" stroke="none" points="${[...upper, ...lower].join(' ')}"/>`);
  });
  series.forEach((s, i) => {
    const color = palette[i % palette.length]!;
    const pts = s.points.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts}"/>`);
    for (const [a, b] of s.points) out.push(`<circle cx="${x(a).toFixed(1)}" cy="${y(b).toFixed(1)}" r="3" fill="${color}"/>`);
    const ly = m.top + 10 + i * 20;
    out.push(`<line x1="${W - m.right + 12}" x2="${W - m.right + 32}" y1="${ly}" y2="${ly}" stroke="${color}" stroke-width="2"/>`);
    out.push(`<text x="${W - m.right + 38}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  if (opts.reference) {
    const ry = y(opts.reference.value).toFixed(1);
    const ly = m.top + 10 + series.length * 20;
    out.push(`<line x1="${m.left}" x2="${W - m.right}" y1="${ry}" y2="${ry}" stroke="#333" stroke-width="1.5" stroke-dasharray="6 4"/>`);
    out.push(`<line x1="${W - m.right + 12}" x2="${W - m.right + 32}" y1="${ly}" y2="${ly}" stroke="#333" stroke-width="1.5" stroke-dasharray="6 4"/>`);
    out.push(`<text x="${W - m.right + 38}" y="${ly + 4}">${esc(opts.reference.name)}</text>`);
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
