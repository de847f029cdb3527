/**
 * Bridge to Hugging Face Qwen2/Llama checkpoints: parameter names both ways, `config.json` →
 * ModelConfig, and loading a checkpoint folder (single `model.safetensors` or sharded with
 * `model.safetensors.index.json`) into our parameter map.
 *
 *   ours                              Hugging Face (LlamaForCausalLM / Qwen2ForCausalLM)
 *   embed.weight                      model.embed_tokens.weight
 *   layers.{i}.attn_norm.weight       model.layers.{i}.input_layernorm.weight
 *   layers.{i}.attn.{q,k,v,o}.{w,b}   model.layers.{i}.self_attn.{q,k,v,o}_proj.{weight,bias}
 *   layers.{i}.mlp_norm.weight        model.layers.{i}.post_attention_layernorm.weight
 *   layers.{i}.mlp.{gate,up,down}.w   model.layers.{i}.mlp.{gate,up,down}_proj.weight
 *   norm.weight                       model.norm.weight
 *   lm_head.weight                    lm_head.weight
 * Both store linear weights [out, in], so tensors copy over unchanged.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { modelConfigSchema, parameterShapes } from './model-config.ts';
import type { LoraTarget, ModelConfig } from './model-config.ts';
import { matchTensors } from './checkpoint.ts';
import { formatIssues, readJsonFile } from './json-file.ts';
import { readSafetensorsFile } from './safetensors.ts';
import type { SafetensorsReadOptions, SafetensorsTensor } from './safetensors.ts';

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

/** Buffers some checkpoints carry that are derived from the config, not learned: skipped on load. */
const derivedBuffer = /\.rotary_emb\.inv_freq$/;

const positiveInt = z.int().positive();

/**
 * The Qwen2/Llama fields of a Hugging Face `config.json` (transformers `LlamaConfig`/`Qwen2Config`).
 * Other fields are allowed and ignored; the ones that would change the math are checked below.
 */
export const hfConfigSchema = z.looseObject({
  model_type: z.string(),
  vocab_size: positiveInt,
  hidden_size: positiveInt,
  num_hidden_layers: positiveInt,
  num_attention_heads: positiveInt,
  num_key_value_heads: positiveInt.nullish(),
  intermediate_size: positiveInt,
  head_dim: positiveInt.nullish(),
  rope_theta: z.number().positive().nullish(),
  /** transformers v5 moves rope_theta here. */
  rope_parameters: z.looseObject({ rope_theta: z.number().positive().optional(), rope_type: z.string().optional() }).nullish(),
  rope_scaling: z.looseObject({ type: z.string().optional(), rope_type: z.string().optional() }).nullish(),
  rms_norm_eps: z.number().positive().nullish(),
  tie_word_embeddings: z.boolean().nullish(),
  max_position_embeddings: positiveInt.nullish(),
  attention_bias: z.boolean().nullish(),
  mlp_bias: z.boolean().nullish(),
  hidden_act: z.string().nullish(),
  use_sliding_window: z.boolean().nullish(),
});
export type HfConfig = z.output<typeof hfConfigSchema>;

/** Supported `model_type`s. Qwen2 always has q/k/v biases; Llama has them only with `attention_bias`. */
const supportedModelTypes = ['qwen2', 'llama'] as const;

/** Which HF field each of our config fields comes from, so errors name the field the user can see. */
const hfFieldOf: Record<keyof ModelConfig, string> = {
  vocabSize: 'vocab_size', hiddenSize: 'hidden_size', numLayers: 'num_hidden_layers', numHeads: 'num_attention_heads',
  numKvHeads: 'num_key_value_heads', headDim: 'head_dim', intermediateSize: 'intermediate_size', ropeTheta: 'rope_theta',
  rmsNormEps: 'rms_norm_eps', tieEmbeddings: 'tie_word_embeddings', attentionBias: 'attention_bias',
  maxSequenceLength: 'max_position_embeddings',
};

export interface HfConfigOptions {
  /**
   * Overrides `max_position_embeddings` (often 32k–128k), which sizes KV caches here; callers
   * usually cap it to the longest prompt + response they will use.
   */
  maxSequenceLength?: number;
}

const isDefaultRope = (t: string | undefined): boolean => t === undefined || t === 'default';

