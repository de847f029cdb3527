/**
 * The L2 wiring: an experiment's LoRA policies over one model share its frozen base in the
 * engine (one resident copy), and the experiment's micro-batch limits reach the policies.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { initParameters } from '../models/init.ts';
import { parameterShapes } from '../models/model-config.ts';
import { loraShapes } from '../models/transformer-graph.ts';
import { Engine } from '../runtime/engine.ts';
import { createPolicies } from './policies.ts';
import { loadExperiment } from './resolve-experiment.ts';

let engine: Engine;
before(async () => {
  engine = await Engine.start({ threads: 2, log: () => {} });
});
after(async () => {
  await engine.close();
});

const bytesOf = (shapes: ReadonlyArray<readonly [string, readonly number[]]>) => shapes.reduce((n, [, s]) => n + 4 * s.reduce((a, b) => a * b, 1), 0);

test('the flagship L2 team holds one copy of its base for both adapters', async () => {
  const { experiment: exp } = await loadExperiment(fileURLToPath(new URL('../../configs/plan-path/L2-lora.json', import.meta.url)));
  const lora = [...exp.policies].filter(([, p]) => p.lora);
  assert.ok(lora.length >= 2 && new Set(lora.map(([, p]) => p.model)).size === 1, 'the flagship has several LoRA policies on one model');
  const modelId = lora[0]![1].model;
  const config = exp.models.get(modelId)!.config;
  const before = await engine.stats();
  const policies = await createPolicies(engine, { ...exp, training: { ...exp.training, microBatchTokens: 512 } }, new Map([[modelId, initParameters(config, 5)]]));
  assert.equal(engine.sharedUsers(`base:${modelId}`), lora.length);
  // One base, and per policy its adapter with two AdamW moments.
  const adapters = lora.reduce((n, [, p]) => n + 3 * bytesOf(loraShapes(config, p.lora!)), 0);
  assert.equal((await engine.stats()).residentBytes - before.residentBytes, bytesOf(parameterShapes(config)) + adapters);
  for (const p of policies.values()) assert.deepEqual(p.options.microBatch, { sequences: exp.algorithm.microBatch, tokens: 512 });
  for (const p of policies.values()) await p.dispose();
  assert.equal((await engine.stats()).residentBytes, before.residentBytes);
});
