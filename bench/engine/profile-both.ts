/**
 * `node --import tsx bench/engine/profile-both.ts` — where each side of `bench:engine` spends one
 * train step and one decode step: Troupe per ONNX Runtime op type (ORT's profiler), PyTorch per aten
 * op (torch.profiler, self time), side by side, at the default shape and at Qwen2.5-0.5B's.
 *
 * Same workloads, threads and kernels as `bench:engine`: the default case's PPO step (B=16 × T=128,
 * full weights, KL and entropy) and decode (64 prompts of 16, 64 new tokens), and the real-vocabulary
 * case's (`bench-real-vocab.ts`: LoRA PPO step on 4 × 128 tokens in micro-batches of 256, decode of
 * 16 prompts of 32, 32 new tokens). Troupe decodes with the plain graph (the `decode` figure) and one
 * rollout decoder (`fused` at the default shape, `int4-b128` at Qwen's); PyTorch is torch_bench.py's
 * fused eager fp32, on the OpenBLAS core `torchBlas` picks. Random weights (seed 1; the values do
 * not change which kernels run). Each side runs its warm-ups, then one step profiled; Troupe's
 * engine profiles every run, so its step's runs are picked by count (kernel-profile.ts).
 *
 * Prints a table per workload (top ops by share, then by op and input shapes) and writes
 * bench/results/profile-both.json: per workload and step, each side's step time in the profiled run,
 * time inside and outside ops, calls, GEMM share, top ops and top (op, shapes); PyTorch's
 * unprofiled step times from the same command; the BLAS choice and the load average at both ends.
 *
 * Options (env): PROFILE_BOTH_SHAPES (default,qwen2.5-0.5b; `tiny` for the test), PROFILE_BOTH_THREADS
 * (2), PROFILE_BOTH_SIDES (troupe,pytorch), PROFILE_BOTH_OUT (the JSON), PROFILE_BOTH_TRACES (ORT's
 * traces, large: default $TMPDIR/troupe-profile-both, one folder per workload, replaced each run).
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultModelConfig } from '../../server/models/default-model.ts';
import { initParameters } from '../../server/models/init.ts';
import { initLoraParameters, parseLoraConfig } from '../../server/models/lora.ts';
import { parseModelConfig, type ModelConfig } from '../../server/models/model-config.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import type { DecodeSettings } from '../../server/models/rollout-decoder.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { randomBatch } from './bench-util.ts';
import { qwen25HalfB, realVocabName, realVocabWorkload } from './bench-real-vocab.ts';
import { graphOfSession, lastPass, readSessionTrace, sideBySide, torchProfileSchema, torchStep, troupeStep, type SessionTrace, type StepProfile } from './kernel-profile.ts';
import { TorchServer } from './torch-server.ts';

const env = process.env;
const SHAPES = (env['PROFILE_BOTH_SHAPES'] ?? `default,${realVocabName}`).split(',');
const THREADS = Number(env['PROFILE_BOTH_THREADS'] ?? 2);
const SIDES = (env['PROFILE_BOTH_SIDES'] ?? 'troupe,pytorch').split(',');
const OUT = env['PROFILE_BOTH_OUT'] ?? fileURLToPath(new URL('../results/profile-both.json', import.meta.url));
const TRACES = env['PROFILE_BOTH_TRACES'] ?? join(tmpdir(), 'troupe-profile-both');
const TOP = 15;

interface Workload {
  readonly config: ModelConfig;
  readonly lora: { rank: number; alpha: number; targets: readonly string[] } | null;
  readonly microBatchTokens?: number;
  readonly train: { batch: number; seqLen: number; warmup: number };
  readonly decode: { batch: number; promptLen: number; newTokens: number; warmup: number };
  /** Troupe's decoders beside the plain graph: a rollout setting per name (bench:engine's figure names). */
  readonly decoders: Record<string, DecodeSettings>;
}