/** Converts a Hugging Face Qwen2/Llama `config.json` object to our ModelConfig. Errors name the HF fields. */
export function hfConfigToModelConfig(hf: unknown, source = 'Hugging Face config', options: HfConfigOptions = {}): ModelConfig {
  const r = hfConfigSchema.safeParse(hf);
  if (!r.success) throw new Error(`invalid ${source}:\n${formatIssues(r.error)}`);
  const c = r.data;
  const problems: string[] = [];
  const modelType = supportedModelTypes.find((t) => t === c.model_type);
  if (!modelType) problems.push(`model_type: '${c.model_type}' is not supported (supported: ${supportedModelTypes.join(', ')})`);
  if (c.hidden_act != null && c.hidden_act !== 'silu') problems.push(`hidden_act: '${c.hidden_act}' is not supported (only 'silu', SwiGLU)`);
  if (c.mlp_bias === true) problems.push('mlp_bias: MLP biases are not supported');
  if (c.use_sliding_window === true) problems.push('use_sliding_window: sliding-window attention is not supported');
  if (c.rope_scaling != null && !isDefaultRope(c.rope_scaling.rope_type ?? c.rope_scaling.type)) {
    problems.push(`rope_scaling: '${c.rope_scaling.rope_type ?? c.rope_scaling.type}' RoPE scaling is not supported`);
  }
  if (c.rope_parameters != null && !isDefaultRope(c.rope_parameters.rope_type)) {
    problems.push(`rope_parameters.rope_type: '${c.rope_parameters.rope_type}' is not supported`);
  }
  if (modelType === 'qwen2' && c.attention_bias === false) problems.push('attention_bias: Qwen2 models always have q/k/v biases');
  if (problems.length > 0) throw new Error(`invalid ${source}:\n${problems.map((p) => `  ${p}`).join('\n')}`);

  const ours = {
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    numLayers: c.num_hidden_layers,
    numHeads: c.num_attention_heads,
    numKvHeads: c.num_key_value_heads ?? c.num_attention_heads,
    ...(c.head_dim != null ? { headDim: c.head_dim } : {}),
    intermediateSize: c.intermediate_size,
    // transformers' LlamaConfig/Qwen2Config defaults where a field is absent.
    ropeTheta: c.rope_theta ?? c.rope_parameters?.rope_theta ?? 10000,
    rmsNormEps: c.rms_norm_eps ?? 1e-6,
    tieEmbeddings: c.tie_word_embeddings ?? false,
    attentionBias: modelType === 'qwen2' ? true : (c.attention_bias ?? false),
    maxSequenceLength: options.maxSequenceLength ?? c.max_position_embeddings ?? (modelType === 'qwen2' ? 32768 : 2048),
  };
  const m = modelConfigSchema.safeParse(ours);
  if (m.success) return m.data;
  const lines = m.error.issues.map((i) => {
    const field = i.path[0];
    const name = typeof field === 'string' && field in hfFieldOf ? hfFieldOf[field as keyof ModelConfig] : String(field);
    return `  ${name}: ${i.message}`;
  });
  throw new Error(`invalid ${source}:\n${lines.join('\n')}`);
}

const indexSchema = z.looseObject({
  metadata: z.looseObject({}).nullish(),
  weight_map: z.record(z.string(), z.string()),
});

export const HF_CONFIG_FILE = 'config.json';
export const HF_WEIGHTS_FILE = 'model.safetensors';
export const HF_INDEX_FILE = 'model.safetensors.index.json';

export interface HfCheckpoint {
  config: ModelConfig;
  /** Parameters under our names, in `parameterShapes` order. */
  params: Map<string, Float32Array>;
  hfConfig: HfConfig;
}

export type LoadHfCheckpointOptions = SafetensorsReadOptions & HfConfigOptions;

const exists = async (path: string): Promise<boolean> => stat(path).then(() => true, () => false);

