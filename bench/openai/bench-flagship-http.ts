/**
 * `npm run bench:openai-flagship` — the flagship run (configs/plan-path/L2-lora-7x7.json) with
 * training rollouts sampled over HTTP by `troupe serve-openai` (rollout.backend vllm, the
 * endpoint a child process with its own engine, as a deployment runs it) against the same run in
 * process, on paired seeds. Issue 31's target: wall time at most 1.15x the in-process run, and
 * the same test success (against Troupe's own endpoint the samples are the same, so the test
 * success is too; `sameSamples` says whether they were).
 *
 * By default both runs skip the warm start (`warmStart.enabled` false) and the HTTP run speaks
 * vLLM's protocol. With FLAGSHIP_WARM_START=1 both keep the flagship's warm start and the HTTP run
 * speaks SGLang's, whose `/update_weights_from_disk` takes the warm-started base to the endpoint;
 * the warm start is cached, so only the arm that runs it first pays for it, and the ratio is then
 * of the RL phase (from step 0's commit to the end) in both arms. Everything else is the flagship's:
 * 7x7 Plan-Path, two rank-16 adapters, 16 tasks x 4 branches per step, 24 new tokens. The endpoint
 * is started before its run and not timed; validation and the test play in process in both runs.
 *
 * Env: FLAGSHIP_SEEDS (1,2,3), FLAGSHIP_STEPS (20), FLAGSHIP_ENVS (the config's 16),
 * FLAGSHIP_VALIDATION (32 episodes), FLAGSHIP_TEST (256 episodes), FLAGSHIP_WARM_START (0). The smallest form, a smoke of
 * the harness: FLAGSHIP_SEEDS=1 FLAGSHIP_STEPS=1 FLAGSHIP_ENVS=2 FLAGSHIP_VALIDATION=2 FLAGSHIP_TEST=4.
 * Writes bench/results/openai-flagship.json (medians and ratios, every run's time), or
 * openai-flagship-warm.json with the warm start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { median } from '../stats.ts';
import { trainRun } from './train-run.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SEEDS = (process.env['FLAGSHIP_SEEDS'] ?? '1,2,3').split(',').map(Number);
const STEPS = Number(process.env['FLAGSHIP_STEPS'] ?? 20);
const ENVS = process.env['FLAGSHIP_ENVS'] === undefined ? null : Number(process.env['FLAGSHIP_ENVS']);
const VALIDATION = Number(process.env['FLAGSHIP_VALIDATION'] ?? 32);
const TEST = Number(process.env['FLAGSHIP_TEST'] ?? 256);
const WARM_START = process.env['FLAGSHIP_WARM_START'] === '1';
/** What an arm's time is compared by: the whole run, or with the (cached) warm start the RL phase alone. */
const timed = (r: { ms: number; rlMs: number }): number => (WARM_START ? r.rlMs : r.ms);
const TARGET = 1.15;
const KEY_ENV = 'TROUPE_BENCH_KEY';
const KEY = 'bench-flagship-key';

/** `troupe serve-openai config` in a child process; resolves with its URL once it listens. */
async function startServer(configFile: string): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(process.execPath, [join(root, 'server/cli/troupe.mjs'), 'serve-openai', configFile, '--port', '0', '--api-key-env', KEY_ENV], { env: { ...process.env, [KEY_ENV]: KEY }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout! });
  const base = await new Promise<string>((ok, fail) => {
    child.once('exit', (code) => fail(new Error(`troupe serve-openai exited with ${code} before listening:\n${stderr}`)));
    lines.on('line', (line) => {
      const m = /listening on (http:\S+)\/v1$/.exec(line);
      if (m) ok(m[1]!);
    });
  });
  child.removeAllListeners('exit');
  return { child, base };
}

async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  child.kill('SIGTERM');
  await exited;
}

