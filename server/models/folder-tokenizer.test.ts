import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadFolderTokenizer } from './folder-tokenizer.ts';
import { packagedTokenizerPath } from './packaged-tokenizers.ts';
import { defaultTokenizer, defaultTokenizerSpec, saveTokenizer } from './tokenizer.ts';
import { rejectsMessage, withTempDir } from './test-util.ts';

test('a folder\'s tokenizer: troupe-tokenizer.json, an old folder\'s tokenizer.json in Troupe\'s format, or a Hugging Face tokenizer.json', async () => {
  await withTempDir(async (dir) => {
    assert.equal(await loadFolderTokenizer(dir), null);
    await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(defaultTokenizerSpec()));
    assert.equal((await loadFolderTokenizer(dir))?.kind, 'troupe');
    await copyFile(packagedTokenizerPath('llama3', 'tokenizer.json'), join(dir, 'tokenizer.json'));
    await copyFile(packagedTokenizerPath('llama3', 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
    const hf = await loadFolderTokenizer(dir);
    assert.equal(hf?.kind, 'hugging-face');
    assert.deepEqual([...hf!.tokenizer.encode('Hello world')], [9906, 1917]);
    // Troupe's own file beside a Hugging Face one: each keeps its name, Troupe's is the folder's.
    await saveTokenizer(dir, defaultTokenizer);
    const both = await loadFolderTokenizer(dir);
    assert.equal(both?.kind, 'troupe');
    assert.deepEqual([...both!.tokenizer.encodePrompt([{ role: 'user', text: 'hi' }])], [...defaultTokenizer.encodePrompt([{ role: 'user', text: 'hi' }])]);
    await writeFile(join(dir, 'troupe-tokenizer.json'), '{"format": "troupe-char-tokenizer"}');
    await rejectsMessage(loadFolderTokenizer(dir), /invalid .*troupe-tokenizer.json:\n {2}version: /);
  });
});
