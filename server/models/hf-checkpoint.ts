/**
 * Loading a Hugging Face model folder (Qwen2, Qwen3, Llama/SmolLM2, GPT-2/DialoGPT) into our parameter map:
 *
 *   config.json                       model_type and shapes (→ ModelConfig, `hf-names.ts`)
 *   model.safetensors                 the weights, or, when sharded:
 *   model.safetensors.index.json      { weight_map: { tensor name: shard file } } and the shards
 *
 * Tensors may be stored as BF16, F16, F32 or F64; they are converted to float32 on load (the
 * engine computes in float32), reading one tensor at a time so a bf16 file never exists twice
 * in memory. Every mismatch is an error naming the file, the tensor (by its HF name and ours) and
 * what was expected: unknown architectures, missing, mis-shaped and unexpected tensors,
 * unsupported dtypes (quantised checkpoints), truncated files, shards that disagree with the index.
 * `saveHfCheckpoint` writes such a folder back (F32), e.g. a warm-started base for export.
 */
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { isGpt2, parameterShapes, ropeInverseFrequencies } from './model-config.ts';
import { gpt2SourceName, gpt2TensorsToOurs, isGpt2Buffer, oursToGpt2Tensors } from './hf-gpt2.ts';
import type { ModelConfig } from './model-config.ts';
import { fromHfName, hfConfigSchema, hfConfigToModelConfig, modelConfigToHf, toHfName } from './hf-names.ts';
import type { HfConfig, HfConfigOptions, HfModelType } from './hf-names.ts';
import { readJsonFile, writeJsonFile } from './json-file.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsDtype, SafetensorsReadOptions, SafetensorsTensor } from './safetensors.ts';
import { matchTensors, shapeParameters } from './tensor-match.ts';

export const HF_CONFIG_FILE = 'config.json';
export const HF_WEIGHTS_FILE = 'model.safetensors';
export const HF_INDEX_FILE = 'model.safetensors.index.json';

/** Buffers some checkpoints carry that are derived from the config, not learned: skipped on load. */
const derivedBuffer = /\.rotary_emb\.inv_freq$/;

const indexSchema = z.looseObject({
  metadata: z.looseObject({}).nullish(),
  weight_map: z.record(z.string(), z.string()),
});

export interface HfCheckpoint {
  config: ModelConfig;
  /** Parameters under our names, in `parameterShapes` order, float32. */
  params: Map<string, Float32Array>;
  hfConfig: HfConfig;
  /** Parameter counts by the dtype they were stored in (a tied lm_head copy is not counted). */
  storedDtypes: Partial<Record<SafetensorsDtype, number>>;
  /** The weight files read: `model.safetensors` or the shards, in read order. */
  files: string[];
}

export type LoadHfCheckpointOptions = SafetensorsReadOptions & HfConfigOptions;

const exists = async (path: string): Promise<boolean> => stat(path).then(() => true, () => false);

/** Whether `config` (a parsed config.json) is a Hugging Face one rather than ours: HF configs carry `model_type`. */
export const isHfConfig = (config: unknown): boolean => typeof config === 'object' && config !== null && 'model_type' in config;

/** Reads and converts a folder's `config.json` without touching the weights. */
export async function readHfConfig(dir: string, options: HfConfigOptions = {}): Promise<{ config: ModelConfig; hfConfig: HfConfig }> {
  const configPath = join(dir, HF_CONFIG_FILE);
  const raw = await readJsonFile(configPath, z.unknown());
  const config = hfConfigToModelConfig(raw, configPath, options);
  return { config, hfConfig: hfConfigSchema.parse(raw) };
}

