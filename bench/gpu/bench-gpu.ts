/**
 * `npm run bench:gpu` — Troupe on one GPU (ONNX Runtime's WebGPU provider, fp32) against what an
 * ML engineer would run instead on the same GPU: PyTorch eager in bf16 with SDPA attention and
 * fp32 LoRA adapters (`torch_gpu_bench.py`), at Qwen2.5-0.5B's and Qwen3-1.7B's shapes with random
 * weights (issue 35). Per model, each side:
 *   - LoRA PPO step (r16, α32, q/k/v/o/gate/up/down): B sequences × T tokens, forward → loss →
 *     backward in micro-batches of BENCH_GPU_MICRO_TOKENS tokens with gradients accumulated, global
 *     clip, AdamW. Old and reference log-probs are scored first, untimed.
 *   - Decode: B rows × N sampled tokens (temperature 1) after a P-token random prompt, KV cache.
 *     Troupe decodes with the fused graph (`decode: {fusedDecode: true}`, `rollout: true`; LoRA merged
 *     or fed as an input when the weights are too large to bake) of the same LoRA policy; with
 *     BENCH_GPU_DECODE=fused,fp16 also the fp16 rollout weights. PyTorch decodes the base weights.
 *   - Peak device memory: PyTorch's allocator peak (allocated and reserved, per phase); for Troupe
 *     the peak of `nvidia-smi`'s used memory sampled every 200 ms while its engine ran, less the
 *     used memory before the engine started (no PyTorch process is alive then).
 * PyTorch runs first in a process of its own per model (so its memory is gone before Troupe's
 * engine starts), then Troupe. Every figure is a median over timed rounds after warm-up rounds
 * (the first Troupe round compiles graphs and creates sessions). A phase times rounds until
 * BENCH_GPU_PHASE_S seconds have passed (at least one); a phase that takes longer than
 * BENCH_GPU_PHASE_TIMEOUT_S, or fails (out of device memory, say), is recorded with its error and
 * the bench goes on. The JSON is rewritten after every phase, so a run killed on a deadline keeps
 * what finished.
 *
 * Env: BENCH_GPU_MODELS (qwen2.5-0.5b,qwen3-1.7b), BENCH_GPU_PPO (64x512), BENCH_GPU_DECODE_SHAPE
 * (64x256x256: rows × prompt × new), BENCH_GPU_MICRO_TOKENS (4096), BENCH_GPU_ROUNDS (3; Troupe
 * BENCH_GPU_TROUPE_ROUNDS, 2), BENCH_GPU_PHASE_S (60), BENCH_GPU_PHASE_TIMEOUT_S (300),
 * BENCH_GPU_DECODE (fused), BENCH_GPU_OUT (bench/results/gpu.json), BENCH_GPU_PROVIDER (Troupe's:
 * webgpu; cpu in the tiny form), BENCH_GPU_SIDES (pytorch,troupe), BENCH_GPU_PHASES (Troupe's: ppo,decode),
 * BENCH_GPU_DECODE_WARMUP_TOKENS (2: the warm-up decode builds graphs and sessions on a short run,
 * so build and decode are timed apart). BENCH_GPU_DECODE may add host-sampling: the fused graph
 * with every token drawn on the host (its logits downloaded each step), the baseline for the
 * device-side sampling that the fused graph does on WebGPU by default.
 * BENCH_GPU_PROFILE=1: profile mode — Troupe's engine profiles every session it creates (ONNX
 * Runtime's profiler: `EngineOptions.profileDir`), the traces (large) go to
 * `<BENCH_GPU_PROFILE_TRACES: $TMPDIR/troupe-bench-gpu-profile>/<model>/`, and `profile-summary.ts`
 * writes per session, over its runs after the first: kernels per run, time by op type and class,
 * memcpy nodes, the host gap (run wall time less node time), and on WebGPU the GPU kernel times
 * and MatMul throughput, to `<out>-profile.json` (BENCH_GPU_PROFILE_OUT), with a headline per
 * session in the results. The profiler adds its own cost to every kernel: profile-mode timings
 * are not the bench's figures.
 * BENCH_GPU_TINY=1: the CI-sized form — tiny models of the same two architectures, Troupe on the
 * CPU provider and PyTorch fp32 on the CPU, written to bench/results/gpu-tiny.json.
 * On the lent GPU machine: bench/gpu/run-on-device.sh (after bench/gpu/pack-for-device.sh here).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { initRule } from '../../server/models/init.ts';
import { initLoraParameters, parseLoraConfig } from '../../server/models/lora.ts';
import { parameterShapes, parseModelConfig, type ModelConfig } from '../../server/models/model-config.ts';
import { optimizerSchema } from '../../server/models/optimizer.ts';
import { Policy } from '../../server/models/policy.ts';
import type { DecodeSettings } from '../../server/models/rollout-decoder.ts';
import { Engine } from '../../server/runtime/engine.ts';
import { qwen25HalfB } from '../engine/bench-real-vocab.ts';
import { benchPython, randomBatch } from '../engine/bench-util.ts';
import { median } from '../stats.ts';
import { torchBlas, type TorchBlas } from '../engine/torch-blas.ts';
import { profileTable, summarizeFiles, type SessionProfile } from './profile-summary.ts';

const env = process.env;
const TINY = env['BENCH_GPU_TINY'] === '1';

/** Qwen3-1.7B's architecture (config.json of Qwen/Qwen3-1.7B): per-head q/k RMSNorm, head_dim 128. */
export const qwen3OnePointSevenB: ModelConfig = parseModelConfig({
  vocabSize: 151936,
  hiddenSize: 2048,
  numLayers: 28,
  numHeads: 16,
  numKvHeads: 8,
  headDim: 128,
  intermediateSize: 6144,
  tieEmbeddings: true,
  attentionBias: false,
  qkNorm: true,
  ropeTheta: 1_000_000,
  rmsNormEps: 1e-6,
  maxSequenceLength: 4096,
});

