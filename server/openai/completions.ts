/**
 * Serving one request: OpenAI completions and chat completions and SGLang's `/generate`, turned
 * into one `Policy.generate` call each (the trainer's own sampling) and back into the wire shapes
 * of `protocol/openai-api.ts`.
 *
 * Rows are laid out as the trainer lays out a tree node: prompt i's n choices are rows
 * i·n … i·n+n−1 (and choice index i·n+k, as vLLM numbers them), each sampling from the stream of
 * (seed, troupe_row_offset + row). So the same seed, prompts and settings give the same tokens,
 * whether the trainer samples in process or over HTTP, in one request or split over a fleet.
 */
import { randomBytes } from 'node:crypto';
import type { TextTokenizer } from '../models/folder-tokenizer.ts';
import type { Policy } from '../models/policy.ts';
import type { TopAlternatives } from '../runtime/generate.ts';
import type { ChatTurn } from '../models/tokenizer.ts';
import type {
  ChatCompletionRequest,
  ChatCompletionResponse,
  CompletionChoice,
  CompletionRequest,
  CompletionResponse,
  SglangGenerateOutput,
  SglangGenerateRequest,
} from '../protocol/openai-api.ts';
import type { BatchingGenerator } from './batching-generator.ts';
import { ModelRequestError } from './served-models.ts';

/** One sampled choice. */
export interface SampledChoice {
  readonly prompt: number;
  readonly tokens: Int32Array;
  readonly logprobs: Float32Array;
  readonly finish: 'stop' | 'length';
  /** The request's stop id that ended it (not an end-of-sequence id of the model), else null. */
  readonly stopReason: number | null;
  /** With `SampleJob.topLogprobs` k: the k most likely tokens at each position, best first. */
  readonly top: TopAlternatives | null;
}

/** One token of a choice as the engine samples it (streaming). */
export interface SampledToken {
  /** The choice index (prompt i's k-th sample is i·n + k). */
  readonly choice: number;
  readonly token: number;
  readonly logprob: number;
  /** Its k alternatives (ids and log-probs), or null. */
  readonly top: TopAlternatives | null;
  /** Set on the choice's last token: why it ended, as in `SampledChoice`. */
  readonly finish: 'stop' | 'length' | null;
  readonly stopReason: number | null;
}

export interface SampleJob {
  readonly prompts: readonly Int32Array[];
  readonly n: number;
  readonly maxNewTokens: number | null;
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  readonly seed: number | null;
  readonly firstRow: number;
  readonly stopTokenIds: readonly number[];
  readonly ignoreEos: boolean;
  /** Alternatives to report per token (0: none). */
  readonly topLogprobs: number;
}

/** Default `max_tokens` of the completions API (OpenAI's). */
const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

/**
 * Samples `n` choices per prompt with `policy` (joined with concurrent requests by `batching`), in
 * choice-index order. `onToken` receives each token as the engine samples it, before the result.
 * When `signal` aborts (the client left), the engine stops decoding the request's rows and the
 * promise rejects with `RequestCancelled`.
 */
