/**
 * `npm run bench:sandbox` — what running model-written code in the sandbox costs.
 *
 * N trivial programs (`print(2**64)`) through `Sandbox.runAll` at concurrency 1 and 2, in mode
 * bubblewrap and mode unsandboxed (prlimit only), against the baseline measured in the same run:
 * the same N programs as bare subprocesses (`/usr/bin/python3 -I -c ...` spawned directly, the
 * same concurrency). Reports executions per second, the median latency of one execution, and
 * each variant's ratio to the baseline. Writes bench/results/sandbox.json.
 *
 * Then one program on 5 tests (a coder's program on its hidden tests), BATCH_N times, two ways:
 * one sandbox process per test (`Sandbox.run` x5, concurrently through the pool, the baseline)
 * and one batch (`Sandbox.runBatch`, one process for the 5, batch.ts), in both modes at the
 * default concurrency; reports the median wall time of one 5-test program, its ratio to the
 * baseline, and checks the two give the same verdicts.
 *
 * Options (env): SANDBOX_BENCH_N (programs per variant, default 200), SANDBOX_BENCH_BATCH_N
 * (5-test programs per way, default 40).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sandboxSchema } from '../../server/protocol/experiment-config.ts';
import { Sandbox } from '../../server/sandbox/sandbox.ts';
import { probeSandbox } from '../../server/sandbox/probe.ts';
import { PYTHON } from '../../server/sandbox/sandbox-command.ts';
import { median } from '../stats.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const N = Number(process.env['SANDBOX_BENCH_N'] ?? 200);
const BATCH_N = Number(process.env['SANDBOX_BENCH_BATCH_N'] ?? 40);
const STEP_PROGRAMS = 8;
const STEP_REPEATS = Number(process.env['SANDBOX_BENCH_STEPS'] ?? 5);
const CODE = 'print(2**64)';
const TESTED_CODE = 'a, b = map(int, input().split())\nprint(a + b)\n';
const TEST_INPUTS = ['1 2\n', '30 12\n', '-5 5\n', '100 200\n', '7 -9\n'];
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

interface BatchRow {
  mode: string;
  tests: number;
  programs: number;
  perTestMsMedian: number;
  batchedMsMedian: number;
  /** perTest / batched: how many times faster a 5-test program is batched. */
  speedup: number;
  /** A step of STEP_PROGRAMS programs at once (runAll batches them): wall ms per program, median over STEP_REPEATS steps. */
  stepPerTestMsPerProgram: number;
  stepBatchedMsPerProgram: number;
  stepSpeedup: number;
  /** CPU time (user + system) of the sandbox processes per 5-test program, from the server's reaped children (/proc/self/stat cutime + cstime, 10 ms ticks). */
  perTestCpuMsMedian: number;
  batchedCpuMsMedian: number;
  cpuRatio: number;
}

/** CPU milliseconds of this process's reaped children so far (bwrap waits for the sandbox, the harness for its cases, so all of it lands here). */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3; cutime and cstime are fields 16 and 17.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / CLOCK_TICKS;
}
/** sysconf(_SC_CLK_TCK): 100 on Linux. */
const CLOCK_TICKS = 100;

