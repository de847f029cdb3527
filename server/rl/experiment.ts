/**
 * A resolved experiment: the experiment config turned into the objects the trainer needs
 * (environment factory, tokenizer, model configs with their initial weights' source, policies,
 * router), with every cross-reference checked.
 */
import type { Environment } from '../envs/environment.ts';
import type { ModelConfig } from '../models/model-config.ts';
import type { OptimizerConfig } from '../models/optimizer.ts';
import type { DecodeSettings } from '../models/rollout-decoder.ts';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { LoraSpec } from '../models/transformer-graph.ts';
import type { ExecutionProviderChoice } from '../runtime/engine.ts';
import type { RolloutBackendConfig, SandboxConfig } from '../protocol/experiment-config.ts';
import type { AdvantageNorm, GroupFilter } from './advantages.ts';
import type { ProposalNoise } from './warm-start.ts';

export type ModelSource = { readonly kind: 'init'; readonly seed: number } | { readonly kind: 'checkpoint'; readonly path: string };

export interface ResolvedExperiment {
  readonly name: string;
  readonly seed: number;
  readonly specialization: 'L0' | 'L1' | 'L2' | 'L3';
  /** `runsCode`: its agents write code that runs, so the run needs the sandbox. */
  readonly env: { readonly name: string; readonly options: unknown; readonly runsCode: boolean; readonly make: (seed: number) => Environment };
  readonly agents: readonly string[];
  /** The experiment's one tokenizer: the character tokenizer, or a Hugging Face model folder's. */
  readonly tokenizer: TextTokenizer;
  readonly models: ReadonlyMap<string, { readonly config: ModelConfig; readonly source: ModelSource }>;
  readonly policies: ReadonlyMap<string, { readonly model: string; readonly lora: LoraSpec | null }>;
  readonly router: ReadonlyMap<string, string>;
  readonly algorithm: {
    readonly name: 'at-grpo' | 'grpo';
    readonly branches: number;
    readonly teamRewardWeight: number;
    readonly envsPerStep: number;
    readonly temperature: number;
    readonly topP: number;
    readonly topK: number;
    readonly maxNewTokens: number;
    readonly advantageNorm: AdvantageNorm;
    readonly distinctBranches: boolean;
    readonly clipEps: number;
    readonly klCoef: number;
    readonly entropyCoef: number;
    readonly ppoEpochs: number;
    readonly miniBatches: number;
    readonly microBatch: number;
    readonly filters: GroupFilter;
    readonly curriculum: { readonly kind: 'uniform' | 'greedy-failures' | 'failure-restarts'; readonly candidates: number };
  };
  readonly optimizer: OptimizerConfig;
  readonly warmStart: {
    readonly enabled: boolean;
    readonly demonstrations: number;
    readonly steps: number;
    readonly batchSize: number;
    readonly lr: number;
    readonly dagger: { readonly rounds: number; readonly episodes: number };
    readonly proposals: ProposalNoise;
  };
  readonly training: {
    readonly steps: number;
    readonly validateEvery: number;
    readonly validationEpisodes: number;
    readonly testEpisodes: number;
    readonly checkpointEvery: number;
    /** Which policy the test after RL plays: the last step's or the best validated one. */
    readonly select: 'last' | 'best';
    readonly validationTemperature: number;
    readonly microBatchTokens?: number | undefined;
  };
  readonly engine: { readonly executionProvider: ExecutionProviderChoice; readonly threads?: number };
  /** Rollout weights (fp32/int8/int4) and the fused decode graph. */
  readonly rollout: DecodeSettings;
  /** Where training rollouts are sampled (`rollout.backend`); absent: in process. */
  readonly rolloutBackend?: RolloutBackendConfig;
  /** Where model-written code runs (environments with `env.runsCode`). */
  readonly sandbox: SandboxConfig;
}