const q = realVocabWorkload;
const workloads: Record<string, Workload> = {
  // bench-engine.ts's default case (its train warm-up is 2 steps, decode 1 run).
  default: { config: defaultModelConfig, lora: null, train: { batch: 16, seqLen: 128, warmup: 2 }, decode: { batch: 64, promptLen: 16, newTokens: 64, warmup: 1 }, decoders: { fused: { weights: 'fp32', fusedDecode: true, blockSize: 32 } } },
  [realVocabName]: { config: qwen25HalfB, lora: q.lora, microBatchTokens: q.microBatchTokens, train: { batch: q.train.batch, seqLen: q.train.seqLen, warmup: q.train.warmup }, decode: { batch: q.decode.batch, promptLen: q.decode.promptLen, newTokens: q.decode.newTokens, warmup: q.decode.warmup }, decoders: { 'int4-b128': q.int4 } },
  // CI-sized: the test's shape (a few seconds a side), every path of the real ones.
  tiny: {
    config: parseModelConfig({ vocabSize: 96, hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 64, tieEmbeddings: true, maxSequenceLength: 64 }),
    lora: { rank: 2, alpha: 4, targets: ['q', 'v'] },
    microBatchTokens: 32,
    train: { batch: 4, seqLen: 16, warmup: 1 },
    decode: { batch: 4, promptLen: 4, newTokens: 6, warmup: 1 },
    decoders: { int4: { weights: 'int4', fusedDecode: true, blockSize: 32 } },
  },
};

const hp = { temperature: 1, clipEps: 0.2, klCoef: 0.05, entCoef: 0.01 };
const say = (line: string) => process.stderr.write(`${line}\n`);

/** One step profiled on each side. */
interface Pair {
  troupe: StepProfile | null;
  pytorch: StepProfile | null;
  /** PyTorch's unprofiled step times in the same command (ms; decode: per single-token step). */
  pytorchUnprofiledMs?: number[];
}

