/**
 * The `troupe` command line end to end: the real CLI in child processes (`node server/cli/troupe.mjs`,
 * cwd = a temporary workspace), a tiny real experiment, the real database. Nothing is mocked; waits
 * are on the child's own output ('step 1/4') or its exit, never on timers.
 *
 * The tests share one workspace and run in order (later ones use the run the first one trained),
 * which also lets every run after the first reuse the cached warm start.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadCheckpoint } from '../../server/models/checkpoint.ts';
import { importPeftAdapter } from '../../server/models/lora.ts';
import { readSafetensorsFile } from '../../server/models/safetensors.ts';
import { defaultModelConfig } from '../../server/models/default-model.ts';
import { openRunStore, type RunStore } from '../../server/store/index.ts';
import { tinyConfig } from '../fixtures/tiny-config.ts';

const cli = fileURLToPath(new URL('../../server/cli/troupe.mjs', import.meta.url));

let ws = '';
const children = new Set<ChildProcess>();

before(() => {
  ws = mkdtempSync(join(tmpdir(), 'troupe-cli-'));
  writeFileSync(join(ws, 'tiny.json'), `${JSON.stringify(tinyConfig, null, 2)}\n`);
});

after(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(ws, { recursive: true, force: true });
});

interface Result {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Running {
  readonly proc: ChildProcess;
  /** Resolves with the first stdout line matching `re` (rejects if the process exits first). */
  line(re: RegExp): Promise<string>;
  readonly done: Promise<Result>;
}

