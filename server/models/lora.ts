/**
 * LoRA adapters (Hu et al. 2021, arXiv 2106.09685): a frozen projection W [out, in] becomes
 *   y = W·x + (alpha / r)·B·(A·x),   A [r, in], B [out, r]
 * for each targeted projection of every layer. Parameter names extend the projection's name:
 *   layers.{i}.attn.q.lora_A   [r, in]
 *   layers.{i}.attn.q.lora_B   [out, r]
 * in layer order, then `loraTargets` order, A before B.
 *
 * Initialisation follows PEFT: A ~ kaiming_uniform(a=√5) = U(−1/√in, 1/√in), B = 0, so a fresh
 * adapter leaves the model unchanged.
 *
 * Two on-disk layouts:
 *  - ours: `lora-config.json` (this file's schema, alpha written out) + `lora.safetensors` (our names);
 *  - PEFT: `adapter_config.json` + `adapter_model.safetensors` with keys like
 *    `base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`, loadable by PEFT and vLLM;
 *    for GPT-2, PEFT's Conv1D modules with q, k and v in the fused c_attn (hf-gpt2.ts).
 * The file names differ, so one folder may hold both.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { adaptedTargets, isGpt2, loraTargets, modelDims, projectionName, projectionSize } from './model-config.ts';
import { gpt2PeftExport, gpt2PeftImport } from './hf-gpt2.ts';
import type { LoraTarget, ModelConfig } from './model-config.ts';
import { matchTensors, shapeParameters } from './checkpoint.ts';
import type { ExpectedShapes } from './checkpoint.ts';
import { loraConfigSchema, type LoraConfig, type LoraConfigInput } from '../protocol/model-schemas.ts';
import { hfProjectionModule, hfProjectionNames } from './hf-names.ts';
import { parseWithSchema, readJsonFile, writeJsonFile } from './json-file.ts';
import { createPrng, deriveSeed, fillUniform } from './prng.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsReadOptions, SafetensorsTensor } from './safetensors.ts';

// The schema lives in protocol (the experiment config embeds it, and protocol may import only
// zod); models uses the same object so the two cannot drift.
export { loraConfigSchema };
export type { LoraConfig, LoraConfigInput };

/** Parses a LoRA config, throwing an error that names `source` and every bad field. */
export function parseLoraConfig(input: unknown, source = 'LoRA config'): LoraConfig {
  return parseWithSchema(loraConfigSchema, input, source);
}

/** alpha, with its default (rank) applied. */
export const loraAlpha = (c: LoraConfig): number => c.alpha ?? c.rank;

/** The factor alpha / rank applied to B·A. */
export const loraScale = (c: LoraConfig): number => loraAlpha(c) / c.rank;

/** The targets in canonical (`loraTargets`) order, whatever order the config lists them in. */
export const orderedTargets = (c: LoraConfig): LoraTarget[] => loraTargets.filter((t) => c.targets.includes(t));

/** A LoRA config with alpha made explicit and targets in canonical order (what is written to disk). */
export type ResolvedLoraConfig = LoraConfig & { alpha: number };

export const resolveLoraConfig = (c: LoraConfig): ResolvedLoraConfig => ({ ...c, alpha: loraAlpha(c), targets: orderedTargets(c) });

/** Every adapter parameter with its shape, in canonical order. */
export function loraParameterShapes(model: ModelConfig, lora: LoraConfig): Array<[name: string, shape: number[]]> {
  const out: Array<[string, number[]]> = [];
  const targets = adaptedTargets(model, lora.targets);
  for (let i = 0; i < modelDims(model).L; i++) {
    for (const t of targets) {
      const { in: fanIn, out: fanOut } = projectionSize(model, t);
      out.push([`${projectionName(i, t)}.lora_A`, [lora.rank, fanIn]]);
      out.push([`${projectionName(i, t)}.lora_B`, [fanOut, lora.rank]]);
    }
  }
  return out;
}

/**
 * A fresh adapter, PEFT-style (see file comment). Each tensor has its own stream seeded by
 * (seed, name), so adding a target does not change the others.
 */