/** Troupe's side of a workload: runs everything with the engine profiling, then picks the steps out of the traces. */
async function troupeSide(name: string, w: Workload): Promise<{ train: StepProfile; decode: Record<string, StepProfile> }> {
  const c = w.config;
  const dir = join(TRACES, name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const engine = await Engine.start({ threads: THREADS, log: () => {}, profileDir: dir });
  const weights = initParameters(c, 1);
  const { batch, promptLen, newTokens } = w.decode;
  const prompts = Array.from({ length: batch }, (_, b) => Int32Array.from({ length: promptLen }, (_, i) => (b * 7919 + i * 104729) % c.vocabSize));
  /** Per decoder: the profiled generation's steps and its wall time per step (host work in generate included). */
  const decoded = new Map<string, { steps: number; stepMs: number }>();
  const generate = async (p: Policy, decoder: string, rollout: boolean) => {
    for (let i = 0; i <= w.decode.warmup; i++) {
      const g = await p.generate(prompts, { maxNewTokens: newTokens, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: i, stopTokens: [], padToken: 0, rollout });
      if (g.tokens.some((t) => t.length !== newTokens)) throw new Error(`${name} ${decoder}: decode produced fewer tokens than asked`);
      say(`${name} Troupe ${decoder} decode ${i + 1}/${w.decode.warmup + 1}: ${(g.decodeMs / 1000).toFixed(2)} s`);
      decoded.set(decoder, { steps: g.decodeRun!.steps, stepMs: g.decodeMs / g.decodeRun!.steps });
    }
  };
  let trainMs = 0;
  try {
    const loraCfg = w.lora ? parseLoraConfig({ rank: w.lora.rank, alpha: w.lora.alpha, targets: [...w.lora.targets] }) : null;
    const policy = await Policy.create(engine, {
      id: name,
      config: c,
      weights,
      lora: loraCfg && w.lora ? { rank: w.lora.rank, alpha: w.lora.alpha, targets: loraCfg.targets } : null,
      ...(loraCfg ? { adapter: initLoraParameters(c, loraCfg, 1) } : {}),
      optimizer: optimizerSchema.parse({ lr: 1e-4, weightDecay: 0.01, maxGradNorm: 1 }),
      kl: true,
      entropy: true,
      ...(w.microBatchTokens ? { microBatch: { sequences: 64, tokens: w.microBatchTokens } } : {}),
    });
    await generate(policy, 'plain', false);
    const raw = randomBatch(c, w.train.batch, w.train.seqLen, 11);
    const old = await policy.score(raw, 1);
    const seqs = raw.map((s, i) => ({ ...s, oldLogp: old[i]!, refLogp: old[i]! }));
    for (let i = 0; i <= w.train.warmup; i++) {
      const s = await policy.update('ppo', seqs, hp);
      if (s.skipped) throw new Error(`${name}: update skipped: ${s.skipped}`);
      say(`${name} Troupe PPO step ${i + 1}/${w.train.warmup + 1}: ${(s.ms / 1000).toFixed(2)} s`);
      trainMs = s.ms;
    }
    await policy.dispose();
    for (const [decoder, settings] of Object.entries(w.decoders)) {
      const p = await Policy.create(engine, { id: `${name}-${decoder}`, config: c, weights, lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: settings });
      await generate(p, decoder, true);
      await p.dispose();
    }
  } finally {
    await engine.close();
  }
  const traces: SessionTrace[] = [];
  for (const f of (await readdir(dir)).filter((f) => f.endsWith('.json'))) traces.push(await readSessionTrace(join(dir, f)));
  const graphs = traces.map((t) => graphOfSession(t.session));
  const only = (graph: string): SessionTrace => {
    const found = traces.filter((_, i) => graphs[i] === graph);
    if (found.length !== 1) throw new Error(`${name}: ${found.length} traces of the ${graph} graph in ${dir} (graphs: ${graphs.join(', ')})`);
    return found[0]!;
  };
  // A train step: every run of the train graph (one per micro-batch) and AdamW in the last update.
  const trainTraces = traces.filter((_, i) => graphs[i]!.startsWith('train-') || graphs[i] === 'adamw');
  const train = troupeStep(trainTraces.map((trace) => ({ trace, runs: lastPass(trace, w.train.warmup + 1) })), 1, trainMs, TOP);
  const decode: Record<string, StepProfile> = {};
  for (const [decoder, graph] of [['plain', 'decode'], ...Object.entries(w.decoders).map(([d, s]) => [d, `decode-${s.weights}`] as const)] as const) {
    const trace = only(graph);
    const { steps, stepMs } = decoded.get(decoder)!;
    // The last generation's single-token steps: its last `steps` runs (its prefill came before them).
    decode[decoder] = troupeStep([{ trace, runs: trace.runs.slice(-steps) }], steps, stepMs, TOP);
  }
  return { train, decode };
}

/** PyTorch's side: the same workload through torch_bench.py with `profile` on. */
async function torchSide(torch: TorchServer, w: Workload): Promise<{ train: StepProfile; trainMs: number[]; decode: StepProfile; decodeStepMs: number[] }> {
  const c = w.config;
  const { batch, promptLen, newTokens, warmup } = w.decode;
  await torch.call({ cmd: 'load', modelConfig: c, seed: 1 });
  const d = await torch.call<{ ms: number[]; prefillMs: number[]; profile: unknown }>({ cmd: 'decode', batch, promptLen, newTokens, temperature: 1, topP: 1, steps: 1, warmup, profile: TOP });
  await torch.call({ cmd: 'load', modelConfig: c, seed: 1, ...(w.lora ? { lora: { rank: w.lora.rank, alpha: w.lora.alpha, targets: [...w.lora.targets] } } : {}) });
  const t = await torch.call<{ ms: number[]; profile: unknown }>({ cmd: 'trainStep', batch: w.train.batch, seqLen: w.train.seqLen, steps: 1, warmup: w.train.warmup, loss: 'ppo', profile: TOP });
  return {
    train: torchStep(torchProfileSchema.parse(t.profile)),
    trainMs: t.ms,
    decode: torchStep(torchProfileSchema.parse(d.profile)),
    decodeStepMs: d.ms.map((ms, i) => (ms - d.prefillMs[i]!) / (newTokens - 1)),
  };
}

async function main(): Promise<void> {
  const unknown = SHAPES.filter((s) => !(s in workloads));
  if (unknown.length) throw new Error(`PROFILE_BOTH_SHAPES: unknown ${unknown.join(', ')} (known: ${Object.keys(workloads).join(', ')})`);
  const loadStart = loadavg()[0] ?? 0;
  const withTorch = SIDES.includes('pytorch');
  const started = withTorch ? await TorchServer.startWithBestBlas(THREADS, say) : null;
  const results: Record<string, { train: Pair; decode: Record<string, Pair> }> = {};
  const tables: string[] = [];
  try {
    for (const name of SHAPES) {
      const w = workloads[name]!;
      // Troupe first, its engine closed before PyTorch loads: at Qwen's size both hold several GB.
      const tr = SIDES.includes('troupe') ? await troupeSide(name, w) : null;
      const pt = started ? await torchSide(started.server, w) : null;
      const decode: Record<string, Pair> = {};
      for (const decoder of ['plain', ...Object.keys(w.decoders)]) decode[decoder] = { troupe: tr?.decode[decoder] ?? null, pytorch: pt?.decode ?? null, ...(pt ? { pytorchUnprofiledMs: pt.decodeStepMs } : {}) };
      results[name] = { train: { troupe: tr?.train ?? null, pytorch: pt?.train ?? null, ...(pt ? { pytorchUnprofiledMs: pt.trainMs } : {}) }, decode };
      const r = results[name]!;
      const trainTitle = `${name}: PPO train step (${w.lora ? `LoRA r${w.lora.rank}, ` : ''}${w.train.batch} × ${w.train.seqLen} tokens)`;
      tables.push(sideBySide(trainTitle, r.train.troupe, r.train.pytorch, TOP), sideBySide(`${trainTitle}, by op and input shapes`, r.train.troupe, r.train.pytorch, TOP, 'shapes'));
      for (const [decoder, p] of Object.entries(decode)) {
        const title = `${name}: one decode step (batch ${w.decode.batch}, prompt ${w.decode.promptLen}, ${w.decode.newTokens} new tokens), Troupe ${decoder} vs PyTorch fp32 eager`;
        tables.push(sideBySide(title, p.troupe, p.pytorch, TOP), sideBySide(`${title}, by op and input shapes`, p.troupe, p.pytorch, 8, 'shapes'));
      }
      console.log(tables.slice(-2 - 2 * Object.keys(decode).length).join('\n'));
    }
  } finally {
    await started?.server.close();
  }
  const loadAverage = { start: loadStart, end: loadavg()[0] ?? 0 };
  const out = {
    date: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length },
    threads: THREADS,
    loadAverage,
    blas: started ? { cpu: started.blas.cpu, pytorch: { ...started.blas.choice, serverCore: started.info.blasCore }, troupe: started.blas.troupe } : null,
    note: 'per step: stepMs is the step as its caller timed it in the profiled run (profiler cost included); opMs the time inside ops (Troupe: ORT node time; PyTorch: self time of every aten op); shares are of opMs; PyTorch calls count the top rows only; pytorchUnprofiledMs: the same command\'s unprofiled steps',
    workloads: Object.fromEntries(SHAPES.map((n) => [n, { shape: { train: workloads[n]!.train, decode: workloads[n]!.decode, lora: workloads[n]!.lora, microBatchTokens: workloads[n]!.microBatchTokens ?? null, decoders: workloads[n]!.decoders }, ...results[n]! }])),
  };
  await writeFile(OUT, `${JSON.stringify(out, null, 2)}\n`);
  console.log(`\nload average ${loadAverage.start.toFixed(2)} -> ${loadAverage.end.toFixed(2)} on ${cpus().length} cores; wrote ${OUT}`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