/** Reads all tensors of a sharded checkpoint, checking each shard against the index. */
async function readSharded(dir: string, options: SafetensorsReadOptions): Promise<{ tensors: Map<string, SafetensorsTensor>; files: string[] }> {
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
  const files: string[] = [];
  for (const shard of [...byShard.keys()].sort()) {
    const listed = byShard.get(shard)!;
    const path = join(dir, shard);
    if (!(await exists(path))) throw new Error(`${indexPath}: shard '${shard}' (${listed.size} tensors, e.g. '${[...listed][0]}') is missing from ${dir}`);
    const { tensors } = await readSafetensorsFile(path, options);
    files.push(path);
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
  return { tensors: all, files };
}

/**
 * Loads a Hugging Face Qwen2/Qwen3/Llama checkpoint folder into our parameter map, validated like
 * our own checkpoints (missing, mis-shaped and unexpected tensors are named by their HF names).
 * With tied embeddings a stored `lm_head.weight` is accepted only if it equals the embedding.
 */
export async function loadHfCheckpoint(dir: string, options: LoadHfCheckpointOptions = {}): Promise<HfCheckpoint> {
  const { config, hfConfig } = await readHfConfig(dir, options);
  const gpt2 = isGpt2(config);
  const readOptions: SafetensorsReadOptions = options.alloc ? { alloc: options.alloc } : {};

  const single = join(dir, HF_WEIGHTS_FILE);
  let source: string;
  let tensors: Map<string, SafetensorsTensor>;
  let files: string[];
  if (await exists(single)) {
    source = single;
    tensors = (await readSafetensorsFile(single, readOptions)).tensors;
    files = [single];
  } else if (await exists(join(dir, HF_INDEX_FILE))) {
    source = join(dir, HF_INDEX_FILE);
    ({ tensors, files } = await readSharded(dir, readOptions));
  } else {
    throw new Error(`${dir}: no ${HF_WEIGHTS_FILE} or ${HF_INDEX_FILE} (PyTorch .bin checkpoints are not supported; convert them to safetensors)`);
  }

  let mapped = new Map<string, SafetensorsTensor>();
  let unknown: string[] = [];
  let tiedHead: SafetensorsTensor | undefined;
  const kept = new Map<string, SafetensorsTensor>();
  for (const [hfName, t] of tensors) {
    if (derivedBuffer.test(hfName) || (gpt2 && isGpt2Buffer(hfName))) continue;
    if (config.tieEmbeddings && hfName === 'lm_head.weight') {
      tiedHead = t;
      continue;
    }
    kept.set(hfName, t);
  }
  if (gpt2) ({ mapped, problems: unknown } = gpt2TensorsToOurs(config, kept));
  else {
    for (const [hfName, t] of kept) {
      const ours = fromHfName(hfName);
      if (ours === undefined) unknown.push(`unexpected tensor '${hfName}' (shape [${t.shape.join(', ')}]): not part of a ${hfConfig.model_type} model`);
      else mapped.set(ours, t);
    }
  }
  if (unknown.length > 0) {
    const more = unknown.length > 20 ? [`… and ${unknown.length - 20} more`] : [];
    throw new Error(`${source}: tensors do not match the model config:\n${[...unknown.slice(0, 20), ...more].map((u) => `  ${u}`).join('\n')}`);
  }
  const params = matchTensors(parameterShapes(config), mapped, source, gpt2 ? (n) => `'${gpt2SourceName(n)})` : (n) => `'${toHfName(n)}' (ours: '${n}')`);
  const embed = params.get('embed.weight');
  if (tiedHead && embed && !(tiedHead.data.length === embed.length && tiedHead.data.every((v, i) => Object.is(v, embed[i])))) {
    throw new Error(`${source}: tensor 'lm_head.weight' differs from '${gpt2 ? 'transformer.wte.weight' : 'model.embed_tokens.weight'}' although tie_word_embeddings is true`);
  }
  const storedDtypes: Partial<Record<SafetensorsDtype, number>> = {};
  for (const [name, t] of mapped) if (params.has(name)) storedDtypes[t.dtype] = (storedDtypes[t.dtype] ?? 0) + t.data.length;
  return { config, params, hfConfig, storedDtypes, files };
}

export interface SaveHfCheckpointOptions {
  readonly modelType: HfModelType;
  /**
   * The config.json the weights came from: its fields (token ids, max_position_embeddings,
   * rope_scaling, _name_or_path, …) are kept, so the folder loads in transformers as the original
   * did. Its shapes must be those of `config`.
   */
  readonly sourceConfig?: Readonly<Record<string, unknown>>;
  /** safetensors `__metadata__` besides `format: pt`. */
  readonly metadata?: Readonly<Record<string, string>>;
}

/**
 * Writes `config.json` and `model.safetensors` (F32, Hugging Face tensor names) into `dir`, a
 * folder transformers, PEFT and vLLM load as the base model. The weights are written before the
 * config, each atomically, as `saveCheckpoint` does.
 */
export async function saveHfCheckpoint(dir: string, config: ModelConfig, params: ReadonlyMap<string, Float32Array>, options: SaveHfCheckpointOptions): Promise<void> {
  const hfConfig = { ...modelConfigToHf(config, options.modelType), ...options.sourceConfig, torch_dtype: 'float32' };
  const back = hfConfigToModelConfig(hfConfig, `config.json for ${dir}`);
  const sameShapes = JSON.stringify(parameterShapes(back)) === JSON.stringify(parameterShapes(config)) && JSON.stringify(ropeInverseFrequencies(back)) === JSON.stringify(ropeInverseFrequencies(config));
  if (!sameShapes) throw new Error(`${dir}: the source config.json describes a different model than the weights to save`);
  const ours = shapeParameters(parameterShapes(config), params, `Hugging Face checkpoint ${dir}`);
  const tensors = isGpt2(config) ? oursToGpt2Tensors(config, ours) : new Map([...ours].map(([name, t]) => [toHfName(name), t]));
  await mkdir(dir, { recursive: true });
  await writeSafetensorsFile(join(dir, HF_WEIGHTS_FILE), tensors, { ...options.metadata, format: 'pt' });
  await writeJsonFile(join(dir, HF_CONFIG_FILE), hfConfig);
}