/** The tiny CI stand-ins: the same two architectures (q/k/v bias; qkNorm with headDim ≠ C/H). */
const tinyModels: Record<string, ModelConfig> = {
  'tiny-qwen2.5': parseModelConfig({ vocabSize: 512, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 128, tieEmbeddings: true, attentionBias: true, ropeTheta: 1_000_000, rmsNormEps: 1e-6, maxSequenceLength: 256 }),
  'tiny-qwen3': parseModelConfig({ vocabSize: 512, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32, intermediateSize: 128, tieEmbeddings: true, attentionBias: false, qkNorm: true, ropeTheta: 1_000_000, rmsNormEps: 1e-6, maxSequenceLength: 256 }),
};
const gpuModels: Record<string, ModelConfig> = { 'qwen2.5-0.5b': qwen25HalfB, 'qwen3-1.7b': qwen3OnePointSevenB };
const MODELS = TINY ? tinyModels : gpuModels;
const MODEL_NAMES = (env['BENCH_GPU_MODELS'] ?? Object.keys(MODELS).join(',')).split(',').filter((n) => n in MODELS);

const dims = (s: string, n: number): number[] => {
  const v = s.split('x').map(Number);
  if (v.length !== n || v.some((x) => !Number.isSafeInteger(x) || x < 1)) throw new Error(`expected ${n} positive integers joined by 'x', got '${s}'`);
  return v;
};
const [PPO_B, PPO_T] = dims(env['BENCH_GPU_PPO'] ?? (TINY ? '4x32' : '64x512'), 2) as [number, number];
const [DEC_B, DEC_P, DEC_N] = dims(env['BENCH_GPU_DECODE_SHAPE'] ?? (TINY ? '4x8x8' : '64x256x256'), 3) as [number, number, number];
const MICRO_TOKENS = Number(env['BENCH_GPU_MICRO_TOKENS'] ?? (TINY ? 64 : 4096));
const ROUNDS = Number(env['BENCH_GPU_ROUNDS'] ?? 3);
const TROUPE_ROUNDS = Number(env['BENCH_GPU_TROUPE_ROUNDS'] ?? 2);
const PHASE_S = Number(env['BENCH_GPU_PHASE_S'] ?? (TINY ? 10 : 60));
const PHASE_TIMEOUT_S = Number(env['BENCH_GPU_PHASE_TIMEOUT_S'] ?? 300);
const DECODE_VARIANTS = (env['BENCH_GPU_DECODE'] ?? 'fused').split(',').filter((v) => v === 'fused' || v === 'fp16' || v === 'plain' || v === 'host-sampling');
/** Tokens the warm-up decode generates (it builds the graph and compiles shaders; 2 by default). */
const DEC_WARMUP_TOKENS = Number(env['BENCH_GPU_DECODE_WARMUP_TOKENS'] ?? 2);
/** Which of Troupe's phases run (BENCH_GPU_PHASES: ppo,decode). */
const PHASES = (env['BENCH_GPU_PHASES'] ?? 'ppo,decode').split(',');
const OUT = env['BENCH_GPU_OUT'] ?? fileURLToPath(new URL(`../results/${TINY ? 'gpu-tiny' : 'gpu'}.json`, import.meta.url));
/** Which sides run (BENCH_GPU_SIDES: pytorch,troupe). */
const SIDES = (env['BENCH_GPU_SIDES'] ?? 'pytorch,troupe').split(',');
/** Profile mode (BENCH_GPU_PROFILE=1): traces under PROFILE_DIR/<model>, summaries in PROFILE_OUT. */
const PROFILE = env['BENCH_GPU_PROFILE'] === '1';
const PROFILE_DIR = env['BENCH_GPU_PROFILE_TRACES'] ?? join(tmpdir(), 'troupe-bench-gpu-profile');
const PROFILE_OUT = env['BENCH_GPU_PROFILE_OUT'] ?? `${OUT.replace(/\.json$/, '')}-profile.json`;
const profiles: Record<string, Record<string, SessionProfile> | { error: string }> = {};
const LORA = { rank: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const };
const HP = { temperature: 1, clipEps: 0.2, klCoef: 0.05, entCoef: 0.01 };

