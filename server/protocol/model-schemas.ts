/**
 * The model, LoRA and optimizer schemas, declared once: the experiment config embeds them
 * (`models.<id>.config`, `policies.<id>.lora`, `optimizer`) and `server/models` validates
 * checkpoint and adapter files with the same objects (model-config.ts, lora.ts, optimizer.ts
 * re-export them), so the two cannot drift. Protocol imports only zod, so they live here.
 *
 * Each field is documented once, in its `.describe()`: that text is the editor's hover (through
 * `configs/schema.json`) and the reference for readers of the code.
 */
import { z } from 'zod';
import { sizeLimits } from './size-limits.ts';

/** The projections a LoRA adapter may target, named as in the model's parameter table (`models/model-config.ts`). */
export const loraTargets = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof loraTargets)[number];

/**
 * Llama 3.1's RoPE frequency rescaling (transformers `_compute_llama3_parameters`; applied by
 * `ropeInverseFrequencies` in models/model-config.ts).
 */
export const llama3RopeScalingSchema = z
  .object({
    type: z.literal('llama3').describe("Scaling kind; only Llama 3's is supported."),
    factor: z.number().positive().describe('Stretch factor of the low frequencies (8 in Llama 3.1, 32 in Llama 3.2).'),
    lowFreqFactor: z.number().positive().describe('Wavelengths above originalMaxPositionEmbeddings / lowFreqFactor are divided by factor.'),
    highFreqFactor: z.number().positive().describe('Wavelengths below originalMaxPositionEmbeddings / highFreqFactor are kept; the band between is interpolated.'),
    originalMaxPositionEmbeddings: z.number().int().positive().max(sizeLimits.maxSequenceLength).describe('Context length the model was pretrained with before scaling (8192 for Llama 3). At most 1048576.'),
  })
  .strict()
  .refine((r) => r.highFreqFactor > r.lowFreqFactor, { message: 'highFreqFactor must be greater than lowFreqFactor', path: ['highFreqFactor'] });
export type RopeScaling = z.output<typeof llama3RopeScalingSchema>;

/**
 * The block layouts a model may have. llama: the Qwen2/Qwen3/Llama shape (RMSNorm, RoPE, GQA
 * attention, SwiGLU MLP). gpt2: GPT-2 (learned absolute position embeddings, LayerNorm with bias,
 * biases on every projection, GELU MLP without a gate).
 */
export const modelArchitectures = ['llama', 'gpt2'] as const;
export type ModelArchitecture = (typeof modelArchitectures)[number];

/** Decoder-only transformer: the Qwen2/Llama shape, or GPT-2 (`architecture`). */
export const modelConfigSchema = z
  .object({
    // Optional rather than defaulted, so configs written before it existed hash and serialise unchanged.
    architecture: z
      .enum(modelArchitectures)
      .optional()
      .describe('Block layout. llama (default): RMSNorm, RoPE, SwiGLU MLP (Qwen2, Qwen3, Llama). gpt2: learned position embeddings (positionEmbeddings of them), LayerNorm with bias, biases on every projection (attentionBias true), tanh-approximated GELU MLP without a gate (GPT-2, DialoGPT).'),
    positionEmbeddings: z.number().int().positive().max(sizeLimits.maxSequenceLength).optional().describe('Rows of the learned position-embedding table (GPT-2 n_positions); gpt2 only, and bounds maxSequenceLength. At most 1048576.'),
    vocabSize: z.number().int().positive().max(sizeLimits.vocabSize).describe("Vocabulary size V; must equal the tokenizer's. At most 1048576."),
    hiddenSize: z.number().int().positive().max(sizeLimits.hiddenSize).describe('Model width C (hidden size). At most 65536.'),
    numLayers: z.number().int().positive().max(sizeLimits.numLayers).describe('Number of transformer blocks L. At most 1024.'),
    numHeads: z.number().int().positive().max(sizeLimits.numHeads).describe('Number of query heads H. Must divide hiddenSize unless headDim is given. At most 1024.'),
    numKvHeads: z.number().int().positive().max(sizeLimits.numHeads).optional().describe('Number of key/value heads (grouped-query attention). Must divide numHeads. Default: numHeads. At most 1024.'),
    headDim: z.number().int().positive().max(sizeLimits.headDim).optional().describe('Per-head dimension D, even (RoPE rotates pairs). Default: hiddenSize / numHeads. At most 1024.'),
    intermediateSize: z.number().int().positive().max(sizeLimits.intermediateSize).describe('Hidden size F of the SwiGLU MLP. At most 524288.'),
    ropeTheta: z.number().positive().default(10000).describe('RoPE base frequency theta.'),
    rmsNormEps: z.number().positive().default(1e-6).describe('Epsilon of the normalisation layers: RMSNorm, or LayerNorm with architecture gpt2.'),
    tieEmbeddings: z.boolean().default(true).describe('Whether the output head shares the embedding matrix.'),
    attentionBias: z.boolean().default(false).describe('Whether the q/k/v projections carry a bias (Qwen2 does, Llama does not).'),
    maxSequenceLength: z.number().int().positive().max(sizeLimits.maxSequenceLength).default(512).describe('Longest sequence (prompt + response) the model is used with; sizes the KV caches. At most 1048576.'),
    // Optional rather than defaulted, so configs written before it existed hash and serialise unchanged.
    qkNorm: z.boolean().optional().describe('Per-head RMSNorm of queries and keys before RoPE, weights [headDim] (Qwen3). Default: false.'),
    ropeScaling: llama3RopeScalingSchema.optional().describe("Llama 3.1's RoPE frequency rescaling (rope_scaling with rope_type llama3). Absent: plain RoPE."),
  })
  .strict()
  .superRefine((c, ctx) => {
    const kv = c.numKvHeads ?? c.numHeads;
    if (c.headDim === undefined && c.hiddenSize % c.numHeads !== 0) {
      ctx.addIssue({ code: 'custom', path: ['numHeads'], message: `numHeads (${c.numHeads}) must divide hiddenSize (${c.hiddenSize}), or headDim must be given` });
    }
    if (c.numHeads % kv !== 0) {
      ctx.addIssue({ code: 'custom', path: ['numKvHeads'], message: `numKvHeads (${kv}) must divide numHeads (${c.numHeads})` });
    }
    const d = c.headDim ?? Math.floor(c.hiddenSize / c.numHeads);
    if (c.architecture !== 'gpt2') {
      if (d % 2 !== 0) ctx.addIssue({ code: 'custom', path: ['headDim'], message: `the head dimension (${d}: headDim, or hiddenSize / numHeads) must be even for RoPE` });
      if (c.positionEmbeddings !== undefined) ctx.addIssue({ code: 'custom', path: ['positionEmbeddings'], message: 'learned position embeddings belong to architecture gpt2; this model uses RoPE' });
      return;
    }
    // GPT-2: every projection has a bias, positions come from a learned table, no RoPE or q/k norm.
    const gpt2 = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message: `${message} (architecture gpt2)` });
    if (c.positionEmbeddings === undefined) gpt2('positionEmbeddings', 'is required: the number of learned positions');
    else if (c.maxSequenceLength > c.positionEmbeddings) gpt2('maxSequenceLength', `(${c.maxSequenceLength}) must be at most positionEmbeddings (${c.positionEmbeddings}): there is no position embedding past it`);
    if (!c.attentionBias) gpt2('attentionBias', 'must be true: GPT-2 has biases on every projection');
    if (c.qkNorm) gpt2('qkNorm', 'is not part of GPT-2');
    if (c.ropeScaling) gpt2('ropeScaling', 'does not apply: GPT-2 has no RoPE');
    if (kv !== c.numHeads) gpt2('numKvHeads', `(${kv}) must equal numHeads (${c.numHeads}): GPT-2 has no grouped-query attention`);
    if (c.numHeads * d !== c.hiddenSize) gpt2('headDim', `numHeads × head dimension (${c.numHeads} × ${d}) must equal hiddenSize (${c.hiddenSize})`);
  });
