/**
 * The tokenizer of the embedded default model: one token per character, plus special tokens for
 * roles and turns. Character-level keeps the vocabulary (and the embedding) tiny and covers every
 * environment's alphabet; the environments' texts are short.
 *
 * Default vocabulary (112 tokens, a multiple of 16 for friendly matmul shapes):
 *     0  <pad>           padding; batchers rely on id 0
 *     1  <bos>           start of a sequence
 *     2  <eos>           end of a document (pre-training text), not used in chat
 *     3  <unk>           any character outside the vocabulary (one per code point)
 *     4  <|system|>      \
 *     5  <|user|>         |
 *     6  <|assistant|>    |  turn openers, one per role
 *     7  <|tool|>         |
 *     8  <|plan|>        /
 *     9  <|end|>         closes a turn; the stop token of generation
 *    10  '\n'
 *    11..105             printable ASCII ' ' (32) … '~' (126): id = code − 21
 *   106..111  <|reserved_0|> … <|reserved_5|>  room for new specials without resizing checkpoints
 *
 * Chat layout (`encodePrompt`):  <bos> (<|role|> text <|end|>)* <|assistant|>
 * and the response the model writes ends with <|end|>. Text never turns into special tokens: the
 * characters of "<|end|>" typed in a prompt are encoded as characters, so observations cannot
 * forge turn boundaries.
 */
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { parseWithSchema, readJsonFile, writeJsonFile } from './json-file.ts';

/** Roles that have a turn marker. */
export const chatRoles = ['system', 'user', 'assistant', 'tool', 'plan'] as const;
export type ChatRole = (typeof chatRoles)[number];

export const chatTurnSchema = z.object({
  /** Who speaks this turn; selects the `<|role|>` marker. */
  role: z.enum(chatRoles),
  /** The turn's text, encoded character by character. */
  text: z.string(),
});
export type ChatTurn = z.output<typeof chatTurnSchema>;

const roleMarker = (role: ChatRole): string => `<|${role}|>`;
const requiredSpecials = ['<pad>', '<bos>', '<eos>', '<unk>', '<|end|>', ...chatRoles.map(roleMarker)] as const;

export const TOKENIZER_FORMAT = 'troupe-char-tokenizer';
/**
 * The file name in checkpoint and export folders. Not `tokenizer.json`: that name belongs to
 * Hugging Face's tokenizers, and a folder may hold a Hugging Face model beside Troupe files.
 */
export const TOKENIZER_FILE = 'troupe-tokenizer.json';
/** Where folders written before the rename keep it; `loadTokenizer` still reads it. */
export const LEGACY_TOKENIZER_FILE = 'tokenizer.json';

/** The serialised tokenizer: token id = index in `vocab`. */
export const tokenizerSpecSchema = z
  .object({
    format: z.literal(TOKENIZER_FORMAT),
    version: z.literal(1),
    /** Every token's text, indexed by id. Non-special tokens are single characters (code points). */
    vocab: z.array(z.string().min(1)).min(1),
    /** The texts of the special tokens (rendered by name, never produced by `encode`). */
    specials: z.array(z.string()),
  })
  .strict()
  .superRefine((s, ctx) => {
    const ids = new Map<string, number>();
    s.vocab.forEach((t, i) => {
      if (ids.has(t)) ctx.addIssue({ code: 'custom', path: ['vocab', i], message: `token '${t}' also has id ${ids.get(t)}` });
      else ids.set(t, i);
    });
    const specials = new Set(s.specials);
    s.specials.forEach((t, i) => {
      if (!ids.has(t)) ctx.addIssue({ code: 'custom', path: ['specials', i], message: `special token '${t}' is not in vocab` });
    });
    s.vocab.forEach((t, i) => {
      if (!specials.has(t) && [...t].length !== 1) {
        ctx.addIssue({ code: 'custom', path: ['vocab', i], message: `token '${t}' must be a single character or listed in specials` });
      }
    });
    for (const t of requiredSpecials) {
      if (!specials.has(t)) ctx.addIssue({ code: 'custom', path: ['specials'], message: `required special token '${t}' is missing` });
    }
    if (s.vocab[0] !== '<pad>') ctx.addIssue({ code: 'custom', path: ['vocab', 0], message: `id 0 must be '<pad>'` });
  });
export type TokenizerSpec = z.output<typeof tokenizerSpecSchema>;

