/**
 * The inference-engine HTTP APIs Troupe speaks, both ways: the OpenAI-compatible endpoint Troupe's
 * engine serves (`troupe serve-openai`, server/openai) and the rollout backend that drives vLLM or
 * SGLang servers (server/rl/engine-fleet.ts). Declared once here, so that the server parses what
 * the client sends with the same schemas the client parses the server's answers with.
 *
 * Fields follow vLLM's `entrypoints/openai/protocol.py` (OpenAI's completions and chat completions
 * plus vLLM's extensions: `top_k`, `stop_token_ids`, `ignore_eos`, `return_token_ids`,
 * `return_tokens_as_token_ids`, `prompt_logprobs`, the LoRA load/unload requests) and SGLang's
 * native `/generate` (`io_struct.py` GenerateReqInput, `sampling_params.py`). Requests drop
 * fields they do not declare, as both servers do; fields that would change the result and that
 * Troupe's engine does not implement are declared so that a non-default value is refused by name
 * (`unsupportedCompletionFields`) instead of silently ignored.
 */
import { z } from 'zod';

/** The most prompts one completions request may carry. */
export const MAX_PROMPTS_PER_REQUEST = 4096;
/** The most tokens one prompt may have. */
export const MAX_PROMPT_TOKENS = 1 << 20;
/** The most choices per prompt (`n`). */
export const MAX_CHOICES = 256;
/** The most tokens one choice may generate. */
export const MAX_NEW_TOKENS = 1 << 16;

const tokenId = z.int().min(0).max(0x7fffffff);
const tokenIds = z.array(tokenId).min(1).max(MAX_PROMPT_TOKENS);
const text = z.string().max(8 * MAX_PROMPT_TOKENS);

/** Sampling settings both request kinds share (OpenAI names, vLLM's extensions). */
const samplingFields = {
  /** Choices per prompt. */
  n: z.int().min(1).max(MAX_CHOICES).default(1),
  /** Tokens to generate at most (OpenAI's default for completions: 16). */
  max_tokens: z.int().min(1).max(MAX_NEW_TOKENS).nullish(),
  /** Softmax temperature; 0 is greedy. */
  temperature: z.number().min(0).max(100).nullish(),
  /** Nucleus sampling mass (1 = off). */
  top_p: z.number().gt(0).max(1).nullish(),
  /** vLLM: keep the k most likely tokens; -1 or 0 = off. */
  top_k: z.int().min(-1).max(1 << 20).nullish(),
  /** Sampling seed: the same seed, prompts and settings give the same tokens. */
  seed: z.int().min(-(2 ** 53) + 1).max(2 ** 53 - 1).nullish(),
  /** vLLM: ids that end a choice (in addition to the model's end-of-sequence ids). */
  stop_token_ids: z.array(tokenId).max(1024).nullish(),
  /** vLLM: do not stop on the model's end-of-sequence ids. */
  ignore_eos: z.boolean().nullish(),
  /** Server-sent events, one chunk per token. */
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  // Declared to be refused when set (see `unsupportedCompletionFields`).
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  repetition_penalty: z.number().nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  min_p: z.number().nullish(),
  user: z.string().max(256).nullish(),
};

/** `POST /v1/completions`. */
export const completionRequestSchema = z.object({
  model: z.string().min(1).max(256),
  /** Text, texts, token ids, or one token-id list per prompt. */
  prompt: z.union([text, z.array(text).min(1).max(MAX_PROMPTS_PER_REQUEST), tokenIds, z.array(tokenIds).min(1).max(MAX_PROMPTS_PER_REQUEST)]),
  ...samplingFields,
  /** Log-probs of each sampled token; the number is how many alternatives to add per token (`logprobs.top_logprobs`: the sampled token, then the k most likely). */
  logprobs: z.int().min(0).max(20).nullish(),
  /** vLLM: log-probs of the prompt's tokens (the first is null); the number of alternatives (0 only). */
  prompt_logprobs: z.int().min(0).max(20).nullish(),
  /** vLLM >= 0.10.2: `choices[].token_ids` and `choices[].prompt_token_ids`. */
  return_token_ids: z.boolean().nullish(),
  /** vLLM: `logprobs.tokens` entries read `token_id:<id>` (older servers' way to return ids). */
  return_tokens_as_token_ids: z.boolean().nullish(),
  echo: z.boolean().nullish(),
  best_of: z.int().nullish(),
  suffix: z.string().nullish(),
  /**
   * Troupe's extension (vLLM and SGLang ignore unknown fields): the index of this request's first
   * choice in a larger batch split across servers. Each choice samples from the stream of
   * (seed, its index), so a batch split over a fleet samples what it would in one request.
   */
  troupe_row_offset: z.int().min(0).max(2 ** 31 - 1).nullish(),
});
export type CompletionRequest = z.output<typeof completionRequestSchema>;