export async function sample(
  policy: Policy,
  tok: TextTokenizer,
  job: SampleJob,
  defaultMaxTokens: number | 'rest',
  batching: BatchingGenerator,
  o: { readonly onToken?: (t: SampledToken) => void; readonly signal?: AbortSignal } = {},
): Promise<SampledChoice[]> {
  const onToken = o.onToken;
  const vocab = policy.config.vocabSize;
  const maxLen = policy.config.maxSequenceLength;
  const longest = Math.max(...job.prompts.map((p) => p.length));
  job.prompts.forEach((p) => {
    for (const id of p) if (id >= vocab) throw new ModelRequestError(`prompt: token ids must be below the model's vocabulary size ${vocab}`, 'prompt');
  });
  if (longest >= maxLen) throw new ModelRequestError(`prompt: ${longest} tokens leave no room in the model's context of ${maxLen}`, 'prompt');
  const maxNewTokens = job.maxNewTokens ?? (defaultMaxTokens === 'rest' ? maxLen - longest : defaultMaxTokens);
  if (longest + maxNewTokens > maxLen) throw new ModelRequestError(`max_tokens: the prompt (${longest} tokens) plus max_tokens (${maxNewTokens}) exceed the model's context of ${maxLen}`, 'max_tokens');
  const rows: Int32Array[] = [];
  for (const p of job.prompts) for (let k = 0; k < job.n; k++) rows.push(p);
  const stops = new Set(job.stopTokenIds);
  const eos = job.ignoreEos ? [] : tok.stopTokenIds;
  const stopReason = (token: number): number | null => (stops.has(token) && !eos.includes(token) ? token : null);
  const ends = new Set([...stops, ...eos]);
  const k = job.topLogprobs;
  const gen = await batching.generate(policy, {
    rows,
    maxNewTokens,
    sampling: { temperature: job.temperature, topP: job.topP, topK: job.topK },
    seed: job.seed === null ? randomBytes(4).readUInt32LE(0) : job.seed >>> 0,
    firstRow: job.firstRow,
    stopTokens: [...ends],
    padToken: tok.padTokenId,
    ...(k > 0 ? { topLogprobs: k } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
    ...(onToken
      ? {
          onStep: (s) =>
            s.rows.forEach((choice, i) => {
              const token = s.tokens[i]!;
              // Generation ends a row on a stop id, or at max_tokens (the batching generator cuts there).
              const finish = ends.has(token) ? 'stop' : s.n + 1 === maxNewTokens ? 'length' : null;
              const top = s.top ? { ids: s.top.ids.slice(i * k, (i + 1) * k), logprobs: s.top.logprobs.slice(i * k, (i + 1) * k) } : null;
              onToken({ choice, token, logprob: s.logprobs[i]!, top, finish, stopReason: finish === 'stop' ? stopReason(token) : null });
            }),
        }
      : {}),
  });
  return rows.map((_, j) => {
    const tokens = gen.tokens[j]!;
    const last = tokens.at(-1);
    const finish = gen.finish[j] === 'stop' ? 'stop' : 'length';
    return {
      prompt: Math.floor(j / job.n),
      tokens,
      logprobs: gen.logprobs[j]!,
      finish,
      stopReason: finish === 'stop' && last !== undefined ? stopReason(last) : null,
      top: gen.top?.[j] ?? null,
    };
  });
}

const topK = (k: number | null | undefined): number => (k == null || k < 0 ? 0 : k);
export const now = (): number => Math.floor(Date.now() / 1000);
export const requestId = (prefix: string): string => `${prefix}-${randomBytes(12).toString('hex')}`;

/** The prompts of a completions request as token ids. */
export function completionPrompts(r: CompletionRequest, tok: TextTokenizer): Int32Array[] {
  const p = r.prompt;
  if (typeof p === 'string') return [tok.encode(p)];
  if (p.length === 0) return [];
  if (typeof p[0] === 'number') return [Int32Array.from(p as number[])];
  if (typeof p[0] === 'string') return (p as string[]).map((t) => tok.encode(t));
  return (p as number[][]).map((ids) => Int32Array.from(ids));
}

export function completionJob(r: CompletionRequest, prompts: Int32Array[]): SampleJob {
  for (const [i, p] of prompts.entries()) if (p.length === 0) throw new ModelRequestError(`prompt: prompt ${i} is empty`, 'prompt');
  return {
    prompts,
    n: r.n,
    maxNewTokens: r.max_tokens ?? null,
    temperature: r.temperature ?? 1,
    topP: r.top_p ?? 1,
    topK: topK(r.top_k),
    seed: r.seed ?? null,
    firstRow: r.troupe_row_offset ?? 0,
    stopTokenIds: r.stop_token_ids ?? [],
    ignoreEos: r.ignore_eos ?? false,
    topLogprobs: r.logprobs ?? 0,
  };
}

/** A token as text, for `logprobs.tokens` (or `token_id:<id>`, vLLM's `return_tokens_as_token_ids`). */
export function tokenText(tok: TextTokenizer, id: number, asIds: boolean): string {
  return asIds ? `token_id:${id}` : tok.decode([id]);
}

/** The text of tokens [0, t) of a choice, special tokens dropped (what `text` carries). */
export const choiceText = (tok: TextTokenizer, tokens: ArrayLike<number>): string => tok.decode(tokens, { specials: 'skip' });

/** vLLM clamps -inf log-probs (a masked id among the alternatives) to this, JSON having no -Infinity. */
const LOGPROB_FLOOR = -9999;
const finiteLogprob = (lp: number): number => Math.max(lp, LOGPROB_FLOOR);

/**
 * vLLM's `top_logprobs` entry of one token: the sampled token first, then its k most likely
 * alternatives `ids` (so k or k + 1 entries, as vLLM returns them), keyed by their text.
 */
export function completionTopLogprobs(tok: TextTokenizer, token: number, logprob: number, ids: ArrayLike<number>, logprobs: ArrayLike<number>, asIds: boolean): Record<string, number> {
  const out: Record<string, number> = { [tokenText(tok, token, asIds)]: finiteLogprob(logprob) };
  for (let j = 0; j < ids.length; j++) {
    const id = ids[j]!;
    if (id < 0 || id === token) continue;
    const text = tokenText(tok, id, asIds);
    // Two ids can read the same; the key keeps the likelier (the earlier, best first).
    if (!(text in out)) out[text] = finiteLogprob(logprobs[j]!);
  }
  return out;
}

/** The k alternatives of token t of a choice whose alternatives are `top` (k per token). */
export function alternativesAt(top: TopAlternatives, k: number, t: number): { ids: Int32Array; logprobs: Float32Array } {
  return { ids: top.ids.subarray(t * k, (t + 1) * k), logprobs: top.logprobs.subarray(t * k, (t + 1) * k) };
}

function completionLogprobs(tok: TextTokenizer, c: SampledChoice, asIds: boolean, k: number): NonNullable<CompletionChoice['logprobs']> {
  const tokens = Array.from(c.tokens, (id) => tokenText(tok, id, asIds));
  const text_offset: number[] = [];
  let at = 0;
  for (const t of tokens) {
    text_offset.push(at);
    at += t.length;
  }
  const top = c.top;
  const top_logprobs = Array.from(c.tokens, (id, t) => {
    if (!top || k === 0) return null;
    const alt = alternativesAt(top, k, t);
    return completionTopLogprobs(tok, id, c.logprobs[t]!, alt.ids, alt.logprobs, asIds);
  });
  return { text_offset, token_logprobs: Array.from(c.logprobs), tokens, top_logprobs };
}

/**
 * vLLM's `prompt_logprobs` (k 0 to 20): null for the first token, then per prompt token a map
 * from token id to `{logprob, rank, decoded_token}`: the prompt token itself (its rank among all
 * ids) and the k most likely tokens at that position with ranks 1..k, as vLLM's
 * `_make_logprob_dict` builds it (k or k + 1 entries). The keys are integers, so JSON gives them
 * in id order, not vLLM's insertion order: `rank` orders them. Log-probs are the engine's own, at the
 * request's temperature (1 when greedy), as generated tokens' are; -inf is clamped as vLLM does.
 */
export async function promptLogprobs(policy: Policy, tok: TextTokenizer, prompt: Int32Array, temperature: number, k: number): Promise<CompletionChoice['prompt_logprobs']> {
  if (prompt.length < 2) return [null];
  const p = await policy.promptAlternatives(prompt, temperature, k);
  const entry = (id: number, logprob: number, rank: number) => ({ logprob: finiteLogprob(logprob), rank, decoded_token: tok.decode([id]) });
  return [
    null,
    ...Array.from(prompt.subarray(1), (id, t) => {
      const out: Record<string, { logprob: number; rank: number; decoded_token: string }> = { [String(id)]: entry(id, p.logprobs[t]!, p.ranks[t]!) };
      for (let j = 0; j < k; j++) {
        const alt = p.top.ids[t * k + j]!;
        if (alt >= 0 && alt !== id) out[String(alt)] = entry(alt, p.top.logprobs[t * k + j]!, j + 1);
      }
      return out;
    }),
  ];
}

export function completionResponse(r: CompletionRequest, tok: TextTokenizer, prompts: readonly Int32Array[], choices: readonly SampledChoice[], promptLps: ReadonlyArray<CompletionChoice['prompt_logprobs']> | null): CompletionResponse {
  const completionTokens = choices.reduce((a, c) => a + c.tokens.length, 0);
  const promptTokens = prompts.reduce((a, p) => a + p.length, 0);
  return {
    id: requestId('cmpl'),
    object: 'text_completion',
    created: now(),
    model: r.model,
    choices: choices.map((c, index) => ({
      index,
      text: choiceText(tok, c.tokens),
      logprobs: r.logprobs != null ? completionLogprobs(tok, c, r.return_tokens_as_token_ids ?? false, r.logprobs) : null,
      finish_reason: c.finish,
      stop_reason: c.stopReason,
      ...(r.return_token_ids ? { token_ids: Array.from(c.tokens), prompt_token_ids: Array.from(prompts[c.prompt]!) } : {}),
      ...(promptLps ? { prompt_logprobs: promptLps[c.prompt] } : {}),
    })),
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}

/** The chat messages as the tokenizer's prompt (its chat template, or Troupe's turn markers). */
export function chatPrompt(r: ChatCompletionRequest, tok: TextTokenizer): Int32Array {
  const turns: ChatTurn[] = r.messages.map((m) => ({
    role: m.role === 'developer' ? 'system' : m.role,
    text: typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join(''),
  }));
  return tok.encodePrompt(turns);
}

export function chatJob(r: ChatCompletionRequest, prompt: Int32Array): SampleJob {
  return {
    prompts: [prompt],
    n: r.n,
    maxNewTokens: r.max_completion_tokens ?? r.max_tokens ?? null,
    temperature: r.temperature ?? 1,
    topP: r.top_p ?? 1,
    topK: topK(r.top_k),
    seed: r.seed ?? null,
    firstRow: 0,
    stopTokenIds: r.stop_token_ids ?? [],
    ignoreEos: r.ignore_eos ?? false,
    topLogprobs: r.logprobs ? (r.top_logprobs ?? 0) : 0,
  };
}

const chatAlternative = (tok: TextTokenizer, id: number, logprob: number) => {
  const token = tok.decode([id]);
  return { token, logprob: finiteLogprob(logprob), bytes: [...Buffer.from(token, 'utf8')] };
};

/**
 * OpenAI's per-token log-prob entry (UTF-8 bytes of the token's text), with `top_logprobs` the k
 * most likely tokens at that position, best first (OpenAI's: they need not include the sampled one).
 */
export function chatTokenLogprob(tok: TextTokenizer, id: number, logprob: number, alternatives: { ids: ArrayLike<number>; logprobs: ArrayLike<number> } | null = null) {
  const top = alternatives ? Array.from({ length: alternatives.ids.length }, (_, j) => j).filter((j) => alternatives.ids[j]! >= 0) : [];
  return { ...chatAlternative(tok, id, logprob), top_logprobs: top.map((j) => chatAlternative(tok, alternatives!.ids[j]!, alternatives!.logprobs[j]!)) };
}

export function chatResponse(r: ChatCompletionRequest, tok: TextTokenizer, prompt: Int32Array, choices: readonly SampledChoice[]): ChatCompletionResponse {
  const k = r.logprobs ? (r.top_logprobs ?? 0) : 0;
  const completionTokens = choices.reduce((a, c) => a + c.tokens.length, 0);
  return {
    id: requestId('chatcmpl'),
    object: 'chat.completion',
    created: now(),
    model: r.model,
    choices: choices.map((c, index) => ({
      index,
      message: { role: 'assistant', content: choiceText(tok, c.tokens) },
      logprobs: r.logprobs ? { content: Array.from(c.tokens, (id, t) => chatTokenLogprob(tok, id, c.logprobs[t]!, c.top && k > 0 ? alternativesAt(c.top, k, t) : null)) } : null,
      finish_reason: c.finish,
      stop_reason: c.stopReason,
      ...(r.return_token_ids ? { token_ids: Array.from(c.tokens) } : {}),
    })),
    usage: { prompt_tokens: prompt.length, completion_tokens: completionTokens, total_tokens: prompt.length + completionTokens },
    ...(r.return_token_ids ? { prompt_token_ids: Array.from(prompt) } : {}),
  };
}

/**
 * SGLang `/generate`: one output per prompt and choice (`n` rows of each prompt, in order). The
 * batch form's per-prompt sampling params must agree on everything but `sampling_seed`, and its
 * adapters must be one: Troupe's engine samples a request as one batch. Per-row seeds are honoured
 * through Troupe's `troupe_seed` (the batch's seed, rows numbered from `troupe_row_offset`).
 */
export function sglangJob(r: SglangGenerateRequest): SampleJob & { model: string | null } {
  const ids = r.input_ids;
  const prompts = typeof ids[0] === 'number' ? [Int32Array.from(ids as number[])] : (ids as number[][]).map((p) => Int32Array.from(p));
  const list = Array.isArray(r.sampling_params) ? r.sampling_params : null;
  if (list && list.length !== prompts.length) throw new ModelRequestError(`sampling_params: ${list.length} entries for ${prompts.length} prompts`, 'sampling_params');
  const s = list ? list[0]! : (r.sampling_params as Exclude<SglangGenerateRequest['sampling_params'], unknown[]>);
  if (list) {
    const same = (x: (typeof list)[number]) => JSON.stringify({ ...x, sampling_seed: null });
    if (list.some((x) => same(x) !== same(s))) throw new ModelRequestError('sampling_params: the entries of one request must differ in sampling_seed only', 'sampling_params');
    if ((s.n ?? 1) !== 1) throw new ModelRequestError('sampling_params: n must be 1 with one entry per prompt', 'sampling_params');
  }
  const seeds = new Set((list ?? [s]).map((x) => x.sampling_seed ?? null));
  if (r.troupe_seed == null && seeds.size > 1) throw new ModelRequestError('sampling_params: per-prompt sampling_seed values need troupe_seed (the batch seed) on this server', 'sampling_params');
  const paths = r.lora_path == null ? [] : Array.isArray(r.lora_path) ? r.lora_path : [r.lora_path];
  if (new Set(paths).size > 1) throw new ModelRequestError('lora_path: every prompt of one request must use the same adapter', 'lora_path');
  return {
    prompts,
    n: s.n ?? 1,
    maxNewTokens: s.max_new_tokens ?? null,
    temperature: s.temperature ?? 1,
    topP: s.top_p ?? 1,
    topK: topK(s.top_k),
    seed: r.troupe_seed ?? [...seeds][0] ?? null,
    firstRow: r.troupe_row_offset ?? 0,
    stopTokenIds: s.stop_token_ids ?? [],
    ignoreEos: s.ignore_eos ?? false,
    topLogprobs: r.return_logprob ? (r.top_logprobs_num ?? 0) : 0,
    model: paths[0] ?? null,
  };
}

/** SGLang's default max_new_tokens. */
export const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128;

export function sglangOutputs(r: SglangGenerateRequest, tok: TextTokenizer, job: SampleJob, choices: readonly SampledChoice[]): SglangGenerateOutput[] {
  // SGLang expands parallel sampling as `input_ids * n`: all prompts' first samples, then all
  // second samples (io_struct.py `_expand_inputs`); our rows are prompt-major (i·n + k).
  const B = job.prompts.length;
  const order = Array.from({ length: choices.length }, (_, j) => choices[(j % B) * job.n + Math.floor(j / B)]!);
  return order.map((c) => ({
    text: choiceText(tok, c.tokens),
    output_ids: Array.from(c.tokens),
    meta_info: {
      id: randomBytes(16).toString('hex'),
      finish_reason: c.finish === 'stop' ? { type: 'stop', matched: c.tokens.at(-1) ?? null } : { type: 'length', length: c.tokens.length },
      prompt_tokens: job.prompts[c.prompt]!.length,
      completion_tokens: c.tokens.length,
      ...(r.return_logprob ? { output_token_logprobs: Array.from(c.tokens, (id, t): [number, number, null] => [c.logprobs[t]!, id, null]) } : {}),
      ...(r.return_logprob && job.topLogprobs > 0 && c.top
        ? {
            output_top_logprobs: Array.from(c.tokens, (_, t) => {
              const alt = alternativesAt(c.top!, job.topLogprobs, t);
              return Array.from(alt.ids, (id, j): [number, number, null] => [finiteLogprob(alt.logprobs[j]!), id, null]).filter((e) => e[1] >= 0);
            }),
          }
        : {}),
    },
  }));
}

export { COMPLETIONS_DEFAULT_MAX_TOKENS };
