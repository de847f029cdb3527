/**
 * What a model folder holds, read from its small files and safetensors headers only (no weights
 * loaded): a Troupe checkpoint (`checkpoint.ts`) or a Hugging Face folder (`hf-checkpoint.ts`),
 * its architecture, parameter count, stored dtypes, and which tokenizer and chat-template files
 * sit beside the weights. `troupe models inspect` prints it.
 */
import { copyFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { CHECKPOINT_CONFIG_FILE, CHECKPOINT_WEIGHTS_FILE } from './checkpoint.ts';
import { HF_INDEX_FILE, HF_WEIGHTS_FILE, isHfConfig } from './hf-checkpoint.ts';
import { readGenerationConfig } from './hf-tokenizer.ts';
import { fromHfName, hfConfigSchema, hfConfigToModelConfig, supportedHfModelTypes, toHfName, type HfModelType } from './hf-names.ts';
import { parseWithSchema, readJsonFile } from './json-file.ts';
import { isGpt2, modelConfigSchema, parameterCount, parameterShapes, type ModelConfig } from './model-config.ts';
import { isGpt2Buffer } from './hf-gpt2.ts';
import { readSafetensorsHeaderFile, type SafetensorsDtype } from './safetensors.ts';
import { TOKENIZER_FILE } from './tokenizer.ts';

/** Files a Hugging Face tokenizer may come with (transformers' names). */
export const HF_TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'generation_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt', 'tokenizer.model', 'chat_template.jinja', 'chat_template.json'] as const;

const tokenizerConfigSchema = z.looseObject({
  chat_template: z.union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))]).nullish(),
  eos_token: z.unknown().optional(),
});
const generationConfigSchema = z.looseObject({
  eos_token_id: z.union([z.int(), z.array(z.int())]).nullish(),
  bos_token_id: z.int().nullish(),
});

export interface ModelFolderInfo {
  readonly dir: string;
  readonly format: 'troupe' | 'hugging-face';
  /** HF `model_type` and `architectures[0]`; null for Troupe checkpoints. */
  readonly modelType: string | null;
  readonly architecture: string | null;
  /** HF `_name_or_path` when the folder was saved by transformers (often the hub id); null otherwise. */
  readonly nameOrPath: string | null;
  readonly config: ModelConfig;
  readonly parameters: number;
  /** Parameter counts by stored dtype (a tied head stored twice is counted once). */
  readonly storedDtypes: Partial<Record<SafetensorsDtype, number>>;
  /** Weight files with their sizes in bytes. */
  readonly weightFiles: ReadonlyArray<{ readonly file: string; readonly bytes: number }>;
  /** Tokenizer-related files present (HF names, and a Troupe checkpoint's troupe-tokenizer.json). */
  readonly tokenizerFiles: readonly string[];
  /** Whether a chat template ships (tokenizer_config.json's chat_template or chat_template.jinja). */
  readonly chatTemplate: boolean;
  /** End-of-sequence ids from generation_config.json, else config.json (empty when neither names any). */
  readonly eosTokenIds: readonly number[];
  readonly bosTokenId: number | null;
}

const fileExists = async (path: string): Promise<boolean> => stat(path).then((s) => s.isFile(), () => false);

/**
 * Context length used for a Hugging Face model when the experiment does not say: released configs
 * give 32k–128k max_position_embeddings, which would size RoPE tables and caches for contexts
 * multi-agent episodes never reach.
 */
export const DEFAULT_HF_CONTEXT = 4096;

export interface ModelFolderConfig {
  readonly format: 'troupe' | 'hugging-face';
  readonly config: ModelConfig;
  /** HF `model_type`; null for Troupe checkpoints. */
  readonly modelType: string | null;
}

/**
 * The model config of a checkpoint folder, for an experiment that trains from it. A Hugging Face
 * config's context is capped at `maxSequenceLength` (default: the smaller of its
 * max_position_embeddings and DEFAULT_HF_CONTEXT); a Troupe config is taken as written. Errors
 * say what is missing: the folder, its config.json, or which field is wrong.
 */
export async function readModelFolderConfig(dir: string, options: { maxSequenceLength?: number } = {}): Promise<ModelFolderConfig> {
  const s = await stat(dir).catch(() => null);
  if (!s) throw new Error(`model folder ${dir} does not exist (download the model there, or point the config at the folder that holds its config.json and model.safetensors)`);
  if (!s.isDirectory()) throw new Error(`${dir} is a file, not a model folder`);
  const configPath = join(dir, CHECKPOINT_CONFIG_FILE);
  if (!(await fileExists(configPath))) throw new Error(`no checkpoint at ${dir} (${CHECKPOINT_CONFIG_FILE} missing)`);
  const raw = await readJsonFile(configPath, z.unknown());
  if (!isHfConfig(raw)) {
    const config = parseWithSchema(modelConfigSchema, raw, configPath);
    return { format: 'troupe', config: options.maxSequenceLength ? { ...config, maxSequenceLength: options.maxSequenceLength } : config, modelType: null };
  }
  const declared = hfConfigToModelConfig(raw, configPath).maxSequenceLength;
  const maxSequenceLength = options.maxSequenceLength ?? Math.min(declared, DEFAULT_HF_CONTEXT);
  const config = hfConfigToModelConfig(raw, configPath, { maxSequenceLength });
  return { format: 'hugging-face', config, modelType: hfConfigSchema.parse(raw).model_type };
}