export function initLoraParameters(
  model: ModelConfig,
  lora: LoraConfig,
  seed: number,
  options: SafetensorsReadOptions = {},
): Map<string, Float32Array> {
  const params = new Map<string, Float32Array>();
  for (const [name, shape] of loraParameterShapes(model, lora)) {
    const n = shape[0]! * shape[1]!;
    const data = options.alloc ? options.alloc(n) : new Float32Array(n);
    if (data.length !== n) throw new Error(`LoRA init: allocator returned ${data.length} elements for '${name}', expected ${n}`);
    if (name.endsWith('.lora_A')) {
      // kaiming_uniform_(a=√5): gain √(2/(1+a²)) = √(1/3); bound = gain·√3/√fan_in = 1/√fan_in.
      const bound = 1 / Math.sqrt(shape[1]!);
      fillUniform(data, createPrng(deriveSeed(seed, name)), -bound, bound);
    } else {
      data.fill(0);
    }
    params.set(name, data);
  }
  return params;
}

export const LORA_CONFIG_FILE = 'lora-config.json';
export const LORA_WEIGHTS_FILE = 'lora.safetensors';
export const PEFT_CONFIG_FILE = 'adapter_config.json';
export const PEFT_WEIGHTS_FILE = 'adapter_model.safetensors';

export interface LoraAdapter {
  lora: ResolvedLoraConfig;
  /** Adapter parameters in `loraParameterShapes` order. */
  params: Map<string, Float32Array>;
}

/** Writes the adapter in our layout (`lora-config.json` + `lora.safetensors`), each file atomically. */
export async function saveLoraAdapter(
  dir: string,
  model: ModelConfig,
  lora: LoraConfigInput,
  params: ReadonlyMap<string, Float32Array>,
  options: { metadata?: Readonly<Record<string, string>> } = {},
): Promise<void> {
  const resolved = resolveLoraConfig(parseLoraConfig(lora, 'LoRA config to save'));
  const tensors = shapeParameters(loraParameterShapes(model, resolved), params, `LoRA adapter ${dir}`);
  await mkdir(dir, { recursive: true });
  await writeSafetensorsFile(join(dir, LORA_WEIGHTS_FILE), tensors, options.metadata);
  await writeJsonFile(join(dir, LORA_CONFIG_FILE), resolved);
}

/** Reads an adapter in our layout, validating every tensor against the model's projection sizes. */
export async function loadLoraAdapter(dir: string, model: ModelConfig, options?: SafetensorsReadOptions): Promise<LoraAdapter> {
  const lora = resolveLoraConfig(await readJsonFile(join(dir, LORA_CONFIG_FILE), loraConfigSchema));
  const path = join(dir, LORA_WEIGHTS_FILE);
  const { tensors } = await readSafetensorsFile(path, options);
  return { lora, params: matchTensors(loraParameterShapes(model, lora), tensors, path) };
}

/** The PEFT state-dict key of an adapter matrix (PEFT drops the adapter name when saving). */
export const peftKey = (layer: number, target: LoraTarget, which: 'A' | 'B'): string =>
  `base_model.model.${hfProjectionModule(layer, target)}.lora_${which}.weight`;

const peftKeyPattern = /^base_model\.model\.model\.layers\.(0|[1-9][0-9]*)\.(?:self_attn|mlp)\.([a-z]+)_proj\.lora_(A|B)\.weight$/;

/** PEFT's LoraConfig fields that we read; others (PEFT version-specific) are allowed and ignored. */
const peftConfigSchema = z.looseObject({
  peft_type: z.literal('LORA'),
  r: z.int().positive(),
  lora_alpha: z.number().positive(),
  lora_dropout: z.number().min(0).max(1).nullish(),
  target_modules: z.union([z.array(z.string()), z.string()]).nullish(),
  bias: z.string().nullish(),
  fan_in_fan_out: z.boolean().nullish(),
  use_rslora: z.boolean().nullish(),
  use_dora: z.boolean().nullish(),
  rank_pattern: z.record(z.string(), z.unknown()).nullish(),
  alpha_pattern: z.record(z.string(), z.unknown()).nullish(),
  layers_to_transform: z.unknown().nullish(),
  modules_to_save: z.array(z.string()).nullish(),
  base_model_name_or_path: z.string().nullish(),
});

/**
 * Every field of PEFT's `LoraConfig.to_dict()` (peft `PeftConfig` + `tuners/lora/config.py`) that
 * PEFT versions since 0.10 accept, so `PeftModel.from_pretrained` loads it without "unexpected
 * keyword" warnings, and vLLM reads r, lora_alpha, target_modules, bias, use_rslora, use_dora and
 * modules_to_save from it. Newer-only fields (exclude_modules, …) are left out: older PEFT warns on
 * them, and their defaults are what we mean. Values state our math exactly: no dropout, no bias,
 * plain alpha/r scaling, Linear [out, in] weights (fan_in_fan_out false), every layer.
 */
