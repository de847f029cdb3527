/**
 * Deterministic parameter initialisation for training from scratch, GPT-2 style:
 * matrices N(0, 0.02²), RMSNorm weights 1, biases 0; optionally the residual output projections
 * (attn.o, mlp.down) scaled by 1/sqrt(2L) so the residual stream's variance does not grow with
 * depth (GPT-2 paper §2.3; nanoGPT `c_proj` init).
 *
 * Each tensor draws from its own stream seeded by (seed, parameter name), so a tensor's values
 * do not depend on which other parameters exist (e.g. tied vs untied head) or on their order.
 */
import { parameterShapes } from './model-config.ts';
import type { ModelConfig } from './model-config.ts';
import { createPrng, deriveSeed, fillNormal } from './prng.ts';

export interface InitOptions {
  /** Standard deviation of the matrix initialisation. Default 0.02. */
  std?: number;
  /** Scale attn.o and mlp.down by 1/sqrt(2·numLayers). Default false. */
  scaleResidualProjections?: boolean;
  /** Allocates each parameter (e.g. on a SharedArrayBuffer). Default `new Float32Array(n)`. */
  alloc?: (n: number) => Float32Array;
}

/** How one parameter is initialised, decided from its name and rank alone. */
export type InitRule = { kind: 'normal'; std: number } | { kind: 'ones' } | { kind: 'zeros' };

const isResidualProjection = (name: string): boolean => /\.(attn\.o|mlp\.down)\.weight$/.test(name);

/** The rule for a parameter: norm weights ones, biases zeros, everything else normal. */
export function initRule(config: ModelConfig, name: string, shape: readonly number[], options: InitOptions = {}): InitRule {
  if (name.endsWith('.bias')) return { kind: 'zeros' };
  // RMSNorm gains, including Qwen3's per-head q_norm/k_norm, start at one.
  if (/(^|\.)(norm|attn_norm|mlp_norm|q_norm|k_norm)\.weight$/.test(name) && shape.length === 1) return { kind: 'ones' };
  const std = options.std ?? 0.02;
  if (options.scaleResidualProjections && isResidualProjection(name)) {
    return { kind: 'normal', std: std / Math.sqrt(2 * config.numLayers) };
  }
  return { kind: 'normal', std };
}

/** Fresh parameters for `config`, identical bytes for identical (config, seed, options). */
export function initParameters(config: ModelConfig, seed: number, options: InitOptions = {}): Map<string, Float32Array> {
  if (options.std !== undefined && !(options.std >= 0 && Number.isFinite(options.std))) {
    throw new RangeError(`init std must be a finite non-negative number, got ${options.std}`);
  }
  const params = new Map<string, Float32Array>();
  for (const [name, shape] of parameterShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = options.alloc ? options.alloc(n) : new Float32Array(n);
    if (data.length !== n) throw new Error(`init: allocator returned ${data.length} elements for '${name}', expected ${n}`);
    const rule = initRule(config, name, shape, options);
    if (rule.kind === 'ones') data.fill(1);
    else if (rule.kind === 'zeros') data.fill(0);
    else fillNormal(data, createPrng(deriveSeed(seed, name)), 0, rule.std);
    params.set(name, data);
  }
  return params;
}
