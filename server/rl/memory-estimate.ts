/**
 * Whether a run's weights and optimizer state can fit this machine at all, checked when the
 * experiment is resolved, before anything is allocated. The config schema bounds each size on its
 * own (`sizeLimits`); a model within every bound can still be far too big (65536 wide and 1024
 * layers deep), and only the product tells.
 *
 * The estimate is a floor, in float32 (everything the engine keeps resident is float32, a
 * Hugging Face checkpoint's BF16 included):
 *  - a policy that trains its model's own weights holds 7 copies of them: weights, gradients, the
 *    AdamW moments m and v, and the second set AdamW writes into (weights, m, v: the optimizer is
 *    double-buffered), plus a frozen reference copy when `algorithm.klCoef` > 0;
 *  - a model under LoRA adapters is held once (one frozen base per engine), and each adapter
 *    holds the same 7 copies of its own parameters.
 * Activations, KV caches and ONNX Runtime's arenas come on top, so passing says little; failing
 * says the run cannot start.
 */
import { totalmem } from 'node:os';
import { parameterCount } from '../models/default-model.ts';
import { projectionSize, type ModelConfig } from '../models/model-config.ts';
import type { LoraSpec } from '../models/transformer-graph.ts';
import { ConfigError, type ConfigIssue } from '../protocol/config-errors.ts';

/** Copies of a trained parameter set: weights, gradients, m, v, and AdamW's next weights, m, v. */
const TRAINED_COPIES = 7;
const FLOAT32_BYTES = 4;

export interface MemoryEstimate {
  readonly bytes: number;
  /** What makes up the estimate, largest first: a config path and its bytes. */
  readonly parts: ReadonlyArray<{ readonly path: string; readonly what: string; readonly bytes: number }>;
}

/** Parameters of one LoRA adapter on `model`: rank × (fan-in + fan-out) per targeted projection per layer. */
export function loraParameterCount(model: ModelConfig, lora: Pick<LoraSpec, 'rank' | 'targets'>): number {
  let perLayer = 0;
  for (const t of new Set(lora.targets)) {
    const p = projectionSize(model, t);
    perLayer += lora.rank * (p.in + p.out);
  }
  return perLayer * model.numLayers;
}

/** The estimate for a resolved experiment's models and policies (see the file comment). */
export function estimateTrainingMemory(
  models: ReadonlyMap<string, { readonly config: ModelConfig }>,
  policies: ReadonlyMap<string, { readonly model: string; readonly lora: Pick<LoraSpec, 'rank' | 'targets'> | null }>,
  klCoef: number,
): MemoryEstimate {
  const parts: Array<{ path: string; what: string; bytes: number }> = [];
  const frozenBases = new Set<string>();
  for (const [id, p] of policies) {
    const m = models.get(p.model);
    if (m === undefined) continue;
    if (p.lora === null) {
      const copies = TRAINED_COPIES + (klCoef > 0 ? 1 : 0);
      const n = parameterCount(m.config);
      parts.push({ path: `models.${p.model}`, what: `${n} parameters trained by policy "${id}" (x${copies}: weights, gradients, AdamW moments, their next copies${klCoef > 0 ? ', KL reference' : ''})`, bytes: n * copies * FLOAT32_BYTES });
    } else {
      frozenBases.add(p.model);
      const n = loraParameterCount(m.config, p.lora);
      parts.push({ path: `policies.${id}.lora`, what: `${n} adapter parameters (x${TRAINED_COPIES}: weights, gradients, AdamW moments, their next copies)`, bytes: n * TRAINED_COPIES * FLOAT32_BYTES });
    }
  }
  for (const id of frozenBases) {
    const n = parameterCount(models.get(id)!.config);
    parts.push({ path: `models.${id}`, what: `${n} parameters of the frozen base`, bytes: n * FLOAT32_BYTES });
  }
  parts.sort((a, b) => b.bytes - a.bytes);
  return { bytes: parts.reduce((s, p) => s + p.bytes, 0), parts };
}

const gib = (bytes: number): string => `${(bytes / 2 ** 30).toFixed(bytes < 2 ** 30 ? 3 : 1)} GiB`;

/**
 * The issue when the estimate exceeds `availableBytes` (default: this machine's memory), or none.
 * The path is the largest part's; the message lists every part, so the user sees which sizes to
 * lower (model widths, layers, vocabulary, a LoRA rank or its targets).
 */
export function memoryEstimateIssues(estimate: MemoryEstimate, availableBytes = totalmem()): ConfigIssue[] {
  if (estimate.bytes <= availableBytes) return [];
  const largest = estimate.parts[0];
  const path = largest === undefined ? [] : largest.path.split('.');
  const parts = estimate.parts.map((p) => `${p.path}: ${gib(p.bytes)} for ${p.what}`).join('; ');
  return [
    {
      path,
      message:
        `weights and optimizer state alone need an estimated ${gib(estimate.bytes)}, more than this machine's ${gib(availableBytes)} of memory (${parts}); ` +
        'lower the model sizes (hiddenSize, numLayers, intermediateSize, vocabSize) or the LoRA rank and targets',
    },
  ];
}

/** Throws a `ConfigError` naming the fields and the estimate when the run cannot fit (see above). */
export function checkTrainingMemory(
  models: Parameters<typeof estimateTrainingMemory>[0],
  policies: Parameters<typeof estimateTrainingMemory>[1],
  klCoef: number,
  source: string,
  availableBytes = totalmem(),
): void {
  const issues = memoryEstimateIssues(estimateTrainingMemory(models, policies, klCoef), availableBytes);
  if (issues.length > 0) throw new ConfigError(source, issues);
}
