import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  expandVariables,
  formatCommandLine,
  isLoopbackUrl,
  normalizeServerUrl,
  parseListeningLine,
  parseServerFile,
  protocolMismatch,
  serveCommandLine,
  type ServeCommandOptions,
  serverExitReason,
} from './server-discovery.ts';

const serverFile = { url: 'ws://127.0.0.1:41234', pid: 4242, protocolVersion: '1.0', tokenFile: '/w/.troupe/server.token', workspace: '/w', startedAt: '2026-01-01T00:00:00.000Z' };

test('server.json as troupe serve writes it parses; anything else names the problem', () => {
  assert.deepEqual(parseServerFile(JSON.stringify(serverFile, null, 2)), { ok: true, value: serverFile });
  const notJson = parseServerFile('{"url": ');
  assert.ok(!notJson.ok && /not JSON/.test(notJson.reason));
  const bad = parseServerFile(JSON.stringify({ ...serverFile, pid: 'x' }));
  assert.ok(!bad.ok && /pid/.test(bad.reason), bad.ok ? '' : bad.reason);
});

test('the listening line is recognised exactly as serve-command.ts prints it', () => {
  // serve-command.ts: `troupe server listening on ${server.url}\ntoken file: ...`
  assert.equal(parseListeningLine('troupe server listening on ws://127.0.0.1:44443'), 'ws://127.0.0.1:44443');
  assert.equal(parseListeningLine('troupe server listening on ws://[::1]:5000\r'), 'ws://[::1]:5000');
  assert.equal(parseListeningLine('token file: /w/.troupe/server.token'), null);
  assert.equal(parseListeningLine('2026-01-01T00:00:00Z troupe server 0.1.0 (protocol 1.0) serving /w at ws://127.0.0.1:1'), null);
});

test('protocol versions are compatible when the majors match', () => {
  assert.equal(protocolMismatch('1.3', '1.0'), null);
  assert.match(protocolMismatch('2.0', '1.0') ?? '', /speaks Troupe protocol 2\.0 and this extension 1\.0/);
  assert.notEqual(protocolMismatch('garbage', '1.0'), null);
});

test('loopback URLs', () => {
  for (const u of ['ws://127.0.0.1:1', 'ws://localhost:2', 'ws://[::1]:3', 'ws://127.1.2.3:4']) assert.ok(isLoopbackUrl(u), u);
  for (const u of ['ws://10.0.0.2:1', 'ws://example.com:2', 'not a url']) assert.ok(!isLoopbackUrl(u), u);
});

test('user-given addresses become WebSocket URLs', () => {
  const ok = (s: string) => {
    const r = normalizeServerUrl(s);
    assert.ok(r.ok, r.ok ? '' : r.reason);
    return r.value;
  };
  assert.equal(ok('ws://127.0.0.1:7000'), 'ws://127.0.0.1:7000');
  assert.equal(ok(' http://localhost:7000/ '), 'ws://localhost:7000');
  assert.equal(ok('https://box.example:443/troupe'), 'wss://box.example/troupe');
  assert.equal(ok('127.0.0.1:7000'), 'ws://127.0.0.1:7000');
  const ftp = normalizeServerUrl('ftp://x');
  assert.ok(!ftp.ok && /ws: or wss:/.test(ftp.reason));
  assert.ok(!normalizeServerUrl('').ok);
});

test('${workspaceFolder} and ~ expand', () => {
  assert.equal(expandVariables('${workspaceFolder}/.troupe/server.token', '/w', '/home/u'), '/w/.troupe/server.token');
  assert.equal(expandVariables('~/tokens/t', '/w', '/home/u'), '/home/u/tokens/t');
  assert.equal(expandVariables('a~b', undefined, '/home/u'), 'a~b');
});

const options = (o: Partial<ServeCommandOptions>): ServeCommandOptions => ({ configured: [], workspace: '/w', home: '/home/u', platform: 'linux', exists: () => false, ...o });

