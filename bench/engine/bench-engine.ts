/**
 * `npm run bench:engine` — Troupe's engine against PyTorch eager on the same model, weights and
 * batch, on this machine, in one run.
 *
 * For each model size (the embedded default, ~1M parameters, and ~10M): a PPO train step
 * (forward + loss + backward + AdamW with gradient clipping) and batched sampled decoding
 * (64 sequences × 64 new tokens with a KV cache), plus a MatMul peak measured in the same run.
 * Rounds alternate Troupe and PyTorch so drift on this shared machine hits both; each round
 * reports a median, and the figure is the median of the round medians. Both sides use the same
 * thread count (default 2). Results: a printed table and `bench/results/engine.json`.
 *
 * Decode is also timed with the rollout variants (`rollout` in the experiment config): the fused
 * fp32 graph and int8/int4 weights (MatMulNBits), each against the same PyTorch fp32 decode of
 * the round; figures `decode-fused`, `decode-int8`, `decode-int4` (blocks of 32) and
 * `decode-int4-b128` (blocks of 128) (BENCH_DECODE_VARIANTS, default all four).
 *
 * Then the real-vocabulary case (`bench-real-vocab.ts`): a random model at Qwen2.5-0.5B's shapes,
 * its decode (fp32, and int4 rollout weights with blocks of 128: `decode-int4-b128`) and LoRA PPO
 * step against PyTorch's, and both processes' peak RSS.
 *
 * Options (env): BENCH_ROUNDS (3), BENCH_THREADS (2), BENCH_MODELS (default,medium,qwen2.5-0.5b).
 * A run of some models only replaces their rows in `engine.json` and keeps the others.
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
import { median, randomBatch } from './bench-util.ts';
import { measureMatmulPeak } from './matmul-peak.ts';
import { benchRealVocab, realVocabName } from './bench-real-vocab.ts';
import { TorchServer } from './torch-server.ts';

const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const THREADS = Number(process.env['BENCH_THREADS'] ?? 2);
const MODELS = (process.env['BENCH_MODELS'] ?? `default,medium,${realVocabName}`).split(',');
const decodeVariants = { fused: { weights: 'fp32', fusedDecode: true, blockSize: 32 }, int8: { weights: 'int8', fusedDecode: true, blockSize: 32 }, int4: { weights: 'int4', fusedDecode: true, blockSize: 32 }, 'int4-b128': { weights: 'int4', fusedDecode: true, blockSize: 128 } } as const satisfies Record<string, DecodeSettings>;
type DecodeVariant = keyof typeof decodeVariants;
const VARIANTS = (process.env['BENCH_DECODE_VARIANTS'] ?? 'fused,int8,int4,int4-b128').split(',').filter((v): v is DecodeVariant => v in decodeVariants);

interface ModelCase {
  name: string;
  config: ModelConfig;
  train: { batch: number; seqLen: number; steps: number; warmup: number };
  decode: { batch: number; promptLen: number; newTokens: number; runs: number; warmup: number };
}

const cases: ModelCase[] = [
  { name: 'default', config: defaultModelConfig, train: { batch: 16, seqLen: 128, steps: 8, warmup: 2 }, decode: { batch: 64, promptLen: 16, newTokens: 64, runs: 3, warmup: 1 } },
  { name: 'medium', config: mediumModelConfig, train: { batch: 16, seqLen: 128, steps: 4, warmup: 1 }, decode: { batch: 64, promptLen: 16, newTokens: 64, runs: 2, warmup: 1 } },
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
  const loadStart = loadavg()[0];
  const engine = await Engine.start({ threads: THREADS, log: () => {} });
  const torch = TorchServer.start(THREADS);
  const info = await torch.call<{ torch: string; blasLibrary: string; threads: number }>({ cmd: 'info' });
  const dir = await mkdtemp(join(tmpdir(), 'troupe-bench-'));
  const peak = { troupe: [] as number[], pytorch: [] as number[] };
  const results: Array<Record<string, unknown>> = [];
  try {
    for (const mc of cases) {
      const { config } = mc;
      const params = parameterCount(config);
      const weights = initParameters(config, 1);
      const file = join(dir, `${mc.name}.safetensors`);
      await writeSafetensorsFile(file, new Map([...weights].map(([n, d]) => [n, { shape: shapeOf(config, n), data: d }])));
      await torch.call({ cmd: 'load', modelConfig: config, weights: file });
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
      const rounds = { trainT: [] as number[], trainP: [] as number[], decT: [] as number[], decP: [] as number[] };
      // The rollout variants decode the same weights (quantized once: nothing trains them here).
      const variants = new Map<DecodeVariant, { policy: Policy; ms: number[] }>();
      for (const v of VARIANTS) {
        const vp = await Policy.create(engine, { id: `${mc.name}-${v}`, config, weights, lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: decodeVariants[v] });
        variants.set(v, { policy: vp, ms: [] });
      }
      const timeDecode = async (p: Policy): Promise<number> => {
        const dms: number[] = [];
        for (let i = 0; i < mc.decode.warmup + mc.decode.runs; i++) {
          const t0 = performance.now();
          const g = await p.generate(prompts, { maxNewTokens: mc.decode.newTokens, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: i, stopTokens: [], padToken: 0, rollout: true });
          if (g.tokens.some((t) => t.length !== mc.decode.newTokens)) throw new Error('decode produced fewer tokens than asked');
          if (i >= mc.decode.warmup) dms.push(performance.now() - t0);
        }
        return median(dms);
      };
      for (let r = 0; r < ROUNDS; r++) {
        peak.troupe.push(await measureMatmulPeak(engine, 512, 20));
        peak.pytorch.push((await torch.call<{ gflops: number }>({ cmd: 'matmulPeak', n: 512, reps: 20 })).gflops);
        const ms: number[] = [];
        for (let i = 0; i < mc.train.warmup + mc.train.steps; i++) {
          const s = await policy.update('ppo', seqs, hp);
          if (i >= mc.train.warmup) ms.push(s.ms);
        }
        rounds.trainT.push(median(ms));
        rounds.trainP.push(median((await torch.call<{ ms: number[] }>({ cmd: 'trainStep', batch: B, seqLen: T, steps: mc.train.steps, warmup: mc.train.warmup, loss: 'ppo' })).ms));
        rounds.decT.push(await timeDecode(policy));
        for (const v of variants.values()) v.ms.push(await timeDecode(v.policy));
        const { batch, promptLen, newTokens, runs, warmup } = mc.decode;
        rounds.decP.push(median((await torch.call<{ ms: number[] }>({ cmd: 'decode', batch, promptLen, newTokens, temperature: 1, topP: 1, steps: runs, warmup })).ms));
        const vs = [...variants].map(([v, x]) => `${v} ${x.ms.at(-1)!.toFixed(0)}`).join(', ');
        process.stderr.write(`${mc.name} round ${r + 1}/${ROUNDS}: train ${rounds.trainT.at(-1)!.toFixed(1)} vs ${rounds.trainP.at(-1)!.toFixed(1)} ms, decode ${rounds.decT.at(-1)!.toFixed(0)} vs ${rounds.decP.at(-1)!.toFixed(0)} ms (${vs})\n`);
      }
      const f = flops(config, B, T);
      const trainTokens = B * T;
      const decTokens = mc.decode.batch * mc.decode.newTokens;
      const decFlops = Array.from({ length: mc.decode.newTokens }, (_, i) => f.decodeToken(mc.decode.promptLen + i)).reduce((a, b) => a + b, 0) * mc.decode.batch;
      const trainMs = { troupe: median(rounds.trainT), pytorch: median(rounds.trainP) };
      const decMs = { troupe: median(rounds.decT), pytorch: median(rounds.decP) };
      results.push({
        model: { name: mc.name, parameters: params },
        figure: 'trainStep',
        troupe: (trainTokens / trainMs.troupe) * 1000,
        pytorch: (trainTokens / trainMs.pytorch) * 1000,
        speedup: trainMs.pytorch / trainMs.troupe,
        ms: trainMs,
        roundMs: { troupe: rounds.trainT, pytorch: rounds.trainP },
        gflops: { troupe: f.trainStep / trainMs.troupe / 1e6, pytorch: f.trainStep / trainMs.pytorch / 1e6 },
        shape: { batch: B, seqLen: T, loss: 'ppo', optimizer: 'adamw' },
      });
      results.push({
        model: { name: mc.name, parameters: params },
        figure: 'decode',
        troupe: (decTokens / decMs.troupe) * 1000,
        pytorch: (decTokens / decMs.pytorch) * 1000,
        speedup: decMs.pytorch / decMs.troupe,
        ms: decMs,
        roundMs: { troupe: rounds.decT, pytorch: rounds.decP },
        gflops: { troupe: decFlops / decMs.troupe / 1e6, pytorch: decFlops / decMs.pytorch / 1e6 },
        shape: { batch: mc.decode.batch, promptLen: mc.decode.promptLen, newTokens: mc.decode.newTokens, sampling: 'temperature 1' },
      });
      for (const [v, x] of variants) {
        const ms = { troupe: median(x.ms), pytorch: decMs.pytorch };
        results.push({
          model: { name: mc.name, parameters: params },
          figure: `decode-${v}`,
          troupe: (decTokens / ms.troupe) * 1000,
          pytorch: (decTokens / ms.pytorch) * 1000,
          speedup: ms.pytorch / ms.troupe,
          ms,
          roundMs: { troupe: x.ms, pytorch: rounds.decP },
          gflops: { troupe: decFlops / ms.troupe / 1e6, pytorch: decFlops / ms.pytorch / 1e6 },
          shape: { batch: mc.decode.batch, promptLen: mc.decode.promptLen, newTokens: mc.decode.newTokens, sampling: 'temperature 1', weights: decodeVariants[v].weights, graph: 'fused', blockSize: decodeVariants[v].blockSize, pytorch: 'fp32 eager' },
        });
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
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
  const matmulPeak = { n: 512, troupe: median(peak.troupe), pytorch: median(peak.pytorch) };
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
    loadAverage: { start: loadStart, end: loadavg()[0] },
    // libgomp's OMP_WAIT_POLICY (PyTorch's threads): PASSIVE keeps them from collapsing when the cores are shared.
    ompWaitPolicy: process.env['OMP_WAIT_POLICY'] ?? null,
    versions: { onnxruntimeNode: ortVersion, torch: info.torch, blas: info.blasLibrary },
    matmulPeakGflops: matmulPeak,
    results: await withEarlierRows(results),
  };
  const path = fileURLToPath(new URL('../results/engine.json', import.meta.url));
  await writeFile(path, `${JSON.stringify(out, null, 2)}\n`);
  const rows = results.map((r) => {
    const m = r['model'] as { name: string; parameters: number };
    const g = r['gflops'] as { troupe: number };
    return `| ${m.name} (${(m.parameters / 1e6).toFixed(1)}M) | ${String(r['figure'])} | ${(r['troupe'] as number).toFixed(0)} | ${(r['pytorch'] as number).toFixed(0)} | ${(r['speedup'] as number).toFixed(2)}x | ${g.troupe.toFixed(1)} |`;
  });
  console.log(`\nMatMul peak (512², ${THREADS} threads): Troupe/ORT ${matmulPeak.troupe.toFixed(1)} GFLOP/s, PyTorch ${matmulPeak.pytorch.toFixed(1)} GFLOP/s`);
  console.log('| model | figure | Troupe tok/s | PyTorch tok/s | speedup | Troupe GFLOP/s |');
  console.log('|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  for (const r of results) {
    const rss = r['peakRssMB'] as { troupe: number; pytorch: number } | undefined;
    if (rss) console.log(`${(r['model'] as { name: string }).name} ${String(r['figure'])}: peak RSS Troupe ${(rss.troupe / 1024).toFixed(2)} GiB, PyTorch ${(rss.pytorch / 1024).toFixed(2)} GiB`);
  }
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
    const prev: unknown = JSON.parse(await readFile(fileURLToPath(new URL('../results/engine.json', import.meta.url)), 'utf8'));
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
