/**
 * Bridge to Hugging Face Qwen2/Qwen3/Llama/GPT-2 checkpoints: parameter names both ways and
 * `config.json` → ModelConfig. Loading a folder is `hf-checkpoint.ts`; GPT-2's tensors, which are
 * fused and transposed rather than renamed, are converted in `hf-gpt2.ts`.
 *
 *   ours                              Hugging Face (LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM)
 *   embed.weight                      model.embed_tokens.weight
 *   layers.{i}.attn_norm.weight       model.layers.{i}.input_layernorm.weight
 *   layers.{i}.attn.{q,k,v,o}.{w,b}   model.layers.{i}.self_attn.{q,k,v,o}_proj.{weight,bias}
 *   layers.{i}.attn.{q,k}_norm.weight model.layers.{i}.self_attn.{q,k}_norm.weight   (Qwen3)
 *   layers.{i}.mlp_norm.weight        model.layers.{i}.post_attention_layernorm.weight
 *   layers.{i}.mlp.{gate,up,down}.w   model.layers.{i}.mlp.{gate,up,down}_proj.weight
 *   norm.weight                       model.norm.weight
 *   lm_head.weight                    lm_head.weight
 * Both store linear weights [out, in], so tensors copy over unchanged.
 */
import { z } from 'zod';
import { modelConfigSchema } from './model-config.ts';
import type { LoraTarget, ModelConfig, RopeScaling } from './model-config.ts';
import { formatIssues } from './json-file.ts';

/** Hugging Face module names of the LoRA-targetable projections (PEFT `target_modules`). */
export const hfProjectionNames = {
  q: 'q_proj', k: 'k_proj', v: 'v_proj', o: 'o_proj', gate: 'gate_proj', up: 'up_proj', down: 'down_proj',
} as const satisfies Record<LoraTarget, string>;

/** The Hugging Face module path of a projection: `model.layers.3.self_attn.q_proj`. */
export function hfProjectionModule(layer: number, target: LoraTarget): string {
  const group = target === 'gate' || target === 'up' || target === 'down' ? 'mlp' : 'self_attn';
  return `model.layers.${layer}.${group}.${hfProjectionNames[target]}`;
}

const I = '(0|[1-9][0-9]*)'; // a layer index without leading zeros, so the mapping is a bijection

/** Pairs of (our pattern, HF replacement) and (HF pattern, our replacement). */
const nameRules: ReadonlyArray<{ ours: RegExp; hf: RegExp; toHf: string; toOurs: string }> = [
  { ours: /^embed\.weight$/, toHf: 'model.embed_tokens.weight', hf: /^model\.embed_tokens\.weight$/, toOurs: 'embed.weight' },
  {
    ours: new RegExp(`^layers\\.${I}\\.attn_norm\\.weight$`), toHf: 'model.layers.$1.input_layernorm.weight',
    hf: new RegExp(`^model\\.layers\\.${I}\\.input_layernorm\\.weight$`), toOurs: 'layers.$1.attn_norm.weight',
  },
  {
    ours: new RegExp(`^layers\\.${I}\\.attn\\.(q|k|v|o)\\.(weight|bias)$`), toHf: 'model.layers.$1.self_attn.$2_proj.$3',
    hf: new RegExp(`^model\\.layers\\.${I}\\.self_attn\\.(q|k|v|o)_proj\\.(weight|bias)$`), toOurs: 'layers.$1.attn.$2.$3',
  },
  {
    ours: new RegExp(`^layers\\.${I}\\.attn\\.(q|k)_norm\\.weight$`), toHf: 'model.layers.$1.self_attn.$2_norm.weight',
    hf: new RegExp(`^model\\.layers\\.${I}\\.self_attn\\.(q|k)_norm\\.weight$`), toOurs: 'layers.$1.attn.$2_norm.weight',
  },
  {
    ours: new RegExp(`^layers\\.${I}\\.mlp_norm\\.weight$`), toHf: 'model.layers.$1.post_attention_layernorm.weight',
    hf: new RegExp(`^model\\.layers\\.${I}\\.post_attention_layernorm\\.weight$`), toOurs: 'layers.$1.mlp_norm.weight',
  },
  {
    ours: new RegExp(`^layers\\.${I}\\.mlp\\.(gate|up|down)\\.weight$`), toHf: 'model.layers.$1.mlp.$2_proj.weight',
    hf: new RegExp(`^model\\.layers\\.${I}\\.mlp\\.(gate|up|down)_proj\\.weight$`), toOurs: 'layers.$1.mlp.$2.weight',
  },
  { ours: /^norm\.weight$/, toHf: 'model.norm.weight', hf: /^model\.norm\.weight$/, toOurs: 'norm.weight' },
  { ours: /^lm_head\.weight$/, toHf: 'lm_head.weight', hf: /^lm_head\.weight$/, toOurs: 'lm_head.weight' },
];

