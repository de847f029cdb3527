/**
 * The decoders a policy generates with besides the plain one: the fused decode graph in fp32, and
 * quantized rollout weights (int8/int4 MatMulNBits, decode-graph.ts).
 *
 * Weights are baked into the fused graphs (ONNX Runtime prepacks constant MatMul and MatMulNBits
 * weights at session creation; a non-constant MatMulNBits weight is dequantized on every call),
 * so a fused session is rebuilt lazily after the policy's weights change: the LoRA adapter is
 * merged into a copy of the base (fp32), or, for int8/int4, every projection and the LM head is
 * read from the engine a slice of rows at a time, merged and quantized (`quantizeResidents`: the
 * main thread never holds a whole fp32 copy of the weights), the graph emitted and the session
 * replaced. A model over 1 GiB in fp32 bakes only quantized codes:
 * in fp32 its weights and adapter stay inputs, quantized its embedding, norms and biases do. PPO's old log-probs stay those of the fp32 policy (the score graph); the trainer
 * reports how far the quantized sampler is from it (`rollout/mismatch_kl`).
 */
import type { Engine } from '../runtime/engine.ts';
import type { DecoderContract } from '../runtime/generate.ts';
import { loweringFor } from './artifacts.ts';
import { buildFusedDecode, quantBits, quantizedWeightNames, type FusedDecode, type RolloutWeights } from './decode-graph.ts';
import { type ModelConfig, modelDims, parameterShapes, projectionName, projectionSize } from './model-config.ts';
import { checkBlockSize, mergeLora, quantizeBlockwise, type QuantBits, type QuantizedMatrix } from './quantize.ts';
import { deviceCacheOutputs, type LoraSpec } from './transformer-graph.ts';
import type { RolloutConfig } from '../protocol/experiment-config.ts';

/**
 * How a policy decodes: the experiment config's `rollout` (its weights and fusedDecode, documented
 * there) and two engine settings. blockSize is any size `checkBlockSize` takes; the config allows
 * fewer.
 */
export interface DecodeSettings extends Readonly<Pick<RolloutConfig, 'weights' | 'fusedDecode'>> {
  /** Values per quantization block along each weight row. */
  readonly blockSize: number;
  /** Largest fp32 model (bytes) whose weights are baked in; default 1 GiB (protobuf's limit is 2). */
  readonly maxBakedBytes?: number;
  /**
   * Let ONNX Runtime's idle intra-op threads spin between kernels in the fused sessions (default
   * true, ONNX Runtime's own default). A decode step is hundreds of short kernels. On an idle
   * 2-core machine spinning threads decoded 1.18–1.32x faster than sleeping ones (default and
   * medium, fp32 and int4; `PROFILE_MODE=compare PROFILE_VARIANTS=no-spin node --import tsx
   * bench/engine/profile-decode.ts`); on cores shared with other busy processes (load 5–8 on 2
   * cores) sleeping threads were 1.7–2.9x faster. Set false where the cores are shared.
   */
  readonly spinning?: boolean;
  /** On WebGPU, draw tokens inside the fused graph (decode-graph.ts `sampleOnDevice`; default by vocabulary size). */
  readonly sampleOnDevice?: boolean;
}

export const plainDecode: DecodeSettings = { weights: 'fp32', fusedDecode: false, blockSize: 32 };

/** What the decoder needs from its policy. */
export interface DecoderSource {
  readonly engine: Engine;
  readonly id: string;
  readonly config: ModelConfig;
  readonly lora: LoraSpec | null;
  /** Resident name of a weight or adapter tensor. */
  resident(name: string): string;
  /** Copies of the base weights and of the adapter (null without LoRA). */
  snapshot(): Promise<{ weights: Map<string, Float32Array>; adapter: Map<string, Float32Array> | null }>;
}

export interface DecoderChoice {
  readonly session: string;
  readonly params: Record<string, string>;
  readonly contract: DecoderContract;
}

/** A fused session and what `choice` needs of its graph. */
interface Built {
  readonly session: string;
  readonly graph: Omit<FusedDecode, 'bytes'>;
  /** The graph holds the weights it was built from (stale after an update). */
  readonly baked: boolean;
  fresh: boolean;
}

/** Baked fp32 weights must fit a protobuf (2 GiB) with room to spare; larger models feed them. */
const MAX_BAKED_BYTES = 1 << 30;

export class RolloutDecoder {
  /**
   * Fused sessions by kind ('fp32' or the quantized weights), with what `choice` needs of their
   * graph. Not the graph's bytes: the engine has its own copy (hundreds of MB at 0.5B).
   */
  private readonly built = new Map<RolloutWeights, Built>();
  /** Rebuilds under way: a second caller waits for the first instead of building a second copy. */
  private readonly rebuilding = new Map<RolloutWeights, Promise<Built>>();
  /** Milliseconds the last rebuild took (merge, quantize, emit, session). */
  lastRebuildMs = 0;

  constructor(
    private readonly src: DecoderSource,
    readonly settings: DecodeSettings,
  ) {
    checkBlockSize(settings.blockSize);
  }

