// The webview shell: the exact CSP, a nonce on every script, no inline handlers or styles,
// attribute values escaped, and a nonce or source that could widen the policy refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contentSecurityPolicy, makeNonce, webviewHtml } from './webview-html.ts';

const base = {
  title: 'Troupe dashboard',
  scriptUri: 'https://file+.vscode-resource.vscode-cdn.net/ext/dist/webview/dashboard.js',
  styleUri: 'https://file+.vscode-resource.vscode-cdn.net/ext/dist/webview/dashboard.css',
  cspSource: 'https://*.vscode-cdn.net',
  nonce: 'a1b2c3d4e5f60718293a4b5c6d7e8f90',
};

test('the CSP is the strict policy, with the nonce and the source', () => {
  const html = webviewHtml(base);
  const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)?.[1];
  assert.equal(
    csp,
    `default-src 'none'; img-src https://*.vscode-cdn.net data:; style-src https://*.vscode-cdn.net; script-src 'nonce-${base.nonce}'; font-src https://*.vscode-cdn.net`,
  );
  assert.equal(csp, contentSecurityPolicy(base.cspSource, base.nonce));
  assert.ok(!csp.includes('unsafe'));
  assert.ok(html.indexOf('Content-Security-Policy') < html.indexOf('<link'), 'the policy comes before any resource');
});

test('every script carries the nonce; no inline handlers, styles or inline scripts', () => {
  const html = webviewHtml(base);
  const scripts = html.match(/<script\b[^>]*>/g) ?? [];
  assert.equal(scripts.length, 1);
  for (const s of scripts) {
    assert.ok(s.includes(`nonce="${base.nonce}"`), s);
    assert.ok(/\bsrc="/.test(s), 'scripts are files, not inline code');
  }
  assert.ok(!/<script[^>]*>[^<]+<\/script>/.test(html), 'no inline script body');
  assert.ok(!/\son[a-z]+\s*=/i.test(html), 'no inline event handlers');
  assert.ok(!/\sstyle\s*=/i.test(html), 'no style attributes');
  assert.ok(!/<style\b/i.test(html), 'no <style> elements');
  assert.ok(html.includes(`<link rel="stylesheet" href="${base.styleUri}">`));
});

test('attribute values are escaped', () => {
  const html = webviewHtml({ ...base, title: '<run "a">', scriptUri: 'https://x/a.js?"><script>alert(1)</script>' });
  assert.ok(html.includes('<title>&lt;run &quot;a&quot;&gt;</title>'));
  assert.equal((html.match(/<script\b/g) ?? []).length, 1);
});

test('a nonce or source that could widen the policy is refused', () => {
  assert.throws(() => webviewHtml({ ...base, nonce: "abc' 'unsafe-inline" }), /nonce/);
  assert.throws(() => webviewHtml({ ...base, nonce: 'short' }), /nonce/);
  assert.throws(() => webviewHtml({ ...base, cspSource: "https://x; script-src 'unsafe-eval'" }), /cspSource/);
  assert.throws(() => webviewHtml({ ...base, cspSource: "https://x 'unsafe-inline'" }), /cspSource/);
  assert.throws(() => webviewHtml({ ...base, cspSource: '*' }), /cspSource/);
  // code-server's webviews give several sources, 'self' among them.
  assert.match(webviewHtml({ ...base, cspSource: "'self' https://*.vscode-cdn.net" }), /style-src 'self' https:\/\/\*\.vscode-cdn\.net;/);
});

test('nonces are fresh and well-formed', () => {
  const a = makeNonce();
  const b = makeNonce();
  assert.notEqual(a, b);
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.doesNotThrow(() => webviewHtml({ ...base, nonce: a }));
});
