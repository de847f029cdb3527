/**
 * A webview's side of the postMessage channel: inbound messages are parsed with the webview's
 * schema before anyone sees them; a message that does not parse is logged here and reported to the
 * host's log, then dropped. Browser-only (uses `acquireVsCodeApi`).
 */
import type { z } from 'zod';
import { parseMessage } from './messages.ts';

interface VsCodeApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare global {
  /** Injected by VS Code into every webview; may be called once per page. */
  function acquireVsCodeApi(): VsCodeApi;
}

type LogLevel = 'info' | 'warn' | 'error';

export interface HostChannel<Out, State> {
  post(message: Out): void;
  /** The saved state as it was stored: unknown, the caller parses it. */
  getState(): unknown;
  setState(state: State): void;
  /** Logs to the console and to the host's output. */
  log(level: LogLevel, message: string): void;
}

/**
 * Opens the channel. `from` names the sender in log lines ("host → dashboard"). The returned
 * channel's `post` is typed with the webview's outbound union, which carries `log` messages too.
 */
export function openHostChannel<In extends z.ZodType, Out extends { type: string }, State>(
  inbound: In,
  from: string,
  onMessage: (message: z.infer<In>) => void,
): HostChannel<Out, State> {
  const api = acquireVsCodeApi();
  const log = (level: LogLevel, message: string) => {
    (level === 'error' ? console.error : level === 'warn' ? console.warn : console.info)(message);
    api.postMessage({ type: 'log', level, message: message.slice(0, 10_000) });
  };
  window.addEventListener('message', (event: MessageEvent<unknown>) => {
    const parsed = parseMessage(inbound, event.data, from);
    if (!parsed.ok) {
      log('warn', parsed.error);
      return;
    }
    try {
      onMessage(parsed.message);
    } catch (e) {
      log('error', `${from}: handling "${(parsed.message as { type?: string }).type}" failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    }
  });
  return {
    post: (message) => api.postMessage(message),
    getState: () => api.getState(),
    setState: (state) => api.setState(state),
    log,
  };
}

/** `document.createElement` with a class, text and attributes: the webviews build their DOM with it (no innerHTML, so no markup injection). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { class?: string; text?: string; attrs?: Record<string, string> } = {},
  ...children: Array<Node | null>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props.class) el.className = props.class;
  if (props.text !== undefined) el.textContent = props.text;
  for (const [k, v] of Object.entries(props.attrs ?? {})) el.setAttribute(k, v);
  for (const c of children) if (c) el.append(c);
  return el;
}
