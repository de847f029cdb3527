/**
 * The real-vocabulary case of `npm run bench:engine`: a random-weight model at Qwen2.5-0.5B's
 * shapes (hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4864, vocabulary 151936, tied
 * embeddings, RoPE θ 1e6, q/k/v bias; 494M parameters, 1.98 GB in float32) is loaded, generates,
 * and takes LoRA PPO updates (old and reference log-probs scored first, as the trainer does),
 * on the same thread count as PyTorch eager does the same on the same shapes. Reports decode
 * and LoRA-train tokens/s and each process's peak RSS (the figure issue 12 bounds: 8 GB).
 *
 * Then the same prompts, new tokens and sampling decoded as an int4 training rollout (fused graph,
 * MatMulNBits, blocks of 128: `rollout: { weights: "int4", blockSize: 128 }`) by a second policy
 * on the same random weights, created after the first is disposed so the two never hold 2 GB of
 * weights each at once; figure `decode-int4-b128`, against the same PyTorch eager fp32 decode.
 * Its warm-up run includes quantizing and building the graph (a trainer pays that after each
 * update). Its peak RSS is that phase's own where Linux lets the high-water mark be reset.
 *
 * The sides are interleaved timing by timing, as in the small cases: PyTorch, Troupe, PyTorch, …,
 * PyTorch, each PyTorch call one timed run after an untimed one of its own, and each figure is the
 * median of Troupe's bracketed speedups (bench/stats.ts `bracketedSpeedups`), with the ratio of the
 * two sides' medians beside it (the estimator before 2026-11-28, when this case was timed Troupe
 * first, PyTorch after). So both processes hold the model at once: about 15 GB of peak RSS
 * together during the LoRA step. Weights are each side's own random initialisation (N(0, 0.02²),
 * norms 1): a 2 GB safetensors file just to share random numbers would cost more than the timing
 * it protects, and random weights give both sides the same FLOPs. Run alone:
 * `BENCH_MODELS=qwen2.5-0.5b npm run bench:engine` (about 8 minutes on 2 idle cores).
 *
 * Troupe scores and trains in micro-batches of at most BENCH_QWEN_MICRO_TOKENS padded tokens
 * (`training.microBatchTokens`; 256, so two passes per 512-token update); PyTorch takes the
 * batch in one pass. On a shared machine the wall times move with other processes' load, so
 * each row also records the CPU utilisation of each side (CPU seconds ÷ (wall seconds ×
 * threads)) over its timed region.
 *
 * Options (env): BENCH_QWEN_TRAIN_STEPS (3), BENCH_QWEN_DECODE_RUNS (3), BENCH_QWEN_NEW_TOKENS (32),
 * BENCH_QWEN_MICRO_TOKENS (256). A quick end-to-end check: BENCH_QWEN_TRAIN_STEPS=1
 * BENCH_QWEN_DECODE_RUNS=1 BENCH_QWEN_NEW_TOKENS=4 (the figures then mean little).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { initParameters } from '../../server/models/init.ts';
import { initLoraParameters, parseLoraConfig } from '../../server/models/lora.ts';
import { parameterShapes, parseModelConfig, type ModelConfig } from '../../server/models/model-config.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import type { DecodeSettings } from '../../server/models/rollout-decoder.ts';
import type { Engine } from '../../server/runtime/engine.ts';
import { bracketedSpeedups } from '../stats.ts';
import { randomBatch, speedupFigures } from './bench-util.ts';
import type { TorchServer } from './torch-server.ts';

export const realVocabName = 'qwen2.5-0.5b';

/** Qwen2.5-0.5B's architecture (config.json of Qwen/Qwen2.5-0.5B-Instruct). */
export const qwen25HalfB: ModelConfig = parseModelConfig({
  vocabSize: 151936,
  hiddenSize: 896,
  numLayers: 24,
  numHeads: 14,
  numKvHeads: 2,
  intermediateSize: 4864,
  tieEmbeddings: true,
  attentionBias: true,
  ropeTheta: 1_000_000,
  rmsNormEps: 1e-6,
  maxSequenceLength: 4096,
});

