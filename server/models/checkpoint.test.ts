import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadCheckpoint, matchTensors, saveCheckpoint, shapeParameters } from './checkpoint.ts';
import { initParameters } from './init.ts';
import { parameterShapes, parseModelConfig } from './model-config.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import { bitsOf, escapeRe, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';

const config = parseModelConfig({ vocabSize: 30, hiddenSize: 8, numLayers: 2, numHeads: 2, intermediateSize: 12 });

test('save then load returns the same config and bit-identical parameters', async () => {
  await withTempDir(async (dir) => {
    const params = initParameters(config, 11);
    await saveCheckpoint(dir, config, params, { metadata: { step: '7' } });
    const loaded = await loadCheckpoint(dir);
    assert.deepEqual(loaded.config, config);
    assert.deepEqual(loaded.metadata, { step: '7' });
    assert.deepEqual([...loaded.params.keys()], [...params.keys()]);
    for (const [name, data] of params) assert.deepEqual(bitsOf(loaded.params.get(name)!), bitsOf(data), name);
    // config.json spells out defaults, so the folder is self-describing.
    const json = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(json['ropeTheta'], 10000);
    assert.equal(json['tieEmbeddings'], true);
  });
});

/** Writes a checkpoint whose weights file holds `tensors` instead of the right ones. */
async function corruptCheckpoint(dir: string, edit: (t: Map<string, { shape: readonly number[]; data: Float32Array }>) => void): Promise<string> {
  await saveCheckpoint(dir, config, initParameters(config, 1));
  const path = join(dir, 'model.safetensors');
  const { tensors } = await readSafetensorsFile(path);
  const editable = new Map<string, { shape: readonly number[]; data: Float32Array }>(tensors);
  edit(editable);
  await writeSafetensorsFile(path, editable);
  return path;
}

test('a missing tensor is named with its expected shape and the file', async () => {
  await withTempDir(async (dir) => {
    const path = await corruptCheckpoint(dir, (t) => t.delete('layers.1.attn.k.weight'));
    await rejectsMessage(loadCheckpoint(dir), new RegExp(`^${escapeRe(path)}: tensors do not match the model config:\n  missing tensor 'layers\\.1\\.attn\\.k\\.weight' \\(expected shape \\[8, 8\\]\\)$`));
  });
});

test('a mis-shaped tensor is named with its actual and expected shape', async () => {
  await withTempDir(async (dir) => {
    const path = await corruptCheckpoint(dir, (t) => t.set('layers.0.mlp.down.weight', { shape: [12, 8], data: new Float32Array(96) }));
    await rejectsMessage(loadCheckpoint(dir), new RegExp(`^${escapeRe(path)}: .*\n  tensor 'layers\\.0\\.mlp\\.down\\.weight' has shape \\[12, 8\\], expected \\[8, 12\\]$`));
  });
});

test('an unexpected tensor is named', async () => {
  await withTempDir(async (dir) => {
    const path = await corruptCheckpoint(dir, (t) => t.set('lm_head.weight', { shape: [30, 8], data: new Float32Array(240) }));
    await rejectsMessage(loadCheckpoint(dir), new RegExp(`^${escapeRe(path)}: .*\n  unexpected tensor 'lm_head\\.weight' \\(shape \\[30, 8\\]\\)$`));
  });
});

test('all problems are listed at once, capped for wholly wrong files', () => {
  const expected = parameterShapes(config);
  const msg = (() => {
    try {
      matchTensors(expected, new Map([['x', { shape: [1], data: new Float32Array(1) }]]), 'f');
    } catch (e) {
      return (e as Error).message;
    }
    return '';
  })();
  assert.match(msg, /missing tensor 'embed\.weight'/);
  assert.match(msg, /… and \d+ more$/);
});

test('a bad config.json names the file and field; a missing folder names the path', async () => {
  await withTempDir(async (dir) => {
    await saveCheckpoint(dir, config, initParameters(config, 1));
    const path = join(dir, 'config.json');
    await writeFile(path, JSON.stringify({ ...config, numHeads: 3 }));
    await rejectsMessage(loadCheckpoint(dir), new RegExp(`^invalid ${escapeRe(path)}:\n  numHeads: numHeads \\(3\\) must divide hiddenSize`));
    await rejectsMessage(loadCheckpoint(join(dir, 'nope')), /cannot read .*nope.config\.json/);
  });
});

test('saving refuses missing, wrongly sized or extra parameters, naming them', async () => {
  const params = initParameters(config, 1);
  params.delete('norm.weight');
  params.set('layers.0.attn.q.weight', new Float32Array(3));
  params.set('bogus', new Float32Array(2));
  await withTempDir(async (dir) => {
    await rejectsMessage(saveCheckpoint(dir, config, params), /parameter 'layers\.0\.attn\.q\.weight' has 3 elements, expected 64 for shape \[8, 8\]\n  missing parameter 'norm\.weight'[^]*unexpected parameter 'bogus'/);
  });
  throwsMessage(() => shapeParameters([['a', [2]]], new Map(), 'src'), /^src: parameters do not match/);
});

test('a checkpoint whose weights were zero-filled after writing fails naming the file', async () => {
  await withTempDir(async (dir) => {
    await saveCheckpoint(dir, config, initParameters(config, 11));
    const path = join(dir, 'model.safetensors');
    const bytes = new Uint8Array(await readFile(path));
    const headerEnd = 8 + Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
    bytes.fill(0, headerEnd);
    await writeFile(path, bytes);
    await rejectsMessage(loadCheckpoint(dir), new RegExp(`^${escapeRe(path)}: checksum mismatch`));
  });
});
