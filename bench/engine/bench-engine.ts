/**
 * `npm run bench:engine` — Troupe's engine against PyTorch eager on the same model, weights and
 * batch, on this machine, in one run.
 *
 * For each model size (the embedded default, ~1M parameters, and ~10M): a PPO train step
 * (forward + loss + backward + AdamW with gradient clipping) and batched sampled decoding
 * (64 sequences × 64 new tokens with a KV cache), plus a MatMul peak measured in the same run.
 * Each round interleaves the two sides timing by timing (PyTorch, Troupe, PyTorch, …), each Troupe
 * timing is set against the mean of the PyTorch timings just before and after it, and a figure's
 * speedup is the median of those bracketed speedups over all rounds (`bracketedSpeedups` in
 * bench/stats.ts): drift on this shared machine then hits both sides of a speedup alike. The JSON keeps
 * every timing, the speedups' quartiles and the ratio of the two sides' medians beside it. Both sides use the same
 * thread count (default 2). Results: a printed table and `bench/results/engine.json`.
 *
 * Decode is also timed with the rollout variants (`rollout` in the experiment config): the fused
 * fp32 graph and int8/int4 weights (MatMulNBits), each against the same PyTorch fp32 decode of
 * the round; figures `decode-fused`, `decode-int8`, `decode-int4` (blocks of 32) and
 * `decode-int4-b128` (blocks of 128) (BENCH_DECODE_VARIANTS, default all four).
 *
 * Then the real-vocabulary case (`bench-real-vocab.ts`): a random model at Qwen2.5-0.5B's shapes,
 * its decode (fp32, and int4 rollout weights with blocks of 128: `decode-int4-b128`) and LoRA PPO
 * step against PyTorch's, timed alternately and bracketed as the small cases are, and both processes' peak RSS.
 *
 * PyTorch's matmuls run on OpenBLAS, whose kernel choice can be far from this CPU's best: before the
 * run `torchBlas` (torch-blas.ts) probes the candidate kernels, checks them against float64 and pins
 * the PyTorch side to the best with OPENBLAS_CORETYPE. The JSON's `blas` records the CPU's model and
 * flags, each side's kernel and the probes; `baselineFlags` lists what makes the baseline suspect (its
 * peak far below its kernel's or MLAS's, a busy machine), and the run prints them.
 *
 * Options (env): BENCH_ROUNDS (3), BENCH_THREADS (2), BENCH_MODELS (default,medium,qwen2.5-0.5b),
 * BENCH_TORCH_CORETYPE (auto; `inherited` or a core name: see torch-blas.ts), BENCH_ALSO_CORE (a
 * second PyTorch side pinned to this OpenBLAS core times the same train step and decode in the same
 * rounds: the ratios with and without the chosen kernel, side by side; not for the real-vocab case),
 * BENCH_OUT (results file, default bench/results/engine.json).
 * A run of some models only replaces their rows in its results file and keeps the others.
 */
import { cpus, loadavg, platform, release } from 'node:os';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { defaultModelConfig, mediumModelConfig, parameterCount } from '../../server/models/default-model.ts';
import { initParameters } from '../../server/models/init.ts';
import { parameterShapes as parameterShapesOf, type ModelConfig } from '../../server/models/model-config.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import type { DecodeSettings } from '../../server/models/rollout-decoder.ts';
import { writeSafetensorsFile } from '../../server/models/safetensors.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { bracketedSpeedups, median } from '../stats.ts';
import { randomBatch, speedupFigures } from './bench-util.ts';
import { measureMatmulPeak } from './matmul-peak.ts';
import { benchRealVocab, realVocabName } from './bench-real-vocab.ts';
import { TorchServer, type TorchInfo } from './torch-server.ts';
import { baselineFlags } from './torch-blas.ts';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const THREADS = Number(process.env['BENCH_THREADS'] ?? 2);
const MODELS = (process.env['BENCH_MODELS'] ?? `default,medium,${realVocabName}`).split(',');
const decodeVariants = { fused: { weights: 'fp32', fusedDecode: true, blockSize: 32 }, int8: { weights: 'int8', fusedDecode: true, blockSize: 32 }, int4: { weights: 'int4', fusedDecode: true, blockSize: 32 }, 'int4-b128': { weights: 'int4', fusedDecode: true, blockSize: 128 } } as const satisfies Record<string, DecodeSettings>;
type DecodeVariant = keyof typeof decodeVariants;
const VARIANTS = (process.env['BENCH_DECODE_VARIANTS'] ?? 'fused,int8,int4,int4-b128').split(',').filter((v): v is DecodeVariant => v in decodeVariants);
const ALSO_CORE = process.env['BENCH_ALSO_CORE'] || null;
const OUT = process.env['BENCH_OUT'] ?? fileURLToPath(new URL('../results/engine.json', import.meta.url));

