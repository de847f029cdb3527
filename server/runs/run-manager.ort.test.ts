/**
 * The run manager with real workers: real ONNX Runtime, a real SQLite store in a temporary
 * workspace, a tiny Plan-Path team (a 1-layer model without warm start, so a run of a few steps
 * takes about a second). Nothing is mocked; every wait is on the manager's own events.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, describe, test } from 'node:test';
import { ConfigError } from '../protocol/config-errors.ts';
import type { RunState } from '../protocol/trajectory.ts';
import { openRunStore } from '../store/index.ts';
import { RunManager, type RunLog, type RunManagerOptions, type RunProgress, type RunStateChange } from './run-manager.ts';

const small = { vocabSize: 112, hiddenSize: 32, numLayers: 1, numHeads: 2, intermediateSize: 64, maxSequenceLength: 160 };

function tinyConfig(steps: number, name = 'tiny run') {
  return {
    name,
    seed: 1,
    env: { name: 'plan-path', options: { size: 3, maxTurns: 2 } },
    specialization: 'L2',
    models: { base: { config: small } },
    policies: { tool: { model: 'base', lora: { rank: 4 } }, plan: { model: 'base', lora: { rank: 4 } } },
    router: { tool: 'tool', plan: 'plan' },
    algorithm: { name: 'at-grpo', branches: 2, envsPerStep: 2, maxNewTokens: 8 },
    warmStart: { enabled: false },
    training: { steps, validateEvery: steps, validationEpisodes: 2, checkpointEvery: steps },
    engine: { executionProvider: 'cpu', threads: 1 },
  };
}

const workspaces: string[] = [];
after(() => {
  for (const ws of workspaces) rmSync(ws, { recursive: true, force: true });
});

function workspace(): string {
  const ws = mkdtempSync(join(tmpdir(), 'troupe-runs-'));
  workspaces.push(ws);
  return ws;
}

type Event = { kind: 'state'; e: RunStateChange } | { kind: 'progress'; e: RunProgress } | { kind: 'log'; e: RunLog };

/** Every event of a manager, in order, with waits on them. */
class Recorder {
  readonly events: Event[] = [];
  private readonly waiters: Array<{ match: (e: Event) => boolean; resolve: (e: Event) => void }> = [];

  constructor(m: RunManager) {
    m.onDidChangeState((e) => this.push({ kind: 'state', e }));
    m.onDidProgress((e) => this.push({ kind: 'progress', e }));
    m.onDidLog((e) => this.push({ kind: 'log', e }));
  }

  private push(ev: Event): void {
    this.events.push(ev);
    for (const w of [...this.waiters]) {
      if (!w.match(ev)) continue;
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve(ev);
    }
  }

  /** The `nth` event matching (already seen, or a later one). */
  private next(match: (e: Event) => boolean, nth = 1): Promise<Event> {
    const seen = this.events.filter(match);
    if (seen.length >= nth) return Promise.resolve(seen[nth - 1]!);
    let skip = nth - seen.length - 1;
    return new Promise((resolve) => this.waiters.push({ match: (e) => match(e) && skip-- === 0, resolve }));
  }

  /** The `nth` change of `runId` to `state` (already seen, or a later one). */
  async state(runId: string, state: RunState, nth = 1): Promise<RunStateChange> {
    const ev = await this.next((x) => x.kind === 'state' && x.e.runId === runId && x.e.state === state, nth);
    return (ev as Extract<Event, { kind: 'state' }>).e;
  }

  /** The first progress of `runId` at `step` or later. */
  async progress(runId: string, step: number): Promise<RunProgress> {
    const ev = await this.next((x) => x.kind === 'progress' && x.e.runId === runId && x.e.step >= step);
    return (ev as Extract<Event, { kind: 'progress' }>).e;
  }

  /** The run's events as `state:running`, `progress:2`, … */
  trace(runId: string): string[] {
    return this.events.filter((x) => x.kind !== 'log' && x.e.runId === runId).map((x) => (x.kind === 'state' ? `state:${x.e.state}` : `progress:${(x.e as RunProgress).step}`));
  }

  /** The state changes of every run (or of one), in order. */
  states(runId?: string): RunStateChange[] {
    return this.events.filter((x): x is Extract<Event, { kind: 'state' }> => x.kind === 'state' && (runId === undefined || x.e.runId === runId)).map((x) => x.e);
  }

  progressSteps(runId: string): number[] {
    return this.events.filter((x): x is Extract<Event, { kind: 'progress' }> => x.kind === 'progress' && x.e.runId === runId).map((x) => x.e.step);
  }
}

