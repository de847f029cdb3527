/**
 * The tokenizer of a Hugging Face model folder: `tokenizer.json` run by `@huggingface/tokenizers`
 * (the Hugging Face tokenizers.js: BPE, WordPiece, Unigram, with their normalizers, pre-tokenizers
 * and decoders), the chat template and special tokens of `tokenizer_config.json` (or
 * `chat_template.jinja`), and the end-of-sequence ids of `generation_config.json`.
 *
 * Ids. `vocabSize` counts the tokenizer's ids (model vocabulary plus added tokens). A model's
 * embedding is often larger: Qwen2.5 has 151936 rows for 151665 tokens, rounded up for matmul
 * shapes. Those padded rows have no token; `unusedIds(modelVocabSize)` lists them and
 * `sampleMask(modelVocabSize)` marks what sampling may draw, so a policy never emits an id that
 * decodes to nothing.
 *
 * Stopping. A chat model ends its turn with the token its template writes after an assistant
 * message (`<|im_end|>` for Qwen, `<|eot_id|>` for Llama 3); `stopTokenIds` is that token plus the
 * generation config's and the tokenizer config's EOS ids, and `encodeResponse` appends it, so a
 * trained response ends the way sampling stops.
 *
 * Safety. `encode` treats special-token text inside plain text as the special token, as
 * transformers does; the chat renderer therefore refuses a message whose content contains a
 * special token's text (`<|im_end|>` in an observation would forge a turn boundary).
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { z } from 'zod';
import { ChatTemplate, type ChatMessage, type ChatRenderOptions, type TemplateSpecialTokens } from './chat-template.ts';
import { parseWithSchema } from './json-file.ts';
import type { ChatTurn, DecodeOptions, PromptOptions } from './tokenizer.ts';

export const HF_TOKENIZER_FILE = 'tokenizer.json';
export const HF_TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';
export const HF_GENERATION_CONFIG_FILE = 'generation_config.json';
/** The model's config.json, whose token ids stand in for a missing generation_config.json. */
export const HF_MODEL_CONFIG_FILE = 'config.json';
/** Newer transformers save the template beside the config instead of inside it. */
export const HF_CHAT_TEMPLATE_FILE = 'chat_template.jinja';

const addedTokenSchema = z.looseObject({
  id: z.int().nonnegative(),
  content: z.string().min(1),
  special: z.boolean().default(false),
});

/**
 * The parts of tokenizer.json read here; the rest is tokenizers.js's business. The vocabulary
 * (BPE and WordPiece: token → id; Unigram: [token, score] pairs, id = index) is only checked to be
 * an object here and walked once in `vocabIds`: a zod record over 150k entries doubled the load
 * time and copied the table.
 */
export const hfTokenizerJsonSchema = z.looseObject({
  model: z.looseObject({
    type: z.string().optional(),
    vocab: z.custom<Readonly<Record<string, unknown>> | readonly unknown[]>((v) => typeof v === 'object' && v !== null, 'must be an object (token -> id) or a list of [token, score] pairs'),
  }),
  added_tokens: z.array(addedTokenSchema).default([]),
});

/** The ids of a model vocabulary; throws naming the first entry that is not a valid id. */
function vocabIds(vocab: Readonly<Record<string, unknown>> | readonly unknown[], source: string): number[] {
  if (Array.isArray(vocab)) return vocab.map((_, i) => i);
  const ids: number[] = [];
  for (const [token, id] of Object.entries(vocab)) {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) throw new Error(`invalid ${source}:\n  model.vocab.${token}: the id must be an integer >= 0, got ${JSON.stringify(id)}`);
    ids.push(id);
  }
  return ids;
}

/** A special token in tokenizer_config.json: a string or an AddedToken object. */
const specialTokenSchema = z.union([z.string(), z.looseObject({ content: z.string() })]).nullish();

export const hfTokenizerConfigSchema = z.looseObject({
  bos_token: specialTokenSchema,
  eos_token: specialTokenSchema,
  pad_token: specialTokenSchema,
  unk_token: specialTokenSchema,
  chat_template: z.union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))]).nullish(),
});
export type HfTokenizerConfig = z.output<typeof hfTokenizerConfigSchema>;

