/**
 * The experiment config: the JSON file users write (`configs/<env>/<level>.json`) to describe one
 * training run: the environment, which policy acts for which agent, the RL algorithm, warm start,
 * schedule and engine. ARCHITECTURE.md ("The training loop in one page") defines the terms; the
 * config editor's diagnostics, completion and hover come from these schemas (`server/config-language/`).
 *
 * Three layers check a config:
 *  1. this schema: types, ranges, enums, unknown keys (every object is strict, so a typo fails);
 *     `configs/schema.json` is generated from it, so editors flag these instantly;
 *  2. `checkExperimentConfig`: rules across fields (router targets exist, specialization levels);
 *     the schema runs it as a refinement once the structure is valid;
 *  3. `checkAgainstAgents`: the router against the environment's agents, which only the server
 *     knows (protocol imports nothing but zod); the server also validates `env.options` with the
 *     environment's own options schema.
 *
 * Each field is documented once, in its `.describe()`: the editor's hover text (through the JSON
 * Schema) and the reference for readers of the code. The model, LoRA and optimizer schemas are
 * declared in `model-schemas.ts`, which `server/models` uses too; the size ceilings in
 * `size-limits.ts`.
 */
import { z } from 'zod';
import { ConfigError, didYouMean, issuesFromZod, quoteList, type ConfigIssue } from './config-errors.ts';
import { loraConfigSchema, modelConfigSchema, optimizerSchema } from './model-schemas.ts';
import { sizeLimits } from './size-limits.ts';

/** Environment names (the keys of the server's environment registry, `envs/environments.ts`). */
export const environmentNames = ['plan-path', 'sudoku', 'sokoban', 'tic-tac-toe', 'math', 'code', 'hanabi'] as const;
export type EnvironmentName = (typeof environmentNames)[number];

/** How agents are prompted (`envs/chat-prompts/prompt-styles.ts`): the embedded model's terse text, or chat messages. */
export const promptStyles = ['terse', 'chat'] as const;

export const specializationLevels = ['L0', 'L1', 'L2', 'L3'] as const;
export type SpecializationLevel = (typeof specializationLevels)[number];

export const algorithmNames = ['at-grpo', 'grpo', 'ppo'] as const;

/** Built-in model sizes (`models/default-model.ts`): default ~1M parameters, medium ~10M. */
export const modelPresets = ['default', 'medium'] as const;

export const executionProviders = ['cpu', 'cuda', 'webgpu', 'auto'] as const;

/** A record of at most `sizeLimits.recordEntries` entries (zod's record has no size bound of its own). */
function boundedRecord<T extends z.ZodType>(record: T): T {
  return record
    .refine((r) => Object.keys(r as object).length <= sizeLimits.recordEntries, { message: `must have at most ${sizeLimits.recordEntries} entries` })
    .meta({ maxProperties: sizeLimits.recordEntries }) as unknown as T;
}

/** Ids of models, policies and agents: they name folders and appear in metric keys. */
export const configIdSchema = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_-]{0,63}$/, 'must start with a letter and contain only letters, digits, "-" and "_" (at most 64 characters)');

// ---------------------------------------------------------------------------------------------
// The experiment

export const modelSourceSchema = z
  .object({
    preset: z.enum(modelPresets).optional().describe('Built-in architecture, initialised from scratch with the character tokenizer: default (~1M parameters) or medium (~10M).'),
    config: modelConfigSchema.optional().describe('An architecture to initialise from scratch, with the character tokenizer (vocabSize must match it).'),
    checkpoint: z
      .string()
      .min(1)
      .max(sizeLimits.pathLength)
      .optional()
      .describe('Checkpoint folder: a Troupe checkpoint (config.json + model.safetensors) or a Hugging Face Qwen2/Qwen3/Llama model (config.json, model.safetensors or a sharded index, tokenizer.json). A relative path is resolved against this file\'s folder. At most 4096 characters.'),
    maxSequenceLength: z
      .int()
      .positive()
      .max(sizeLimits.maxSequenceLength)
      .optional()
      .describe("Only with checkpoint: the longest prompt + response the model is used with (sizes RoPE tables and KV caches). Default: a Hugging Face model's max_position_embeddings capped at 4096; a Troupe checkpoint's own value. At most 1048576."),
    enableThinking: z
      .boolean()
      .optional()
      .describe("Only with a Hugging Face checkpoint: the chat template's enable_thinking (Qwen3) for every prompt. Default false: the template closes an empty <think></think> and the model answers directly, as the reference's Qwen3 runs did; true lets it reason in a <think> block first (set algorithm.maxNewTokens to leave room). Templates without the switch ignore it."),
  })
  .strict()
  .superRefine((m, ctx) => {
    const given = (['preset', 'config', 'checkpoint'] as const).filter((k) => m[k] !== undefined);
    if (given.length !== 1) {
      const what = given.length === 0 ? 'none is given' : `got ${quoteList(given)}`;
      ctx.addIssue({ code: 'custom', path: [], message: `a model needs exactly one of "preset", "config", "checkpoint"; ${what}` });
    }
    if (m.maxSequenceLength !== undefined && m.checkpoint === undefined) {
      ctx.addIssue({ code: 'custom', path: ['maxSequenceLength'], message: 'maxSequenceLength applies to a checkpoint; a preset or config sets its own' });
    }
    if (m.enableThinking !== undefined && m.checkpoint === undefined) {
      ctx.addIssue({ code: 'custom', path: ['enableThinking'], message: "enableThinking applies to a Hugging Face checkpoint's chat template; a preset or config uses the character tokenizer" });
    }
  })
  // The same rule for editors; zod's check above gives the message.
  .meta({ oneOf: [{ required: ['preset'] }, { required: ['config'] }, { required: ['checkpoint'] }] })
  .describe('A base model: exactly one of preset, config (a fresh architecture) or checkpoint (a folder).');

