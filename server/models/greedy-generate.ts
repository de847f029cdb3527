/**
 * One greedy generation from a model's weights, without a Policy: no optimizer state, no adapter,
 * just the decode graph and the weights made resident, then released. Used to show that a loaded
 * checkpoint produces text (`troupe models inspect`). Weight arrays are transferred to the engine
 * worker: the caller must not use them afterwards.
 */
import type { Engine } from '../runtime/engine.ts';
import type { GenerateResult } from '../runtime/generate.ts';
import { f32 } from '../runtime/tensor.ts';
import { buildDecode } from './artifacts.ts';
import { modelDims, parameterShapes, type ModelConfig } from './model-config.ts';

export interface GreedyGeneration {
  readonly tokens: Int32Array;
  readonly finish: 'stop' | 'length';
  /** Milliseconds spent on the prompt and on the generated tokens. */
  readonly prefillMs: number;
  readonly decodeMs: number;
}

export async function greedyGenerate(
  engine: Engine,
  config: ModelConfig,
  weights: ReadonlyMap<string, Float32Array>,
  prompt: Int32Array,
  o: { maxNewTokens: number; stopTokens: readonly number[]; id?: string },
): Promise<GreedyGeneration> {
  if (prompt.length + o.maxNewTokens > config.maxSequenceLength) {
    throw new Error(`prompt (${prompt.length} tokens) + ${o.maxNewTokens} new tokens exceed the model's maxSequenceLength ${config.maxSequenceLength}`);
  }
  const id = o.id ?? 'greedy';
  const artifact = buildDecode(config, null);
  const params: Record<string, string> = {};
  const resident: string[] = [];
  try {
    for (const [name, shape] of parameterShapes(config)) {
      const data = weights.get(name);
      if (!data) throw new Error(`greedy generation: missing weight '${name}'`);
      await engine.upload(`${id}:${name}`, f32(shape, data));
      resident.push(`${id}:${name}`);
      params[name] = `${id}:${name}`;
    }
    await engine.createSession(`${id}:decode`, artifact.bytes);
    const { L, Hkv, D, V } = modelDims(config);
    const r: GenerateResult = await engine.generate({
      session: `${id}:decode`,
      params,
      prompts: [prompt],
      maxNewTokens: o.maxNewTokens,
      sampling: { temperature: 0, topP: 1, topK: 0 },
      seed: 0,
      stopTokens: o.stopTokens,
      padToken: 0,
      contract: { numLayers: L, numKvHeads: Hkv, headDim: D, vocabSize: V },
    });
    return { tokens: r.tokens[0]!, finish: r.finish[0]!, prefillMs: r.prefillMs, decodeMs: r.decodeMs };
  } finally {
    await engine.releaseSession(`${id}:decode`).catch(() => {});
    await engine.drop(resident);
  }
}