const tokenIdsSchema = z.union([z.int().nonnegative(), z.array(z.int().nonnegative())]).nullish();
export const hfGenerationConfigSchema = z.looseObject({
  bos_token_id: tokenIdsSchema,
  eos_token_id: tokenIdsSchema,
  pad_token_id: tokenIdsSchema,
});

/** The token-id fields transformers copies from config.json when a folder has no generation_config.json. */
const modelConfigTokenIds = ['bos_token_id', 'eos_token_id', 'pad_token_id'] as const;

/**
 * A folder's generation settings: generation_config.json, or, where the folder has none, the
 * token ids its config.json names (transformers' `GenerationConfig.from_model_config` does the
 * same; Llama 3 folders converted without a generation config name their EOS ids only there).
 * Unparsed, with the file it came from; undefined when neither names any.
 */
export async function readGenerationConfig(dir: string): Promise<{ value: unknown; file: string } | undefined> {
  const readJson = async (file: string): Promise<unknown> => {
    const path = join(dir, file);
    if (!(await stat(path).then((s) => s.isFile(), () => false))) return undefined;
    try {
      return JSON.parse(await readFile(path, 'utf8')) as unknown;
    } catch (e) {
      throw new Error(`${path} is not valid JSON: ${(e as Error).message}`, { cause: e });
    }
  };
  const generation = await readJson(HF_GENERATION_CONFIG_FILE);
  if (generation !== undefined) return { value: generation, file: HF_GENERATION_CONFIG_FILE };
  const config = await readJson(HF_MODEL_CONFIG_FILE);
  if (typeof config !== 'object' || config === null) return undefined;
  const picked = Object.fromEntries(modelConfigTokenIds.filter((k) => k in config).map((k) => [k, (config as Record<string, unknown>)[k]]));
  return Object.keys(picked).length > 0 ? { value: picked, file: HF_MODEL_CONFIG_FILE } : undefined;
}

/** The files of a tokenizer, already read (JSON values unparsed: they are validated here). */
export interface HfTokenizerFiles {
  /** tokenizer.json */
  readonly tokenizer: unknown;
  /** tokenizer_config.json (absent: no special-token names, no chat template). */
  readonly config?: unknown;
  /** generation_config.json (or config.json's token ids: `readGenerationConfig`) */
  readonly generationConfig?: unknown;
  /** The file `generationConfig` came from, for errors (default generation_config.json). */
  readonly generationConfigFile?: string;
  /** chat_template.jinja, which takes precedence over the config's template. */
  readonly chatTemplate?: string;
}

/** Chat options that apply to every render unless a call overrides them. */
export interface HfTokenizerOptions {
  /**
   * Qwen3's `enable_thinking` for every prompt this tokenizer renders (the reference's Qwen3 runs
   * set it false: answers come without a reasoning block). Unset: the template's own default.
   */
  readonly enableThinking?: boolean;
}

export interface HfSpecialTokens {
  readonly bos: number | null;
  readonly eos: number | null;
  readonly pad: number | null;
  readonly unk: number | null;
}

const asIds = (v: number | number[] | null | undefined): number[] => (v == null ? [] : Array.isArray(v) ? v : [v]);
const tokenText = (v: z.output<typeof specialTokenSchema>): string | null => (v == null ? null : typeof v === 'string' ? v : v.content);
const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A Hugging Face tokenizer with its chat template. Immutable. */
export class HfTokenizer {
  readonly source: string;
  /** One more than the largest id the tokenizer knows (model vocabulary and added tokens). */
  readonly vocabSize: number;
  readonly specialTokens: HfSpecialTokens;
  /** Ids that end generation: the template's end of turn, then the configs' EOS ids (no repeats). */
  readonly stopTokenIds: readonly number[];
  /** The id `encodeResponse` appends: the template's end of turn, else the first EOS id. */
  readonly stopTokenId: number;
  /** Ids with which finished rows are padded during batched generation (pad, else the stop token). */
  readonly padTokenId: number;
  /** The chat template, or null when the folder has none (a base model). */
  readonly chatTemplate: ChatTemplate | null;
  readonly #tok: Tokenizer;
  readonly #known: Uint8Array; // 1 where an id has a token
  readonly #specialIds: ReadonlySet<number>;
  readonly #specialText: RegExp | null;
  readonly #defaults: HfTokenizerOptions;

