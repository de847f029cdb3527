/**
 * GPT-2 (model_type gpt2): config.json conversion with transformers' defaults, the Conv1D/c_attn
 * tensor mapping both ways against the PyTorch-written folder in fixtures/hf/gpt2-f32, named
 * errors, what is refused (fused decode, a gate target), and LoRA adapters in PEFT's GPT-2 layout
 * (checked against PEFT's merge rule, written out in this file). The forward itself is checked
 * against PyTorch in hf-models.ort.test.ts.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { buildFusedDecode } from './decode-graph.ts';
import { parameterCount as memoryParameterCount } from './default-model.ts';
import { loadHfCheckpoint, saveHfCheckpoint } from './hf-checkpoint.ts';
import { oursToGpt2Tensors } from './hf-gpt2.ts';
import { hfConfigToModelConfig, modelConfigToHf } from './hf-names.ts';
import { initParameters } from './init.ts';
import { exportPeftAdapter, importPeftAdapter, initLoraParameters, loraParameterShapes, parseLoraConfig, type LoraConfig } from './lora.ts';
import { parameterCount, parameterShapes, parseModelConfig, type ModelConfig } from './model-config.ts';
import { readSafetensorsFile, writeSafetensorsFile } from './safetensors.ts';
import { bitsOf, rejectsMessage, throwsMessage, withTempDir } from './test-util.ts';
import { fixturePath } from './torch-fixture.ts';

/** microsoft/DialoGPT-medium's config.json (the fields that matter; the hub file has more). */
const dialoGptMedium = {
  activation_function: 'gelu_new', architectures: ['GPT2LMHeadModel'], attn_pdrop: 0.1, bos_token_id: 50256, embd_pdrop: 0.1,
  eos_token_id: 50256, initializer_range: 0.02, layer_norm_epsilon: 1e-5, model_type: 'gpt2', n_ctx: 1024, n_embd: 1024,
  n_head: 16, n_layer: 24, n_positions: 1024, resid_pdrop: 0.1, vocab_size: 50257,
};

test('DialoGPT-medium converts with GPT2Config defaults and has GPT-2 medium\'s 354.8M parameters', () => {
  const c = hfConfigToModelConfig(dialoGptMedium);
  assert.equal(c.architecture, 'gpt2');
  assert.deepEqual(
    [c.hiddenSize, c.numLayers, c.numHeads, c.intermediateSize, c.positionEmbeddings, c.maxSequenceLength, c.rmsNormEps, c.tieEmbeddings, c.attentionBias],
    [1024, 24, 16, 4096, 1024, 1024, 1e-5, true, true],
  );
  // wte + wpe + 24 × (2 LayerNorms, c_attn, c_proj, c_fc, mlp.c_proj, all with biases) + ln_f.
  assert.equal(parameterCount(c), 354_823_168);
  assert.equal(memoryParameterCount(c), 354_823_168, 'the memory estimate counts the same parameters');
  assert.equal(parameterShapes(c).some(([n]) => n.includes('gate')), false);
  assert.deepEqual(hfConfigToModelConfig(modelConfigToHf(c, 'gpt2')), c);
});

test('GPT-2 config errors name the GPT-2 fields', () => {
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, activation_function: 'relu' }), /activation_function: 'relu' is not supported/);
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, scale_attn_by_inverse_layer_idx: true }), /scale_attn_by_inverse_layer_idx/);
  throwsMessage(() => hfConfigToModelConfig({ ...dialoGptMedium, n_head: 24 }), /n_head: numHeads \(24\) must divide hiddenSize/);
  throwsMessage(() => hfConfigToModelConfig(dialoGptMedium, 'cfg', { maxSequenceLength: 2048 }), /n_positions: \(2048\) must be at most positionEmbeddings \(1024\)/);
});