export const policySchema = z
  .object({
    model: configIdSchema.describe('Id of the base model (a key of "models").'),
    lora: loraConfigSchema.optional().describe("LoRA adapter trained on top of the frozen base model (L2, optionally L0). Absent: the model's own weights are trained (L1, L3)."),
  })
  .strict()
  .describe('A trainable policy: a base model, plus a LoRA adapter when only the adapter is trained.');

export const algorithmSchema = z
  .object({
    name: z
      .enum(algorithmNames)
      .default('at-grpo')
      .describe('at-grpo: at each (turn, agent) sample K branches, keep the best, group by (task, agent, turn) (arXiv 2510.11062). grpo: the baseline, K independent rollouts per task grouped by task, no tree. ppo: K independent rollouts per task, advantages from a learned value function (a value head on each policy) by GAE over each agent\'s turns (gamma, gaeLambda, valueClip, valueLr).'),
    branches: z
      .int()
      .min(2)
      .max(64)
      .default(4)
      .describe('Group size K. at-grpo: responses sampled at each (turn, agent) node; grpo: independent rollouts per task. At least 2: advantages are normalised within a group, and a group of one has none.'),
    teamRewardWeight: z.number().min(0).default(1).describe("alpha in r = alpha * r_team + r_local: weight of the shared task reward against the acting agent's own reward."),
    envsPerStep: z.int().min(1).max(4096).default(8).describe('Environment instances (tasks) rolled out per training step.'),
    temperature: z.number().positive().max(10).default(1.0).describe('Sampling temperature of training rollouts. Old log-probs are recomputed at this temperature.'),
    topP: z.number().positive().max(1).default(1.0).describe('Nucleus sampling: sample from the smallest set of tokens whose probability reaches topP; 1 disables.'),
    topK: z.int().min(0).max(sizeLimits.vocabSize).default(0).describe('Sample only from the topK most likely tokens; 0 disables. At most 1048576.'),
    maxNewTokens: z.int().min(1).max(4096).default(24).describe('Longest response, in tokens; a longer one is cut off and marked truncated.'),
    distinctBranches: z
      .boolean()
      .default(false)
      .describe(
        "at-grpo only: the K branches of a (turn, agent) node draw their first tokens without replacement, so they start K different ways even where the policy is nearly certain (where greedy play fails, i.i.d. branches are often K copies of one answer and the group teaches nothing). Log-probs and the PPO ratio stay the policy's; the kept branch is still the best-scoring one. false: i.i.d. branches, as in the paper.",
      ),
    advantageNorm: z
      .enum(['std', 'none'])
      .default('std')
      .describe(
        "std: A = (r - mean) / std within each group (GRPO as in the paper). none: A = r - mean (Dr. GRPO; verl's norm_adv_by_std_in_grpo=false): a group whose rewards barely differ then weighs little, one whose branches succeed and fail weighs a lot.",
      ),
    invalidAdvantage: z
      .number()
      .min(-10)
      .max(0)
      .nullable()
      .default(null)
      .describe(
        "Invalid acts (the text did not parse, or the rules refused the act whole: a tic-tac-toe forfeit, a Hanabi move it must pass on) set apart from their group: each group's baseline (mean, and std under advantageNorm std) is taken over its valid acts only, and every invalid act gets this advantage (0 or below). With them in the group, one forfeit's low reward lifts every legal branch of it, losing moves included. grpo: a trajectory with an invalid act is an invalid member. null: invalid acts are members of their group like any other (the paper).",
      ),
    gamma: z.number().min(0).max(1).default(1).describe("ppo only: discount per turn of an agent in GAE (an agent's next act is one step later). Default 1: episodes are short and end."),
    gaeLambda: z
      .number()
      .min(0)
      .max(1)
      .default(0.95)
      .describe('ppo only: GAE lambda. 0 is TD(0) (A = r + gamma V(next) - V), 1 is Monte Carlo (A = discounted return - V); between trades the critic\'s bias for variance. Default 0.95.'),
    valueClip: z
      .number()
      .positive()
      .max(1000)
      .default(0.2)
      .describe('ppo only: clip range of the value loss: a prediction gains nothing by moving more than this from the value it had when the batch was sampled (max of the clipped and unclipped squared errors, as in the standard PPO recipe). Rewards are in the environment\'s units, so a range near a typical return change; set it large (e.g. 1000) to turn the clip off.'),
    valueLr: z
      .number()
      .positive()
      .max(1)
      .default(0.003)
      .describe("ppo only: Adam learning rate of the value head (a linear map of the policy's final hidden state, trained apart from the policy with its trunk detached, so no value-loss coefficient is needed: it would train no shared weight). It takes ppoEpochs x miniBatches steps per training step."),
    clipEps: z.number().positive().lt(1).default(0.2).describe('PPO clip range epsilon: the probability ratio is clipped to [1 - eps, 1 + eps].'),
    klCoef: z
      .number()
      .min(0)
      .default(0)
      .describe('Weight of the KL penalty to the reference policy (for a LoRA policy the base model with the adapter off; otherwise a frozen copy of the starting weights); 0 disables.'),
    entropyCoef: z.number().min(0).default(0).describe('Weight of the entropy bonus; 0 disables.'),
    ppoEpochs: z.int().min(1).max(64).default(1).describe("Passes of policy updates over each step's samples."),
    miniBatches: z
      .int()
      .min(1)
      .max(256)
      .default(4)
      .describe(
        "Mini-batches per pass: each policy's samples of a step are shuffled and split into this many, one AdamW step each, so a step takes ppoEpochs x miniBatches optimizer steps (fewer when a policy has fewer samples). Old log-probs are fixed before the first, so from the second mini-batch on the ratio leaves 1 and the PPO clip engages, as in the reference (verl's ppo_mini_batch_size). optimizer.schedule counts optimizer steps.",
      ),
    microBatch: z
      .int()
      .min(1)
      .max(sizeLimits.microBatch)
      .default(64)
      .describe("Sequences per forward/backward pass. It bounds memory and does not change the update: a policy's gradients are accumulated over a mini-batch into one optimizer step. At most 65536."),
    curriculum: z
      .object({
        kind: z
          .enum(['uniform', 'greedy-failures', 'failure-restarts'])
          .default('uniform')
          .describe(
            "uniform: each step rolls out envsPerStep fresh training tasks. greedy-failures: each step draws 'candidates' fresh training tasks, plays them once greedily (as validation does) and rolls out the ones the policy fails first, filling up with solved ones; RL then spends its samples where the policy is wrong. failure-restarts: as greedy-failures, but each failed task restarts mid-episode, at the start of a round of its greedy play (drawn per step), so RL sees the states greedy play gets stuck in.",
          ),
        candidates: z.int().min(1).max(4096).default(64).describe("Candidate tasks played greedily per step to find failures (greedy-failures and failure-restarts; at least envsPerStep)."),
      })
      .strict()
      .prefault({})
      .describe('How each step picks its training tasks.'),
    filters: z
      .object({
        dropZeroVariance: z.boolean().default(false).describe('Drop groups whose rewards are all equal: their advantages are 0 and only dilute the token mean.'),
        dropLowestMeanFraction: z.number().min(0).lt(1).default(0).describe('Drop this fraction of the groups with the lowest mean reward (after the zero-variance filter); 0 keeps all.'),
      })
      .strict()
      .prefault({})
      .describe('Groups to leave out of the update.'),
  })
  .strict()
  .describe('The RL algorithm: sampling, grouping and the PPO-clip loss (AT-GRPO, arXiv 2510.11062 §3).');