  /** The policy's weights changed: sessions with baked weights are rebuilt before their next use. */
  invalidate(): void {
    for (const b of this.built.values()) if (b.baked) b.fresh = false;
  }

  /**
   * The decoder for a generation, or null for the plain one. `rollout`: a training rollout, which
   * uses the configured rollout weights; everything else decodes the fp32 policy.
   */
  async choose(rollout: boolean): Promise<DecoderChoice | null> {
    const kind: RolloutWeights = rollout ? this.settings.weights : 'fp32';
    if (kind === 'fp16' && this.src.engine.provider === 'cpu') {
      // The config refuses fp16 with engine.executionProvider cpu; this is auto, webgpu or cuda
      // having fallen back to the CPU, whose ONNX Runtime kernels have few float16 forms on x86.
      throw new Error(`rollout.weights "fp16" needs a GPU execution provider, but the engine runs on cpu (${this.src.engine.providerReason}); use rollout.weights "fp32", "int8" or "int4" here`);
    }
    if (kind === 'fp32' && !this.settings.fusedDecode) return null;
    let b = this.built.get(kind);
    if (!b || !b.fresh) {
      let pending = this.rebuilding.get(kind);
      if (!pending) {
        pending = this.rebuild(kind, b).finally(() => this.rebuilding.delete(kind));
        this.rebuilding.set(kind, pending);
      }
      b = await pending;
    }
    return this.choice(b.session, b.graph);
  }

  private async rebuild(kind: RolloutWeights, stale: Built | undefined): Promise<Built> {
    const t0 = performance.now();
    // A stale session is never run again: release it now rather than beside its successor
    // (the engine otherwise holds both sessions' prepacked weights at once).
    if (stale) await this.src.engine.releaseSession(stale.session);
    const { bytes, ...graph } = await this.build(kind);
    const session = `${this.src.id}:decode-${kind}`;
    // A 'device' cache stays on the GPU between steps (generate.ts).
    // So do the logits when the graph samples: only its drawn ids and log-probs come back.
    const outputsOnDevice = graph.cacheLayout === 'device' ? [...deviceCacheOutputs(this.src.config), ...(graph.sampling === 'device' ? ['logits'] : [])] : [];
    // The bytes are handed to the engine, not copied: nothing here reads them again.
    await this.src.engine.createSession(session, bytes, { spinning: this.settings.spinning ?? true, outputsOnDevice }, { transfer: true });
    const b: Built = { session, graph, baked: graph.baked, fresh: true };
    this.built.set(kind, b);
    this.lastRebuildMs = performance.now() - t0;
    return b;
  }

  /** The fused graph for `kind`; `baked`: it holds the current weights (stale after an update). */
  private async build(kind: RolloutWeights): Promise<FusedDecode & { baked: boolean }> {
    const c = this.src.config;
    const bits = quantBits(kind);
    const fp32Bytes = parameterShapes(c).reduce((n, [, s]) => n + s.reduce((a, x) => a * x, 1) * 4, 0);
    const maxBaked = this.settings.maxBakedBytes ?? MAX_BAKED_BYTES;
    const bakedBytes = kind === 'fp16' ? fp32Bytes / 2 : fp32Bytes; // fp16 bakes half-size copies
    // On WebGPU the KV cache stays on the GPU between steps (generate.ts 'device').
    const cache = this.src.engine.provider === 'webgpu' ? 'device' : 'host';
    // sampleOnDevice unset: decode-graph.ts decides by vocabulary size. The provider's lowering of
    // products by transposed weights (Gemm on WebGPU).
    const { transposedMatMul } = loweringFor(this.src.engine.provider);
    const graphOptions = {
      ...(this.settings.sampleOnDevice === undefined ? {} : { sampleOnDevice: this.settings.sampleOnDevice }),
      ...(transposedMatMul ? { transposedMatMul } : {}),
    };
    if (!bits && bakedBytes > maxBaked) {
      // Too large to bake: weights (and the adapter) stay inputs, fed from the residents.
      return { ...buildFusedDecode(c, { weights: kind, lora: this.src.lora, cache, ...graphOptions }), baked: false };
    }
    if (bits) {
      const quantized = await quantizeResidents(this.src, bits, this.settings.blockSize);
      // A large model bakes only its quantized codes; embedding, norms and biases (which LoRA
      // does not touch) stay inputs fed from the residents.
      const bake = bakedBytes <= maxBaked ? { baked: await unquantizedResidents(this.src) } : {};
      return { ...buildFusedDecode(c, { weights: kind, lora: null, ...bake, quantized, cache, ...graphOptions }), baked: true };
    }
    const { weights, adapter } = await this.src.snapshot();
    const merged = mergeAdapter(c, this.src.lora, weights, adapter);
    return { ...buildFusedDecode(c, { weights: kind, lora: null, baked: merged, cache, ...graphOptions }), baked: true };
  }