export function peftAdapterConfig(lora: ResolvedLoraConfig, baseModelNameOrPath: string | null): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    auto_mapping: null,
    base_model_name_or_path: baseModelNameOrPath,
    revision: null,
    inference_mode: true,
    r: lora.rank,
    lora_alpha: loraAlpha(lora),
    lora_dropout: lora.dropout,
    target_modules: lora.targets.map((t) => hfProjectionNames[t]),
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: false,
    use_dora: false,
    modules_to_save: null,
    init_lora_weights: true,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    megatron_config: null,
    megatron_core: 'megatron.core',
    loftq_config: {},
    layer_replication: null,
  };
}

export interface PeftExportOptions {
  /**
   * `base_model_name_or_path` in adapter_config.json: the hub id (`Qwen/Qwen2.5-0.5B-Instruct`) or
   * folder of the base model; null when absent (PEFT then needs the base model passed in).
   */
  baseModelNameOrPath?: string;
}

/** Writes the adapter in the PEFT layout (see file comment), loadable by PEFT and vLLM. */
export async function exportPeftAdapter(
  dir: string,
  model: ModelConfig,
  lora: LoraConfigInput,
  params: ReadonlyMap<string, Float32Array>,
  options: PeftExportOptions = {},
): Promise<void> {
  const resolved = resolveLoraConfig(parseLoraConfig(lora, 'LoRA config to export'));
  const ours = shapeParameters(loraParameterShapes(model, resolved), params, `LoRA adapter for ${dir}`);
  if (isGpt2(model)) {
    // Conv1D modules and the fused c_attn (hf-gpt2.ts `gpt2PeftExport`).
    const g = gpt2PeftExport(model, { rank: resolved.rank, alpha: resolved.alpha, targets: adaptedTargets(model, resolved.targets) }, ours);
    await mkdir(dir, { recursive: true });
    await writeSafetensorsFile(join(dir, PEFT_WEIGHTS_FILE), g.tensors, { format: 'pt', ...g.metadata });
    await writeJsonFile(join(dir, PEFT_CONFIG_FILE), { ...peftAdapterConfig(resolved, options.baseModelNameOrPath ?? null), ...g.config });
    return;
  }
  const tensors = new Map<string, { shape: readonly number[]; data: Float32Array }>();
  for (let i = 0; i < modelDims(model).L; i++) {
    for (const t of resolved.targets) {
      for (const w of ['A', 'B'] as const) tensors.set(peftKey(i, t, w), ours.get(`${projectionName(i, t)}.lora_${w}`)!);
    }
  }
  const config = peftAdapterConfig(resolved, options.baseModelNameOrPath ?? null);
  await mkdir(dir, { recursive: true });
  // "format: pt" is what torch-saved safetensors carry; some loaders check it.
  await writeSafetensorsFile(join(dir, PEFT_WEIGHTS_FILE), tensors, { format: 'pt' });
  await writeJsonFile(join(dir, PEFT_CONFIG_FILE), config);
}

export interface PeftAdapter extends LoraAdapter {
  baseModelNameOrPath: string | null;
}

/**
 * Reads a PEFT LoRA adapter for `model`. Targets are taken from the tensor keys (target_modules
 * may be a regex or "all-linear"). Variants that change the math (biases, DoRA, rsLoRA, per-module
 * ranks, extra trained modules, transposed weights) are refused, naming the field. A non-zero
 * lora_dropout is accepted: dropout only acts during training and does not change the weights.
 */