  private constructor(files: HfTokenizerFiles, source: string, options: HfTokenizerOptions) {
    this.source = source;
    this.#defaults = options;
    const json = parseWithSchema(hfTokenizerJsonSchema, files.tokenizer, `${source}/${HF_TOKENIZER_FILE}`);
    const config = parseWithSchema(hfTokenizerConfigSchema, files.config ?? {}, `${source}/${HF_TOKENIZER_CONFIG_FILE}`);
    const genFile = files.generationConfigFile ?? HF_GENERATION_CONFIG_FILE;
    const gen = parseWithSchema(hfGenerationConfigSchema, files.generationConfig ?? {}, `${source}/${genFile}`);
    const ids = vocabIds(json.model.vocab, `${source}/${HF_TOKENIZER_FILE}`);
    try {
      this.#tok = new Tokenizer(files.tokenizer as object, (files.config ?? {}) as object);
    } catch (e) {
      throw new Error(`${source}/${HF_TOKENIZER_FILE}: tokenizers.js cannot build this tokenizer: ${(e as Error).message}`, { cause: e });
    }

    for (const t of json.added_tokens) ids.push(t.id);
    this.vocabSize = ids.reduce((m, id) => Math.max(m, id + 1), 0);
    if (this.vocabSize === 0) throw new Error(`${source}/${HF_TOKENIZER_FILE}: the vocabulary is empty`);
    this.#known = new Uint8Array(this.vocabSize);
    for (const id of ids) this.#known[id] = 1;
    const specials = json.added_tokens.filter((t) => t.special);
    this.#specialIds = new Set(specials.map((t) => t.id));
    // Longest first, so '<|im_start|>' is reported rather than a shorter special it contains.
    const texts = [...new Set(specials.map((t) => t.content))].sort((a, b) => b.length - a.length);
    this.#specialText = texts.length > 0 ? new RegExp(texts.map(escapeRegExp).join('|')) : null;

    const idOf = (text: string | null, field: string): number | null => {
      if (text === null) return null;
      const id = this.#tok.token_to_id(text);
      if (id === undefined) throw new Error(`${source}/${HF_TOKENIZER_CONFIG_FILE}: ${field} '${text}' is not a token of ${HF_TOKENIZER_FILE}`);
      return id;
    };
    const names: TemplateSpecialTokens = {
      bos_token: tokenText(config.bos_token),
      eos_token: tokenText(config.eos_token),
      pad_token: tokenText(config.pad_token),
      unk_token: tokenText(config.unk_token),
    };
    const eos = idOf(names.eos_token, 'eos_token');
    const pad = idOf(names.pad_token, 'pad_token') ?? asIds(gen.pad_token_id)[0] ?? null;
    this.specialTokens = {
      bos: idOf(names.bos_token, 'bos_token') ?? asIds(gen.bos_token_id)[0] ?? null,
      eos: eos ?? asIds(gen.eos_token_id)[0] ?? null,
      pad,
      unk: idOf(names.unk_token, 'unk_token'),
    };
    for (const id of [...asIds(gen.eos_token_id), ...asIds(gen.bos_token_id), ...asIds(gen.pad_token_id)]) {
      if (!this.#known[id]) throw new Error(`${source}/${genFile}: token id ${id} is not in ${HF_TOKENIZER_FILE} (ids 0..${this.vocabSize - 1})`);
    }

    const templateText = files.chatTemplate ?? HfTokenizer.#configTemplate(config, source);
    const templateSource = files.chatTemplate !== undefined ? `${source}/${HF_CHAT_TEMPLATE_FILE}` : `${source}/${HF_TOKENIZER_CONFIG_FILE}#chat_template`;
    this.chatTemplate = templateText === null ? null : new ChatTemplate(templateText, names, templateSource);

    const turnEnd = this.#turnEndId();
    const stops = [...(turnEnd === null ? [] : [turnEnd]), ...asIds(gen.eos_token_id), ...(eos === null ? [] : [eos])];
    this.stopTokenIds = [...new Set(stops)];
    const first = this.stopTokenIds[0];
    if (first === undefined) {
      throw new Error(`${source}: no end-of-sequence token: neither ${HF_GENERATION_CONFIG_FILE}#eos_token_id, ${HF_TOKENIZER_CONFIG_FILE}#eos_token nor a chat template names one`);
    }
    this.stopTokenId = first;
    this.padTokenId = pad ?? first;
  }

  /** Builds a tokenizer from already-read files; errors name `source` and the file. */
  static fromFiles(files: HfTokenizerFiles, source = 'tokenizer', options: HfTokenizerOptions = {}): HfTokenizer {
    return new HfTokenizer(files, source, options);
  }

  /** Reads a Hugging Face folder's tokenizer files; only tokenizer.json is required. */
  static async load(dir: string, options: HfTokenizerOptions = {}): Promise<HfTokenizer> {
    const read = async (file: string, required: boolean): Promise<string | undefined> => {
      const path = join(dir, file);
      const s = await stat(path).catch(() => null);
      if (!s?.isFile()) {
        if (required) throw new Error(`${dir}: no ${file} (a Hugging Face tokenizer needs one)`);
        return undefined;
      }
      return readFile(path, 'utf8');
    };
    const json = async (file: string, required: boolean): Promise<unknown> => {
      const text = await read(file, required);
      if (text === undefined) return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch (e) {
        throw new Error(`${join(dir, file)} is not valid JSON: ${(e as Error).message}`, { cause: e });
      }
    };
    const files: { -readonly [K in keyof HfTokenizerFiles]: HfTokenizerFiles[K] } = { tokenizer: await json(HF_TOKENIZER_FILE, true) };
    const config = await json(HF_TOKENIZER_CONFIG_FILE, false);
    if (config !== undefined) files.config = config;
    const generation = await readGenerationConfig(dir);
    if (generation !== undefined) {
      files.generationConfig = generation.value;
      files.generationConfigFile = generation.file;
    }
    const template = await read(HF_CHAT_TEMPLATE_FILE, false);
    if (template !== undefined) files.chatTemplate = template;
    return new HfTokenizer(files, dir, options);
  }

  /** The config's template: a string, or the one named 'default' in a list of named templates. */
  static #configTemplate(config: HfTokenizerConfig, source: string): string | null {
    const t = config.chat_template;
    if (t == null) return null;
    if (typeof t === 'string') return t;
    const named = t.find((x) => x.name === 'default');
    if (named === undefined) throw new Error(`${source}/${HF_TOKENIZER_CONFIG_FILE}: chat_template lists ${t.map((x) => `'${x.name}'`).join(', ')} but no 'default'`);
    return named.template;
  }