/** The default vocabulary described in the file comment. */
export function defaultTokenizerSpec(): TokenizerSpec {
  const head = ['<pad>', '<bos>', '<eos>', '<unk>', ...chatRoles.map(roleMarker), '<|end|>'];
  const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
  const reserved = Array.from({ length: 6 }, (_, i) => `<|reserved_${i}|>`);
  return {
    format: TOKENIZER_FORMAT,
    version: 1,
    vocab: [...head, '\n', ...printable, ...reserved],
    specials: [...head, ...reserved],
  };
}

/** Ids of the special tokens every tokenizer has. */
export interface SpecialTokenIds {
  readonly pad: number;
  readonly bos: number;
  readonly eos: number;
  readonly unk: number;
  readonly end: number;
  readonly system: number;
  readonly user: number;
  readonly assistant: number;
  readonly tool: number;
  readonly plan: number;
}

export interface DecodeOptions {
  /** 'name' renders special tokens as their text (`<|end|>`); 'skip' drops them. Default 'name'. */
  specials?: 'name' | 'skip';
}

export interface PromptOptions {
  /** The role whose response follows the prompt. Default 'assistant'. */
  respondAs?: ChatRole;
}

/** A character-level tokenizer over a validated spec. Immutable. */
export class CharTokenizer {
  readonly vocabSize: number;
  readonly specialIds: SpecialTokenIds;
  /** Generation stops when the model emits this id (`<|end|>`). */
  readonly stopTokenId: number;
  /** The same, as the list `HfTokenizer` has (a chat model may have several). */
  readonly stopTokenIds: readonly number[];
  /** What finished rows are padded with during batched generation (`<pad>`). */
  readonly padTokenId: number;
  readonly #spec: TokenizerSpec;
  readonly #text: readonly string[];
  readonly #special: Uint8Array;
  /** ASCII fast path: id per char code < 128, −1 for none. */
  readonly #ascii = new Int32Array(128).fill(-1);
  readonly #chars = new Map<string, number>();

  private constructor(spec: TokenizerSpec) {
    this.#spec = spec;
    this.#text = spec.vocab;
    this.vocabSize = spec.vocab.length;
    this.#special = new Uint8Array(this.vocabSize);
    const specials = new Set(spec.specials);
    const idOf = new Map<string, number>();
    spec.vocab.forEach((t, id) => {
      idOf.set(t, id);
      if (specials.has(t)) this.#special[id] = 1;
      else if (t.length === 1 && t.charCodeAt(0) < 128) this.#ascii[t.charCodeAt(0)] = id;
      else this.#chars.set(t, id);
    });
    // The schema guarantees these exist.
    const id = (t: string): number => idOf.get(t)!;
    this.specialIds = {
      pad: id('<pad>'), bos: id('<bos>'), eos: id('<eos>'), unk: id('<unk>'), end: id('<|end|>'),
      system: id(roleMarker('system')), user: id(roleMarker('user')), assistant: id(roleMarker('assistant')),
      tool: id(roleMarker('tool')), plan: id(roleMarker('plan')),
    };
    this.stopTokenId = this.specialIds.end;
    this.stopTokenIds = [this.stopTokenId];
    this.padTokenId = this.specialIds.pad;
  }

  /** Builds a tokenizer from a spec (e.g. parsed JSON), validating it; errors name `source` and the field. */
  static fromSpec(spec: unknown, source = 'tokenizer spec'): CharTokenizer {
    return new CharTokenizer(parseWithSchema(tokenizerSpecSchema, spec, source));
  }

  /**
   * Ids below the model's vocabulary size that have no token (none when the model was made for
   * this tokenizer), as `HfTokenizer.unusedIds`. Throws when the model cannot produce every id.
   */
  unusedIds(modelVocabSize: number): number[] {
    if (!Number.isInteger(modelVocabSize) || modelVocabSize < this.vocabSize) {
      throw new RangeError(`the model's vocabulary (${modelVocabSize}) is smaller than the character tokenizer's (${this.vocabSize} ids)`);
    }
    return Array.from({ length: modelVocabSize - this.vocabSize }, (_, i) => this.vocabSize + i);
  }