const chatMessageSchema = z.object({
  role: z.enum(['system', 'user', 'assistant', 'developer']),
  /** Text, or OpenAI's content parts (text parts only). */
  content: z.union([text, z.array(z.object({ type: z.literal('text'), text })).max(256)]),
});

/** `POST /v1/chat/completions`. */
export const chatCompletionRequestSchema = z.object({
  model: z.string().min(1).max(256),
  messages: z.array(chatMessageSchema).min(1).max(1024),
  ...samplingFields,
  /** OpenAI's newer name for max_tokens. */
  max_completion_tokens: z.int().min(1).max(MAX_NEW_TOKENS).nullish(),
  /** Log-probs of each sampled token in `choices[].logprobs.content`. */
  logprobs: z.boolean().nullish(),
  /** Alternatives per token in `logprobs.content[].top_logprobs` (the k most likely); needs `logprobs: true`. */
  top_logprobs: z.int().min(0).max(20).nullish(),
  return_token_ids: z.boolean().nullish(),
  tools: z.array(z.unknown()).nullish(),
  response_format: z.unknown().optional(),
});
export type ChatCompletionRequest = z.output<typeof chatCompletionRequestSchema>;

/**
 * Set fields that would change the result and that Troupe's engine does not implement, each with
 * what to do instead. An empty list: the request can be served as asked.
 */
export function unsupportedCompletionFields(r: CompletionRequest | ChatCompletionRequest): Array<{ field: string; message: string }> {
  const out: Array<{ field: string; message: string }> = [];
  const add = (field: string, message: string) => void out.push({ field, message });
  if (r.stop != null && (typeof r.stop === 'string' || r.stop.length > 0)) add('stop', 'stop strings are not supported; use stop_token_ids');
  if (r.presence_penalty) add('presence_penalty', 'penalties are not supported; leave it 0');
  if (r.frequency_penalty) add('frequency_penalty', 'penalties are not supported; leave it 0');
  if (r.repetition_penalty != null && r.repetition_penalty !== 1) add('repetition_penalty', 'penalties are not supported; leave it 1');
  if (r.logit_bias && Object.keys(r.logit_bias).length > 0) add('logit_bias', 'logit_bias is not supported');
  if (r.min_p) add('min_p', 'min_p is not supported; leave it 0');
  if ('prompt' in r) {
    if (r.echo) add('echo', 'echo is not supported');
    if (r.best_of != null && r.best_of !== r.n) add('best_of', 'best_of is not supported');
    if (r.suffix) add('suffix', 'suffix is not supported');
  } else {
    if (r.top_logprobs && !r.logprobs) add('top_logprobs', 'needs logprobs: true');
    if (r.tools && r.tools.length > 0) add('tools', 'tool calls are not supported');
  }
  return out;
}

/** One entry of vLLM's `prompt_logprobs`: token id (as a key) → its log-prob and rank. */
const logprobEntrySchema = z.object({ logprob: z.number(), rank: z.int().nullish(), decoded_token: z.string().nullish() });

export const completionLogprobsSchema = z.object({
  text_offset: z.array(z.int()),
  token_logprobs: z.array(z.number().nullable()),
  tokens: z.array(z.string()),
  top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullish(),
});

export const usageSchema = z.object({ prompt_tokens: z.int(), completion_tokens: z.int().nullish(), total_tokens: z.int() });

export const completionChoiceSchema = z.object({
  index: z.int(),
  text: z.string(),
  logprobs: completionLogprobsSchema.nullish(),
  /** 'stop' (a stop id, end of sequence) or 'length' (max_tokens reached). */
  finish_reason: z.string().nullish(),
  stop_reason: z.union([z.int(), z.string()]).nullish(),
  token_ids: z.array(z.int()).nullish(),
  prompt_token_ids: z.array(z.int()).nullish(),
  prompt_logprobs: z.array(z.record(z.string(), logprobEntrySchema).nullable()).nullish(),
});
export type CompletionChoice = z.output<typeof completionChoiceSchema>;

