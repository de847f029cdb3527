/**
 * `node --import tsx bench/engine/profile-decode.ts` — where a fused decode step's time goes, and
 * decode variants timed against each other in one process.
 *
 * Same generation as `bench:engine`'s decode (64 prompts of 16 tokens, 64 new tokens, temperature
 * 1, no stop tokens), through the real engine worker and `generate()`.
 *
 * PROFILE_MODE=profile (default): for each model and rollout weights, one generation with ONNX
 * Runtime's profiler on. Prints the decode steps' time per op type (prefill excluded), kernels per
 * step, and the host share of a step (time outside `session.run`: feeds, sampling, KV-cache
 * bookkeeping in generate.ts).
 *
 * PROFILE_MODE=compare: the variants in PROFILE_VARIANTS (names below) against `base`, the current
 * rollout path, interleaved A B A B over PROFILE_ROUNDS rounds; prints medians and ratios of
 * decode wall time and of the process's CPU time per generation (the steadier measure of work on
 * busy cores with PROFILE_THREADS=1; spinning threads burn CPU time while they wait).
 *
 * Options (env): PROFILE_MODELS (default,medium), PROFILE_WEIGHTS (fp32,int8,int4),
 * PROFILE_ROUNDS (5), PROFILE_THREADS (2), PROFILE_VARIANTS (all), PROFILE_BASELINE (a copy of
 * decode-graph.ts from another commit, e.g. `git show HEAD:server/models/decode-graph.ts >
 * server/models/decode-graph.baseline.ts`: adds the variant `baseline`, that file's graph with
 * base's session, to time a graph change against; several files, comma-separated, are `baseline`,
 * `baseline-2`, …; imports resolve relative to the copy, so keep it beside the original),
 * PROFILE_SHAPES (1: also time per op type and input shapes; one op appears once per cache
 * capacity S the generation went through).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildFusedDecode, quantBits, quantizedWeightNames, type FusedDecodeOptions, type RolloutWeights } from '../../server/models/decode-graph.ts';
import { defaultModelConfig, mediumModelConfig } from '../../server/models/default-model.ts';
import { initParameters } from '../../server/models/init.ts';
import { modelDims, parameterShapes, type ModelConfig } from '../../server/models/model-config.ts';
import { quantizeBlockwise, type QuantizedMatrix } from '../../server/models/quantize.ts';
import { Engine, type SessionOptions } from '../../server/runtime/engine.ts';
import type { GenerateResult } from '../../server/runtime/generate.ts';
import { readProfile, type ProfileEvent } from '../gpu/profile-summary.ts';
import { median } from '../stats.ts';

const MODE = process.env['PROFILE_MODE'] ?? 'profile';
const MODELS = (process.env['PROFILE_MODELS'] ?? 'default,medium').split(',');
const WEIGHTS = (process.env['PROFILE_WEIGHTS'] ?? 'fp32,int8,int4').split(',') as RolloutWeights[];
const ROUNDS = Number(process.env['PROFILE_ROUNDS'] ?? 5);
const THREADS = Number(process.env['PROFILE_THREADS'] ?? 2);
const DECODE = { batch: 64, promptLen: 16, newTokens: 64 };
const configs: Record<string, ModelConfig> = { default: defaultModelConfig, medium: mediumModelConfig };

/** A graph and session setup to time: overrides of the graph builder's and the session's options. */
interface Variant {
  /** Another build of the fused graph (PROFILE_BASELINE). */
  readonly build?: typeof buildFusedDecode;
  readonly graph?: Partial<Pick<FusedDecodeOptions, 'accuracyLevel' | 'joinProjections'>> & { blockSize?: number };
  readonly session?: SessionOptions;
  /** Split the batch in two halves decoded at once by two engine workers, each session single-threaded. */
  readonly split?: boolean;
}

/** `base` is the rollout path as configured by default (DecodeSettings: threads spin, blocks of 32). */
const variants: Record<string, Variant> = {
  base: { session: { spinning: true } },
  'no-spin': { session: { spinning: false } },
  'threads-1': { session: { threads: 1 } },
  'threads-1-spin': { session: { threads: 1, spinning: true } },
  'block-16': { graph: { blockSize: 16 }, session: { spinning: true } },
  'block-64': { graph: { blockSize: 64 }, session: { spinning: true } },
  'block-128': { graph: { blockSize: 128 }, session: { spinning: true } },
  'accuracy-0': { graph: { accuracyLevel: 0 }, session: { spinning: true } },
  'accuracy-1': { graph: { accuracyLevel: 1 }, session: { spinning: true } },
  'no-join': { graph: { joinProjections: false }, session: { spinning: true } },
  'split-2x1': { session: { threads: 1 }, split: true },
  };

