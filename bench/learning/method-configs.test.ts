import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { methodConfigPath } from './method-configs.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

test("an entry names its environment's folder, and a suffix names the method's file with that suffix", () => {
  assert.equal(methodConfigPath('math', 'at-grpo').rel, 'configs/math/L2-lora.json');
  assert.equal(methodConfigPath('math-mod-linear', 'at-grpo').rel, 'configs/math/L2-lora-mod-linear.json');
  assert.equal(methodConfigPath('math-mod-linear', 'single').rel, 'configs/math/L0-single-mod-linear.json');
  assert.equal(methodConfigPath('plan-path-7x7', 'grpo').rel, 'configs/plan-path/L2-grpo-7x7.json');
  assert.equal(methodConfigPath('tic-tac-toe', 'ppo').rel, 'configs/tic-tac-toe/L2-lora-ppo.json');
  for (const [entry, variant] of [['math-mod-linear', 'at-grpo'], ['math-mod-linear', 'single'], ['plan-path-7x7', 'at-grpo']] as const) {
    assert.ok(existsSync(join(root, methodConfigPath(entry, variant).rel)), `${entry} ${variant}`);
  }
});

test('an entry of no environment and an unknown method are refused, naming them', () => {
  assert.throws(() => methodConfigPath('maths', 'at-grpo'), /"maths" names no environment's configs/);
  assert.throws(() => methodConfigPath('math', 'sft'), /unknown "sft"/);
});