export type AlgorithmConfig = z.output<typeof algorithmSchema>;

export const warmStartSchema = z
  .object({
    enabled: z.boolean().default(true).describe('Whether to warm-start before RL.'),
    demonstrations: z.int().min(1).max(sizeLimits.demonstrations).default(1500).describe('Solver episodes played to collect (prompt, response) demonstrations. At most 1000000.'),
    steps: z.int().min(1).max(sizeLimits.steps).default(300).describe('Optimizer steps of supervised training. At most 1000000.'),
    batchSize: z.int().min(1).max(sizeLimits.batchSize).default(32).describe('(prompt, response) pairs per optimizer step. At most 65536.'),
    lr: z.number().positive().default(3e-3).describe('Learning rate of the warm start (AdamW, with the betas, eps, weight decay and gradient clip of "optimizer").'),
    stopAtLoss: z
      .number()
      .positive()
      .optional()
      .describe(
        'Stop the warm start early, at the first step where its smoothed training loss (the curve the log and the dashboard show: an exponential moving average of the step losses, weight 0.1) is at or below this value; "steps" is then the most it runs, and its learning-rate schedule stays the one planned for "steps". Checked once the schedule\'s warm-up is over. DAgger rounds after the stop are not played. Unset: all "steps" run. Seeds of one config then start RL from a like fit rather than a like step count (their warm starts can end far apart after the same steps: docs/experiments/2026-11-28-sudoku.md).',
      ),
    dagger: z
      .object({
        rounds: z.int().min(0).max(16).default(0).describe('Rounds of DAgger: the supervised steps are split into rounds + 1 equal phases, and after each phase but the last the model plays "episodes" training episodes greedily. 0 disables.'),
        episodes: z.int().min(1).max(100_000).default(500).describe('Training episodes the model plays greedily per DAgger round; every state one of its agents reaches is labelled with the solver\'s answer and added to the demonstrations.'),
      })
      .strict()
      .prefault({})
      .describe(
        "DAgger (Ross et al., 2011): solver demonstrations only show states on the solver's own path, so the model never learns what to do after its own mistakes (a proposal that hits a wall, a tool report that says the goal was not reached). Each round adds the states the model's own greedy play reaches, labelled by the solver.",
      ),
    proposals: z
      .object({
        flawedEvery: z.int().min(0).max(1000).default(3).describe("One in this many team demonstration episodes (besides those that start with a botched round) starts with a flawed tool proposal (two moves swapped, one digit changed); the planner's label is the proposal when it is as good as the solver's answer and the solver's answer when not. 0: never."),
        missingEvery: z.int().min(0).max(1000).default(0).describe("Of the flawed-proposal episodes, one in this many has the tool answer nothing readable instead, so the planner sees 'tool: no valid proposal' and learns to solve from the state alone. 0: never."),
      })
      .strict()
      .prefault({})
      .describe("Team workflows: the tool proposals the planner's demonstrations show besides the solver's own. Solver-only proposals teach a planner that copies; flawed ones teach it to overrule, missing ones to solve alone (docs/experiments/2026-11-25.md)."),
  })
  .strict()
  .describe(
    'Supervised training on solver demonstrations before RL, so RL starts from a policy that writes well-formed actions. ' +
      'Each model learns (all its weights) from the demonstrations of the agents whose policies use it; LoRA adapters start afterwards. ' +
      'The result is cached under a hash of everything that determines it (models, environment, routing, seed, these settings).',
  );

