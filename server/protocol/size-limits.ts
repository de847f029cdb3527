/**
 * Ceilings on every size a config or request can set. They sit far above what a researcher would
 * ask for on a big machine (Llama 3.1 405B has hiddenSize 16384, 126 layers, intermediateSize
 * 53248; vocabularies reach 256k) and exist to turn a slip or a hostile request (a LoRA rank of
 * 1,000,000) into a validation error instead of an allocation. Whether a model within them fits
 * this machine is a separate check, made when a run is resolved (`rl/memory-estimate.ts`). The
 * experiment config, the model schemas (so a checkpoint's config.json is bounded too) and the RPC
 * methods' params all use this one table.
 */
export const sizeLimits = {
  vocabSize: 1_048_576,
  hiddenSize: 65_536,
  numLayers: 1024,
  numHeads: 1024,
  headDim: 1024,
  intermediateSize: 524_288,
  maxSequenceLength: 1_048_576,
  loraRank: 4096,
  /** Entries of `models`, `policies`, `router` and keys of `env.options`. */
  recordEntries: 64,
  /** Training, warm-start and schedule steps. */
  steps: 1_000_000,
  optimizerSteps: 1_000_000_000,
  demonstrations: 1_000_000,
  batchSize: 65_536,
  microBatch: 65_536,
  microBatchTokens: 16_777_216,
  /** Characters of a path (a checkpoint folder, `$schema`). */
  pathLength: 4096,
  descriptionLength: 10_000,
} as const;
