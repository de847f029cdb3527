import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  exportPeftAdapter, importPeftAdapter, initLoraParameters, loadLoraAdapter, loraParameterShapes, loraScale,
  parseLoraConfig, saveLoraAdapter,
} from './lora.ts';
import { parseModelConfig } from './model-config.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import { bitsOf, escapeRe, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';

// C 16, H 4, Hkv 2, D 4, F 24, L 2: every projection has a distinct (in, out).
const model = parseModelConfig({ vocabSize: 40, hiddenSize: 16, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 24 });

test('config defaults: all targets, dropout 0, alpha = rank (scale 1)', () => {
  const c = parseLoraConfig({ rank: 8 });
  assert.deepEqual(c, { rank: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'], dropout: 0 });
  assert.equal(loraScale(c), 1);
  assert.equal(loraScale(parseLoraConfig({ rank: 4, alpha: 16 })), 4);
  // The default array is not shared between parses.
  c.targets.pop();
  assert.equal(parseLoraConfig({ rank: 8 }).targets.length, 7);
});

test('config errors name the field', () => {
  throwsMessage(() => parseLoraConfig({ rank: 0 }, 'cfg'), /^invalid cfg:\n {2}rank: /);
  throwsMessage(() => parseLoraConfig({ rank: 2.5 }), /rank: /);
  throwsMessage(() => parseLoraConfig({ rank: 4, alpha: 0 }), /alpha: /);
  throwsMessage(() => parseLoraConfig({ rank: 4, dropout: 0.1 }), /dropout: /);
  throwsMessage(() => parseLoraConfig({ rank: 4, targets: ['q', 'lm_head'] }), /targets\.1: /);
  throwsMessage(() => parseLoraConfig({ rank: 4, targets: ['q', 'v', 'q'] }), /targets\.2: target 'q' is listed twice/);
  throwsMessage(() => parseLoraConfig({ rank: 4, targets: [] }), /targets: /);
  throwsMessage(() => parseLoraConfig({ rank: 4, scale: 2 }), /\(root\): .*scale/);
});

test('parameter names and shapes: A [r, in], B [out, r], canonical order', () => {
  const shapes = loraParameterShapes(model, parseLoraConfig({ rank: 3, targets: ['down', 'k', 'q'] }));
  assert.deepEqual(shapes, [
    ['layers.0.attn.q.lora_A', [3, 16]], ['layers.0.attn.q.lora_B', [16, 3]],
    ['layers.0.attn.k.lora_A', [3, 16]], ['layers.0.attn.k.lora_B', [8, 3]],
    ['layers.0.mlp.down.lora_A', [3, 24]], ['layers.0.mlp.down.lora_B', [16, 3]],
    ['layers.1.attn.q.lora_A', [3, 16]], ['layers.1.attn.q.lora_B', [16, 3]],
    ['layers.1.attn.k.lora_A', [3, 16]], ['layers.1.attn.k.lora_B', [8, 3]],
    ['layers.1.mlp.down.lora_A', [3, 24]], ['layers.1.mlp.down.lora_B', [16, 3]],
  ]);
});

test('init like PEFT: A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0, deterministic', () => {
  const lora = parseLoraConfig({ rank: 8 });
  const p = initLoraParameters(model, lora, 3);
  assert.deepEqual([...p.keys()], loraParameterShapes(model, lora).map(([n]) => n));
  for (const [name, d] of p) {
    if (name.endsWith('lora_B')) assert.ok(d.every((v) => v === 0), name);
    else {
      const fanIn = name.includes('down') ? 24 : 16;
      const bound = 1 / Math.sqrt(fanIn);
      assert.ok(d.every((v) => Math.abs(v) <= bound), name);
      const std = Math.sqrt(d.reduce((s, v) => s + v * v, 0) / d.length);
      assert.ok(Math.abs(std - bound / Math.sqrt(3)) < 0.35 * bound / Math.sqrt(3), `${name} std ${std}`);
    }
  }
  const again = initLoraParameters(model, lora, 3);
  for (const [n, d] of p) assert.deepEqual(bitsOf(again.get(n)!), bitsOf(d));
  assert.notDeepEqual(initLoraParameters(model, lora, 4).get('layers.0.attn.q.lora_A'), p.get('layers.0.attn.q.lora_A'));
});

/** A trained-looking adapter: B non-zero too, so round trips check every tensor. */
function trained(lora: ReturnType<typeof parseLoraConfig>): Map<string, Float32Array> {
  const p = initLoraParameters(model, lora, 9);
  for (const [name, d] of p) if (name.endsWith('lora_B')) d.forEach((_, i) => (d[i] = Math.sin(i + name.length)));
  return p;
}

test('our layout round-trips bit-exactly and validates shapes', async () => {
  await withTempDir(async (dir) => {
    const lora = parseLoraConfig({ rank: 2, targets: ['v', 'q'] });
    const params = trained(lora);
    await saveLoraAdapter(dir, model, lora, params);
    const cfg = JSON.parse(await readFile(join(dir, 'lora-config.json'), 'utf8')) as unknown;
    assert.deepEqual(cfg, { rank: 2, alpha: 2, targets: ['q', 'v'], dropout: 0 });
    const back = await loadLoraAdapter(dir, model);
    assert.deepEqual(back.lora, cfg);
    for (const [n, d] of params) assert.deepEqual(bitsOf(back.params.get(n)!), bitsOf(d), n);

    const other = parseModelConfig({ ...model, hiddenSize: 32 });
    await rejectsMessage(loadLoraAdapter(dir, other), new RegExp(`^${escapeRe(join(dir, 'lora.safetensors'))}: .*\n  tensor 'layers\\.0\\.attn\\.q\\.lora_A' has shape \\[2, 16\\], expected \\[2, 32\\]`));
  });
});

test('PEFT export writes the right config, keys and shapes, and re-imports equal', async () => {
  await withTempDir(async (dir) => {
    const lora = parseLoraConfig({ rank: 4, alpha: 16 });
    const params = trained(lora);
    await exportPeftAdapter(dir, model, lora, params, { baseModelNameOrPath: 'Qwen/Qwen2.5-0.5B-Instruct' });
    const cfg = JSON.parse(await readFile(join(dir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(cfg, {
      peft_type: 'LORA', task_type: 'CAUSAL_LM', auto_mapping: null, base_model_name_or_path: 'Qwen/Qwen2.5-0.5B-Instruct',
      revision: null, inference_mode: true, r: 4, lora_alpha: 16,
      lora_dropout: 0, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
      bias: 'none', fan_in_fan_out: false, use_rslora: false, use_dora: false, modules_to_save: null, init_lora_weights: true,
      layers_to_transform: null, layers_pattern: null, rank_pattern: {}, alpha_pattern: {}, megatron_config: null,
      megatron_core: 'megatron.core', loftq_config: {}, layer_replication: null,
    });
    // The dataclass fields of peft 0.10's PeftConfig and LoraConfig (src/peft/config.py,
    // src/peft/tuners/lora/config.py): a key outside them makes PeftConfig.from_pretrained warn
    // and drop it on older PEFT, so everything we write must be one of them.
    const peftFields = new Set([
      'peft_type', 'task_type', 'auto_mapping', 'base_model_name_or_path', 'revision', 'inference_mode', 'r', 'target_modules',
      'lora_alpha', 'lora_dropout', 'fan_in_fan_out', 'bias', 'use_rslora', 'modules_to_save', 'init_lora_weights',
      'layers_to_transform', 'layers_pattern', 'rank_pattern', 'alpha_pattern', 'megatron_config', 'megatron_core',
      'loftq_config', 'use_dora', 'layer_replication',
    ]);
    assert.deepEqual(Object.keys(cfg).filter((k) => !peftFields.has(k)), []);
    const { tensors, metadata } = await readSafetensorsFile(join(dir, 'adapter_model.safetensors'));
    assert.deepEqual(metadata, { format: 'pt' });
    assert.equal(tensors.size, 2 * 7 * 2);
    const shapeOf = (k: string): number[] | undefined => tensors.get(k)?.shape;
    assert.deepEqual(shapeOf('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'), [4, 16]);
    assert.deepEqual(shapeOf('base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight'), [8, 4]);
    assert.deepEqual(shapeOf('base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight'), [4, 16]);
    assert.deepEqual(shapeOf('base_model.model.model.layers.1.mlp.gate_proj.lora_B.weight'), [24, 4]);
    assert.deepEqual(shapeOf('base_model.model.model.layers.1.mlp.down_proj.lora_A.weight'), [4, 24]);
    assert.deepEqual(bitsOf(tensors.get('base_model.model.model.layers.1.mlp.up_proj.lora_B.weight')!.data), bitsOf(params.get('layers.1.mlp.up.lora_B')!));

    const back = await importPeftAdapter(dir, model);
    assert.equal(back.baseModelNameOrPath, 'Qwen/Qwen2.5-0.5B-Instruct');
    assert.deepEqual(back.lora, { rank: 4, alpha: 16, targets: lora.targets, dropout: 0 });
    assert.deepEqual([...back.params.keys()], [...params.keys()]);
    for (const [n, d] of params) assert.deepEqual(bitsOf(back.params.get(n)!), bitsOf(d), n);
  });
});

test('PEFT import takes targets from the keys and names bad fields and tensors', async () => {
  await withTempDir(async (dir) => {
    const lora = parseLoraConfig({ rank: 2, targets: ['q', 'v'] });
    await exportPeftAdapter(dir, model, lora, trained(lora));
    const cfgPath = join(dir, 'adapter_config.json');
    const weights = join(dir, 'adapter_model.safetensors');
    const cfg = JSON.parse(await readFile(cfgPath, 'utf8')) as Record<string, unknown>;
    assert.equal(cfg['base_model_name_or_path'], null);
    assert.deepEqual((await importPeftAdapter(dir, model)).lora.targets, ['q', 'v']);

    // PEFT accepts a regex for target_modules; targets then come from the keys alone.
    await writeFile(cfgPath, JSON.stringify({ ...cfg, target_modules: '.*(q|v)_proj', lora_dropout: 0.05 }));
    assert.deepEqual((await importPeftAdapter(dir, model)).lora.targets, ['q', 'v']);

    const withCfg = async (patch: Record<string, unknown>, re: RegExp): Promise<void> => {
      await writeFile(cfgPath, JSON.stringify({ ...cfg, ...patch }));
      await rejectsMessage(importPeftAdapter(dir, model), re, JSON.stringify(patch));
    };
    await withCfg({ use_dora: true }, new RegExp(`^${escapeRe(cfgPath)}: unsupported LoRA adapter:\n {2}use_dora: `));
    await withCfg({ bias: 'lora_only' }, /bias: 'lora_only' is not supported/);
    await withCfg({ peft_type: 'IA3' }, /peft_type: /);
    await withCfg({ r: 0 }, /\n {2}r: /);
    await withCfg({ target_modules: ['q_proj'] }, /target_modules does not list 'v_proj' but .* has tensors for it/);
    await withCfg({ target_modules: ['q_proj', 'v_proj', 'o_proj'] }, /target_modules lists 'o_proj' but .* has no tensors for it/);
    await writeFile(cfgPath, JSON.stringify(cfg));

    const { tensors } = await readSafetensorsFile(weights);
    const withTensors = async (edit: (t: Map<string, { shape: readonly number[]; data: Float32Array }>) => void, re: RegExp): Promise<void> => {
      const copy = new Map<string, { shape: readonly number[]; data: Float32Array }>(tensors);
      edit(copy);
      await writeSafetensorsFile(weights, copy);
      await rejectsMessage(importPeftAdapter(dir, model), re);
    };
    await withTensors((t) => t.delete('base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight'),
      /missing tensor 'base_model\.model\.model\.layers\.1\.self_attn\.v_proj\.lora_B\.weight' \(expected shape \[8, 2\]\)/);
    await withTensors((t) => t.set('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight', { shape: [2, 8], data: new Float32Array(16) }),
      /tensor 'base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight' has shape \[2, 8\], expected \[2, 16\]/);
    await withTensors((t) => t.set('base_model.model.lm_head.lora_A.weight', { shape: [2, 16], data: new Float32Array(32) }),
      /unexpected tensor 'base_model\.model\.lm_head\.lora_A\.weight' \(shape \[2, 16\]\)/);
    await withTensors((t) => t.set('base_model.model.model.layers.0.mlp.q_proj.lora_A.weight', { shape: [2, 16], data: new Float32Array(32) }),
      /unexpected tensor 'base_model\.model\.model\.layers\.0\.mlp\.q_proj\.lora_A\.weight'/);
    await withTensors((t) => {
      t.set('base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight', { shape: [2, 16], data: new Float32Array(32) });
    }, /unexpected tensor 'base_model\.model\.model\.layers\.2\.self_attn\.q_proj\.lora_A\.weight' \(shape \[2, 16\]\)/);
  });
});

test('saving refuses parameters that do not fit the model', async () => {
  await withTempDir(async (dir) => {
    const lora = parseLoraConfig({ rank: 2, targets: ['q'] });
    const params = initLoraParameters(model, lora, 1);
    params.set('layers.0.attn.q.lora_B', new Float32Array(5));
    await rejectsMessage(saveLoraAdapter(dir, model, lora, params), /parameter 'layers\.0\.attn\.q\.lora_B' has 5 elements, expected 32 for shape \[16, 2\]/);
    await rejectsMessage(exportPeftAdapter(dir, model, lora, params), /parameter 'layers\.0\.attn\.q\.lora_B' has 5 elements/);
  });
});
