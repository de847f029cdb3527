/**
 * fp16 rollout weights off the GPU: a CPU engine (an `auto`, `webgpu` or `cuda` engine that fell
 * back to the CPU; the config itself refuses fp16 with engine.executionProvider "cpu") refuses a
 * fp16 rollout by name, while the same policy's fp32 decoding (validation) works. And the fp16
 * graph's edges: the runtime feeds and fetches what it does for the fp32 graph.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Engine } from '../runtime/engine.ts';
import { buildFusedDecode } from './decode-graph.ts';
import { defaultModelConfig as config } from './default-model.ts';
import { initParameters } from './init.ts';
import { optimizerSchema } from './optimizer.ts';
import { Policy } from './policy.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ executionProvider: 'cpu', threads: 1, log: () => {} });
});
after(async () => {
  await engine.close();
});

test('a CPU engine refuses fp16 rollouts naming rollout.weights and the provider; fp32 decoding still works', async () => {
  const p = await Policy.create(engine, { id: 'fp16-cpu', config, weights: initParameters(config, 1), lora: null, optimizer: optimizerSchema.parse({ lr: 1e-3 }), kl: false, entropy: false, decode: { weights: 'fp16', fusedDecode: true, blockSize: 32 } });
  const o = { maxNewTokens: 4, sampling: { temperature: 0, topP: 1, topK: 0 }, seed: 1, stopTokens: [], padToken: 0 };
  await assert.rejects(p.generate([Int32Array.from([1, 2, 3])], { ...o, rollout: true }), /^Error: rollout\.weights "fp16" needs a GPU execution provider, but the engine runs on cpu \(cpu as configured\)/);
  const g = await p.generate([Int32Array.from([1, 2, 3])], { ...o, rollout: false });
  assert.equal(g.tokens[0]!.length, 4);
});

test('the fp16 graph has the fp32 graph\'s outputs and fed tensors and bakes float16 weights (half the bytes)', () => {
  const baked = initParameters(config, 1);
  const full = buildFusedDecode(config, { weights: 'fp32', lora: null, baked });
  const half = buildFusedDecode(config, { weights: 'fp16', lora: null, baked });
  assert.deepEqual(half.outputs, full.outputs);
  assert.deepEqual(half.tensorInputs, full.tensorInputs);
  const weightBytes = [...baked.values()].reduce((n, t) => n + t.byteLength, 0);
  // The weights dominate both models: fp16 saves about half their bytes.
  assert.ok(full.bytes.length - half.bytes.length > 0.45 * weightBytes, `fp32 ${full.bytes.length} B, fp16 ${half.bytes.length} B, weights ${weightBytes} B in fp32`);
  assert.deepEqual(buildFusedDecode(config, { weights: 'fp16', lora: null, baked }).bytes, half.bytes, 'deterministic emission');
  // The caller's fp32 masters are read, not converted in place.
  assert.deepEqual(baked.get('embed.weight'), initParameters(config, 1).get('embed.weight'));
});
