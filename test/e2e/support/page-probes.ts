/**
 * What extension.e2e.ts reads off the page beyond the harness's generic helpers: the patterns of
 * the extension's texts, and measurements taken inside the page (chart canvases, legends, the
 * y-axis labels uPlot draws, where the editor's annotations end). The functions passed to
 * `evaluate` run in the page, so each is self-contained.
 */
import assert from 'node:assert/strict';
import type { FrameLocator, Locator, Page } from 'playwright-core';
import { runCommand, type EditorLine, type VsCode } from '../harness.ts';

/** The inline annotation after a turn's `  reward` line (trajectory-document.ts `annotationLabel`). */
export const annotationPattern = /^team (?:[+-]\d+\.\d\d|0\.00) · local (?:[+-]\d+\.\d\d|0\.00)/;
const turnRulePattern = /^── turn \d+ · \S+ \(policy \S+\) ──$/;
/** `test 48.4% → 60.9% (RL gain +12.5 points)` (run-outcome.ts `describeTest`). */
export const testResult = String.raw`test \d+\.\d% → \d+\.\d% \(RL gain [+-]\d+\.\d points\)`;

export const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Lines of the editor that are turn rules, with their annotations. */
export function turnRules(lines: readonly EditorLine[]): EditorLine[] {
  return lines.filter((line) => turnRulePattern.test(line.text.trim()));
}

/** Agent → swatch colour of a chart's legend, from labels `<metric> · <agent>`. */
export async function agentColours(chart: Locator): Promise<Map<string, string>> {
  const rows = await chart.locator('.u-legend .series-label').evaluateAll((labels) =>
    labels.map((l) => ({ text: (l as HTMLElement).innerText.trim(), stroke: l.querySelector('line')?.getAttribute('stroke') ?? '' })),
  );
  return new Map(rows.map((r) => [r.text.split(' · ').at(-1) ?? r.text, r.stroke]));
}

/** Each legend swatch's line: its colour and dash pattern (`solid` without one). */
export function swatchLines(chart: Locator): Promise<Array<{ stroke: string; dash: string }>> {
  return chart.locator('.u-legend .swatch line').evaluateAll((lines) => lines.map((l) => ({ stroke: l.getAttribute('stroke') ?? '', dash: l.getAttribute('stroke-dasharray') ?? 'solid' })));
}

/** A canvas's size and how many of its pixels are drawn (not transparent). */
export function paintedPixels(canvas: Locator): Promise<{ width: number; height: number; count: number }> {
  return canvas.evaluate((c: HTMLCanvasElement) => {
    const { width, height } = c;
    const pixels = c.getContext('2d')?.getImageData(0, 0, width, height).data ?? new Uint8ClampedArray();
    let count = 0;
    for (let i = 3; i < pixels.length; i += 4) if ((pixels[i] ?? 0) > 0) count++;
    return { width, height, count };
  });
}

/** A y-axis label as uPlot drew it: its text, its left edge and the axis title's band, in canvas pixels. */
export interface DrawnLabel {
  readonly text: string;
  readonly left: number;
  readonly band: number;
}

/**
 * From now on, records every right-aligned text the page's canvases draw (uPlot's y-axis labels,
 * right-aligned against the axis), with its left edge and the 18 px band of the axis title.
 */
export async function recordYAxisLabels(webview: FrameLocator): Promise<void> {
  await webview.locator('body').evaluate(() => {
    const labels: Array<{ text: string; left: number; band: number }> = [];
    (window as unknown as { yLabels: typeof labels }).yLabels = labels;
    const fillText = CanvasRenderingContext2D.prototype.fillText;
    CanvasRenderingContext2D.prototype.fillText = function (text: string, x: number, y: number, maxWidth?: number) {
      if (this.textAlign === 'right') labels.push({ text, left: x - this.measureText(text).width, band: 18 * devicePixelRatio });
      return maxWidth === undefined ? fillText.call(this, text, x, y) : fillText.call(this, text, x, y, maxWidth);
    };
  });
}