export const trainingSchema = z
  .object({
    steps: z.int().min(1).max(sizeLimits.steps).default(100).describe('RL training steps; each one rolls out, computes advantages and updates every policy. At most 1000000.'),
    validateEvery: z.int().min(1).max(sizeLimits.steps).default(10).describe('Validate every this many steps. Validation also runs before the first step (the warm-start policy) and after the last.'),
    validationEpisodes: z
      .int()
      .min(1)
      .max(1_000_000)
      .default(64)
      .describe('Episodes per validation, on fixed held-out seeds (the same in every validation and every run) that training never draws.'),
    testEpisodes: z
      .int()
      .min(0)
      .max(500_000)
      .default(0)
      .describe(
        'Episodes of the test, played (like validation) on the warm-started policy before RL and on the final one, on held-out seeds apart from the validation seeds (validation index 500000 on): validation may guide choices during a run, the test reports its result. 0 skips it.',
      ),
    validationTemperature: z.number().min(0).max(10).default(0).describe('Sampling temperature of validation episodes; 0 decodes greedily.'),
    select: z
      .enum(['last', 'best'])
      .default('last')
      .describe(
        "The policy the run's test reports. last: the last step's. best: the validated policy with the highest validation success (the warm-started one at step 0 included; a tie goes to the earlier step), chosen on the validation seeds only, never the test seeds. Either way checkpoints/best.json names the best validated step, every new best gets a checkpoint (checkpoints/step-<n>), and `troupe eval|export --checkpoint best` read it.",
      ),
    checkpointEvery: z.int().min(1).max(sizeLimits.steps).default(20).describe('Write a checkpoint every this many steps (the last step always gets one); a run resumes from its last checkpoint.'),
    microBatchTokens: z
      .int()
      .min(1)
      .max(sizeLimits.microBatchTokens)
      .optional()
      .describe(
        'Most padded tokens (sequences x longest sequence) per forward/backward pass of scoring and updates, on top of algorithm.microBatch; a longer single sequence gets a pass of its own. It bounds memory (activations grow with these tokens, logits with the response tokens among them: 0.6 MB each at a 151936-token vocabulary) and does not change the update. Default: no token limit. At most 16777216.',
      ),
  })
  .strict()
  .describe('Length of the run, validation and checkpoints, and how big one training pass may be.');

export const engineSchema = z
  .object({
    executionProvider: z
      .enum(executionProviders)
      .default('cpu')
      .describe('Where ONNX Runtime runs the models: cpu, cuda (needs the CUDA libraries), webgpu, or auto (the best available). An unavailable provider falls back to cpu with a log line.'),
    threads: z.int().min(1).max(1024).optional().describe("Threads of the CPU provider. Default: ONNX Runtime's choice (the physical cores)."),
  })
  .strict()
  .describe('The inference and training engine.');

/** Weights training rollouts sample with. */
export const rolloutWeightKinds = ['fp32', 'fp16', 'int8', 'int4'] as const;

/** Inference servers a rollout backend drives. */
export const rolloutServerKinds = ['vllm', 'sglang'] as const;

/**
 * The environment variables `rollout.backend.apiKeyEnv` may name. A config can come from anyone
 * (a cloned repository, a shared example) and names the hosts the key is sent to, so it may not
 * pick any variable of the user's environment: only ones named for an inference engine's key.
 * Another key is passed under such a name: `VLLM_API_KEY="$MY_KEY" troupe train …`.
 */
export const engineKeyEnvPattern = /^(TROUPE|VLLM|SGLANG)_[A-Z0-9_]*(KEY|TOKEN)$/;
const engineKeyEnvRule = 'must be an engine key variable: upper case, starting TROUPE_, VLLM_ or SGLANG_ and ending KEY or TOKEN (e.g. VLLM_API_KEY), so that a config cannot send another secret of your environment to the servers it names';

const engineServerSchema = z
  .object({
    kind: z.enum(rolloutServerKinds).describe('vllm: the OpenAI-compatible routes (/v1/completions, /v1/load_lora_adapter), which `troupe serve-openai` also serves. sglang: SGLang\'s native /generate and /load_lora_adapter.'),
    urls: z
      .array(
        z
          .string()
          .max(sizeLimits.pathLength)
          .regex(/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/, 'must be an http:// or https:// URL without query or fragment'),
      )
      .min(1)
      .max(64)
      .describe('Base URLs of the servers, e.g. "http://127.0.0.1:8000" (at most 64). Requests are spread over them by load; a server that fails is skipped and its requests are sent to another.'),
    apiKeyEnv: z
      .string()
      .max(128)
      .regex(engineKeyEnvPattern, engineKeyEnvRule)
      .optional()
      .describe(`Name of the environment variable holding the servers' API key (sent as "Authorization: Bearer <key>"). The key itself never goes in a config. The name ${engineKeyEnvRule}.`),
    timeoutMs: z.int().min(1000).max(3_600_000).default(600_000).describe('Longest wait for one request in milliseconds before it is sent to another server (default 600000).'),
    retries: z.int().min(0).max(16).default(3).describe('Further tries of a failed request (a refused connection, a timeout, a 5xx answer), each on another live server when there is one (default 3). A 4xx answer is not retried.'),
  })
  .strict();