/** Our parameter name → Hugging Face name. Throws for a name that is not one of ours. */
export function toHfName(name: string): string {
  for (const r of nameRules) if (r.ours.test(name)) return name.replace(r.ours, r.toHf);
  throw new Error(`parameter '${name}' has no Hugging Face counterpart`);
}

/** Hugging Face name → our parameter name, or undefined when it is not part of our model. */
export function fromHfName(hfName: string): string | undefined {
  for (const r of nameRules) if (r.hf.test(hfName)) return hfName.replace(r.hf, r.toOurs);
  return undefined;
}


const positiveInt = z.int().positive();

/**
 * GPT-2's config.json names its sizes n_embd, n_layer, n_head, n_positions and n_inner;
 * transformers reads them as hidden_size etc. through `GPT2Config.attribute_map` (n_inner null
 * meaning 4·n_embd). The same renaming here lets one schema read both families.
 */
function gpt2AttributeMap(raw: unknown): unknown {
  if (typeof raw !== 'object' || raw === null || (raw as { model_type?: unknown }).model_type !== 'gpt2') return raw;
  const r = raw as Record<string, unknown>;
  const out: Record<string, unknown> = { ...r };
  const alias = (ours: string, theirs: string) => { if (out[ours] === undefined && r[theirs] !== undefined) out[ours] = r[theirs]; };
  alias('hidden_size', 'n_embd');
  alias('num_hidden_layers', 'n_layer');
  alias('num_attention_heads', 'n_head');
  alias('max_position_embeddings', 'n_positions');
  alias('intermediate_size', 'n_inner');
  if (out['intermediate_size'] == null && typeof out['hidden_size'] === 'number') out['intermediate_size'] = 4 * out['hidden_size'];
  return out;
}

/** RoPE settings as `rope_scaling` (transformers ≤ 4.x) or `rope_parameters` (v5) spell them. */
const ropeFieldsSchema = z.looseObject({
  type: z.string().optional(),
  rope_type: z.string().optional(),
  rope_theta: z.number().positive().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().positive().optional(),
  high_freq_factor: z.number().positive().optional(),
  original_max_position_embeddings: positiveInt.optional(),
});

/**
 * The Qwen2/Qwen3/Llama fields of a Hugging Face `config.json` (transformers `LlamaConfig`,
 * `Qwen2Config`, `Qwen3Config`). Other fields are allowed and ignored; the ones that would change
 * the math are checked in `hfConfigToModelConfig`.
 */