/** One 5-test program per test and batched, alternating so both see the same machine load. */
async function batchVsPerTest(mode: 'bubblewrap' | 'unsandboxed'): Promise<BatchRow> {
  const sandbox = await Sandbox.open(sandboxSchema.parse({ mode }), { log: () => {} });
  const reqs = TEST_INPUTS.map((stdin) => ({ language: 'python' as const, code: TESTED_CODE, stdin }));
  const perTest: number[] = [];
  const batched: number[] = [];
  const perTestCpu: number[] = [];
  const batchedCpu: number[] = [];
  const verdicts = (es: { status: string; stdout: string }[]) => es.map((e) => `${e.status}:${e.stdout}`).join('|');
  try {
    for (let i = 0; i < BATCH_N; i++) {
      let t0 = performance.now();
      let c0 = childrenCpuMs();
      const alone = await Promise.all(reqs.map((r) => sandbox.run(r)));
      perTest.push(performance.now() - t0);
      perTestCpu.push(childrenCpuMs() - c0);
      t0 = performance.now();
      c0 = childrenCpuMs();
      const together = await sandbox.runBatch(reqs);
      batched.push(performance.now() - t0);
      batchedCpu.push(childrenCpuMs() - c0);
      if (verdicts(alone) !== verdicts(together) || together.some((e) => e.status !== 'ok')) throw new Error(`${mode}: batched verdicts differ: ${verdicts(together)} vs ${verdicts(alone)}`);
    }
  } finally {
    await sandbox.close();
  }
  const p = median(perTest);
  const b = median(batched);
  // A step's worth: STEP_PROGRAMS programs of 5 tests at once through the pool, as an RL step's
  // branches run them (runAll); per test = 5 processes each, batched = one each.
  const stepPerTest: number[] = [];
  const stepBatched: number[] = [];
  const step = Array.from({ length: STEP_PROGRAMS }, (_, k) => TEST_INPUTS.map((stdin) => ({ language: 'python' as const, code: `${TESTED_CODE}# program ${k}\n`, stdin })));
  const reopened = await Sandbox.open(sandboxSchema.parse({ mode }), { log: () => {} });
  try {
    for (let i = 0; i < STEP_REPEATS; i++) {
      let t0 = performance.now();
      await Promise.all(step.flat().map((r) => reopened.run(r)));
      stepPerTest.push((performance.now() - t0) / STEP_PROGRAMS);
      t0 = performance.now();
      await reopened.runAll(step.flat());
      stepBatched.push((performance.now() - t0) / STEP_PROGRAMS);
    }
  } finally {
    await reopened.close();
  }
  const pc = median(perTestCpu);
  const bc = median(batchedCpu);
  return { mode, tests: reqs.length, programs: BATCH_N, perTestMsMedian: round(p), batchedMsMedian: round(b), speedup: round(p / b), stepPerTestMsPerProgram: round(median(stepPerTest)), stepBatchedMsPerProgram: round(median(stepBatched)), stepSpeedup: round(median(stepPerTest) / median(stepBatched)), perTestCpuMsMedian: round(pc), batchedCpuMsMedian: round(bc), cpuRatio: round(pc / bc) };
}

async function main(): Promise<void> {
  const probe = await probeSandbox();
  if (!probe.available) throw new Error(`the sandbox does not work here: ${probe.detail} (${probe.remedy ?? ''})`);
  const batch = [await batchVsPerTest('bubblewrap'), await batchVsPerTest('unsandboxed')];
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
    batch: {
      program: TESTED_CODE,
      inputs: TEST_INPUTS,
      concurrency: availableParallelism(),
      note: 'wall time of one program on its 5 tests, from the first request to the last execution: per test = 5 sandbox processes through the pool (the baseline), batched = Sandbox.runBatch (one process); medians over the programs, alternating the two ways in the same run',
      rows: batch,
    },
  };
  const table = [
    'variant       conc   exec/s   p50 ms   +ms vs bare   x bare (latency)   x bare (throughput)',
    ...withRatios.map((r) =>
      [r.variant.padEnd(12), String(r.concurrency).padStart(5), r.executionsPerSecond.toFixed(1).padStart(8), r.latencyMsMedian.toFixed(1).padStart(8), r.addedMsOverBare.toFixed(1).padStart(13), r.latencyOverBare.toFixed(2).padStart(18), r.throughputOverBare.toFixed(2).padStart(21)].join(' '),
    ),
  ];
  process.stdout.write(`${table.join('\n')}\n(${N} programs each, ${CODE})\n`);
  process.stdout.write(
    [
      '',
      `one program on ${TEST_INPUTS.length} tests (median of ${BATCH_N}, concurrency ${availableParallelism()}; step = ${STEP_PROGRAMS} such programs at once, ms per program, median of ${STEP_REPEATS}):`,
      'mode          per test ms   batched ms   x faster   step per test   step batched   x faster   per test cpu ms   batched cpu ms   x less cpu',
      ...batch.map((r) =>
        [
          r.mode.padEnd(12),
          r.perTestMsMedian.toFixed(1).padStart(12),
          r.batchedMsMedian.toFixed(1).padStart(12),
          r.speedup.toFixed(2).padStart(10),
          r.stepPerTestMsPerProgram.toFixed(1).padStart(15),
          r.stepBatchedMsPerProgram.toFixed(1).padStart(14),
          r.stepSpeedup.toFixed(2).padStart(10),
          r.perTestCpuMsMedian.toFixed(0).padStart(17),
          r.batchedCpuMsMedian.toFixed(0).padStart(16),
          r.cpuRatio.toFixed(2).padStart(12),
        ].join(' '),
      ),
      'cpu: the server\'s reaped children (cutime + cstime); bwrap does not hand all of its sandbox\'s time up, so only the unsandboxed row is complete',
      '',
    ].join('\n'),
  );
  await mkdir(join(root, 'bench/results'), { recursive: true });
  await writeFile(join(root, 'bench/results/sandbox.json'), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write('wrote bench/results/sandbox.json\n');
}

await main();
