/**
 * `troupe serve-openai` through the real CLI in a child process: a run's trained adapters listed
 * as models on their base and served at the checkpoint asked for, the key file written 0600 and
 * removed on SIGTERM, usage errors.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { tinyConfig } from '../fixtures/tiny-config.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));
let ws = '';
const runDir = () => join(ws, 'run');

before(() => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-serve-openai-'));
  // With the warm start the base serves the warm-started weights, and the RL steps move the adapters.
  const config = { ...tinyConfig, training: { ...tinyConfig.training, steps: 2, validationEpisodes: 2, testEpisodes: 0 } };
  writeFileSync(join(ws, 'tiny.json'), JSON.stringify(config));
  const r = spawnSync(process.execPath, [cli, 'train', 'tiny.json', '--out', 'run'], { cwd: ws, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});
after(() => rmSync(ws, { recursive: true, force: true }));

/** Starts the server; resolves with its URL once it printed it. */
async function serve(args: readonly string[]) {
  const child = spawn(process.execPath, [cli, 'serve-openai', ...args, '--port', '0'], { cwd: ws, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    const m = /listening on (\S+)/.exec(line);
    if (m) return { child, url: m[1]!, stderr: () => stderr };
  }
  throw new Error(`serve-openai exited before listening: ${stderr}`);
}

test("a run's trained adapters are served at a checkpoint; the key file is 0600 and removed on SIGTERM", { timeout: 120_000 }, async () => {
  const { child, url } = await serve([runDir(), '--checkpoint', 'latest']);
  const keyFile = join(ws, '.troupe', 'openai.token');
  try {
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const client = new OpenAI({ baseURL: url, apiKey: readFileSync(keyFile, 'utf8').trim(), maxRetries: 0 });
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id).sort(), ['base', 'plan-lora', 'tool-lora']);
    // After the RL steps the adapters are no longer B = 0: they answer unlike the base.
    const ask = (model: string) => client.completions.create({ model, prompt: 'ab', max_tokens: 6, seed: 4, logprobs: 0 });
    const [tool, base] = [await ask('tool-lora'), await ask('base')];
    assert.notDeepEqual(tool.choices[0]!.logprobs!.token_logprobs, base.choices[0]!.logprobs!.token_logprobs);
  } finally {
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0);
  }
  assert.ok(!existsSync(keyFile), 'the key file is removed at exit');
});

test('the initial checkpoint serves untrained adapters (the base itself); usage errors exit 2', { timeout: 120_000 }, async () => {
  const { child, url } = await serve([runDir(), '--checkpoint', 'initial', '--api-key-env', 'TROUPE_TEST_KEY']).catch(() => ({ child: null, url: '' }));
  assert.equal(child, null, 'an unset --api-key-env variable is refused');
  void url;
  process.env.TROUPE_TEST_KEY = 'k-123';
  try {
    const s = await new Promise<Awaited<ReturnType<typeof serve>>>((ok, fail) => {
      const child = spawn(process.execPath, [cli, 'serve-openai', runDir(), '--checkpoint', 'initial', '--api-key-env', 'TROUPE_TEST_KEY', '--port', '0'], { cwd: ws, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } });
      createInterface({ input: child.stdout }).on('line', (line) => {
        const m = /listening on (\S+)/.exec(line);
        if (m) ok({ child, url: m[1]!, stderr: () => '' });
      });
      child.on('exit', () => fail(new Error('exited')));
    });
    try {
      const client = new OpenAI({ baseURL: s.url, apiKey: 'k-123', maxRetries: 0 });
      const ask = (model: string) => client.completions.create({ model, prompt: 'ab', max_tokens: 6, seed: 4, logprobs: 0 });
      assert.deepEqual((await ask('tool-lora')).choices[0]!.logprobs!.token_logprobs, (await ask('base')).choices[0]!.logprobs!.token_logprobs);
    } finally {
      s.child.kill('SIGTERM');
      await once(s.child, 'exit');
    }
  } finally {
    delete process.env.TROUPE_TEST_KEY;
  }
  const bad = spawnSync(process.execPath, [cli, 'serve-openai', 'tiny.json', '--checkpoint', 'best'], { cwd: ws, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--checkpoint applies to a run folder/);
});