export const rolloutBackendSchema = z
  .union([z.object({ kind: z.literal('in-process').describe('Sample in the trainer\'s own engine.') }).strict(), engineServerSchema])
  .describe('Where training rollouts are sampled. in-process (default): the trainer\'s own engine. vllm / sglang: a fleet of inference servers, sent token ids and each agent\'s LoRA adapter (written in the PEFT layout after each update, loaded under a versioned name); old log-probs are still recomputed by the trainer, and the servers\' are reported as rollout/mismatch_kl. Validation and warm start stay in process; a warm-started base is sent to sglang servers with /update_weights_from_disk (vllm refuses a warm start). docs/inference-engines.md.');
export type RolloutBackendConfig = z.output<typeof rolloutBackendSchema>;

export const rolloutSchema = z
  .object({
    weights: z
      .enum(rolloutWeightKinds)
      .default('fp32')
      .describe(
        'Weights training rollouts sample with. fp16 (GPU execution providers only: webgpu, cuda, or auto on a GPU): the fused decode graph in float16 with float16 copies of the fp32 weights (LoRA merged), remade after each update; training and the optimizer stay fp32. int8/int4: every projection and the LM head quantized block-wise (ONNX Runtime MatMulNBits, LoRA merged in first), re-quantized after each update; faster decoding of a slightly different policy. PPO old log-probs stay those of the fp32 policy; the gap is reported as rollout/mismatch_kl. Validation always decodes the fp32 policy.',
      ),
    fusedDecode: z
      .boolean()
      .default(false)
      .describe('Decode fp32 (validation, warm-start play, fp32 rollouts) with the fused graph: ONNX Runtime RotaryEmbedding and SkipSimplifiedLayerNormalization kernels and the weights (LoRA merged) baked in so ONNX Runtime prepacks them, rebuilt after each update; fewer kernels per token, the same numbers to ~1e-5. fp16, int8 and int4 rollouts always use it.'),
    blockSize: z
      .union([z.literal(16), z.literal(32), z.literal(64), z.literal(128)])
      .default(128)
      .describe(
        'Values of a weight row that share one quantization scale (int8/int4). Smaller blocks follow the weights more closely and decode more slowly: on the flagship int4 with blocks of 128 had 19% more weight error than blocks of 32 but sampled as close to the fp32 policy (rollout/mismatch_kl 1.8–5.4e-3 per token against 1.9–4.9e-3; bench/engine/rollout-mismatch.ts), and decoded faster at every model size measured.',
      ),
    backend: rolloutBackendSchema.prefault({ kind: 'in-process' }),
  })
  .strict()
  .describe('How training rollouts decode: weight precision and kernels, and where they run.');
export type RolloutConfig = z.output<typeof rolloutSchema>;

/** The shapes of a code dataset's records (server/envs/code/code-dataset.ts reads them); auto tells them apart by their fields. */
export const codeDatasetFormats = ['auto', 'apps', 'code-contests', 'livecodebench'] as const;

export const envDatasetSchema = z
  .object({
    path: z
      .string()
      .min(1)
      .max(sizeLimits.pathLength)
      .describe("A JSONL (.jsonl, .ndjson) or Parquet (.parquet) file of problems, relative to this config file's folder; nothing is downloaded. The code environment reads APPS, CodeContests and LiveCodeBench records; errors name the file and the line or row, never its content."),
    format: z.enum(codeDatasetFormats).default('auto').describe("The records' shape: apps, code-contests, livecodebench, or auto (default: told apart by each record's fields)."),
    maxTasks: z.int().min(3).max(100_000).default(10_000).describe('Problems read from the file, in file order, before the split (records without stdin tests or without a Python solution are skipped and do not count). 3 to 100000.'),
    validationTasks: z.int().min(1).max(10_000).default(50).describe('Problems held out for validation (training.validationEpisodes plays them in turn). 1 to 10000.'),
    testTasks: z.int().min(1).max(10_000).default(50).describe('Problems held out for the test result, apart from validation (training.testEpisodes plays them in turn). 1 to 10000.'),
    splitSeed: z.int().min(0).max(2 ** 31 - 1).default(0).describe("Seed of the shuffle that splits the problems into train, validation and test. Independent of the run's seed, so runs with different seeds hold out the same problems."),
    maxTests: z.int().min(1).max(64).default(16).describe('Tests kept per problem (the coder is scored on the first 4). 1 to 64.'),
    tests: z.enum(['public', 'private', 'generated']).default('private').describe('CodeContests: which tests a problem is scored on (falling back to the others when it has none), as the reference trains on private tests and evaluates on public ones.'),
  })
  .strict()
  .describe('Tasks from a dataset file instead of generated ones, split by splitSeed into train, validation and test problems. Only the code environment reads one.');
export type EnvDatasetConfig = z.output<typeof envDatasetSchema>;

/** Environments that take their tasks from `env.dataset`. */
export const datasetEnvironments: readonly EnvironmentName[] = ['code'];

/** How model-written code runs: inside bubblewrap (the default), or on the host with limits only. */
export const sandboxModes = ['bubblewrap', 'unsandboxed'] as const;

/**
 * Limits on one run of model-written code. Every bound has a ceiling, so no config can ask for
 * more than one program may take of the machine.
 */
