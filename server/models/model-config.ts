/**
 * Configuration of the decoder-only transformer family (the Qwen2/Llama shape): RMSNorm, RoPE,
 * grouped-query attention, SwiGLU MLP, tied or untied embeddings.
 *
 * Parameter names are hierarchical and checkpoint-stable (see `parameterShapes`):
 *   embed.weight                    [V, C]
 *   layers.{i}.attn_norm.weight     [C]
 *   layers.{i}.attn.q.weight        [H*D, C]      (+ .bias [H*D] when attentionBias)
 *   layers.{i}.attn.k.weight        [Hkv*D, C]    (+ .bias [Hkv*D] when attentionBias)
 *   layers.{i}.attn.v.weight        [Hkv*D, C]    (+ .bias [Hkv*D] when attentionBias)
 *   layers.{i}.attn.q_norm.weight   [D]           (only when qkNorm, Qwen3)
 *   layers.{i}.attn.k_norm.weight   [D]           (only when qkNorm)
 *   layers.{i}.attn.o.weight        [C, H*D]
 *   layers.{i}.mlp_norm.weight      [C]
 *   layers.{i}.mlp.gate.weight      [F, C]
 *   layers.{i}.mlp.up.weight        [F, C]
 *   layers.{i}.mlp.down.weight      [C, F]
 *   norm.weight                     [C]
 *   lm_head.weight                  [V, C]        (absent when tieEmbeddings)
 * Linear weights are stored [out, in] as in PyTorch/Hugging Face, so checkpoints map 1:1.
 */
import { z } from 'zod';
// Ceilings shared with the experiment config (protocol), so a checkpoint's config.json is bounded too.
import { sizeLimits } from '../protocol/experiment-config.ts';

/**
 * Llama 3.1's RoPE frequency rescaling (transformers `_compute_llama3_parameters`): wavelengths
 * longer than originalMaxPositionEmbeddings / lowFreqFactor are stretched by `factor`, shorter
 * than originalMaxPositionEmbeddings / highFreqFactor kept, and the band between interpolated.
 */
export const llama3RopeScalingSchema = z
  .object({
    /** Scaling kind; only Llama 3's is supported. */
    type: z.literal('llama3'),
    /** Stretch factor of the low frequencies (8 in Llama 3.1, 32 in Llama 3.2). */
    factor: z.number().positive(),
    /** Wavelengths above originalMaxPositionEmbeddings / lowFreqFactor are divided by factor. */
    lowFreqFactor: z.number().positive(),
    /** Wavelengths below originalMaxPositionEmbeddings / highFreqFactor are kept. */
    highFreqFactor: z.number().positive(),
    /** The context length the model was pretrained with before scaling (8192). */
    originalMaxPositionEmbeddings: z.number().int().positive().max(sizeLimits.maxSequenceLength),
  })
  .strict()
  .refine((r) => r.highFreqFactor > r.lowFreqFactor, { message: 'highFreqFactor must be greater than lowFreqFactor', path: ['highFreqFactor'] });
export type RopeScaling = z.output<typeof llama3RopeScalingSchema>;

export const modelConfigSchema = z
  .object({
    /** Vocabulary size V (rows of the embedding matrix). */
    vocabSize: z.number().int().positive().max(sizeLimits.vocabSize),
    /** Model width C (hidden size). */
    hiddenSize: z.number().int().positive().max(sizeLimits.hiddenSize),
    /** Number of transformer blocks L. */
    numLayers: z.number().int().positive().max(sizeLimits.numLayers),
    /** Number of query heads H. Must divide hiddenSize unless headDim is given. */
    numHeads: z.number().int().positive().max(sizeLimits.numHeads),
    /** Number of key/value heads Hkv (grouped-query attention). Must divide numHeads. Defaults to numHeads. */
    numKvHeads: z.number().int().positive().max(sizeLimits.numHeads).optional(),
    /** Per-head dimension D. Defaults to hiddenSize / numHeads. Must be even (RoPE rotates pairs). */
    headDim: z.number().int().positive().max(sizeLimits.headDim).optional(),
    /** Hidden size F of the SwiGLU MLP. */
    intermediateSize: z.number().int().positive().max(sizeLimits.intermediateSize),
    /** RoPE base frequency θ. */
    ropeTheta: z.number().positive().default(10000),
    /** RMSNorm epsilon. */
    rmsNormEps: z.number().positive().default(1e-6),
    /** Whether the output head shares the embedding matrix. */
    tieEmbeddings: z.boolean().default(true),
    /** Whether q/k/v projections carry a bias (Qwen2 does, Llama does not). */
    attentionBias: z.boolean().default(false),
    /** Longest sequence (prompt + response) the model is used with; sizes KV caches. */
    maxSequenceLength: z.number().int().positive().max(sizeLimits.maxSequenceLength).default(512),
    /**
     * Per-head RMSNorm of q and k before RoPE, weights [D] (Qwen3). Absent means false; optional
     * rather than defaulted so configs written before it existed hash and serialise unchanged.
     */
    qkNorm: z.boolean().optional(),
    /** RoPE frequency scaling (Llama 3.1+); absent: plain RoPE. */
    ropeScaling: llama3RopeScalingSchema.optional(),
  })
  .strict()
  .superRefine((c, ctx) => {
    const kv = c.numKvHeads ?? c.numHeads;
    if (c.headDim === undefined && c.hiddenSize % c.numHeads !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['numHeads'],
        message: `numHeads (${c.numHeads}) must divide hiddenSize (${c.hiddenSize}), or headDim must be given`,
      });
    }
    if (c.numHeads % kv !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['numKvHeads'],
        message: `numKvHeads (${kv}) must divide numHeads (${c.numHeads})`,
      });
    }
    const d = c.headDim ?? Math.floor(c.hiddenSize / c.numHeads);
    if (d % 2 !== 0) {
      ctx.addIssue({ code: 'custom', path: ['headDim'], message: `head dimension (${d}) must be even for RoPE` });
    }
  });