export type ModelConfigInput = z.input<typeof modelConfigSchema>;
export type ModelConfig = z.output<typeof modelConfigSchema>;

/** A LoRA adapter (Hu et al. 2021): y = W·x + (alpha / rank)·B·(A·x) on each targeted projection. */
export const loraConfigSchema = z
  .object({
    rank: z.int().positive().max(sizeLimits.loraRank).describe('Rank r of the low-rank update B·A. At most 4096 (a rank near the model width is no longer low-rank: train the model itself).'),
    alpha: z.number().positive().optional().describe('The update is scaled by alpha / rank. Default: rank (scale 1).'),
    targets: z
      .array(z.enum(loraTargets))
      .min(1)
      .max(loraTargets.length)
      .default(() => [...loraTargets])
      .describe('Projections adapted in every layer: attention q, k, v, o and MLP gate, up, down, each at most once. Default: all.'),
    dropout: z.literal(0).default(0).describe('Dropout on the adapter input. Only 0 is supported.'),
  })
  .strict()
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    c.targets.forEach((t, i) => {
      if (seen.has(t)) ctx.addIssue({ code: 'custom', path: ['targets', i], message: `target '${t}' is listed twice` });
      seen.add(t);
    });
  });
export type LoraConfigInput = z.input<typeof loraConfigSchema>;
export type LoraConfig = z.output<typeof loraConfigSchema>;

/** The learning-rate schedule over optimizer steps (`learningRate` in models/optimizer.ts). */
export const scheduleSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('constant').describe('The learning rate stays at lr.') }).strict(),
  z
    .object({
      kind: z.literal('cosine').describe('Linear warm-up to lr, then cosine decay to minLrRatio × lr.'),
      warmupSteps: z.number().int().min(0).max(sizeLimits.optimizerSteps).describe('Optimizer steps of linear warm-up from 0 to lr. At most 1000000000.'),
      totalSteps: z.number().int().positive().max(sizeLimits.optimizerSteps).describe('Optimizer steps the schedule spans (warm-up included); afterwards the rate stays at its floor. At most 1000000000.'),
      minLrRatio: z.number().min(0).max(1).default(0).describe('Floor of the cosine decay as a fraction of lr.'),
    })
    .strict(),
]);

/** AdamW with global-norm gradient clipping, as `models/optimizer.ts` and the `adamw` graph run it. */
export const optimizerSchema = z
  .object({
    lr: z
      .number()
      .positive()
      .default(1e-3)
      .describe('Peak learning rate. The default suits LoRA adapters of rank 8 on the embedded model; training all weights (no lora) wants about 1e-4.'),
    beta1: z.number().min(0).lt(1).default(0.9).describe('AdamW beta1 (first-moment decay).'),
    beta2: z.number().min(0).lt(1).default(0.999).describe('AdamW beta2 (second-moment decay).'),
    eps: z.number().positive().default(1e-8).describe('AdamW epsilon.'),
    weightDecay: z.number().min(0).default(0.01).describe('Decoupled weight decay, applied to matrices (not to norm gains or biases).'),
    maxGradNorm: z.number().min(0).default(1.0).describe('Clip of the global gradient norm of each update; 0 disables clipping.'),
    schedule: scheduleSchema.default({ kind: 'constant' }).describe('Learning-rate schedule over optimizer steps: constant, or cosine with linear warm-up.'),
  })
  .strict();
export type OptimizerConfig = z.output<typeof optimizerSchema>;
