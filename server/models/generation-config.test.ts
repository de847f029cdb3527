/**
 * End-of-sequence ids of a Hugging Face folder without generation_config.json come from its
 * config.json, as transformers reads them (`GenerationConfig.from_model_config`): a Llama 3
 * folder converted without one names 128001, 128008 and 128009 only there. The folder's
 * description (`troupe models inspect`) and the tokenizer's stop ids, which the engine and the
 * HTTP rollout backend both stop on, agree.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { HfTokenizer } from './hf-tokenizer.ts';
import { describeModelFolder } from './model-folder.ts';
import { packagedTokenizerPath } from './packaged-tokenizers.ts';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The tiny llama fixture with Llama 3's tokenizer and `ids` merged into its config.json. */
function llamaFolder(ids: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'troupe-eos-'));
  dirs.push(dir);
  cpSync(join(import.meta.dirname, 'fixtures', 'hf', 'llama-f32'), dir, { recursive: true });
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, ...ids }));
  cpSync(packagedTokenizerPath('llama3', 'tokenizer.json'), join(dir, 'tokenizer.json'));
  cpSync(packagedTokenizerPath('llama3', 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  return dir;
}

test('without generation_config.json, config.json names the EOS ids', async () => {
  const dir = llamaFolder({ bos_token_id: 128000, eos_token_id: [128001, 128008, 128009] });
  const info = await describeModelFolder(dir);
  assert.deepEqual(info.eosTokenIds, [128001, 128008, 128009]);
  assert.equal(info.bosTokenId, 128000);
  const tok = await HfTokenizer.load(dir);
  for (const id of [128001, 128008, 128009]) assert.ok(tok.stopTokenIds.includes(id), `stops on ${id}: ${tok.stopTokenIds.join(', ')}`);
});

test('generation_config.json, when present, is what counts', async () => {
  const dir = llamaFolder({ eos_token_id: [128001, 128008, 128009] });
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 128001 }));
  assert.deepEqual((await describeModelFolder(dir)).eosTokenIds, [128001]);
  assert.ok(!(await HfTokenizer.load(dir)).stopTokenIds.includes(128008));
});

test("a config.json id the tokenizer lacks is refused naming config.json, not generation_config.json", async () => {
  const dir = llamaFolder({ eos_token_id: 999999 });
  await assert.rejects(HfTokenizer.load(dir), (e: unknown) => e instanceof Error && /config\.json: token id/.test(e.message) && !/generation_config/.test(e.message));
});