function graphBytes(c: ModelConfig, weights: Map<string, Float32Array>, kind: RolloutWeights, v: Variant): Uint8Array {
  const bits = quantBits(kind);
  const blockSize = v.graph?.blockSize ?? 32;
  let quantized: Map<string, QuantizedMatrix> | undefined;
  if (bits) {
    const shapes = new Map(parameterShapes(c));
    quantized = new Map(quantizedWeightNames(c).map((n) => {
      const [rows, cols] = shapes.get(n) as [number, number];
      return [n, quantizeBlockwise(weights.get(n)!, rows, cols, bits, blockSize)];
    }));
  }
  const o: FusedDecodeOptions = {
    weights: kind,
    lora: null,
    baked: weights,
    ...(quantized ? { quantized } : {}),
    ...(v.graph?.accuracyLevel === undefined ? {} : { accuracyLevel: v.graph.accuracyLevel }),
    ...(v.graph?.joinProjections === undefined ? {} : { joinProjections: v.graph.joinProjections }),
  };
  return (v.build ?? buildFusedDecode)(c, o).bytes;
}

async function decode(engine: Engine, session: string, c: ModelConfig, seed: number, rows: readonly [number, number] = [0, DECODE.batch]): Promise<GenerateResult> {
  const { L, Hkv, D, V } = modelDims(c);
  const prompts = Array.from({ length: rows[1] - rows[0] }, (_, i) => Int32Array.from({ length: DECODE.promptLen }, (_, t) => ((rows[0] + i) * 31 + t * 17) % V));
  return engine.generate({
    session,
    params: {},
    prompts,
    maxNewTokens: DECODE.newTokens,
    sampling: { temperature: 1, topP: 1, topK: 0 },
    seed,
    stopTokens: [],
    padToken: 0,
    contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: c.maxSequenceLength, cacheLayout: 'batch-major' },
  });
}

/** One kernel's op type and input shapes, e.g. `MatMul [64,1,320]x[320,960]`. */
function kernelKey(e: ProfileEvent): string {
  const shapes = (e.args?.input_type_shape ?? []).map((s) => `[${(Object.values(s)[0] ?? []).join(',')}]`);
  return `${e.args?.op_name ?? '?'} ${shapes.join('x')}`;
}

/** Per-op-type microseconds over the decode steps (every model_run after the first, the prefill). */
function opTimes(events: ProfileEvent[], key: (e: ProfileEvent) => string = (e) => e.args?.op_name ?? '?'): { byOp: Map<string, number>; steps: number; kernelsPerStep: number; runUs: number } {
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
  const decodeRuns = runs.slice(1);
  const inDecode = (e: ProfileEvent) => decodeRuns.some((r) => e.ts >= r.ts && e.ts <= r.ts + r.dur);
  const byOp = new Map<string, number>();
  let kernels = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !inDecode(e)) continue;
    const op = key(e);
    byOp.set(op, (byOp.get(op) ?? 0) + e.dur);
    kernels++;
  }
  return { byOp, steps: decodeRuns.length, kernelsPerStep: kernels / decodeRuns.length, runUs: decodeRuns.reduce((a, r) => a + r.dur, 0) };
}

async function profile(engine: Engine, dir: string): Promise<void> {
  for (const m of MODELS) {
    const c = configs[m]!;
    const weights = initParameters(c, 1);
    for (const kind of WEIGHTS) {
      const session = `${m}-${kind}`;
      const prefix = join(dir, session);
      await engine.createSession(session, graphBytes(c, weights, kind, {}), { profileFilePrefix: prefix, spinning: true });
      await decode(engine, session, c, 0); // warm-up: prepacking, arena growth
      const g = await decode(engine, session, c, 1);
      await engine.releaseSession(session);
      const files = (await readdir(dir)).filter((f) => f.startsWith(session) && f.endsWith('.json'));
      const events = await readProfile(join(dir, files[0]!));
      // The profile holds both generations: keep the second (its runs come after the warm-up's).
      const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
      const second = runs[runs.length / 2]!.ts;
      const t = opTimes(events.filter((e) => e.ts >= second));
      const total = [...t.byOp.values()].reduce((a, b) => a + b, 0);
      const run = g.decodeRun!;
      const stepMs = g.decodeMs / run.steps;
      const hostMs = (g.decodeMs - run.ms) / run.steps;
      console.log(`\n## ${m} ${kind}: ${stepMs.toFixed(3)} ms/step (session.run ${(run.ms / run.steps).toFixed(3)}, host ${hostMs.toFixed(3)} = ${((100 * hostMs) / stepMs).toFixed(1)}%), ${t.kernelsPerStep.toFixed(0)} kernels/step, kernel time ${(total / t.steps / 1000).toFixed(3)} ms/step of model_run ${(t.runUs / t.steps / 1000).toFixed(3)} ms/step (profiled run)`);
      console.log('| op | share | µs/step |');
      console.log('|---|---|---|');
      for (const [op, us] of [...t.byOp].sort((a, b) => b[1] - a[1])) console.log(`| ${op} | ${((100 * us) / total).toFixed(1)}% | ${(us / t.steps).toFixed(1)} |`);
      if (process.env['PROFILE_SHAPES']) {
        // The same time by op type and input shapes (the last step's shapes stand for all: S grows).
        const k = opTimes(events.filter((e) => e.ts >= second), kernelKey);
        console.log('| op and input shapes | share | µs/step |');
        console.log('|---|---|---|');
        for (const [op, us] of [...k.byOp].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`| ${op} | ${((100 * us) / total).toFixed(1)}% | ${(us / k.steps).toFixed(1)} |`);
      }
    }
  }
}