export const hfConfigSchema = z.preprocess(gpt2AttributeMap, z.looseObject({
  model_type: z.string(),
  architectures: z.array(z.string()).nullish(),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.nullish(),
  intermediate_size: positiveInt,
  head_dim: positiveInt.nullish(),
  rope_theta: z.number().positive().nullish(),
  /** transformers v5 moves rope_theta and the scaling fields here. */
  rope_parameters: ropeFieldsSchema.nullish(),
  rope_scaling: ropeFieldsSchema.nullish(),
  rms_norm_eps: z.number().positive().nullish(),
  tie_word_embeddings: z.boolean().nullish(),
  max_position_embeddings: positiveInt.nullish(),
  attention_bias: z.boolean().nullish(),
  mlp_bias: z.boolean().nullish(),
  hidden_act: z.string().nullish(),
  use_sliding_window: z.boolean().nullish(),
  /** Per-layer attention kinds (recent Qwen3 configs): only full attention is supported. */
  layer_types: z.array(z.string()).nullish(),
  /** The dtype the weights were saved in (`torch_dtype`, renamed `dtype` in transformers v5). */
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  /** The hub id or path the checkpoint was saved from (transformers writes it on save_pretrained). */
  _name_or_path: z.string().nullish(),
  /** GPT-2 only (`GPT2Config`): the MLP activation, LayerNorm epsilon and attention variants. */
  activation_function: z.string().nullish(),
  layer_norm_epsilon: z.number().positive().nullish(),
  scale_attn_weights: z.boolean().nullish(),
  scale_attn_by_inverse_layer_idx: z.boolean().nullish(),
  add_cross_attention: z.boolean().nullish(),
}));
export type HfConfig = z.output<typeof hfConfigSchema>;

/**
 * Supported `model_type`s and what each implies. Qwen2 always has q/k/v biases; Qwen3 has
 * per-head q/k RMSNorm; Llama (and SmolLM2, which is a Llama) has biases only with `attention_bias`.
 */
const modelTypes = {
  qwen2: { defaultBias: true, fixedBias: true, qkNorm: false, maxPositions: 32768 },
  qwen3: { defaultBias: false, fixedBias: false, qkNorm: true, maxPositions: 32768 },
  llama: { defaultBias: false, fixedBias: false, qkNorm: false, maxPositions: 2048 },
  // GPT-2 / DialoGPT: biases on every projection, learned positions (n_positions, default 1024).
  gpt2: { defaultBias: true, fixedBias: true, qkNorm: false, maxPositions: 1024 },
} as const;

/** GPT-2 activation names that are the tanh-approximated GELU (transformers `ACT2FN`). */
const gpt2Activations = ['gelu_new', 'gelu_pytorch_tanh'];
export type HfModelType = keyof typeof modelTypes;
export const supportedHfModelTypes = Object.keys(modelTypes) as HfModelType[];

/** Which HF field each of our config fields comes from, so errors name the field the user can see. */
const hfFieldOf: Record<keyof ModelConfig, string> = {
  vocabSize: 'vocab_size', hiddenSize: 'hidden_size', numLayers: 'num_hidden_layers', numHeads: 'num_attention_heads',
  numKvHeads: 'num_key_value_heads', headDim: 'head_dim', intermediateSize: 'intermediate_size', ropeTheta: 'rope_theta',
  rmsNormEps: 'rms_norm_eps', tieEmbeddings: 'tie_word_embeddings', attentionBias: 'attention_bias',
  maxSequenceLength: 'max_position_embeddings', qkNorm: 'model_type', ropeScaling: 'rope_scaling',
  architecture: 'model_type', positionEmbeddings: 'max_position_embeddings',
};
/** GPT-2's own spelling of the fields it names differently. */
const gpt2FieldOf: Partial<Record<keyof ModelConfig, string>> = {
  hiddenSize: 'n_embd', numLayers: 'n_layer', numHeads: 'n_head', intermediateSize: 'n_inner',
  rmsNormEps: 'layer_norm_epsilon', maxSequenceLength: 'n_positions', positionEmbeddings: 'n_positions',
};

export interface HfConfigOptions {
  /**
   * Overrides `max_position_embeddings` (often 32k–128k), which sizes KV caches here; callers
   * usually cap it to the longest prompt + response they will use.
   */
  maxSequenceLength?: number;
}

/**
 * The RoPE scaling of a config, or a problem. `default` (and no scaling) is plain RoPE; `llama3`
 * needs its four numbers; every other kind (linear, dynamic, yarn, longrope, …) changes the
 * math in ways not implemented here and is refused by name.
 */