const say = (line: string) => process.stderr.write(`[bench:gpu] ${line}\n`);

/**
 * Random weights by each parameter's init rule (norms 1, biases 0, matrices std 0.02), filled by
 * tiling one block of uniform values rather than drawing every value (`initParameters` draws 2·10⁹
 * normals for 1.7B: minutes of one core on the GPU machine's clock). Timing does not depend on the
 * values; the tile length is prime so rows of a matrix do not repeat.
 */
function benchWeights(c: ModelConfig): Map<string, Float32Array> {
  const block = new Float32Array(1_000_003);
  let s = 12345;
  const a = 0.02 * Math.sqrt(3); // uniform(-a, a) has standard deviation 0.02
  for (let i = 0; i < block.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    block[i] = (s / 2 ** 32) * 2 * a - a;
  }
  const out = new Map<string, Float32Array>();
  let shift = 0;
  for (const [name, shape] of parameterShapes(c)) {
    const n = shape.reduce((x, y) => x * y, 1);
    const data = new Float32Array(n);
    const rule = initRule(c, name, shape);
    if (rule.kind === 'ones') data.fill(1);
    else if (rule.kind === 'normal') {
      for (let o = 0; o < n; ) {
        const start = shift++ % block.length;
        const len = Math.min(n - o, block.length - start);
        data.set(block.subarray(start, start + len), o);
        o += len;
      }
      shift = (shift * 7919) % block.length;
    }
    out.set(name, data);
  }
  return out;
}

const parameterCount = (c: ModelConfig) => parameterShapes(c).reduce((n, [, s]) => n + s.reduce((a, b) => a * b, 1), 0);


