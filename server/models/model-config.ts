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
 *
 * With `architecture: 'gpt2'` (GPT-2, DialoGPT) the table is instead:
 *   embed.weight                    [V, C]
 *   pos_embed.weight                [N, C]        (N = positionEmbeddings, learned absolute positions)
 *   layers.{i}.attn_norm.{weight,bias}   [C]      (LayerNorm)
 *   layers.{i}.attn.{q,k,v}.{weight,bias} [C, C], [C]
 *   layers.{i}.attn.o.{weight,bias} [C, C], [C]
 *   layers.{i}.mlp_norm.{weight,bias}    [C]
 *   layers.{i}.mlp.up.{weight,bias} [F, C], [F]   (GELU MLP: no gate)
 *   layers.{i}.mlp.down.{weight,bias} [C, F], [C]
 *   norm.{weight,bias}              [C]
 *   lm_head.weight                  [V, C]        (absent when tieEmbeddings)
 * still [out, in]: Hugging Face's Conv1D [in, out] tensors (and the fused c_attn) are transposed
 * and split on load (`hf-gpt2.ts`).
 */
// The schema is declared once in protocol (the experiment config embeds it); the same object
// validates a checkpoint's config.json, bounded by the same ceilings.
import { loraTargets, modelConfigSchema, type LoraTarget, type ModelConfig } from '../protocol/model-schemas.ts';
import { parseWithSchema } from './json-file.ts';

export { loraTargets, modelArchitectures, modelConfigSchema } from '../protocol/model-schemas.ts';
export type { LoraTarget, ModelArchitecture, ModelConfig, ModelConfigInput, RopeScaling } from '../protocol/model-schemas.ts';

/** Whether the model is GPT-2 shaped (LayerNorm, learned positions, GELU MLP) rather than Llama shaped. */
export const isGpt2 = (c: ModelConfig): boolean => c.architecture === 'gpt2';

/** The projections a model has, in `loraTargets` order: GPT-2's MLP has no gate. */
export function modelProjections(c: ModelConfig): readonly LoraTarget[] {
  return isGpt2(c) ? loraTargets.filter((t) => t !== 'gate') : loraTargets;
}

/**
 * The LoRA targets that exist in the model, in canonical order: the default "all" on GPT-2 leaves
 * out the gate it has not got. An adapter left with no projection at all is an error.
 */
export function adaptedTargets(c: ModelConfig, targets: readonly LoraTarget[]): LoraTarget[] {
  const out = modelProjections(c).filter((t) => targets.includes(t));
  if (out.length === 0) throw new Error(`lora.targets: none of ${targets.join(', ')} is a projection of this ${c.architecture ?? 'llama'} model (it has ${modelProjections(c).join(', ')})`);
  return out;
}

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
  return parseWithSchema(modelConfigSchema, input, source);
}

/** Every parameter of the model with its shape, in a stable order (the checkpoint order). */
export function parameterShapes(c: ModelConfig): Array<[name: string, shape: number[]]> {
  const { V, C, L, H, Hkv, D, F } = modelDims(c);
  const out: Array<[string, number[]]> = [['embed.weight', [V, C]]];
  if (isGpt2(c)) {
    out.push(['pos_embed.weight', [c.positionEmbeddings!, C]]);
    const linear = (name: string, outDim: number, inDim: number) => out.push([`${name}.weight`, [outDim, inDim]], [`${name}.bias`, [outDim]]);
    for (let i = 0; i < L; i++) {
      const p = `layers.${i}`;
      out.push([`${p}.attn_norm.weight`, [C]], [`${p}.attn_norm.bias`, [C]]);
      for (const t of ['q', 'k', 'v'] as const) linear(`${p}.attn.${t}`, H * D, C);
      linear(`${p}.attn.o`, C, H * D);
      out.push([`${p}.mlp_norm.weight`, [C]], [`${p}.mlp_norm.bias`, [C]]);
      linear(`${p}.mlp.up`, F, C);
      linear(`${p}.mlp.down`, C, F);
    }
    out.push(['norm.weight', [C]], ['norm.bias', [C]]);
    if (!c.tieEmbeddings) out.push(['lm_head.weight', [V, C]]);
    return out;
  }
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