const TRAIN = { batch: 4, seqLen: 128, steps: Number(process.env['BENCH_QWEN_TRAIN_STEPS'] ?? 3), warmup: 1 };
const DECODE = { batch: 16, promptLen: 32, newTokens: Number(process.env['BENCH_QWEN_NEW_TOKENS'] ?? 32), runs: Number(process.env['BENCH_QWEN_DECODE_RUNS'] ?? 3), warmup: 1 };
const MICRO_TOKENS = Number(process.env['BENCH_QWEN_MICRO_TOKENS'] ?? 256);
const LORA = { rank: 8, alpha: 16, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const };
/** The int4 rollout decoder timed beside fp32: what `rollout: { weights: "int4", blockSize: 128 }` builds. */
const INT4: DecodeSettings = { weights: 'int4', fusedDecode: true, blockSize: 128 };

/** The case's workload, for `profile-both.ts` to profile the same steps. */
export const realVocabWorkload = { train: TRAIN, decode: DECODE, microBatchTokens: MICRO_TOKENS, lora: LORA, int4: INT4 } as const;

const mb = (kb: number) => kb / 1024;
const rssMB = () => mb(process.resourceUsage().maxRSS);

/**
 * Runs V8's collector so the main thread's copy of the weights is freed once the engine worker
 * holds its own, as in a trainer that drops its copy after creating the policies. (Without
 * allocations on the main thread nothing else would trigger a collection.)
 */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  if (typeof gc === 'function') gc();
}

/**
 * Resets this process's peak-RSS high-water mark (Linux: writing 5 to /proc/self/clear_refs), so a
 * later phase's peak can be read on its own with `phasePeakMB`; false where that is not possible.
 */
function resetPeakRss(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/** A memory line of /proc/self/status in MB (Linux), or the process's peak where it cannot be read. */
function statusMB(field: 'VmHWM' | 'VmRSS'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
    if (m) return mb(Number(m[1]));
  } catch {
    // Not Linux: fall through to the process's peak.
  }
  return rssMB();
}

/** Peak RSS (MB) since `resetPeakRss` (VmHWM), or the whole process's where it cannot be read. */
const phasePeakMB = (): number => statusMB('VmHWM');
/** This process's RSS now (MB; Linux), or its peak where that cannot be read. */
const currentRssMB = (): number => statusMB('VmRSS');

/** CPU seconds of this process (every thread: ONNX Runtime's pool included) over `fn`, with its wall time. */
async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; cpuSec: number }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const c = process.cpuUsage(c0);
  return { value, ms: performance.now() - t0, cpuSec: (c.user + c.system) / 1e6 };
}


/** FLOPs of one forward token (weight GEMMs incl. the LM head, plus attention over `ctx` keys). */
function forwardTokenFlops(c: ModelConfig, ctx: number): number {
  const D = c.hiddenSize / c.numHeads;
  const kv = c.numKvHeads ?? c.numHeads;
  const perLayer = c.hiddenSize * (c.numHeads * D + 2 * kv * D) + c.numHeads * D * c.hiddenSize + 3 * c.hiddenSize * c.intermediateSize;
  return 2 * (c.numLayers * perLayer + c.vocabSize * c.hiddenSize) + 4 * c.numHeads * D * ctx * c.numLayers;
}

export interface RealVocabResult {
  readonly rows: Array<Record<string, unknown>>;
  readonly log: string[];
}