async function main(): Promise<void> {
  const flagship = JSON.parse(await readFile(join(root, 'configs/plan-path/L2-lora-7x7.json'), 'utf8')) as Record<string, any>;
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-flagship-'));
  const loadStart = loadavg()[0];
  process.env[KEY_ENV] = KEY;
  const pairs: Array<{ seed: number; order: string; inProcessMs: number; httpMs: number; inProcessRlMs: number; httpRlMs: number; ratio: number; sameSamples: boolean; testSuccessInProcess: number | null; testSuccessHttp: number | null; failures: number }> = [];
  try {
    for (const [i, seed] of SEEDS.entries()) {
      const { $schema: _, ...rest } = flagship;
      const config = {
        ...rest,
        seed,
        warmStart: { ...flagship['warmStart'], enabled: WARM_START },
        algorithm: { ...flagship['algorithm'], ...(ENVS === null ? {} : { envsPerStep: ENVS }) },
        training: { ...flagship['training'], steps: STEPS, validateEvery: STEPS, validationEpisodes: VALIDATION, testEpisodes: TEST, checkpointEvery: STEPS },
      };
      const configFile = join(dir, `flagship-seed${seed}.json`);
      await writeFile(configFile, JSON.stringify(config));
      const server = await startServer(configFile);
      try {
        // Alternate which arm runs first, so drift in the machine's load falls on both.
        const httpFirst = i % 2 === 1;
        const runHttp = () => trainRun(dir, `http-${seed}`, config, { kind: WARM_START ? 'sglang' : 'vllm', urls: [server.base], apiKeyEnv: KEY_ENV, timeoutMs: 600_000, retries: 0 });
        const runLocal = () => trainRun(dir, `in-process-${seed}`, config, { kind: 'in-process' });
        const first = await (httpFirst ? runHttp() : runLocal());
        const second = await (httpFirst ? runLocal() : runHttp());
        const [local, http] = httpFirst ? [second, first] : [first, second];
        const pair = { seed, order: httpFirst ? 'http first' : 'in-process first', inProcessMs: local.ms, httpMs: http.ms, inProcessRlMs: local.rlMs, httpRlMs: http.rlMs, ratio: timed(http) / timed(local), sameSamples: local.dump.join('\n') === http.dump.join('\n'), testSuccessInProcess: local.testSuccess, testSuccessHttp: http.testSuccess, failures: http.failures };
        pairs.push(pair);
        console.log(`seed ${seed} (${pair.order}): in process ${(local.ms / 1000).toFixed(1)} s (RL ${(local.rlMs / 1000).toFixed(1)} s), over HTTP ${(http.ms / 1000).toFixed(1)} s (RL ${(http.rlMs / 1000).toFixed(1)} s): x${pair.ratio.toFixed(3)}${WARM_START ? ' of the RL phase' : ''}; same samples ${pair.sameSamples}; test success ${local.testSuccess} / ${http.testSuccess}`);
      } finally {
        await stopServer(server.child);
      }
    }
    const ratio = median(pairs.map((p) => p.ratio));
    const out = {
      what: WARM_START
        ? 'flagship (configs/plan-path/L2-lora-7x7.json, its warm start) with rollout.backend sglang against troupe serve-openai in a child process (the warm-started base sent by /update_weights_from_disk) vs in process; paired seeds; ratio of the RL phase (from step 0 to the end)'
        : 'flagship (configs/plan-path/L2-lora-7x7.json, warm start off) with rollout.backend vllm against troupe serve-openai in a child process vs in process; paired seeds',
      loadAvg1mAtStart: loadStart,
      machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', loadAvg1mAtEnd: loadavg()[0] },
      form: { seeds: SEEDS, steps: STEPS, envsPerStep: ENVS ?? flagship['algorithm'].envsPerStep, validationEpisodes: VALIDATION, testEpisodes: TEST },
      target: TARGET,
      medianRatio: ratio,
      ratioOfMedians: median(pairs.map((p) => timed({ ms: p.httpMs, rlMs: p.httpRlMs }))) / median(pairs.map((p) => timed({ ms: p.inProcessMs, rlMs: p.inProcessRlMs }))),
      withinTarget: ratio <= TARGET,
      allSameSamples: pairs.every((p) => p.sameSamples),
      pairs,
    };
    console.log(`median ratio x${ratio.toFixed(3)} (target <= ${TARGET}): ${out.withinTarget ? 'met' : 'not met'}; same samples in every pair: ${out.allSameSamples}`);
    await mkdir(join(root, 'bench', 'results'), { recursive: true });
    const file = WARM_START ? 'openai-flagship-warm.json' : 'openai-flagship.json';
    await writeFile(join(root, 'bench', 'results', file), `${JSON.stringify(out, null, 2)}\n`);
    console.log(`wrote bench/results/${file}`);
  } finally {
    delete process.env[KEY_ENV];
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