function ropeScalingOf(field: string, r: z.output<typeof ropeFieldsSchema> | null | undefined): { scaling?: RopeScaling; problem?: string } {
  const kind = r?.rope_type ?? r?.type;
  if (r == null || kind === undefined || kind === 'default') return {};
  if (kind !== 'llama3') return { problem: `${field}: '${kind}' RoPE scaling is not supported (supported: llama3)` };
  const missing = (['factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'] as const).filter((k) => r[k] === undefined);
  if (missing.length > 0) return { problem: `${field}: llama3 RoPE scaling needs ${missing.join(', ')}` };
  return {
    scaling: {
      type: 'llama3', factor: r.factor!, lowFreqFactor: r.low_freq_factor!, highFreqFactor: r.high_freq_factor!,
      originalMaxPositionEmbeddings: r.original_max_position_embeddings!,
    },
  };
}

/** Converts a Hugging Face Qwen2/Qwen3/Llama `config.json` object to our ModelConfig. Errors name the HF fields. */
export function hfConfigToModelConfig(hf: unknown, source = 'Hugging Face config', options: HfConfigOptions = {}): ModelConfig {
  const r = hfConfigSchema.safeParse(hf);
  if (!r.success) throw new Error(`invalid ${source}:\n${formatIssues(r.error)}`);
  const c = r.data;
  const problems: string[] = [];
  const modelType = supportedHfModelTypes.find((t) => t === c.model_type);
  if (!modelType) problems.push(`model_type: '${c.model_type}' is not supported (supported: ${supportedHfModelTypes.join(', ')})`);
  const kind = modelType ? modelTypes[modelType] : undefined;
  if (c.architectures && c.architectures.length > 0 && !c.architectures.some((a) => a.endsWith('ForCausalLM') || a === 'GPT2LMHeadModel')) {
    problems.push(`architectures: ${c.architectures.join(', ')} is not a causal language model (expected a …ForCausalLM or GPT2LMHeadModel)`);
  }
  const gpt2 = modelType === 'gpt2';
  if (gpt2) {
    if (c.activation_function != null && !gpt2Activations.includes(c.activation_function)) problems.push(`activation_function: '${c.activation_function}' is not supported (only the tanh GELU: ${gpt2Activations.join(', ')})`);
    if (c.scale_attn_weights === false) problems.push('scale_attn_weights: unscaled attention is not supported');
    if (c.scale_attn_by_inverse_layer_idx === true) problems.push('scale_attn_by_inverse_layer_idx: per-layer attention scaling is not supported');
    if (c.add_cross_attention === true) problems.push('add_cross_attention: cross-attention (encoder-decoder) is not supported');
  }
  if (!gpt2 && c.hidden_act != null && c.hidden_act !== 'silu') problems.push(`hidden_act: '${c.hidden_act}' is not supported (only 'silu', SwiGLU)`);
  if (c.mlp_bias === true) problems.push('mlp_bias: MLP biases are not supported');
  if (c.use_sliding_window === true) problems.push('use_sliding_window: sliding-window attention is not supported');
  const otherLayers = (c.layer_types ?? []).filter((t) => t !== 'full_attention');
  if (otherLayers.length > 0) problems.push(`layer_types: only 'full_attention' layers are supported, got '${otherLayers[0]}'`);
  // transformers v5 writes rope_parameters; older versions rope_scaling. Either may carry llama3.
  const fromScaling = ropeScalingOf('rope_scaling', c.rope_scaling);
  const fromParameters = ropeScalingOf('rope_parameters.rope_type', c.rope_parameters);
  for (const p of [fromScaling.problem, fromParameters.problem]) if (p) problems.push(p);
  const ropeScaling = fromScaling.scaling ?? fromParameters.scaling;
  if (kind?.fixedBias && c.attention_bias === false) problems.push(`attention_bias: ${c.model_type} models always have q/k/v biases`);
  if (problems.length > 0) throw new Error(`invalid ${source}:\n${problems.map((p) => `  ${p}`).join('\n')}`);

  const ours = {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads,
    numKvHeads: c.num_key_value_heads ?? c.num_attention_heads,
    ...(c.head_dim != null ? { headDim: c.head_dim } : {}),
    intermediateSize: c.intermediate_size,
    // transformers' LlamaConfig/Qwen2Config/Qwen3Config defaults where a field is absent.
    ropeTheta: c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000,
    // GPT2Config: layer_norm_epsilon 1e-5, tied embeddings unless said otherwise.
    rmsNormEps: (gpt2 ? c.layer_norm_epsilon ?? 1e-5 : c.rms_norm_eps) ?? 1e-6,
    tieEmbeddings: c.tie_word_embeddings ?? gpt2,
    attentionBias: kind?.fixedBias ? true : (c.attention_bias ?? kind?.defaultBias ?? false),
    maxSequenceLength: options.maxSequenceLength ?? c.max_position_embeddings ?? kind?.maxPositions ?? 2048,
    ...(gpt2 ? { architecture: 'gpt2' as const, positionEmbeddings: c.max_position_embeddings ?? kind!.maxPositions } : {}),
    ...(kind?.qkNorm ? { qkNorm: true } : {}),
    ...(ropeScaling ? { ropeScaling } : {}),
  };
  const m = modelConfigSchema.safeParse(ours);
  if (m.success) return m.data;
  const lines = m.error.issues.map((i) => {
    const field = i.path[0];
    const key = field as keyof ModelConfig;
    const name = typeof field === 'string' && field in hfFieldOf ? ((gpt2 ? gpt2FieldOf[key] : undefined) ?? hfFieldOf[key]) : String(field);
    return `  ${[name, ...i.path.slice(1).map(String)].join('.')}: ${i.message}`;
  });
  throw new Error(`invalid ${source}:\n${lines.join('\n')}`);
}

