/**
 * The training server's protocol over a real socket on port 0, without training anything: the LSP
 * lifecycle, every kind of bad input and the answer it gets, authentication and origin refusal,
 * several clients at once, and a fuzz run that checks the server still answers and its memory
 * stayed bounded.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { PROTOCOL_VERSION } from '../../server/protocol/methods.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { connect, openSocket, type TestClient } from './server-harness.ts';

let ws = '';
let server: TroupeServer;
let token = '';
const logLines: string[] = [];

before(async () => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-rpc-'));
  server = await TroupeServer.start({ workspace: ws, maxPayloadBytes: 256 * 1024, log: (l) => logLines.push(l) });
  token = readFileSync(server.tokenFile, 'utf8').trim();
});

after(async () => {
  await server.close();
  rmSync(ws, { recursive: true, force: true });
});

/** Sends a raw frame and resolves with the next frame the server sends back, parsed. */
function rawExchange(c: TestClient, frame: string | Buffer): Promise<{ id?: unknown; error?: { code: number; message: string; data?: unknown }; result?: unknown }> {
  return new Promise((resolve) => {
    c.socket.once('message', (data) => resolve(JSON.parse(data.toString()) as never));
    c.socket.send(frame);
  });
}

const errorCode = async (p: Promise<unknown>): Promise<number> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof RpcResponseError) return e.code;
    throw e;
  }
  throw new Error('expected the request to fail');
};

describe('server files and authentication', () => {
  test('server.json names the url, pid, protocol version and a 0600 token file', () => {
    const info = JSON.parse(readFileSync(join(ws, '.troupe', 'server.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(info.url, server.url);
    assert.equal(info.pid, process.pid);
    assert.equal(info.protocolVersion, PROTOCOL_VERSION);
    assert.equal(info.tokenFile, server.tokenFile);
    assert.equal(statSync(server.tokenFile).mode & 0o777, 0o600);
    assert.match(server.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
  });

  test('binding anything but loopback is allowed and warned about', async () => {
    const other = mkdtempSync(join(tmpdir(), 'troupe-rpc-any-'));
    const lines: string[] = [];
    const s2 = await TroupeServer.start({ workspace: other, host: '0.0.0.0', log: (l) => lines.push(l) });
    assert.match(s2.url, /^ws:\/\/0\.0\.0\.0:\d+$/);
    assert.ok(lines.some((l) => /^warning: listening on 0\.0\.0\.0, not loopback/.test(l)), lines.join('\n'));
    // Beyond loopback, paths a client names stay inside the workspace.
    const c = await connect(s2.url.replace('0.0.0.0', '127.0.0.1'), readFileSync(s2.tokenFile, 'utf8').trim());
    assert.equal(await errorCode(c.rpc.request('run/start', { configPath: '/etc/hostname' })), ErrorCodes.FileError);
    assert.equal(await errorCode(c.rpc.request('run/start', { configPath: '../outside.json' })), ErrorCodes.FileError);
    await c.close();
    await s2.close();
    rmSync(other, { recursive: true, force: true });
  });

  test('no token → 401, wrong token → 401, a browser Origin → 403, even with the right token', async () => {
    await assert.rejects(openSocket(server.url, {}), (e: Error & { status?: number }) => e.status === 401 && /missing "Authorization: Bearer/.test(e.message));
    await assert.rejects(openSocket(server.url, { Authorization: 'Bearer nope' }), (e: Error & { status?: number }) => e.status === 401 && /wrong token/.test(e.message));
    await assert.rejects(
      openSocket(server.url, { Authorization: `Bearer ${token}`, Origin: 'https://evil.example' }),
      (e: Error & { status?: number }) => e.status === 403 && /browser origin/.test(e.message),
    );
  });
});

describe('lifecycle', () => {
  test('requests before initialize get ServerNotInitialized; initialize answers capabilities; a second initialize is refused', async () => {
    const c = await connect(server.url, token, { initialize: false });
    assert.equal(await errorCode(c.rpc.request('runs/list', {})), ErrorCodes.ServerNotInitialized);
    const init = await c.rpc.request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: 'test' } });
    assert.equal(init.protocolVersion, PROTOCOL_VERSION);
    assert.equal(init.capabilities.hoverProvider, true);
    assert.equal(init.workspace, ws);
    assert.equal(await errorCode(c.rpc.request('initialize', {})), ErrorCodes.InvalidRequest);
    assert.deepEqual((await c.rpc.request('runs/list', {})).runs, []);
    await c.close();
  });

  test('lifecycle frames are judged in arrival order: two initializes in one chunk, the second is refused', async () => {
    const c = await connect(server.url, token, { initialize: false });
    const answers: Array<{ id: number; result?: unknown; error?: { code: number } }> = [];
    const both = new Promise<void>((resolve) =>
      c.socket.on('message', (data) => {
        answers.push(JSON.parse(data.toString()) as never);
        if (answers.length === 2) resolve();
      }),
    );
    const init = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION } });
    c.socket.send(`${init(1)}`);
    c.socket.send(`${init(2)}`);
    await both;
    const byId = new Map(answers.map((a) => [a.id, a]));
    assert.ok(byId.get(1)?.result, 'the first initialize is answered');
    assert.equal(byId.get(2)?.error?.code, ErrorCodes.InvalidRequest);
    await c.close();
  });

  test('a client of another major protocol version is refused', async () => {
    const c = await connect(server.url, token, { initialize: false });
    assert.equal(await errorCode(c.rpc.request('initialize', { protocolVersion: '99.0' })), ErrorCodes.IncompatibleProtocol);
    await c.close();
  });

  test('an LSP client may initialize without a protocol version (and then gets no run events)', async () => {
    const c = await connect(server.url, token, { initialize: false });
    const init = await c.rpc.request('initialize', { processId: null, capabilities: { textDocument: { hover: {} } }, initializationOptions: { x: 1 } });
    assert.equal(init.serverInfo.name, 'troupe');
    await c.close();
  });

  test('shutdown refuses further requests; exit closes the connection; the server goes on', async () => {
    const c = await connect(server.url, token);
    assert.equal(await c.rpc.request('shutdown', undefined), null);
    assert.equal(await errorCode(c.rpc.request('runs/list', {})), ErrorCodes.InvalidRequest);
    c.rpc.notify('exit', undefined);
    assert.equal((await c.closed).code, 1000);
    const d = await connect(server.url, token);
    const status = await d.rpc.request('server/status', {});
    assert.equal(status.pid, process.pid);
    assert.equal(status.protocolVersion, PROTOCOL_VERSION);
    await d.close();
  });
});