interface ModelCase {
  name: string;
  config: ModelConfig;
  train: { batch: number; seqLen: number; steps: number; warmup: number };
  decode: { batch: number; promptLen: number; newTokens: number; runs: number; warmup: number };
}

const cases: ModelCase[] = [
  { name: 'default', config: defaultModelConfig, train: { batch: 16, seqLen: 128, steps: 8, warmup: 2 }, decode: { batch: 64, promptLen: 16, newTokens: 64, runs: 6, warmup: 1 } },
  { name: 'medium', config: mediumModelConfig, train: { batch: 16, seqLen: 128, steps: 4, warmup: 1 }, decode: { batch: 64, promptLen: 16, newTokens: 64, runs: 3, warmup: 1 } },
].filter((c) => MODELS.includes(c.name));

/** FLOPs of one train step (forward + backward ≈ 3× forward) and of one decoded token. */
function flops(c: ModelConfig, B: number, T: number): { trainStep: number; decodeToken: (ctx: number) => number } {
  const matmulParams = parameterCount(c) - c.vocabSize * c.hiddenSize * (c.tieEmbeddings ? 1 : 2) - c.hiddenSize * (2 * c.numLayers + 1);
  const head = c.vocabSize * c.hiddenSize;
  const D = c.headDim ?? c.hiddenSize / c.numHeads;
  const attnFwd = 2 * 2 * B * c.numHeads * T * T * D * c.numLayers; // QKᵀ and PV, full (unmasked) products
  const fwd = 2 * B * T * (matmulParams + head) + attnFwd;
  return {
    trainStep: 3 * fwd,
    decodeToken: (ctx) => 2 * (matmulParams + head) + 2 * 2 * c.numHeads * ctx * D * c.numLayers,
  };
}