/** Our config fields back in HF form, for writing a Hugging Face folder (e.g. a test checkpoint). */
export function modelConfigToHf(c: ModelConfig, modelType: HfModelType): Record<string, unknown> {
  const kind = modelTypes[modelType];
  if ((modelType === 'gpt2') !== (c.architecture === 'gpt2')) {
    throw new Error(`a model of architecture ${c.architecture ?? 'llama'} cannot be written as model_type '${modelType}'`);
  }
  if (modelType === 'gpt2') {
    return {
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
      vocab_size: c.vocabSize,
      n_embd: c.hiddenSize,
      n_layer: c.numLayers,
      n_head: c.numHeads,
      n_inner: c.intermediateSize,
      n_positions: c.positionEmbeddings,
      activation_function: 'gelu_new',
      layer_norm_epsilon: c.rmsNormEps,
      tie_word_embeddings: c.tieEmbeddings,
    };
  }
  if (Boolean(c.qkNorm) !== kind.qkNorm || (kind.fixedBias && !c.attentionBias)) {
    throw new Error(`a model with qkNorm ${Boolean(c.qkNorm)} and attentionBias ${c.attentionBias} cannot be written as model_type '${modelType}'`);
  }
  const out: Record<string, unknown> = {
    architectures: [{ qwen2: 'Qwen2ForCausalLM', qwen3: 'Qwen3ForCausalLM', llama: 'LlamaForCausalLM' }[modelType]],
    model_type: modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads ?? c.numHeads,
    head_dim: c.headDim ?? c.hiddenSize / c.numHeads,
    intermediate_size: c.intermediateSize,
    hidden_act: 'silu',
    rope_theta: c.ropeTheta,
    rms_norm_eps: c.rmsNormEps,
    tie_word_embeddings: c.tieEmbeddings,
    attention_bias: c.attentionBias,
    max_position_embeddings: c.maxSequenceLength,
  };
  if (c.ropeScaling) {
    const s = c.ropeScaling;
    out['rope_scaling'] = {
      rope_type: 'llama3', factor: s.factor, low_freq_factor: s.lowFreqFactor, high_freq_factor: s.highFreqFactor,
      original_max_position_embeddings: s.originalMaxPositionEmbeddings,
    };
  }
  return out;
}
