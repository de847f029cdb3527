/**
 * A response rendered token by token, each token a span carrying its shading level; plus the one
 * tooltip the whole page shares. Shading switches by a class on <body> (CSS picks the log-prob
 * level on each token or the advantage level on the response), so toggling never re-renders.
 *
 * Hover and keyboard both show the tooltip: the response is focusable and the arrow keys move a
 * token cursor through it. Listeners are delegated on the document, not set per span, so a
 * response of thousands of tokens costs one span each and nothing more.
 */
import type { TurnRecord } from '../../../server/protocol/trajectory.ts';
import { h } from '../host-channel.ts';
import { formatProbability, formatSigned } from './inspector-model.ts';
import { advantageShade, alignTokens, logprobIntensity, shadeLevel, tokenLabel, type TokenSegment } from './token-shading.ts';

interface Rendered {
  readonly row: TurnRecord;
  readonly segments: readonly TokenSegment[];
}
/** Per response element, what its spans index into (kept off the DOM: no data duplication in attributes). */
const rendered = new WeakMap<HTMLElement, Rendered>();

export function renderResponse(row: TurnRecord): HTMLElement {
  const { segments, exact } = alignTokens(row.responseText, row.responseTokens);
  const adv = advantageShade(row.advantage);
  const pre = h('pre', {
    class: `response adv-${adv.sign} a${shadeLevel(adv.intensity)}`,
    attrs: { tabindex: '0', 'aria-label': `Response of branch ${row.branch}, ${row.responseTokens.length} tokens; arrow keys move between tokens` },
  });
  const frag = document.createDocumentFragment();
  segments.forEach((seg, i) => {
    const lp = row.logprobs[seg.token];
    const span = document.createElement('span');
    span.className = `t l${lp === undefined ? 0 : shadeLevel(logprobIntensity(lp))}${seg.special ? ' special' : ''}`;
    span.dataset['s'] = String(i);
    // A newline token gets a visible mark, or its shade would be invisible.
    span.textContent = seg.special ? `⟨${seg.special.replace(/^<\|?|\|?>$/g, '')}⟩` : seg.text === '\n' ? '↵\n' : seg.text;
    frag.append(span);
  });
  pre.append(frag);
  rendered.set(pre, { row, segments });
  const wrap = h('div', { class: 'response-wrap' }, pre);
  if (!exact) {
    // See token-shading.ts: without this tokenizer's vocabulary the boundaries are spread by position.
    wrap.append(h('p', { class: 'muted note', text: 'Token boundaries are approximate (the tokenizer is not character-level): shading is spread over the text by position.' }));
  }
  if (row.responseText === '' && row.responseTokens.length === 0) pre.textContent = '(empty response)';
  return wrap;
}

// ---- Tooltip ------------------------------------------------------------------------------------

const tooltip = h('div', { class: 'tooltip', attrs: { role: 'tooltip', id: 'token-tooltip' } });
tooltip.hidden = true;

function describe(span: HTMLElement): string | null {
  const pre = span.closest('pre.response');
  const info = pre instanceof HTMLElement ? rendered.get(pre) : undefined;
  const seg = info?.segments[Number(span.dataset['s'])];
  if (!info || !seg) return null;
  const lp = info.row.logprobs[seg.token];
  const parts = [`token ${seg.token}: ${tokenLabel(seg)}`, `id ${info.row.responseTokens[seg.token] ?? '?'}`];
  if (lp !== undefined) parts.push(`log-prob ${lp.toFixed(3)} (p ${formatProbability(lp)})`);
  parts.push(info.row.advantage === undefined ? 'not trained on' : `advantage ${formatSigned(info.row.advantage)} (per sample, on every token)`);
  return parts.join(' · ');
}

function showTooltip(span: HTMLElement): void {
  const text = describe(span);
  if (text === null) return;
  tooltip.textContent = text;
  tooltip.hidden = false;
  const r = span.getBoundingClientRect();
  const w = tooltip.offsetWidth;
  // CSSOM positioning (allowed under the CSP, unlike style attributes).
  tooltip.style.left = `${Math.max(4, Math.min(window.innerWidth - w - 4, r.left + window.scrollX))}px`;
  tooltip.style.top = `${r.bottom + window.scrollY + 4}px`;
}

function hideTooltip(): void {
  tooltip.hidden = true;
}

/** Installs the shared tooltip and its delegated listeners; call once. */
export function installTokenTooltip(): void {
  document.body.append(tooltip);
  document.addEventListener('mouseover', (e) => {
    const span = e.target instanceof HTMLElement ? e.target.closest('pre.response .t') : null;
    if (span instanceof HTMLElement) showTooltip(span);
    else hideTooltip();
  });
  document.addEventListener('keydown', (e) => {
    const pre = e.target instanceof HTMLElement ? e.target.closest('pre.response') : null;
    if (!(pre instanceof HTMLElement)) return;
    if (e.key === 'Escape') {
      pre.querySelector('.t.cursor')?.classList.remove('cursor');
      hideTooltip();
      return;
    }
    if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft' && e.key !== 'Home' && e.key !== 'End') return;
    e.preventDefault();
    const spans = pre.querySelectorAll<HTMLElement>('.t');
    if (spans.length === 0) return;
    const current = pre.querySelector<HTMLElement>('.t.cursor');
    const at = current ? Number(current.dataset['s']) : -1;
    const next = e.key === 'Home' ? 0 : e.key === 'End' ? spans.length - 1 : Math.max(0, Math.min(spans.length - 1, at + (e.key === 'ArrowRight' ? 1 : -1)));
    current?.classList.remove('cursor');
    const span = spans[next]!;
    span.classList.add('cursor');
    span.scrollIntoView({ block: 'nearest' });
    showTooltip(span);
  });
  document.addEventListener('focusout', (e) => {
    if (e.target instanceof HTMLElement && e.target.matches('pre.response')) hideTooltip();
  });
}