test('the model schema: gpt2 needs its learned positions and biases; RoPE models refuse them', () => {
  const base = { vocabSize: 10, hiddenSize: 8, numLayers: 1, numHeads: 2, intermediateSize: 16, maxSequenceLength: 32 };
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true }), /positionEmbeddings: is required/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 16 }), /maxSequenceLength: \(32\) must be at most positionEmbeddings \(16\)/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', positionEmbeddings: 32 }), /attentionBias: must be true/);
  throwsMessage(() => parseModelConfig({ ...base, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 32, numKvHeads: 1 }), /numKvHeads/);
  throwsMessage(() => parseModelConfig({ ...base, positionEmbeddings: 32 }), /positionEmbeddings: learned position embeddings belong to architecture gpt2/);
  // An odd head dimension is fine without RoPE.
  assert.equal(parseModelConfig({ ...base, hiddenSize: 6, architecture: 'gpt2', attentionBias: true, positionEmbeddings: 32 }).hiddenSize, 6);
});

test('saving writes the Conv1D layout PyTorch wrote: the fixture folder round-trips bit for bit', async () => {
  const src = fixturePath('hf/gpt2-f32');
  const ck = await loadHfCheckpoint(src);
  const { tensors: theirs } = await readSafetensorsFile(join(src, 'model.safetensors'));
  await withTempDir(async (dir) => {
    await saveHfCheckpoint(dir, ck.config, ck.params, { modelType: 'gpt2', sourceConfig: JSON.parse(await readFile(join(src, 'config.json'), 'utf8')) as Record<string, unknown> });
    const { tensors: ours } = await readSafetensorsFile(join(dir, 'model.safetensors'));
    const weights = [...theirs.keys()].filter((n) => !/\.attn\.(bias|masked_bias)$/.test(n)).sort();
    assert.deepEqual([...ours.keys()].sort(), weights);
    for (const n of weights) {
      assert.deepEqual(ours.get(n)!.shape, theirs.get(n)!.shape, n);
      assert.deepEqual(bitsOf(ours.get(n)!.data), bitsOf(theirs.get(n)!.data), n);
    }
    const back = await loadHfCheckpoint(dir);
    assert.deepEqual(back.config, ck.config);
  });
});

