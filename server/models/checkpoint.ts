/**
 * Model checkpoint folders:
 *   config.json         the model config (every field written out, defaults included)
 *   model.safetensors   the parameters, named as in `parameterShapes`, float32
 * `loadCheckpoint` also reads Hugging Face model folders (`hf-checkpoint.ts`; their config.json
 * has a `model_type`), so everything that loads a checkpoint path takes either.
 *
 * Loading validates the weights against the config: every expected parameter present with its
 * exact shape and nothing else. Each file is replaced atomically; the weights are written before the
 * config, so a crash between the two leaves either the previous checkpoint or a mismatch that
 * loading reports, never a silently mixed model.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { modelConfigSchema, parameterShapes, parseModelConfig } from './model-config.ts';
import type { ModelConfig, ModelConfigInput } from './model-config.ts';
import { z } from 'zod';
import { isHfConfig, loadHfCheckpoint } from './hf-checkpoint.ts';
import { parseWithSchema, readJsonFile, writeJsonFile } from './json-file.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import type { SafetensorsReadOptions } from './safetensors.ts';
import { matchTensors, shapeParameters } from './tensor-match.ts';

// Re-exported: these lived here before tensor-match.ts, and callers import them from here.
export { matchTensors, shapeParameters };
export type { ExpectedShapes } from './tensor-match.ts';

export const CHECKPOINT_CONFIG_FILE = 'config.json';
export const CHECKPOINT_WEIGHTS_FILE = 'model.safetensors';

export interface Checkpoint {
  config: ModelConfig;
  /** Parameters in `parameterShapes` order. */
  params: Map<string, Float32Array>;
  /** The safetensors `__metadata__` of the weights file. */
  metadata: Record<string, string>;
}

export interface SaveCheckpointOptions {
  /** String metadata stored in the safetensors header (e.g. run id, step). */
  metadata?: Readonly<Record<string, string>>;
}

/** Writes `config.json` and `model.safetensors` into `dir` (created if needed). */
export async function saveCheckpoint(
  dir: string,
  config: ModelConfigInput,
  params: ReadonlyMap<string, Float32Array>,
  options: SaveCheckpointOptions = {},
): Promise<void> {
  const resolved = parseModelConfig(config, 'model config to save');
  const tensors = shapeParameters(parameterShapes(resolved), params, `checkpoint ${dir}`);
  await mkdir(dir, { recursive: true });
  await writeSafetensorsFile(join(dir, CHECKPOINT_WEIGHTS_FILE), tensors, options.metadata);
  await writeJsonFile(join(dir, CHECKPOINT_CONFIG_FILE), resolved);
}

/**
 * Reads a checkpoint folder written by `saveCheckpoint`, or a Hugging Face model folder,
 * validating weights against the config. A Hugging Face folder's metadata is empty and its
 * config's maxSequenceLength is the file's max_position_embeddings.
 */
export async function loadCheckpoint(dir: string, options?: SafetensorsReadOptions): Promise<Checkpoint> {
  const configPath = join(dir, CHECKPOINT_CONFIG_FILE);
  const raw = await readJsonFile(configPath, z.unknown());
  if (isHfConfig(raw)) {
    const hf = await loadHfCheckpoint(dir, options);
    return { config: hf.config, params: hf.params, metadata: {} };
  }
  const config = parseWithSchema(modelConfigSchema, raw, configPath);
  const weightsPath = join(dir, CHECKPOINT_WEIGHTS_FILE);
  const { tensors, metadata } = await readSafetensorsFile(weightsPath, options);
  const params = matchTensors(parameterShapes(config), tensors, weightsPath);
  return { config, params, metadata };
}
