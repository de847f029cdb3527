import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isExperimentConfigPath, sortConfigPaths } from './config-files.ts';

const repo = fileURLToPath(new URL('../..', import.meta.url));

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

test("every config in the repository's configs/ is one, and its schema is not", () => {
  const files = filesUnder(join(repo, 'configs')).map((f) => relative(repo, f));
  assert.ok(files.length > 5);
  for (const f of files) assert.equal(isExperimentConfigPath(f), !f.endsWith('schema.json'), f);
});

test('configs are JSON under a configs folder or named *.troupe.json', () => {
  const yes = ['/w/configs/plan-path/L2-lora.json', '/w/configs/mine.json', 'C:\\w\\configs\\a\\b.json', '/w/experiments/flagship.troupe.json', 'flagship.troupe.json'];
  const no = ['/w/configs/schema.json', '/w/configs/readme.md', '/w/other/a.json', '/w/node_modules/x/configs/a.json', '/w/.troupe/runs/r1/configs/config.json', '/w/configs.json'];
  for (const p of yes) assert.ok(isExperimentConfigPath(p), p);
  for (const p of no) assert.ok(!isExperimentConfigPath(p), p);
});

test('the active config comes first, the rest by path', () => {
  assert.deepEqual(sortConfigPaths(['configs/b.json', 'configs/c.json', 'configs/a.json'], 'configs/c.json'), ['configs/c.json', 'configs/a.json', 'configs/b.json']);
  assert.deepEqual(sortConfigPaths(['b', 'a'], undefined), ['a', 'b']);
});