test("the workspace's installed troupe serves it", () => {
  const bin = join('/w', 'node_modules', '.bin', 'troupe');
  const r = serveCommandLine(options({ exists: (p) => p === bin }));
  assert.deepEqual(r, { ok: true, value: { command: bin, args: ['serve', '--workspace', '/w'], shell: false } });
  const win = serveCommandLine(options({ platform: 'win32', exists: (p) => p.endsWith('troupe.cmd') }));
  assert.ok(win.ok && win.value.shell && win.value.command.endsWith('troupe.cmd'));
});

test('the Troupe repository itself runs its CLI source on node from PATH', () => {
  const cli = join('/w', 'server', 'cli', 'troupe.mjs');
  const r = serveCommandLine(options({ exists: (p) => p === cli }));
  assert.deepEqual(r, { ok: true, value: { command: 'node', args: [cli, 'serve', '--workspace', '/w'], shell: false } });
});

test('a configured command gets serve and the workspace unless it has them', () => {
  const plain = serveCommandLine(options({ configured: ['npx', 'troupe'] }));
  assert.ok(plain.ok);
  assert.deepEqual(plain.value.args, ['troupe', 'serve', '--workspace', '/w']);
  const withServe = serveCommandLine(options({ configured: ['troupe', 'serve', '--max-runs', '2'] }));
  assert.ok(withServe.ok);
  assert.deepEqual(withServe.value.args, ['serve', '--max-runs', '2', '--workspace', '/w']);
  const vars = serveCommandLine(options({ configured: ['${workspaceFolder}/bin/troupe'] }));
  assert.ok(vars.ok && vars.value.command === '/w/bin/troupe');
  assert.equal(formatCommandLine({ command: 'node', args: ['/my dir/troupe.mjs', 'serve'], shell: false }), 'node "/my dir/troupe.mjs" serve');
});

test('a folder of configs alone is served by the clone the extension was built from', () => {
  const cli = join('/src/troupe', 'server', 'cli', 'troupe.mjs');
  const r = serveCommandLine(options({ clone: '/src/troupe', exists: (p) => p === cli }));
  assert.deepEqual(r, { ok: true, value: { command: 'node', args: [cli, 'serve', '--workspace', '/w'], shell: false } });
  // The workspace's own troupe comes first.
  const bin = join('/w', 'node_modules', '.bin', 'troupe');
  const own = serveCommandLine(options({ clone: '/src/troupe', exists: (p) => p === cli || p === bin }));
  assert.ok(own.ok && own.value.command === bin);
  const gone = serveCommandLine(options({ clone: '/src/troupe' }));
  assert.ok(!gone.ok && /the clone this extension was built from is gone/.test(gone.reason));
});

test('no troupe anywhere says how to get one (not "install it with npm": the package is not published)', () => {
  const r = serveCommandLine(options({}));
  assert.ok(!r.ok && /no Troupe CLI found for \/w/.test(r.reason) && /troupe\.server\.command/.test(r.reason) && /server\/cli\/troupe\.mjs/.test(r.reason));
  assert.doesNotMatch(r.reason, /npm/);
  const empty = serveCommandLine(options({ configured: [''] }));
  assert.ok(!empty.ok && /first entry/.test(empty.reason));
});

test("a killed server's reason names the signal and quotes nothing it logged; a failing exit quotes its last line", () => {
  assert.equal(serverExitReason(4242, null, 'SIGKILL', '[run-1] step 12/40 · train 50%'), 'troupe serve (pid 4242) was killed (SIGKILL)');
  assert.equal(serverExitReason(4242, 1, null, 'Error: the workspace is served by pid 17'), 'troupe serve (pid 4242) exited (code 1): Error: the workspace is served by pid 17');
  assert.equal(serverExitReason(4242, 0, null, '[run-1] step 12/40'), 'troupe serve (pid 4242) exited (code 0)');
});