export type ModelConfigInput = z.input<typeof modelConfigSchema>;
export type ModelConfig = z.output<typeof modelConfigSchema>;

/** Derived sizes used throughout the model code. */
export interface ModelDims {
  readonly V: number;
  readonly C: number;
  readonly L: number;
  readonly H: number;
  readonly Hkv: number;
  readonly D: number;
  readonly F: number;
}

export function modelDims(c: ModelConfig): ModelDims {
  return {
    V: c.vocabSize,
    C: c.hiddenSize,
    L: c.numLayers,
    H: c.numHeads,
    Hkv: c.numKvHeads ?? c.numHeads,
    D: c.headDim ?? c.hiddenSize / c.numHeads,
    F: c.intermediateSize,
  };
}

/** Parses a model config, throwing an error that names every offending field. */
export function parseModelConfig(input: unknown, source = 'model config'): ModelConfig {
  const r = modelConfigSchema.safeParse(input);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => `  ${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
  throw new Error(`invalid ${source}:\n${lines.join('\n')}`);
}

/** The projections a LoRA adapter may target, named as in the parameter table above. */
export const loraTargets = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof loraTargets)[number];

/** Every parameter of the model with its shape, in a stable order (the checkpoint order). */
export function parameterShapes(c: ModelConfig): Array<[name: string, shape: number[]]> {
  const { V, C, L, H, Hkv, D, F } = modelDims(c);
  const out: Array<[string, number[]]> = [['embed.weight', [V, C]]];
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}`;
    out.push([`${p}.attn_norm.weight`, [C]]);
    out.push([`${p}.attn.q.weight`, [H * D, C]]);
    if (c.attentionBias) out.push([`${p}.attn.q.bias`, [H * D]]);
    out.push([`${p}.attn.k.weight`, [Hkv * D, C]]);
    if (c.attentionBias) out.push([`${p}.attn.k.bias`, [Hkv * D]]);
    out.push([`${p}.attn.v.weight`, [Hkv * D, C]]);
    if (c.attentionBias) out.push([`${p}.attn.v.bias`, [Hkv * D]]);
    if (c.qkNorm) {
      out.push([`${p}.attn.q_norm.weight`, [D]]);
      out.push([`${p}.attn.k_norm.weight`, [D]]);
    }
    out.push([`${p}.attn.o.weight`, [C, H * D]]);
    out.push([`${p}.mlp_norm.weight`, [C]]);
    out.push([`${p}.mlp.gate.weight`, [F, C]]);
    out.push([`${p}.mlp.up.weight`, [F, C]]);
    out.push([`${p}.mlp.down.weight`, [C, F]]);
  }
  out.push(['norm.weight', [C]]);
  if (!c.tieEmbeddings) out.push(['lm_head.weight', [V, C]]);
  return out;
}

/** The (in, out) sizes of a projection, for LoRA A [r, in] and B [out, r]. */
export function projectionSize(c: ModelConfig, target: LoraTarget): { in: number; out: number } {
  const { C, H, Hkv, D, F } = modelDims(c);
  switch (target) {
    case 'q': return { in: C, out: H * D };
    case 'k': return { in: C, out: Hkv * D };
    case 'v': return { in: C, out: Hkv * D };
    case 'o': return { in: H * D, out: C };
    case 'gate': return { in: C, out: F };
    case 'up': return { in: C, out: F };
    case 'down': return { in: F, out: C };
  }
}

/** Parameter name prefix of a projection in layer i (`layers.3.attn.q`). */
export function projectionName(layer: number, target: LoraTarget): string {
  const group = target === 'gate' || target === 'up' || target === 'down' ? 'mlp' : 'attn';
  return `layers.${layer}.${group}.${target}`;
}

/**
 * RoPE inverse frequencies θ^(−2j/D), j = 0 … D/2−1, rescaled when the config has `ropeScaling`
 * (transformers `_compute_llama3_parameters`, same comparisons so boundary bands match).
 */
export function ropeInverseFrequencies(c: ModelConfig): number[] {
  const { D } = modelDims(c);
  const base = Array.from({ length: D / 2 }, (_, j) => 1 / Math.pow(c.ropeTheta, (2 * j) / D));
  const s = c.ropeScaling;
  if (!s) return base;
  const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  return base.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen > lowFreqWavelen) return f / s.factor;
    if (wavelen < highFreqWavelen) return f;
    const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    return (1 - smooth) * (f / s.factor) + smooth * f;
  });
}

/** Number of parameters (a tied head counted once). */
export function parameterCount(c: ModelConfig): number {
  return parameterShapes(c).reduce((sum, [, shape]) => sum + shape.reduce((a, b) => a * b, 1), 0);
}
