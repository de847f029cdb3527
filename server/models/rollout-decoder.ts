/**
 * The decoders a policy generates with besides the plain one: the fused decode graph in fp32, and
 * quantized rollout weights (int8/int4 MatMulNBits, decode-graph.ts).
 *
 * Weights are baked into the fused graphs (ONNX Runtime prepacks constant MatMul and MatMulNBits
 * weights at session creation; a non-constant MatMulNBits weight is dequantized on every call),
 * so a fused session is rebuilt lazily after the policy's weights change: the LoRA adapter is
 * merged into a copy of the base, for int8/int4 every projection and the LM head quantized, the
 * graph emitted and the session replaced. A model over 1 GiB in fp32 bakes only quantized codes:
 * in fp32 its weights and adapter stay inputs, quantized its embedding, norms and biases do. PPO's old log-probs stay those of the fp32 policy (the score graph); the trainer
 * reports how far the quantized sampler is from it (`rollout/mismatch_kl`).
 */
import type { Engine } from '../runtime/engine.ts';
import type { DecoderContract } from '../runtime/generate.ts';
import { buildFusedDecode, quantBits, quantizedWeightNames, type FusedDecode, type RolloutWeights } from './decode-graph.ts';
import { type ModelConfig, modelDims, parameterShapes, projectionName, projectionSize } from './model-config.ts';
import { checkBlockSize, mergeLora, quantizeBlockwise, type QuantizedMatrix } from './quantize.ts';
import type { LoraSpec } from './transformer-graph.ts';

/** How a policy decodes: what `rollout` in the experiment config sets. */
export interface DecodeSettings {
  /** Weights of training rollouts: fp32, or int8/int4 block-wise quantized (fused graph). */
  readonly weights: RolloutWeights;
  /** Use the fused decode graph for fp32 generation (validation, warm-start play, fp32 rollouts). */
  readonly fused: boolean;
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
}

export const plainDecode: DecodeSettings = { weights: 'fp32', fused: false, blockSize: 32 };

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

/** Baked fp32 weights must fit a protobuf (2 GiB) with room to spare; larger models feed them. */
const MAX_BAKED_BYTES = 1 << 30;

export class RolloutDecoder {
  /** Fused sessions by kind ('fp32' or the quantized weights), with the weights they were built from. */
  private readonly built = new Map<RolloutWeights, { session: string; graph: FusedDecode; baked: boolean; fresh: boolean }>();
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
    if (kind === 'fp32' && !this.settings.fused) return null;
    let b = this.built.get(kind);
    if (!b || !b.fresh) {
      const t0 = performance.now();
      const graph = await this.build(kind);
      const session = `${this.src.id}:decode-${kind}`;
      // Same name: the engine releases the previous session once the new one exists.
      await this.src.engine.createSession(session, graph.bytes, { spinning: this.settings.spinning ?? true });
      b = { session, graph, baked: graph.baked, fresh: true };
      this.built.set(kind, b);
      this.lastRebuildMs = performance.now() - t0;
    }
    return this.choice(b.session, b.graph);
  }

  /** The fused graph for `kind`; `baked`: it holds the current weights (stale after an update). */
  private async build(kind: RolloutWeights): Promise<FusedDecode & { baked: boolean }> {
    const c = this.src.config;
    const bits = quantBits(kind);
    const fp32Bytes = parameterShapes(c).reduce((n, [, s]) => n + s.reduce((a, x) => a * x, 1) * 4, 0);
    const maxBaked = this.settings.maxBakedBytes ?? MAX_BAKED_BYTES;
    const bakedBytes = kind === 'fp16' ? fp32Bytes / 2 : fp32Bytes; // fp16 bakes half-size copies
    if (!bits && bakedBytes > maxBaked) {
      // Too large to bake: weights (and the adapter) stay inputs, fed from the residents.
      return { ...buildFusedDecode(c, { weights: kind, lora: this.src.lora }), baked: false };
    }
    const { weights, adapter } = await this.src.snapshot();
    const merged = mergeAdapter(c, this.src.lora, weights, adapter);
    let quantized: Map<string, QuantizedMatrix> | undefined;
    if (bits) {
      const shapes = new Map(parameterShapes(c));
      quantized = new Map();
      for (const name of quantizedWeightNames(c)) {
        const [rows, cols] = shapes.get(name) as [number, number];
        quantized.set(name, quantizeBlockwise(merged.get(name)!, rows, cols, bits, this.settings.blockSize));
      }
    }
    // A large model bakes only its quantized codes; embedding, norms and biases (which LoRA does
    // not touch) stay inputs fed from the residents.
    const bake = bakedBytes <= maxBaked ? { baked: merged } : {};
    const graph = buildFusedDecode(c, { weights: kind, lora: null, ...bake, ...(quantized ? { quantized } : {}) });
    return { ...graph, baked: true };
  }

  private choice(session: string, graph: FusedDecode): DecoderChoice {
    const { L, Hkv, D, V } = modelDims(this.src.config);
    const params: Record<string, string> = {};
    for (const n of graph.tensorInputs) params[n] = this.src.resident(n);
    return { session, params, contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: graph.maxPositions, cacheLayout: graph.cacheLayout } };
  }

  /** Session names this decoder created (for the policy's dispose). */
  sessions(): string[] {
    return [...this.built.values()].map((b) => b.session);
  }
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