test('a GPT2Model checkpoint (no transformer. prefix) loads the same; a mis-shaped c_attn is named', async () => {
  const src = fixturePath('hf/gpt2-f32');
  const ck = await loadHfCheckpoint(src);
  const { tensors } = await readSafetensorsFile(join(src, 'model.safetensors'));
  await withTempDir(async (dir) => {
    await writeFile(join(dir, 'config.json'), await readFile(join(src, 'config.json')));
    const bare = new Map([...tensors].map(([n, t]) => [n.replace(/^transformer\./, ''), t]));
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    const loaded = await loadHfCheckpoint(dir);
    for (const [n, d] of ck.params) assert.deepEqual(bitsOf(loaded.params.get(n)!), bitsOf(d), n);

    const C = ck.config.hiddenSize;
    bare.set('h.1.attn.c_attn.weight', { ...bare.get('h.1.attn.c_attn.weight')!, shape: [3 * C, C] });
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    await rejectsMessage(loadHfCheckpoint(dir), /tensor 'h\.1\.attn\.c_attn\.weight' has shape \[48, 16\], expected \[16, 48\]/);
    bare.delete('h.1.attn.c_attn.weight');
    bare.delete('h.0.mlp.c_fc.weight');
    await writeSafetensorsFile(join(dir, 'model.safetensors'), bare, { format: 'pt' });
    await rejectsMessage(loadHfCheckpoint(dir), /missing tensor 'transformer\.h\.0\.mlp\.c_fc\.weight' \(ours: 'layers\.0\.mlp\.up\.weight', transposed\)/);
    await rejectsMessage(loadHfCheckpoint(dir), /missing tensor 'transformer\.h\.1\.attn\.c_attn\.weight' \(its q part/);
  });
});

test('LoRA on gpt2: the default targets leave out the missing gate; fused decode is refused by name', async () => {
  const config = hfConfigToModelConfig({ ...dialoGptMedium, n_embd: 16, n_head: 2, n_layer: 1, vocab_size: 20, n_positions: 32 });
  const lora = parseLoraConfig({ rank: 2 });
  assert.deepEqual(loraParameterShapes(config, lora).map(([n]) => n.split('.').slice(2, 4).join('.')).filter((_, i) => i % 2 === 0), ['attn.q', 'attn.k', 'attn.v', 'attn.o', 'mlp.up', 'mlp.down']);
  throwsMessage(() => loraParameterShapes(config, parseLoraConfig({ rank: 2, targets: ['gate'] })), /lora\.targets: none of gate is a projection of this gpt2 model/);
  throwsMessage(() => buildFusedDecode(config, { weights: 'fp32', lora: null }), /fused decode graph supports the llama architecture only, not gpt2/);
  assert.equal(initParameters(config, 1).size, parameterShapes(config).length);
});

/** `weights` with each adapted projection merged as we compute it: W [out, in] += (alpha / r)·B·A. */
function mergeOurs(config: ModelConfig, weights: ReadonlyMap<string, Float32Array>, lora: LoraConfig, params: ReadonlyMap<string, Float32Array>): Map<string, { shape: number[]; data: Float32Array }> {
  const shapes = new Map(parameterShapes(config));
  const out = new Map([...weights].map(([n, d]) => [n, { shape: shapes.get(n)!, data: d.slice() }]));
  const scale = (lora.alpha ?? lora.rank) / lora.rank;
  for (const [name, [r, fanIn]] of loraParameterShapes(config, lora).filter(([n]) => n.endsWith('.lora_A'))) {
    const proj = name.slice(0, -'.lora_A'.length);
    const A = params.get(name)!;
    const B = params.get(`${proj}.lora_B`)!;
    const W = out.get(`${proj}.weight`)!.data;
    const fanOut = W.length / fanIn!;
    for (let o = 0; o < fanOut; o++) for (let i = 0; i < fanIn!; i++) for (let k = 0; k < r!; k++) W[o * fanIn! + i]! += scale * B[o * r! + k]! * A[k * fanIn! + i]!;
  }
  return out;
}

/**
 * A PEFT GPT-2 adapter merged into the Hugging Face tensors as PEFT merges it (its documented
 * semantics, written here apart from hf-gpt2.ts): each module `transformer.h.{i}.<m>` that an
 * entry of target_modules names as a dotted suffix gets its Conv1D weight [in, out] += transpose(B·A)
 * (fan_in_fan_out) times lora_alpha / r, both overridden per module by the first rank_pattern /
 * alpha_pattern key that matches the module name (`get_pattern_key`).
 */
function mergePeft(hf: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>, cfg: Record<string, unknown>, tensors: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>): Map<string, { shape: readonly number[]; data: Float32Array }> {
  const out = new Map([...hf].map(([n, t]) => [n, { shape: t.shape, data: t.data.slice() }]));
  const pattern = (p: unknown, module: string, fallback: number): number => {
    for (const [k, v] of Object.entries((p ?? {}) as Record<string, number>)) if (new RegExp(`^(.*\\.)?(${k})$`).test(module)) return v;
    return fallback;
  };
  assert.equal(cfg['fan_in_fan_out'], true);
  for (const [key, A] of tensors) {
    const m = /^base_model\.model\.(transformer\.h\.\d+\.(?:attn|mlp)\.c_[a-z]+)\.lora_A\.weight$/.exec(key);
    if (!m) continue;
    const module = m[1]!;
    assert.ok((cfg['target_modules'] as string[]).some((t) => module.endsWith(`.${t}`)), `target_modules names ${module}`);
    const B = tensors.get(key.replace('lora_A', 'lora_B'))!;
    const r = pattern(cfg['rank_pattern'], module, cfg['r'] as number);
    const scale = pattern(cfg['alpha_pattern'], module, cfg['lora_alpha'] as number) / r;
    assert.equal(A.shape[0], r, `${key}: rank ${r}`);
    const W = out.get(`${module}.weight`)!;
    const [fanIn, fanOut] = W.shape as [number, number];
    assert.deepEqual([A.shape[1], B.shape[0], B.shape[1]], [fanIn, fanOut, r], `${key}: A [r, in], B [out, r]`);
    for (let i = 0; i < fanIn; i++) for (let o = 0; o < fanOut; o++) for (let k = 0; k < r; k++) W.data[i * fanOut + o]! += scale * B.data[o * r + k]! * A.data[k * fanIn + i]!;
  }
  return out;
}

function assertClose(a: ReadonlyMap<string, { data: Float32Array }>, b: ReadonlyMap<string, { data: Float32Array }>, tol: number): void {
  assert.deepEqual([...a.keys()].sort(), [...b.keys()].sort());
  for (const [n, t] of a) t.data.forEach((x, i) => assert.ok(Math.abs(x - b.get(n)!.data[i]!) <= tol, `${n}[${i}]: ${x} vs ${b.get(n)!.data[i]}`));
}

test('PEFT export for gpt2: Conv1D module names, q/k/v as one block-diagonal c_attn adapter, fan_in_fan_out; merged as PEFT merges it, it equals our merge; it loads back unchanged', async () => {
  const config = hfConfigToModelConfig({ ...dialoGptMedium, n_embd: 8, n_head: 2, n_layer: 2, vocab_size: 20, n_positions: 16 });
  const weights = initParameters(config, 4, { std: 0.2 });
  const hf = oursToGpt2Tensors(config, new Map([...weights].map(([n, d]) => [n, { shape: new Map(parameterShapes(config)).get(n)!, data: d }])));
  for (const spec of [{ rank: 2, alpha: 6 }, { rank: 3, alpha: 3, targets: ['q', 'v', 'down'] }, { rank: 2, targets: ['k'] }] as const) {
    const lora = parseLoraConfig(spec);
    const params = initLoraParameters(config, lora, 5);
    // B starts at 0; a trained adapter's is not.
    for (const [n, d] of params) if (n.endsWith('lora_B')) d.forEach((_, i) => (d[i] = Math.sin(i + n.length)));
    await withTempDir(async (dir) => {
      await exportPeftAdapter(dir, config, lora, params, { baseModelNameOrPath: 'microsoft/DialoGPT-medium' });
      const cfg = JSON.parse(await readFile(join(dir, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
      const { tensors } = await readSafetensorsFile(join(dir, 'adapter_model.safetensors'));
      const targets = lora.targets.filter((t) => t !== 'gate');
      const qkv = targets.filter((t) => t === 'q' || t === 'k' || t === 'v').length;
      const modules = [...(qkv > 0 ? ['attn.c_attn'] : []), ...(targets.includes('o') ? ['attn.c_proj'] : []), ...(targets.includes('up') ? ['mlp.c_fc'] : []), ...(targets.includes('down') ? ['mlp.c_proj'] : [])];
      // PEFT's state-dict names for GPT2LMHeadModel (adapter name dropped on save).
      assert.deepEqual([...tensors.keys()].sort(), [0, 1].flatMap((i) => modules.flatMap((m) => ['A', 'B'].map((w) => `base_model.model.transformer.h.${i}.${m}.lora_${w}.weight`))).sort());
      if (qkv > 0) assert.deepEqual(tensors.get('base_model.model.transformer.h.1.attn.c_attn.lora_B.weight')!.shape, [24, qkv * lora.rank]);
      assert.equal(cfg['fan_in_fan_out'], true);
      assert.deepEqual(cfg['rank_pattern'], qkv > 1 ? { c_attn: qkv * lora.rank } : {});
      assert.equal(cfg['base_model_name_or_path'], 'microsoft/DialoGPT-medium');
      assertClose(mergePeft(hf, cfg, tensors), oursToGpt2Tensors(config, mergeOurs(config, weights, lora, params)), 1e-5);
      const back = await importPeftAdapter(dir, config);
      assert.deepEqual({ rank: back.lora.rank, alpha: back.lora.alpha, targets: back.lora.targets }, { rank: lora.rank, alpha: lora.alpha ?? lora.rank, targets });
      for (const [n, d] of params) assert.deepEqual(bitsOf(back.params.get(n)!), bitsOf(d), n);
    });
  }
});

test('PEFT gpt2 adapters trained by PEFT (full c_attn B, per-module ranks and alphas) load as the same merged model; bad ones are refused naming the tensor', async () => {
  const config = hfConfigToModelConfig({ ...dialoGptMedium, n_embd: 8, n_head: 2, n_layer: 2, vocab_size: 20, n_positions: 16 });
  const weights = initParameters(config, 4, { std: 0.2 });
  const hf = oursToGpt2Tensors(config, new Map([...weights].map(([n, d]) => [n, { shape: new Map(parameterShapes(config)).get(n)!, data: d }])));
  const filled = (shape: number[], seed: number) => ({ shape, data: Float32Array.from({ length: shape[0]! * shape[1]! }, (_, i) => Math.cos(seed * 7 + i) / 3) });
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const i of [0, 1]) {
    tensors.set(`base_model.model.transformer.h.${i}.attn.c_attn.lora_A.weight`, filled([4, 8], i));
    tensors.set(`base_model.model.transformer.h.${i}.attn.c_attn.lora_B.weight`, filled([24, 4], i + 10));
    tensors.set(`base_model.model.transformer.h.${i}.mlp.c_fc.lora_A.weight`, filled([2, 8], i + 20));
    tensors.set(`base_model.model.transformer.h.${i}.mlp.c_fc.lora_B.weight`, filled([32, 2], i + 30));
  }
  const cfg = { peft_type: 'LORA', r: 2, lora_alpha: 16, target_modules: ['c_attn', 'c_fc'], fan_in_fan_out: true, bias: 'none', rank_pattern: { c_attn: 4 }, alpha_pattern: {} };
  await withTempDir(async (dir) => {
    await writeFile(join(dir, 'adapter_config.json'), JSON.stringify(cfg));
    await writeSafetensorsFile(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
    const back = await importPeftAdapter(dir, config);
    assert.deepEqual([back.lora.rank, back.lora.alpha, back.lora.targets], [4, 4, ['q', 'k', 'v', 'up']]);
    assertClose(mergePeft(hf, cfg, tensors), oursToGpt2Tensors(config, mergeOurs(config, weights, back.lora, back.params)), 1e-5);

    tensors.delete('base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight');
    await writeSafetensorsFile(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
    await rejectsMessage(importPeftAdapter(dir, config), /missing tensor 'base_model\.model\.transformer\.h\.1\.mlp\.c_fc\.lora_B\.weight'/);
    tensors.set('base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight', filled([32, 3], 1));
    await writeSafetensorsFile(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
    await rejectsMessage(importPeftAdapter(dir, config), /'base_model\.model\.transformer\.h\.1\.mlp\.c_fc\.lora_A\.weight' \/ lora_B have shapes \[2, 8\] \/ \[32, 3\], expected \[2, 8\] \/ \[32, 2\]/);
    tensors.set('base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight', filled([32, 2], 1));
    tensors.set('base_model.model.transformer.h.2.mlp.c_fc.lora_A.weight', filled([2, 8], 1));
    await writeSafetensorsFile(join(dir, 'adapter_model.safetensors'), tensors, { format: 'pt' });
    await rejectsMessage(importPeftAdapter(dir, config), /unexpected tensor 'base_model\.model\.transformer\.h\.2\.mlp\.c_fc\.lora_A\.weight'/);
  });
});
