/**
 * A resolved experiment: the experiment config turned into the objects the trainer needs
 * (environment factory, tokenizer, model configs with their initial weights' source, policies,
 * router), with every cross-reference checked.
 */
import type { Environment } from '../envs/environment.ts';
import type { ModelConfig } from '../models/model-config.ts';
import type { DecodeSettings } from '../models/rollout-decoder.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { LoraSpec } from '../models/transformer-graph.ts';
import type { ExperimentConfig, RolloutBackendConfig } from '../protocol/experiment-config.ts';

export type ModelSource = { readonly kind: 'init'; readonly seed: number } | { readonly kind: 'checkpoint'; readonly path: string };

/**
 * The sections the trainer takes as the config states them (parsed, defaults applied) keep the
 * config's types, so a field is declared once, in its zod schema; the rest are resolved objects.
 */
export interface ResolvedExperiment extends Readonly<Pick<ExperimentConfig, 'name' | 'seed' | 'specialization' | 'algorithm' | 'optimizer' | 'warmStart' | 'training' | 'engine' | 'sandbox'>> {
  /** `runsCode`: its agents write code that runs, so the run needs the sandbox. */
  readonly env: { readonly name: string; readonly options: unknown; readonly runsCode: boolean; readonly make: (seed: number) => Environment };
  readonly agents: readonly string[];
  /** The experiment's one tokenizer: the character tokenizer, or a Hugging Face model folder's. */
  readonly tokenizer: TextTokenizer;
  readonly models: ReadonlyMap<string, { readonly config: ModelConfig; readonly source: ModelSource }>;
  readonly policies: ReadonlyMap<string, { readonly model: string; readonly lora: LoraSpec | null }>;
  readonly router: ReadonlyMap<string, string>;
  /** `rollout` without its backend: how policies decode. */
  readonly rollout: DecodeSettings;
  /** Where training rollouts are sampled (`rollout.backend`); absent: in process. */
  readonly rolloutBackend?: RolloutBackendConfig;
}
