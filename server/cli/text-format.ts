/**
 * Terminal output formatting shared by the commands: plain-text tables (columns padded to their
 * widest cell, two spaces apart; no box drawing, so output pastes cleanly), percentages, durations
 * and paths.
 */
import { isAbsolute, relative, sep } from 'node:path';

export type Align = 'left' | 'right';

export function formatTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>, align: readonly Align[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (align[i] === 'right' ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** `62.5%` for a fraction in 0..1. */
export const percent = (fraction: number): string => `${(fraction * 100).toFixed(1)}%`;

/** `45 s`, `3m 05s`, `2h 07m`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** A path as the user should read it: relative to the current directory when inside it. */
export function displayPath(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel === '' ? '.' : rel.startsWith(`..${sep}`) || rel === '..' || isAbsolute(rel) ? path : rel;
}

/** `2025-11-21 06:53` in local time. */
export function formatTime(epochMs: number): string {
  const d = new Date(epochMs);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** The message of anything thrown. */
export const errorMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e));