describe('bad input gets a precise error and never crashes the server', () => {
  let c: TestClient;
  before(async () => (c = await connect(server.url, token)));
  after(() => c.close());

  test('malformed JSON → ParseError with id null', async () => {
    const r = await rawExchange(c, '{"jsonrpc": "2.0", "id": 1, "method": ');
    assert.equal(r.id, null);
    assert.equal(r.error?.code, ErrorCodes.ParseError);
  });

  test('not an envelope → InvalidRequest naming the field; the id is echoed when readable', async () => {
    const r = await rawExchange(c, JSON.stringify({ jsonrpc: '1.0', id: 7, method: 'runs/list' }));
    assert.equal(r.id, 7);
    assert.equal(r.error?.code, ErrorCodes.InvalidRequest);
    assert.match(r.error!.message, /jsonrpc/);
    const batch = await rawExchange(c, JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'runs/list' }]));
    assert.equal(batch.error?.code, ErrorCodes.InvalidRequest);
    assert.match(batch.error!.message, /batch/);
  });

  test('unknown method → MethodNotFound naming it', async () => {
    const r = await rawExchange(c, JSON.stringify({ jsonrpc: '2.0', id: 'x', method: 'run/explode', params: {} }));
    assert.equal(r.error?.code, ErrorCodes.MethodNotFound);
    assert.match(r.error!.message, /run\/explode/);
  });

  test('bad params → InvalidParams with the zod issues', async () => {
    const r = await rawExchange(c, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'trajectories/query', params: { runId: '', limit: -1 } }));
    assert.equal(r.error?.code, ErrorCodes.InvalidParams);
    const issues = (r.error!.data as { issues: Array<{ path: string }> }).issues;
    assert.deepEqual(issues.map((i) => i.path).sort(), ['limit', 'runId']);
    const both = await errorCode(c.rpc.request('run/start', { configPath: 'a.json', config: {} } as never));
    assert.equal(both, ErrorCodes.InvalidParams);
  });

  test('unknown run → UnknownRun; unknown trajectory → NotFound', async () => {
    assert.equal(await errorCode(c.rpc.request('run/pause', { runId: 'nope' })), ErrorCodes.UnknownRun);
    assert.equal(await errorCode(c.rpc.request('metrics/query', { runId: 'nope' })), ErrorCodes.UnknownRun);
    assert.equal(await errorCode(c.rpc.request('trajectory/get', { trajectoryId: 123456 })), ErrorCodes.NotFound);
  });

  test('an invalid inline config → InvalidConfig listing every issue with its path; no run is left behind', async () => {
    try {
      await c.rpc.request('run/start', { config: { name: 'x', env: { name: 'plan-path' }, specialization: 'L9', training: { stpes: 3 } } });
      assert.fail('expected InvalidConfig');
    } catch (e) {
      assert.ok(e instanceof RpcResponseError);
      assert.equal(e.code, ErrorCodes.InvalidConfig);
      const paths = (e.data as { issues: Array<{ path: string }> }).issues.map((i) => i.path);
      assert.ok(paths.includes('specialization'), paths.join(', '));
      assert.ok(paths.includes('training.stpes'), paths.join(', '));
    }
    assert.deepEqual((await c.rpc.request('runs/list', {})).runs, []);
  });

  test('a config file that does not exist → an error naming the file', async () => {
    await assert.rejects(c.rpc.request('run/start', { configPath: 'configs/missing.json' }), /missing\.json/);
  });

  test('an oversized frame closes the socket with 1009; binary frames with 1003', async () => {
    const big = await connect(server.url, token);
    big.socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'runs/list', params: { pad: 'x'.repeat(300 * 1024) } }));
    const closed = await big.closed;
    assert.equal(closed.code, 1009);
    const bin = await connect(server.url, token);
    bin.socket.send(Buffer.from([1, 2, 3]));
    assert.equal((await bin.closed).code, 1003);
  });
});