export async function benchRealVocab(engine: Engine, torch: TorchServer, threads: number): Promise<RealVocabResult> {
  const c = qwen25HalfB;
  const log: string[] = [];
  const say = (line: string) => {
    log.push(line);
    process.stderr.write(`${realVocabName}: ${line}\n`);
  };
  const rssStart = rssMB();
  let t = performance.now();
  // Scoped so the main thread's copy can be collected once the engine holds its own.
  const policy = await (async () => {
    const weights = initParameters(c, 1);
    const initMs = performance.now() - t;
    t = performance.now();
    const loraCfg = parseLoraConfig({ rank: LORA.rank, alpha: LORA.alpha, targets: [...LORA.targets] });
    const p = await Policy.create(engine, {
      id: realVocabName,
      config: c,
      weights,
      lora: { rank: LORA.rank, alpha: LORA.alpha, targets: loraCfg.targets },
      adapter: initLoraParameters(c, loraCfg, 1),
      optimizer: optimizerSchema.parse({ lr: 1e-4, weightDecay: 0.01, maxGradNorm: 1 }),
      kl: true,
      entropy: true,
      microBatch: { sequences: 64, tokens: MICRO_TOKENS },
    });
    say(`random init ${(initMs / 1000).toFixed(1)} s, upload ${((performance.now() - t) / 1000).toFixed(1)} s`);
    return p;
  })();
  collectGarbage();
  const params = (await engine.stats()).residentBytes;
  say(`resident after load: ${(params / 2 ** 30).toFixed(2)} GiB; process peak RSS so far ${(rssMB() / 1024).toFixed(2)} GiB`);

  // Decode: the warm-up run also compiles the graph and creates the session.
  const prompts = Array.from({ length: DECODE.batch }, (_, b) => Int32Array.from({ length: DECODE.promptLen }, (_, i) => (b * 7919 + i * 104729) % c.vocabSize));
  const decodeCpu = { sec: 0, wallSec: 0 };
  const int4Cpu = { sec: 0, wallSec: 0 };
  /** One Troupe decode run (ms), its CPU time added to `cpu`; `rollout`: sample with the policy's rollout weights. */
  const decodeOnce = async (p: Policy, label: string, rollout: boolean, seed: number, cpu: { sec: number; wallSec: number } | null): Promise<number> => {
    const { value: g, ms, cpuSec } = await timed(() => p.generate(prompts, { maxNewTokens: DECODE.newTokens, sampling: { temperature: 1, topP: 1, topK: 0 }, seed, stopTokens: [], padToken: 0, rollout }));
    if (g.tokens.some((x) => x.length !== DECODE.newTokens)) throw new Error(`${label} decode produced fewer tokens than asked`);
    say(`${label} decode: ${(ms / 1000).toFixed(1)} s, ${cpuSec.toFixed(1)} CPU s${cpu ? '' : ' (warm-up, includes compiling)'}`);
    if (cpu) {
      cpu.sec += cpuSec;
      cpu.wallSec += ms / 1000;
    }
    return ms;
  };
  // PyTorch: one timing a call, after an untimed run of its own; CPU and peak RSS over every call of a figure.
  // ('int4' is PyTorch's fp32 decode again, beside the int4 phase; its process's peak is for life, so
  // it includes the LoRA step's before it.)
  const torchCpu = { decode: { sec: 0, wallSec: 0 }, train: { sec: 0, wallSec: 0 }, int4: { sec: 0, wallSec: 0 } };
  const torchPeak = { decode: 0, train: 0, int4: 0 };
  const torchOnce = async (cmd: Record<string, unknown>, figure: 'decode' | 'train' | 'int4'): Promise<number> => {
    const r = await torch.call<{ ms: number[]; maxRssMB: number; cpuSec: number; wallSec: number }>({ ...cmd, steps: 1, warmup: 1 });
    torchCpu[figure].sec += r.cpuSec;
    torchCpu[figure].wallSec += r.wallSec;
    torchPeak[figure] = Math.max(torchPeak[figure], r.maxRssMB);
    say(`PyTorch ${figure}: ${(r.ms[0]! / 1000).toFixed(1)} s`);
    return r.ms[0]!;
  };
  const { batch, promptLen, newTokens } = DECODE;
  const torchDecode = (figure: 'decode' | 'int4') => () => torchOnce({ cmd: 'decode', batch, promptLen, newTokens, temperature: 1, topP: 1 }, figure);

  await torch.call({ cmd: 'load', modelConfig: c, seed: 1 });
  for (let i = 0; i < DECODE.warmup; i++) await decodeOnce(policy, 'fp32', false, i, null);
  const dec = await interleave(DECODE.runs, (i) => decodeOnce(policy, 'fp32', false, DECODE.warmup + i, decodeCpu), torchDecode('decode'));
  const rssAfterDecode = rssMB();

  // LoRA PPO: old and reference log-probs, then updates (the warm-up compiles).
  const raw = randomBatch(c, TRAIN.batch, TRAIN.seqLen, 11);
  let t0 = performance.now();
  const old = await policy.score(raw, 1);
  const scoreMs = performance.now() - t0;
  t0 = performance.now();
  const ref = await policy.score(raw, 1, true);
  const refMs = performance.now() - t0;
  say(`score ${(scoreMs / 1000).toFixed(1)} s, reference score ${(refMs / 1000).toFixed(1)} s (each includes compiling)`);
  const seqs = raw.map((q, i) => ({ ...q, oldLogp: old[i]!, refLogp: ref[i]! }));
  const hp = { temperature: 1, clipEps: 0.2, klCoef: 0.05, entCoef: 0.01 };
  const trainCpu = { sec: 0, wallSec: 0 };
  const updateOnce = async (warmUp: boolean): Promise<number> => {
    const { value: s, cpuSec } = await timed(() => policy.update('ppo', seqs, hp));
    if (s.skipped) throw new Error(`LoRA update skipped: ${s.skipped}`);
    say(`LoRA PPO step: ${(s.ms / 1000).toFixed(1)} s, ${cpuSec.toFixed(1)} CPU s, loss ${s.loss.toFixed(4)}, grad norm ${s.gradNorm.toFixed(4)}${warmUp ? ' (warm-up, includes compiling)' : ''}`);
    if (!warmUp) {
      trainCpu.sec += cpuSec;
      trainCpu.wallSec += s.ms / 1000;
    }
    return s.ms;
  };
  for (let i = 0; i < TRAIN.warmup; i++) await updateOnce(true);
  await torch.call({ cmd: 'load', modelConfig: c, seed: 1, lora: { rank: LORA.rank, alpha: LORA.alpha, targets: [...LORA.targets] } });
  const trainTimes = await interleave(TRAIN.steps, () => updateOnce(false), () => torchOnce({ cmd: 'trainStep', batch: TRAIN.batch, seqLen: TRAIN.seqLen, loss: 'ppo' }, 'train'));
  const troupePeak = rssMB();
  say(`Troupe peak RSS ${(troupePeak / 1024).toFixed(2)} GiB (after decode ${(rssAfterDecode / 1024).toFixed(2)}, at start ${(rssStart / 1024).toFixed(2)})`);
  await policy.dispose();
  collectGarbage();

  // int4 rollout decode of the same random weights (same seed) by a policy of its own, without
  // LoRA: merging an adapter changes the weights quantized, not the graph or its cost. PyTorch
  // decodes fp32 again beside it, so this figure has brackets of its own.
  const phaseReset = resetPeakRss();
  const rssBeforeInt4 = currentRssMB();
  say(`before the int4 phase: ${((await engine.stats()).residentBytes / 2 ** 30).toFixed(2)} GiB resident in the engine, process RSS ${(rssBeforeInt4 / 1024).toFixed(2)} GiB`);
  const int4Policy = await Policy.create(engine, { id: `${realVocabName}-int4`, config: c, weights: initParameters(c, 1), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: INT4 });
  collectGarbage();
  await torch.call({ cmd: 'load', modelConfig: c, seed: 1 });
  const int4Label = `int4 (blocks of ${INT4.blockSize})`;
  for (let i = 0; i < DECODE.warmup; i++) await decodeOnce(int4Policy, int4Label, true, i, null);
  const int4Dec = await interleave(DECODE.runs, (i) => decodeOnce(int4Policy, int4Label, true, DECODE.warmup + i, int4Cpu), torchDecode('int4'));
  const int4Peak = phasePeakMB();
  say(`int4 phase peak RSS ${(int4Peak / 1024).toFixed(2)} GiB${phaseReset ? '' : ' (whole process: the high-water mark could not be reset)'}; last quantize + build ${(int4Policy.rolloutRebuildMs / 1000).toFixed(1)} s`);
  await int4Policy.dispose();
  collectGarbage();

  const trainTokens = TRAIN.batch * TRAIN.seqLen;
  const decTokens = DECODE.batch * DECODE.newTokens;
  // LoRA step ≈ 2 forwards: the backward takes activation gradients through every frozen GEMM
  // (one more forward's worth) and no weight gradients besides the adapters' (negligible).
  const trainFlops = 2 * TRAIN.batch * Array.from({ length: TRAIN.seqLen }, (_, i) => forwardTokenFlops(c, i + 1)).reduce((a, b) => a + b, 0);
  const decFlops = DECODE.batch * Array.from({ length: DECODE.newTokens }, (_, i) => forwardTokenFlops(c, DECODE.promptLen + i)).reduce((a, b) => a + b, 0);
  const model = { name: realVocabName, parameters: parameterShapes(c).reduce((n, [, s]) => n + s.reduce((a, b) => a * b, 1), 0) };
  const date = new Date().toISOString();
  // PyTorch's CPU figures cover whole calls (each call's untimed run and, for training, the forward
  // that computes the old log-probs too); Troupe's the timed runs only.
  const use = (cpu: { sec: number; wallSec: number }) => cpu.sec / (cpu.wallSec * threads);
  const trainUse = { troupe: use(trainCpu), pytorch: use(torchCpu.train) };
  const decUse = { troupe: use(decodeCpu), pytorch: use(torchCpu.decode) };
  const int4Use = { troupe: use(int4Cpu), pytorch: use(torchCpu.int4) };
  say(`CPU utilisation: train Troupe ${trainUse.troupe.toFixed(2)}, PyTorch ${trainUse.pytorch.toFixed(2)}; decode Troupe ${decUse.troupe.toFixed(2)} (int4 ${int4Use.troupe.toFixed(2)}), PyTorch ${decUse.pytorch.toFixed(2)} (beside int4 ${int4Use.pytorch.toFixed(2)})`);
  /** A figure's row, as bench-engine.ts writes its own: the median bracketed speedup, with the old ratio of medians beside it. */
  /** A figure's row, as bench-engine.ts writes its own (speedupFigures). */
  const row = (figure: string, t: Interleaved, tokens: number, flopCount: number, rest: Record<string, unknown>): Record<string, unknown> => {
    const r2 = (xs: number[]): number[] => xs.map((x) => Math.round(x * 100) / 100);
    return { model, figure, ...speedupFigures(t.troupe, t.pytorch, bracketedSpeedups(t.troupe, t.pytorch), tokens, flopCount), timingsMs: [{ troupe: r2(t.troupe), pytorch: r2(t.pytorch) }], ...rest, date };
  };
  const decShape = { batch: DECODE.batch, promptLen: DECODE.promptLen, newTokens: DECODE.newTokens, sampling: 'temperature 1' };
  return {
    log,
    rows: [
      row('loraTrainStep', trainTimes, trainTokens, trainFlops, {
        peakRssMB: { troupe: troupePeak, pytorch: torchPeak.train },
        cpuUtilization: trainUse,
        shape: { batch: TRAIN.batch, seqLen: TRAIN.seqLen, loss: 'ppo', lora: LORA, optimizer: 'adamw', troupeMicroBatchTokens: MICRO_TOKENS, scoredBefore: 'old and reference log-probs, not timed here' },
      }),
      row('decode', dec, decTokens, decFlops, {
        peakRssMB: { troupe: rssAfterDecode, pytorch: torchPeak.decode },
        cpuUtilization: decUse,
        shape: decShape,
      }),
      row(`decode-int4-b${INT4.blockSize}`, int4Dec, decTokens, decFlops, {
        peakRssMB: { troupe: int4Peak, pytorch: torchPeak.decode },
        peakRssScope: phaseReset ? 'Troupe: the int4 phase (policy created, quantized, decoded), on top of rssAtPhaseStartMB; PyTorch: its fp32 decode (the first decode phase)' : 'whole process',
        rssAtPhaseStartMB: rssBeforeInt4,
        cpuUtilization: int4Use,
        shape: { ...decShape, weights: INT4.weights, graph: 'fused', blockSize: INT4.blockSize, lora: 'none (merged before quantizing in training)', pytorch: 'fp32 eager, timed again beside this phase' },
      }),
    ],
  };
}

/** One figure's timings, PyTorch first and last with one Troupe timing between each two PyTorch ones. */
interface Interleaved {
  readonly troupe: number[];
  readonly pytorch: number[];
}

/**
 * Times the two sides alternately, PyTorch, Troupe, PyTorch, …, PyTorch (`n` Troupe timings), so each
 * Troupe timing has a PyTorch timing just before and just after it (bracketedSpeedups).
 */
async function interleave(n: number, troupe: (i: number) => Promise<number>, pytorch: () => Promise<number>): Promise<Interleaved> {
  const out: Interleaved = { troupe: [], pytorch: [await pytorch()] };
  for (let i = 0; i < n; i++) {
    out.troupe.push(await troupe(i));
    out.pytorch.push(await pytorch());
  }
  return out;
}