export const sandboxLimitsSchema = z
  .object({
    wallMs: z.int().min(100).max(120_000).default(5000).describe('Wall-clock limit of one run, in milliseconds; past it the whole process group is killed (status timeout). 100 to 120000.'),
    cpuSeconds: z.int().min(1).max(120).default(5).describe('CPU seconds one run may use (RLIMIT_CPU); past it the run is killed (status timeout). 1 to 120.'),
    memoryMb: z.int().min(64).max(8192).default(512).describe('Address space of one run in MiB (RLIMIT_AS): allocations past it fail (Python raises MemoryError). 64 to 8192.'),
    processes: z.int().min(1).max(256).default(16).describe('Processes and threads one program may have at once (RLIMIT_NPROC): a fork bomb stops there. In bubblewrap each program counts only its own (its user namespace); unsandboxed, every program of the host user that runs them counts together. 1 to 256.'),
    fileBytes: z.int().min(0).max(64 * 1024 * 1024).default(1024 * 1024).describe('Largest file one run may write, in bytes (RLIMIT_FSIZE), in its private temporary folder. 0 to 67108864.'),
    openFiles: z.int().min(16).max(1024).default(64).describe('File descriptors one run may hold open (RLIMIT_NOFILE). 16 to 1024.'),
    outputBytes: z.int().min(1024).max(4 * 1024 * 1024).default(64 * 1024).describe('Bytes of stdout plus stderr kept from one run; a run that writes more is killed (status output-limit) and its output cut there. 1024 to 4194304.'),
  })
  .strict()
  .describe('Limits on one run of model-written code.');
export type SandboxLimits = z.output<typeof sandboxLimitsSchema>;

export const sandboxSchema = z
  .object({
    mode: z
      .enum(sandboxModes)
      .default('bubblewrap')
      .describe(
        'Where model-written code runs. bubblewrap (default): in a bubblewrap sandbox with no network, read-only system folders, a private temporary folder and nothing of the workspace or home folder, under the limits below; a machine where bubblewrap cannot start refuses the run and says why (troupe doctor checks it). unsandboxed: as a plain child process on this machine with the same limits but no isolation: the code can read and write your files and use the network. Only for machines that are themselves disposable; every run warns.',
      ),
    concurrency: z.int().min(1).max(64).optional().describe('Programs run at once across all environments and branches of a step. Default: the number of CPU cores.'),
    limits: sandboxLimitsSchema.prefault({}),
  })
  .strict()
  .describe('The sandbox that runs model-written code (math tool agents, coders and testers). Only used by environments whose agents write code.');
export type SandboxConfig = z.output<typeof sandboxSchema>;

/** The config's structure; `experimentConfigSchema` adds the cross-field rules. */
const experimentConfigShape = z
  .object({
    $schema: z.string().max(sizeLimits.pathLength).optional().describe('Path or URL of the JSON Schema editors validate this file against (configs/schema.json). Ignored by Troupe.'),
    name: z.string().min(1).max(200).describe('Name of the experiment, shown in the run list and on the dashboard. At most 200 characters.'),
    description: z.string().max(sizeLimits.descriptionLength).optional().describe('What this experiment is for (free text, at most 10000 characters).'),
    seed: z
      .int()
      .min(0)
      .default(1)
      .describe('Seed of everything random in the run: initialisation, demonstrations, the training tasks drawn, sampling. Validation tasks do not depend on it.'),
    env: z
      .object({
        name: z.enum(environmentNames).describe('The environment: plan-path (grid path finding), sudoku, sokoban, tic-tac-toe (self-play), math (a tool agent whose Python runs in the sandbox, and a reasoner), code (a coder whose program and a tester whose test both run in the sandbox), or hanabi (the cooperative card game, players p1..pN).'),
        options: boundedRecord(z.record(z.string().max(64), z.unknown()))
          .default({})
          .describe("The environment's options (size, maxTurns, variant, ...), checked by the environment when the run starts; unset options take its defaults. At most 64 keys."),
        promptStyle: z
          .enum(promptStyles)
          .default('terse')
          .describe("How agents are prompted. terse (default): the short state and answer text the embedded character-level model is trained on. chat: for pretrained instruction-tuned models: each agent gets its role, the rules and the state in words, reasons freely and ends with a final line '#### <answer>' (e.g. #### [\"U\",\"R\"]), read tolerantly."),
        dataset: envDatasetSchema.optional(),
      })
      .strict()
      .describe('The task generator and agent workflow to train on.'),
    specialization: z
      .enum(specializationLevels)
      .describe('How agents map to weights. L0: a single agent. L1: one policy shared by all agents, roles differ only by prompt. L2: one base model with a LoRA adapter per agent. L3: a separate model per agent (sizes may differ).'),
    models: boundedRecord(z.record(configIdSchema, modelSourceSchema))
      .prefault({ base: { preset: 'default' } })
      .describe('Base models by id. Default: {"base": {"preset": "default"}}, the embedded ~1M-parameter model. At most 64.'),
    policies: boundedRecord(z.record(configIdSchema, policySchema)).describe('Trainable policies by id. Each trains only on the samples of the agents routed to it. At most 64.'),
    router: boundedRecord(z.record(configIdSchema, configIdSchema))
      .describe("Which policy acts for each agent (agent id -> policy id), at most 64. The keys must be exactly the environment's agents: tool and plan for a puzzle's team variant, solo for a single variant, x and o for tic-tac-toe, tool and reasoner for math's team, coder and tester for code's team (coder alone for its single variant), p1..pN for hanabi."),
    algorithm: algorithmSchema.prefault({}),
    optimizer: optimizerSchema.prefault({}).describe('AdamW for the RL updates; each policy has its own optimizer state.'),
    warmStart: warmStartSchema.prefault({}),
    training: trainingSchema.prefault({}),
    engine: engineSchema.prefault({}),
    rollout: rolloutSchema.prefault({}),
    sandbox: sandboxSchema.prefault({}),
  })
  .strict();

export type ExperimentConfig = z.output<typeof experimentConfigShape>;

/** The whole config: structure, then (once the structure is valid) `checkExperimentConfig`. */
export const experimentConfigSchema = experimentConfigShape
  .superRefine((config, ctx) => {
    for (const issue of checkExperimentConfig(config)) ctx.addIssue({ code: 'custom', path: [...issue.path], message: issue.message });
  })
  .meta({ title: 'Troupe experiment config' });

