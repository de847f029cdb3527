/**
 * AT-GRPO end to end over HTTP: the trainer with `rollout.backend` vllm against Troupe's own
 * OpenAI-compatible endpoint (real sockets, real engines), on the embedded default model.
 * - One server: the same seeds give the same trajectories (every branch's tokens) as in-process
 *   sampling, the servers' log-probs equal the trainer's recomputed ones (rollout/mismatch_kl ~ 0),
 *   and each step's adapter version replaces the last on the server.
 * - The same over SGLang's protocol (`/generate`, which Troupe's endpoint also serves).
 * - Two servers, one shut down while it serves a request mid-step: the run finishes with the
 *   same trajectories, nothing lost or repeated, and the failure counted in the step's metrics.
 * - A warm start over SGLang's protocol: the warm-started base goes to both servers with
 *   `/update_weights_from_disk`, and a server that lost it between steps (as one restarted would)
 *   is sent it again after a resume; the samples are the in-process run's from the same warm start.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { startEndpoint, stopEndpoint, type Endpoint } from '../../test/fixtures/tiny-endpoint.ts';
import { saveCheckpoint } from '../models/checkpoint.ts';
import { sourceWeights } from '../runs/checkpoint-weights.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { ServedModels } from '../openai/served-models.ts';
import { modelListSchema, weightVersionResponseSchema } from '../protocol/openai-api.ts';
import { openRunStore } from '../store/index.ts';
import { resolveExperiment } from './resolve-experiment.ts';
import { train } from './trainer.ts';

const KEY = 'fleet-test-key';
const config = {
  ...tinyConfig,
  warmStart: { enabled: false },
  training: { steps: 2, validateEvery: 2, validationEpisodes: 2, testEpisodes: 0, checkpointEvery: 2 },
};


/** Every training sample of a run, in a fixed order: step, trajectory, turn, branch → tokens and log-probs. */
type Dump = Array<{ key: string; tokens: number[]; logprobs: number[] }>;

let dir = '';
let inProcess: Dump = [];
let trainSteps = 0;

/**
 * Trains `name` with `backend` and dumps its samples. `between`: the run stops after step 1 and
 * resumes once `between` has run (the trainer then starts from its checkpoint, as after a crash).
 */
async function runTraining(name: string, backend: unknown, base: object = config, between?: () => Promise<void>): Promise<{ dump: Dump; metrics: Map<number, Map<string, number>>; steps: number[] }> {
  const store = openRunStore(join(dir, `${name}.db`));
  try {
    const c = { ...base, rollout: { backend } };
    const experiment = await resolveExperiment(parseExperimentConfig(c, name), join(dir, `${name}.json`));
    const run = store.createRun({ name, config: c, runDir: join(dir, name) });
    process.env.TROUPE_TEST_FLEET_KEY = KEY;
    const options = { experiment, store, runId: run.id, runDir: join(dir, name), cacheRoot: join(dir, 'cache'), log: () => {} };
    if (between) {
      await train({ ...options, resume: false, shouldStop: () => (store.lastCommittedStep(run.id) ?? 0) >= 1 });
      assert.equal(store.lastCommittedStep(run.id), 1, 'stopped after step 1');
      await between();
    }
    await train({ ...options, resume: between !== undefined });
    const dump: Dump = [];
    const metrics = new Map<number, Map<string, number>>();
    const steps = store.listSteps(run.id).map((s) => s.step);
    for (const step of steps) {
      metrics.set(step, new Map(store.stepMetrics(run.id, step).map((m) => [`${m.name}${m.policyId ? `:${m.policyId}` : ''}`, m.value])));
      for (const t of store.listTrajectories({ runId: run.id, step, phase: 'train' })) {
        const detail = store.getTrajectory(t.id)!;
        for (const turn of detail.turns) {
          for (const s of [turn, ...turn.siblings].sort((a, b) => a.branch - b.branch)) {
            dump.push({ key: `${step}/${t.envSeed}/${s.turn}/${s.agentId}/${s.branch}`, tokens: [...s.responseTokens], logprobs: [...s.logprobs] });
          }
        }
      }
    }
    return { dump, metrics, steps };
  } finally {
    store.close();
  }
}

function assertSameSamples(got: Dump, want: Dump): void {
  assert.equal(got.length, want.length, 'as many samples as in process: none lost, none repeated');
  got.forEach((g, i) => {
    const w = want[i]!;
    assert.equal(g.key, w.key);
    assert.deepEqual(g.tokens, w.tokens, `tokens of ${g.key}`);
    g.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - w.logprobs[t]!) <= 1e-5, `log-prob ${t} of ${g.key}: ${lp} vs ${w.logprobs[t]}`));
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'troupe-fleet-'));
  const r = await runTraining('in-process', { kind: 'in-process' });
  inProcess = r.dump;
  trainSteps = r.steps.length;
  assert.ok(inProcess.length > 0);
});

after(async () => {
  delete process.env.TROUPE_TEST_FLEET_KEY;
  await rm(dir, { recursive: true, force: true });
});