export async function importPeftAdapter(dir: string, model: ModelConfig, options?: SafetensorsReadOptions): Promise<PeftAdapter> {
  const configPath = join(dir, PEFT_CONFIG_FILE);
  const c = await readJsonFile(configPath, peftConfigSchema);
  const gpt2 = isGpt2(model);
  const problems: string[] = [];
  if (c.bias != null && c.bias !== 'none') problems.push(`bias: '${c.bias}' is not supported (only 'none')`);
  // GPT-2's Conv1D modules: PEFT sets fan_in_fan_out itself, and A/B are stored as for Linear either way.
  if (c.fan_in_fan_out && !gpt2) problems.push('fan_in_fan_out: transposed (Conv1D) weights are not supported');
  if (c.use_rslora) problems.push('use_rslora: rank-stabilised scaling is not supported');
  if (c.use_dora) problems.push('use_dora: DoRA adapters are not supported');
  // On GPT-2 per-module ranks and alphas are resolved per module (gpt2PeftImport).
  if (c.rank_pattern && Object.keys(c.rank_pattern).length > 0 && !gpt2) problems.push('rank_pattern: per-module ranks are not supported');
  if (c.alpha_pattern && Object.keys(c.alpha_pattern).length > 0 && !gpt2) problems.push('alpha_pattern: per-module alphas are not supported');
  if (c.layers_to_transform != null) problems.push('layers_to_transform: adapters must cover every layer');
  if (c.modules_to_save && c.modules_to_save.length > 0) problems.push(`modules_to_save: fully trained modules are not supported (${c.modules_to_save.join(', ')})`);
  if (problems.length > 0) throw new Error(`${configPath}: unsupported LoRA adapter:\n${problems.map((p) => `  ${p}`).join('\n')}`);

  const path = join(dir, PEFT_WEIGHTS_FILE);
  const { tensors, metadata } = await readSafetensorsFile(path, options);
  if (gpt2) {
    const g = gpt2PeftImport(model, c, tensors, metadata);
    if (g.problems.length > 0) {
      const more = g.problems.length > 20 ? [`… and ${g.problems.length - 20} more`] : [];
      throw new Error(`${path}: not a LoRA adapter of this GPT-2 model:\n${[...g.problems.slice(0, 20), ...more].map((u) => `  ${u}`).join('\n')}`);
    }
    if (g.params.size === 0) throw new Error(`${path}: no LoRA tensors found`);
    const lora = resolveLoraConfig(parseLoraConfig({ rank: g.rank, alpha: g.alpha, targets: g.targets }, configPath));
    return { lora, params: matchTensors(loraParameterShapes(model, lora), g.params, path), baseModelNameOrPath: c.base_model_name_or_path ?? null };
  }
  const byHfName = new Map<string, LoraTarget>(loraTargets.map((t) => [hfProjectionNames[t], t]));
  const found = new Set<LoraTarget>();
  const mapped = new Map<string, SafetensorsTensor>();
  const keyOf = new Map<string, string>();
  const unknown: string[] = [];
  for (const [key, t] of tensors) {
    const m = peftKeyPattern.exec(key);
    const target = m ? byHfName.get(`${m[2]}_proj`) : undefined;
    // Rebuilding the key rejects e.g. `mlp.q_proj` (right names, wrong module group).
    if (!m || !target || peftKey(Number(m[1]), target, m[3] as 'A' | 'B') !== key) {
      unknown.push(`unexpected tensor '${key}' (shape [${t.shape.join(', ')}]): not a LoRA matrix of a Qwen2/Llama projection`);
      continue;
    }
    found.add(target);
    const ours = `${projectionName(Number(m[1]), target)}.lora_${m[3]}`;
    mapped.set(ours, t);
    keyOf.set(ours, key);
  }
  if (unknown.length > 0) {
    const more = unknown.length > 20 ? [`… and ${unknown.length - 20} more`] : [];
    throw new Error(`${path}: tensors do not match the model config:\n${[...unknown.slice(0, 20), ...more].map((u) => `  ${u}`).join('\n')}`);
  }
  if (found.size === 0) throw new Error(`${path}: no LoRA tensors found`);
  if (Array.isArray(c.target_modules)) {
    const listed = new Set(c.target_modules);
    for (const t of found) {
      if (!listed.has(hfProjectionNames[t])) throw new Error(`${configPath}: target_modules does not list '${hfProjectionNames[t]}' but ${path} has tensors for it`);
    }
    for (const name of listed) {
      const t = byHfName.get(name);
      if (t && !found.has(t)) throw new Error(`${configPath}: target_modules lists '${name}' but ${path} has no tensors for it`);
    }
  }

  const lora = resolveLoraConfig(parseLoraConfig({ rank: c.r, alpha: c.lora_alpha, targets: loraTargets.filter((t) => found.has(t)) }, configPath));
  const expected: ExpectedShapes = loraParameterShapes(model, lora);
  const params = matchTensors(expected, mapped, path, (n) => `'${keyOf.get(n) ?? peftKeyOfOurs(n)}'`);
  return { lora, params, baseModelNameOrPath: c.base_model_name_or_path ?? null };
}

/** PEFT key of one of our adapter names (for error messages about missing tensors). */
function peftKeyOfOurs(name: string): string {
  const m = /^layers\.(\d+)\.(?:attn|mlp)\.([a-z]+)\.lora_(A|B)$/.exec(name);
  const target = loraTargets.find((t) => t === m?.[2]);
  return m && target ? peftKey(Number(m[1]), target, m[3] as 'A' | 'B') : name;
}
