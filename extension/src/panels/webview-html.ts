/**
 * The HTML shell of a webview: a strict Content-Security-Policy, the bundle's stylesheet, and the
 * bundle's script carrying a fresh nonce. Nothing else runs or styles the page: no inline script
 * but the nonce'd tag, no inline style, no event-handler attributes; the webviews build their DOM
 * in script. Pure (no vscode import) so the shell is unit tested.
 *
 * uPlot and the token tooltip position and size elements through the CSSOM (`el.style.x = ...`),
 * which `style-src` does not govern (CSP blocks style attributes and <style> elements, not CSSOM
 * writes), so the policy needs no 'unsafe-inline'.
 */
import { randomBytes } from 'node:crypto';

export interface WebviewHtmlOptions {
  /** Document title (VS Code shows the panel's own title; this one is for accessibility tools). */
  readonly title: string;
  /** `webview.asWebviewUri` of the bundle's script. */
  readonly scriptUri: string;
  /** `webview.asWebviewUri` of the bundle's stylesheet. */
  readonly styleUri: string;
  /** `webview.cspSource`: where the webview may load its own resources from. */
  readonly cspSource: string;
  /** A fresh nonce per render (`makeNonce`). */
  readonly nonce: string;
}

/** 128 random bits, hex: valid in a CSP nonce-source and in an HTML attribute without escaping. */
export function makeNonce(): string {
  return randomBytes(16).toString('hex');
}

/** The policy: nothing by default; the webview's own origin for styles, images and fonts; scripts only by nonce. */
export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    `default-src 'none'`,
    `img-src ${cspSource} data:`,
    `style-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `font-src ${cspSource}`,
  ].join('; ');
}

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * Whether `webview.cspSource` is a list of sources that cannot widen the policy. VS Code gives one
 * host source (`https://*.vscode-cdn.net`); code-server and other hosts give several, including
 * `'self'`. Allowed: host/scheme sources and `'self'`; refused: separators (`;`, `,`), other quoted
 * keywords (`'unsafe-inline'`, `'unsafe-eval'`, nonces, hashes) and a bare `*`.
 */
export function isSafeCspSource(cspSource: string): boolean {
  const tokens = cspSource.trim().split(/\s+/);
  return cspSource.trim() !== '' && tokens.every((t) => t === "'self'" || (t !== '*' && /^[A-Za-z0-9*.:/_+-]+$/.test(t)));
}

export function webviewHtml(o: WebviewHtmlOptions): string {
  // A nonce or source with quotes, spaces or semicolons could widen the policy: refuse instead.
  if (!/^[A-Za-z0-9+/_-]{16,}={0,2}$/.test(o.nonce)) throw new Error(`webviewHtml: the nonce must be base64 or hex of at least 16 characters, got '${o.nonce}'`);
  if (!isSafeCspSource(o.cspSource)) throw new Error(`webviewHtml: unexpected cspSource '${o.cspSource}'`);
  const csp = contentSecurityPolicy(o.cspSource, o.nonce);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(o.title)}</title>
<link rel="stylesheet" href="${escapeHtml(o.styleUri)}">
</head>
<body>
<script nonce="${o.nonce}" src="${escapeHtml(o.scriptUri)}"></script>
</body>
</html>
`;
}