function start(args: readonly string[]): Running {
  const proc = spawn(process.execPath, [cli, ...args], { cwd: ws, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  let stdout = '';
  let stderr = '';
  const waiters: Array<{ re: RegExp; resolve: (l: string) => void; reject: (e: Error) => void }> = [];
  createInterface({ input: proc.stdout! }).on('line', (l) => {
    stdout += `${l}\n`;
    for (const w of waiters.filter((x) => x.re.test(l))) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(l);
    }
  });
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Result>((resolve, reject) => {
    proc.on('error', reject);
    // 'close' (not 'exit'): all output has been read by then.
    proc.on('close', (code, signal) => {
      children.delete(proc);
      for (const w of waiters) w.reject(new Error(`troupe ${args.join(' ')} exited (code ${code}, signal ${signal}) before printing ${w.re}:\n${stdout}\n${stderr}`));
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    proc,
    done,
    line: (re) => {
      const seen = stdout.split('\n').find((l) => re.test(l));
      return seen !== undefined ? Promise.resolve(seen) : new Promise((resolve, reject) => waiters.push({ re, resolve, reject }));
    },
  };
}

const troupe = (...args: string[]): Promise<Result> => start(args).done;

function expectOk(r: Result, what: string): void {
  assert.equal(r.code, 0, `${what} failed (code ${r.code}, signal ${r.signal}):\n${r.stdout}\n${r.stderr}`);
}

function withStore<T>(body: (s: RunStore) => T): T {
  const store = openRunStore(join(ws, '.troupe', 'troupe.db'));
  try {
    return body(store);
  } finally {
    store.close();
  }
}

function runIdOf(dir: string): string {
  const run = JSON.parse(readFileSync(join(ws, dir, 'run.json'), 'utf8')) as { runId: string };
  return run.runId;
}

const stepsOf = (runId: string) => withStore((s) => s.listSteps(runId).map((x) => x.step));
const metric = (runId: string, step: number, name: string) => withStore((s) => s.stepMetrics(runId, step).find((m) => m.name === name && m.agentId === undefined && m.policyId === undefined)?.value);

describe('troupe CLI', () => {
  test('train runs to completion; eval --json reports the initial and latest team on the validation seeds', { timeout: 60_000 }, async () => {
    const r = await troupe('train', 'tiny.json', '--out', 'run-a');
    expectOk(r, 'train');
    assert.match(r.stdout, /^step 1\/2 .*train .*reward .*loss .*val .*ETA/m);
    assert.match(r.stdout, /before RL \(step 0, warm-started policy\)\s+\d+\.\d%/);
    assert.match(r.stdout, /after RL {2}\(step 2\)\s+\d+\.\d%\s+\([+-]\d+\.\d points\)/);
    // The test seeds (training.testEpisodes), apart from validation's: the RL gain next to the warm start.
    assert.match(r.stdout, /test success on 2 test seeds \(apart from the validation seeds\):\n {2}warm start \d+\.\d%, after RL \(step 2\) \d+\.\d%: RL gain [+-]\d+\.\d points/);

    const runId = runIdOf('run-a');
    assert.equal(readFileSync(join(ws, 'run-a', 'config.json'), 'utf8'), readFileSync(join(ws, 'tiny.json'), 'utf8'));
    withStore((s) => {
      const run = s.getRun(runId)!;
      assert.equal(run.state, 'done');
      assert.deepEqual(run.config, tinyConfig);
    });
    assert.deepEqual(stepsOf(runId), [0, 1, 2]);

    // best: the highest validation, a tie going to the earlier step (checkpoints/best.json).
    const best = withStore((s) => s.metricSeries({ runId, name: 'val/success' })).reduce((b, p) => (p.value > b.value ? p : b));
    if (best.step !== 2) assert.match(r.stdout, new RegExp(`best {6}\\(step ${best.step}`));
    let greedyInitial: unknown;
    for (const [checkpoint, step] of [['initial', 0], ['latest', 2], ['best', best.step]] as const) {
      const e = await troupe('eval', 'run-a', '--checkpoint', checkpoint, '--episodes', '4', '--seed-offset', '0', '--json');
      expectOk(e, `eval ${checkpoint}`);
      const out = JSON.parse(e.stdout) as { success: number; meanReward: number; perAgent: Record<string, { meanReward: number }>; checkpoint: string; step: number; episodes: number; seedOffset: number };
      if (checkpoint === 'initial') greedyInitial = out.perAgent;
      assert.ok(out.success >= 0 && out.success <= 1, `success ${out.success}`);
      assert.deepEqual(Object.keys(out.perAgent).sort(), ['plan', 'tool']);
      assert.deepEqual([out.checkpoint, out.step, out.episodes, out.seedOffset], [checkpoint, step, 4, 0]);
      // The same team on the same seeds, decoded greedily: eval reproduces what training validated.
      assert.equal(out.success, metric(runId, step, 'val/success'), `${checkpoint} success vs the store's step ${step}`);
      assert.ok(Math.abs(out.meanReward - metric(runId, step, 'val/reward')!) < 1e-6, `${checkpoint} mean reward vs the store's step ${step}`);
    }

    // --test plays the test seeds the trainer reported its RL gain on: the same numbers.
    for (const [checkpoint, step] of [['initial', 0], ['latest', 2]] as const) {
      const e = await troupe('eval', 'run-a', '--checkpoint', checkpoint, '--test', '--json');
      expectOk(e, `eval ${checkpoint} --test`);
      const out = JSON.parse(e.stdout) as { success: number; meanReward: number; episodes: number; seeds: string; temperature: number };
      assert.deepEqual([out.seeds, out.episodes, out.temperature], ['test', tinyConfig.training.testEpisodes, 0]);
      assert.equal(out.success, metric(runId, step, 'test/success'), `${checkpoint} --test success vs the store's step ${step}`);
      assert.ok(Math.abs(out.meanReward - metric(runId, step, 'test/reward')!) < 1e-6, `${checkpoint} --test mean reward vs the store's step ${step}`);
    }
    // --temperature samples, seeded: the same command gives the same episodes.
    const sampled = async () => {
      const e = await troupe('eval', 'run-a', '--checkpoint', 'initial', '--episodes', '4', '--temperature', '1.5', '--json');
      expectOk(e, 'eval --temperature 1.5');
      return JSON.parse(e.stdout) as { temperature: number; seeds: string; perAgent: unknown; meanReward: number };
    };
    const once = await sampled();
    assert.deepEqual([once.temperature, once.seeds], [1.5, 'validation']);
    assert.deepEqual(await sampled(), once);
    assert.notDeepEqual(once.perAgent, greedyInitial, 'sampled at 1.5, the same seeds play otherwise than greedily');
    const bad = await troupe('eval', 'run-a', '--temperature', '11');
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /--temperature must be a number from 0 to 10, got '11'/);
  });

  test('a bad config is refused naming every JSON path (exit 1); an unknown flag prints usage (exit 2)', { timeout: 30_000 }, async () => {
    const bad = { ...tinyConfig, algorithm: { ...tinyConfig.algorithm, branches: 0 }, training: { ...tinyConfig.training, stpes: 3 } };
    writeFileSync(join(ws, 'bad.json'), JSON.stringify(bad));
    const runsBefore = withStore((s) => s.listRuns().length);
    const r = await troupe('train', 'bad.json');
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^troupe: invalid config .*bad\.json \(2 problems\)/);
    assert.match(r.stderr, /bad\.json: algorithm\.branches: /);
    assert.match(r.stderr, /bad\.json: training\.stpes: unknown key "stpes" \(did you mean "steps"\?\)/);
    assert.equal(withStore((s) => s.listRuns().length), runsBefore, 'no run is created');

    const u = await troupe('train', 'tiny.json', '--bogus');
    assert.equal(u.code, 2);
    assert.match(u.stderr, /^troupe: Unknown option '--bogus'/);
    assert.match(u.stderr, /usage: troupe train <config\.json>/);
  });

  test('--resume after kill -9 completes the run with every step committed exactly once', { timeout: 60_000 }, async () => {
    const t = start(['train', 'tiny.json', '--steps', '4', '--out', 'run-k']);
    await t.line(/^step 1\/4 /);
    t.proc.kill('SIGKILL');
    const killed = await t.done;
    assert.equal(killed.signal, 'SIGKILL');
    const runId = runIdOf('run-k');
    withStore((s) => {
      assert.equal(s.getRun(runId)!.state, 'running', 'a killed run keeps the state it had');
      assert.ok((s.lastCommittedStep(runId) ?? -1) >= 1);
    });
    const listed = await troupe('runs');
    assert.match(listed.stdout, new RegExp(`^${runId}\\s.*\\srunning\\*\\s`, 'm'), 'runs flags a running run whose process is gone');

    const r = await troupe('train', '--resume', 'run-k');
    expectOk(r, 'resume');
    assert.match(r.stdout, /resuming after step [12]/);
    assert.deepEqual(stepsOf(runId), [0, 1, 2, 3, 4]);
    withStore((s) => {
      assert.equal(s.getRun(runId)!.state, 'done');
      assert.equal(s.lastCommittedStep(runId), 4);
    });
    assert.ok(!existsSync(join(ws, 'run-k', 'run.lock')), 'the lock is released');
  });

  test('Ctrl-C stops at a step boundary, leaving a paused run with a checkpoint that --resume <config> continues', { timeout: 60_000 }, async () => {
    const t = start(['train', 'tiny.json', '--steps', '4', '--out', 'run-p']);
    await t.line(/^step 1\/4 /);
    t.proc.kill('SIGINT');
    const r = await t.done;
    assert.equal(r.code, 130, r.stderr);
    const runId = runIdOf('run-p');
    const last = withStore((s) => {
      assert.equal(s.getRun(runId)!.state, 'paused');
      return s.lastCommittedStep(runId)!;
    });
    assert.ok(last >= 1 && last < 4, `stopped after step ${last}`);
    assert.match(r.stdout, new RegExp(`paused after step ${last} of 4`));
    const state = JSON.parse(readFileSync(join(ws, 'run-p', 'checkpoints', 'resume', 'state.json'), 'utf8')) as { step: number };
    assert.equal(state.step, last, 'the resume checkpoint is the last committed step');

    // A config that no longer equals the run's is refused, naming where it differs.
    writeFileSync(join(ws, 'changed.json'), JSON.stringify({ ...tinyConfig, training: { ...tinyConfig.training, validationEpisodes: 8 } }));
    const changed = await troupe('train', '--resume', 'changed.json');
    assert.equal(changed.code, 1);
    assert.match(changed.stderr, new RegExp(`^troupe: changed\\.json differs from the config run ${runId} was started with \\(at training\\.validationEpisodes\\)`));

    // The config names the run: the newest unfinished run of that name is run-p.
    const c = await troupe('train', '--resume', 'tiny.json');
    expectOk(c, 'resume by config');
    assert.match(c.stdout, new RegExp(`resuming run ${runId}`));
    assert.deepEqual(stepsOf(runId), [0, 1, 2, 3, 4]);
    withStore((s) => assert.equal(s.getRun(runId)!.state, 'done'));
  });

  test('a second Ctrl-C exits at once with a message, the run paused', { timeout: 60_000 }, async () => {
    const t = start(['train', 'tiny.json', '--steps', '4', '--out', 'run-i']);
    await t.line(/^step 1\/4 /);
    t.proc.kill('SIGINT');
    await t.line(/^SIGINT: stopping after the step in flight/);
    t.proc.kill('SIGINT');
    const r = await t.done;
    assert.ok(r.signal === 'SIGINT' || r.code === 130, `code ${r.code}, signal ${r.signal}`);
    assert.match(r.stderr, /^troupe: interrupted; run \S+ is paused after step \d/m);
    withStore((s) => assert.equal(s.getRun(runIdOf('run-i'))!.state, 'paused'));
  });

  test('export writes a PEFT adapter per L2 policy and their base model', { timeout: 30_000 }, async () => {
    const r = await troupe('export', 'run-a', '--out', 'exported');
    expectOk(r, 'export');
    for (const policy of ['tool-lora', 'plan-lora']) {
      const dir = join(ws, 'exported', policy);
      assert.ok(existsSync(join(dir, 'adapter_config.json')) && existsSync(join(dir, 'adapter_model.safetensors')), `${policy}: ${r.stdout}`);
      // The adapter loads back through the PEFT importer and equals the run's latest checkpoint.
      const peft = await importPeftAdapter(dir, defaultModelConfig);
      const { tensors } = await readSafetensorsFile(join(ws, 'run-a', 'checkpoints', 'resume', `${policy}.safetensors`));
      assert.equal(peft.params.size, tensors.size);
      for (const [name, data] of peft.params) assert.deepEqual(data, tensors.get(name)?.data, name);
      assert.match(r.stdout, new RegExp(`${policy}/\\s+adapter_config\\.json, adapter_model\\.safetensors`));
    }
    const base = await loadCheckpoint(join(ws, 'exported', 'base.model'));
    assert.equal(base.config.hiddenSize, defaultModelConfig.hiddenSize);
    assert.ok(existsSync(join(ws, 'exported', 'base.model', 'troupe-tokenizer.json')));

    const again = await troupe('export', 'run-a', '--out', 'exported');
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^troupe: --out exported is not empty/);
  });

  test('runs lists the runs of the workspace', { timeout: 30_000 }, async () => {
    const r = await troupe('runs');
    expectOk(r, 'runs');
    const line = r.stdout.split('\n').find((l) => l.startsWith(runIdOf('run-a')));
    assert.ok(line, r.stdout);
    assert.match(line, /tiny plan-path L2\s+done\s+2\/2\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+run-a$/);
    const j = await troupe('runs', '--json');
    const runs = JSON.parse(j.stdout) as Array<{ id: string; state: string }>;
    assert.deepEqual(new Set(runs.map((x) => x.state)), new Set(['done', 'paused']));
  });
});
