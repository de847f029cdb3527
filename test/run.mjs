// Runs the whole suite with node's built-in test runner. Node 20's `--test` does not expand
// globs, so the test files are collected here and passed explicitly; tsx strips the types.
// Usage: node test/run.mjs [substring filter...]
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const roots = ['server', 'extension', 'webview', 'test', 'bench'];
const skipDirs = new Set(['node_modules', 'dist', '.troupe']);

function collect(dir, out) {
  for (const name of readdirSync(dir)) {
    if (skipDirs.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (/\.test\.ts$/.test(name)) out.push(relative(root, path));
  }
  return out;
}

const filters = process.argv.slice(2);
const files = roots
  .flatMap((r) => { try { return collect(join(root, r), []); } catch { return []; } })
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();
if (files.length === 0) {
  console.error(`no test files matched ${filters.join(' ') || '(all)'}`);
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', ...files],
  { cwd: root, stdio: 'inherit' },
);
process.exit(result.status ?? 1);