export const completionResponseSchema = z.object({
  id: z.string(),
  object: z.literal('text_completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(completionChoiceSchema),
  usage: usageSchema.nullish(),
});
export type CompletionResponse = z.output<typeof completionResponseSchema>;

export const chatTokenLogprobSchema = z.object({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.int()).nullable(),
  top_logprobs: z.array(z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.int()).nullable() })),
});

export const chatChoiceSchema = z.object({
  index: z.int(),
  message: z.object({ role: z.literal('assistant'), content: z.string().nullable() }),
  logprobs: z.object({ content: z.array(chatTokenLogprobSchema).nullable() }).nullish(),
  finish_reason: z.string().nullish(),
  stop_reason: z.union([z.int(), z.string()]).nullish(),
  token_ids: z.array(z.int()).nullish(),
});

export const chatCompletionResponseSchema = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(chatChoiceSchema),
  usage: usageSchema.nullish(),
  prompt_token_ids: z.array(z.int()).nullish(),
});
export type ChatCompletionResponse = z.output<typeof chatCompletionResponseSchema>;

/** `GET /v1/models`: vLLM lists each LoRA adapter with its base as `parent`. */
export const modelListSchema = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      id: z.string(),
      object: z.literal('model'),
      created: z.int(),
      owned_by: z.string(),
      root: z.string().nullish(),
      parent: z.string().nullable().optional(),
      max_model_len: z.int().nullish(),
    }),
  ),
});
export type ModelList = z.output<typeof modelListSchema>;

const loraNameSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z0-9._@:/-]+$/, 'letters, digits and . _ @ : / - only');

/** vLLM `POST /v1/load_lora_adapter` (SGLang's `/load_lora_adapter` adds `pinned`). */
export const loadLoraRequestSchema = z.object({
  lora_name: loraNameSchema,
  /** A PEFT folder: adapter_config.json + adapter_model.safetensors. */
  lora_path: z.string().min(1).max(4096),
  load_inplace: z.boolean().nullish(),
  pinned: z.boolean().nullish(),
});

/** vLLM `POST /v1/unload_lora_adapter`. */
export const unloadLoraRequestSchema = z.object({ lora_name: loraNameSchema, lora_int_id: z.int().nullish() });

/**
 * SGLang `POST /update_weights_from_disk` (`UpdateWeightFromDiskReqInput`): replace the served base
 * model's weights with those of the model folder `model_path`, keeping the adapters loaded on it.
 * The fields past `weight_version` steer SGLang's scheduler and CUDA graphs; they are accepted here
 * with the meaning they can have on Troupe's engine (none but `abort_all_requests`, which Troupe
 * does not do: requests in flight finish on the old weights).
 */
export const updateWeightsFromDiskRequestSchema = z.object({
  model_path: z.string().min(1).max(4096),
  load_format: z.string().max(64).nullish(),
  abort_all_requests: z.boolean().nullish(),
  weight_version: z.string().min(1).max(256).nullish(),
  is_async: z.boolean().nullish(),
  torch_empty_cache: z.boolean().nullish(),
  keep_pause: z.boolean().nullish(),
  recapture_cuda_graph: z.boolean().nullish(),
  token_step: z.int().min(0).nullish(),
  flush_cache: z.boolean().nullish(),
  /** Troupe's extension: which served base to update where the server holds several (SGLang holds one). */
  troupe_model: z.string().min(1).max(256).nullish(),
});
export type UpdateWeightsFromDiskRequest = z.output<typeof updateWeightsFromDiskRequestSchema>;

/** SGLang's answer to `/update_weights_from_disk` (`UpdateWeightFromDiskReqOutput`): 200 on success, 400 with `success: false` otherwise. */
export const updateWeightsFromDiskResponseSchema = z.object({ success: z.boolean(), message: z.string(), num_paused_requests: z.int().nullish() });

/** SGLang `GET /get_weight_version` (and the `weight_version` of `GET /model_info` in later versions). */
export const weightVersionResponseSchema = z.object({ weight_version: z.string().nullable() });