  /**
   * The first token the template writes after an assistant's content, when it is a special one.
   * A template that cannot render the probe conversation gives none here; rendering a real
   * conversation reports its error.
   */
  #turnEndId(): number | null {
    let after: string | null;
    try {
      after = this.chatTemplate?.textAfterAssistant() ?? null;
    } catch {
      return null;
    }
    if (after === null || after.length === 0) return null;
    const first = this.encode(after)[0];
    return first !== undefined && this.#specialIds.has(first) ? first : null;
  }

  /** Encodes text (special-token text becomes its token, as in transformers). `addSpecialTokens` runs the post-processor (e.g. a BOS). */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): Int32Array {
    return Int32Array.from(this.#tok.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids);
  }

  /**
   * Decodes ids to text: the exact inverse of `encode` (no `clean_up_tokenization_spaces`, which
   * Llama 3's config sets and which would turn " ," into ","; responses feed parsers). Throws a
   * RangeError naming the position of an id with no token (out of range or a padded row).
   */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const list: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize || !this.#known[id]) {
        throw new RangeError(`${this.source}: token id ${id} at position ${i} has no token (the tokenizer's ids are 0..${this.vocabSize - 1}${id < this.vocabSize ? ', with gaps' : ''})`);
      }
      list.push(id);
    }
    if (list.length === 0) return ''; // tokenizers.js refuses an empty list
    return this.#tok.decode(list, { skip_special_tokens: options.specials === 'skip', clean_up_tokenization_spaces: false });
  }

  /** Whether `id` is a special added token (`<|im_end|>`, `<|begin_of_text|>`, ...). */
  isSpecial(id: number): boolean {
    return this.#specialIds.has(id);
  }

  /** The id of a token's text, or undefined. */
  tokenId(token: string): number | undefined {
    return this.#tok.token_to_id(token);
  }

  /**
   * Ids below the model's vocabulary size that have no token (Qwen2.5: 151665..151935). Throws
   * when the tokenizer has ids the model cannot produce (its embedding is too small).
   */
  unusedIds(modelVocabSize: number): number[] {
    this.#checkModelVocab(modelVocabSize);
    const out: number[] = [];
    for (let id = 0; id < modelVocabSize; id++) if (!this.#known[id]) out.push(id);
    return out;
  }

  /** 1 for ids sampling may draw, 0 for padded rows and gaps; length `modelVocabSize`. */
  sampleMask(modelVocabSize: number): Uint8Array {
    this.#checkModelVocab(modelVocabSize);
    const mask = new Uint8Array(modelVocabSize);
    mask.set(this.#known);
    return mask;
  }

  #checkModelVocab(modelVocabSize: number): void {
    if (!Number.isInteger(modelVocabSize) || modelVocabSize < this.vocabSize) {
      throw new RangeError(`${this.source}: the model's vocabulary (${modelVocabSize}) is smaller than the tokenizer's (${this.vocabSize} ids): token ids ${modelVocabSize}.. have no embedding row`);
    }
  }

  /** Renders a conversation with the chat template; names the message that holds special-token text. */
  renderChat(messages: readonly ChatMessage[], options: ChatRenderOptions = {}): string {
    if (this.chatTemplate === null) throw new Error(`${this.source}: no chat template (${HF_TOKENIZER_CONFIG_FILE} has no chat_template and there is no ${HF_CHAT_TEMPLATE_FILE}); a base model takes plain text`);
    messages.forEach((m, i) => {
      const hit = this.#specialText?.exec(m.content);
      if (hit) throw new Error(`message ${i} (${m.role}) contains the special token '${hit[0]}' as text; it would be read as a turn marker`);
    });
    const enableThinking = options.enableThinking ?? this.#defaults.enableThinking;
    return this.chatTemplate.render(messages, enableThinking === undefined ? options : { ...options, enableThinking });
  }

  /** The rendered conversation as ids (rendered, then encoded without adding specials: the template wrote them). */
  encodeChat(messages: readonly ChatMessage[], options: ChatRenderOptions = {}): Int32Array {
    return this.encode(this.renderChat(messages, options));
  }

  /**
   * The same call shape as `CharTokenizer.encodePrompt`, so callers can take either: system and
   * user turns through the chat template, ending with the assistant's generation prompt. Troupe's
   * char-model roles 'tool' and 'plan' have no meaning to a chat template and are refused.
   */
  encodePrompt(turns: readonly ChatTurn[], options: PromptOptions & Pick<ChatRenderOptions, 'enableThinking'> = {}): Int32Array {
    if ((options.respondAs ?? 'assistant') !== 'assistant') throw new Error(`a chat template answers as 'assistant', not '${options.respondAs}'`);
    const messages = turns.map((t, i): ChatMessage => {
      if (t.role !== 'system' && t.role !== 'user' && t.role !== 'assistant') {
        throw new Error(`turn ${i}: role '${t.role}' has no place in a chat template (system, user, assistant)`);
      }
      return { role: t.role, content: t.text };
    });
    return this.encodeChat(messages, options.enableThinking === undefined ? {} : { enableThinking: options.enableThinking });
  }

  /** A response as the model should produce it: its text, then the stop token. */
  encodeResponse(text: string): Int32Array {
    const body = this.encode(text);
    const out = new Int32Array(body.length + 1);
    out.set(body);
    out[body.length] = this.stopTokenId;
    return out;
  }
}