async function main(): Promise<void> {
  const loadStart = loadavg()[0] ?? 0;
  const { server: torch, blas, info } = await TorchServer.startWithBestBlas(THREADS, (line) => process.stderr.write(`${line}\n`));
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  // The optional second baseline, pinned to BENCH_ALSO_CORE, runs the same commands in the same rounds.
  const also = ALSO_CORE === null ? null : TorchServer.start(THREADS, 'fused', { OPENBLAS_CORETYPE: ALSO_CORE });
  const alsoCore = also === null ? null : (await also.call<TorchInfo>({ cmd: 'info' })).blasCore;
  // OpenBLAS falls back to cpuid for a name it does not know: a misspelt core must not pass as that core.
  if (also && alsoCore?.toLowerCase() !== ALSO_CORE?.toLowerCase()) throw new Error(`BENCH_ALSO_CORE=${ALSO_CORE}: the second PyTorch server loaded ${alsoCore ?? 'no OpenBLAS core'}`);
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-'));
  const peak = { troupe: [] as number[], pytorch: [] as number[], also: [] as number[] };
  const results: Array<Record<string, unknown>> = [];
  try {
    for (const mc of cases) {
      const { config } = mc;
      const params = parameterCount(config);
      const weights = initParameters(config, 1);
      const file = join(dir, `${mc.name}.safetensors`);
      await writeSafetensorsFile(file, new Map([...weights].map(([n, d]) => [n, { shape: shapeOf(config, n), data: d }])));
      await torch.call({ cmd: 'load', modelConfig: config, weights: file });
      await also?.call({ cmd: 'load', modelConfig: config, weights: file });
      const policy = await Policy.create(engine, {
        id: mc.name,
        config,
        weights,
        lora: null,
        optimizer: optimizerSchema.parse({ lr: 1e-4, weightDecay: 0.01, maxGradNorm: 1 }),
        kl: true,
        entropy: true,
      });
      const { batch: B, seqLen: T } = mc.train;
      const raw = randomBatch(config, B, T, 7);
      const old = await policy.score(raw, 1);
      const seqs = raw.map((q, i) => ({ ...q, oldLogp: old[i]!, refLogp: old[i]! }));
      const hp = { temperature: 1, clipEps: 0.2, klCoef: 0.05, entCoef: 0.01 };
      const prompts = Array.from({ length: mc.decode.batch }, (_, b) => Int32Array.from({ length: mc.decode.promptLen }, (_, t) => (b * 31 + t * 17) % config.vocabSize));
      // The rollout variants decode the same weights (quantized once: nothing trains them here).
      const variants = new Map<DecodeVariant, { policy: Policy }>();
      for (const v of VARIANTS) {
        const vp = await Policy.create(engine, { id: `${mc.name}-${v}`, config, weights, lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: decodeVariants[v] });
        variants.set(v, { policy: vp });
      }
      const { batch, promptLen, newTokens, runs, warmup } = mc.decode;
      const timeDecode = async (p: Policy, seed: number): Promise<number> => {
        const t0 = performance.now();
        const g = await p.generate(prompts, { maxNewTokens: newTokens, sampling: { temperature: 1, topP: 1, topK: 0 }, seed, stopTokens: [], padToken: 0, rollout: true });
        if (g.tokens.some((t) => t.length !== newTokens)) throw new Error('decode produced fewer tokens than asked');
        return performance.now() - t0;
      };
      // One PyTorch timing a call, after an untimed run of its own (a call builds its optimizer or cache afresh).
      const trainCmd = { cmd: 'trainStep', batch: B, seqLen: T, steps: 1, warmup: 1, loss: 'ppo' };
      const decodeCmd = { cmd: 'decode', batch, promptLen, newTokens, temperature: 1, topP: 1, steps: 1, warmup: 1 };
      const timeTorch = async (server: TorchServer, cmd: Record<string, unknown>): Promise<number> => (await server.call<{ ms: number[] }>(cmd)).ms[0]!;
      // Each round interleaves the sides timing by timing, PyTorch first and last, so every Troupe timing has a
      // PyTorch timing just before and just after it (bracketedSpeedups); the optional second baseline runs
      // beside PyTorch's and is bracketed the same way.
      const train = new Series();
      const dec = new Series();
      const variantSeries = new Map([...variants.keys()].map((v) => [v, new Series()]));
      for (let r = 0; r < ROUNDS; r++) {
        peak.troupe.push(await measureMatmulPeak(engine, 512, 20));
        peak.pytorch.push((await torch.call<{ gflops: number }>({ cmd: 'matmulPeak', n: 512, reps: 20 })).gflops);
        if (also) peak.also.push((await also.call<{ gflops: number }>({ cmd: 'matmulPeak', n: 512, reps: 20 })).gflops);
        for (let i = 0; i < mc.train.warmup; i++) await policy.update('ppo', seqs, hp);
        const trainRound = train.round([await timeTorch(torch, trainCmd)], also && [await timeTorch(also, trainCmd)]);
        for (let i = 0; i < mc.train.steps; i++) {
          trainRound.side((await policy.update('ppo', seqs, hp)).ms);
          trainRound.baseline(await timeTorch(torch, trainCmd), also && (await timeTorch(also, trainCmd)));
        }
        for (let i = 0; i < warmup; i++) for (const p of [policy, ...[...variants.values()].map((x) => x.policy)]) await timeDecode(p, i);
        const p0 = await timeTorch(torch, decodeCmd);
        const a0 = also && (await timeTorch(also, decodeCmd));
        const decRound = dec.round([p0], a0 === null ? null : [a0]);
        const variantRounds = new Map([...variantSeries].map(([v, s]) => [v, s.round([p0], a0 === null ? null : [a0])]));
        for (let i = 0; i < runs; i++) {
          decRound.side(await timeDecode(policy, i));
          for (const [v, x] of variants) variantRounds.get(v)!.side(await timeDecode(x.policy, i));
          const p = await timeTorch(torch, decodeCmd);
          const a = also && (await timeTorch(also, decodeCmd));
          decRound.baseline(p, a);
          for (const vr of variantRounds.values()) vr.baseline(p, a);
        }
        const vs = [...variantRounds].map(([v, x]) => `${v} ${median(x.sideMs).toFixed(0)}`).join(', ');
        process.stderr.write(`${mc.name} round ${r + 1}/${ROUNDS}: train ${median(trainRound.sideMs).toFixed(1)} vs ${median(trainRound.baselineMs).toFixed(1)} ms, decode ${median(decRound.sideMs).toFixed(0)} vs ${median(decRound.baselineMs).toFixed(0)} ms (${vs})\n`);
      }
      const f = flops(config, B, T);
      const trainTokens = B * T;
      const decTokens = mc.decode.batch * mc.decode.newTokens;
      const decFlops = Array.from({ length: mc.decode.newTokens }, (_, i) => f.decodeToken(mc.decode.promptLen + i)).reduce((a, b) => a + b, 0) * mc.decode.batch;
      const row = (figure: string, s: Series, tokens: number, flopCount: number, shape: Record<string, unknown>): Record<string, unknown> => ({
        model: { name: mc.name, parameters: params },
        figure,
        // The median of the bracketed speedups; `speedupOfMedians` is the estimator used before 2026-11-28.
        ...speedupFigures(s.all('side'), s.all('baseline'), s.speedups('baseline'), tokens, flopCount),
        timingsMs: s.timings(),
        shape,
        ...(also === null ? {} : { pytorchAlso: { core: alsoCore, ms: median(s.all('also')), speedup: median(s.speedups('also')) } }),
      });
      results.push(row('trainStep', train, trainTokens, f.trainStep, { batch: B, seqLen: T, loss: 'ppo', optimizer: 'adamw' }));
      const decShape = { batch: mc.decode.batch, promptLen: mc.decode.promptLen, newTokens: mc.decode.newTokens, sampling: 'temperature 1' };
      results.push(row('decode', dec, decTokens, decFlops, decShape));
      for (const [v, x] of variants) {
        results.push(row(`decode-${v}`, variantSeries.get(v)!, decTokens, decFlops, { ...decShape, weights: decodeVariants[v].weights, graph: 'fused', blockSize: decodeVariants[v].blockSize, pytorch: 'fp32 eager' }));
        await x.policy.dispose();
      }
    }
    if (MODELS.includes(realVocabName)) {
      peak.troupe.push(await measureMatmulPeak(engine, 512, 20));
      peak.pytorch.push((await torch.call<{ gflops: number }>({ cmd: 'matmulPeak', n: 512, reps: 20 })).gflops);
      results.push(...(await benchRealVocab(engine, torch, THREADS)).rows);
    }
  } finally {
    await torch.close();
    await also?.close();
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
  const matmulPeak = { n: 512, troupe: median(peak.troupe), pytorch: median(peak.pytorch), ...(also ? { pytorchAlso: median(peak.also) } : {}) };
  const loadAverage = { start: loadStart, end: loadavg()[0] ?? 0 };
  const flags = baselineFlags({ pytorchPeak: matmulPeak.pytorch, troupePeak: matmulPeak.troupe, choice: blas.choice, loadAverage, cores: cpus().length });
  for (const r of results) {
    const g = r['gflops'] as { troupe: number; pytorch: number };
    r['peakFraction'] = { troupe: g.troupe / matmulPeak.troupe, pytorch: g.pytorch / matmulPeak.troupe };
  }
  const ortVersion = (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
  const out = {
    date: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, platform: `${platform()} ${release()}`, node: process.version },
    threads: THREADS,
    rounds: ROUNDS,
    // Other processes' load moves every figure here: the 1-minute load average as the run began and ended.
    loadAverage,
    // libgomp's OMP_WAIT_POLICY (PyTorch's threads): PASSIVE keeps them from collapsing when the cores are shared.
    ompWaitPolicy: process.env['OMP_WAIT_POLICY'] ?? null,
    versions: { onnxruntimeNode: ortVersion, torch: info.torch, blas: info.blasLibrary },
    // Each side's matmul kernel: PyTorch's OpenBLAS core as chosen and probed (torch-blas.ts), Troupe's MLAS.
    blas: {
      cpu: blas.cpu,
      pytorch: { ...blas.choice, serverCore: info.blasCore, probes: blas.probes },
      troupe: blas.troupe,
      ...(also ? { pytorchAlso: { core: alsoCore } } : {}),
    },
    matmulPeakGflops: matmulPeak,
    // Empty when nothing makes the baseline suspect; otherwise printed at the end of the run too.
    baselineFlags: flags,
    results: await withEarlierRows(results),
  };
  const path = OUT;
  await writeFile(path, `${JSON.stringify(out, null, 2)}\n`);
  const rows = results.map((r) => {
    const m = r['model'] as { name: string; parameters: number };
    const g = r['gflops'] as { troupe: number };
    const q = r['speedupSpread'] as { q25: number; q75: number; n: number } | undefined;
    const spread = q ? `${q.q25.toFixed(2)}-${q.q75.toFixed(2)} (${q.n})` : 'n/a';
    return `| ${m.name} (${(m.parameters / 1e6).toFixed(1)}M) | ${String(r['figure'])} | ${(r['troupe'] as number).toFixed(0)} | ${(r['pytorch'] as number).toFixed(0)} | ${(r['speedup'] as number).toFixed(2)}x | ${spread} | ${g.troupe.toFixed(1)} |`;
  });
  console.log(`\nCPU: ${blas.cpu.model} (family ${blas.cpu.family ?? '?'}, model ${blas.cpu.modelNumber ?? '?'}); PyTorch on OpenBLAS ${blas.choice.used ?? 'n/a'} (OpenBLAS's own pick ${blas.choice.cpuidPick ?? 'n/a'}, inherited OPENBLAS_CORETYPE ${blas.choice.inherited ?? 'unset'}), Troupe on ${blas.troupe.sgemmKernel}`);
  console.log(`MatMul peak (512², ${THREADS} threads): Troupe/ORT ${matmulPeak.troupe.toFixed(1)} GFLOP/s, PyTorch ${matmulPeak.pytorch.toFixed(1)} GFLOP/s (its kernel reached ${blas.choice.usedPeak?.toFixed(1) ?? '?'} in the probe)${also ? `, PyTorch on ${alsoCore ?? ALSO_CORE} ${median(peak.also).toFixed(1)} GFLOP/s` : ''}; load average ${loadAverage.start.toFixed(2)} -> ${loadAverage.end.toFixed(2)}`);
  console.log('| model | figure | Troupe tok/s | PyTorch tok/s | speedup | its quartiles (pairs) | Troupe GFLOP/s |');
  console.log('|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  if (also) {
    for (const r of results) {
      const a = r['pytorchAlso'] as { speedup: number } | undefined;
      if (a) console.log(`${(r['model'] as { name: string }).name} ${String(r['figure'])}: ${(r['speedup'] as number).toFixed(2)}x against PyTorch on ${blas.choice.used ?? '?'}, ${a.speedup.toFixed(2)}x against PyTorch on ${alsoCore ?? ALSO_CORE}`);
    }
  }
  for (const r of results) {
    const rss = r['peakRssMB'] as { troupe: number; pytorch: number } | undefined;
    if (rss) console.log(`${(r['model'] as { name: string }).name} ${String(r['figure'])}: peak RSS Troupe ${(rss.troupe / 1024).toFixed(2)} GiB, PyTorch ${(rss.pytorch / 1024).toFixed(2)} GiB`);
  }
  for (const f of flags) console.log(`BASELINE FLAGGED (${f.code}): ${f.message}`);
  console.log(`\nwrote ${path}`);
}

/**
 * This run's rows, plus the rows of models it did not run from the previous `engine.json`, so a
 * run of one model (BENCH_MODELS) does not drop the others' figures. Each kept row says the date
 * and MatMul peak of the run that measured it.
 */
async function withEarlierRows(rows: Array<Record<string, unknown>>): Promise<Array<Record<string, unknown>>> {
  const ran = new Set(rows.map((r) => (r['model'] as { name: string }).name));
  let earlier: Array<Record<string, unknown>> = [];
  try {
    const prev: unknown = JSON.parse(await readFile(OUT, 'utf8'));
    if (prev && typeof prev === 'object' && 'results' in prev && Array.isArray(prev.results)) {
      const date = 'date' in prev ? prev.date : undefined;
      const peak = 'matmulPeakGflops' in prev ? prev.matmulPeakGflops : undefined;
      // A kept row carries its own run's date and MatMul peak: the top level describes this run.
      earlier = (prev.results as Array<Record<string, unknown>>)
        .filter((r) => !ran.has((r['model'] as { name: string } | undefined)?.name ?? ''))
        .map((r) => ({ ...r, date: r['date'] ?? date, matmulPeakGflops: r['matmulPeakGflops'] ?? peak }));
    }
  } catch {
    // No earlier results (first run): this run's rows are all there is.
  }
  return [...earlier, ...rows];
}

function shapeOf(c: ModelConfig, name: string): number[] {
  for (const [n, s] of parameterShapesOf(c)) if (n === name) return s;
  throw new Error(`unknown parameter ${name}`);
}



main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});

