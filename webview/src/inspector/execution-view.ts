/**
 * The programs a branch ran, under its response: one block per program with a status badge, its
 * time, and its code / stdin / stdout / stderr. Every string from the run goes in through
 * textContent (`h`'s `text`), never as HTML: the code is model output and the output is the program's.
 */
import { h } from '../host-channel.ts';
import type { ExecutionRow } from './execution-rows.ts';

export function renderExecutions(rows: readonly ExecutionRow[]): HTMLElement | null {
  if (rows.length === 0) return null;
  return h(
    'div',
    { class: 'executions', attrs: { role: 'group', 'aria-label': `Programs run: ${rows.length}` } },
    ...rows.map((row) => renderExecution(row, rows.length)),
  );
}

function renderExecution(row: ExecutionRow, count: number): HTMLElement {
  const header = h(
    'div',
    { class: 'execution-header' },
    h('span', { class: 'execution-title', text: count > 1 ? `Program ${row.number} · ${row.language}` : `Program · ${row.language}` }),
    h('span', { class: `badge badge-${row.tone}`, text: row.badge }),
    h('span', { class: 'muted num', text: row.time }),
    row.cutNote === undefined ? null : h('span', { class: 'cut-note', text: row.cutNote }),
  );
  const sections = row.sections.map((s) =>
    h(
      'div',
      { class: `execution-section execution-${s.label}` },
      h('div', { class: 'execution-label muted', text: s.label }),
      s.text === '' ? h('div', { class: 'muted execution-empty', text: '(empty)' }) : h('pre', { class: 'execution-text', text: s.text }),
    ),
  );
  return h('div', { class: 'execution' }, header, ...sections);
}
