/**
 * The embedded default model: a ~1M-parameter decoder trained from scratch on procedurally
 * generated tasks, with the character-level tokenizer. Everything works on a fresh machine with
 * no downloads; real checkpoints of the same architecture load through `hf-names.ts`.
 */
import { defaultTokenizer } from './tokenizer.ts';
import { parameterShapes, parseModelConfig, type ModelConfig } from './model-config.ts';

/** ~1.0M parameters: V=112 (the char tokenizer), C=128, L=4, H=4, Hkv=2 (D=32), F=512. */
export const defaultModelConfig: ModelConfig = parseModelConfig({
  vocabSize: defaultTokenizer.vocabSize,
  hiddenSize: 128,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  intermediateSize: 512,
  tieEmbeddings: true,
  maxSequenceLength: 512,
});

/** ~10M parameters, same family: the larger size the engine benchmark also measures. */
export const mediumModelConfig: ModelConfig = parseModelConfig({
  vocabSize: defaultTokenizer.vocabSize,
  hiddenSize: 320,
  numLayers: 8,
  numHeads: 5,
  numKvHeads: 5,
  intermediateSize: 896,
  tieEmbeddings: true,
  maxSequenceLength: 512,
});

export function parameterCount(c: ModelConfig): number {
  // GPT-2's table differs (learned positions, LayerNorm biases, no gate): count it as listed.
  if (c.architecture === 'gpt2') return parameterShapes(c).reduce((n, [, s]) => n + s.reduce((a, b) => a * b, 1), 0);
  const V = c.vocabSize;
  const C = c.hiddenSize;
  const H = c.numHeads;
  const Hkv = c.numKvHeads ?? H;
  const D = c.headDim ?? C / H;
  const F = c.intermediateSize;
  const perLayer = 2 * C + C * H * D * 2 + 2 * C * Hkv * D + 3 * C * F + (c.attentionBias ? H * D + 2 * Hkv * D : 0);
  return V * C + c.numLayers * perLayer + C + (c.tieEmbeddings ? 0 : V * C);
}