describe('cancellation', () => {
  test('$/cancelRequest for an unknown id is harmless; a cancelled request is still answered exactly once', async () => {
    const c = await connect(server.url, token);
    c.rpc.notify('$/cancelRequest', { id: 424242 });
    const controller = new AbortController();
    const pending = c.rpc.request('runs/list', {}, { signal: controller.signal });
    controller.abort();
    // runs/list completes before the cancel is read, so it answers with its result (LSP allows a
    // result for a cancelled request); either way the client's promise settles and nothing hangs.
    assert.deepEqual((await pending).runs, []);
    assert.equal(c.rpc.pendingCount, 0);
    await c.close();
  });
});

describe('several clients', () => {
  test('each gets its own answers; the count is reported', async () => {
    const clients = await Promise.all([0, 1, 2].map(() => connect(server.url, token)));
    const statuses = await Promise.all(clients.map((c) => c.rpc.request('server/status', {})));
    for (const s of statuses) assert.ok(s.clients >= 3);
    await Promise.all(clients.map((c) => c.close()));
  });
});

describe('fuzz', () => {
  test('thousands of random and malformed frames: every request answered, server alive, memory bounded', async () => {
    const c = await connect(server.url, token);
    // Warm up allocations so the memory comparison measures growth, not first use.
    for (let i = 0; i < 200; i++) await rawExchange(c, '{');
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let seed = 12345;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
    const methods = ['runs/list', 'run/start', 'run/pause', 'trajectory/get', 'metrics/query', 'textDocument/hover', 'nope', '', '$/cancelRequest', 'initialize'];
    const values: unknown[] = [null, 0, -1, 1.5, 'x', '', [], {}, { runId: 'r' }, { trajectoryId: -3 }, { config: { name: 1 } }, 'x'.repeat(1000), { textDocument: { uri: 'file:///x' }, position: { line: -1, character: 0 } }];
    const frames = (i: number): string => {
      switch (i % 6) {
        case 0: return JSON.stringify({ jsonrpc: '2.0', id: i, method: pick(methods), params: pick(values) });
        case 1: return JSON.stringify({ jsonrpc: pick(['2.0', '1.0', 2, null]), id: pick([i, null, {}, 'a']), method: pick(methods) });
        case 2: return JSON.stringify(pick(values));
        case 3: return Array.from({ length: 1 + Math.floor(rand() * 40) }, () => String.fromCharCode(Math.floor(rand() * 128))).join('');
        case 4: return JSON.stringify({ jsonrpc: '2.0', method: pick(methods), params: pick(values) });
        default: return `{"jsonrpc":"2.0","id":${i},"method":"runs/list","params":{}`;
      }
    };
    const N = 5000;
    for (let i = 0; i < N; i++) c.socket.send(frames(i));
    // Everything sent before this request has been handled once its answer arrives (frames are
    // processed in order), so the server answered or ignored all of them without dying.
    const status = await c.rpc.request('server/status', {});
    assert.equal(status.pid, process.pid);
    global.gc?.();
    const growthMb = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
    assert.ok(growthMb < 64, `rss grew by ${growthMb.toFixed(1)} MB over ${N} frames`);
    await c.close();
    const d = await connect(server.url, token);
    assert.deepEqual((await d.rpc.request('runs/list', {})).runs, []);
    await d.close();
  });
});
