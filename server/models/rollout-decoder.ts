/**
 * The decoders a policy generates with besides the plain one: the fused decode graph in fp32, and
 * quantized rollout weights (int8/int4 MatMulNBits, decode-graph.ts).
 *
 * Quantized weights are baked into the graph (ONNX Runtime prepacks constant MatMulNBits weights
 * at session creation; a non-constant one is dequantized on every call), so the quantized session
 * is rebuilt lazily after the policy's weights change: the LoRA adapter is merged into a copy of
 * the base, every projection and the LM head quantized, the graph emitted and the session
 * replaced. PPO's old log-probs stay those of the fp32 policy (the score graph); the trainer
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

export class RolloutDecoder {
  private fp32: { session: string; graph: FusedDecode } | null = null;
  private quantized: { session: string; graph: FusedDecode } | null = null;
  /** Whether the quantized session holds the policy's current weights. */
  private fresh = false;
  /** Milliseconds the last quantized rebuild took (merge, quantize, emit, session). */
  lastRebuildMs = 0;

  constructor(
    private readonly src: DecoderSource,
    readonly settings: DecodeSettings,
  ) {
    checkBlockSize(settings.blockSize);
  }

  /** The policy's weights changed: the quantized session is rebuilt before its next use. */
  invalidate(): void {
    this.fresh = false;
  }

  /**
   * The decoder for a generation, or null for the plain one. `rollout`: a training rollout, which
   * uses the configured rollout weights; everything else decodes the fp32 policy.
   */
  async choose(rollout: boolean): Promise<DecoderChoice | null> {
    if (rollout && quantBits(this.settings.weights)) return this.quantizedDecoder();
    if (!this.settings.fused) return null;
    if (!this.fp32) {
      const graph = buildFusedDecode(this.src.config, { weights: 'fp32', lora: this.src.lora });
      const session = `${this.src.id}:decode-fused`;
      await this.src.engine.createSession(session, graph.bytes);
      this.fp32 = { session, graph };
    }
    return this.choice(this.fp32.session, this.fp32.graph);
  }

  private async quantizedDecoder(): Promise<DecoderChoice> {
    if (!this.quantized || !this.fresh) {
      const t0 = performance.now();
      const bits = quantBits(this.settings.weights)!;
      const { weights, adapter } = await this.src.snapshot();
      const merged = mergeAdapter(this.src.config, this.src.lora, weights, adapter);
      const shapes = new Map(parameterShapes(this.src.config));
      const quantized = new Map<string, QuantizedMatrix>();
      for (const name of quantizedWeightNames(this.src.config)) {
        const [rows, cols] = shapes.get(name) as [number, number];
        quantized.set(name, quantizeBlockwise(merged.get(name)!, rows, cols, bits, this.settings.blockSize));
      }
      const graph = buildFusedDecode(this.src.config, { weights: this.settings.weights, lora: null, quantized });
      const session = `${this.src.id}:decode-${this.settings.weights}`;
      // Same name: the engine releases the previous session once the new one exists.
      await this.src.engine.createSession(session, graph.bytes);
      this.quantized = { session, graph };
      this.fresh = true;
      this.lastRebuildMs = performance.now() - t0;
    }
    return this.choice(this.quantized.session, this.quantized.graph);
  }

  private choice(session: string, graph: FusedDecode): DecoderChoice {
    const { L, Hkv, D, V } = modelDims(this.src.config);
    const params: Record<string, string> = {};
    for (const n of graph.tensorInputs) params[n] = this.src.resident(n);
    return { session, params, contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V, maxPositions: graph.maxPositions } };
  }

  /** Session names this decoder created (for the policy's dispose). */
  sessions(): string[] {
    return [this.fp32?.session, this.quantized?.session].filter((s): s is string => s !== undefined);
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