/** One timed generation of variant `n`: one call, or (split) two half batches on two engines at once. */
async function timed(engines: readonly Engine[], session: string, c: ModelConfig, seed: number, split: boolean): Promise<{ ms: number; hostMs: number; cpuMs: number }> {
  if (!split) {
    // CPU time of the whole process (the engine is a worker thread), prefill included: with one
    // intra-op thread it counts the work done, which other processes on the cores inflate far
    // less than they inflate wall time.
    const cpu0 = process.cpuUsage();
    const g = await decode(engines[0]!, session, c, seed);
    const cpu = process.cpuUsage(cpu0);
    return { ms: g.decodeMs, hostMs: g.decodeMs - g.decodeRun!.ms, cpuMs: (cpu.user + cpu.system) / 1000 };
  }
  const half = DECODE.batch / 2;
  const t0 = performance.now();
  const gs = await Promise.all(engines.map((e, i) => decode(e, session, c, seed, [i * half, (i + 1) * half])));
  // Prefill included here (both halves end together); it is ~1/64 of the generation.
  return { ms: performance.now() - t0 - Math.max(...gs.map((g) => g.prefillMs)), hostMs: Math.max(...gs.map((g) => g.decodeMs - g.decodeRun!.ms)), cpuMs: NaN };
}

async function compare(engine: Engine): Promise<void> {
  const second = await Engine.start({ threads: 1, log: () => {} });
  const engines = [engine, second];
  const names = (process.env['PROFILE_VARIANTS'] ?? Object.keys(variants).join(',')).split(',').filter((n) => n in variants);
  if (!names.includes('base')) names.unshift('base');
  for (const m of MODELS) {
    const c = configs[m]!;
    const weights = initParameters(c, 1);
    for (const kind of WEIGHTS) {
      const ms = new Map<string, number[]>();
      const host = new Map<string, number[]>();
      const cpu = new Map<string, number[]>();
      // Block size and accuracy level are MatMulNBits' only.
      const used = names.filter((n) => kind !== 'fp32' || (variants[n]!.graph?.blockSize === undefined && variants[n]!.graph?.accuracyLevel === undefined));
      for (const n of used) {
        const bytes = graphBytes(c, weights, kind, variants[n]!);
        for (const e of variants[n]!.split ? engines : [engine]) await e.createSession(`${m}-${kind}-${n}`, bytes, variants[n]!.session ?? {});
        await timed(engines, `${m}-${kind}-${n}`, c, 0, variants[n]!.split ?? false);
      }
      for (let r = 0; r < ROUNDS; r++) {
        for (const n of r % 2 ? [...used].reverse() : used) {
          const g = await timed(engines, `${m}-${kind}-${n}`, c, r, variants[n]!.split ?? false);
          (ms.get(n) ?? ms.set(n, []).get(n)!).push(g.ms);
          (host.get(n) ?? host.set(n, []).get(n)!).push(g.hostMs);
          (cpu.get(n) ?? cpu.set(n, []).get(n)!).push(g.cpuMs);
        }
      }
      const base = median(ms.get('base')!);
      const baseCpu = median(cpu.get('base')!);
      console.log(`\n## ${m} ${kind} (${ROUNDS} rounds, decode ms of ${DECODE.newTokens - 1} steps; ratio = base / variant, > 1 is faster)`);
      for (const n of used) {
        const t = median(ms.get(n)!);
        const tc = median(cpu.get(n)!);
        console.log(`${n.padEnd(20)} ${t.toFixed(1).padStart(8)} ms  host ${median(host.get(n)!).toFixed(1).padStart(6)} ms  ${(base / t).toFixed(3)}x   cpu ${tc.toFixed(0).padStart(6)} ms ${(baseCpu / tc).toFixed(3)}x   [${ms.get(n)!.map((x) => x.toFixed(0)).join(' ')}]`);
      }
      for (const n of used) for (const e of variants[n]!.split ? engines : [engine]) await e.releaseSession(`${m}-${kind}-${n}`);
    }
  }
  await second.close();
}

async function main(): Promise<void> {
  for (const [i, file] of (process.env['PROFILE_BASELINE'] ?? '').split(',').filter(Boolean).entries()) {
    const mod = (await import(join(process.cwd(), file))) as { buildFusedDecode: typeof buildFusedDecode };
    variants[i ? `baseline-${i + 1}` : 'baseline'] = { build: mod.buildFusedDecode, session: { spinning: true } };
  }
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-profile-'));
  try {
    if (MODE === 'profile') await profile(engine, dir);
    else await compare(engine);
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
