/**
 * A client holding the token but not the user's trust (a server started with `--host` is reachable
 * by anyone who learns it): every path it names must stay inside the workspace or a folder the
 * user allowed, through symbolic links too, and no error may tell it whether a file outside exists
 * or quote a file's contents. Over a real socket, with real files; nothing trains here.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ErrorCodes } from '../../server/protocol/json-rpc.ts';
import { RpcResponseError } from '../../server/protocol/rpc-client.ts';
import { TroupeServer } from '../../server/rpc/troupe-server.ts';
import { tinyConfig } from '../fixtures/tiny-config.ts';
import { connect, type TestClient } from './server-harness.ts';

const SECRET = 's3cr3t-do-not-echo';
let root = '';
let ws = '';
let outside = '';
let allowed = '';
let server: TroupeServer;
let c: TestClient;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'troupe-hostile-'));
  ws = join(root, 'workspace');
  outside = join(root, 'outside');
  allowed = join(root, 'allowed');
  for (const d of [ws, outside, allowed]) mkdirSync(d);
  // Outside: a "config" and a "checkpoint" whose first bytes are a secret.
  writeFileSync(join(outside, 'secret.json'), `${SECRET}\n`);
  mkdirSync(join(outside, 'model'));
  writeFileSync(join(outside, 'model', 'config.json'), `${SECRET}\n`);
  // Inside: links that lead out.
  symlinkSync(join(outside, 'secret.json'), join(ws, 'link.json'));
  symlinkSync(join(outside, 'model'), join(ws, 'model-link'));
  symlinkSync(outside, join(ws, 'out-link'));
  server = await TroupeServer.start({ workspace: ws, allowPaths: [allowed], log: () => {} });
  c = await connect(server.url, readFileSync(server.tokenFile, 'utf8').trim());
});

after(async () => {
  await c.close();
  await server.close();
  rmSync(root, { recursive: true, force: true });
});

/** The error a request fails with. */
async function failure(p: Promise<unknown>): Promise<RpcResponseError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RpcResponseError) return e;
    throw e;
  }
  throw new Error('expected the request to fail');
}

const noSecret = (e: RpcResponseError) => assert.doesNotMatch(`${e.message} ${JSON.stringify(e.data ?? null)}`, new RegExp(SECRET));

/** An inline config whose base model is the checkpoint folder `checkpoint`. */
const withCheckpoint = (checkpoint: string) => ({ ...tinyConfig, models: { base: { checkpoint } } });

describe('config paths (run/start configPath)', () => {
  test('outside the workspace, absolute or through "..": FileError naming configPath, nothing read', async () => {
    for (const configPath of [join(outside, 'secret.json'), '../outside/secret.json', join(outside, 'no-such.json')]) {
      const e = await failure(c.rpc.request('run/start', { configPath }));
      assert.equal(e.code, ErrorCodes.FileError, e.message);
      assert.match(e.message, /^run\/start: configPath .* is outside the workspace .*--allow-path/);
      noSecret(e);
    }
    // Whether the file exists is not told: both answers are the same but for the name.
    const exists = await failure(c.rpc.request('run/start', { configPath: join(outside, 'secret.json') }));
    const missing = await failure(c.rpc.request('run/start', { configPath: join(outside, 'no-such.json') }));
    assert.equal(exists.message.replace('secret.json', 'X'), missing.message.replace('no-such.json', 'X'));
  });

  test('a symbolic link inside the workspace that leads out is refused, without naming its target', async () => {
    for (const configPath of ['link.json', 'out-link/secret.json']) {
      const e = await failure(c.rpc.request('run/start', { configPath }));
      assert.equal(e.code, ErrorCodes.FileError, e.message);
      assert.match(e.message, /symbolic link outside the workspace/);
      assert.doesNotMatch(e.message, /outside\/secret/);
      noSecret(e);
    }
  });

  test('a file inside that is not JSON: InvalidConfig with a position, never its text', async () => {
    writeFileSync(join(ws, 'notes.json'), `{"name": "x", "key": ${SECRET}}\n`);
    const e = await failure(c.rpc.request('run/start', { configPath: 'notes.json' }));
    assert.equal(e.code, ErrorCodes.InvalidConfig);
    assert.match(e.message, /not valid JSON/);
    noSecret(e);
  });

  test('a named pipe is refused at once (reading it would wait for a writer forever)', async () => {
    execFileSync('mkfifo', [join(ws, 'pipe.json')]);
    const e = await failure(c.rpc.request('run/start', { configPath: 'pipe.json' }));
    assert.equal(e.code, ErrorCodes.FileError);
    assert.match(e.message, /not a regular file/);
  });

  test('a folder given with --allow-path is allowed', async () => {
    writeFileSync(join(allowed, 'bad.json'), JSON.stringify({ name: 'x' }));
    const e = await failure(c.rpc.request('run/start', { configPath: join(allowed, 'bad.json') }));
    assert.equal(e.code, ErrorCodes.InvalidConfig, 'read and validated, not refused');
  });
});