/** OpenAI's error body (vLLM >= 0.8 answers this form; older ones a flat `{object: "error", message, ...}`). */
export const errorResponseSchema = z.union([
  z.object({ error: z.object({ message: z.string(), type: z.string(), param: z.string().nullish(), code: z.union([z.int(), z.string()]).nullish() }) }),
  z.object({ object: z.literal('error'), message: z.string(), type: z.string(), param: z.string().nullish(), code: z.int() }),
]);

/** The message of an error body in either form (or SGLang's `{success: false, message}`), or null when the body is not one. */
export function errorMessage(body: unknown): string | null {
  const e = errorResponseSchema.safeParse(body);
  if (e.success) return 'error' in e.data ? e.data.error.message : e.data.message;
  const failed = updateWeightsFromDiskResponseSchema.safeParse(body);
  return failed.success && !failed.data.success ? failed.data.message : null;
}

// ---------------------------------------------------------------------------------------------
// SGLang's native API

/** SGLang `sampling_params` (the subset with a meaning here). */
export const sglangSamplingSchema = z.object({
  max_new_tokens: z.int().min(0).max(MAX_NEW_TOKENS).nullish(),
  temperature: z.number().min(0).max(100).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.int().min(-1).max(1 << 20).nullish(),
  stop_token_ids: z.array(tokenId).max(1024).nullish(),
  ignore_eos: z.boolean().nullish(),
  n: z.int().min(1).max(MAX_CHOICES).nullish(),
  /** SGLang >= 0.4.7: per-request sampling seed. */
  sampling_seed: z.int().nullish(),
});

/** SGLang `POST /generate` with token ids (text prompts go to the OpenAI routes). */
export const sglangGenerateRequestSchema = z.object({
  input_ids: z.union([tokenIds, z.array(tokenIds).min(1).max(MAX_PROMPTS_PER_REQUEST)]),
  /** One object for every prompt, or one per prompt (batch form). */
  sampling_params: z.union([sglangSamplingSchema, z.array(sglangSamplingSchema).min(1).max(MAX_PROMPTS_PER_REQUEST)]).default({}),
  return_logprob: z.boolean().nullish(),
  /** With `return_logprob`: the k most likely tokens at each position in `meta_info.output_top_logprobs`. */
  top_logprobs_num: z.int().min(0).max(20).nullish(),
  logprob_start_len: z.int().min(-1).nullish(),
  /** The LoRA adapter's name (loaded by `/load_lora_adapter`), or one per prompt. */
  lora_path: z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(MAX_PROMPTS_PER_REQUEST)]).nullish(),
  stream: z.boolean().nullish(),
  /**
   * Troupe's extensions (SGLang ignores them): the seed of the whole batch and the index of this
   * request's first row in it, as `completionRequestSchema.troupe_row_offset`. SGLang itself
   * samples each row from its own `sampling_seed`.
   */
  troupe_seed: z.int().min(0).max(2 ** 32 - 1).nullish(),
  troupe_row_offset: z.int().min(0).max(2 ** 31 - 1).nullish(),
});
export type SglangGenerateRequest = z.output<typeof sglangGenerateRequestSchema>;

/** One output of `/generate`: the batch form answers an array of these, in request order. */
export const sglangGenerateOutputSchema = z.object({
  text: z.string(),
  output_ids: z.array(z.int()),
  meta_info: z.object({
    id: z.string(),
    /** `{type: 'stop', matched: <id>}` or `{type: 'length', length: N}`. */
    finish_reason: z.object({ type: z.string(), matched: z.union([z.int(), z.string()]).nullish(), length: z.int().nullish() }).nullish(),
    prompt_tokens: z.int(),
    completion_tokens: z.int(),
    /** `[logprob, token id, text or null]` per generated token. */
    output_token_logprobs: z.array(z.tuple([z.number().nullable(), z.int(), z.string().nullable()])).nullish(),
    /** Per generated token, its k most likely tokens as `[logprob, token id, text or null]`, best first. */
    output_top_logprobs: z.array(z.array(z.tuple([z.number().nullable(), z.int(), z.string().nullable()])).nullable()).nullish(),
  }),
});
export type SglangGenerateOutput = z.output<typeof sglangGenerateOutputSchema>;