/** Samples the GPU's used memory (MiB) with nvidia-smi; null off NVIDIA machines. */
class GpuMemory {
  peak = 0;
  private proc: ChildProcess | null = null;
  readonly base: number | null;
  constructor() {
    this.base = GpuMemory.now();
  }
  static now(): number | null {
    const r = spawnSync('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits', '-i', '0'], { encoding: 'utf8' });
    const v = r.status === 0 ? Number(r.stdout.trim()) : NaN;
    return Number.isFinite(v) ? v : null;
  }
  static gpuName(): string | null {
    const r = spawnSync('nvidia-smi', ['--query-gpu=name,driver_version,memory.total', '--format=csv,noheader', '-i', '0'], { encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : null;
  }
  start(): void {
    if (this.base === null) return;
    this.peak = this.base;
    this.proc = spawn('nvidia-smi', ['--query-gpu=memory.used', '--format=csv,noheader,nounits', '-i', '0', '-lms', '200'], { stdio: ['ignore', 'pipe', 'ignore'] });
    createInterface({ input: this.proc.stdout! }).on('line', (l) => {
      const v = Number(l.trim());
      if (Number.isFinite(v) && v > this.peak) this.peak = v;
    });
    this.proc.on('error', () => {});
  }
  stop(): number | null {
    this.proc?.kill();
    const now = GpuMemory.now();
    if (now !== null && now > this.peak) this.peak = now;
    return this.base === null ? null : this.peak - this.base;
  }
}

/** Rejects after `s` seconds; the work goes on in the background (an engine call cannot be cancelled). */
function deadline<T>(p: Promise<T>, s: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what}: no result after ${s} s (phase time limit)`)), s * 1000);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** Runs warm-up + timed rounds, stopping the timed ones once `PHASE_S` have passed (≥ 1 timed). */
async function rounds(label: string, n: number, run: (i: number) => Promise<number>): Promise<{ ms: number[]; warmupMs: number }> {
  const t0 = performance.now();
  const warmupMs = await run(-1);
  say(`${label} warm-up ${(warmupMs / 1000).toFixed(2)} s (compiles graphs, creates sessions)`);
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    ms.push(await run(i));
    say(`${label} round ${i + 1}: ${(ms.at(-1)! / 1000).toFixed(3)} s`);
    if ((performance.now() - t0) / 1000 > PHASE_S) break;
  }
  return { ms, warmupMs };
}

interface PhaseResult {
  ms?: number[];
  medianMs?: number;
  tokens?: number;
  tokPerSec?: number;
  error?: string;
  [k: string]: unknown;
}

function errorText(e: unknown): string {
  return (e instanceof Error ? `${e.name}: ${e.message}` : String(e)).slice(0, 800);
}

/** `env`: the OPENBLAS_CORETYPE `torchBlas` chose (the tiny form runs PyTorch on the CPU). */
async function runTorch(name: string, c: ModelConfig, result: Record<string, unknown>, save: () => void, env: Record<string, string | undefined>): Promise<void> {
  const script = fileURLToPath(new URL('./torch_gpu_bench.py', import.meta.url));
  const spec = {
    name,
    modelConfig: c,
    device: TINY ? 'cpu' : 'cuda',
    dtype: TINY ? 'fp32' : 'bf16',
    threads: cpus().length,
    phases: ['decode', 'ppo'],
    ppo: { batch: PPO_B, seqLen: PPO_T, microTokens: MICRO_TOKENS, rounds: ROUNDS, warmup: 1, lora: { rank: LORA.rank, alpha: LORA.alpha, targets: [...LORA.targets] } },
    decode: { batch: DEC_B, promptLen: DEC_P, newTokens: DEC_N, rounds: ROUNDS, warmup: 1 },
    phaseSeconds: PHASE_S,
  };
  const torch: Record<string, unknown> = {};
  result['pytorch'] = torch;
  const proc = spawn(benchPython(), [script, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  proc.stderr.on('data', (d: Buffer) => process.stderr.write(d));
  const timer = setTimeout(() => {
    torch['error'] = `killed after ${2 * PHASE_TIMEOUT_S} s`;
    proc.kill('SIGKILL');
  }, 2 * PHASE_TIMEOUT_S * 1000);
  const spawnError = new Promise<void>((resolve) => proc.on('error', (e) => ((torch['error'] = errorText(e)), resolve())));
  const lines = (async () => {
    for await (const line of createInterface({ input: proc.stdout })) {
      let r: Record<string, unknown>;
      try {
        r = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      const phase = String(r['phase']);
      delete r['phase'];
      torch[phase] = r;
      say(`${name} PyTorch ${phase}: ${r['error'] ? `failed: ${String(r['error'])}` : r['tokPerSec'] !== undefined ? `${(r['medianMs'] as number).toFixed(1)} ms, ${(r['tokPerSec'] as number).toFixed(0)} tok/s` : JSON.stringify(r)}`);
      save();
    }
  })();
  await Promise.race([lines, spawnError]);
  const code = await new Promise<number | null>((resolve) => (proc.exitCode !== null || proc.signalCode !== null ? resolve(proc.exitCode) : proc.on('close', resolve)));
  clearTimeout(timer);
  if (code !== 0 && !torch['error']) torch['error'] = `python exited with ${code}`;
  save();
}

async function runTroupe(name: string, c: ModelConfig, result: Record<string, unknown>, save: () => void): Promise<void> {
  const troupe: Record<string, unknown> = {};
  result['troupe'] = troupe;
  const mem = new GpuMemory();
  const provider = (env['BENCH_GPU_PROVIDER'] ?? (TINY ? 'cpu' : 'webgpu')) as 'cpu' | 'webgpu';
  const profileDir = PROFILE ? join(PROFILE_DIR, name) : undefined;
  if (profileDir) {
    rmSync(profileDir, { recursive: true, force: true });
    mkdirSync(profileDir, { recursive: true });
  }
  mem.start();
  const engine = await Engine.start({ executionProvider: provider, log: (l) => say(`engine: ${l}`), ...(profileDir ? { profileDir } : {}) });
  troupe['provider'] = engine.provider;
  troupe['adapter'] = engine.provider === 'webgpu' ? (engine.providerReport?.webgpu?.adapter ?? 'unknown') : 'host';
  let busy = false; // an engine call outlived its deadline: later phases would queue behind it
  try {
    if (engine.provider !== provider) throw new Error(`provider ${provider} did not start: ${engine.providerReason}`);
    const decode: DecodeSettings = { weights: 'fp32', fusedDecode: true, blockSize: 32 };
    const t0 = performance.now();
    const loraCfg = parseLoraConfig({ rank: LORA.rank, alpha: LORA.alpha, targets: [...LORA.targets] });
    const policy = await Policy.create(engine, {
      id: name,
      config: c,
      weights: benchWeights(c),
      lora: { rank: LORA.rank, alpha: LORA.alpha, targets: loraCfg.targets },
      adapter: initLoraParameters(c, loraCfg, 1),
      optimizer: optimizerSchema.parse({ lr: 1e-4, weightDecay: 0.01, maxGradNorm: 1 }),
      kl: true,
      entropy: true,
      decode,
      microBatch: { sequences: PPO_B, tokens: MICRO_TOKENS },
    });
    troupe['loadMs'] = performance.now() - t0;
    say(`${name} Troupe: policy created in ${(troupe['loadMs'] as number / 1000).toFixed(1)} s on ${engine.provider} (${String(troupe['adapter'])})`);

    // LoRA PPO step.
    const ppo: PhaseResult = {};
    troupe['ppo'] = ppo;
    if (!PHASES.includes('ppo')) ppo.error = 'skipped: BENCH_GPU_PHASES has no ppo';
    else try {
      const raw = randomBatch(c, PPO_B, PPO_T, 11);
      const s0 = performance.now();
      const old = await deadline(policy.score(raw, 1), PHASE_TIMEOUT_S, 'score');
      ppo['scoreMs'] = performance.now() - s0;
      say(`${name} Troupe score (old log-probs, includes compiling): ${(ppo['scoreMs'] as number / 1000).toFixed(1)} s`);
      const seqs = raw.map((q, i) => ({ ...q, oldLogp: old[i]!, refLogp: old[i]! }));
      const losses: number[] = [];
      const r = await deadline(
        rounds(`${name} Troupe PPO`, TROUPE_ROUNDS, async () => {
          const s = await policy.update('ppo', seqs, HP);
          if (s.skipped) throw new Error(`update skipped: ${s.skipped}`);
          losses.push(s.loss);
          return s.ms;
        }),
        PHASE_TIMEOUT_S,
        'PPO step',
      );
      Object.assign(ppo, { ms: r.ms, warmupMs: r.warmupMs, medianMs: median(r.ms), tokens: PPO_B * PPO_T, tokPerSec: (PPO_B * PPO_T) / (median(r.ms) / 1000), loss: [losses[0], losses.at(-1)], microTokens: MICRO_TOKENS });
    } catch (e) {
      ppo['error'] = errorText(e);
      busy = /phase time limit/.test(ppo['error']);
      say(`${name} Troupe PPO failed: ${ppo['error']}`);
    }
    troupe['gpuMemPeakMiBAfterPpo'] = mem.peak - (mem.base ?? 0);
    save();

    // Decode with the fused graph of the same (LoRA) policy; fp16 and plain on request.
    const prompts = Array.from({ length: DEC_B }, (_, b) => Int32Array.from({ length: DEC_P }, (_, i) => (b * 7919 + i * 104729 + 1) % c.vocabSize));
    const decodeWith = async (label: string, p: Policy, rollout: boolean): Promise<PhaseResult> => {
      const out: PhaseResult = {};
      if (busy) return { error: 'skipped: an earlier phase of this engine outlived its time limit' };
      // The warm-up (graph build, session creation, shader compilation) decodes only a few
      // tokens, so the build is measured apart from the decode it enables.
      let last: Awaited<ReturnType<Policy['generate']>> | null = null;
      try {
        const r = await deadline(
          rounds(`${name} Troupe decode ${label}`, TROUPE_ROUNDS, async (i) => {
            const n = i < 0 ? Math.min(DEC_WARMUP_TOKENS, DEC_N) : DEC_N;
            const t = performance.now();
            const g = await p.generate(prompts, { maxNewTokens: n, sampling: { temperature: 1, topP: 1, topK: 0 }, seed: i + 2, stopTokens: [], padToken: 0, rollout });
            if (g.tokens.some((x) => x.length !== n)) throw new Error('decode produced fewer tokens than asked');
            if (i >= 0) last = g;
            return performance.now() - t;
          }),
          PHASE_TIMEOUT_S,
          `decode ${label}`,
        );
        Object.assign(out, { ms: r.ms, warmupMs: r.warmupMs, warmupTokens: Math.min(DEC_WARMUP_TOKENS, DEC_N), medianMs: median(r.ms), tokens: DEC_B * DEC_N, tokPerSec: (DEC_B * DEC_N) / (median(r.ms) / 1000) });
        const g = last as Awaited<ReturnType<Policy['generate']>> | null;
        // Where the last timed round's time went: prefill, then per step inside session.run
        // (device work, transfers) and outside it (feeds, sampling on the host, bookkeeping).
        if (g) out['lastRound'] = { prefillMs: g.prefillMs, decodeMs: g.decodeMs, runMs: g.decodeRun?.ms, steps: g.decodeRun?.steps, hostMsPerStep: g.decodeRun ? (g.decodeMs - g.decodeRun.ms) / g.decodeRun.steps : undefined, runMsPerStep: g.decodeRun ? g.decodeRun.ms / g.decodeRun.steps : undefined };
      } catch (e) {
        out.error = errorText(e);
        busy = /phase time limit/.test(out.error);
        say(`${name} Troupe decode ${label} failed: ${out.error}`);
      }
      return out;
    };
    const decodes: Record<string, PhaseResult> = {};
    troupe['decode'] = decodes;
    if (PHASES.includes('decode') && DECODE_VARIANTS.includes('fused')) decodes['fused-fp32'] = await decodeWith('fused fp32', policy, true);
    save();
    // The plain decoder when asked for, or when the fused one failed for a reason other than time.
    const fusedFailed = decodes['fused-fp32']?.error !== undefined && !busy;
    if (PHASES.includes('decode') && (DECODE_VARIANTS.includes('plain') || fusedFailed)) decodes['plain-fp32'] = await decodeWith('plain fp32', policy, false);
    save();
    if (!busy) await policy.dispose();
    // The same fused graph drawing every token on the host: the baseline for sampling on the device.
    if (PHASES.includes('decode') && DECODE_VARIANTS.includes('host-sampling') && !busy) {
      const ph = await Policy.create(engine, { id: `${name}-host-sampling`, config: c, weights: benchWeights(c), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: { ...decode, sampleOnDevice: false } });
      decodes['fused-fp32-host-sampling'] = await decodeWith('fused fp32, host sampling', ph, true);
      if (!busy) await ph.dispose();
      save();
    }
    if (PHASES.includes('decode') && DECODE_VARIANTS.includes('fp16') && !TINY && !busy) {
      const p16 = await Policy.create(engine, { id: `${name}-fp16`, config: c, weights: benchWeights(c), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-4 }), kl: false, entropy: false, decode: { weights: 'fp16', fusedDecode: true, blockSize: 32 } });
      decodes['fused-fp16'] = await decodeWith('fused fp16', p16, true);
      if (!busy) await p16.dispose();
      save();
    }
    if (!busy) troupe['engineStats'] = await engine.stats();
  } catch (e) {
    troupe['error'] = errorText(e);
    say(`${name} Troupe failed: ${troupe['error']}`);
  } finally {
    troupe['gpuMemPeakMiB'] = mem.stop();
    troupe['gpuMemBaseMiB'] = mem.base;
    save();
    // A call still running on the worker would hold close() up: don't wait for it then.
    if (busy) void engine.close().catch(() => {});
    else await engine.close();
  }
  if (profileDir) {
    // Every session released above wrote its trace (a session still running past its deadline did not).
    try {
      const files = readdirSync(profileDir).filter((f) => f.endsWith('.json')).map((f) => join(profileDir, f));
      const p = await summarizeFiles(files);
      profiles[name] = p;
      troupe['profile'] = { file: PROFILE_OUT, traces: profileDir, sessions: Object.fromEntries(Object.entries(p).map(([k, v]) => [k, { runs: v.runs, medianRunMs: v.medianRunMs, nodesPerRun: v.steady.nodesPerRun, hostGapShare: v.steady.hostGapShare, gpuBusyShare: typeof v.steady.gpu === 'string' ? null : v.steady.gpu.busyShare }])) };
      console.log(profileTable(name, p));
      say(`${name} profile: ${files.length} session traces in ${profileDir}`);
    } catch (e) {
      profiles[name] = { error: errorText(e) };
      troupe['profile'] = { error: errorText(e) };
    }
    writeFileSync(PROFILE_OUT, `${JSON.stringify({ date: new Date().toISOString(), provider: troupe['provider'], adapter: troupe['adapter'], note: 'per session: runs after the first; times in ms; byClass/topOps shares of node time (host Compute calls), gpu.* shares of GPU kernel time', models: profiles }, null, 2)}\n`);
    save();
  }
}

async function main(): Promise<void> {
  // On CUDA PyTorch's matmuls run on cuBLAS; only the tiny (CPU) form depends on OpenBLAS's kernel.
  const blas: TorchBlas | null = TINY && SIDES.includes('pytorch') ? await torchBlas({ python: benchPython(), threads: cpus().length, log: say }) : null;
  const ortVersion = (createRequire(import.meta.url)('onnxruntime-node/package.json') as { version: string }).version;
  const out = {
    date: new Date().toISOString(),
    mode: TINY ? 'tiny (CI form: Troupe cpu provider, PyTorch fp32 on the CPU)' : 'gpu (Troupe webgpu fp32, PyTorch bf16 + SDPA on CUDA)',
    profiled: PROFILE ? 'yes: ONNX Runtime profiler on in Troupe sessions, its timings carry the profiler cost' : 'no',
    command: TINY ? 'BENCH_GPU_TINY=1 npm run bench:gpu' : 'npm run bench:gpu (on the lent machine: bash bench/gpu/run-on-device.sh)',
    gpu: GpuMemory.gpuName(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.version },
    versions: { onnxruntimeNode: ortVersion },
    blas: blas ? { cpu: blas.cpu, pytorch: { ...blas.choice, probes: blas.probes }, troupe: blas.troupe } : 'not probed: PyTorch runs its matmuls on cuBLAS',
    settings: { ppo: { batch: PPO_B, seqLen: PPO_T, microTokens: MICRO_TOKENS, lora: LORA, optimizer: 'adamw lr 1e-4 wd 0.01, clip 1' }, decode: { batch: DEC_B, promptLen: DEC_P, newTokens: DEC_N, sampling: 'temperature 1' }, rounds: { pytorch: ROUNDS, troupe: TROUPE_ROUNDS, warmup: 1 }, phaseSeconds: PHASE_S, phaseTimeoutSeconds: PHASE_TIMEOUT_S },
    models: [] as Array<Record<string, unknown>>,
  };
  const save = () => {
    for (const m of out.models) m['ratios'] = ratios(m);
    writeFileSync(OUT, `${JSON.stringify(out, null, 2)}\n`);
  };
  for (const name of MODEL_NAMES) {
    const c = MODELS[name]!;
    const m: Record<string, unknown> = { name, parameters: parameterCount(c), config: c };
    out.models.push(m);
    say(`${name}: ${(parameterCount(c) / 1e6).toFixed(0)}M parameters`);
    if (SIDES.includes('pytorch')) await runTorch(name, c, m, save, blas?.choice.env ?? {});
    if (SIDES.includes('troupe')) await runTroupe(name, c, m, save);
    save();
  }
  save();
  console.log(table(out.models, out.gpu ?? 'CPU'));
  console.log(`wrote ${OUT}`);
}

type Side = Record<string, PhaseResult | undefined> & { decode?: Record<string, PhaseResult> | PhaseResult };

/** Troupe time ÷ PyTorch time per figure (> 1: Troupe is slower). */
function ratios(m: Record<string, unknown>): Record<string, number | null> {
  const t = (m['troupe'] ?? {}) as Side;
  const p = (m['pytorch'] ?? {}) as Side;
  const r = (a?: PhaseResult, b?: PhaseResult) => (a?.medianMs !== undefined && b?.medianMs !== undefined ? a.medianMs / b.medianMs : null);
  const out: Record<string, number | null> = { ppo: r(t['ppo'], p['ppo']) };
  for (const [k, v] of Object.entries((t.decode ?? {}) as Record<string, PhaseResult>)) out[`decode-${k}`] = r(v, p.decode as PhaseResult);
  return out;
}

function table(models: Array<Record<string, unknown>>, gpu: string): string {
  const f = (x: unknown, d = 0) => (typeof x === 'number' ? x.toFixed(d) : '—');
  const lines = [`\nTroupe vs PyTorch on ${gpu}`, '| model | figure | Troupe ms | PyTorch ms | Troupe tok/s | PyTorch tok/s | Troupe ÷ PyTorch time | peak MiB Troupe | peak MiB PyTorch |', '|---|---|---|---|---|---|---|---|---|'];
  for (const m of models) {
    const t = (m['troupe'] ?? {}) as Side & { gpuMemPeakMiB?: number };
    const p = (m['pytorch'] ?? {}) as Side;
    const rat = (m['ratios'] ?? {}) as Record<string, number | null>;
    const row = (fig: string, a: PhaseResult | undefined, b: PhaseResult | undefined, ratio: number | null | undefined) =>
      `| ${String(m['name'])} | ${fig} | ${a?.error ? `failed` : f(a?.medianMs, 1)} | ${b?.error ? 'failed' : f(b?.medianMs, 1)} | ${f(a?.tokPerSec)} | ${f(b?.tokPerSec)} | ${ratio == null ? '—' : `${ratio.toFixed(2)}x`} | ${f(t.gpuMemPeakMiB)} | ${f(b?.['peakReservedMiB'])} |`;
    lines.push(row('LoRA PPO step', t['ppo'], p['ppo'], rat['ppo']));
    for (const [k, v] of Object.entries((t.decode ?? {}) as Record<string, PhaseResult>)) lines.push(row(`decode ${k}`, v, p.decode as PhaseResult, rat[`decode-${k}`]));
    for (const [side, s] of [['Troupe', t], ['PyTorch', p]] as const) {
      for (const [k, v] of Object.entries(s)) {
        if (v && typeof v === 'object' && 'error' in v && v.error) lines.push(`  ${String(m['name'])} ${side} ${k}: ${String(v.error)}`);
        if (k === 'decode' && v && typeof v === 'object') for (const [k2, v2] of Object.entries(v)) if (v2 && typeof v2 === 'object' && 'error' in v2 && v2.error) lines.push(`  ${String(m['name'])} ${side} decode ${k2}: ${String(v2.error)}`);
      }
      if (typeof s['error'] === 'string') lines.push(`  ${String(m['name'])} ${side}: ${s['error']}`);
    }
  }
  return lines.join('\n');
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? e.stack : e);
    process.exit(1);
  },
);
