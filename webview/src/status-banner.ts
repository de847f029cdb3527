/**
 * The banner every webview shows under its header, and what it says for the two messages every
 * host sends (`connection`, `error`): one rule for the dashboard, the inspector and the run
 * comparison. A view may show its own text in it too (the comparison's runs that did not load).
 */
import { h } from './host-channel.ts';
import type { HostStatus } from './messages.ts';

/** What a view says while the training server is not connected. */
export const DISCONNECTED = 'The training server is not connected.';
/** The same for the chart views, which keep the points they received. */
export const DISCONNECTED_CHARTS = 'The training server is not connected: the charts show what was received so far.';

/** The banner's text for a host status message: the error, `disconnected`, or none (connected again). */
export function statusText(m: HostStatus, disconnected: string): string | null {
  if (m.type === 'error') return m.message;
  return m.connected ? null : disconnected;
}

export class StatusBanner {
  readonly element = h('div', { class: 'banner', attrs: { role: 'status' } });

  /** `disconnected`: the text shown while the server is not connected. */
  constructor(private readonly disconnected: string) {
    this.element.hidden = true;
  }

  /** Shows `text`, or hides the banner for null. */
  show(text: string | null): void {
    this.element.hidden = text === null;
    this.element.textContent = text ?? '';
  }

  /** Shows what a `connection` or `error` message says. */
  showStatus(m: HostStatus): void {
    this.show(statusText(m, this.disconnected));
  }
}