test('AT-GRPO over HTTP samples what in-process sampling does; server log-probs equal the trainer\'s; adapters are versioned per step', { timeout: 300_000 }, async () => {
  const e = await startEndpoint(config, KEY);
  try {
    const r = await runTraining('one-server', { kind: 'vllm', urls: [e.base], apiKeyEnv: 'TROUPE_TEST_FLEET_KEY', timeoutMs: 60_000, retries: 2 });
    assert.equal(r.steps.length, trainSteps);
    assertSameSamples(r.dump, inProcess);
    for (const step of [1, 2]) {
      const m = r.metrics.get(step)!;
      for (const p of ['tool-lora', 'plan-lora']) {
        const kl = m.get(`rollout/mismatch_kl:${p}`);
        assert.ok(kl !== undefined && Math.abs(kl) < 1e-8, `step ${step} ${p}: mismatch_kl ${kl}`);
      }
      assert.ok(m.get('engine/server0/requests')! > 0);
      assert.equal(m.get('engine/server0/failures'), 0);
    }
    // The last step's versions are served, the earlier ones unloaded and their folders removed.
    const listed = modelListSchema.parse(await (await fetch(`${e.server.url}/models`, { headers: { authorization: `Bearer ${KEY}` } })).json()).data.map((m) => m.id);
    const adapters = listed.filter((id) => id.includes('@'));
    assert.deepEqual(adapters.map((id) => id.replace(/@.*\./, '@')).sort(), ['plan-lora@v2', 'tool-lora@v2'], listed.join());
    assert.deepEqual((await readdir(join(dir, 'one-server', 'engine-adapters'))).sort(), ['plan-lora@v2', 'tool-lora@v2']);
  } finally {
    await stopEndpoint(e);
  }
});

test('the SGLang protocol (/generate with per-row sampling seeds) samples the same trajectories', { timeout: 300_000 }, async () => {
  const e = await startEndpoint(config, KEY);
  try {
    const r = await runTraining('sglang', { kind: 'sglang', urls: [e.base], apiKeyEnv: 'TROUPE_TEST_FLEET_KEY', timeoutMs: 60_000, retries: 0 });
    assert.equal(r.steps.length, trainSteps);
    assertSameSamples(r.dump, inProcess);
  } finally {
    await stopEndpoint(e);
  }
});

test('two servers, one shut down while serving a request mid-step: the run finishes with every sample once', { timeout: 300_000 }, async () => {
  const [a, b] = [await startEndpoint(config, KEY), await startEndpoint(config, KEY)];
  // Server A goes away the third time it starts generating (step 1, after the adapters loaded):
  // every connection to it is destroyed with its request unanswered, and later ones are refused.
  let uses = 0;
  const use = a.models.use.bind(a.models);
  a.models.use = async (name, fn) => {
    if (++uses === 3) await a.server.close();
    return use(name, fn);
  };
  try {
    const r = await runTraining('killed', { kind: 'vllm', urls: [a.base, b.base], apiKeyEnv: 'TROUPE_TEST_FLEET_KEY', timeoutMs: 60_000, retries: 2 });
    assert.equal(r.steps.length, trainSteps);
    assert.ok(uses >= 3, 'server A was shut down mid-step');
    assertSameSamples(r.dump, inProcess);
    const failures = [1, 2].reduce((n, s) => n + (r.metrics.get(s)!.get('engine/server0/failures') ?? 0), 0);
    assert.ok(failures >= 1, `server A's failure is counted (${failures})`);
    assert.ok(r.metrics.get(1)!.get('engine/server1/requests')! > 0);
  } finally {
    await stopEndpoint(b);
    await a.models.close();
    await a.engine.close();
  }
});

test('a warm-started base is sent over SGLang\'s /update_weights_from_disk, and again to a server that lost it: the samples are the in-process run\'s', { timeout: 300_000 }, async () => {
  // Three steps: the run stops after step 1 and resumes; step 3 shows the versions are asked every step.
  const warm = { ...config, warmStart: tinyConfig.warmStart, training: { ...config.training, steps: 3, validateEvery: 3, checkpointEvery: 3 } };
  const want = await runTraining('warm-in-process', { kind: 'in-process' }, warm);
  const [a, b] = [await startEndpoint(config, KEY), await startEndpoint(config, KEY)];
  const version = async (e: Endpoint) => weightVersionResponseSchema.parse(await (await fetch(`${e.base}/get_weight_version`, { headers: { authorization: `Bearer ${KEY}` } })).json()).weight_version;
  // Server B back on the base it was launched with, as if restarted between steps 1 and 2.
  const launchDir = join(dir, 'launch-base');
  const tiny = await resolveExperiment(parseExperimentConfig(config, 'tiny'), 'tiny');
  await saveCheckpoint(launchDir, tiny.models.get('base')!.config, await sourceWeights(tiny.models.get('base')!));
  let runVersion: string | null = null;
  let reads = 0;
  let updatesOfA = 0;
  try {
    const r = await runTraining('warm-sglang', { kind: 'sglang', urls: [a.base, b.base], apiKeyEnv: 'TROUPE_TEST_FLEET_KEY', timeoutMs: 60_000, retries: 1 }, warm, async () => {
      runVersion = await version(b);
      assert.match(String(runVersion), /\.base\.[0-9a-f]{16}$/, 'step 1 ran on the run\'s base');
      assert.equal(await version(a), runVersion);
      await b.models.updateBaseWeights(launchDir, null, 'default');
      // Server A reports another version once, at step 3's check: it must be sent the base again then.
      const real = Object.getOwnPropertyDescriptor(ServedModels.prototype, 'weightVersion')!.get!;
      Object.defineProperty(a.models, 'weightVersion', { get: () => (++reads === 2 ? 'default' : (real.call(a.models) as string)) });
      const update = a.models.updateBaseWeights.bind(a.models);
      a.models.updateBaseWeights = (...args) => (updatesOfA++, update(...args));
    });
    assert.equal(r.steps.length, want.steps.length);
    assertSameSamples(r.dump, want.dump);
    assert.equal(await version(b), runVersion, 'server B was sent the base again');
    assert.ok(r.metrics.get(2)!.get('engine/server1/requests')! > 0, 'server B sampled in step 2');
    assert.equal(reads, 2, 'server A was asked its version at steps 2 and 3 of the resumed run');
    assert.equal(updatesOfA, 1, 'and sent the base once, at step 3');
  } finally {
    await stopEndpoint(a);
    await stopEndpoint(b);
  }
});
