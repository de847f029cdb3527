/**
 * `npm run bench:sandbox` — what running model-written code in the sandbox costs.
 *
 * N trivial programs (`print(2**64)`) through `Sandbox.runAll` at concurrency 1 and 2, in mode
 * bubblewrap and mode unsandboxed (prlimit only), against the baseline measured in the same run:
 * the same N programs as bare subprocesses (`/usr/bin/python3 -I -c ...` spawned directly, the
 * same concurrency). Reports executions per second, the median latency of one execution, and
 * each variant's ratio to the baseline. Writes bench/results/sandbox.json.
 *
 * Options (env): SANDBOX_BENCH_N (programs per variant, default 200).
 */
import { spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sandboxSchema } from '../../server/protocol/experiment-config.ts';
import { Sandbox } from '../../server/sandbox/sandbox.ts';
import { probeSandbox } from '../../server/sandbox/probe.ts';
import { PYTHON } from '../../server/sandbox/sandbox-command.ts';
import { median } from '../engine/bench-util.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const N = Number(process.env['SANDBOX_BENCH_N'] ?? 200);
const CODE = 'print(2**64)';
const EXPECTED = '18446744073709551616\n';

interface Variant {
  variant: string;
  concurrency: number;
  programs: number;
  seconds: number;
  executionsPerSecond: number;
  latencyMsMedian: number;
}

/** The baseline: one bare interpreter, no sandbox, no limits. */
function bare(): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, ['-I', '-c', CODE], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 && out === EXPECTED ? resolve(performance.now() - t0) : reject(new Error(`bare python: exit ${code}, ${out}`))));
  });
}

/** Runs `one` N times, `concurrency` at a time. */
async function measure(variant: string, concurrency: number, one: () => Promise<number>): Promise<Variant> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < N) {
        next++;
        latencies.push(await one());
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { variant, concurrency, programs: N, seconds: round(seconds), executionsPerSecond: round(N / seconds), latencyMsMedian: round(median(latencies)) };
}

const round = (x: number) => Math.round(x * 100) / 100;

async function sandboxed(mode: 'bubblewrap' | 'unsandboxed', concurrency: number): Promise<Variant> {
  const sandbox = await Sandbox.open(sandboxSchema.parse({ mode, concurrency }), { log: () => {} });
  try {
    return await measure(mode, concurrency, async () => {
      const e = await sandbox.run({ language: 'python', code: CODE, stdin: '' });
      if (e.status !== 'ok' || e.stdout !== EXPECTED) throw new Error(`${mode}: ${e.status} ${e.stderr}`);
      return e.durationMs;
    });
  } finally {
    await sandbox.close();
  }
}

async function main(): Promise<void> {
  const probe = await probeSandbox();
  if (!probe.available) throw new Error(`the sandbox does not work here: ${probe.detail} (${probe.remedy ?? ''})`);
  const rows: Variant[] = [];
  for (const concurrency of [1, 2]) {
    rows.push(await measure('bare python', concurrency, bare));
    rows.push(await sandboxed('bubblewrap', concurrency));
    rows.push(await sandboxed('unsandboxed', concurrency));
  }
  const baseline = (c: number) => rows.find((r) => r.variant === 'bare python' && r.concurrency === c)!;
  const withRatios = rows.map((r) => ({
    ...r,
    latencyOverBare: round(r.latencyMsMedian / baseline(r.concurrency).latencyMsMedian),
    addedMsOverBare: round(r.latencyMsMedian - baseline(r.concurrency).latencyMsMedian),
    throughputOverBare: round(r.executionsPerSecond / baseline(r.concurrency).executionsPerSecond),
  }));
  const result = {
    bench: 'sandbox',
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, availableParallelism: availableParallelism(), node: process.version, cpu: cpus()[0]?.model ?? 'unknown', bubblewrap: probe.bubblewrapVersion ?? null, uid: process.getuid?.() ?? null },
    program: CODE,
    note: 'latency is one execution from spawn to exit (Execution.durationMs for the sandbox); ratios are against bare python at the same concurrency, measured in the same run',
    variants: withRatios,
  };
  const table = [
    'variant       conc   exec/s   p50 ms   +ms vs bare   x bare (latency)   x bare (throughput)',
    ...withRatios.map((r) =>
      [r.variant.padEnd(12), String(r.concurrency).padStart(5), r.executionsPerSecond.toFixed(1).padStart(8), r.latencyMsMedian.toFixed(1).padStart(8), r.addedMsOverBare.toFixed(1).padStart(13), r.latencyOverBare.toFixed(2).padStart(18), r.throughputOverBare.toFixed(2).padStart(21)].join(' '),
    ),
  ];
  process.stdout.write(`${table.join('\n')}\n(${N} programs each, ${CODE})\n`);
  await mkdir(join(root, 'bench/results'), { recursive: true });
  await writeFile(join(root, 'bench/results/sandbox.json'), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write('wrote bench/results/sandbox.json\n');
}

await main();
