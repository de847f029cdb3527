/**
 * The tokenizer of a model folder, whichever kind it holds: Troupe's character tokenizer
 * (`troupe-tokenizer.json`, or `tokenizer.json` in Troupe's format in folders written before the
 * rename) or a Hugging Face tokenizer (`tokenizer.json` with its configs). Both satisfy
 * `TextTokenizer`, the calls rollouts, warm start and evaluation make, so they need not know which.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { HF_TOKENIZER_FILE, HfTokenizer } from './hf-tokenizer.ts';
import { readJsonFile } from './json-file.ts';
import { CharTokenizer, loadTokenizer, TOKENIZER_FILE, TOKENIZER_FORMAT, type ChatTurn, type DecodeOptions, type PromptOptions } from './tokenizer.ts';

/** What a policy's caller needs from a tokenizer. */
export interface TextTokenizer {
  /** One more than the largest token id. */
  readonly vocabSize: number;
  /** The id a trained response ends with (`encodeResponse`). */
  readonly stopTokenId: number;
  /** Ids that end generation. */
  readonly stopTokenIds: readonly number[];
  /** Fills finished rows in batched generation. */
  readonly padTokenId: number;
  encode(text: string): Int32Array;
  decode(ids: ArrayLike<number>, options?: DecodeOptions): string;
  /** A conversation laid out for the assistant's response (a chat template, or Troupe's turn markers). */
  encodePrompt(turns: readonly ChatTurn[], options?: PromptOptions): Int32Array;
  /** Response text followed by the stop token. */
  encodeResponse(text: string): Int32Array;
  /** Ids below `modelVocabSize` with no token, never to be sampled; throws when the model's vocabulary is too small. */
  unusedIds(modelVocabSize: number): number[];
}

// Compile-time checks that both tokenizers satisfy the interface.
const charIsText: (t: CharTokenizer) => TextTokenizer = (t) => t;
const hfIsText: (t: HfTokenizer) => TextTokenizer = (t) => t;
void charIsText;
void hfIsText;

export type FolderTokenizer =
  | { readonly kind: 'troupe'; readonly tokenizer: CharTokenizer }
  | { readonly kind: 'hugging-face'; readonly tokenizer: HfTokenizer };

const isFile = (path: string): Promise<boolean> => stat(path).then((s) => s.isFile(), () => false);
const formatProbe = z.looseObject({ format: z.unknown().optional() });

/** Loads the folder's tokenizer, or null when it has none. Errors name the file. */
export async function loadFolderTokenizer(dir: string): Promise<FolderTokenizer | null> {
  if (await isFile(join(dir, TOKENIZER_FILE))) return { kind: 'troupe', tokenizer: await loadTokenizer(dir) };
  const hfPath = join(dir, HF_TOKENIZER_FILE);
  if (!(await isFile(hfPath))) return null;
  // Same file name, two formats: Troupe's older folders wrote their char tokenizer there.
  if ((await readJsonFile(hfPath, formatProbe)).format === TOKENIZER_FORMAT) return { kind: 'troupe', tokenizer: await loadTokenizer(dir) };
  return { kind: 'hugging-face', tokenizer: await HfTokenizer.load(dir) };
}