// ---------------------------------------------------------------------------------------------
// Rules across fields

const levelNames: Record<SpecializationLevel, string> = {
  L0: 'L0 (single agent)',
  L1: 'L1 (one shared policy)',
  L2: 'L2 (a LoRA adapter per agent)',
  L3: 'L3 (a model per agent)',
};

/** Cross-field rules of a structurally valid config; an empty list means it is consistent. */
export function checkExperimentConfig(c: ExperimentConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const add = (path: ConfigIssue['path'], message: string): void => void issues.push({ path, message });
  const modelIds = Object.keys(c.models);
  const policyIds = Object.keys(c.policies);
  const routes = Object.entries(c.router);
  const level = levelNames[c.specialization];

  if (c.env.dataset !== undefined && !datasetEnvironments.includes(c.env.name)) add(['env', 'dataset'], `${c.env.name} generates its tasks and reads no dataset file; environments that do: ${quoteList(datasetEnvironments)}`);

  // References: router → policies → models, and nothing declared but unused (usually a typo).
  // Object.hasOwn, not `in`: "constructor" is a valid id and `in` would find it on the prototype.
  if (routes.length === 0) add(['router'], 'must map at least one agent to a policy');
  for (const [agent, policyId] of routes) {
    if (!Object.hasOwn(c.policies, policyId)) add(['router', agent], `names no declared policy${didYouMean(policyId, policyIds)}; declared policies: ${quoteList(policyIds) || 'none'}`);
  }
  const routed = new Set(Object.values(c.router));
  for (const [id, p] of Object.entries(c.policies)) {
    if (!Object.hasOwn(c.models, p.model)) add(['policies', id, 'model'], `names no declared model${didYouMean(p.model, modelIds)}; declared models: ${quoteList(modelIds) || 'none'}`);
    if (!routed.has(id)) add(['policies', id], `policy ${JSON.stringify(id)} is not used: no agent in "router" maps to it`);
  }
  const used = new Set(Object.values(c.policies).map((p) => p.model));
  for (const id of modelIds) {
    if (!used.has(id)) add(['models', id], `model ${JSON.stringify(id)} is not used by any policy`);
  }

  // Specialization levels: L0 one agent, L1 one shared policy, L2 a LoRA adapter per agent on a shared base, L3 a model per agent.
  const lora = Object.entries(c.policies).filter(([, p]) => p.lora !== undefined);
  const noLora = Object.entries(c.policies).filter(([, p]) => p.lora === undefined);
  switch (c.specialization) {
    case 'L0':
      if (routes.length > 1) add(['router'], `${level} needs exactly one agent, got ${routes.length} (${quoteList(routes.map(([a]) => a))})`);
      if (policyIds.length > 1) add(['policies'], `${level} needs exactly one policy, got ${policyIds.length} (${quoteList(policyIds)})`);
      break;
    case 'L1':
      if (policyIds.length > 1) add(['policies'], `${level} needs exactly one policy for all agents, got ${policyIds.length} (${quoteList(policyIds)})`);
      for (const [id] of lora) add(['policies', id, 'lora'], `${level} trains the shared model itself and takes no LoRA adapter (L2 gives each agent an adapter)`);
      break;
    case 'L2': {
      for (const [id] of noLora) add(['policies', id], `${level} needs a "lora" adapter in every policy`);
      const [first, ...rest] = Object.entries(c.policies);
      for (const [id, p] of rest) {
        if (first !== undefined && p.model !== first[1].model) {
          add(['policies', id, 'model'], `${level} puts every adapter on one base model: expected the model of policy ${JSON.stringify(first[0])}`);
        }
      }
      checkOnePolicyPerAgent(c, level, add);
      break;
    }
    case 'L3': {
      for (const [id] of lora) add(['policies', id, 'lora'], `${level} trains each agent's own model and takes no LoRA adapter (use L2 for adapters)`);
      checkOnePolicyPerAgent(c, level, add);
      const owner = new Map<string, string>();
      for (const [id, p] of Object.entries(c.policies)) {
        const other = owner.get(p.model);
        if (other !== undefined) add(['policies', id, 'model'], `${level} needs a separate model per policy, but this one is already used by policy ${JSON.stringify(other)}`);
        else owner.set(p.model, id);
      }
      break;
    }
  }

  // ONNX Runtime's CPU provider has few float16 kernels on x86 (MatMul among the missing).
  if (c.rollout.weights === 'fp16' && c.engine.executionProvider === 'cpu') {
    add(['rollout', 'weights'], 'fp16 rollout weights need a GPU execution provider, but engine.executionProvider is "cpu"; set it to "webgpu", "cuda" or "auto", or use rollout.weights "fp32", "int8" or "int4" on the CPU');
  }

  // An engine fleet samples with the base it was started with and the adapters it is sent.
  if (c.rollout.backend.kind !== 'in-process') {
    const kind = c.rollout.backend.kind;
    for (const [id] of noLora) add(['policies', id, 'lora'], `rollout.backend "${kind}" sends each policy's LoRA adapter to the servers; full-weight training needs rollout.backend "in-process"`);
    if (c.warmStart.enabled && kind === 'vllm') add(['warmStart', 'enabled'], 'rollout.backend "vllm": a warm start changes the base model, and vLLM cannot replace its base weights over HTTP (no /update_weights_from_disk outside VLLM_SERVER_DEV_MODE); turn the warm start off, or use "sglang" (which Troupe\'s own endpoint also speaks)');
    if (c.algorithm.distinctBranches) add(['algorithm', 'distinctBranches'], `rollout.backend "${kind}" has no sampling without replacement; set it to false`);
  }

  if (c.algorithm.name === 'ppo' && c.algorithm.invalidAdvantage !== null) {
    add(['algorithm', 'invalidAdvantage'], 'sets invalid acts apart from their group\'s baseline; ppo has no groups (its baseline is the value head), so set it to null');
  }
  if (c.algorithm.distinctBranches && c.algorithm.name !== 'at-grpo') {
    add(['algorithm', 'distinctBranches'], `applies to at-grpo's tree nodes; ${c.algorithm.name} samples independent rollouts, so set it to false or use "name": "at-grpo"`);
  }

  const cur = c.algorithm.curriculum;
  if (cur.kind !== 'uniform' && cur.candidates < c.algorithm.envsPerStep) {
    add(['algorithm', 'curriculum', 'candidates'], `must be at least algorithm.envsPerStep for ${cur.kind}`);
  }

  // Lengths and intervals.
  const t = c.training;
  if (t.validateEvery > t.steps) add(['training', 'validateEvery'], 'must be at most training.steps');
  if (t.checkpointEvery > t.steps) add(['training', 'checkpointEvery'], 'must be at most training.steps');
  const s = c.optimizer.schedule;
  if (s.kind === 'cosine' && s.warmupSteps >= s.totalSteps) {
    add(['optimizer', 'schedule', 'warmupSteps'], 'must be less than optimizer.schedule.totalSteps');
  }
  for (const [id, m] of Object.entries(c.models)) {
    if (m.config !== undefined && c.algorithm.maxNewTokens >= m.config.maxSequenceLength) {
      add(['algorithm', 'maxNewTokens'], `must be less than the maxSequenceLength of model ${JSON.stringify(id)}, which also holds the prompt`);
    }
  }
  return issues;
}