/** The labels `recordYAxisLabels` recorded, after two animation frames (the redraws are done). */
export async function recordedYAxisLabels(webview: FrameLocator): Promise<DrawnLabel[]> {
  await webview.locator('body').evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  return webview.locator('body').evaluate(() => (window as unknown as { yLabels: Array<{ text: string; left: number; band: number }> }).yLabels);
}

/**
 * Where an editor's reward annotations end against its visible right edge (the minimap's left, or
 * the scrollable area's right): how many there are and the right edges of those that end past it.
 */
export function annotationOverflow(editor: Locator): Promise<{ right: number; count: number; past: number[] }> {
  return editor.evaluate((root) => {
    const area = root.querySelector('.editor-scrollable')?.getBoundingClientRect();
    const minimap = root.querySelector('.minimap')?.getBoundingClientRect();
    const right = Math.min(area?.right ?? Infinity, minimap && minimap.width > 0 ? minimap.left : Infinity);
    const annotated = Array.from(root.querySelectorAll('.view-lines > .view-line span')).filter((s) => getComputedStyle(s, '::after').content.startsWith('"team '));
    return { right, count: annotated.length, past: annotated.map((s) => s.getBoundingClientRect().right).filter((r) => r > right + 1) };
  });
}

/** Each comparison chart's legend: its runs' lines (the raw ones left out) as [label, colour]. */
export function runLegends(cards: Locator): Promise<Array<Array<readonly [string, string]>>> {
  return cards.evaluateAll((cs) =>
    cs.map((c) => Array.from(c.querySelectorAll('.u-legend .u-series:not(.raw)')).slice(1).map((r) => [r.querySelector('.u-label')?.textContent ?? '', getComputedStyle(r.querySelector('.u-marker') as Element).borderColor] as const)),
  );
}

/** Each comparison chart's legend rows at the cursor: raw or smoothed, the label and the value shown. */
export function legendReadouts(cards: Locator): Promise<Array<Array<{ raw: boolean; label: string; value: string }>>> {
  return cards.evaluateAll((cs) =>
    cs.map((c) => Array.from(c.querySelectorAll('.u-legend .u-series')).map((r) => ({ raw: r.classList.contains('raw'), label: r.querySelector('.u-label')?.textContent ?? '', value: r.querySelector('.u-value')?.textContent ?? '' }))),
  );
}

/** Moves the cursor of the active editor to `line`:`column` (1-based, as Go to Line takes them). */
export async function goToLine(page: VsCode['page'], line: number, column: number): Promise<void> {
  await runCommand(page, 'Go to Line/Column...', { opensPicker: true });
  await page.keyboard.type(`${line}:${column}`);
  await page.keyboard.press('Enter');
}

/** The 1-based line and column of the first `needle` in `text`. */
export function lineColumnOf(text: string, needle: string): { line: number; column: number } {
  const i = text.indexOf(needle);
  assert.ok(i >= 0, needle);
  const lines = text.slice(0, i).split('\n');
  return { line: lines.length, column: lines.at(-1)!.length + 1 };
}

/**
 * Waits until one of the window's webview pages (any panel in view: VS Code puts each in its own
 * nested frame) has an element matching `selector` whose text matches `text`; the error lists what
 * each page's `selector` showed.
 */
export async function waitForWebviewText(page: Page, selector: string, text: string | RegExp, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  let seen: string[] = [];
  while (Date.now() < end) {
    seen = [];
    for (const frame of page.frames()) {
      if (frame === page.mainFrame()) continue;
      const texts = await frame.locator(selector).allInnerTexts().catch(() => [] as string[]);
      seen.push(...texts);
      if (texts.some((t) => (typeof text === 'string' ? t.includes(text) : text.test(t)))) return;
    }
    await page.waitForTimeout(500);
  }
  throw new Error(`no webview showed ${String(text)} in ${selector} within ${timeoutMs / 1000} s; their ${selector} texts: ${JSON.stringify(seen).slice(0, 600)}`);
}