/** Reads all tensors of a sharded checkpoint, checking each shard against the index. */
async function readSharded(dir: string, options: SafetensorsReadOptions): Promise<Map<string, SafetensorsTensor>> {
  const indexPath = join(dir, HF_INDEX_FILE);
  const index = await readJsonFile(indexPath, indexSchema);
  const byShard = new Map<string, Set<string>>();
  for (const [name, shard] of Object.entries(index.weight_map)) {
    // Shard names come from a downloaded file: they must stay inside the folder.
    if (!/^[^/\\]+\.safetensors$/.test(shard) || shard.startsWith('..')) {
      throw new Error(`${indexPath}: tensor '${name}' points to shard '${shard}', which is not a file name in this folder`);
    }
    let set = byShard.get(shard);
    if (!set) byShard.set(shard, (set = new Set()));
    set.add(name);
  }
  const all = new Map<string, SafetensorsTensor>();
  for (const shard of [...byShard.keys()].sort()) {
    const listed = byShard.get(shard)!;
    const path = join(dir, shard);
    const { tensors } = await readSafetensorsFile(path, options);
    for (const [name, t] of tensors) {
      if (!listed.has(name)) {
        const elsewhere = index.weight_map[name];
        throw new Error(elsewhere === undefined
          ? `${path}: tensor '${name}' is not listed in ${HF_INDEX_FILE}`
          : `${path}: tensor '${name}' is listed in ${HF_INDEX_FILE} under shard '${elsewhere}'`);
      }
      all.set(name, t);
    }
    for (const name of listed) {
      if (!tensors.has(name)) throw new Error(`${indexPath}: tensor '${name}' should be in shard '${shard}' but ${path} does not contain it`);
    }
  }
  return all;
}

/**
 * Loads a Hugging Face Qwen2/Llama checkpoint folder into our parameter map, validated like our
 * own checkpoints (missing, mis-shaped and unexpected tensors are named by their HF names).
 * With tied embeddings a stored `lm_head.weight` is accepted only if it equals the embedding.
 */
export async function loadHfCheckpoint(dir: string, options: LoadHfCheckpointOptions = {}): Promise<HfCheckpoint> {
  const configPath = join(dir, HF_CONFIG_FILE);
  const raw = await readJsonFile(configPath, z.unknown());
  const config = hfConfigToModelConfig(raw, configPath, options);
  const hfConfig = hfConfigSchema.parse(raw);
  const readOptions: SafetensorsReadOptions = options.alloc ? { alloc: options.alloc } : {};

  const single = join(dir, HF_WEIGHTS_FILE);
  let source: string;
  let tensors: Map<string, SafetensorsTensor>;
  if (await exists(single)) {
    source = single;
    tensors = (await readSafetensorsFile(single, readOptions)).tensors;
  } else if (await exists(join(dir, HF_INDEX_FILE))) {
    source = join(dir, HF_INDEX_FILE);
    tensors = await readSharded(dir, readOptions);
  } else {
    throw new Error(`${dir}: no ${HF_WEIGHTS_FILE} or ${HF_INDEX_FILE} (PyTorch .bin checkpoints are not supported; convert them to safetensors)`);
  }

  const mapped = new Map<string, SafetensorsTensor>();
  const unknown: string[] = [];
  let tiedHead: SafetensorsTensor | undefined;
  for (const [hfName, t] of tensors) {
    if (derivedBuffer.test(hfName)) continue;
    if (config.tieEmbeddings && hfName === 'lm_head.weight') {
      tiedHead = t;
      continue;
    }
    const ours = fromHfName(hfName);
    if (ours === undefined) unknown.push(`unexpected tensor '${hfName}' (shape [${t.shape.join(', ')}]): not part of a ${hfConfig.model_type} model`);
    else mapped.set(ours, t);
  }
  if (unknown.length > 0) {
    const more = unknown.length > 20 ? [`… and ${unknown.length - 20} more`] : [];
    throw new Error(`${source}: tensors do not match the model config:\n${[...unknown.slice(0, 20), ...more].map((u) => `  ${u}`).join('\n')}`);
  }
  const params = matchTensors(parameterShapes(config), mapped, source, (n) => `'${toHfName(n)}' (ours: '${n}')`);
  const embed = params.get('embed.weight');
  if (tiedHead && embed && !(tiedHead.data.length === embed.length && tiedHead.data.every((v, i) => Object.is(v, embed[i])))) {
    throw new Error(`${source}: tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' although tie_word_embeddings is true`);
  }
  return { config, params, hfConfig };
}
