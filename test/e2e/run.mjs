// Runs the end-to-end tests: installs what they need (setup.sh: Chromium, code-server; fast
// when already done), then runs test/e2e/*.e2e.ts with node's test runner through tsx, one
// file at a time (each starts its own VS Code and browser; two at once overload 2 cores).
// Usage: node test/e2e/run.mjs [--skip-setup] [--test-* options for node] [substring filter...]
//   e.g. node test/e2e/run.mjs smoke --test-name-pattern="Quick Open"
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const e2eDir = fileURLToPath(new URL('.', import.meta.url));

const args = process.argv.slice(2);
const skipSetup = args.includes('--skip-setup');
// Other options (--test-name-pattern=…, --test-only) go to node's test runner.
const nodeOptions = args.filter((a) => a.startsWith('--') && a !== '--skip-setup');
const filters = args.filter((a) => !a.startsWith('--'));

const files = readdirSync(e2eDir)
  .filter((name) => name.endsWith('.e2e.ts'))
  .map((name) => relative(root, join(e2eDir, name)))
  .filter((file) => filters.length === 0 || filters.some((f) => file.includes(f)))
  .sort();
if (files.length === 0) {
  console.error(`no e2e test files matched ${filters.join(' ') || '(all)'}`);
  process.exit(1);
}

// Each run starts with an empty artifacts folder, so what is there belongs to this run.
const artifacts = join(e2eDir, 'artifacts');
mkdirSync(artifacts, { recursive: true });
for (const name of readdirSync(artifacts)) {
  if (name !== '.gitkeep') rmSync(join(artifacts, name), { recursive: true, force: true });
}

if (!skipSetup) {
  const setup = spawnSync('bash', [join(e2eDir, 'setup.sh')], { cwd: root, stdio: 'inherit' });
  if (setup.status !== 0) {
    console.error(`test/e2e/setup.sh failed (${setup.status ?? setup.signal}); not running the e2e tests`);
    process.exit(setup.status || 1);
  }
}

// Each file runs on its own; a file that fails is run once more, because a real VS Code in a
// headless browser on a loaded 2-core machine has rare timing failures that say nothing about the
// extension. A retry is never silent: it is announced, the first attempt's artifacts are kept in
// artifacts/attempt-1/, and a file that fails twice fails the run.
const runFile = (file) =>
  spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=1', ...nodeOptions, file], { cwd: root, stdio: 'inherit' }).status ?? 1;

let failed = 0;
const flaky = [];
for (const file of files) {
  if (runFile(file) === 0) continue;
  const kept = join(artifacts, 'attempt-1');
  mkdirSync(kept, { recursive: true });
  for (const name of readdirSync(artifacts)) {
    if (name !== '.gitkeep' && name !== 'attempt-1') renameSync(join(artifacts, name), join(kept, name));
  }
  console.error(`\n*** ${file} failed; running it once more (first attempt's artifacts: ${relative(root, kept)}) ***\n`);
  if (runFile(file) === 0) flaky.push(file);
  else failed++;
}
if (flaky.length > 0) console.error(`\n*** FLAKY: passed only on the second attempt: ${flaky.join(', ')} — see ${relative(root, join(artifacts, 'attempt-1'))} ***`);
process.exit(failed > 0 ? 1 : 0);
