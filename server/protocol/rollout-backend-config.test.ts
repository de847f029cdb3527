/** `rollout.backend`: defaults, field checks and the cross-field rules of an engine fleet. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tinyConfig } from '../../test/fixtures/tiny-config.ts';
import { experimentConfigSchema } from './experiment-config.ts';

const fleet = { kind: 'vllm', urls: ['http://127.0.0.1:8000', 'https://gpu-2.internal:8443/base'] };
const issues = (c: unknown) => {
  const r = experimentConfigSchema.safeParse(c);
  return r.success ? [] : r.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
};

test('in-process by default; a fleet gets its timeout and retries by default', () => {
  assert.deepEqual(experimentConfigSchema.parse(tinyConfig).rollout.backend, { kind: 'in-process' });
  const c = experimentConfigSchema.parse({ ...tinyConfig, warmStart: { enabled: false }, rollout: { backend: fleet } });
  assert.deepEqual(c.rollout.backend, { ...fleet, timeoutMs: 600_000, retries: 3 });
});

test('bad URLs and key variables are refused by field, without the value', () => {
  const bad = issues({ ...tinyConfig, warmStart: { enabled: false }, rollout: { backend: { ...fleet, urls: ['ftp://secret-host'], apiKeyEnv: 'sk-abc def' } } });
  assert.ok(bad.some((i) => i.path === 'rollout.backend.urls.0' || i.path.startsWith('rollout.backend')), JSON.stringify(bad));
  for (const i of bad) assert.ok(!i.message.includes('secret-host') && !i.message.includes('sk-abc'), i.message);
});

test('apiKeyEnv takes engine key names only, so a config cannot send another secret to the hosts it names', () => {
  const withKey = (apiKeyEnv: string) => issues({ ...tinyConfig, warmStart: { enabled: false }, rollout: { backend: { ...fleet, apiKeyEnv } } });
  for (const name of ['VLLM_API_KEY', 'SGLANG_API_KEY', 'TROUPE_ENGINE_KEY', 'TROUPE_FLEET_TOKEN']) assert.deepEqual(withKey(name), [], name);
  for (const name of ['HOME', 'PATH', 'AWS_SECRET_ACCESS_KEY', 'OPENAI_API_KEY', 'GITHUB_TOKEN', 'HF_TOKEN', 'vllm_api_key', 'VLLM_HOST', 'TROUPE_SCHEME']) {
    const bad = withKey(name);
    assert.deepEqual(bad.map((i) => i.path), ['rollout.backend.apiKeyEnv'], name);
    assert.match(bad[0]!.message, /VLLM_API_KEY/);
    assert.ok(!bad[0]!.message.includes(name), bad[0]!.message);
  }
});

test('a fleet needs LoRA policies and no distinct branches; vllm refuses a warm start, sglang takes one', () => {
  const l3 = {
    ...tinyConfig,
    specialization: 'L3',
    models: { a: { preset: 'default' }, b: { preset: 'default' } },
    policies: { tool: { model: 'a' }, plan: { model: 'b' } },
    router: { tool: 'tool', plan: 'plan' },
    algorithm: { ...tinyConfig.algorithm, distinctBranches: true },
    rollout: { backend: fleet },
  };
  const paths = issues(l3).map((i) => i.path);
  assert.ok(paths.includes('policies.tool.lora'), paths.join());
  assert.ok(paths.includes('warmStart.enabled'), paths.join());
  assert.ok(paths.includes('algorithm.distinctBranches'), paths.join());
  assert.deepEqual(issues({ ...tinyConfig, warmStart: { enabled: false }, rollout: { backend: { ...fleet, kind: 'sglang' } } }), []);
  // SGLang replaces the servers' base with /update_weights_from_disk; vLLM has no such route.
  assert.deepEqual(issues({ ...tinyConfig, warmStart: { enabled: true }, rollout: { backend: { ...fleet, kind: 'sglang' } } }), []);
  const vllm = issues({ ...tinyConfig, warmStart: { enabled: true }, rollout: { backend: { ...fleet, kind: 'vllm' } } });
  assert.deepEqual(vllm.map((i) => i.path), ['warmStart.enabled']);
  assert.match(vllm[0]!.message, /update_weights_from_disk/);
});