/** L2 and L3 give every agent a policy of its own. */
function checkOnePolicyPerAgent(c: ExperimentConfig, level: string, add: (path: ConfigIssue['path'], message: string) => void): void {
  const first = new Map<string, string>();
  for (const [agent, policyId] of Object.entries(c.router)) {
    const other = first.get(policyId);
    if (other !== undefined) add(['router', agent], `${level} gives each agent its own policy, but ${JSON.stringify(agent)} shares its policy with ${JSON.stringify(other)}`);
    else first.set(policyId, agent);
  }
}

/**
 * The router against the environment's agents (in turn order, e.g. ['tool', 'plan']): every agent
 * must have a policy and every routed agent must exist. The server calls this with the agents of an
 * environment created from `config.env`, since they depend on its options (a puzzle's variant).
 */
export function checkAgainstAgents(c: ExperimentConfig, agents: readonly string[]): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const env = c.env.name;
  const listed = quoteList(agents);
  for (const agent of Object.keys(c.router)) {
    if (!agents.includes(agent)) issues.push({ path: ['router', agent], message: `unknown agent ${JSON.stringify(agent)}${didYouMean(agent, agents)}; ${env} has agents ${listed}` });
  }
  const missing = agents.filter((a) => !Object.hasOwn(c.router, a));
  if (missing.length > 0) issues.push({ path: ['router'], message: `no policy for ${missing.length === 1 ? 'agent' : 'agents'} ${quoteList(missing)} of ${env} (its agents: ${listed})` });
  if (c.specialization === 'L0' && agents.length !== 1) {
    issues.push({ path: ['specialization'], message: `L0 trains a single agent, but ${env} has ${agents.length} agents (${listed}); for a puzzle, set env.options.variant to "single"` });
  }
  if (c.specialization !== 'L0' && agents.length === 1) {
    issues.push({ path: ['specialization'], message: `${c.specialization} is for several agents, but ${env} has one (${listed}); use L0` });
  }
  return issues;
}

// ---------------------------------------------------------------------------------------------
// Parsing

export type ExperimentConfigResult = { success: true; config: ExperimentConfig } | { success: false; issues: ConfigIssue[] };

/** Validates a parsed JSON value without throwing: the config, or every issue (for diagnostics). */
export function safeParseExperimentConfig(json: unknown): ExperimentConfigResult {
  const r = experimentConfigSchema.safeParse(json);
  if (r.success) return { success: true, config: r.data };
  return { success: false, issues: issuesFromZod(r.error, experimentConfigSchema, json) };
}

/**
 * Validates a parsed JSON value, throwing one `ConfigError` that lists every issue as
 * `source: path: message`. `source` names the origin (usually the file path).
 */
export function parseExperimentConfig(json: unknown, source: string): ExperimentConfig {
  const r = safeParseExperimentConfig(json);
  if (!r.success) throw new ConfigError(source, r.issues);
  return r.config;
}

/**
 * The JSON Schema of the config file (draft-07, which VS Code's JSON support handles fully), for
 * `configs/schema.json`. It describes the input: fields with defaults are optional.
 */
export function experimentConfigJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(experimentConfigSchema, {
    target: 'draft-07',
    io: 'input',
    // z.int() emits the safe-integer range as bounds; they say nothing to a reader, so drop them.
    override: ({ jsonSchema: s }) => {
      if (s.maximum === Number.MAX_SAFE_INTEGER) delete s.maximum;
      if (s.minimum === Number.MIN_SAFE_INTEGER) delete s.minimum;
    },
  });
}

/** `configs/schema.json` exactly as the generator writes it. */
export function experimentConfigJsonSchemaText(): string {
  return `${JSON.stringify(experimentConfigJsonSchema(), null, 2)}\n`;
}