async function withManager<T>(o: RunManagerOptions, body: (m: RunManager, r: Recorder) => Promise<T>): Promise<T> {
  const m = await RunManager.open({ log: () => {}, ...o });
  const r = new Recorder(m);
  try {
    return await body(m, r);
  } finally {
    await m.close();
  }
}

/** Runs `body`, expecting it to throw an error with `code` whose message matches `re`. */
async function rejectsWith(body: () => unknown, code: string, re: RegExp): Promise<void> {
  await assert.rejects(async () => body(), (e: unknown) => {
    assert.ok(e instanceof Error);
    assert.equal((e as Error & { code?: unknown }).code, code, e.message);
    assert.match(e.message, re);
    return true;
  });
}

const lockPath = (runDir: string) => join(runDir, 'run.lock');
const range = (n: number) => Array.from({ length: n + 1 }, (_, i) => i);

describe('RunManager', () => {
  test('start: state running, one progress per committed step with its metrics, then done; the event loop stays free', { timeout: 120_000 }, async () => {
    const ws = workspace();
    await withManager({ workspace: ws }, async (m, r) => {
      const config = tinyConfig(3);
      const loop = monitorEventLoopDelay({ resolution: 10 });
      const run = await m.start({ config });
      assert.equal(run.state, 'running');
      assert.ok(m.isActive(run.id));
      // The server process holds the run's lock while its worker trains.
      assert.equal((JSON.parse(readFileSync(lockPath(run.runDir), 'utf8')) as { pid: number }).pid, process.pid);
      await r.progress(run.id, 0);
      loop.enable();
      const done = await r.state(run.id, 'done');
      loop.disable();

      assert.deepEqual(r.trace(run.id), ['state:running', 'progress:0', 'progress:1', 'progress:2', 'progress:3', 'state:done']);
      assert.equal(r.states(run.id)[0]!.previous, null);
      assert.equal(done.previous, 'running');
      assert.equal(done.run.lastCommittedStep, 3);
      const progress = r.events.filter((x): x is Extract<Event, { kind: 'progress' }> => x.kind === 'progress').map((x) => x.e);
      assert.ok(progress.every((p) => p.steps === 3 && p.stepMs > 0));
      // Step 0 is the initial validation; RL steps carry rollout, update and timing metrics per agent/policy.
      assert.ok(progress[0]!.metrics.some((x) => x.name === 'val/success'));
      assert.equal(progress[0]!.etaMs, null);
      assert.ok(progress[1]!.metrics.some((x) => x.name === 'time/total_ms'));
      assert.ok(progress[1]!.metrics.some((x) => x.agentId === 'plan') && progress[1]!.metrics.some((x) => x.policyId === 'tool'));
      assert.ok(progress[1]!.etaMs! > 0);
      assert.equal(progress[3]!.etaMs, 0);
      assert.ok(progress[3]!.metrics.some((x) => x.name === 'val/success'), 'the last step validates');
      // What the events carried is what the store holds.
      assert.deepEqual(
        progress[2]!.metrics.map((x) => `${x.name}|${x.agentId ?? ''}|${x.policyId ?? ''}`).sort(),
        m.store.stepMetrics(run.id, 2).map((x) => `${x.name}|${x.agentId ?? ''}|${x.policyId ?? ''}`).sort(),
      );
      assert.ok(r.events.some((x) => x.kind === 'log' && x.e.runId === run.id && /step 0/.test(x.e.line)), 'trainer log lines are relayed');

      assert.deepEqual(m.store.listSteps(run.id).map((s) => s.step), range(3));
      assert.equal(m.isActive(run.id), false);
      assert.ok(!existsSync(lockPath(run.runDir)), 'the lock is released');
      // An inline config is kept in the run folder as config.json, and as given in the store.
      assert.deepEqual(JSON.parse(readFileSync(join(run.runDir, 'config.json'), 'utf8')), config);
      assert.deepEqual(m.store.getRun(run.id)!.config, config);
      assert.equal(m.list()[0]!.state, 'done');
      const p99 = loop.percentile(99) / 1e6;
      assert.ok(p99 < 50, `event-loop delay p99 ${p99.toFixed(1)} ms while the run trained`);
    });
  });

  test('pause stops at a step boundary; resume continues and every step is committed exactly once', { timeout: 120_000 }, async () => {
    const ws = workspace();
    writeFileSync(join(ws, 'tiny.json'), JSON.stringify(tinyConfig(6)));
    await withManager({ workspace: ws }, async (m, r) => {
      const run = await m.start({ configPath: 'tiny.json' });
      await r.progress(run.id, 1);
      assert.equal(m.pause(run.id).state, 'running', 'running until the step boundary');
      assert.equal(m.pause(run.id).state, 'running', 'a pending pause asked again is a no-op');
      const paused = await r.state(run.id, 'paused');
      const last = paused.run.lastCommittedStep!;
      assert.ok(last >= 1 && last < 6, `paused after step ${last}`);
      assert.equal(m.isActive(run.id), false);
      assert.ok(!existsSync(lockPath(run.runDir)));
      const state = JSON.parse(readFileSync(join(run.runDir, 'checkpoints', 'resume', 'state.json'), 'utf8')) as { step: number };
      assert.equal(state.step, last, 'the resume checkpoint is the last committed step');
      assert.equal(readFileSync(join(run.runDir, 'config.json'), 'utf8'), readFileSync(join(ws, 'tiny.json'), 'utf8'));
      await rejectsWith(() => m.pause(run.id), 'invalid-state', /is paused; only a running or queued run can be paused/);

      // Two resumes at once: one wins, the other is refused.
      const [first, second] = await Promise.allSettled([m.resume(run.id), m.resume(run.id)]);
      assert.equal(first.status === 'fulfilled' && first.value.state, 'running');
      assert.equal(second.status === 'rejected' && (second.reason as Error & { code?: string }).code, 'invalid-state');
      await r.state(run.id, 'done');
      assert.deepEqual(m.store.listSteps(run.id).map((s) => s.step), range(6));
      // Across both workers each step was trained and reported once: the resume started after `last`.
      assert.deepEqual(r.progressSteps(run.id), range(6));
      const trace = r.trace(run.id);
      assert.deepEqual(trace.filter((t) => t.startsWith('state:')), ['state:running', 'state:paused', 'state:running', 'state:done']);
      assert.equal(trace.indexOf('state:paused'), trace.indexOf(`progress:${last}`) + 1, 'paused right after the last step it committed');
    });
  });

  test('stop: stopping at once, done at the step boundary; a done run resumes only to more steps', { timeout: 120_000 }, async () => {
    const ws = workspace();
    await withManager({ workspace: ws }, async (m, r) => {
      const run = await m.start({ config: tinyConfig(6), steps: 8 });
      await r.progress(run.id, 1);
      assert.equal(m.stop(run.id).state, 'stopping');
      assert.equal(m.stop(run.id).state, 'stopping', 'stopping a stopping run is a no-op');
      await rejectsWith(() => m.pause(run.id), 'invalid-state', /is stopping/);
      const done = await r.state(run.id, 'done');
      assert.equal(done.previous, 'stopping');
      const last = done.run.lastCommittedStep!;
      assert.ok(last >= 1 && last < 8, `stopped after step ${last}`);
      assert.deepEqual(r.trace(run.id).filter((t) => t.startsWith('state:')), ['state:running', 'state:stopping', 'state:done']);

      await rejectsWith(() => m.stop(run.id), 'invalid-state', /is done/);
      await rejectsWith(() => m.resume(run.id), 'invalid-state', new RegExp(`is done \\(${last} steps\\); to train it further pass steps N with N > ${last}`));
      await rejectsWith(() => m.resume(run.id, { steps: last }), 'invalid-state', /is done/);
      assert.equal((await m.resume(run.id, { steps: last + 1 })).state, 'running');
      const again = await r.state(run.id, 'done', 2);
      assert.equal(again.previous, 'running');
      assert.equal(again.run.lastCommittedStep, last + 1);
      assert.deepEqual(r.progressSteps(run.id), range(last + 1));
      assert.deepEqual(m.store.listSteps(run.id).map((s) => s.step), range(last + 1));
    });
  });

  test('with one slot a second run queues and starts when the first ends; queued runs pause and stop at once', { timeout: 120_000 }, async () => {
    const ws = workspace();
    await withManager({ workspace: ws, maxConcurrentRuns: 1 }, async (m, r) => {
      const a = await m.start({ config: tinyConfig(2, 'a') });
      const b = await m.start({ config: tinyConfig(2, 'b') });
      const c = await m.start({ config: tinyConfig(2, 'c') });
      assert.deepEqual([a.state, b.state, c.state], ['running', 'queued', 'queued']);
      assert.deepEqual([m.isActive(a.id), m.isActive(b.id), m.isActive(c.id)], [true, false, false]);
      // The queued run holds its lock too: no terminal can start it behind the server's back.
      assert.ok(existsSync(lockPath(b.runDir)));
      const pausedC = m.pause(c.id);
      assert.equal(pausedC.state, 'paused');
      assert.ok(!existsSync(lockPath(c.runDir)));

      await r.state(b.id, 'done');
      const order = r.states().filter((e) => e.previous !== null).map((e) => `${e.runId === a.id ? 'a' : e.runId === b.id ? 'b' : 'c'}:${e.state}`);
      assert.deepEqual(order, ['c:paused', 'a:done', 'b:running', 'b:done']);
      assert.deepEqual(r.trace(b.id), ['state:queued', 'state:running', 'progress:0', 'progress:1', 'progress:2', 'state:done']);
      assert.equal(m.store.getRun(c.id)!.state, 'paused', 'a paused run does not start by itself');
      assert.equal(m.stop(c.id).state, 'done', 'a paused run stops at once');
      assert.equal(m.store.getRun(c.id)!.lastCommittedStep, null);
    });
  });

  test('a bad config is a ConfigError naming each problem, and leaves no run behind', { timeout: 60_000 }, async () => {
    const ws = workspace();
    await withManager({ workspace: ws }, async (m) => {
      const good = tinyConfig(2);
      const bad = { ...good, algorithm: { ...good.algorithm, branches: 0 }, training: { ...good.training, stpes: 3 } };
      await assert.rejects(m.start({ config: bad }), (e: unknown) => {
        assert.ok(e instanceof ConfigError, String(e));
        assert.deepEqual(e.issues.map((i) => i.path.join('.')).sort(), ['algorithm.branches', 'training.stpes']);
        assert.match(e.message, /inline config: training\.stpes: unknown key "stpes" \(did you mean "steps"\?\)/);
        return true;
      });
      // Checks that need the server (environment options) are ConfigErrors too.
      await assert.rejects(m.start({ config: { ...good, env: { name: 'plan-path', options: { size: 'big' } } } }), (e: unknown) => e instanceof ConfigError && e.issues[0]!.path.join('.') === 'env.options.size');
      await assert.rejects(m.start({ configPath: 'missing.json' }), (e: unknown) => e instanceof ConfigError && /missing\.json/.test(e.message));
      writeFileSync(join(ws, 'broken.json'), '{ "name": ');
      await assert.rejects(m.start({ configPath: join(ws, 'broken.json') }), (e: unknown) => e instanceof ConfigError && /not valid JSON/.test(e.message));
      await assert.rejects(m.start({ configPath: 'x.json', config: good }), (e: unknown) => e instanceof ConfigError && /exactly one of/.test(e.message));
      await assert.rejects(m.start({}), ConfigError);
      assert.deepEqual(m.list(), []);
    });
  });

  test('transitions that are not allowed throw with a code', { timeout: 60_000 }, async () => {
    const ws = workspace();
    await withManager({ workspace: ws }, async (m, r) => {
      for (const call of [() => m.pause('nope'), () => m.stop('nope'), () => m.resume('nope')]) await rejectsWith(call, 'unknown-run', /no run with id "nope"/);
      const run = await m.start({ config: tinyConfig(3) });
      await rejectsWith(() => m.resume(run.id), 'invalid-state', /is running in this server/);
      await r.progress(run.id, 1);
      await rejectsWith(() => m.resume(run.id, { steps: 0 }), 'invalid-state', /is running/);
      await r.state(run.id, 'done');
      await rejectsWith(() => m.pause(run.id), 'invalid-state', /is done; only a running or queued run can be paused/);
      await rejectsWith(() => m.resume(run.id, { steps: 2 }), 'invalid-state', /is done/);
    });
  });

  test('a run left running by a dead process is reported interrupted at open and resumes to done; one a live process holds is left alone', { timeout: 120_000 }, async () => {
    const ws = workspace();
    const { id, runDir } = await withManager({ workspace: ws }, async (m, r) => {
      const run = await m.start({ config: tinyConfig(4) });
      await r.progress(run.id, 1);
      m.pause(run.id);
      await r.state(run.id, 'paused');
      return { id: run.id, runDir: run.runDir };
    });
    // What a killed trainer leaves: state 'running' and a lock naming a process that is gone.
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    const leaveRunning = (pid: number) => {
      const store = openRunStore(join(ws, '.troupe', 'troupe.db'));
      store.setRunState(id, 'running');
      store.close();
      writeFileSync(lockPath(runDir), `${JSON.stringify({ pid, host: hostname(), startedAt: new Date().toISOString() })}\n`);
    };

    // A live process (this test's parent) holding the lock is a terminal training the run: not interrupted, and refused.
    leaveRunning(process.ppid);
    await withManager({ workspace: ws }, async (m) => {
      assert.equal(m.store.getRun(id)!.state, 'running');
      await rejectsWith(() => m.resume(id), 'invalid-state', new RegExp(`is being trained by process ${process.ppid}`));
      await rejectsWith(() => m.pause(id), 'invalid-state', new RegExp(`is being trained by process ${process.ppid} on .*, not by this server`));
    });

    leaveRunning(dead);
    // And a run a server had queued when it died.
    const store = openRunStore(join(ws, '.troupe', 'troupe.db'));
    const queued = store.createRun({ name: 'queued', config: tinyConfig(1), state: 'queued' }).id;
    store.close();
    await withManager({ workspace: ws }, async (m, r) => {
      const run = m.store.getRun(id)!;
      assert.equal(run.state, 'failed');
      assert.match(run.error ?? '', /^interrupted: the process training it ended after step \d; resume it to continue from its last checkpoint/);
      assert.match(m.store.getRun(queued)!.error ?? '', /^interrupted: it was queued in a server that ended; resume it/);
      await m.resume(id);
      await r.state(id, 'done');
      assert.deepEqual(m.store.listSteps(id).map((s) => s.step), range(4));
      assert.equal(m.store.getRun(id)!.error, undefined);
    });
  });

  test('a crashed worker fails its run, and the manager carries on', { timeout: 120_000 }, async () => {
    const ws = workspace();
    // A heap far too small for the trainer: the worker dies of out-of-memory.
    await withManager({ workspace: ws, workerResourceLimits: { maxOldGenerationSizeMb: 12, maxYoungGenerationSizeMb: 4 } }, async (m, r) => {
      const run = await m.start({ config: tinyConfig(2) });
      const failed = await r.state(run.id, 'failed');
      assert.match(failed.run.error ?? '', /^out of memory: the run worker's JavaScript heap reached its limit of 12 MB \(.*\); the server keeps serving/);
      assert.equal(m.isActive(run.id), false);
      assert.ok(!existsSync(lockPath(run.runDir)));
      assert.equal(m.stop(run.id).state, 'done', 'a failed run can be stopped (closed) at once');
    });
    // The trainer throwing inside the worker (a corrupt resume checkpoint): the run fails with its error.
    await withManager({ workspace: ws }, async (m, r) => {
      const run = await m.start({ config: tinyConfig(4) });
      await r.progress(run.id, 1);
      m.pause(run.id);
      await r.state(run.id, 'paused');
      writeFileSync(join(run.runDir, 'checkpoints', 'resume', 'tool.safetensors'), 'not a safetensors file');
      await m.resume(run.id);
      const failed = await r.state(run.id, 'failed');
      assert.match(failed.run.error ?? '', /tool\.safetensors/);
      const next = await m.start({ config: tinyConfig(1) });
      await r.state(next.id, 'done');
    });
  });

  test('close pauses live runs at their step boundary; past its timeout it abandons the step in flight; both stay resumable', { timeout: 120_000 }, async () => {
    const ws = workspace();
    let id = '';
    await withManager({ workspace: ws, maxConcurrentRuns: 1 }, async (m, r) => {
      id = (await m.start({ config: tinyConfig(30) })).id;
      const queued = await m.start({ config: tinyConfig(1, 'queued') });
      await r.progress(id, 1);
      await m.close();
      assert.equal(r.states(id).at(-1)?.state, 'paused');
      assert.equal(r.states(queued.id).at(-1)?.state, 'paused');
      assert.equal(m.isActive(id), false);
    });
    await withManager({ workspace: ws, closeTimeoutMs: 0 }, async (m, r) => {
      assert.equal(m.store.getRun(id)!.state, 'paused');
      await m.resume(id);
      const p = await r.progress(id, (m.store.getRun(id)!.lastCommittedStep ?? 0) + 1);
      await m.close();
      const last = r.states(id).at(-1)!;
      assert.equal(last.state, 'paused');
      assert.ok(last.run.lastCommittedStep! >= p.step && last.run.lastCommittedStep! < 30);
    });
    await withManager({ workspace: ws }, async (m, r) => {
      await m.resume(id, { steps: m.store.getRun(id)!.lastCommittedStep! + 2 });
      const done = await r.state(id, 'done');
      assert.deepEqual(m.store.listSteps(id).map((s) => s.step), range(done.run.lastCommittedStep!));
    });
  });
});