  private choice(session: string, graph: Omit<FusedDecode, 'bytes'>): DecoderChoice {
    const { L, Hkv, D, V } = modelDims(this.src.config);
    const params: Record<string, string> = {};
    for (const n of graph.tensorInputs) params[n] = this.src.resident(n);
    return { session, params, contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: graph.maxPositions, cacheLayout: graph.cacheLayout, sampling: graph.sampling } };
  }

  /** Session names this decoder created (for the policy's dispose). */
  sessions(): string[] {
    return [...this.built.values()].map((b) => b.session);
  }
}

/** fp32 rows of a weight fetched, merged and quantized at a time: 32 MiB (Qwen2.5-0.5B's tied head is 545 MB). */
const QUANTIZE_CHUNK_BYTES = 32 << 20;

/**
 * Every projection and the LM head (`quantizedWeightNames`) quantized from the source's resident
 * weights, each LoRA adapter merged first. Read a slice of rows at a time (`chunkBytes` of fp32,
 * at least one row): a rebuild of Qwen2.5-0.5B used to copy all 2 GB of weights to the main
 * thread and merge the adapter into a second copy of its projections before quantizing. The
 * codes equal `quantizeBlockwise(mergeAdapter(…))` of the whole matrices bit for bit: the merge
 * (W + s·B A) and the quantization blocks (along a row's columns) are both row by row.
 */
export async function quantizeResidents(src: DecoderSource, bits: QuantBits, blockSize: number, chunkBytes = QUANTIZE_CHUNK_BYTES): Promise<Map<string, QuantizedMatrix>> {
  checkBlockSize(blockSize);
  const c = src.config;
  const shapes = new Map(parameterShapes(c));
  const adapted = new Set<string>();
  if (src.lora) for (let i = 0; i < c.numLayers; i++) for (const t of src.lora.targets) adapted.add(projectionName(i, t));
  const read = async (name: string, rows?: { start: number; count: number }) => (await src.engine.download(src.resident(name), rows)).data as Float32Array;
  const out = new Map<string, QuantizedMatrix>();
  for (const name of quantizedWeightNames(c)) {
    const [rows, cols] = shapes.get(name) as [number, number];
    const blocks = Math.ceil(cols / blockSize);
    const blob = (blockSize * bits) / 8;
    const packed = new Uint8Array(rows * blocks * blob); // [N, blocks, blob]
    const scales = new Float32Array(rows * blocks); // [N·blocks]
    const p = name.slice(0, -'.weight'.length);
    const lora = src.lora && adapted.has(p) ? { spec: src.lora, a: await read(`${p}.lora_A`), b: await read(`${p}.lora_B`) } : null; // A [r, K], B [N, r]
    const step = Math.max(1, Math.floor(chunkBytes / (cols * 4)));
    for (let start = 0; start < rows; start += step) {
      const count = Math.min(step, rows - start);
      let w = await read(name, { start, count }); // [count, K]
      if (lora) {
        const { rank, alpha } = lora.spec;
        w = mergeLora(w, lora.a, lora.b.subarray(start * rank, (start + count) * rank), count, cols, rank, alpha / rank);
      }
      const q = quantizeBlockwise(w, count, cols, bits, blockSize);
      packed.set(q.packed, start * blocks * blob);
      scales.set(q.scales, start * blocks);
    }
    out.set(name, { rows, cols, bits, blockSize, packed, scales });
  }
  return out;
}

/**
 * Copies of the weights a quantized graph reads in fp32 (embedding, norms, biases: none carries
 * a LoRA adapter), for baking: every weight but the quantized projections and untied LM head.
 * A tied embedding is both: its codes are the LM head, its fp32 rows the token lookup.
 */
export async function unquantizedResidents(src: DecoderSource): Promise<Map<string, Float32Array>> {
  const quantized = new Set(quantizedWeightNames(src.config));
  const out = new Map<string, Float32Array>();
  for (const [name] of parameterShapes(src.config)) {
    if (quantized.has(name) && name !== 'embed.weight') continue;
    out.set(name, (await src.engine.download(src.resident(name))).data as Float32Array);
  }
  return out;
}

/** The base weights with each LoRA adapter merged into its projection (a copy; the base is untouched). */
export function mergeAdapter(c: ModelConfig, lora: LoraSpec | null, weights: ReadonlyMap<string, Float32Array>, adapter: ReadonlyMap<string, Float32Array> | null): Map<string, Float32Array> {
  const out = new Map(weights);
  if (!lora) return out;
  if (!adapter) throw new Error('mergeAdapter: the policy has a LoRA layout but no adapter tensors');
  for (let i = 0; i < c.numLayers; i++) {
    for (const t of lora.targets) {
      const p = projectionName(i, t);
      const { in: n, out: m } = projectionSize(c, t);
      const a = adapter.get(`${p}.lora_A`);
      const b = adapter.get(`${p}.lora_B`);
      const w = weights.get(`${p}.weight`);
      if (!a || !b || !w) throw new Error(`mergeAdapter: missing '${p}' weight or adapter`);
      out.set(`${p}.weight`, mergeLora(w, a, b, m, n, lora.rank, lora.alpha / lora.rank));
    }
  }
  return out;
}
