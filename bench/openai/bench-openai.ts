/**
 * `npm run bench:openai` — Troupe's OpenAI-compatible endpoint and the HTTP rollout backend
 * against in-process generation, measured in the same run on the embedded default model (CPU).
 *
 * 1. Endpoint throughput: 32 clients, each one `/v1/completions` request (a 40-token prompt,
 *    n = 4, 16 new tokens, EOS ignored so every row makes 16), all at once, against two in-process
 *    baselines: the same 128 rows as one `Policy.generate` batch (how the trainer samples), and as
 *    32 sequential calls of 4 rows (what the server does with 32 separate requests). Plus the
 *    rollout backend's way: one request carrying all 32 prompts. Generated tokens per second,
 *    median of ENDPOINT_REPEATS.
 * 2. Training wall time: the tiny AT-GRPO config (no warm start) for RUN_STEPS steps, in process
 *    and with `rollout.backend` vllm against an endpoint in this process (its own engine worker),
 *    RUN_REPEATS times each, alternating; median wall time and the ratio.
 * 3. Fault runs: FAULT_RUNS runs on two endpoints, one shut down at a random request; every run
 *    must finish with the in-process run's samples (none lost or repeated).
 *
 * Writes bench/results/openai-endpoint.json. Options (env): ENDPOINT_REPEATS (5), RUN_STEPS (3),
 * RUN_REPEATS (2), FAULT_RUNS (5).
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { startEndpoint, stopEndpoint } from '../../test/fixtures/tiny-endpoint.ts';
import { completionResponseSchema } from '../../server/protocol/openai-api.ts';
import { median } from '../stats.ts';
import { trainRun } from './train-run.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const ENDPOINT_REPEATS = Number(process.env['ENDPOINT_REPEATS'] ?? 5);
const RUN_STEPS = Number(process.env['RUN_STEPS'] ?? 3);
const RUN_REPEATS = Number(process.env['RUN_REPEATS'] ?? 2);
const FAULT_RUNS = Number(process.env['FAULT_RUNS'] ?? 5);
const CLIENTS = 32;
const N = 4;
const NEW_TOKENS = 16;
const KEY = 'bench-key';

const config = { ...tinyConfig, warmStart: { enabled: false }, training: { steps: RUN_STEPS, validateEvery: RUN_STEPS, validationEpisodes: 2, testEpisodes: 0, checkpointEvery: RUN_STEPS } };


const post = async (url: string, body: unknown) => {
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return completionResponseSchema.parse(await res.json());
};

async function endpointThroughput() {
  const e = await startEndpoint(config, KEY);
  try {
    const tok = e.models.tokenizer;
    const prompts = Array.from({ length: CLIENTS }, (_, i) => tok.encodePrompt([{ role: 'user', text: `client ${i}: move from (0,0) to (2,2) avoiding walls` }]).slice(0, 40));
    const policy = await e.models.use('tool-lora', async (p) => p);
    const options = (seed: number) => ({ maxNewTokens: NEW_TOKENS, sampling: { temperature: 1, topP: 1, topK: 0 }, seed, stopTokens: [] as number[], padToken: tok.padTokenId, rollout: true });
    const rows = prompts.flatMap((p) => Array.from({ length: N }, () => p));
    const tokens = CLIENTS * N * NEW_TOKENS;
    const body = (i: number, prompt: readonly Int32Array[]) => ({ model: 'tool-lora', prompt: prompt.map((p) => Array.from(p)), n: N, max_tokens: NEW_TOKENS, seed: i, ignore_eos: true, logprobs: 0, return_token_ids: true });
    const variants: Record<string, () => Promise<void>> = {
      'in-process, one batch of 128 rows': async () => void (await policy.generate(rows, options(1))),
      'in-process, 32 sequential calls of 4 rows': async () => {
        for (let i = 0; i < CLIENTS; i++) await policy.generate(rows.slice(i * N, (i + 1) * N), options(i));
      },
      'HTTP, 32 concurrent clients': async () => {
        const answers = await Promise.all(prompts.map((p, i) => post(`${e.server.url}/completions`, body(i, [p]))));
        if (answers.some((a) => a.choices.length !== N || a.choices.some((c) => c.token_ids!.length !== NEW_TOKENS))) throw new Error('wrong answer shape');
      },
      'HTTP, one request with all 32 prompts': async () => void (await post(`${e.server.url}/completions`, body(1, prompts))),
    };
    // Warm up every path once (session creation, first connection).
    for (const run of Object.values(variants)) await run();
    const times: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
    for (let r = 0; r < ENDPOINT_REPEATS; r++) {
      for (const [name, run] of Object.entries(variants)) {
        const t0 = performance.now();
        await run();
        times[name]!.push(performance.now() - t0);
      }
    }
    const baseline = median(times['in-process, one batch of 128 rows']!);
    return Object.entries(times).map(([variant, ms]) => ({ variant, msMedian: median(ms), tokensPerSecond: tokens / (median(ms) / 1000), ratioToOneBatch: median(ms) / baseline, ms }));
  } finally {
    await stopEndpoint(e);
  }
}

type Dump = string[];

const trainOnce = (dir: string, name: string, backend: unknown) => trainRun(dir, name, config, backend);

async function main(): Promise<void> {
  process.env.TROUPE_BENCH_KEY = KEY;
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-openai-'));
  try {
    console.log(`endpoint throughput: ${CLIENTS} clients x n=${N} x ${NEW_TOKENS} tokens, ${ENDPOINT_REPEATS} repeats`);
    const endpoint = await endpointThroughput();
    for (const v of endpoint) console.log(`  ${v.variant.padEnd(44)} ${v.msMedian.toFixed(0).padStart(6)} ms  ${v.tokensPerSecond.toFixed(0).padStart(6)} tok/s  x${v.ratioToOneBatch.toFixed(2)} of one batch`);

    console.log(`training wall time: tiny AT-GRPO, ${RUN_STEPS} steps, ${RUN_REPEATS} repeats each`);
    const inProcessMs: number[] = [];
    const httpMs: number[] = [];
    let reference: Dump | null = null;
    let sameSamples = true;
    for (let r = 0; r < RUN_REPEATS; r++) {
      const a = await trainOnce(dir, `in-process-${r}`, { kind: 'in-process' });
      inProcessMs.push(a.ms);
      reference ??= a.dump;
      const e = await startEndpoint(config, KEY);
      try {
        const b = await trainOnce(dir, `http-${r}`, { kind: 'vllm', urls: [e.base], apiKeyEnv: 'TROUPE_BENCH_KEY', timeoutMs: 120_000, retries: 2 });
        httpMs.push(b.ms);
        sameSamples &&= b.dump.join('\n') === reference.join('\n');
      } finally {
        await stopEndpoint(e);
      }
    }
    const wall = { inProcessMsMedian: median(inProcessMs), httpMsMedian: median(httpMs), ratio: median(httpMs) / median(inProcessMs), sameSamples, inProcessMs, httpMs };
    console.log(`  in process ${wall.inProcessMsMedian.toFixed(0)} ms, over HTTP ${wall.httpMsMedian.toFixed(0)} ms: x${wall.ratio.toFixed(2)}; same samples: ${sameSamples}`);

    console.log(`fault runs: ${FAULT_RUNS} runs on two endpoints, one shut down at a random request`);
    const faults: Array<{ killedAtRequest: number; completed: boolean; sameSamples: boolean; failuresCounted: number; error?: string }> = [];
    for (let f = 0; f < FAULT_RUNS; f++) {
      const [a, b] = [await startEndpoint(config, KEY), await startEndpoint(config, KEY)];
      // A random generate request of server A after its first (each step sends it at least 2).
      const killAt = 2 + Math.floor(Math.random() * 2 * RUN_STEPS);
      let uses = 0;
      let killed = false;
      const use = a.models.use.bind(a.models);
      a.models.use = async (name, fn) => {
        if (++uses === killAt) {
          killed = true;
          await a.server.close();
        }
        return use(name, fn);
      };
      try {
        const r = await trainOnce(dir, `fault-${f}`, { kind: 'vllm', urls: [a.base, b.base], apiKeyEnv: 'TROUPE_BENCH_KEY', timeoutMs: 120_000, retries: 2 });
        faults.push({ killedAtRequest: killed ? killAt : -1, completed: true, sameSamples: r.dump.join('\n') === reference!.join('\n'), failuresCounted: r.failures });
      } catch (e) {
        faults.push({ killedAtRequest: killAt, completed: false, sameSamples: false, failuresCounted: 0, error: e instanceof Error ? e.message : String(e) });
      } finally {
        await stopEndpoint(b);
        await stopEndpoint(a, true);
      }
      const last = faults.at(-1)!;
      console.log(`  run ${f + 1}: server A shut down at request ${last.killedAtRequest}: completed ${last.completed}, same samples ${last.sameSamples}, failures counted ${last.failuresCounted}${last.error ? `, ${last.error}` : ''}`);
    }

    const out = { machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown' }, clients: CLIENTS, n: N, newTokens: NEW_TOKENS, endpoint, training: { steps: RUN_STEPS, ...wall }, faults };
    await mkdir(join(root, 'bench', 'results'), { recursive: true });
    await writeFile(join(root, 'bench', 'results', 'openai-endpoint.json'), `${JSON.stringify(out, null, 2)}\n`);
    console.log('wrote bench/results/openai-endpoint.json');
  } finally {
    delete process.env.TROUPE_BENCH_KEY;
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