describe('checkpoint folders named in a config (models.*.checkpoint)', () => {
  const refusedAtField = (e: RpcResponseError, re: RegExp) => {
    assert.equal(e.code, ErrorCodes.InvalidConfig, e.message);
    const issues = (e.data as { issues: Array<{ path: string; message: string }> }).issues;
    assert.deepEqual(issues.map((i) => i.path), ['models.base.checkpoint']);
    assert.match(issues[0]!.message, re);
    noSecret(e);
  };

  test('an inline config naming a folder outside, existing or not, absolute or relative: refused at the field, the same either way', async () => {
    const exists = await failure(c.rpc.request('run/start', { config: withCheckpoint(join(outside, 'model')) }));
    refusedAtField(exists, /is outside the workspace/);
    const missing = await failure(c.rpc.request('run/start', { config: withCheckpoint(join(outside, 'nothing')) }));
    refusedAtField(missing, /is outside the workspace/);
    assert.equal(exists.message.replace(join(outside, 'model'), 'X'), missing.message.replace(join(outside, 'nothing'), 'X'));
    refusedAtField(await failure(c.rpc.request('run/start', { config: withCheckpoint('../outside/model') })), /is outside the workspace/);
  });

  test('through a symbolic link inside the workspace: refused', async () => {
    refusedAtField(await failure(c.rpc.request('run/start', { config: withCheckpoint('model-link') })), /symbolic link outside/);
  });

  test('a config file inside naming a checkpoint outside, relative to its own folder: refused', async () => {
    mkdirSync(join(ws, 'configs'), { recursive: true });
    writeFileSync(join(ws, 'configs', 'escape.json'), JSON.stringify(withCheckpoint('../../outside/model')));
    refusedAtField(await failure(c.rpc.request('run/start', { configPath: 'configs/escape.json' })), /is outside the workspace/);
  });

  test('a checkpoint inside whose config.json is not JSON: refused at the field, never quoting it', async () => {
    mkdirSync(join(ws, 'bad-model'));
    writeFileSync(join(ws, 'bad-model', 'config.json'), `${SECRET}\n`);
    refusedAtField(await failure(c.rpc.request('run/start', { config: withCheckpoint('bad-model') })), /not valid JSON/);
  });

  test('no run is left behind by any refusal', async () => {
    assert.deepEqual((await c.rpc.request('runs/list', {})).runs, []);
  });
});

describe('export destinations (adapters/export outDir)', () => {
  // The path is checked before the run is looked up, so no run is needed to see a refusal: the
  // run id exists only for the request to get that far.
  test('outside, through a link, or inside .troupe/: FileError, nothing created', async () => {
    for (const [outDir, re] of [
      [join(outside, 'export'), /outDir .* is outside the workspace/],
      ['../outside/export', /is outside the workspace/],
      ['out-link/export', /symbolic link outside/],
      ['.troupe/runs/x', /inside \.troupe\/, which only the server writes/],
    ] as const) {
      const e = await failure(c.rpc.request('adapters/export', { runId: 'no-such-run', outDir }));
      assert.equal(e.code, ErrorCodes.FileError, `${outDir}: ${e.message}`);
      assert.match(e.message, re);
    }
    assert.ok(!existsSync(join(outside, 'export')));
  });

  test('the store folder in another letter case, or a Windows path form (drive, UNC, backslashes): FileError naming outDir, nothing created', async () => {
    for (const outDir of ['.TROUPE/runs/x', '.Troupe', '.troupe./x', 'C:\\Windows\\win.ini', 'C:/Windows', 'c:export', '\\\\server\\share\\x', 'exports\\run-1']) {
      const e = await failure(c.rpc.request('adapters/export', { runId: 'no-such-run', outDir }));
      assert.equal(e.code, ErrorCodes.FileError, `${outDir}: ${e.message}`);
      assert.match(e.message, /: outDir /);
      assert.match(e.message, /only the server writes|drive letter|backslash/);
    }
    assert.deepEqual(readdirSync(ws).filter((n) => /troupe|:|\\/i.test(n)).sort(), ['.troupe']);
  });
});