  /** The serialisable spec (a copy). */
  toSpec(): TokenizerSpec {
    return { ...this.#spec, vocab: [...this.#spec.vocab], specials: [...this.#spec.specials] };
  }

  /** Encodes text character by character. Never throws: unknown characters become `<unk>`. */
  encode(text: string): Int32Array {
    const out = new Int32Array(text.length);
    const unk = this.specialIds.unk;
    let n = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 128) {
        const id = this.#ascii[c]!;
        out[n++] = id >= 0 ? id : unk;
        continue;
      }
      // A surrogate pair is one character (one code point), hence at most one <unk>.
      const pair = c >= 0xd800 && c < 0xdc00 && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      const ch = pair ? text.slice(i, i + 2) : text[i]!;
      if (pair) i++;
      out[n++] = this.#chars.get(ch) ?? unk;
    }
    return out.slice(0, n);
  }

  /** Decodes ids to text. Throws a RangeError naming the position of an id outside the vocabulary. */
  decode(ids: ArrayLike<number>, options: DecodeOptions = {}): string {
    const skip = options.specials === 'skip';
    let s = '';
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const t = this.#text[id];
      if (t === undefined || !Number.isInteger(id)) {
        throw new RangeError(`token id ${id} at position ${i} is outside the vocabulary (size ${this.vocabSize})`);
      }
      if (!(skip && this.#special[id])) s += t;
    }
    return s;
  }

  /** Whether `id` is a special token. */
  isSpecial(id: number): boolean {
    return this.#special[id] === 1;
  }

  /** The text of one token (a special token's name, or its character). */
  tokenText(id: number): string {
    const t = this.#text[id];
    if (t === undefined) throw new RangeError(`token id ${id} is outside the vocabulary (size ${this.vocabSize})`);
    return t;
  }

  /** The turn marker id of a role. */
  roleId(role: ChatRole): number {
    const id = this.specialIds[role];
    if (id === undefined) throw new Error(`unknown chat role '${String(role)}' (roles: ${chatRoles.join(', ')})`);
    return id;
  }

  /**
   * Lays out a conversation, ready for the next speaker's response:
   *   <bos> (<|role|> text <|end|>)* <|respondAs|>
   */
  encodePrompt(turns: readonly ChatTurn[], options: PromptOptions = {}): Int32Array {
    const parts: Array<Int32Array | number[]> = [[this.specialIds.bos]];
    turns.forEach((turn, i) => {
      if (!chatRoles.includes(turn.role)) {
        throw new Error(`turn ${i}: unknown chat role '${String(turn.role)}' (roles: ${chatRoles.join(', ')})`);
      }
      parts.push([this.roleId(turn.role)], this.encode(turn.text), [this.specialIds.end]);
    });
    parts.push([this.roleId(options.respondAs ?? 'assistant')]);
    const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  /** A response as the model should produce it: its text followed by the stop token. */
  encodeResponse(text: string): Int32Array {
    const body = this.encode(text);
    const out = new Int32Array(body.length + 1);
    out.set(body);
    out[body.length] = this.stopTokenId;
    return out;
  }
}

/** The tokenizer of the embedded default model. */
export const defaultTokenizer = CharTokenizer.fromSpec(defaultTokenizerSpec(), 'default tokenizer');

/** Writes `troupe-tokenizer.json` into a (checkpoint) folder, atomically. */
export async function saveTokenizer(dir: string, tokenizer: CharTokenizer): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeJsonFile(join(dir, TOKENIZER_FILE), tokenizer.toSpec());
}

const isFile = (path: string): Promise<boolean> => stat(path).then((s) => s.isFile(), () => false);

/**
 * Reads the character tokenizer of a folder: `troupe-tokenizer.json`, or in a folder written
 * before the rename, a `tokenizer.json` in Troupe's format. A Hugging Face `tokenizer.json` is
 * named as such (it is loaded by `HfTokenizer`). Errors name the file and field.
 */
export async function loadTokenizer(dir: string): Promise<CharTokenizer> {
  const path = join(dir, TOKENIZER_FILE);
  if (await isFile(path)) return CharTokenizer.fromSpec(await readJsonFile(path, tokenizerSpecSchema), path);
  const legacy = join(dir, LEGACY_TOKENIZER_FILE);
  if (!(await isFile(legacy))) throw new Error(`${dir}: no ${TOKENIZER_FILE} (nor a ${LEGACY_TOKENIZER_FILE} in Troupe's format from an older folder)`);
  const value = await readJsonFile(legacy, z.unknown());
  if (typeof value === 'object' && value !== null && 'model' in value && !('format' in value)) {
    throw new Error(`${legacy} is a Hugging Face tokenizer (it has a "model" section), not Troupe's character tokenizer (${TOKENIZER_FILE}); load the folder as a Hugging Face model`);
  }
  return CharTokenizer.fromSpec(value, legacy);
}
