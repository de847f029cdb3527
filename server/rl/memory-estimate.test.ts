// A run whose weights and optimizer state cannot fit this machine is refused when the experiment
// is resolved, before any allocation, naming the fields and the estimate.
import assert from 'node:assert/strict';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { defaultModelConfig, parameterCount } from '../models/default-model.ts';
import { defaultTokenizer } from '../models/tokenizer.ts';
import { ConfigError } from '../protocol/config-errors.ts';
import { parseExperimentConfig } from '../protocol/experiment-config.ts';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { estimateTrainingMemory, loraParameterCount, memoryEstimateIssues } from './memory-estimate.ts';
import { resolveExperiment } from './resolve-experiment.ts';

const models = new Map([['base', { config: defaultModelConfig }]]);

test('full training counts 7 float32 copies of the model, 8 with a KL reference', () => {
  const policies = new Map([['solo', { model: 'base', lora: null }]]);
  const n = parameterCount(defaultModelConfig);
  assert.equal(estimateTrainingMemory(models, policies, 0).bytes, n * 7 * 4);
  assert.equal(estimateTrainingMemory(models, policies, 0.1).bytes, n * 8 * 4);
});

test('LoRA policies share one frozen base and count 7 copies of each adapter', () => {
  const lora = { rank: 4, targets: ['q', 'v'] as Array<'q' | 'v'> };
  const policies = new Map([
    ['a', { model: 'base', lora }],
    ['b', { model: 'base', lora }],
  ]);
  const perAdapter = loraParameterCount(defaultModelConfig, lora);
  // q is [C, C]: A is [r, C] and B [C, r], in every layer; v adds its own, and the count is linear in r.
  const C = defaultModelConfig.hiddenSize;
  assert.ok(perAdapter > defaultModelConfig.numLayers * 4 * 2 * C);
  assert.equal(loraParameterCount(defaultModelConfig, { ...lora, rank: 8 }), 2 * perAdapter);
  const e = estimateTrainingMemory(models, policies, 0);
  assert.equal(e.bytes, (parameterCount(defaultModelConfig) + 2 * 7 * perAdapter) * 4);
});

test('an estimate above the available memory is one issue naming the parts and sizes, no more', () => {
  const policies = new Map([['solo', { model: 'base', lora: null }]]);
  const e = estimateTrainingMemory(models, policies, 0);
  assert.deepEqual(memoryEstimateIssues(e, e.bytes), []);
  const [issue, ...rest] = memoryEstimateIssues(e, e.bytes - 1);
  assert.equal(rest.length, 0);
  assert.deepEqual(issue!.path, ['models', 'base']);
  assert.match(issue!.message, /^weights and optimizer state alone need an estimated [\d.]+ GiB, more than this machine's [\d.]+ GiB of memory \(models\.base: /);
  assert.match(issue!.message, /hiddenSize, numLayers, intermediateSize, vocabSize/);
});

test('resolveExperiment refuses a model within every bound that no machine here can hold', async () => {
  // Each size within the schema's ceilings; together about 10^14 parameters.
  const huge = { vocabSize: defaultTokenizer.vocabSize, hiddenSize: 65_536, numLayers: 1024, numHeads: 512, intermediateSize: 262_144, maxSequenceLength: 64 };
  const c = parseExperimentConfig({ ...tinyConfig, models: { base: { config: huge } } }, 'test config');
  await assert.rejects(resolveExperiment(c, join('/nonexistent', 'experiment.json')), (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.issues.length, 1);
    assert.deepEqual(e.issues[0]!.path, ['models', 'base']);
    assert.match(e.issues[0]!.message, /need an estimated \d+\.\d GiB, more than this machine's/);
    return true;
  });
});

test('resolveExperiment accepts the tiny config (far below this machine)', async () => {
  assert.ok(totalmem() > 256 * 2 ** 20);
  const c = parseExperimentConfig(tinyConfig, 'test config');
  const exp = await resolveExperiment(c, join('/nonexistent', 'experiment.json'));
  assert.equal(exp.policies.size, 2);
});