/** Describes the model folder `dir`; errors name the file that is missing or wrong. */
export async function describeModelFolder(dir: string): Promise<ModelFolderInfo> {
  const s = await stat(dir).catch(() => null);
  if (!s?.isDirectory()) throw new Error(`${dir}: no such model folder`);
  const configPath = join(dir, CHECKPOINT_CONFIG_FILE);
  if (!(await fileExists(configPath))) throw new Error(`${dir}: not a model folder (no ${CHECKPOINT_CONFIG_FILE})`);
  const raw = await readJsonFile(configPath, z.unknown());
  const hf = isHfConfig(raw);
  const config = hf ? hfConfigToModelConfig(raw, configPath) : parseWithSchema(modelConfigSchema, raw, configPath);
  const hfConfig = hf ? hfConfigSchema.parse(raw) : null;

  // Weight files: ours is one model.safetensors; HF may shard.
  let files: string[];
  if (await fileExists(join(dir, hf ? HF_WEIGHTS_FILE : CHECKPOINT_WEIGHTS_FILE))) files = [HF_WEIGHTS_FILE];
  else if (hf && (await fileExists(join(dir, HF_INDEX_FILE)))) {
    const index = await readJsonFile(join(dir, HF_INDEX_FILE), z.looseObject({ weight_map: z.record(z.string(), z.string()) }));
    files = [...new Set(Object.values(index.weight_map))].sort();
  } else throw new Error(`${dir}: no ${HF_WEIGHTS_FILE}${hf ? ` or ${HF_INDEX_FILE}` : ''}`);

  // GPT-2's tensors are fused and transposed, not renamed (hf-gpt2.ts): every weight but the
  // mask buffers and a tied head copy counts.
  const gpt2 = isGpt2(config);
  const wanted = new Set(gpt2 ? [] : parameterShapes(config).map(([n]) => (hf ? toHfName(n) : n)));
  const counts = (name: string) => (gpt2 ? !isGpt2Buffer(name) && !(config.tieEmbeddings && name === 'lm_head.weight') : wanted.has(name) && (!hf || fromHfName(name) !== undefined));
  const storedDtypes: Partial<Record<SafetensorsDtype, number>> = {};
  const weightFiles: Array<{ file: string; bytes: number }> = [];
  for (const file of files) {
    const header = await readSafetensorsHeaderFile(join(dir, file));
    weightFiles.push({ file, bytes: header.bytes });
    for (const [name, t] of header.tensors) {
      if (!counts(name)) continue;
      storedDtypes[t.dtype] = (storedDtypes[t.dtype] ?? 0) + t.shape.reduce((a, b) => a * b, 1);
    }
  }

  const present = new Set(await readdir(dir));
  const tokenizerFiles = [TOKENIZER_FILE, ...HF_TOKENIZER_FILES].filter((f) => present.has(f));
  let chatTemplate = present.has('chat_template.jinja');
  if (present.has('tokenizer_config.json')) {
    const tc = await readJsonFile(join(dir, 'tokenizer_config.json'), tokenizerConfigSchema);
    chatTemplate ||= tc.chat_template != null && tc.chat_template.length > 0;
  }
  let eosTokenIds: number[] = [];
  let bosTokenId: number | null = null;
  // generation_config.json, else config.json's ids (as transformers reads them).
  const generation = await readGenerationConfig(dir);
  if (generation !== undefined) {
    const gc = parseWithSchema(generationConfigSchema, generation.value, join(dir, generation.file));
    eosTokenIds = gc.eos_token_id == null ? [] : Array.isArray(gc.eos_token_id) ? gc.eos_token_id : [gc.eos_token_id];
    bosTokenId = gc.bos_token_id ?? null;
  }
  return {
    dir,
    format: hf ? 'hugging-face' : 'troupe',
    modelType: hfConfig?.model_type ?? null,
    architecture: hfConfig?.architectures?.[0] ?? null,
    nameOrPath: hfConfig?._name_or_path ?? null,
    config,
    parameters: parameterCount(config),
    storedDtypes,
    weightFiles,
    tokenizerFiles,
    chatTemplate,
    eosTokenIds,
    bosTokenId,
  };
}

/** A Hugging Face model folder an experiment trains from, as export needs it. */
export interface HfSource {
  readonly dir: string;
  readonly modelType: HfModelType;
  /** config.json as written (every field, for writing the trained base back). */
  readonly config: Record<string, unknown>;
  /** `_name_or_path` when present and non-empty (usually the hub id), else null. */
  readonly nameOrPath: string | null;
}

/** The folder's Hugging Face identity, or null when it holds a Troupe checkpoint. */
export async function readHfSource(dir: string): Promise<HfSource | null> {
  const configPath = join(dir, CHECKPOINT_CONFIG_FILE);
  const raw = await readJsonFile(configPath, z.record(z.string(), z.unknown()));
  if (!isHfConfig(raw)) return null;
  const parsed = hfConfigSchema.parse(raw);
  const modelType = supportedHfModelTypes.find((t) => t === parsed.model_type);
  if (!modelType) throw new Error(`${configPath}: model_type '${parsed.model_type}' is not supported (supported: ${supportedHfModelTypes.join(', ')})`);
  return { dir, modelType, config: raw, nameOrPath: parsed._name_or_path ? parsed._name_or_path : null };
}

/** Copies the tokenizer files of a Hugging Face folder (those present of HF_TOKENIZER_FILES); returns their names. */
export async function copyHfTokenizerFiles(from: string, to: string): Promise<string[]> {
  const present = new Set(await readdir(from));
  const files = HF_TOKENIZER_FILES.filter((f) => present.has(f));
  for (const f of files) await copyFile(join(from, f), join(to, f));
  return files;
}
