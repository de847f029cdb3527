/**
 * Loading a config for a new run: what is validated is what is stored. The file is a named pipe
 * that serves a different config on each open, so a loader that reads the file twice (once to
 * validate, once to store) is caught every time, without timing. A pipe is also what a shell's
 * `troupe train <(jq … config.json)` hands over, which can be read only once.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { constants, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError } from '../protocol/config-errors.ts';
import { tinyConfigWithSteps } from '../../test/fixtures/tiny-config.ts';
import { defaultDatabasePath, openRunStore } from '../store/index.ts';
import { RunManager } from './run-manager.ts';
import { createRun, loadConfigFile, loadInlineConfig, prepareResume } from './run-session.ts';

const dir = mkdtempSync(join(tmpdir(), 'troupe-session-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Serves `first` to the first opener of the pipe and `rest` to every later one, until stopped.
 * After each write the server waits until the reader has closed its end before it opens the pipe
 * again: an open for writing succeeds at once while the previous reader still holds the pipe, and
 * `rest` then landed in that reader's stream after `first` (the test failed with "unexpected
 * non-whitespace character after JSON", once in a while). A non-blocking open for writing fails
 * with ENXIO exactly when no reader holds the pipe; opening and closing it writes nothing.
 */
async function untilReaderGone(path: string): Promise<void> {
  for (;;) {
    try {
      const probe = await open(path, constants.O_WRONLY | constants.O_NONBLOCK);
      await probe.close();
    } catch (e) {
      if (e instanceof Error && 'code' in e && e.code === 'ENXIO') return;
      throw e;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

function servePipe(path: string, first: string, rest: string): { stop: () => Promise<void> } {
  let stopped = false;
  let served = 0;
  const serving = (async () => {
    while (!stopped) {
      // Blocks until a reader opens the pipe (or stop() opens it to release this open).
      const fh = await open(path, 'w');
      try {
        if (!stopped) await fh.write(served === 0 ? first : rest);
        served++;
      } catch (e) {
        if (!(e instanceof Error && 'code' in e && e.code === 'EPIPE')) throw e;
      } finally {
        await fh.close();
      }
      await untilReaderGone(path);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      // The writer waiting for a reader is released by one that reads nothing (non-blocking: the
      // writer may already have seen `stopped` and left, and a blocking open would wait forever).
      const reader = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
      await reader.close();
      await serving;
    },
  };
}

test('a config is read once: the text stored for the run is the text that was validated', async () => {
  const fifo = join(dir, 'config.fifo');
  execFileSync('mkfifo', [fifo]);
  const first = `${JSON.stringify({ ...tinyConfigWithSteps(3), name: 'first read' }, null, 2)}\n`;
  const second = `${JSON.stringify({ ...tinyConfigWithSteps(7), name: 'second read' }, null, 2)}\n`;
  const pipe = servePipe(fifo, first, second);
  try {
    const loaded = await loadConfigFile(fifo);
    assert.equal(loaded.config.name, 'first read');
    assert.equal((JSON.parse(loaded.text) as { name: string }).name, 'first read', 'the stored text is the validated one');
    assert.equal(loaded.text, first);
    assert.equal(loaded.config.training.steps, 3);
    assert.deepEqual(loaded.json, JSON.parse(first));
  } finally {
    await pipe.stop();
  }
});

test('a config that is not JSON is refused with the position of the problem, never with its text', async () => {
  const path = join(dir, 'secret.json');
  writeFileSync(path, '{"name": "x",\n "token": s3cr3t-value-do-not-echo}\n');
  await assert.rejects(loadConfigFile(path), (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.match(e.message, /not valid JSON/);
    assert.doesNotMatch(e.message, /s3cr3t|do-not-echo|"token"|"name"/);
    return true;
  });
  const truncated = join(dir, 'truncated.json');
  writeFileSync(truncated, '{"name": "x",\n "seed": ');
  await assert.rejects(loadConfigFile(truncated), /not valid JSON.*ends/);
  const trailing = join(dir, 'trailing.json');
  writeFileSync(trailing, '{"name": "x"}\n}');
  await assert.rejects(loadConfigFile(trailing), /not valid JSON.*line 2, column 1/);
});

test('resuming removes the temporary checkpoints a killed writer left, and keeps every complete one', async () => {
  const ws = join(dir, 'orphans');
  mkdirSync(ws);
  const store = openRunStore(defaultDatabasePath(ws));
  try {
    const { run, folder, lock } = await createRun(store, await loadInlineConfig(tinyConfigWithSteps(4), ws), { state: 'running', warn: () => {} });
    lock.release();
    store.setRunState(run.id, 'paused');
    const checkpoints = join(folder.dir, 'checkpoints');
    const complete = (name: string) => {
      mkdirSync(join(checkpoints, name), { recursive: true });
      writeFileSync(join(checkpoints, name, 'state.json'), `${JSON.stringify({ step: 0, policies: {} })}\n`);
    };
    complete('resume');
    complete('step-0');
    complete('step-2.old-4242'); // set aside by a writer killed between its two renames: put back
    // Killed mid-write: a half-written step folder, a resume folder, best.json; a set-aside copy whose replacement is in place.
    mkdirSync(join(checkpoints, 'step-3.tmp-4242'));
    writeFileSync(join(checkpoints, 'step-3.tmp-4242', 'tool-lora.safetensors'), 'half');
    mkdirSync(join(checkpoints, 'resume.tmp-99999'));
    writeFileSync(join(checkpoints, 'best.json.tmp-17'), '{"st');
    writeFileSync(join(checkpoints, '.best.json.17.0a1b2c3d.tmp'), '{"st'); // writeFileAtomic's temporary name
    complete('step-0.old-4242');
    const resumed = await prepareResume(store, store.getRun(run.id)!, folder);
    resumed.lock.release();
    assert.deepEqual(readdirSync(checkpoints).sort(), ['resume', 'step-0', 'step-2']);
    assert.ok(existsSync(join(checkpoints, 'step-2', 'state.json')));
  } finally {
    store.close();
  }
});

test('a server opening on a run a killed process left running marks it interrupted and removes its temporary checkpoints', async () => {
  const ws = join(dir, 'interrupted');
  mkdirSync(ws);
  const store = openRunStore(defaultDatabasePath(ws));
  const { run, folder, lock } = await createRun(store, await loadInlineConfig(tinyConfigWithSteps(4), ws), { state: 'running', warn: () => {} });
  store.close();
  lock.release(); // the process training it is gone
  const checkpoints = join(folder.dir, 'checkpoints');
  mkdirSync(join(checkpoints, 'resume'), { recursive: true });
  mkdirSync(join(checkpoints, 'step-1.tmp-4242'));
  writeFileSync(join(checkpoints, 'step-1.tmp-4242', 'tool-lora.safetensors'), 'half');
  const manager = await RunManager.open({ workspace: ws, log: () => {} });
  try {
    assert.match(manager.store.getRun(run.id)!.error ?? '', /^interrupted:/);
    assert.deepEqual(readdirSync(checkpoints), ['resume']);
    assert.ok(!existsSync(join(folder.dir, 'run.lock')), 'the lock taken to clean is released');
  } finally {
    await manager.close();
  }
});