/**
 * One figure's interleaved timings, round by round: each round starts and ends with a baseline timing
 * and holds one Troupe ("side") timing between each two baseline ones (the second baseline, `also`,
 * is timed beside the first).
 */
class Series {
  private readonly rounds: Array<{ sideMs: number[]; baselineMs: number[]; alsoMs: number[] | null }> = [];

  round(baselineMs: number[], alsoMs: number[] | null): { sideMs: number[]; baselineMs: number[]; side(ms: number): void; baseline(ms: number, also: number | null): void } {
    const r = { sideMs: [] as number[], baselineMs: [...baselineMs], alsoMs: alsoMs && [...alsoMs] };
    this.rounds.push(r);
    return {
      sideMs: r.sideMs,
      baselineMs: r.baselineMs,
      side: (ms) => void r.sideMs.push(ms),
      baseline: (ms, also) => {
        r.baselineMs.push(ms);
        if (also !== null) r.alsoMs?.push(also);
      },
    };
  }

  all(which: 'side' | 'baseline' | 'also'): number[] {
    return this.rounds.flatMap((r) => (which === 'side' ? r.sideMs : which === 'baseline' ? r.baselineMs : (r.alsoMs ?? [])));
  }

  /** Troupe's bracketed speedups over the baseline (or the second one), all rounds together. */
  speedups(against: 'baseline' | 'also'): number[] {
    return this.rounds.flatMap((r) => bracketedSpeedups(r.sideMs, against === 'baseline' ? r.baselineMs : (r.alsoMs ?? [])));
  }

  /** Every timing, by round, rounded to 0.01 ms. */
  timings(): Array<{ troupe: number[]; pytorch: number[] }> {
    const r2 = (xs: number[]): number[] => xs.map((x) => Math.round(x * 100) / 100);
    return this.rounds.map((r) => ({ troupe: r2(r.sideMs), pytorch: r2(r.baselineMs) }));
  }
}
